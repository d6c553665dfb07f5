"""`commmodel plan`, `compare` and `query` through the CLI: JSON contracts (DESIGN §8), CSV, tables, errors."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.planner.search import LAYOUT_RECORD_KEYS

runner = CliRunner()
PLAN = ["plan", "--model", "gpt3-1.3b", "--gpus", "16", "--system", "dgx-h100", "--global-batch", "256"]


def _json(argv):
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _fails(argv, fragment):
    result = runner.invoke(app, argv)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert fragment in lines[0]
    return lines[0]


def test_plan_json_follows_the_contract():
    doc = _json(PLAN + ["--top", "4", "--json"])
    assert {"evaluated", "feasible", "search_s", "layouts"} <= set(doc)
    assert doc["evaluated"] >= doc["feasible"] > 0 and doc["search_s"] > 0
    assert len(doc["layouts"]) == 4
    for rank, layout in enumerate(doc["layouts"], start=1):
        assert tuple(layout) == LAYOUT_RECORD_KEYS
        assert layout["rank"] == rank
        assert layout["tp"] * layout["pp"] * layout["cp"] * layout["dp"] == 16
        assert 256 % (layout["micro_batch"] * layout["dp"]) == 0
    times = [layout["step_time_s"] for layout in doc["layouts"]]
    assert times == sorted(times)
    assert sum(doc["pruned"].values()) == doc["enumerated"] - doc["feasible"]
    assert doc["explanation"] and "rank 1" in doc["explanation"][0]


def test_plan_network_and_seq_len_flags_change_the_answer():
    base = _json(PLAN + ["--json"])
    slow = _json(PLAN + ["--network", "eth-10g:1", "--json"])
    assert slow["system"] == "dgx-h100+eth-10g:1"
    assert slow["layouts"][0]["step_time_s"] > base["layouts"][0]["step_time_s"]
    longer = _json(PLAN + ["--seq-len", "4096", "--json"])
    assert longer["seq_len"] == 4096 and longer["layouts"][0]["step_time_s"] > base["layouts"][0]["step_time_s"]


def test_plan_pins_narrow_the_search():
    doc = _json(PLAN + ["--tp", "2", "--pp", "2", "--zero", "1", "--recompute", "full", "--json"])
    assert {(x["tp"], x["pp"], x["zero"], x["recompute"]) for x in doc["layouts"]} == {(2, 2, 1, "full")}


def test_plan_csv_has_every_feasible_layout_with_breakdown():
    result = runner.invoke(app, PLAN + ["--csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    feasible = _json(PLAN + ["--json"])["feasible"]
    assert len(rows) == feasible
    assert {"rank", "tp", "pp", "dp", "step_time_s", "pp/bubble/exposed_s", "dp/all_reduce/link_s"} <= set(rows[0])
    assert [int(r["rank"]) for r in rows[:3]] == [1, 2, 3]


def test_plan_table_and_explanation():
    result = runner.invoke(app, PLAN + ["--top", "3"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "layouts enumerated" in out and "feasible" in out
    assert "rank" in out and "tokens/s" in out and "why: rank 1" in out
    assert len([line for line in out.splitlines() if re.match(r"^\s*\d+\s+\d+\s+\d+\s+\d+\s", line)]) == 3


def test_plan_cp_pins_context_parallelism_and_reports_it():
    default = _json(PLAN + ["--json"])
    assert {x["cp"] for x in default["layouts"]} == {1}  # 2048 tokens: below the 32K default cp threshold
    doc = _json(PLAN + ["--cp", "2", "--json"])
    assert doc["layouts"] and {x["cp"] for x in doc["layouts"]} == {2}
    for layout in doc["layouts"]:
        assert layout["tp"] * layout["pp"] * layout["cp"] * layout["dp"] == 16
    # at 2048 tokens cp only adds K/V ring traffic and shorter GEMMs: the best cp-2 step is slower than cp 1's
    assert doc["layouts"][0]["step_time_s"] > default["layouts"][0]["step_time_s"]
    assert "cp2" in doc["explanation"][0]
    _fails(PLAN + ["--cp", "3"], "--cp 3 must divide 16 GPUs")


@pytest.mark.parametrize("argv,fragment", [
    (["plan", "--model", "no-such-model", "--gpus", "8", "--system", "dgx-h100"], "unknown model"),
    (["plan", "--model", "1B", "--gpus", "12", "--system", "dgx-h100"], "whole nodes"),
    (["plan", "--model", "gpt3-175b", "--gpus", "8", "--system", "dgx-h100"], "no layout of gpt3-175b fits on 8 GPUs"),
    (["plan", "--model", "1B", "--gpus", "8", "--system", "dgx-h100", "--network", "ib-bogus"], "unknown link"),
    (["plan", "--model", "1B", "--gpus", "8", "--system", "dgx-h100", "--recompute", "most"], "not a policy"),
])
def test_plan_errors_are_one_line_exit_1(argv, fragment):
    _fails(argv, fragment)


def test_compare_two_systems():
    doc = _json(["compare", "--model", "gpt3-1.3b", "--gpus", "16", "--system", "dgx-a100", "--system", "dgx-h100",
                 "--global-batch", "256", "--json"])
    assert doc["baseline"] == "dgx-a100" and [t["label"] for t in doc["targets"]] == ["dgx-a100", "dgx-h100"]
    base, h100 = doc["targets"]
    assert base["speedup_vs_baseline"] == pytest.approx(1.0) and base["delta_step_time_s"] == 0
    assert h100["speedup_vs_baseline"] > 1  # H100 computes ~3x faster than A100 in bf16
    assert h100["speedup_vs_baseline"] == pytest.approx(base["step_time_s"] / h100["step_time_s"])
    assert tuple(h100["best_layout"]) == ("tp", "pp", "cp", "dp", "micro_batch", "zero", "recompute", "sequence_parallel", "vpp", "ep", "etp")


def test_compare_networks_on_one_system_two_ways():
    repeated = _json(["compare", "--model", "gpt3-1.3b", "--gpus", "16", "--system", "dgx-h100", "--network", "native",
                      "--network", "eth-10g:1", "--global-batch", "256", "--json"])
    inline = _json(["compare", "--model", "gpt3-1.3b", "--gpus", "16", "--system", "dgx-h100", "--system",
                    "dgx-h100+eth-10g:1", "--global-batch", "256", "--json"])
    assert [t["label"] for t in repeated["targets"]] == ["dgx-h100", "dgx-h100+eth-10g:1"]
    assert [t["step_time_s"] for t in repeated["targets"]] == [t["step_time_s"] for t in inline["targets"]]
    assert repeated["targets"][1]["speedup_vs_baseline"] < 1  # 10 GbE is slower than 8x NDR
    table = runner.invoke(app, ["compare", "--model", "gpt3-1.3b", "--gpus", "16", "--system", "dgx-h100",
                                "--system", "dgx-h100+eth-10g:1", "--global-batch", "256"])
    assert table.exit_code == 0 and "baseline" in table.stdout and "why:" in table.stdout


def test_compare_dtypes_plans_each_dtype_as_estimate_prices_it():
    """--dtype bf16 --dtype fp8: one system, each dtype planned on one global batch; each best layout's step is what
    `estimate` gives for that layout in that dtype, MFU stays against the 16-bit peak, the JSON lists both dtypes."""
    doc = _json(["compare", "--model", "llama3-8b", "--gpus", "16", "--system", "dgx-h100", "--global-batch", "64",
                 "--dtype", "bf16", "--dtype", "fp8", "--json"])
    bf16, fp8 = doc["targets"]
    assert (bf16["label"], fp8["label"]) == ("dgx-h100 bf16", "dgx-h100 fp8")
    assert (bf16["dtype"], fp8["dtype"]) == ("bf16", "fp8")
    assert doc["dtype"] == ["bf16", "fp8"] and 1.0 < fp8["speedup_vs_baseline"] < 2.0  # FP8 GEMMs, 16-bit rest
    for row in (bf16, fp8):
        lay = row["best_layout"]
        est = _json(["estimate", "--model", "llama3-8b", "--gpus", "16", "--system", "dgx-h100", "--global-batch", "64",
                     "--dtype", row["dtype"], "--tp", str(lay["tp"]), "--pp", str(lay["pp"]), "--cp", str(lay["cp"]),
                     "--micro-batch", str(lay["micro_batch"]), "--zero", str(lay["zero"]), "--recompute",
                     lay["recompute"], "--vpp", str(lay["vpp"]), "--json"])
        assert est["step_time_s"] == pytest.approx(row["step_time_s"], rel=1e-9)
    assert fp8["mfu"] / bf16["mfu"] == pytest.approx(bf16["step_time_s"] / fp8["step_time_s"])


def test_compare_stacks_plans_each_stack_with_one_flop_rule():
    """--stack megatron-core --stack fsdp2: each stack's own search (fsdp2 ZeRO-3, megatron-core ZeRO-1), each best
    layout's step what `estimate --stack` gives, and MFU counted by the baseline's rule for both (megatron-core counts
    the causal half of the attention square, fsdp2 the full square: MFU ratio = step-time ratio only under one rule)."""
    doc = _json(["compare", "--model", "llama3-8b", "--gpus", "16", "--system", "dgx-h100", "--global-batch", "64",
                 "--stack", "megatron-core", "--stack", "fsdp2", "--json"])
    mcore, fsdp2 = doc["targets"]
    assert (mcore["label"], fsdp2["label"], doc["stack"]) == ("dgx-h100 megatron-core", "dgx-h100 fsdp2",
                                                              ["megatron-core", "fsdp2"])
    assert (mcore["best_layout"]["zero"], fsdp2["best_layout"]["zero"]) == (1, 3)
    assert fsdp2["mfu"] / mcore["mfu"] == pytest.approx(mcore["step_time_s"] / fsdp2["step_time_s"])
    assert any(a.startswith("fsdp2: ") and "full shard" in a for a in doc["assumptions"])
    lay = fsdp2["best_layout"]
    est = _json(["estimate", "--model", "llama3-8b", "--gpus", "16", "--system", "dgx-h100", "--global-batch", "64",
                 "--stack", "fsdp2", "--tp", str(lay["tp"]), "--pp", str(lay["pp"]), "--cp", str(lay["cp"]),
                 "--micro-batch", str(lay["micro_batch"]), "--zero", str(lay["zero"]), "--recompute", lay["recompute"],
                 "--vpp", str(lay["vpp"]), "--json"])
    assert est["step_time_s"] == pytest.approx(fsdp2["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("argv,fragment", [
    (["compare", "--model", "1B", "--gpus", "8", "--system", "dgx-h100"], "at least two targets"),
    (["compare", "--model", "1B", "--gpus", "8", "--system", "dgx-a100", "--dtype", "bf16", "--dtype", "fp8"],
     "fp8 needs compute capability"),
    (["compare", "--model", "1B", "--gpus", "8", "--system", "dgx-h100", "--system", "dgx-h100"], "given twice"),
    (["compare", "--model", "1B", "--gpus", "8", "--system", "dgx-h100+", "--system", "dgx-a100"], "after '+'"),
])
def test_compare_errors(argv, fragment):
    _fails(argv, fragment)


def test_query_plan_answer_and_assumptions():
    doc = _json(["query", "8 GPUs, 1B params, IB NDR", "--json"])
    assert set(doc) == {"parsed", "assumptions", "answer"}
    assert doc["parsed"]["num_gpus"] == 8
    answer = doc["answer"]
    assert answer["kind"] == "plan" and answer["system"] == "dgx-h100" and answer["num_gpus"] == 8
    assert answer["best_layouts"] and tuple(answer["best_layouts"][0]) == LAYOUT_RECORD_KEYS
    assert answer["best"]["bound"] in ("compute", "communication", "bubble", "memory")
    assert {"link_s", "exposed_s", "terms"} <= set(answer["gradient_sync"])
    fields = {a["field"] for a in doc["assumptions"]}
    assert {"gpu_type", "seq_len", "dtype", "global_batch"} <= fields
    assert all(a["override"] for a in doc["assumptions"])


def test_query_collective_answer():
    doc = _json(["query", "all-reduce 1GB on 16 A100 across 2 nodes with HDR", "--json"])
    answer = doc["answer"]
    assert answer["kind"] == "collective" and answer["system"] == "dgx-a100"
    assert answer["num_ranks"] == 16 and answer["num_nodes"] == 2 and answer["size_bytes"] == 1e9
    assert answer["time_s"] > 0 and answer["busbw_GBps"] == pytest.approx(
        answer["algbw_GBps"] * 2 * 15 / 16, rel=1e-9)  # nccl-tests busbw factor 2(n-1)/n


def test_query_what_if_is_a_comparison():
    doc = _json(["query", "what if I switch from 100GbE to NDR", "--json"])
    answer = doc["answer"]
    assert answer["kind"] == "compare" and len(answer["targets"]) == 2
    # one node type with each network swapped in, the NIC count kept (it compared a 1-NIC 100GbE node with a DGX
    # H100's 8 NDR NICs: the network and the NIC count at once)
    base, other = (t["label"] for t in answer["targets"])
    assert "eth-100g:1" in base and other == base.replace("eth-100g", "ib-ndr")
    assert {"num_gpus", "model"} <= {a["field"] for a in doc["assumptions"]}


def test_query_flags_override_and_human_output():
    result = runner.invoke(app, ["query", "GPT-3 1.3B on 16 A100s", "--gpus", "32", "--global-batch", "128"])
    assert result.exit_code == 0, result.output
    assert "on 32 GPUs of dgx-a100, global batch 128" in result.stdout
    assert "assumptions:" in result.stdout and "override:" in result.stdout


def test_query_unreadable_parts_exit_1_with_examples():
    line = _fails(["query", "8 GPUs with a flux capacitor"], "could not read")
    assert "'flux'" in line and "capacitor" in line and "8 GPUs, 1B params, IB NDR" in line


def test_plan_on_a_single_box_without_network():
    """A PCIe box with no scale-out tier (2x RTX 2080 Ti, no P2P): every layout stays inside it."""
    doc = _json(["plan", "--model", "gpt3-350m", "--gpus", "2", "--system", "pcie-2x-rtx2080ti", "--json"])
    assert doc["feasible"] > 0
    assert {(x["tp"] * x["pp"] * x["dp"]) for x in doc["layouts"]} == {2}


def test_flash_attention_flag_reaches_the_step_model():
    # Fused attention removes the s×s score traffic (Dao et al. 2022), so the best step can only get faster.
    args = ["plan", "--model", "1B", "--gpus", "8", "--system", "dgx-h100", "--top", "1", "--json"]
    plain = json.loads(runner.invoke(app, [*args, "--no-flash-attention"]).stdout)["layouts"][0]["step_time_s"]
    fused = json.loads(runner.invoke(app, args).stdout)["layouts"][0]["step_time_s"]  # the default stack fuses
    assert fused < plain * 0.95


def _best_csv_row(*extra: str) -> dict[str, str]:
    """The best row of a pinned Llama-3 8B plan on 64 H100 as ``plan --csv`` prints it."""
    import csv
    import io

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    argv = ["plan", "-m", "llama3-8b", "-n", "64", "-s", "dgx-h100", "--top", "1", "--tp", "2", "--pp", "1",
            "--micro-batch", "2", "--zero", "1", "--recompute", "none", "--csv", *extra]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return next(csv.DictReader(io.StringIO(result.stdout)))


def test_plan_takes_the_dp_knobs_estimate_takes():
    """--grad-reduce-dtype, --bucket-size and --overlap reach plan's step model (issue 12: every knob overridable):
    bf16 gradients (megatron-core's default) halve the DP reduce-scatter's bandwidth term against --grad-reduce-dtype
    fp32, so its link time is about half (the per-bucket latency stays); without overlap the whole reduce-scatter is
    exposed."""
    fp32 = _best_csv_row("--grad-reduce-dtype", "fp32")
    bf16 = _best_csv_row()
    ratio = float(bf16["dp/reduce_scatter/link_s"]) / float(fp32["dp/reduce_scatter/link_s"])
    assert 0.5 <= ratio < 0.6
    blocking = _best_csv_row("--no-overlap", "--bucket-size", "25MB")
    assert float(blocking["dp/reduce_scatter/exposed_s"]) == float(blocking["dp/reduce_scatter/link_s"]) > 0
