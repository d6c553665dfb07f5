"""`calibrate run --backend mpi` end to end under mpirun with mpi4py (slow; skipped without mpirun or mpi4py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from commmodel.calibrate.bench_ops import BENCH_OPS
from commmodel.cli.app import app
from commmodel.collectives import busbw_factor
from commmodel.io.measurements import read_measurements

pytest.importorskip("torch")


def mpirun(args: list[str], nproc: int = 2, timeout_s: int = 150) -> subprocess.CompletedProcess:
    """``mpirun -np N python -m commmodel calibrate run --backend mpi ARGS`` (root allowed, oversubscribed: the CI
    and development machines have fewer cores than ranks)."""
    pytest.importorskip("mpi4py")
    launcher = shutil.which("mpirun")
    if launcher is None:
        pytest.skip("mpirun not installed")
    drop = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "COMMMODEL_CALIBRATE_FAIL_AT"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [launcher, "-np", str(nproc), sys.executable, "-m", "commmodel", "calibrate", "run", "--backend", "mpi",
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)


@pytest.mark.slow
def test_mpi_two_ranks_every_primitive_and_resume(tmp_path):
    out = tmp_path / "mpi.csv"
    args = ["--out", str(out), "--min-size", "8", "--iters", "3", "--warmup", "1", "--system", "cpu-host"]
    first = mpirun([*args, "--max-size", "1KiB"])
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.count("point(s) written") == 1 and "(mpi, 2 ranks on 1 node(s))" in first.stdout
    resumed = mpirun([*args, "--max-size", "4KiB", "--resume"])  # the same append-and-resume rules as torch: only 2 KiB and 4 KiB are new
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"{2 * len(BENCH_OPS)} point(s) written" in resumed.stdout
    data = read_measurements(out)
    assert data.env["backend"] == "mpi" and data.env["world_size"] == "2" and data.env["launcher"] == "mpirun"
    assert data.env["mpi_library"] and data.env["mpi4py"] and data.env["hosts"] and data.env["system"] == "cpu-host"
    assert {r["op"] for r in data.rows} == set(BENCH_OPS)  # MPI has every primitive: nothing skipped
    assert len(data.rows) == 10 * len(BENCH_OPS)  # 8 B .. 4 KiB
    for row in data.rows:
        assert (row["num_ranks"], row["num_nodes"], row["algorithm"], row["dtype"]) == (2, 1, "auto", "float32")
        assert 0 < row["time_s_p10"] <= row["time_s_median"] <= row["time_s_p90"]
        algbw = row["size_bytes"] / row["time_s_median"] / 1e9
        assert row["busbw_GBps"] == pytest.approx(algbw * float(busbw_factor(row["op"], 2)), rel=1e-4)


def test_mpi_backend_refuses_16_bit_and_nccl_knobs(tmp_path):
    for extra, message in ((["--dtype", "bfloat16"], "float32 only"), (["--algo", "ring"], "nccl backend only")):
        result = CliRunner().invoke(app, ["calibrate", "run", "--backend", "mpi", "--out", str(tmp_path / "x.csv"),
                                          *extra])
        assert result.exit_code == 1 and message in result.output
        assert not (tmp_path / "x.csv").exists()


def test_unknown_backend_lists_mpi(tmp_path):
    result = CliRunner().invoke(app, ["calibrate", "run", "--backend", "ucc", "--out", str(tmp_path / "x.csv")])
    assert result.exit_code == 1 and "use auto, nccl, gloo or mpi" in result.output
