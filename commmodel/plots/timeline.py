"""Overlap timeline (Gantt) of one training step: compute stream, gradient all-reduces, exposed tail."""

from __future__ import annotations

from typing import Any

from commmodel.plots._style import TERM_COLOURS, format_time_tick, new_figure
from commmodel.plots.timeline_data import StepTimeline, timeline_frame

_KIND_COLOURS = {"forward": "#4c72b0", "backward": "#dd8452", "all_reduce": TERM_COLOURS["dp"]}
_ROWS = {"compute": 1.0, "comm": 0.0}
_ROW_NAMES = {"compute": "compute stream", "comm": "communication\nstream (DP)"}
_EXPOSED = "#c44e52"


def _time_scale(step_s: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if step_s >= 2 * scale:
            return scale, unit
    return 1e-6, "µs"


def plot_timeline(timeline: StepTimeline, title: str | None = None, label_every: int | None = None):
    """Gantt of one step: a bar per layer's forward/backward and per all-reduce bucket.

    The exposed tail (communication running past the end of backward) is shaded red and labelled
    with its duration; a dotted line marks the end of backward. Artists carry gids
    (``forward``, ``backward``, ``all_reduce``, ``exposed``).
    """
    frame = timeline_frame(timeline)
    step_s = timeline.step_time_s
    scale, unit = _time_scale(step_s)
    fig, ax = new_figure(1, 1, width_in=11.0, height_in=3.9)
    for kind, colour in _KIND_COLOURS.items():
        part = frame[frame["kind"] == kind] if len(frame) else frame
        if not len(part):
            continue
        row = _ROWS[part["stream"].iloc[0]]
        spans = [(s / scale, (e - s) / scale) for s, e in zip(part["start_s"], part["end_s"])]
        shade = [colour if i % 2 == 0 else _lighter(colour) for i in range(len(spans))]
        label = _KIND_LABELS[kind] if kind != "all_reduce" else \
            f"gradient {timeline.comm_op.replace('_', '-')} (per bucket)"
        ax.broken_barh(spans, (row - 0.35, 0.7), facecolors=shade, edgecolor="white",
                       linewidth=0.3 if len(spans) <= 40 else 0.0, label=label, gid=kind)
        every = label_every or max(1, len(part) // 12)
        for i, (s, w) in enumerate(spans):
            if i % every == 0 and w > step_s / scale / 60:
                ax.text(s + w / 2, row, part["label"].iloc[i], ha="center", va="center", fontsize=6, color="white")
    exposed_s = timeline.exposed_comm_s
    if exposed_s > 0:
        ax.broken_barh([(timeline.compute_end_s / scale, exposed_s / scale)], (-0.45, 0.9), facecolors="none",
                       edgecolor=_EXPOSED, hatch="///", linewidth=1.2, label="exposed communication", gid="exposed")
        ax.annotate(f"exposed {format_time_tick(exposed_s)}", xy=(timeline.comm_end_s / scale, 0.45),
                    xytext=(0, 6), textcoords="offset points", ha="right", va="bottom", fontsize=8, color=_EXPOSED)
    ax.axvline(timeline.compute_end_s / scale, color="#333333", ls=":", lw=1.0, gid="compute_end")
    ax.set_yticks([_ROWS["comm"], _ROWS["compute"]], [_ROW_NAMES["comm"], _ROW_NAMES["compute"]])
    ax.set_ylim(-0.7, 1.6)
    ax.set_xlim(0, step_s / scale * 1.02)
    ax.set_xlabel(f"time since the drawn micro-batch starts ({unit})")
    hidden = timeline.comm_link_s - exposed_s
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, fontsize=8, frameon=False)
    ax.set_title(title or (
        f"one training step: {format_time_tick(step_s)}; gradient {timeline.comm_op.replace('_', '-')} "
        f"{format_time_tick(timeline.comm_link_s)} "
        f"on the link, {format_time_tick(max(hidden, 0.0))} hidden, {format_time_tick(exposed_s)} exposed"
    ), fontsize=10)
    ax.grid(True, axis="x", color="#dddddd", lw=0.6)
    return fig


_KIND_LABELS = {"forward": "forward (per layer)", "backward": "backward (per layer)",
                "all_reduce": "gradient all-reduce (per bucket)"}


def _lighter(colour: str) -> str:
    """The colour mixed 35% with white, to tell neighbouring bars apart."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{int(c + (255 - c) * 0.35):02x}" for c in rgb)


def timeline_summary(timeline: StepTimeline) -> dict[str, Any]:
    """The timeline's headline numbers (seconds), for tables and notebooks: the last micro-batch's forward and
    backward with the gradient reduction it overlaps (not a whole step, which ``estimate`` prices)."""
    return {
        "last_micro_batch_s": timeline.step_time_s,
        "compute_s": timeline.compute_end_s,
        "comm_link_s": timeline.comm_link_s,
        "comm_exposed_s": timeline.exposed_comm_s,
        "num_buckets": len(timeline.buckets),
    }
