"""The torch.distributed benchmark end to end under torchrun with gloo on CPU (slow: spawns processes)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.calibrate.bench_ops import BENCH_OPS, element_count
from commmodel.cli.app import app
from commmodel.collectives import busbw_factor, collective_cost
from commmodel.io.measurements import read_measurements
from commmodel.io.profiles import load_system

pytest.importorskip("torch")

RUN = ["-m", "commmodel", "calibrate", "run"]


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    drop = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "COMMMODEL_CALIBRATE_FAIL_AT"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # these runs test the CPU path (gloo, 2 ranks): on a one-GPU machine "auto" would pick NCCL and put both
    # ranks on the same GPU, which NCCL refuses (seen on an H100 device machine)
    env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", **(extra or {}))
    return env


def torchrun(args: list[str], nproc: int = 2, extra_env: dict[str, str] | None = None, timeout_s: int = 150):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc), *RUN, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=_env(extra_env))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_element_counts():
    all_gather, all_reduce = BENCH_OPS["all_gather"], BENCH_OPS["all_reduce"]
    assert element_count(all_gather, 8, 4, 4) == 4  # at least one float per rank: S rounds up to 16 B
    assert element_count(all_gather, 1000, 3, 4) == 249  # 1000 B -> 996 B = 3 ranks x 83 floats
    assert element_count(all_reduce, 1000, 3, 4) == 250


@pytest.mark.slow
def test_all_primitives_two_ranks(tmp_path):
    out = tmp_path / "bench.csv"
    result = torchrun(["--out", str(out), "--min-size", "8", "--max-size", "64KiB", "--iters", "3", "--warmup", "1",
                       "--system", "dgx-h100"])
    assert result.returncode == 0, result.stderr[-2000:]
    data = read_measurements(out)
    assert data.env["backend"] == "gloo" and data.env["world_size"] == "2" and data.env["system"] == "dgx-h100"
    assert data.env["torch"].startswith("2.") and data.env["launcher"] == "torchrun"
    ops = {r["op"] for r in data.rows}
    skipped = [n for n in data.notes if n.startswith("skipped")]
    assert ops | {n.split("op=")[1].split()[0] for n in skipped} == set(BENCH_OPS)  # measured or skipped with a reason
    assert len(data.rows) == 14 * len(ops)  # 8 B .. 64 KiB
    for row in data.rows:
        assert (row["num_ranks"], row["num_nodes"], row["group"], row["time_stat"]) == (2, 1, "all", "median")
        assert 0 < row["time_s_p10"] <= row["time_s_median"] <= row["time_s_p90"]
        algbw = row["size_bytes"] / row["time_s_median"] / 1e9
        assert row["algbw_GBps"] == pytest.approx(algbw, rel=1e-4)
        assert row["busbw_GBps"] == pytest.approx(algbw * float(busbw_factor(row["op"], 2)), rel=1e-4)
    assert result.stdout.count("point(s) written") == 1  # only rank 0 reports


GLOO_BASE = "pcie-2x-rtx2080ti"
"""Base profile of the CPU/gloo loop. Two PCIe GPUs without P2P exchange through host memory, the shipped hardware
closest to two CPU processes; and its NCCL protocol switch (LL -> Simple by the tuner's line-rate estimate) lies
below 64 KiB. Over an NVLink base (dgx-h100) NCCL's tuner keeps LL, priced at 1/4 of the bandwidth, up to ~1 MiB
whatever efficiency is calibrated (it reads line rates), which a gloo ring never does: the check above 64 KiB would
measure that mismatch, not the calibration."""


def overloaded(load_before: float, load_after: float) -> bool:
    """Whether the 2 ranks had to queue: other runnable processes (the 1-minute load average, Linux /proc/loadavg,
    the larger of before and after the sweep) plus the 2 ranks exceed the cores by half a core or more."""
    return max(load_before, load_after) + 2 >= (os.cpu_count() or 1) + 0.5


UNRESOLVED = "slope interval reaches 0"
"""The fit's one-line refusal of a sweep whose largest sizes give no slope (calibrate/fit.py): on a shared runner a
live sweep can be that noisy; the refusal is the right answer there, and the loop retries or skips on it."""


def gloo_sweep_error(tmp_path: Path, attempt: int) -> tuple[float, dict]:
    """One 2-rank gloo sweep 8 B-4 MiB + fit over GLOO_BASE; median |error| above 64 KiB and what was seen."""
    out, profile = tmp_path / f"gloo{attempt}.csv", tmp_path / f"gloo{attempt}.yaml"
    load_before = os.getloadavg()[0]
    # Latency-bound points: 25 iterations; above 64 KiB, where one scheduler tick (4 ms) is 1-10x a point's time,
    # 60 iterations so the median holds while up to ~40% of them are preempted (--resume adds the larger sizes).
    common = ["--out", str(out), "--ops", "all_reduce", "--min-size", "8B"]
    small = torchrun([*common, "--max-size", "64KiB", "--iters", "25", "--warmup", "3"])
    assert small.returncode == 0, small.stderr[-2000:]
    large = torchrun([*common, "--max-size", "4MiB", "--iters", "60", "--warmup", "5", "--resume"])
    assert large.returncode == 0, large.stderr[-2000:]
    load_after = os.getloadavg()[0]
    fitted = CliRunner().invoke(app, ["calibrate", "fit", str(out), "--base", GLOO_BASE, "--out", str(profile),
                                      "--json"])
    if fitted.exit_code != 0 and UNRESOLVED in fitted.output:  # the fit refuses a sweep whose slope is noise
        rows = read_measurements(out).rows
        return float("inf"), {"load": (round(load_before, 2), round(os.getloadavg()[0], 2)), "refused": fitted.output,
                              "points": [(int(r["size_bytes"]), round(r["time_s_median"] * 1e6, 1), 0.0)
                                         for r in rows if r["size_bytes"] > 64 * 2**10]}
    assert fitted.exit_code == 0, fitted.output
    system = load_system(str(profile))
    assert system.name == f"{GLOO_BASE}-calibrated"
    assert system.scale_up.efficiency.source.startswith(f"calibrated: {out.name}, ")
    assert system.scale_up.latency_s.source.startswith(f"calibrated: {out.name}, ")
    rows = read_measurements(out).rows
    assert [r["iters"] for r in rows if r["size_bytes"] > 64 * 2**10] == [60] * 6
    # It changes the answers: gloo over loopback TCP needs tens of µs for 2 ring steps, NCCL over PCIe ~10 µs.
    eight = np.array([8.0])
    assert collective_cost("all_reduce", eight, system, 2).time_s[0] > 2 * collective_cost(
        "all_reduce", eight, load_system(GLOO_BASE), 2).time_s[0]
    big = [r for r in rows if r["size_bytes"] > 64 * 2**10]
    sizes = np.array([r["size_bytes"] for r in big], dtype=float)
    measured = np.array([r["time_s_median"] for r in big])
    predicted = collective_cost("all_reduce", sizes, system, 2).time_s
    seen = {"load": (round(load_before, 2), round(load_after, 2)), "cores": os.cpu_count(),
            "points": [(int(s), round(float(m) * 1e6, 1), round(float(p) * 1e6, 1)) for s, m, p in zip(sizes, measured, predicted)]}
    return float(np.median(np.abs(predicted / measured - 1))), seen


def self_consistent(points: list[tuple[int, float, float]]) -> bool:
    """Whether a live sweep can judge a model: its medians never fall by more than 15% as the message doubles.
    A collective's time cannot fall as its message grows; a sweep whose medians do (CI: 3.5 ms at 1 MiB, 2.3 ms at
    2 MiB) measured the scheduler, and no model can be held to 30% against it."""
    times_us = [measured for _, measured, _ in points]
    return all(later >= 0.85 * earlier for earlier, later in zip(times_us, times_us[1:]))


def test_fit_over_gloo_base_predicts_a_recorded_gloo_sweep_within_30_percent(tmp_path):
    # Target (issue 6) on a real recorded sweep (deterministic): 2 gloo ranks on the 2-vCPU development VM,
    # tests/fixtures/calibrate/gloo_2ranks_devvm.csv, fitted over GLOO_BASE as the live loop below does.
    csv = Path(__file__).parent / "fixtures" / "calibrate" / "gloo_2ranks_devvm.csv"
    profile = tmp_path / "fit.yaml"
    fitted = CliRunner().invoke(app, ["calibrate", "fit", str(csv), "--base", GLOO_BASE, "--out", str(profile)])
    assert fitted.exit_code == 0, fitted.output
    # The sweep measured all_reduce, all_gather and broadcast; the fit is the joint one over all three (the peers'
    # bandwidth rows enter it, calibrate/apply.py), so the whole sweep is scored: median |error| 0.23 over the 18 rows
    # > 64 KiB (all_reduce 0.39, all_gather 0.13, broadcast 0.21; the all-reduce-only fit gave 0.26: 0.27, 0.31, 0.22).
    rows = [r for r in read_measurements(csv).rows if r["size_bytes"] > 64 * 2**10]
    system = load_system(str(profile))
    errors = np.array([collective_cost(r["op"], float(r["size_bytes"]), system, 2).time_s / r["time_s_median"] - 1
                       for r in rows])
    assert len(rows) == 18 and float(np.median(np.abs(errors))) <= 0.30, errors


@pytest.mark.slow
def test_sweep_fit_and_profile_predict_measurements(tmp_path):
    # The live loop: sweep -> fit -> profile (the assertions in gloo_sweep_error always run). Its accuracy against
    # its own medians is held to the issue-6 target (30%) only when the sweep is self-consistent; a shared CI runner
    # often is not, and the same target is asserted above on a recorded sweep and measured by
    # benchmarks/calibrate_gloo.py (medians of fresh runs).
    error, seen = gloo_sweep_error(tmp_path, 0)
    if error > 0.30 and ("refused" in seen or overloaded(*seen["load"]) or not self_consistent(seen["points"])):
        first = (error, seen)
        error, seen = gloo_sweep_error(tmp_path, 1)
        seen["first attempt"] = first
    if "refused" in seen:
        pytest.skip(f"twice the live sweep's largest sizes gave the fit no bandwidth (noise on a shared runner): {seen}")
    if error > 0.30 and not self_consistent(seen["points"]):
        pytest.skip(f"the live sweep measured the scheduler, not gloo (medians fall as size grows): {seen}")
    assert error <= 0.30, seen


@pytest.mark.slow
def test_killed_rank_keeps_rows_and_resume_finishes(tmp_path):
    out = tmp_path / "kill.csv"
    args = ["--out", str(out), "--ops", "all_reduce", "--min-size", "8", "--max-size", "8KiB", "--iters", "3",
            "--warmup", "1"]
    died = torchrun(args, extra_env={"COMMMODEL_CALIBRATE_FAIL_AT": "1:all_reduce:1024:kill"})
    assert died.returncode != 0
    line = next(line for line in died.stderr.splitlines() if line.startswith("error:"))
    assert "all_reduce of 1 KiB on 2 ranks" in line and "rank 1 stopped responding" in line, died.stderr[-2000:]
    assert "7 new row(s) kept" in line and "--resume" in line
    assert [r["size_bytes"] for r in read_measurements(out).rows] == [8, 16, 32, 64, 128, 256, 512]
    refused = torchrun(args)
    assert refused.returncode != 0 and "already exists; pass --resume" in refused.stderr
    resumed = torchrun([*args, "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    sizes = [r["size_bytes"] for r in read_measurements(out).rows]
    assert sizes == [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


@pytest.mark.slow
def test_hung_rank_times_out_with_a_clear_error(tmp_path):
    out = tmp_path / "hang.csv"
    hung = torchrun(["--out", str(out), "--ops", "all_reduce", "--min-size", "8", "--max-size", "64", "--iters", "2",
                     "--warmup", "0", "--timeout", "3s"],
                    extra_env={"COMMMODEL_CALIBRATE_FAIL_AT": "1:all_reduce:32:hang"})
    assert hung.returncode != 0
    line = next(line for line in hung.stderr.splitlines() if line.startswith("error:"))
    assert "all_reduce of 32 B on 2 ranks" in line and "within --timeout 3 s" in line and "rank 1" in line
    assert [r["size_bytes"] for r in read_measurements(out).rows] == [8, 16]


@pytest.mark.slow
def test_two_nodes_on_localhost(tmp_path):
    out, port = tmp_path / "nodes.csv", free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(node),
             "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port", str(port), *RUN,
             "--out", str(out), "--ops", "all_reduce", "--groups", "all,intra,inter", "--min-size", "1KiB",
             "--max-size", "16KiB", "--iters", "3", "--warmup", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        for node in (0, 1)
    ]
    outputs = [p.communicate(timeout=150) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs[0][1][-2000:]
    data = read_measurements(out)
    assert data.env["num_nodes"] == "2" and data.env["world_size"] == "2"
    assert {(r["group"], r["num_ranks"], r["num_nodes"]) for r in data.rows} == {("all", 2, 2), ("inter", 2, 2)}
    assert len(data.rows) == 2 * 5
    assert any("intra" in n and "one rank" in n for n in data.notes)


def test_run_outside_a_launcher_is_a_clear_error(tmp_path, monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(app, ["calibrate", "run", "--out", str(tmp_path / "x.csv")])
    assert result.exit_code == 1 and "torchrun --nproc_per_node 2 -m commmodel calibrate run" in result.output


@pytest.mark.parametrize("args, message", [
    (["--groups", "rack"], "--groups 'rack'"),
    (["--min-size", "1MiB", "--max-size", "1KiB"], "exceeds --max-size"),
    (["--factor", "1"], "--factor 1 must be > 1"),
    (["--ops", "gather"], "not benchmarked"),
    (["--min-size", "16G"], "ambiguous"),
])
def test_run_rejects_bad_options(tmp_path, args, message):
    result = CliRunner().invoke(app, ["calibrate", "run", "--out", str(tmp_path / "x.csv"), *args])
    assert result.exit_code == 1 and message in result.output


def test_algo_needs_nccl(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    result = CliRunner().invoke(app, ["calibrate", "run", "--out", str(tmp_path / "x.csv"), "--backend", "gloo",
                                      "--algo", "ring"])
    assert result.exit_code == 1 and "apply to the nccl backend only" in result.output
    assert not Path(tmp_path / "x.csv").exists()


@pytest.mark.slow
def test_missing_peer_at_start_is_one_line(tmp_path):
    env = _env({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
    result = subprocess.run([sys.executable, *RUN, "--out", str(tmp_path / "x.csv"), "--timeout", "1s"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: rank 0 could not join the gloo process group of 2 ranks"), result.stderr
    assert "MASTER_ADDR" in lines[-1]


@pytest.mark.slow
def test_rank0_death_says_rows_kept_and_torn_row_resumes(tmp_path):
    """Issue 16: rank 0 killed -> the surviving rank prints the rank-1-death line; a torn last row is dropped with
    a warning naming the line, and --resume measures its point again."""
    out = tmp_path / "kill0.csv"
    args = ["--out", str(out), "--ops", "all_reduce", "--min-size", "8", "--max-size", "1KiB", "--iters", "3",
            "--warmup", "1"]
    died = torchrun(args, extra_env={"COMMMODEL_CALIBRATE_FAIL_AT": "0:all_reduce:256:kill"})
    assert died.returncode != 0
    lines = [line for line in died.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, died.stderr[-2000:]
    assert "rank 0 stopped responding" in lines[0] and "5 new row(s) kept" in lines[0] and "--resume" in lines[0]
    assert [r["size_bytes"] for r in read_measurements(out).rows] == [8, 16, 32, 64, 128]
    text = out.read_text()
    out.write_text(text + "all_reduce,256,2,1,all,ri")  # what a crash mid-write leaves
    line_no = text.count("\n") + 1
    resumed = torchrun([*args, "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"kill0.csv:{line_no}: dropped the torn last row" in resumed.stderr
    assert [r["size_bytes"] for r in read_measurements(out).rows] == [8, 16, 32, 64, 128, 256, 512, 1024]


def test_nccl_without_cuda_and_mpi_without_mpirun_are_one_line(tmp_path, monkeypatch):
    """--backend nccl on a CPU torch ended in a traceback (torch._C has no _cuda_setDevice); --backend mpi under
    torchrun ran every worker as a 1-rank MPI job racing for --out. Both are now one line, and no file is made."""
    import torch
    from typer.testing import CliRunner

    from commmodel.cli.app import app

    if torch.cuda.is_available():
        pytest.skip("this check is for a torch without CUDA")
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "1")):
        monkeypatch.setenv(name, value)
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "x.csv"
    nccl = CliRunner().invoke(app, ["calibrate", "run", "--backend", "nccl", "--out", str(out)])
    assert nccl.exit_code == 1 and "--backend nccl needs CUDA GPUs" in nccl.output and "Traceback" not in nccl.output
    mpi = CliRunner().invoke(app, ["calibrate", "run", "--backend", "mpi", "--out", str(out)])
    assert mpi.exit_code == 1 and "--backend mpi runs under mpirun" in mpi.output
    assert not out.exists()


def test_a_rank_stopped_by_sigterm_blames_no_peer():
    """SIGTERM to gloo rank 0 said "rank 1 stopped responding (died or hung)" though rank 1 was alive, waiting in
    the collective: the stopped rank now says it was stopped, and names no peer."""
    from commmodel.calibrate.bench_failures import Stop, failure_message

    class Store:  # no peer posts a failure: they are all still waiting
        def set(self, key, value):
            pass

        def check(self, keys):
            return False

    message, silent = failure_message(Stop(), 0, 2, Store(), "all_reduce of 1 MiB", 120.0)
    assert silent == [] and "stopped by SIGTERM on rank 0" in message and "rank 1" not in message


def test_ctrl_c_names_no_peer_and_asks_for_resume():
    """Ctrl-C was not caught (KeyboardInterrupt is no Exception): a bare rank aborted ("terminate called without an
    active exception", exit 134) and nothing said how many points were kept. It ends like any failed run now: one
    line, no peer blamed, the rows kept and --resume named."""
    from commmodel.calibrate.bench_failures import end_run, failure_message
    from commmodel.errors import CalibrationError

    message, silent = failure_message(KeyboardInterrupt(), 0, 2, None, "all_gather of 64 MiB", 120.0)
    assert silent == [] and "interrupted (Ctrl-C) on rank 0" in message
    with pytest.raises(CalibrationError, match="47 new row.s. kept in out.csv; rerun with --resume to measure the rest"):
        end_run(message, silent, 0, 2, 47, "out.csv")
