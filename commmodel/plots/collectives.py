"""Collective plots: time and busbw vs message size per algorithm, and time vs GPU count.

Each function takes tidy records (from :mod:`commmodel.plots.sweep_data` or any DataFrame with the
same columns) and returns a matplotlib Figure. Artists carry a ``gid`` (``algo:ring``,
``crossover``, ``region:latency``, ``measured:…``, ``system:…``) so tests and notebooks can find them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commmodel.plots._style import (
    as_frame,
    colour_map,
    format_size_tick,
    format_time_tick,
    gpu_axis,
    new_figure,
    size_axis,
    time_axis,
)
from commmodel.plots.sweep_data import CollectiveSweep

_LATENCY_SHADE = "#fdf0d5"
_BANDWIDTH_SHADE = "#e3eef9"


def measurement_frame(measurements: Any, label: str = "measured") -> Any:
    """Measured points as size_bytes, time_s, busbw_GBps, label.

    Accepts the shipped nccl-tests table (time_us, setup_id) and commmodel's measurements CSV
    (time_s_median) as well as plain time_s.
    """
    frame = as_frame(measurements, ["size_bytes"], "measurements")
    if "time_s" not in frame.columns and "time_s_median" in frame.columns:
        frame["time_s"] = frame["time_s_median"].astype(float)
    if "time_s" not in frame.columns and "time_us" in frame.columns:
        frame["time_s"] = frame["time_us"].astype(float) * 1e-6
    for column in ("time_s", "busbw_GBps"):
        if column not in frame.columns:
            frame[column] = np.nan
    if "label" not in frame.columns:
        frame["label"] = frame["setup_id"] if "setup_id" in frame.columns else label
    return frame


def plot_collective_sweep(sweep: CollectiveSweep, measurements: Any = None, measured_label: str = "measured",
                          title: str | None = None, choice_label: str = "the library's choice"):
    """Two log-log panels, time and busbw vs message size, one line per algorithm.

    The algorithm the sweep's selection picks at each size (the ``best`` rows: the library's own choice, or the
    fastest) is drawn as a wide grey band under the curves, in the legend as ``choice_label``; each size where that
    choice changes is a dashed vertical line. The latency-bound region (below the chosen algorithm's balance size,
    where α terms dominate) and the bandwidth-bound region are shaded. ``measurements`` (size_bytes with time_s or
    time_us and/or busbw_GBps, optional label) are overlaid as markers.
    """
    rows = as_frame(sweep.rows, ["size_bytes", "algorithm", "time_s", "busbw_GBps"], "collective sweep")
    fig, (ax_time, ax_bw) = new_figure(1, 2, width_in=12.0, height_in=4.8)
    colours = colour_map(rows["algorithm"])
    measured = measurement_frame(measurements, measured_label) if measurements is not None else None
    sizes = rows["size_bytes"].to_numpy(dtype=float)
    lo, hi = float(sizes.min()), float(sizes.max())
    if measured is not None:
        lo, hi = min(lo, float(measured["size_bytes"].min())), max(hi, float(measured["size_bytes"].max()))
    balance_bytes = sweep.best_balance_bytes
    for ax, column in ((ax_time, "time_s"), (ax_bw, "busbw_GBps")):
        if np.isfinite(balance_bytes):
            ax.axvspan(lo, balance_bytes, color=_LATENCY_SHADE, zorder=0, gid="region:latency")
            ax.axvspan(balance_bytes, hi, color=_BANDWIDTH_SHADE, zorder=0, gid="region:bandwidth")
        for name, group in rows.groupby("algorithm", sort=False):
            group = group.sort_values("size_bytes")
            values = group[column].to_numpy(dtype=float)
            keep = values > 0
            nccl = bool(group["nccl"].iloc[0]) if "nccl" in group.columns else True
            ax.plot(group["size_bytes"].to_numpy()[keep], values[keep], color=colours[name],
                    lw=1.8 if nccl else 1.1, ls="-" if nccl else (0, (4, 2)), alpha=1.0 if nccl else 0.8,
                    label=str(name) if nccl else f"{name} ({_not_run_label(rows)})", gid=f"algo:{name}")
        _draw_choice(ax, rows, column, choice_label)
        for crossing in sweep.crossovers.itertuples():
            ax.axvline(crossing.size_bytes, color="#444444", ls="--", lw=1.0, gid="crossover")
        if measured is not None:
            for label, group in measured.groupby("label", sort=False):
                points = group[group[column].astype(float) > 0]
                if len(points):
                    ax.plot(points["size_bytes"], points[column].astype(float), ls="none", marker="o", ms=5,
                            mfc="none", mec="black", mew=1.1, label=str(label), gid=f"measured:{label}")
        size_axis(ax.xaxis, lo, hi)
        ax.set_xlim(lo, hi) if hi > lo else ax.set_xlim(lo / 2, hi * 2)  # one size: a window around it
        ax.set_xlabel("message size S (bytes, nccl-tests convention)")
        ax.grid(True, which="major", color="#dddddd", lw=0.6)
    time_axis(ax_time.yaxis)
    ax_time.set_ylabel("time (s)")
    ax_time.set_title("time per collective")
    ax_bw.set_yscale("log")
    ax_bw.set_ylabel("busbw (GB/s, 1 GB = 10⁹ B)")
    ax_bw.set_title("bus bandwidth (nccl-tests busbw)")
    for ax in (ax_time, ax_bw):
        _annotate_regions(ax, lo, hi, balance_bytes)
        _annotate_crossovers(ax, sweep)
    ax_time.legend(loc="center left", fontsize=8, title="algorithm / data", title_fontsize=8)
    fig.suptitle(title or f"{sweep.op} on {sweep.num_ranks} ranks of {sweep.system}")
    return fig


def _not_run_label(rows: Any) -> str:
    """How a dashed curve is labelled: "textbook" beside NCCL's registry; a host library's own forms that its rule
    does not pick here are its algorithms all the same ("not chosen")."""
    from commmodel.collectives.protocols import PROTOCOLS

    protocols = set(rows["protocol"].astype(str)) if "protocol" in rows.columns else set()
    return "not chosen here" if protocols - set(PROTOCOLS) - {"none", "nan", ""} else "textbook"


def _draw_choice(ax, rows: Any, column: str, label: str) -> None:
    """The chosen algorithm's value at each size (the ``best`` rows) as a wide translucent band under the curves."""
    if "best" not in rows.columns:
        return
    chosen = rows[rows["best"].astype(bool)].sort_values("size_bytes")
    values = chosen[column].to_numpy(dtype=float)
    keep = values > 0
    if keep.any():
        ax.plot(chosen["size_bytes"].to_numpy()[keep], values[keep], color="black", lw=6.0, alpha=0.16,
                solid_capstyle="round", zorder=1, label=label, gid="choice")


def _annotate_regions(ax, lo: float, hi: float, balance_bytes: float) -> None:
    if not np.isfinite(balance_bytes):
        return
    transform = ax.get_xaxis_transform()
    edge = format_size_tick(balance_bytes)
    if balance_bytes / lo > 4:
        ax.text(np.sqrt(lo * balance_bytes), 0.97, f"latency-bound\n(S < {edge})", transform=transform,
                ha="center", va="top", fontsize=8, color="#8a6d00")
    if hi / balance_bytes > 4:
        ax.text(np.sqrt(balance_bytes * hi), 0.03, f"bandwidth-bound\n(S > {edge})", transform=transform,
                ha="center", va="bottom", fontsize=8, color="#2b5d8a")


def _annotate_crossovers(ax, sweep: CollectiveSweep) -> None:
    transform = ax.get_xaxis_transform()
    for i, crossing in enumerate(sweep.crossovers.itertuples()):
        ax.text(crossing.size_bytes, 0.55 - 0.12 * (i % 3),
                f" choice {crossing.below}→{crossing.above}\n {format_size_tick(crossing.size_bytes)}",
                transform=transform, fontsize=7, color="#222222", ha="left", va="center")


def plot_scaling(records: Any, y: str = "time_s", title: str | None = None, group: str = "system"):
    """One line per system of ``y`` (time_s, step_time_s, tokens_per_s, busbw_GBps, …) vs GPU count."""
    frame = as_frame(records, [group, "num_gpus", y], "scaling records")
    fig, ax = new_figure(1, 1, width_in=7.5, height_in=4.8)
    colours = colour_map(frame[group])
    for name, part in frame.groupby(group, sort=False):
        part = part.sort_values("num_gpus")
        ax.plot(part["num_gpus"], part[y].astype(float), marker="o", ms=4, lw=1.8, color=colours[name],
                label=str(name), gid=f"system:{name}")
    gpu_axis(ax.xaxis, frame["num_gpus"])
    ax.set_xlabel("GPUs")
    if y.endswith("_s") and not y.endswith("_per_s"):
        time_axis(ax.yaxis)
        ax.set_ylabel(f"{y.removesuffix('_s').replace('_', ' ')} (s)")
    elif y == "mfu":  # a fraction of the peak: linear, in percent
        from matplotlib.ticker import PercentFormatter

        ax.set_ylim(0.0, max(0.05, float(frame[y].astype(float).max()) * 1.15))
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
        ax.set_ylabel(_Y_LABELS[y])
    else:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        subs = (1.0, 2.0, 5.0) if np.log10(hi / lo) < 3 else (1.0,)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: _count(value)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel(_Y_LABELS.get(y, y))
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    ax.legend(title=group, fontsize=8, title_fontsize=8)
    ax.set_title(title or f"{_Y_LABELS.get(y, y).split(' (')[0]} vs GPU count")
    return fig


_Y_LABELS = {
    "time_s": "time (s)",
    "step_time_s": "step time (s)",
    "tokens_per_s": "throughput (tokens/s)",
    "mfu": "MFU (% of the dense peak)",
    "busbw_GBps": "busbw (GB/s)",
    "algbw_GBps": "algbw (GB/s)",
}


def _count(value: float) -> str:
    """2k, 1.5M, 300: compact tick labels for counts and rates."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def describe_crossovers(sweep: CollectiveSweep) -> list[str]:
    """Human lines for the crossovers and the balance size (for notebooks and CLI output)."""
    lines = [f"{c.below} → {c.above} at {format_size_tick(c.size_bytes)}" for c in sweep.crossovers.itertuples()]
    if np.isfinite(sweep.best_balance_bytes):
        best = sweep.rows[sweep.rows["best"]]
        t = best.iloc[(best["size_bytes"] - sweep.best_balance_bytes).abs().argmin()]["time_s"]
        lines.append(f"latency = bandwidth term at {format_size_tick(sweep.best_balance_bytes)} (≈ {format_time_tick(t)})")
    return lines
