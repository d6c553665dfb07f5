"""Calibration figure: measured points, the fitted α-β regimes, and relative residuals per size band.

Takes one fit (:class:`commmodel.calibrate.fit.FitResult` or anything with the same fields:
``label``, ``sizes_bytes``, ``times_s``, ``segments`` with ``size_min_bytes``/``size_max_bytes``/
``alpha_s``/``bw_bytes_per_s``/``predict_s``, ``predict_s``, ``r2``) and, optionally, the times the
profile predicted before calibration, so the figure shows what the fit changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commmodel.plots._style import (
    PALETTE,
    PlotInputError,
    format_size_tick,
    format_time_tick,
    new_figure,
    size_axis,
    time_axis,
)
from commmodel.size_bands import BAND_DISPLAY, LARGE_MIN_BYTES, SMALL_MAX_BYTES, band_codes

BAND_EDGES_BYTES = (float(SMALL_MAX_BYTES), float(LARGE_MIN_BYTES))
"""Size bands of DESIGN §9 (:mod:`commmodel.size_bands`): ≤ 64 KiB (latency-bound), 64 KiB–64 MiB, ≥ 64 MiB."""
BAND_LABELS = BAND_DISPLAY
"""Legend labels of the bands, in :func:`band_index` order (:data:`commmodel.size_bands.BAND_DISPLAY`)."""
_BAND_SHADES = ("#fdf0d5", "#f4f4f4", "#e3eef9")


band_index = band_codes
"""0, 1 or 2: the DESIGN §9 band of each size (:func:`commmodel.size_bands.band_codes`)."""


def _bw_text(bw_bytes_per_s: float) -> str:
    """The regime's B: the bus bandwidth (nccl-tests busbw convention), in GB/s without scientific notation."""
    if not np.isfinite(bw_bytes_per_s):
        return "busbw ∞ (latency-bound)"
    return f"busbw {bw_bytes_per_s / 1e9:,.1f} GB/s" if bw_bytes_per_s >= 1e10 else f"busbw {bw_bytes_per_s / 1e9:.3g} GB/s"


def _alpha_text(segment: Any) -> str:
    """α per latency step and the fixed time it makes (a = steps·α): "α 1.0 µs/step × 30 = 30.0 µs"."""
    steps = segment.intercept_s / segment.alpha_s if segment.alpha_s > 0 else 0.0
    if steps <= 1.0 + 1e-9:
        return f"α {format_time_tick(segment.alpha_s)}"
    return f"α {format_time_tick(segment.alpha_s)}/step × {steps:.0f} = {format_time_tick(segment.intercept_s)}"


def plot_calibration(fit: Any, profile_times_s: Any = None, profile_label: str = "profile before calibration",
                     title: str | None = None):
    """Top: measured time vs size (log-log), each fitted regime t = a + b·S over its range (with α and
    B), and the profile's prediction when given (an array, or {label: array} for several, e.g. before
    and after calibration). Bottom: (fit − measured)/measured per point in %,
    with the median |residual| of each size band. Artists carry gids ``measured``, ``segment:<i>``,
    ``profile`` and ``residuals``."""
    sizes = np.asarray(fit.sizes_bytes, dtype=float)
    times = np.asarray(fit.times_s, dtype=float)
    if sizes.size == 0:
        raise PlotInputError("calibration fit: no measured points to draw")
    fig, (ax, ax_res) = new_figure(2, 1, width_in=9.0, height_in=7.0, sharex=True,
                                   gridspec_kw={"height_ratios": [2.3, 1.0]})
    lo, hi = float(sizes.min()) / 1.5, float(sizes.max()) * 1.5
    for axis in (ax, ax_res):
        for k, (start, end) in enumerate(zip((lo, *BAND_EDGES_BYTES), (*BAND_EDGES_BYTES, hi))):
            if end > lo and start < hi:
                axis.axvspan(max(start, lo), min(end, hi), color=_BAND_SHADES[k], zorder=0, gid=f"band:{k}")
    ax.plot(sizes, times, ls="none", marker="o", ms=5, mfc="none", mec="black", mew=1.1, label="measured",
            gid="measured")
    grid = np.geomspace(lo, hi, 200)
    for i, segment in enumerate(fit.segments):
        colour = PALETTE[i % len(PALETTE)]
        inside = (grid >= segment.size_min_bytes / 1.2) & (grid <= segment.size_max_bytes * 1.2)
        ax.plot(grid[inside], segment.predict_s(grid[inside]), color=colour, lw=2.0, gid=f"segment:{i}",
                label=(f"fit {i + 1}: {format_size_tick(segment.size_min_bytes)}–{format_size_tick(segment.size_max_bytes)}, "
                       f"{_alpha_text(segment)}, {_bw_text(segment.bw_bytes_per_s)}"))
    if profile_times_s is not None:
        curves = profile_times_s if isinstance(profile_times_s, dict) else {profile_label: profile_times_s}
        for k, (name, values) in enumerate(curves.items()):
            profile = np.asarray(values, dtype=float)
            if profile.shape != sizes.shape:
                raise PlotInputError(f"profile times {name!r}: {profile.size} values for {sizes.size} measured sizes; "
                                     "give one predicted time per measured size")
            ax.plot(sizes, profile, color=("#7f7f7f", "#9467bd", "#8c564b")[k % 3], ls=("--", ":", "-.")[k % 3],
                    lw=1.4, label=str(name), gid="profile" if k == 0 else f"profile:{k}")
    size_axis(ax.xaxis, lo, hi)
    ax.set_xlim(lo, hi) if hi > lo else ax.set_xlim(lo / 2, hi * 2)  # one size: a window around it
    time_axis(ax.yaxis)
    ax.set_ylabel("time (s)")
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    ax.legend(loc="upper left", fontsize=7.5)
    ax.set_title(title or f"{fit.label}: α-β fit, weighted R² = {fit.r2:.4f}", fontsize=10)

    residual_pct = 100.0 * (np.asarray(fit.predict_s(sizes), dtype=float) - times) / times
    bands = band_index(sizes)
    ax_res.axhline(0.0, color="black", lw=0.8)
    ax_res.scatter(sizes, residual_pct, c=[PALETTE[b] for b in bands], s=18, zorder=3, gid="residuals")
    ax_res.set_ylabel("residual (%)\n(fit − measured) / measured")
    ax_res.set_xlabel("message size S (bytes)")
    ax_res.grid(True, which="major", color="#dddddd", lw=0.6)
    limit = max(5.0, float(np.nanmax(np.abs(residual_pct))) * 1.3)
    ax_res.set_ylim(-limit, limit)
    transform = ax_res.get_xaxis_transform()
    for k, name in enumerate(BAND_LABELS):
        mask = bands == k
        if mask.any():
            centre = float(np.exp(np.mean(np.log(sizes[mask]))))
            ax_res.text(centre, 0.97, f"{name}: median |r| {np.median(np.abs(residual_pct[mask])):.1f}%",
                        transform=transform, ha="center", va="top", fontsize=7.5, color=PALETTE[k])
    return fig


def plot_measured(sizes_bytes: Any, times_s: Any, title: str):
    """Measured time vs size alone (log-log; gid ``measured``): a sweep no α-β form could be fitted to is still
    drawn, so the user sees what was measured."""
    sizes, times = np.asarray(sizes_bytes, dtype=float), np.asarray(times_s, dtype=float)
    if sizes.size == 0:
        raise PlotInputError("calibration: no measured points to draw")
    fig, ax = new_figure(1, 1, width_in=9.0, height_in=4.5)
    lo, hi = float(sizes.min()) / 1.5, float(sizes.max()) * 1.5
    ax.plot(sizes, times, ls="none", marker="o", ms=5, mfc="none", mec="black", mew=1.1, label="measured",
            gid="measured")
    size_axis(ax.xaxis, lo, hi)
    ax.set_xlim(lo, hi)
    time_axis(ax.yaxis)
    ax.set_xlabel("message size S (bytes)")
    ax.set_ylabel("time (s)")
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    ax.legend(loc="best", fontsize=7.5)
    ax.set_title(title, fontsize=10)
    return fig


def residual_table(fit: Any) -> list[dict[str, Any]]:
    """Per size band: points, median and worst |(fit − measured)/measured| (fractions)."""
    sizes = np.asarray(fit.sizes_bytes, dtype=float)
    times = np.asarray(fit.times_s, dtype=float)
    residual = np.abs(np.asarray(fit.predict_s(sizes), dtype=float) - times) / times
    bands = band_index(sizes)
    return [
        {"band": name, "num_points": int((bands == k).sum()),
         "median_abs_rel_err": float(np.median(residual[bands == k])) if (bands == k).any() else float("nan"),
         "max_abs_rel_err": float(np.max(residual[bands == k])) if (bands == k).any() else float("nan")}
        for k, name in enumerate(BAND_LABELS)
    ]
