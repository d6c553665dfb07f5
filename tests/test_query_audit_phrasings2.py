"""The second query audit (2026-11-27, 403 new phrasings): each phrasing it found silently misread is read as meant
now, or refused in one line where the text contradicts itself."""

from __future__ import annotations

import pytest

from commmodel.errors import QueryError
from commmodel.query.answer import answer_query
from commmodel.query.parse import parse_query

SYSTEMS = ("dgx-h100", "dgx-a100", "gb200-nvl72", "gb300-nvl72", "hgx-b200", "hgx-b300")


@pytest.fixture(scope="module")
def catalogues() -> dict:
    from commmodel.io.profiles import list_systems, load_gpus, load_links

    return {"systems": {s.name: s for s in list_systems()}, "links": load_links(), "gpus": load_gpus()}


@pytest.mark.parametrize("text", ["llama3 8b 64 h100 4M tokens per step", "llama3 70b 64 h100 4M tokens/step",
                                  "llama3 70b 64 h100 4M tokens per batch", "llama3 70b 64 h100 gbs 4M tokens",
                                  "llama3 8b 64 h100 4M tokens per iteration"])
def test_tokens_per_step_are_a_batch_not_a_training_run(text: str) -> None:
    """These were read as 4M training tokens ("4M tokens take 49 s"), the batch left at its default."""
    parsed = parse_query(text)
    assert (parsed.batch_tokens, parsed.train_tokens) == (4e6, None)


@pytest.mark.parametrize(("text", "seq"), [("llama3 70b on 64 H100 at 16k", 16384), ("llama3 70b on 64 h100 at 4k", 4096),
                                           ("llama3 70b on 64 h100 with sequences of 8k", 8192)])
def test_a_bare_k_length_after_at_is_a_sequence_length(text: str, seq: int) -> None:
    """"at 16k" was read as a second model of 16K parameters ("the query gives 2 different models")."""
    parsed = parse_query(text)
    assert parsed.seq_len == seq and parsed.train_tokens is None


@pytest.mark.parametrize(("text", "preset"), [("DeepSeek V3 671B on 1024 H100", "deepseek-v3"),
                                              ("deepseek-v3 (671B) on 1024 H100", "deepseek-v3"),
                                              ("Llama 4 Maverick 400B on 256 H100", "llama4-maverick"),
                                              ("mixtral 8x22b 141B on 128 H100", "mixtral-8x22b")])
def test_a_preset_with_its_own_size_restated_is_that_preset(text: str, preset: str, catalogues: dict) -> None:
    """A named MoE preset plus its total size became a dense GPT of that size (a 671B dense model)."""
    assert parse_query(text).model.preset_key == preset
    with pytest.raises(QueryError, match="deepseek-v3 has 671.0B parameters, not 1T"):
        parse_query("deepseek-v3 1T on 1024 H100")


@pytest.mark.parametrize(("text", "gpus"), [("llama3 8b on a GB200 NVL72", 72), ("llama3 8b on one GB200 NVL72", 72),
                                            ("llama3 8b on 2 GB200 NVL72", 144), ("llama3 8b on 144 GB200 NVL72", 144),
                                            ("llama3 8b on GB200 NVL72", 72)])
def test_an_nvl72_counts_racks_not_trays(text: str, gpus: int, catalogues: dict) -> None:
    """Without the word "rack" an NVL72 was one 4-GPU tray ("a GB200 NVL72") or "2 GB200 NVL72" two GPUs."""
    assert answer_query(parse_query(text, SYSTEMS), catalogues)["answer"]["num_gpus"] == gpus


def test_a_nic_count_per_node_is_applied(catalogues: dict) -> None:
    """"with 1 NIC per node" was parsed and dropped: the answer was the 8-NIC node's."""
    one = answer_query(parse_query("all-reduce 1GB on 16 H100 with 1 NIC per node", SYSTEMS), catalogues)["answer"]
    eight = answer_query(parse_query("all-reduce 1GB on 16 H100", SYSTEMS), catalogues)["answer"]
    assert one["system"].endswith("ib-ndr:1") and one["time_s"] > 3 * eight["time_s"]


def test_a_gpu_that_contradicts_the_named_system_is_refused(catalogues: dict) -> None:
    """"16 H100 on dgx-a100" was priced on the A100s without a word."""
    with pytest.raises(QueryError, match="names H100 GPUs and dgx-a100"):
        answer_query(parse_query("llama3 8b on 16 H100 on dgx-a100", SYSTEMS), catalogues)


def test_two_gpu_counts_point_at_the_scaling_figure() -> None:
    """"64 H100 vs 32 B200" was refused with "give one" alone; the refusal now names the command that compares
    GPU counts."""
    with pytest.raises(QueryError, match=r"plot scaling -m MODEL -s SYSTEM --min-gpus 32 --max-gpus 64"):
        parse_query("64 H100 vs 32 B200 for llama3 70b", SYSTEMS)
