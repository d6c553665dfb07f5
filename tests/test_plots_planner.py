"""Planner figures: bar segments equal the breakdown numbers, bars sum to the step time, what-if bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from commmodel.plots._style import PlotInputError
from commmodel.plots.planner import breakdown_terms, layout_name, plot_breakdown, plot_whatif

TERMS = ("compute", "tp/all_reduce", "pp/p2p", "pp/bubble", "dp/all_reduce")


def _layouts():
    rows = []
    for i, (tp, pp, dp) in enumerate([(8, 8, 16), (8, 4, 32), (4, 8, 32)]):
        exposed = {"compute": 10.0 + i, "tp/all_reduce": 0.5 + 0.2 * i, "pp/p2p": 0.25, "pp/bubble": 1.0 + i,
                   "dp/all_reduce": 0.125 * i}
        row = {"rank": i + 1, "tp": tp, "pp": pp, "dp": dp, "micro_batch": 1, "zero": 1, "recompute": "selective",
               "sequence_parallel": True, "vpp": 1, "step_time_s": sum(exposed.values())}
        for term in reversed(TERMS):  # deliberately out of order: the plot orders them
            row[f"{term}/exposed_s"] = exposed[term]
            row[f"{term}/link_s"] = exposed[term] + (2.0 if term == "dp/all_reduce" else 0.0)
        rows.append(row)
    return pd.DataFrame(rows)


def test_terms_are_ordered_compute_tp_pp_bubble_dp():
    assert breakdown_terms(list(_layouts().columns)) == list(TERMS)


def test_layout_name():
    row = _layouts().iloc[0]
    assert layout_name(row) == "tp8 pp8 dp16 mb1 z1 sel sp"
    assert layout_name({"label": "custom", "tp": 1, "pp": 1, "dp": 1}) == "custom"


def test_breakdown_bars_equal_the_exposed_terms_and_sum_to_step_time():
    layouts = _layouts()
    fig = plot_breakdown(layouts)
    ax, ax_over = fig.axes
    assert ax.get_xlabel() == "time per training step (s)" and "(s)" in ax_over.get_xlabel()
    assert fig.legends and "top 3" in fig.get_suptitle()
    ends = np.zeros(len(layouts))
    for term in TERMS:
        bars = [p for p in ax.patches if p.get_gid() == f"term:{term}"]
        assert len(bars) == len(layouts)
        # best layout at the top: bars are drawn rank 1 first at the highest y
        assert [b.get_y() for b in bars] == sorted((b.get_y() for b in bars), reverse=True)
        widths = np.array([b.get_width() for b in bars])
        assert np.allclose(widths, layouts[f"{term}/exposed_s"])
        lefts = np.array([b.get_x() for b in bars])
        assert np.allclose(lefts, ends)
        ends = lefts + widths
        over = [p.get_width() for p in ax_over.patches if p.get_gid() == f"overhead:{term}"]
        assert np.allclose(over, layouts[f"{term}/exposed_s"]) if term != "compute" else over == []
    assert np.allclose(ends, layouts["step_time_s"])
    assert len({p.get_facecolor() for p in ax.patches if str(p.get_gid()).startswith("term:")}) == len(TERMS)
    (ticks,) = [c for c in ax.collections if c.get_gid() == "step_time"]
    assert np.allclose(ticks.get_offsets()[:, 0], layouts["step_time_s"])
    # hidden DP link time (link − exposed = 2 s) is drawn under the end of compute
    hidden = [p for p in ax.patches if p.get_gid() == "hidden"]
    assert np.allclose([h.get_width() for h in hidden], 2.0)
    assert np.allclose([h.get_x() + h.get_width() for h in hidden], layouts["compute/exposed_s"])
    assert [t.get_text() for t in ax.get_yticklabels()][0].startswith("#1 tp8 pp8 dp16")


def test_breakdown_top_limits_rows_and_rejects_records_without_terms():
    fig = plot_breakdown(_layouts(), top=2)
    assert len([p for p in fig.axes[0].patches if p.get_gid() == "term:compute"]) == 2
    with pytest.raises(PlotInputError, match="exposed_s"):
        plot_breakdown([{"tp": 1, "pp": 1, "dp": 8, "step_time_s": 1.0}])


def test_whatif_bars_and_speedups():
    rows = [
        {"label": "dgx-a100", "step_time_s": 20.0, "tokens_per_s": 1.6e5, "best_label": "tp8 pp8 dp16"},
        {"label": "dgx-h100", "step_time_s": 8.0, "tokens_per_s": 4.0e5, "best_label": "tp8 pp4 dp32"},
        {"label": "too-small", "step_time_s": None, "tokens_per_s": None, "best_label": None},
    ]
    fig = plot_whatif(rows)
    ax_t, ax_k = fig.axes
    steps = {p.get_gid(): p.get_width() for p in ax_t.patches}
    assert steps == {"bar:dgx-a100": 20.0, "bar:dgx-h100": 8.0, "bar:too-small": 0.0}
    tokens = {p.get_gid(): p.get_width() for p in ax_k.patches}
    assert tokens["tokens:dgx-h100"] == 4.0e5
    texts = [t.get_text() for t in ax_t.texts]
    assert any("2.50× speed" in t for t in texts)
    assert any("does not fit" in t for t in texts)
    assert "(s)" in ax_t.get_xlabel() and "tokens/s" in ax_k.get_xlabel()
    assert fig.legends and "baseline" in fig.get_suptitle()


def test_scaling_of_throughput_is_not_drawn_as_a_time():
    from commmodel.plots.collectives import plot_scaling

    records = [{"system": "a", "num_gpus": n, "tokens_per_s": 1000.0 * n} for n in (8, 16, 32)]
    fig = plot_scaling(records, y="tokens_per_s", title="t")
    (ax,) = fig.axes
    assert ax.get_ylabel() == "throughput (tokens/s)" and ax.get_yscale() == "log"
    labels = [ax.yaxis.get_major_formatter()(v, 0) for v in (2e4, 1e5)]
    assert labels == ["20k", "100k"]
