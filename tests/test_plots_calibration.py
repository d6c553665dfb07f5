"""Calibration figure: points, fitted regimes and residuals drawn where the fit puts them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from commmodel.plots._style import PlotInputError
from commmodel.plots.calibration import band_index, plot_calibration, residual_table


@dataclass(frozen=True)
class _Segment:
    size_min_bytes: float
    size_max_bytes: float
    intercept_s: float
    slope_s_per_byte: float
    alpha_s: float
    bw_bytes_per_s: float

    def predict_s(self, size):
        return self.intercept_s + self.slope_s_per_byte * np.asarray(size, dtype=float)


@dataclass(frozen=True)
class _Fit:
    """The fields of commmodel.calibrate.fit.FitResult that the figure reads."""

    label: str
    sizes_bytes: np.ndarray
    times_s: np.ndarray
    segments: tuple
    r2: float

    def predict_s(self, size):
        return self.segments[0].predict_s(size)


SIZES = 2.0 ** np.arange(3, 31, 3)  # 8 B .. 1 GiB
A_S, B_S_PER_BYTE = 20e-6, 1 / 100e9
TIMES = (A_S + B_S_PER_BYTE * SIZES) * (1 + 0.02 * np.where(np.arange(SIZES.size) % 2, 1, -1))  # ±2 % around the line
FIT = _Fit("all_reduce on 8 ranks", SIZES, TIMES, (_Segment(8, 2**30, A_S, B_S_PER_BYTE, A_S / 14, 1.75e11),), 0.999)


def test_bands_follow_design_section_9():
    assert list(band_index(np.array([1024, 64 * 1024, 64 * 1024 + 1, 64 * 2**20 - 1, 64 * 2**20]))) == [0, 0, 1, 1, 2]


def test_points_line_and_residuals():
    profile = 1.1 * (A_S + B_S_PER_BYTE * SIZES)
    fig = plot_calibration(FIT, profile_times_s=profile)
    ax, ax_res = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and ax_res.get_xscale() == "log"
    assert "(s)" in ax.get_ylabel() and "bytes" in ax_res.get_xlabel() and "%" in ax_res.get_ylabel()
    assert "R² = 0.9990" in ax.get_title()
    lines = {line.get_gid(): line for line in ax.get_lines()}
    assert np.allclose(lines["measured"].get_ydata(), TIMES)
    assert np.allclose(lines["profile"].get_ydata(), profile)
    seg = lines["segment:0"]
    assert np.allclose(seg.get_ydata(), A_S + B_S_PER_BYTE * np.asarray(seg.get_xdata()))
    # α per latency step and the fixed time it makes (8 ranks' ring all-reduce: 14 steps), B as the busbw it is
    assert "α 1.43 µs/step × 14 = 20 µs" in seg.get_label() and "busbw 175.0 GB/s" in seg.get_label()
    (res,) = [c for c in ax_res.collections if c.get_gid() == "residuals"]
    expected = 100 * (A_S + B_S_PER_BYTE * SIZES - TIMES) / TIMES
    assert np.allclose(res.get_offsets()[:, 1], expected)
    assert np.allclose(np.abs(expected), 100 * 0.02 / 1.02, rtol=0.05)  # ≈ ±1.96 %
    assert ax.get_legend() is not None


def test_residual_table_per_band():
    table = residual_table(FIT)
    assert [row["num_points"] for row in table] == [np.sum(SIZES <= 65536), np.sum((SIZES > 65536) & (SIZES < 2**26)),
                                                    np.sum(SIZES >= 2**26)]
    for row in table:
        assert row["median_abs_rel_err"] == pytest.approx(0.02, rel=0.05)


def test_profile_times_must_match_the_points():
    with pytest.raises(PlotInputError, match="one predicted time per measured size"):
        plot_calibration(FIT, profile_times_s=[1.0, 2.0])


def test_with_the_real_fit():
    fit_module = pytest.importorskip("commmodel.calibrate.fit", reason="calibration fit (issue 5) not installed")
    sizes = 2.0 ** np.arange(3, 31)
    times = 25e-6 + sizes / 80e9
    fit = fit_module.fit_alpha_beta(sizes, times, "all_reduce", 8)
    fig = plot_calibration(fit)
    (res,) = [c for c in fig.axes[1].collections if c.get_gid() == "residuals"]
    assert np.allclose(res.get_offsets()[:, 1], 100 * fit.relative_residuals, atol=1e-9)
    assert np.max(np.abs(res.get_offsets()[:, 1])) < 1.0  # noiseless line: the fit reproduces it


def test_a_gloo_files_curves_are_priced_in_gloo_as_sweep_and_fit_price_them():
    """plot calibration of a real gloo run (tests/fixtures/calibrate/gloo_2ranks_devvm.csv, cpu-host): the profile
    curve is `commmodel sweep`'s gloo time and the calibrated one is the profile `calibrate fit` writes (before: both
    curves NCCL-priced and identical, 233 us against sweep's 405 us at 1 KiB)."""
    from pathlib import Path

    from commmodel.calibrate.groups import fit_measurements
    from commmodel.calibrate.host_report import host_calibrated, host_fit_report, host_model_times_s
    from commmodel.cli.plot import _profile_curves
    from commmodel.io.measurements import read_measurements
    from commmodel.io.profiles import load_system

    csv = Path(__file__).parent / "fixtures" / "calibrate" / "gloo_2ranks_devvm.csv"
    data = read_measurements(csv)
    groups = fit_measurements(data.rows, ops=["all_reduce"])
    group = groups[0]
    curves = _profile_curves(data, csv, "cpu-host", groups, group)
    system = load_system("cpu-host")
    sizes = group.fit.sizes_bytes
    shipped = host_model_times_s(system, "gloo", "all_reduce", group.fit.num_ranks, sizes)
    assert np.array_equal(curves["cpu-host profile"], shipped)
    fitted = host_fit_report(data, system, "gloo", csv, None, "cpu-host", ["all_reduce"])[0]["profile"]["tiers"][0]
    assert any(v["value"] != v["base_value"] for v in fitted["values"].values())  # the fit moved the gloo costs
    calibrated = host_calibrated(data, system, "gloo", csv, ["all_reduce"]).system  # what calibrate fit writes
    assert np.array_equal(curves["cpu-host calibrated with this file"],
                          host_model_times_s(calibrated, "gloo", "all_reduce", group.fit.num_ranks, sizes))
    assert not np.allclose(curves["cpu-host calibrated with this file"], shipped)


def test_a_fit_no_better_than_the_mean_is_drawn_as_points_alone(tmp_path):
    """A table of random times (weighted R² -0.012, a 'bandwidth' of 2.2 TB/s over NDR) is not drawn as a fit nor
    used to calibrate the profile: the points alone, with the reason (docs/plots.md)."""
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    csv = Path(__file__).parent / "fixtures" / "calibrate" / "random_times_16ranks.csv"
    out = CliRunner().invoke(app, ["plot", "calibration", str(csv), "--out", str(tmp_path / "c.png"), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert "weighted R² -0.012 ≤ 0" in doc["note"] and doc["title"].endswith("(no α-β fit)")
    assert (tmp_path / "c.png").stat().st_size > 0


def test_a_gpu_librarys_sweep_against_a_cpu_host_base_is_refused(tmp_path):
    """An nccl-tests table drawn against cpu-host (gloo/MPI on CPU ranks) was priced 30x off without a word."""
    from pathlib import Path

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    csv = Path(__file__).parent / "fixtures" / "calibrate" / "synthetic_2n_h100_so080.csv"
    out = CliRunner().invoke(app, ["plot", "calibration", str(csv), "--base", "cpu-host", "--out",
                                   str(tmp_path / "c.png")])
    assert out.exit_code == 1 and "measured with nccl-tests (system dgx-h100)" in out.output
    assert not (tmp_path / "c.png").exists()
