"""Issue 16: the query reads the phrasings people write (each case from the issue), and says how it read them."""

from __future__ import annotations

import pytest

from commmodel.errors import QueryError
from commmodel.query.answer import answer_query
from commmodel.query.parse import parse_query


@pytest.fixture(scope="module")
def catalogues() -> dict:
    from commmodel.io.profiles import list_systems, load_gpus, load_links

    return {"systems": {s.name: s for s in list_systems()}, "links": load_links(), "gpus": load_gpus()}


@pytest.mark.parametrize(("text", "preset"), [
    ("8xH100 llama 70b", "llama3-70b"), ("llama 70b on 64 H100", "llama3-70b"), ("70b llama3 on 64 nodes", "llama3-70b"),
    ("llama 13b on 8 A100", "llama2-13b"), ("llama-3 405B on 16k H100", "llama3-405b"), ("MoE on 64 H100", "mixtral-8x7b"),
    ("mixtral 8x7b on 64 H100", "mixtral-8x7b"), ("gpt 175b on 1024 A100", "gpt3-175b"),
])
def test_family_and_size_pick_the_family_preset(text: str, preset: str) -> None:
    assert parse_query(text).model.preset_key == preset


def test_several_generations_take_the_newest_and_say_which() -> None:
    """"llama 70b": llama2-70b and llama3-70b both exist; the newest is used and the note names the other."""
    parsed = parse_query("llama 70b on 64 H100")
    assert parsed.model.preset_key == "llama3-70b"
    assert any("llama2-70b" in note for note in parsed.notes)


def test_a_family_size_without_a_preset_is_an_error_not_a_gpt_shape() -> None:
    with pytest.raises(QueryError, match="no llama preset of 30B.*llama3-70b"):
        parse_query("llama 30b on 64 H100")


def test_the_planned_model_is_the_llama_shape(catalogues: dict) -> None:
    """Was a GPT shape (60 layers, 152 heads, vocab 51200) while "llama" was in the text."""
    from commmodel.query.answer import QueryOverrides

    document = answer_query(parse_query("llama 70b on 64 H100"), catalogues, QueryOverrides())
    assert document["answer"]["model"].startswith("llama3-70b: ")
    assert "80 layers" in document["answer"]["model"] and "vocab 128256" in document["answer"]["model"]


@pytest.mark.parametrize(("text", "gpus"), [("llama-3 405B on 16k H100", 16384), ("llama3-70b on 2k H100", 2048),
                                            ("llama3-70b on 1,024 GPUs", 1024), ("llama3-70b on 16k GPUs", 16384)])
def test_k_gpu_counts(text: str, gpus: int) -> None:
    parsed = parse_query(text)
    assert parsed.num_gpus == gpus and parsed.model.preset_key.startswith("llama3-")


def test_nodes_times_gpus_per_node(catalogues: dict) -> None:
    from commmodel.query.answer import QueryOverrides

    document = answer_query(parse_query("70b llama3 on 64 nodes"), catalogues, QueryOverrides())
    assert document["answer"]["num_gpus"] == 64 * 8  # 64 nodes x 8 GPUs of the assumed DGX H100


def test_conflicts_name_the_words_not_python_reprs() -> None:
    with pytest.raises(QueryError) as info:
        parse_query("llama3-70b and gpt3-175b on 8 H100")
    assert "llama3-70b, gpt3-175b" in str(info.value) and "Mention(" not in str(info.value)


def test_gradient_accumulation_h800_and_did_you_mean() -> None:
    assert parse_query("llama3-70b on 64 H100 gradient accumulation 8").grad_accum_steps == 8
    assert parse_query("llama3-70b on 64 H100, 8 grad accumulation steps").grad_accum_steps == 8
    assert [g.family for g in parse_query("llama3-70b on 64 H800").gpus] == ["h800"]
    with pytest.raises(QueryError, match=r"'alreduce' \(did you mean all_reduce\?\)"):
        parse_query("alreduce 1GB on 16 H100")


def test_h800_node_has_the_cut_nvlink(catalogues: dict) -> None:
    """H800: H100 compute with NVLink 400 GB/s bidirectional (200 per direction), 8 x NDR per node."""
    from commmodel.query.answer import QueryOverrides

    document = answer_query(parse_query("llama3-8b on 16 H800"), catalogues, QueryOverrides())
    assert "h800" in document["answer"]["system"]
    link = catalogues["links"]["nvlink4-h800"]
    assert link.bw_bytes_per_s.value == pytest.approx(200e9)


def test_more_nics_what_if(catalogues: dict) -> None:
    from commmodel.query.answer import QueryOverrides

    document = answer_query(parse_query("llama3-70b on 64 H100 with 2x more NICs"), catalogues, QueryOverrides())
    labels = [t["label"] for t in document["answer"]["targets"]]
    assert labels == ["dgx-h100", "dgx-h100 with 2x NICs"]
    assert {"field": "nics_per_node", "value": 16} in [{k: a[k] for k in ("field", "value")} for a in document["assumptions"]]


def test_network_what_if_keeps_the_nic_count_and_says_so(catalogues: dict) -> None:
    """"from 100GbE to NDR" on an 8-NIC DGX H100 compares 8 x 100GbE with 8 x NDR."""
    from commmodel.query.answer import QueryOverrides

    document = answer_query(parse_query("llama3-70b on 16 DGX H100, what if I switch from 100GbE to NDR",
                                           tuple(catalogues["systems"])), catalogues,
                            QueryOverrides())
    notes = [a for a in document["assumptions"] if a["field"] == "nics_per_node"]
    assert [a["value"] for a in notes] == [8, 8]
    assert all("keeps the NIC count" in a["reason"] for a in notes)


@pytest.mark.parametrize("text", ["\x01\x02\x03", "\t\x07\x7f", "!!! ???", "\u200b"])
def test_control_characters_only_find_nothing(text: str) -> None:
    with pytest.raises(QueryError, match="found nothing"):
        parse_query(text)


def test_gradient_accumulation_is_pinned_in_the_plan() -> None:
    # "batch 512, gradient accumulation 4" on 64 GPUs: every ranked layout has 512 / (micro-batch x dp) = 4.
    from commmodel.io.profiles import list_systems, load_gpus, load_links
    from commmodel.query.answer import answer_query

    catalogues = {"systems": {s.name: s for s in list_systems()}, "links": load_links(), "gpus": load_gpus()}
    doc = answer_query(parse_query("llama3-8b on 64 H100, batch 512, gradient accumulation 4", tuple(catalogues["systems"])),
                       catalogues)
    layouts = doc["answer"]["best_layouts"]
    assert layouts and all(512 // (r["micro_batch"] * r["dp"]) == 4 and 512 % (r["micro_batch"] * r["dp"]) == 0
                           for r in layouts)


@pytest.mark.parametrize("text,family", [("llama3-8b on 16 MI300X", "mi300x"), ("llama3-70b on 64 B300", "b300"),
                                         ("8 AMD Instinct MI355X, 7B", "mi355x"), ("72 GB300, llama3-70b", "gb300")])
def test_new_gpu_names_are_gpus_not_model_sizes(text: str, family: str) -> None:
    parsed = parse_query(text)
    assert [g.family for g in parsed.gpus] == [family]
    assert parsed.model is None or parsed.model.text.lower() not in ("16 m", "8 m")


def test_issue_14s_own_questions_are_read_and_answered(catalogues: dict) -> None:
    """Issue 14's "Why" asks three questions in these words; each is read whole (no unread word) and answered by the
    library it names: the DDP loss on gloo against NCCL as a what-if, Open MPI's pick for a 4 KB all-reduce on 64 ranks
    (its fixed rule's recursive doubling at that size, tests/test_libraries.py), and an MI300X node under RCCL."""
    lose = answer_query(parse_query("how much do I lose running DDP on gloo instead of NCCL for gpt3-1.3b on 16 H100"),
                        catalogues)["answer"]
    assert lose["kind"] == "compare"
    assert lose["stack"] == "ddp" and [t["library"] for t in lose["targets"]] == ["nccl", "gloo"]
    assert lose["targets"][1]["step_time_s"] > 2 * lose["targets"][0]["step_time_s"]
    pick = answer_query(parse_query("what does Open MPI pick for a 4 KB all-reduce on 64 ranks"), catalogues)["answer"]
    assert (pick["library"], pick["num_ranks"], pick["size_bytes"]) == ("mpi", 64, 4000)
    assert pick["algorithm"] == "recursive_doubling"
    amd = answer_query(parse_query("all-reduce 1GB on an MI300X node under RCCL"), catalogues)["answer"]
    assert (amd["library"], amd["system"], amd["num_ranks"]) == ("rccl", "amd-mi300x", 8)
