"""Resolving and answering parsed queries: which system, GPU count, model and batch are used, what is
listed as assumed, and that nothing but a clean error ever escapes."""

from __future__ import annotations

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.errors import CommModelError, QueryError
from commmodel.io.profiles import list_systems, load_gpus, load_links
from commmodel.query.answer import QueryOverrides, answer_query
from commmodel.query.parse import parse_query


@pytest.fixture(scope="module")
def catalogues():
    return {"systems": {s.name: s for s in list_systems()}, "links": load_links(), "gpus": load_gpus()}


def ask(catalogues, text, **overrides):
    parsed = parse_query(text, tuple(catalogues["systems"]))
    return answer_query(parsed, catalogues, QueryOverrides(**overrides))


def fields(doc):
    return {a["field"]: a["value"] for a in doc["assumptions"]}


@pytest.mark.parametrize("text,system", [
    ("all-reduce 1GB on 16 A100 with HDR", "dgx-a100"),                  # A100 80GB + HDR: the DGX A100
    ("all-reduce 1GB on 16 A100 40GB with HDR", "azure-nd-a100-v4"),     # the 40 GB A100 node on HDR
    ("all-reduce 1GB on 16 A100 40GB with EFA", "aws-p4d"),
    ("all-reduce 1GB on 16 H100 with EFA v2", "aws-p5"),
    ("all-reduce 1GB on 16 H100 over 400GbE", "eth-8x-h100-400g"),
    ("all-reduce 1GB on 16 H100 with tcpxo", "gcp-a3-mega"),
    ("all-reduce 1GB on 16 H200 with NDR", "hgx-h200"),
    ("all-reduce 1GB on 16 GPUs of a DGX A100", "dgx-a100"),
    ("all-reduce 1GB on 8 H100", "dgx-h100"),                            # reference node when nothing else says
])
def test_system_choice(catalogues, text, system):
    assert ask(catalogues, text)["answer"]["system"] == system


def test_network_family_without_speed_follows_the_gpu_generation(catalogues):
    doc = ask(catalogues, "all-reduce 1GB on 16 A100 over RoCE")
    assert doc["answer"]["system"].endswith("+roce-200g:8") or doc["answer"]["system"] == "oci-bm-gpu4.8"
    doc = ask(catalogues, "all-reduce 1GB on 16 H100 with infiniband")
    assert doc["answer"]["system"] == "dgx-h100"  # its own network is InfiniBand: kept
    doc = ask(catalogues, "all-reduce 1GB on 16 A100 with 100 Gbps")
    assert doc["answer"]["system"] == "dgx-a100+ib-edr:8"  # a bare speed in the node's own fabric
    assert fields(doc)["network"] == "ib-edr"


def test_swapped_network_keeps_the_node_nic_count_unless_told(catalogues):
    # No A100 node ships with NDR: the InfiniBand A100 node (DGX A100, 8 HDR NICs) gets 8 NDR NICs.
    doc = ask(catalogues, "all-reduce 1GB on 16 A100 with NDR")
    assert doc["answer"]["system"] == "dgx-a100+ib-ndr:8"
    assert fields(doc)["nics_per_node"] == 8
    doc = ask(catalogues, "all-reduce 1GB on 16 A100 with 1x NDR")
    assert doc["answer"]["system"] == "dgx-a100+ib-ndr:1"
    assert "nics_per_node" not in fields(doc)
    # An Ethernet speed picks the Ethernet A100 node and keeps its single NIC.
    doc = ask(catalogues, "all-reduce 1GB on 16 A100 over 400GbE")
    assert doc["answer"]["system"] == "eth-8x-a100-100g+eth-400g:1"


def test_gpu_counts_from_nodes_and_defaults(catalogues):
    doc = ask(catalogues, "all-reduce 1GB across 4 nodes of 4 H100")
    assert doc["answer"]["num_ranks"] == 16 and doc["answer"]["num_nodes"] == 4
    doc = ask(catalogues, "all-reduce 1GB with NDR")
    assert doc["answer"]["num_ranks"] == 16 and fields(doc)["num_gpus"] == 16  # two nodes: the network matters
    doc = ask(catalogues, "all-reduce 1GB on H100")
    assert doc["answer"]["num_ranks"] == 8 and fields(doc)["num_gpus"] == 8
    with pytest.raises(QueryError, match="do not split evenly"):
        ask(catalogues, "all-reduce 1GB on 12 GPUs across 5 nodes")


def test_collective_size_defaults(catalogues):
    doc = ask(catalogues, "all-gather on 8 H100")
    assert doc["answer"]["size_bytes"] == 2**30 and fields(doc)["size_bytes"] == 2**30
    doc = ask(catalogues, "all-reduce of gpt3-1.3b on 8 H100")
    assert doc["answer"]["size_bytes"] == pytest.approx(doc_params(doc) * 2)


def doc_params(doc) -> float:
    from commmodel.workload.presets import get_model

    return get_model("gpt3-1.3b").num_params


def test_plan_assumptions_and_overrides(catalogues):
    doc = ask(catalogues, "gpt3-1.3b on 16 GPUs")
    assumed = fields(doc)
    assert assumed["gpu_type"] == "H100" and assumed["seq_len"] == 2048 and assumed["dtype"] == "bf16"
    assert doc["answer"]["global_batch"] == assumed["global_batch"] == 512
    doc = ask(catalogues, "gpt3-1.3b on 16 GPUs", global_batch=128, seq_len=1024)
    assert doc["answer"]["global_batch"] == 128 and doc["answer"]["seq_len"] == 1024
    assert "global_batch" not in fields(doc) and "seq_len" not in fields(doc)
    doc = ask(catalogues, "gpt3-1.3b on 16 GPUs, batch of 1M tokens")
    assert doc["answer"]["global_batch"] == 488  # 1e6 / 2048 = 488.3 -> whole multiple of the 2 nodes


def test_plan_pins_from_the_text(catalogues):
    doc = ask(catalogues, "gpt3-1.3b on 16 H100, tp 2, pp 2, zero 1, full recompute, batch 256")
    assert {(x["tp"], x["pp"], x["zero"], x["recompute"]) for x in doc["answer"]["best_layouts"]} == {(2, 2, 1, "full")}
    # the pin, not the ranking, sets the answer: unpinned, the same question ranks other degrees too
    assert {x["ep"] for x in ask(catalogues, "mixtral-8x7b on 64 H100, batch 256")["answer"]["best_layouts"]} != {8}
    unpinned = ask(catalogues, "llama3-8b on 64 H100, seq 65536, batch 64")["answer"]["best_layouts"]
    assert {x["cp"] for x in unpinned} != {4}
    doc = ask(catalogues, "mixtral-8x7b on 64 H100, ep 8, batch 256")
    assert {x["ep"] for x in doc["answer"]["best_layouts"]} == {8}
    doc = ask(catalogues, "llama3-8b on 64 H100, seq 65536, cp 4, batch 64")
    assert {x["cp"] for x in doc["answer"]["best_layouts"]} == {4}


def test_what_if_orders_the_baseline(catalogues):
    doc = ask(catalogues, "what if we use H100 instead of A100 for gpt3-1.3b on 16 GPUs, batch 256")
    assert [t["label"] for t in doc["answer"]["targets"]] == ["dgx-a100", "dgx-h100"]
    doc = ask(catalogues, "what if we use NDR on 16 A100 for gpt3-1.3b, batch 256")
    labels = [t["label"] for t in doc["answer"]["targets"]]
    assert labels == ["dgx-a100", "dgx-a100 with ib-ndr"]
    assert doc["answer"]["summary"] and "→" in doc["answer"]["summary"][0]


def test_unknown_model_family_without_size_is_a_clean_error(catalogues):
    with pytest.raises(QueryError, match="not a preset"):
        ask(catalogues, "gpt on 8 GPUs")


WORDS = st.sampled_from(["8", "16", "GPUs", "1B", "params", "H100", "A100", "over", "400GbE", "NDR", "HDR", "EFA",
                         "all-reduce", "1GB", "batch", "256", "seq", "len", "512", "nodes", "2", "of", "what", "if",
                         "vs", "gpt3-1.3b", "llama2-7b", "tp", "pp", "zero", "1", ",", "per", "node", "dgx-a100",
                         "pcie", "nvlink", "instead", "fp16", "tf32", "roce", "4", "x"])


@settings(max_examples=60, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=10).map(" ".join))
def test_answers_only_ever_fail_cleanly(catalogues, text):
    try:
        doc = ask(catalogues, text)
    except (CommModelError, pydantic.ValidationError):
        return
    assert set(doc) == {"parsed", "assumptions", "answer"}
    assert all({"field", "value", "reason", "override"} == set(a) for a in doc["assumptions"])


def test_library_words_reach_the_collective_and_the_step(catalogues):
    from commmodel.collectives import collective_cost
    from commmodel.hardware.cluster import Cluster

    gloo = ask(catalogues, "all-reduce 64MB on 8 H100 with gloo")["answer"]
    nccl = ask(catalogues, "all-reduce 64MB on 8 H100")["answer"]
    assert (gloo["library"], gloo["library_why"], nccl["library"]) == ("gloo", "said in the query", "nccl")
    view = Cluster.for_gpus(catalogues["systems"][gloo["system"]], 8, 8).system
    expected = collective_cost("all_reduce", 64e6, view, 8, library="gloo", selection="library")
    assert gloo["time_s"] == pytest.approx(float(expected.time_s))
    assert gloo["algorithm"] == "ring" and gloo["time_s"] > 10 * nccl["time_s"]  # TCP + CPU sum vs NVLink
    over_mpi = ask(catalogues, "llama3-8b on 16 H100 over MPI")["answer"]
    plain = ask(catalogues, "llama3-8b on 16 H100")["answer"]
    assert (over_mpi["library"], plain["library"]) == ("mpi", "nccl")
    assert over_mpi["best"]["exposed_comm_fraction"] > plain["best"]["exposed_comm_fraction"]


@pytest.mark.parametrize(("text", "ranks", "library"), [("all-reduce 64MB over MPI on 4 CPU processes", 4, "mpi"),
                                                        ("all-reduce 1GB with gloo on 4 CPU ranks", 4, "gloo"),
                                                        ("all-reduce 1GB on two CPUs", 2, "gloo")])
def test_cpu_rank_words_name_the_cpu_host(catalogues, text, ranks, library):
    """Issue 14: "N CPU ranks / processes / CPUs" are N ranks of the cpu-host profile (gloo its default library),
    priced as `collective --system cpu-host` prices them, and said as CPU ranks, not GPUs."""
    from commmodel.collectives import collective_cost
    from commmodel.hardware.cluster import Cluster

    answer = ask(catalogues, text)["answer"]
    assert (answer["system"], answer["num_ranks"], answer["library"]) == ("cpu-host", ranks, library)
    assert answer["rank_noun"] == "CPU ranks"
    view = Cluster.for_gpus(catalogues["systems"]["cpu-host"], ranks, None).system
    size = 64e6 if "64MB" in text else 1e9
    expected = collective_cost("all_reduce", size, view, ranks, library=library, selection="library")
    assert answer["time_s"] == pytest.approx(float(expected.time_s))
    assert ask(catalogues, "all-reduce 1GB on 8 H100")["answer"]["rank_noun"] == "GPUs"


@pytest.mark.parametrize("text", ["llama3-8b on 8 H100 with CPU offload", "all-reduce 1GB on 4 CPU cores with gloo",
                                  "8 H100 with 64 CPU cores, llama3-8b", "llama3-8b on 8 H100, cpu-bound?",
                                  "llama3-8b on 8 H100 under 40 GB per GPU"])
def test_cpu_and_under_words_are_not_read_where_they_say_something_else(catalogues, text):
    """Only a count of CPU ranks names the CPU host ("CPU offload", "cpu-bound", a core count do not), and "under" is
    read only before a library ("under RCCL"): a constraint the query cannot honour is an error, not ignored."""
    with pytest.raises(QueryError, match="could not read"):
        ask(catalogues, text)


def test_cpu_ranks_said_with_the_profile_name_are_one_system(catalogues):
    answer = ask(catalogues, "all-reduce 1GB on 8 CPU ranks across 2 cpu-host nodes")["answer"]
    assert (answer["system"], answer["num_ranks"], answer["num_nodes"]) == ("cpu-host", 8, 2)
    assert "targets" not in answer  # not a cpu-host vs cpu-host what-if
    compared = ask(catalogues, "8 CPU ranks, gloo vs mpi, all-reduce 64MB")["answer"]
    assert [t["rank_noun"] for t in compared["targets"]] == ["CPU ranks", "CPU ranks"]


def test_amd_collective_query_prices_with_rccl_and_marks_its_choice(catalogues):
    # An AMD node's default library is RCCL (no NCCL tuner, no NVLS): the answer says so and lists only RCCL's algorithms.
    answer = ask(catalogues, "all-reduce 1GB on 8 MI355X")["answer"]
    assert answer["library"] == "rccl" and answer["system"] == "amd-mi355x"
    names = {a["algorithm"] for a in answer["algorithms"]}
    assert answer["algorithm"] in names and names <= {"ring", "tree", "pairwise", "p2p"}


def test_library_what_if_compares_the_libraries_as_compare_does(catalogues):
    """'gloo vs nccl' plans the job once per library on one system (gloo the baseline: said first) and gives the same
    step times and the same ratio note as ``compare --library gloo --library nccl`` (one core function behind both)."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    doc = ask(catalogues, "gloo vs nccl for gpt3-1.3b on 16 H100")
    answer = doc["answer"]
    gloo, nccl = answer["targets"]
    assert (answer["kind"], answer["library"]) == ("compare", ["gloo", "nccl"])
    assert (gloo["label"], nccl["label"], gloo["library"], nccl["library"]) == (
        "dgx-h100 with gloo", "dgx-h100 with nccl", "gloo", "nccl")
    assert nccl["speedup_vs_baseline"] == pytest.approx(gloo["step_time_s"] / nccl["step_time_s"])
    assert any(f"takes {nccl['step_time_s'] / gloo['step_time_s']:.2f}x the step time" in s for s in answer["summary"])
    result = CliRunner().invoke(app, ["compare", "-m", "gpt3-1.3b", "--system", "dgx-h100", "--gpus", "16",
                                      "--global-batch", str(answer["global_batch"]), "--library", "gloo",
                                      "--library", "nccl", "--json"])
    assert result.exit_code == 0, result.output
    cli = json.loads(result.output)["targets"]
    assert [r["step_time_s"] for r in cli] == pytest.approx([gloo["step_time_s"], nccl["step_time_s"]])


def test_collective_library_what_if_prices_each_library(catalogues):
    answer = ask(catalogues, "all-reduce 256MB on 16 H100, gloo vs nccl")["answer"]
    assert answer["kind"] == "collective_compare"
    gloo, nccl = answer["targets"]
    assert (gloo["library"], nccl["library"]) == ("gloo", "nccl")
    assert nccl["speedup_vs_baseline"] == pytest.approx(gloo["time_s"] / nccl["time_s"]) and gloo["time_s"] > nccl["time_s"]


def test_a_device_library_on_the_other_vendors_gpus_is_refused_with_the_fix(catalogues):
    from commmodel.errors import CollectiveError

    with pytest.raises(CollectiveError, match="NCCL runs on NVIDIA GPUs, and amd-mi300x has AMD Instinct GPUs"):
        ask(catalogues, "all-reduce 1GB on 8 MI300X, rccl vs nccl")


def test_micro_batch_and_accumulation_give_the_global_batch_over_the_data_parallel_gpus(catalogues):
    """"micro batch 2, gradient accumulation 8" on 8 GPUs: 2 × 8 × dp 8 = 128 sequences (before: the default batch,
    which no layout with those pins divides, so nothing was feasible); with tp 2 pinned dp is 4."""
    doc = ask(catalogues, "llama3-8b on 8 GPUs, micro batch 2, gradient accumulation 8")
    assert doc["answer"]["global_batch"] == 128 and doc["answer"]["best"]["layout"].startswith("tp1 pp1 dp8 mb2")
    assert next(a for a in doc["assumptions"] if a["field"] == "global_batch")["value"] == 128
    assert ask(catalogues, "llama3-8b on 8 GPUs, tp 2, micro batch 2, gradient accumulation 8")["answer"][
        "global_batch"] == 64


def test_dtype_what_if_compares_the_dtypes_as_compare_does(catalogues):
    """'fp8 vs bf16': fp8 is the baseline (said first), each row carries its dtype, and the answer lists both."""
    answer = ask(catalogues, "llama3-8b on 16 H100, batch 64, fp8 vs bf16")["answer"]
    fp8, bf16 = answer["targets"]
    assert (answer["kind"], answer["dtype"], fp8["dtype"], bf16["dtype"]) == ("compare", ["fp8", "bf16"], "fp8", "bf16")
    assert bf16["speedup_vs_baseline"] == pytest.approx(fp8["step_time_s"] / bf16["step_time_s"])
    assert bf16["speedup_vs_baseline"] < 1.0
    with pytest.raises(QueryError, match="give one, or compare them: 'fp8 vs bf16'"):
        ask(catalogues, "llama3-8b on 16 H100 with fp8 and bf16")


def test_stack_what_if_compares_the_stacks(catalogues):
    """'deepspeed instead of fsdp2': fsdp2 is the baseline, each row carries its stack, both stacks are assumptions."""
    doc = ask(catalogues, "llama3-8b, 16 H100, batch 64, deepspeed instead of fsdp2")
    answer = doc["answer"]
    fsdp2, deepspeed = answer["targets"]
    assert (answer["stack"], fsdp2["stack"], deepspeed["stack"]) == (["fsdp2", "deepspeed"], "fsdp2", "deepspeed")
    assert {a["value"] for a in doc["assumptions"] if a["field"] == "stack"} == {"fsdp2", "deepspeed"}
    assert deepspeed["speedup_vs_baseline"] == pytest.approx(fsdp2["step_time_s"] / deepspeed["step_time_s"])


def test_a_system_against_a_gpu_is_a_what_if(catalogues):
    """'dgx-h100 vs B200' (a named system and a GPU) compares the system with the shipped node of that GPU, in the
    order said ('B200 instead of dgx-h100': dgx-h100 is the baseline); before: 'a what-if needs two things'."""
    for text in ("llama3-8b on 64 GPUs, dgx-h100 vs B200", "llama3-8b on 64 GPUs, B200 instead of dgx-h100"):
        answer = ask(catalogues, text)["answer"]
        assert [t["label"] for t in answer["targets"]] == ["dgx-h100", "hgx-b200"]
    answer = ask(catalogues, "llama3-8b on 64 GPUs, B200 vs dgx-h100")["answer"]
    assert [t["label"] for t in answer["targets"]] == ["hgx-b200", "dgx-h100"]


def test_training_tokens_give_the_time_to_train_at_the_best_layout(catalogues):
    """'on 1T tokens': tokens ÷ the best layout's tokens/s, for a plan and for each target of a what-if."""
    answer = ask(catalogues, "llama3-8b on 64 H100 for 1T tokens")["answer"]
    assert answer["train_tokens"] == 1e12
    assert answer["best"]["time_to_train_s"] == pytest.approx(1e12 / answer["best"]["tokens_per_s"])
    answer = ask(catalogues, "llama3-8b on 64 GPUs, dgx-h100 vs dgx-a100, 300B tokens")["answer"]
    assert [t["time_to_train_s"] for t in answer["targets"]] == pytest.approx(
        [3e11 / t["tokens_per_s"] for t in answer["targets"]])


def test_an_asked_algorithm_is_priced_as_collective_algo_prices_it(catalogues):
    from commmodel.collectives import collective_cost
    from commmodel.hardware.cluster import Cluster

    answer = ask(catalogues, "tree all-reduce 64MB on 16 A100")["answer"]
    view = Cluster.for_gpus(catalogues["systems"][answer["system"]], 16, 8).system
    want = collective_cost("all_reduce", 64e6, view, 16, selection="library", library="nccl", algorithm="tree")
    assert (answer["algorithm"], answer["algorithm_asked"]) == ("tree", True)
    assert answer["time_s"] == pytest.approx(float(want.time_s))
    assert ask(catalogues, "all-reduce 64MB on 16 A100")["answer"]["algorithm_asked"] is False


def test_a_said_dp_fixes_or_checks_the_gpu_count(catalogues):
    doc = ask(catalogues, "llama3-70b with TP8 PP4 DP8 on H100")
    assert doc["answer"]["num_gpus"] == 256 and doc["answer"]["best"]["layout"].startswith("tp8 pp4 dp8")
    assert next(a for a in doc["assumptions"] if a["field"] == "num_gpus")["value"] == 256
    assert ask(catalogues, "llama3-70b with TP8 PP4 DP8 on 256 H100")["answer"]["num_gpus"] == 256
    with pytest.raises(QueryError, match=r"dp 8 with 64 GPUs: say tp and pp too"):
        ask(catalogues, "llama3-8b dp 8 on 64 H100")
    # the degrees not said are pinned to 1, so the said dp holds in every ranked layout (before: 'tp 4 dp 4' on 16
    # GPUs ranked pp 4 × dp 1 layouts); where none fits, the error names the said layout
    layouts = ask(catalogues, "llama3-8b with tp 2 dp 4 on H100")["answer"]["best_layouts"]
    assert {(r["tp"], r["pp"], r["cp"], r["dp"]) for r in layouts} == {(2, 1, 1, 4)}
    with pytest.raises(CommModelError, match=r"tp 4, pp 1, dp 4"):
        ask(catalogues, "llama3-70b with tp 4 dp 4 on H100")


def test_how_many_gpus_is_the_fewest_whole_node_count_that_fits(catalogues):
    """'how many H100s do I need for llama3-70b': one node does not hold it, two do (doubling from one node); the
    answer is the plan there, and the count is an assumption that says so."""
    from commmodel.planner.search import plan
    from commmodel.workload.presets import get_model

    doc = ask(catalogues, "how many H100s do I need for llama3-70b")
    num = doc["answer"]["num_gpus"]
    note = next(a for a in doc["assumptions"] if a["field"] == "num_gpus")
    assert (num, note["value"]) == (16, 16) and "none fits on 8" in note["reason"]
    # the claim "none fits on 8", checked with the query's own options and search (the default stack's)
    from commmodel.planner.space import SearchSpace
    from commmodel.step.options import DEFAULT_MEMORY_HEADROOM_BYTES
    from commmodel.step.stacks import get_stack, stack_options

    options = stack_options(memory_headroom_bytes=DEFAULT_MEMORY_HEADROOM_BYTES, library="nccl")
    assert plan(get_model("llama3-70b"), catalogues["systems"]["dgx-h100"], 8, global_batch=512, options=options,
                space=SearchSpace(**get_stack().search_pins)).num_feasible == 0
    assert ask(catalogues, "how many H100 for llama3-8b")["answer"]["num_gpus"] == 8
    assert ask(catalogues, "how many H100 for llama3-8b, 64 GPUs")["answer"]["num_gpus"] == 64  # a said count wins
