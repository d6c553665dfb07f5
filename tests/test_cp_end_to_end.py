"""A context-parallel layout through every path that rebuilds a layout: plan → query → what-if → timeline.

The query below once failed ("tp 2 × pp 1 × dp 8 = 16 ≠ 256 GPUs"): the answer rebuilt the planner's
winner from a field list without cp. Every path now goes through the one layout schema.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from commmodel.io.profiles import list_systems, load_gpus, load_links, load_system  # noqa: E402
from commmodel.planner.search import plan  # noqa: E402
from commmodel.planner.space import SearchSpace  # noqa: E402
from commmodel.planner.whatif import compare  # noqa: E402
from commmodel.plots.timeline import plot_timeline, timeline_summary  # noqa: E402
from commmodel.query.answer import QueryOverrides, answer_query  # noqa: E402
from commmodel.query.parse import parse_query  # noqa: E402
from commmodel.step import Layout, LayoutArrays, StepOptions, evaluate_layouts  # noqa: E402
from commmodel.step.gradients import step_timeline  # noqa: E402
from commmodel.step.layout import RECORD_FIELDS  # noqa: E402
from commmodel.workload.memory import params_per_gpu  # noqa: E402
from commmodel.workload.presets import get_model  # noqa: E402

LONG = get_model("llama3-70b").model_copy(update={"seq_len": 65536})


@pytest.fixture(scope="module")
def h100():
    return load_system("dgx-h100")


def test_query_with_long_sequences_answers_with_a_cp_layout():
    catalogues = {"systems": {s.name: s for s in list_systems()}, "links": load_links(), "gpus": load_gpus()}
    parsed = parse_query("train llama3-70b on 256 H100 with seq len 65536", tuple(catalogues["systems"]))
    # under fsdp2 (ZeRO-3 gathers on the links); since fsdp2 prices PyTorch's all-gather CP the best layout keeps the
    # cp group inside a node (tp 1, cp 4) and has no advice to give: the check below is that estimate ran on it
    answer = answer_query(parsed, catalogues, QueryOverrides(stack="fsdp2"))["answer"]
    best = answer["best_layouts"][0]
    assert best["cp"] > 1 and best["tp"] * best["cp"] * best["pp"] * best["dp"] == 256
    # the quoted gradient all-reduce runs over the gradient group: dp·cp ranks hold the same weights
    all_reduce = answer["gradient_sync"]["all_reduce"]
    assert all_reduce["num_ranks"] == best["dp"] * best["cp"]
    params = params_per_gpu(LONG, np.array([best["tp"]]), np.array([best["pp"]]), np.array([best["dp"] * best["cp"]]))
    assert all_reduce["size_bytes"] == pytest.approx(4.0 * float(params[0]), rel=1e-12)
    # estimate ran on the rebuilt layout (it raised before)
    assert f"cp{best['cp']}" in answer["best"]["layout"] and answer["best"]["step_time_s"] > 0
    assert isinstance(answer["advice"], list)


def test_plan_whatif_and_timeline_keep_cp(h100):
    space = SearchSpace(cp=(8,), zero_stages=(1,), micro_batches=(1,))
    result = plan(LONG, h100, 256, global_batch=64, space=space).require_feasible()
    best = result.row(0)
    layout = Layout.from_record(best)
    assert layout.cp == 8 and layout.num_gpus == 256 and layout.to_record(per_layout_only=True) == {
        k: best[k] for k in RECORD_FIELDS}

    same = load_system("dgx-h100")  # the same node twice: the what-if must carry cp through unchanged
    rows = compare(LONG, [("a", h100), ("b", same)], 256, global_batch=64, space=space).rows()
    assert rows[1]["best_layout"] == {k: best[k] for k in RECORD_FIELDS}
    assert rows[1]["speedup_vs_baseline"] == pytest.approx(1.0)

    timeline = step_timeline(LONG, h100, 256, layout)
    cols = evaluate_layouts(LONG, h100, 256, LayoutArrays.from_layouts([layout]), StepOptions())
    # the timeline's micro-batch is the step model's: b/cp sequences per GPU on the busiest stage
    assert timeline.compute_end_s == pytest.approx(
        float(cols["compute/link_s"][0] / cols["num_micro_batches"][0]), rel=1e-9)
    comm_bytes = sum(i["size_bytes"] for i in timeline.intervals if i["stream"] == "comm")
    params = params_per_gpu(LONG, np.array([layout.tp]), np.array([layout.pp]), np.array([layout.dp * layout.cp]))
    assert comm_bytes == pytest.approx(4.0 * float(params[0]), rel=1e-9)
    fig = plot_timeline(timeline)
    assert any(a.get_gid() == "all_reduce" for a in fig.axes[0].get_children())
    assert timeline_summary(timeline)["num_buckets"] == len(timeline.buckets) > 0
