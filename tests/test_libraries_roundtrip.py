"""The gloo round trip: `calibrate fit` on a CSV written by `calibrate run --backend gloo` solves gloo's own call
cost, α, β (and γ) against its own algorithms (calibrate/host_fit.py) and gives a profile whose
`--library gloo` model reproduces the measured points above 64 KiB (issue 14 target: 25%, median over sizes).

The CSV is a real artefact: ``tests/fixtures/calibrate/gloo_2ranks_devvm.csv``, 2 gloo ranks (torchrun
--standalone) on the 2-vCPU development VM, all_reduce / all_gather / broadcast 1 KiB-4 MiB, 30 iterations, the
environment block on top. A fixed file keeps the test deterministic (a sweep made inside a CI test on a shared
runner measures the scheduler); `tests/test_calibrate_bench.py` runs the live sweep (slow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.collectives import collective_cost
from commmodel.hardware.cluster import Cluster
from commmodel.io.measurements import read_measurements
from commmodel.io.profiles import load_system

CSV = Path(__file__).parent / "fixtures" / "calibrate" / "gloo_2ranks_devvm.csv"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "gloo.yaml"
    result = CliRunner().invoke(app, ["calibrate", "fit", str(CSV), "--base", "cpu-host", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return Cluster.for_gpus(load_system(str(out)), 2, 2).system


def _errors(system, op: str) -> np.ndarray:
    rows = [r for r in read_measurements(CSV).rows if r["op"] == op and r["size_bytes"] >= 64 * 2**10]
    sizes = np.array([r["size_bytes"] for r in rows], dtype=float)
    measured = np.array([r["time_s_median"] for r in rows])
    predicted = collective_cost(op, sizes, system, 2, 2, library="gloo", selection="library").time_s
    return predicted / measured - 1


def test_the_csv_is_a_gloo_run():
    data = read_measurements(CSV)
    assert (data.env["backend"], data.env["world_size"], data.env["launcher"]) == ("gloo", "2", "torchrun")


OPS = ("all_reduce", "all_gather", "broadcast")


def test_fit_solves_one_transport_for_every_op_within_25_percent(fitted):
    """One call cost, α, β, γ for the three primitives at once (gloo's ring and binomial tree, no freedom per op):
    the median |error| over every point ≥ 64 KiB is within the issue's 25%, and no op is off by more than 35% (this
    fixture: all-gather 11%, all-reduce 31%, broadcast 17% — its all-reduce points scatter ±40% between sizes)."""
    assert fitted.host_libraries["gloo"].message_s.source.startswith(f"calibrated: {CSV.name}")
    errors = {op: np.abs(_errors(fitted, op)) for op in OPS}
    assert all(len(e) == 7 for e in errors.values())
    assert float(np.median(np.concatenate(list(errors.values())))) <= 0.25, errors
    assert max(float(np.median(e)) for e in errors.values()) <= 0.35, errors


def test_the_fit_carries_the_information(fitted):
    """The base profile's defaults are further from these points than the fit (the test can fail)."""
    base = Cluster.for_gpus(load_system("cpu-host"), 2, 2).system
    fit_err = np.median(np.concatenate([np.abs(_errors(fitted, op)) for op in OPS]))
    base_err = np.median(np.concatenate([np.abs(_errors(base, op)) for op in OPS]))
    assert fit_err < base_err
