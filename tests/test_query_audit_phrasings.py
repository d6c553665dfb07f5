"""Phrasings a query audit found misread (2026-11-27: about 205 questions an infrastructure engineer would ask): each
is read as meant, and a comparison of systems answers what `compare` answers."""

from __future__ import annotations

import pytest

from commmodel.query.answer import QueryOverrides, answer_query
from commmodel.query.parse import parse_query

SYSTEMS = ("dgx-h100", "dgx-a100", "gb200-nvl72", "gb300-nvl72", "hgx-b200", "hgx-b300")


@pytest.fixture(scope="module")
def catalogues() -> dict:
    from commmodel.io.profiles import list_systems, load_gpus, load_links

    return {"systems": {s.name: s for s in list_systems()}, "links": load_links(), "gpus": load_gpus()}


@pytest.mark.parametrize(("text", "seq", "batch"), [
    ("llama3 70b on 64 h100 with 32k sequence length", 32768, None),  # was a global batch of 32000
    ("llama3 70b on 64 h100, 32768 sequence length", 32768, None),
    ("llama3 70b on 64 h100, 4096 sequence length", 4096, None),
    ("llama3 8b 8 h100 32k tokens context", 32768, None),  # was 32K training tokens
    ("llama3 8b on 64 h100, 32k-token sequences", 32768, None),
    ("llama3 8b 64 h100 32k context window", 32768, None),
    ("llama3 8b 64 h100 global batch 1024 sequences of 4096 tokens", 4096, 1024),
    ("llama3 8b 64 h100 batch 1024 sequences", None, 1024),
])
def test_sequence_lengths(text: str, seq: int | None, batch: int | None) -> None:
    parsed = parse_query(text)
    assert (parsed.seq_len, parsed.global_batch, parsed.train_tokens) == (seq, batch, None)


@pytest.mark.parametrize("text", ["llama3 8b 64 h100 1M token batch", "llama3 8b 64 h100 batch of 1M tokens"])
def test_batch_in_tokens_either_order(text: str) -> None:
    assert parse_query(text).batch_tokens == 1e6


@pytest.mark.parametrize("text", ["Llama3 70B, 64 x H100, InfiniBand NDR 400Gb/s", "llama3 70b 64 h100 NDR 400G",
                                  "llama3-70b on 64 H100 with 8x400G NDR", "llama3 70b on 64 h100, 400G NDR"])
def test_a_fabric_and_its_port_rate_are_one_network(text: str) -> None:
    """Was two networks, answered as dgx-h100 against itself."""
    parsed = parse_query(text, SYSTEMS)
    assert [n.link for n in parsed.networks] == ["ib-ndr"] and not parsed.what_if


def test_a_line_rate_after_a_gpu_is_not_its_memory() -> None:
    """"32 a100 400 Gb/s InfiniBand" read an A100 with 400 GB of memory and left "/s" unread."""
    parsed = parse_query("llama3 8b 32 a100 400 Gb/s InfiniBand", SYSTEMS)
    assert parsed.gpus[0].memory_gb is None and [n.link for n in parsed.networks] == ["ib-ndr"]
    assert parse_query("llama3 8b on 16 A100 80GB").gpus[0].memory_gb == 80


@pytest.mark.parametrize(("text", "gpus"), [
    ("eight H100s, llama3 8b", 8), ("sixteen A100 GPUs 7B", 16), ("llama3-8b on a single H100", 1),
    ("two H100 llama3 8b", 2), ("twenty-four H100 llama3 8b", 24),
])
def test_gpu_counts_in_words(text: str, gpus: int) -> None:
    assert parse_query(text, SYSTEMS).num_gpus == gpus


@pytest.mark.parametrize(("text", "system", "gpus", "nodes"), [
    ("GB200 NVL72 racks x4 DeepSeek-V3", "gb200-nvl72", 288, None),
    ("GB300 NVL72, 1 rack, qwen3-235b-a22b", "gb300-nvl72", 72, None),
    ("one GB200 NVL72 rack llama3 70b", "gb200-nvl72", 72, None),
    ("DGX B200 x 8 nodes, llama3 70b", "hgx-b200", None, 8),
    ("hgx b300 x 16 nodes llama3 405b", "hgx-b300", None, 16),
    ("llama3 8b on one DGX H100", "dgx-h100", None, 1),
    # a rack system said by its GPU word and a rack word: "2 GB200 racks", "2 DGX GB200" (a DGX GB200 is a rack)
    ("llama3-70b on 2 DGX GB200 racks", "gb200-nvl72", 144, None),
    ("llama3-70b on 2 racks of GB200", "gb200-nvl72", 144, None),
    ("llama3-70b on 2 GB200 racks", "gb200-nvl72", 144, None),
    ("llama3-70b on 2 DGX GB200s", "gb200-nvl72", 144, None),
    ("llama3-70b on one DGX GB300", "gb300-nvl72", 72, None),
    ("llama3-70b on 1 rack of GB300", "gb300-nvl72", 72, None),
])
def test_racks_and_node_counts(text: str, system: str, gpus: int | None, nodes: int | None) -> None:
    parsed = parse_query(text, SYSTEMS)
    assert [s.name for s in parsed.systems] == [system]
    assert (parsed.num_gpus, parsed.num_nodes) == (gpus, nodes)


def test_dgx_gb200_nodes_stay_a_node_count() -> None:
    """"2 DGX GB200" counts racks; with a node word it stays what it read before: 4 nodes of GB200 GPUs."""
    parsed = parse_query("llama3-70b on 4 DGX GB200 nodes", SYSTEMS)
    assert (parsed.num_gpus, parsed.num_nodes, [g.family for g in parsed.gpus]) == (None, 4, ["gb200"])


@pytest.mark.parametrize(("text", "preset"), [
    ("qwen3 235b on 128 h100", "qwen3-235b-a22b"), ("Qwen3-235B on 256 H100", "qwen3-235b-a22b"),
    ("qwen3 30b on 8 h100", "qwen3-30b-a3b"), ("deepseek 671b on 256 h200", "deepseek-v3"),
    ("meta-llama/Meta-Llama-3-70B on 128 H100", "llama3-70b"), ("mixtral 8x22 on 128 h100", "mixtral-8x22b"),
])
def test_mixtures_of_experts_by_total_size_and_hugging_face_ids(text: str, preset: str) -> None:
    """"Qwen3 235B" was a dense GPT-235B (1217.7 s a step where the preset takes 29.7 s)."""
    assert parse_query(text).model.preset_key == preset


@pytest.mark.parametrize(("text", "params"), [("train a 13 billion parameter model on 64 GPUs", 13e9),
                                              ("7 billion parameter model 8 GPUs", 7e9),
                                              ("13B parameter model on 64 GPUs", 13e9)])
def test_sizes_in_words(text: str, params: float) -> None:
    assert parse_query(text).model.num_params == params


def test_nccl_tests_sizes_for_a_collective() -> None:
    """"256M" in nccl-tests' -b/-e notation is 256 MiB; beside "model" it stays a model size."""
    parsed = parse_query("all_reduce 256M on 8 A100")
    assert parsed.size_bytes == 256 * 2**20 and parsed.model is None
    assert any("powers of 1024" in note for note in parsed.notes)
    parsed = parse_query("all-reduce gradients of a 350M model on 8 A100")
    assert parsed.size_bytes is None and parsed.model.num_params == 350e6


@pytest.mark.parametrize("text", [
    "what MFU should I expect for Llama 3 405B on 16k H100", "llama3 8b on 64 h100 w/ fsdp",
    "how many days for 1.4T tokens llama3 70b on 512 h100", "gradient all-reduce for llama3-8b on 64 H100",
    "pytorch DDP llama3 8b on 16 h100",
])
def test_ordinary_words(text: str) -> None:
    parse_query(text, SYSTEMS)


@pytest.mark.parametrize("text", ["Compare DGX H100 and GB200 NVL72 for llama3-405b on 1152 GPUs",
                                  "gb200-nvl72 vs dgx-h100 for llama3-405b on 1152 GPUs"])
def test_systems_of_different_node_sizes_compare_as_compare_does(catalogues: dict, text: str) -> None:
    """Was an error naming --gpus-per-node 8 (8-GPU node first), or dgx-h100 priced at 4 GPUs a node (NVL72 first).
    Each system now takes its own node size, as `compare -s gb200-nvl72 -s dgx-h100` does."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    rows = {r["label"]: r for r in answer_query(parse_query(text, SYSTEMS), catalogues, QueryOverrides())
            ["answer"]["targets"]}
    result = CliRunner().invoke(app, ["compare", "-m", "llama3-405b", "-n", "1152", "-s", "gb200-nvl72", "-s",
                                      "dgx-h100", "--json"])
    assert result.exit_code == 0, result.output
    for row in json.loads(result.output)["targets"]:
        assert rows[row["label"]]["step_time_s"] == pytest.approx(row["step_time_s"], rel=1e-12)
        assert rows[row["label"]]["best_layout"] == row["best_layout"]


def test_a_collective_compared_across_node_sizes(catalogues: dict) -> None:
    document = answer_query(parse_query("all-reduce 1GB on 64 GPUs dgx-h100 vs gb200-nvl72", SYSTEMS), catalogues,
                            QueryOverrides())
    assert [row["num_nodes"] for row in document["answer"]["targets"]] == [8, 16]


def test_a_faster_network_keeps_at_most_one_nic_per_gpu(catalogues: dict) -> None:
    """"400G RoCE" on A100 nodes: the A100 RoCE node (OCI BM.GPU4.8, 16 × 100G, two NICs per GPU) takes 8 × 400G,
    one per GPU, not 16 × 400G; the assumption says why."""
    document = answer_query(parse_query("is 400G RoCE enough for 7B on 64 A100s?", SYSTEMS), catalogues,
                            QueryOverrides())
    assert document["answer"]["system"] == "oci-bm-gpu4.8+roce-400g:8"
    note = next(a for a in document["assumptions"] if a["field"] == "nics_per_node")
    assert note["value"] == 8 and "one NIC per GPU" in note["reason"]


def test_the_library_is_stated_and_checked_against_the_gpus(catalogues: dict) -> None:
    """"with gloo" nearly doubled the step and the human output never said gloo; "MI300X with nccl" was priced as
    RCCL and labelled nccl, where plan and estimate refuse NCCL on AMD GPUs."""
    from commmodel.errors import CollectiveError

    document = answer_query(parse_query("16 H100, 1B params with gloo", SYSTEMS), catalogues, QueryOverrides())
    assert document["answer"]["library"] == "gloo"
    assert any(a["field"] == "library" and a["value"] == "gloo" for a in document["assumptions"])
    with pytest.raises(CollectiveError, match="NCCL runs on NVIDIA GPUs"):
        answer_query(parse_query("8 GPUs, 1B params on MI300X with nccl", SYSTEMS + ("amd-mi300x",)), catalogues,
                     QueryOverrides())


@pytest.mark.parametrize(("text", "gbps"), [("8 H100 7B over 50 GB/s", 400.0), ("16 H100 7B over 50GBps", 400.0),
                                            ("16 H100 7B over 400 Gb/s", 400.0), ("16 H100 7B over 400 gbps", 400.0),
                                            ("16 H100 7B, 12.5 GB/s ethernet", 100.0)])
def test_a_rate_in_bytes_per_second_is_eight_times_the_bits(text: str, gbps: float) -> None:
    """"over 400 GB/s" was read as a 400 Gb/s NIC (8 times too slow) and "50 GB/s" as a 50 Gb/s one."""
    parsed = parse_query(text, SYSTEMS)
    assert [n.rate_gbps for n in parsed.networks] == [gbps]
    assert any("bytes per second" in note for note in parsed.notes) == ("B/s" in text or "GBps" in text)


def test_a_bytes_rate_no_nic_runs_at_names_the_conversion() -> None:
    from commmodel.errors import QueryError

    with pytest.raises(QueryError, match=r"'400 GB/s' is bytes per second, 3200 Gb/s, .* say e.g. '8x 400 Gb/s'"):
        parse_query("8 H100 7B over 400 GB/s", SYSTEMS)


def test_a_system_flag_that_replaces_the_texts_hardware_says_so(catalogues: dict) -> None:
    """"8 H100 7B" with --system dgx-a100 was answered on the A100s without a word about the H100s."""
    pinned = catalogues["systems"]["dgx-a100"]
    out = answer_query(parse_query("8 H100 7B over NDR", SYSTEMS), catalogues, QueryOverrides(system=pinned))
    said = [a for a in out["assumptions"] if a["field"] == "system"]
    assert said and said[0]["reason"] == "--system dgx-a100 replaces what the text names (H100, ib-ndr)"
    alone = answer_query(parse_query("8 GPUs 7B", SYSTEMS), catalogues, QueryOverrides(system=pinned))
    assert not [a for a in alone["assumptions"] if a["field"] == "system"]


@pytest.mark.parametrize(("text", "size"), [("all_reduce 8B on 8 H100", 8.0), ("all-gather of 64 B on 8 H100", 64.0),
                                            ("all_reduce 8B params on 8 H100", None),
                                            ("all-reduce for an 8B model on 8 H100", None)])
def test_bytes_right_after_a_collective_are_a_size(text: str, size: float | None) -> None:
    """"all_reduce 8B" priced the gradients of an 8B-parameter model (16 GB) for an 8-byte all-reduce."""
    parsed = parse_query(text, SYSTEMS)
    assert parsed.size_bytes == size
    assert (parsed.model is None) == (size is not None)
