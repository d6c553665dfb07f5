"""Shared drawing helpers: figures without pyplot, size/time tick labels, a fixed palette.

Figures are built with :class:`matplotlib.figure.Figure` directly (never ``pyplot``), so no
global state, no GUI backend and nothing to close: the Agg canvas draws and saves them.
matplotlib is imported inside functions so importing :mod:`commmodel.plots` stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from commmodel.errors import CommModelError

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22")
"""Colour per series, in order (matplotlib's tab10, reordered so the first two contrast)."""

TERM_COLOURS = {
    "compute": "#4c72b0",
    "tp": "#dd8452",
    "pp": "#55a868",
    "bubble": "#c44e52",
    "dp": "#8172b3",
    "ep": "#937860",
    "overlap": "#bcbd22",
    "straggler": "#17becf",
    "cp": "#da8bc3",
    "optimizer": "#4d4d4d",
    "schedule": "#e5ae38",
    "copies": "#6d904f",
    "offload": "#8ee0e0",
    "other": "#8c8c8c",
}
"""Colour per step-time term family (the part of a breakdown key before the slash)."""

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_TIME = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


class PlotInputError(CommModelError):
    """Records handed to a plot that lack a column it needs, or hold nothing to draw."""


def new_figure(nrows: int = 1, ncols: int = 1, width_in: float = 7.0, height_in: float = 4.5, **kwargs: Any):
    """A (Figure, axes) pair backed by the Agg canvas; ``axes`` is an array when there are several."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=True, **kwargs)
    return fig, axes


def format_size_tick(size_bytes: float) -> str:
    """8 B, 4 KiB, 16 MiB, 2 GiB: binary prefixes, as nccl-tests sizes are powers of two."""
    if size_bytes <= 0:
        return "0"
    power = min(int(math.floor(math.log(size_bytes, 1024) + 1e-9)), len(_BINARY) - 1)
    value = size_bytes / 1024**power
    text = f"{value:.0f}" if abs(value - round(value)) < 1e-6 else f"{value:.3g}"
    return f"{text} {_BINARY[power]}"


def format_time_tick(time_s: float) -> str:
    """1 ns, 10 µs, 1.5 ms, 2 s."""
    if time_s <= 0:
        return "0"
    for scale, unit in _TIME:
        if time_s >= scale * 0.9999 or unit == "ns":
            return f"{time_s / scale:.3g} {unit}"
    return f"{time_s:.3g} s"  # pragma: no cover


def size_axis(axis, min_bytes: float, max_bytes: float, max_ticks: int = 10) -> None:
    """Log₂ size axis with ticks at powers of two (a power of 4/16/… apart) labelled 1 KiB, 1 MiB, …"""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    axis.axes.set_xscale("log", base=2) if axis.axis_name == "x" else axis.axes.set_yscale("log", base=2)
    lo = math.floor(math.log2(max(min_bytes, 1.0)))
    hi = math.ceil(math.log2(max(max_bytes, 2.0)))
    step = 1
    while (hi - lo) / step > max_ticks:
        step *= 2
    first = lo + (-lo) % step
    axis.set_major_locator(FixedLocator([2.0**p for p in range(first, hi + 1, step)]))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: format_size_tick(value)))
    axis.set_minor_locator(NullLocator())


def time_axis(axis) -> None:
    """Log₁₀ time axis in seconds with tick labels carrying their unit (10 µs, 1 ms).

    Call after the data are drawn: a range under three decades also gets ticks at 2× and 5×, under one
    decade at every integer multiple.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axes = axis.axes
    axes.set_yscale("log") if axis.axis_name == "y" else axes.set_xscale("log")
    lo, hi = axes.get_ylim() if axis.axis_name == "y" else axes.get_xlim()
    decades = math.log10(max(hi, 1e-300) / max(lo, 1e-300))
    subs = tuple(range(1, 10)) if decades < 1 else (1.0, 2.0, 5.0) if decades < 3 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: format_time_tick(value)))
    axis.set_minor_formatter(NullFormatter())


def gpu_axis(axis, counts: Iterable[float]) -> None:
    """Log₂ GPU-count axis with a tick at every count drawn."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    values = sorted({float(c) for c in counts})
    axis.axes.set_xscale("log", base=2)
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,.0f}"))
    axis.set_minor_locator(NullLocator())


def as_frame(records: Any, required: Sequence[str], what: str):
    """Records (DataFrame, list of dicts, dict of columns) as a DataFrame holding ``required`` columns."""
    import pandas as pd

    frame = records.copy() if isinstance(records, pd.DataFrame) else pd.DataFrame(records)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise PlotInputError(
            f"{what}: records lack column(s) {', '.join(missing)}; they have {', '.join(map(str, frame.columns)) or 'none'}"
        )
    if frame.empty:
        raise PlotInputError(f"{what}: no records to draw; give at least one row")
    return frame


def colour_map(labels: Iterable[str]) -> Mapping[str, str]:
    """A stable colour per label, in first-seen order."""
    out: dict[str, str] = {}
    for label in labels:
        if label not in out:
            out[label] = PALETTE[len(out) % len(PALETTE)]
    return out


def _family(term: str) -> str:
    return "bubble" if term == "pp/bubble" else term.split("/")[0]


def mix_white(colour: str, amount: float) -> str:
    """``colour`` (#rrggbb) mixed with white: 0 = unchanged, 1 = white."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{int(round(c + (255 - c) * amount)):02x}" for c in rgb)


def term_colours(terms: Iterable[str]) -> dict[str, str]:
    """A colour per breakdown term: its family's (``dp/…`` -> dp), lighter for each further term of a family."""
    seen: dict[str, int] = {}
    out = {}
    for term in terms:
        family = _family(term) if _family(term) in TERM_COLOURS else "other"  # unlisted families share one shade run
        k = seen.get(family, 0)
        seen[family] = k + 1
        out[term] = mix_white(TERM_COLOURS.get(family, TERM_COLOURS["other"]), min(0.3 * k, 0.75))
    return out
