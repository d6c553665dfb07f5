"""Planner figures: stacked step-time breakdown of the top layouts, and what-if bars across systems.

Both take the records the planner returns (``PlanResult.to_frame()`` / ``records()``, and
``Comparison.rows()``): one row per layout or target, breakdown terms as ``<term>/exposed_s``
columns (``compute``, ``tp/all_reduce``, ``pp/p2p``, ``pp/bubble``, ``dp/all_reduce``, …), whose sum
is the step time (DESIGN §5: link time that hides under compute does not lengthen the step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from commmodel.plots._style import PlotInputError, as_frame, colour_map, format_time_tick, new_figure, term_colours

_TERM_ORDER = ("compute", "tp/", "sp/", "cp/", "ep/", "pp/p2p", "pp/bubble", "dp/", "zero/", "optimizer")


def breakdown_terms(columns: Sequence[str]) -> list[str]:
    """Terms that have an ``<term>/exposed_s`` column, compute first, then TP, PP, bubble, DP."""
    terms = [c[: -len("/exposed_s")] for c in columns if str(c).endswith("/exposed_s")]

    def order(term: str) -> tuple[int, str]:
        for i, prefix in enumerate(_TERM_ORDER):
            if term == prefix or (prefix.endswith("/") and term.startswith(prefix)) or term.startswith(prefix + "/"):
                return i, term
        return len(_TERM_ORDER), term

    return sorted(terms, key=order)


def layout_name(row: Any) -> str:
    """``tp8 pp4 dp32 ep8 mb1 z1 sel sp vpp2`` from a layout row (or its ``label`` column when present); cp, ep and
    etp where above 1 (MoE layouts differ by them)."""
    if "label" in row and isinstance(row["label"], str) and row["label"]:
        return row["label"]
    degrees = [f"{k}{int(row[k])}" for k in ("cp", "ep", "etp") if k in row and int(row[k] or 1) > 1]
    parts = [f"tp{int(row['tp'])}", f"pp{int(row['pp'])}", f"dp{int(row['dp'])}", *degrees]
    if "micro_batch" in row:
        parts.append(f"mb{int(row['micro_batch'])}")
    if "zero" in row and int(row["zero"]):
        parts.append(f"z{int(row['zero'])}")
    recompute = str(row.get("recompute", "none"))
    if recompute not in ("none", "0", "nan", "False"):
        parts.append({"selective": "sel", "full": "full-rc", "op": "op-sac"}.get(recompute, recompute))
    if bool(row.get("sequence_parallel", False)):
        parts.append("sp")
    if int(row.get("vpp", 1) or 1) > 1:
        parts.append(f"vpp{int(row['vpp'])}")
    return " ".join(parts)


def plot_breakdown(layouts: Any, top: int = 8, title: str | None = None, show_link: bool = True):
    """Stacked horizontal bars of exposed time per term for the ``top`` layouts (best at the top).

    Left panel: each bar's segments are the ``<term>/exposed_s`` columns in order (compute, TP, PP,
    bubble, DP, …), so the bar's length is the step time; a black tick marks ``step_time_s`` when the
    records carry it. With ``show_link``, communication that hides under compute (link − exposed)
    is a thin hatched strip ending where compute ends. Right panel: the same bars without compute,
    zoomed on the overheads that separate the layouts. Segments carry gid ``term:<term>`` (left) and
    ``overhead:<term>`` (right); the step-time ticks gid ``step_time``.
    """
    frame = as_frame(layouts, ["tp", "pp", "dp"], "layout records")
    if frame.index.name == "rank":  # PlanResult.to_frame() indexes by rank
        frame = frame.reset_index()
    frame = frame.head(top).reset_index(drop=True)
    terms = [t for t in breakdown_terms(list(frame.columns))
             if frame[f"{t}/exposed_s"].abs().sum() > 0
             or (f"{t}/link_s" in frame.columns and frame[f"{t}/link_s"].abs().sum() > 0)]
    if not terms:
        raise PlotInputError("layout records: no '<term>/exposed_s' columns to stack; pass the planner's full columns")
    colours = term_colours(terms)
    scale, unit = _scale(frame, terms)
    fig, (ax, ax_over) = new_figure(1, 2, width_in=12.5, height_in=1.9 + 0.5 * len(frame),
                                    gridspec_kw={"width_ratios": [2.2, 1.0]}, sharey=True)
    y = np.arange(len(frame))[::-1].astype(float)
    left = np.zeros(len(frame))
    over_left = np.zeros(len(frame))
    for term in terms:
        width = frame[f"{term}/exposed_s"].to_numpy(dtype=float)
        ax.barh(y, width / scale, left=left / scale, height=0.62, color=colours[term], edgecolor="white",
                linewidth=0.5, label=term, gid=f"term:{term}")
        left = left + width
        if term != "compute":
            ax_over.barh(y, width / scale, left=over_left / scale, height=0.62, color=colours[term],
                         edgecolor="white", linewidth=0.5, gid=f"overhead:{term}")
            over_left = over_left + width
    if show_link:
        hidden = np.zeros(len(frame))
        for term in terms:
            if term != "compute" and f"{term}/link_s" in frame.columns:
                hidden += np.maximum(frame[f"{term}/link_s"].to_numpy(dtype=float)
                                     - frame[f"{term}/exposed_s"].to_numpy(dtype=float), 0.0)
        if np.any(hidden > 0) and "compute/exposed_s" in frame.columns:
            compute_end = frame["compute/exposed_s"].to_numpy(dtype=float)
            start = np.maximum(compute_end - hidden, 0.0)
            ax.barh(y - 0.25, (compute_end - start) / scale, left=start / scale, height=0.12, facecolor="#ffffff",
                    edgecolor="#555555", hatch="////", linewidth=0.4,
                    label="comm link time hidden under compute", gid="hidden")
    if "step_time_s" in frame.columns:
        step = frame["step_time_s"].to_numpy(dtype=float)
        ax.scatter(step / scale, y, marker="|", s=500, color="black", linewidths=1.5, label="step time",
                   zorder=3, gid="step_time")
        for yi, t in zip(y, step):
            ax.text(t / scale, yi + 0.36, f" {format_time_tick(t)}", fontsize=7, va="bottom", ha="left")
    for yi, total in zip(y, over_left):
        ax_over.text(total / scale, yi, f" {format_time_tick(total)}", fontsize=7, va="center", ha="left")
    names = [f"#{int(r['rank'])} {layout_name(r)}" if "rank" in r else layout_name(r) for _, r in frame.iterrows()]
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlabel(f"time per training step ({unit})")
    ax_over.set_xlabel(f"exposed communication + bubble + other ({unit})")
    ax_over.set_title("overheads only (compute removed)", fontsize=9)
    ax_over.set_xlim(0, max(float(over_left.max()) / scale * 1.3, 1e-12))
    ax.set_ylim(-0.7, len(frame) - 0.1)
    for axis in (ax, ax_over):
        axis.grid(True, axis="x", color="#dddddd", lw=0.6)
        axis.set_axisbelow(True)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 5), fontsize=8, frameon=False)
    fig.suptitle(title or f"step-time breakdown of the top {len(frame)} layouts (exposed time per term)")
    return fig


def _count(value: float) -> str:
    """12.3k, 1.5M: tokens/s at a glance."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _scale(frame: Any, terms: list[str]) -> tuple[float, str]:
    """Seconds, ms or µs for the axis, from the longest stacked bar."""
    total = float(np.nanmax(sum(frame[f"{t}/exposed_s"].to_numpy(dtype=float) for t in terms)))
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if total >= 2 * scale:
            return scale, unit
    return 1e-6, "µs"


def plot_whatif(rows: Any, title: str | None = None, label: str = "label"):
    """Two bar panels across systems/networks: best step time and tokens/s, each bar annotated.

    ``rows`` are ``Comparison.rows()`` (label, step_time_s, tokens_per_s, best_label, …); the first
    row is the baseline and the others are annotated with their speed-up against it. Targets where
    nothing fits are shown with an empty bar and the text "does not fit". Bars carry gid
    ``bar:<label>``.
    """
    frame = as_frame(rows, [label, "step_time_s"], "what-if records").reset_index(drop=True)
    fits = frame["step_time_s"].notna().to_numpy()
    step = frame["step_time_s"].to_numpy(dtype=float)
    if "tokens_per_s" in frame.columns and frame["tokens_per_s"].notna().any():
        tokens = frame["tokens_per_s"].to_numpy(dtype=float)
    else:
        tokens = np.full(len(frame), np.nan)
    labels = [str(v) for v in frame[label]]
    colours = colour_map(labels)
    fig, (ax_t, ax_k) = new_figure(1, 2, width_in=12.0, height_in=1.8 + 0.55 * len(frame))
    y = np.arange(len(frame))[::-1].astype(float)
    base_step = step[0] if fits[0] else np.nan
    for ax, values, what in ((ax_t, step, "step"), (ax_k, tokens, "tokens")):
        for yi, name, value, ok in zip(y, labels, values, fits):
            ax.barh(yi, value if ok and np.isfinite(value) else 0.0, height=0.6, color=colours[name],
                    gid=f"bar:{name}" if what == "step" else f"tokens:{name}")
            if not ok:
                ax.text(0, yi, "  does not fit", va="center", fontsize=8, color="#c44e52")
            elif np.isfinite(value):
                text = format_time_tick(value) if what == "step" else _count(value)
                if what == "step" and yi != y[0] and np.isfinite(base_step):
                    text += f"  ({base_step / value:.2f}× speed)"
                ax.text(value, yi, f" {text}", va="center", fontsize=8)
        ax.set_yticks(y, labels, fontsize=8)
        ax.set_ylim(-0.85, len(frame) - 0.4)
        ax.grid(True, axis="x", color="#dddddd", lw=0.6)
        ax.set_axisbelow(True)
        finite = values[np.isfinite(values)]
        ax.set_xlim(0, (finite.max() if finite.size else 1.0) * (1.6 if what == "step" else 1.25))
    from matplotlib.ticker import FuncFormatter

    ax_k.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: _count(value)))
    if "best_label" in frame.columns:
        for yi, best in zip(y, frame["best_label"]):
            if isinstance(best, str):
                ax_k.text(0.01, yi - 0.42, best, transform=ax_k.get_yaxis_transform(), fontsize=6, color="#555555",
                          va="center")
    ax_t.set_xlabel("step time of the best layout (s)")
    ax_t.set_title("step time (lower is better)")
    ax_k.set_xlabel("throughput (tokens/s)")
    ax_k.set_title("tokens/s (higher is better)")
    handles = [ax_t.patches[i] for i in range(len(labels))]
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 4), fontsize=8, frameon=False)
    fig.suptitle(title or f"what-if: best layout on {len(frame)} systems/networks (first = baseline)")
    return fig
