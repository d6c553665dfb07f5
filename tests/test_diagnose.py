"""``diagnose`` on real Kineto traces (../shared/evidence, see its README for sources), on traces the suite
makes itself with torch.profiler around gloo collectives, and on bad files."""

from __future__ import annotations

import gzip
import json
import math
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.collectives import busbw_factor
from commmodel.io.kineto import read_trace
from commmodel.io.kineto_ops import canonical_op, parse_kernel

EVIDENCE = Path(os.environ.get("COMMMODEL_EVIDENCE_DIR") or Path(__file__).resolve().parents[2] / "shared" / "evidence")
"""CI clones main with shared/ beside it; a worktree elsewhere points COMMMODEL_EVIDENCE_DIR at it."""
TWO = EVIDENCE / "kineto-nccl-2ranks-allreduce.json.gz"
SIXTEEN = EVIDENCE / "kineto-nccl-16ranks-rank0.json.gz"
needs_evidence = pytest.mark.skipif(not TWO.exists(), reason="../shared/evidence not beside the checkout")
runner = CliRunner()


def _raw(path: Path) -> list[dict]:
    return json.load(gzip.open(path))["traceEvents"]


def test_kernel_names_give_only_what_nccl_builds_them_for():
    # NCCL <= 2.18 builds one kernel per algorithm, LL only (common.h @ v2.18.3-1 IMPL_COLL4): algorithm yes, protocol no
    assert parse_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)") == ("ring", None)
    assert parse_kernel("ncclKernel_AllReduce_NVLS_TREE_LL_Sum_bf16") == ("nvls_tree", None)
    assert parse_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)") == (None, None)
    # NCCL >= 2.19 best_kernel(): every algorithm but TREE runs in the RING_LL kernel (generate.py @ v2.19.3-1)
    assert parse_kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == (None, None)
    assert parse_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == (None, None)
    assert parse_kernel("ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevKernelArgsStorage<4096ul>)") == ("tree", None)
    assert parse_kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == (None, None)
    assert parse_kernel("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)") == (None, None)  # RCCL


def test_collective_names_map_to_nccl_tests_ops():
    cases = {"allreduce": "all_reduce", "nccl:_all_gather_base": "all_gather", "_reduce_scatter_base": "reduce_scatter",
             "c10d::alltoall_base_": "all_to_all", "all_to_allv": "all_to_all", "gloo:broadcast": "broadcast",
             "allgather_into_tensor_coalesced": "all_gather", "send": "send_recv", "record_param_comms": None}
    assert {k: canonical_op(k) for k in cases} == cases


@needs_evidence
def test_two_rank_trace_matches_its_raw_events():
    events = _raw(TWO)
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    trace = read_trace(TWO)
    assert (trace.backend, trace.rank, trace.world_size) == ("nccl", 0, 2)
    assert len(trace.collectives) == len(kernels) == 21  # each kernel counted once
    assert sum(c.num_kernels for c in trace.collectives) == len(kernels)
    assert Counter(c.op for c in trace.collectives) == {"all_reduce": 15, "broadcast": 6}
    assert {(c.algorithm, c.protocol) for c in trace.collectives} == {("ring", None)}
    assert {c.group_size for c in trace.collectives} == {2}
    # sizes and durations from the kernels' own args (this Kineto copies the collective's args onto them)
    elem_bytes = {"Float": 4, "Long": 8}  # torch.float32, torch.int64
    expected = sorted((k["args"]["In msg nelems"] * elem_bytes[k["args"]["dtype"]], k["dur"] * 1e-6) for k in kernels)
    got = sorted((c.size_bytes, c.time_s) for c in trace.collectives)
    assert [g[0] for g in got] == [e[0] for e in expected]
    assert [g[1] for g in got] == pytest.approx([e[1] for e in expected], rel=1e-9)
    assert [s.step for s in trace.steps] == [4, 5, 6]


@needs_evidence
def test_two_rank_diagnose_json_busbw_is_nccl_tests_busbw():
    out = runner.invoke(app, ["diagnose", str(TWO), "--system", "dgx-a100", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert set(doc) == {"traces", "system", "gpus_per_node", "threshold", "devices", "library", "library_why",
                        "trace_info", "collectives", "steps"}
    assert (doc["library"], doc["library_why"]) == ("nccl", "the traces' backend nccl")  # the trace says it ran NCCL
    kernels = [e for e in _raw(TWO) if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_AllReduce")]
    size = 2049000 * 4  # the first record_param_comms allreduce: 2,049,000 floats
    durs = [k["dur"] * 1e-6 for k in kernels if k["args"]["In msg nelems"] == 2049000]
    row = next(r for r in doc["collectives"] if r["op"] == "all_reduce" and r["size_bytes"] == size)
    assert row["count"] == len(durs) == 3
    assert row["measured_time_s"] == pytest.approx(statistics.median(durs))
    assert row["measured_busbw_GBps"] == pytest.approx(size / statistics.median(durs) * 2 * (2 - 1) / 2 / 1e9)
    assert row["ratio"] == pytest.approx(row["measured_busbw_GBps"] / row["model_busbw_GBps"])
    assert (row["flag"] is not None) == (row["ratio"] < 0.7)
    assert sum(r["count"] for r in doc["collectives"]) == 21
    for step in doc["steps"]:
        parts = step["compute_s"] + step["exposed_comm_s"] + step["idle_s"]
        assert parts == pytest.approx(step["time_s"]) and min(step["compute_s"], step["exposed_comm_s"], step["idle_s"]) >= 0


@needs_evidence
def test_sixteen_rank_trace_attributes_sendrecv_kernels_to_their_collective():
    events = _raw(SIXTEEN)
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    assert {k["name"].split("(")[0] for k in kernels} == {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"}
    launched = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime" and "correlation" in e["args"]}
    trace = read_trace(SIXTEEN)
    in_window = sum(1 for k in kernels if k["args"]["correlation"] in launched)
    assert sum(c.num_kernels for c in trace.collectives) == in_window == 75
    assert trace.unattributed_kernels == len(kernels) - in_window == 5
    assert Counter(c.op for c in trace.collectives) == {"all_to_all": 45, "reduce_scatter": 10, "all_reduce": 10,
                                                       "all_gather": 10}
    # c10d::_allgather_base_ / _reduce_scatter_base_ state (output, input): [65536, 64] and [8192, 64] floats, so
    # S = 65536 × 64 × 4 B and a group of 65536 / 8192 = 8 ranks (not the world's 16)
    sharded = {(c.op, c.size_bytes, c.group_size) for c in trace.collectives if c.op in ("all_gather", "reduce_scatter")}
    assert sharded == {(op, 65536 * cols * 4.0, 8) for op in ("all_gather", "reduce_scatter") for cols in (64, 384)}
    others = {c.group_size for c in trace.collectives if c.op in ("all_to_all", "all_reduce")}
    assert others == {16} and trace.notes  # world size, stated as assumed
    dims = {math.prod(e["args"]["Input Dims"][0]) for e in events if e.get("name") == "nccl:_all_gather_base"}
    assert {d * 4 * 8 for d in dims} == {c.size_bytes for c in trace.collectives if c.op == "all_gather"}
    assert len(trace.steps) == 5


@needs_evidence
def test_sixteen_rank_diagnose_flags_groups_below_threshold():
    out = runner.invoke(app, ["diagnose", str(SIXTEEN), "--system", "dgx-a100", "--gpus-per-node", "8",
                              "--threshold", "0.5", "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)["collectives"]
    assert sum(r["count"] for r in rows) == 75
    for r in rows:
        if r["size_bytes"]:
            factor = float(busbw_factor(r["op"], r["group_size"]))
            assert r["measured_busbw_GBps"] == pytest.approx(r["size_bytes"] / r["measured_time_s"] * factor / 1e9)
        limit = 0.5 / 1.5 if (r["size_bytes"] or 0) <= 64 * 2**10 else 0.5  # latency-bound: the model's own x1.5
        assert (r["flag"] is not None) == (r["ratio"] is not None and r["ratio"] < limit)
    assert any(r["flag"] for r in rows) and any(r["ratio"] and r["ratio"] >= 0.5 for r in rows)


def _fail(args: list[str]) -> str:
    out = runner.invoke(app, args)
    assert out.exit_code == 1, out.output
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), out.stderr
    return lines[0]


@needs_evidence
def test_truncated_gzip_is_one_line_naming_the_file(tmp_path):
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes(TWO.read_bytes()[:200_000])
    line = _fail(["diagnose", str(bad), "--system", "dgx-a100"])
    assert str(bad) in line and "truncated" in line


def test_trace_without_distributed_info(tmp_path):
    bad = tmp_path / "local.json"
    bad.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}))
    line = _fail(["diagnose", str(bad), "--system", "dgx-a100"])
    assert str(bad) in line and "distributedInfo" in line


def test_not_json_and_missing_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("<html>")
    assert str(bad) in _fail(["diagnose", str(bad), "--system", "dgx-a100"])
    assert "no such trace file" in _fail(["diagnose", str(tmp_path / "nope.json"), "--system", "dgx-a100"])


@pytest.mark.slow
def test_gloo_traces_made_by_torch_profiler(tmp_path):
    pytest.importorskip("torch")
    script = Path(__file__).parent / "fixtures" / "evidence" / "make_gloo_trace.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(script), str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    if done.returncode != 0 and "Signal" in done.stderr:  # a rank killed by a signal (the machine, not the reader)
        done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    out = runner.invoke(app, ["diagnose", str(tmp_path), "--system", "cpu-host", "--gpus-per-node", "2", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert len(doc["traces"]) == 2
    # priced in the library the traces ran (their backend), as `collective --library gloo` prices it (before: NCCL,
    # which has no tuner for a CPU, so a gloo job on its own CPU host could not be diagnosed at all)
    assert (doc["library"], doc["library_why"]) == ("gloo", "the traces' backend gloo")
    from commmodel.collectives import collective_cost
    from commmodel.io.profiles import load_system

    for r in doc["collectives"]:
        cost = collective_cost(r["op"], r["size_bytes"], load_system("cpu-host"), 2, 2, selection="library",
                               library="gloo")
        assert r["model_time_s"] == pytest.approx(float(cost.time_s), rel=1e-12)
        assert r["flag"] is None or "receiver to be scheduled" in r["flag"]  # the host library's causes
    rows = {r["op"]: r for r in doc["collectives"]}
    # the script: 3 profiled steps × (3 all_reduce of 262,144 floats, 1 broadcast and 1 all_gather of 65,536) per
    # rank: calls counted once over the 2 ranks' traces (each at its slowest rank)
    assert rows["all_reduce"]["size_bytes"] == 262144 * 4 and rows["all_reduce"]["count"] == 3 * 3
    assert rows["broadcast"]["size_bytes"] == 65536 * 4 and rows["broadcast"]["count"] == 3
    assert rows["all_gather"]["size_bytes"] == 65536 * 4 * 2 and rows["all_gather"]["count"] == 3
    assert all(r["ranks_traced"] == 2 and r["rank_spread"] >= 1 for r in rows.values())
    assert all(r["group_size"] == 2 and r["algorithm"] is None and r["measured_time_s"] > 0 for r in rows.values())
    assert [s["step"] for s in doc["steps"]] == [1, 2, 3]


def test_steps_against_estimate_of_the_named_layout():
    # The 2-rank trace's steps beside `estimate` of a named layout: dp = 2 ranks / (tp·cp·pp); the measured side
    # is the median of the per-step split the same document reports, the ratios are measured / predicted.
    result = CliRunner().invoke(app, ["diagnose", str(TWO), "--system", "dgx-a100", "--model", "gpt3-350m",
                                      "--micro-batch", "8", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    vs = doc["vs_estimate"]
    assert (vs["layout"]["tp"], vs["layout"]["dp"], vs["layout"]["global_batch"]) == (1, 2, 16)
    assert vs["global_batch_assumed"] is True  # one micro-batch per rank, said (the help said ~1-4M tokens)
    human = CliRunner().invoke(app, ["diagnose", str(TWO), "--system", "dgx-a100", "--model", "gpt3-350m",
                                     "--micro-batch", "8"])
    assert "micro-batch 8, global batch 16 (assumed: one micro-batch per rank" in human.output
    assert "stack megatron-core" in human.output
    estimate = CliRunner().invoke(app, ["estimate", "--model", "gpt3-350m", "--gpus", "2", "--system", "dgx-a100",
                                        "--tp", "1", "--pp", "1", "--micro-batch", "8", "--global-batch", "16", "--json"])
    assert vs["model"]["time_s"] == pytest.approx(json.loads(estimate.stdout)["step_time_s"], rel=1e-9)
    for key in ("time_s", "compute_s", "exposed_comm_s"):
        median = statistics.median(s[key] for s in doc["steps"])
        assert vs["measured"][key] == pytest.approx(median)
        assert vs["ratio"][key] == pytest.approx(median / vs["model"][key])


def test_a_layout_that_does_not_fit_the_trace_is_one_line():
    result = CliRunner().invoke(app, ["diagnose", str(TWO), "--system", "dgx-a100", "--model", "gpt3-350m", "--tp", "4"])
    assert result.exit_code == 1
    assert "2 ranks" in result.output and "tp × cp × pp = 4" in result.output


def test_the_traces_backend_names_the_library_they_are_priced_in():
    """NCCL's backend is NCCL on NVIDIA GPUs and RCCL under ROCm's PyTorch (which keeps the name 'nccl'); gloo and
    MPI are themselves; NCCL traces on a CPU host, traces of two backends and an unknown backend are one line each."""
    from types import SimpleNamespace

    from commmodel.errors import CommModelError
    from commmodel.evidence.diagnose import trace_library
    from commmodel.io.profiles import load_system

    def said(*backends):
        return [SimpleNamespace(backend=b) for b in backends]

    assert trace_library(said("nccl"), load_system("dgx-h100"))[0] == "nccl"
    assert trace_library(said("nccl", "nccl"), load_system("amd-mi300x")) == (
        "rccl", "the traces' backend nccl (RCCL under ROCm's PyTorch)")
    assert trace_library(said("gloo"), load_system("dgx-h100"))[0] == "gloo"  # GPU tensors staged through the host
    assert trace_library(said("mpi"), load_system("cpu-host"))[0] == "mpi"
    assert trace_library(said(None), load_system("cpu-host"))[0] == "gloo"  # no backend stated: the system's own
    for backends, fragment in ((("nccl",), "has CPU ranks"), (("nccl", "gloo"), "2 backends"), (("ucc",), "'ucc'")):
        with pytest.raises(CommModelError, match=fragment):
            trace_library(said(*backends), load_system("cpu-host"))


def _edited(tmp_path: Path, name: str, edit) -> Path:
    """A copy of the 2-rank trace with ``edit`` applied to its JSON document."""
    doc = json.load(gzip.open(TWO))
    edit(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _first_nccl_kernel(doc: dict) -> dict:
    return next(e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ncclKernel"))


@needs_evidence
@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["distributedInfo"].update(world_size="two"), "distributedInfo.world_size = 'two' is not a whole"),
    (lambda d: d["distributedInfo"].update(rank=7), "distributedInfo says rank 7 of 2 ranks"),
    (lambda d: _first_nccl_kernel(d).update(dur=-100.0), "duration -100.0 µs"),
])
def test_damaged_trace_fields_are_one_line(tmp_path, edit, message):
    """An audit's edited copies of a real trace: a word for the world size, a rank outside the world and a negative
    kernel duration were read on (the last printed a -100 µs measurement); each is one line naming the file."""
    line = _fail(["diagnose", str(_edited(tmp_path, "edited.json", edit)), "--system", "dgx-a100"])
    assert "edited.json" in line and message in line


@needs_evidence
def test_one_job_at_a_time_and_a_trace_without_distributed_info(tmp_path):
    """Two jobs' traces were merged step by step (dp from the larger), one rank given twice doubled every count, and
    --model on a trace without distributedInfo ended in a TypeError traceback. Now: one line each, and the world size
    of an older trace is its largest collective group."""
    copy = _edited(tmp_path, "copy.json", lambda d: None)
    assert "rank 0 appears in more than one trace" in _fail(["diagnose", str(TWO), str(copy), "--system", "dgx-a100"])
    assert "jobs of different sizes (world sizes 2, 16)" in _fail(
        ["diagnose", str(TWO), str(SIXTEEN), "--system", "dgx-a100"])
    older = _edited(tmp_path, "older.json", lambda d: d.pop("distributedInfo"))
    result = runner.invoke(app, ["diagnose", str(older), "--system", "dgx-a100", "--model", "gpt3-350m",
                                 "--micro-batch", "8", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["vs_estimate"]["layout"]["dp"] == 2


@needs_evidence
def test_json_says_what_the_human_output_says_of_each_trace():
    """--json dropped the per-trace line (backend, rank, world size) and its notes; neither output counted the NCCL
    kernels matched to no call or the calls without a kernel."""
    result = runner.invoke(app, ["diagnose", str(SIXTEEN), "--system", "dgx-a100", "--json"])
    info = json.loads(result.stdout)["trace_info"][0]
    assert (info["backend"], info["rank"], info["world_size"], info["collective_calls"]) == ("nccl", 0, 16, 75)
    assert info["unattributed_kernels"] == 5 and info["calls_without_kernel"] == 10
    assert any("group size taken as the world size" in note for note in info["notes"])
    human = runner.invoke(app, ["diagnose", str(SIXTEEN), "--system", "dgx-a100"]).output
    assert "5 NCCL kernel(s) matched to no call; 10 call(s) without a kernel" in human


def test_a_malformed_event_is_placed_in_the_file_not_the_window(tmp_path):
    """Damage 3 MB into a trace was reported "at character 6" (its place in the reader's 1 Mi-character window), and
    the reader went on to the end of the file recopying its window each time (82 s for 596 MB); the position is now
    the file's, and the read stops there."""
    from commmodel.io.json_stream import TraceFileError

    event = json.dumps({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5})
    head = '{"schemaVersion": 1, "traceEvents": [' + ", ".join([event] * 30_000)
    path = tmp_path / "damaged.json"
    path.write_text(head + ", @@@" + ", ".join([event] * 30_000) + "]}")
    with pytest.raises(TraceFileError, match=rf"malformed at character {len(head) + 2} "):
        read_trace(path)


@needs_evidence
def test_diagnose_prices_the_traced_job_with_the_dtype_and_knobs_estimate_takes() -> None:
    """The consistency audit of 2026-11-28: diagnose had no --dtype, --ep or stack knob, so an fp8 or MoE trace was
    set against a bf16 dense estimate. Its predicted step now equals estimate's for the same layout and flags."""
    flags = ["--no-flash-attention", "--dropout", "0.1"]
    out = runner.invoke(app, ["diagnose", "-s", "dgx-a100", str(TWO), "-m", "125M", *flags, "--json"])
    assert out.exit_code == 0, out.output
    predicted = json.loads(out.stdout)["vs_estimate"]["model"]["time_s"]
    est = runner.invoke(app, ["estimate", "-m", "125M", "-n", "2", "-s", "dgx-a100", "--global-batch", "2", *flags,
                              "--json"])
    assert predicted == pytest.approx(json.loads(est.stdout)["step_time_s"], rel=1e-9)
    bad = runner.invoke(app, ["diagnose", "-s", "dgx-a100", str(TWO), "--dtype", "fp8"])
    assert bad.exit_code == 2 and "needs --model" in bad.stderr
