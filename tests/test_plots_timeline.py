"""Overlap timeline: the schedule against closed forms, and the Gantt bars against the schedule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.errors import CommModelError
from commmodel.plots.timeline import plot_timeline, timeline_summary
from commmodel.plots.timeline_data import timeline_frame
from commmodel.step.gradients import overlap_timeline, step_timeline
from commmodel.step.options import DDP_BUCKET_CAP_BYTES


def _const(c):
    return lambda sizes: np.full(np.shape(sizes), c)


@pytest.mark.parametrize("c_s", [0.5e-3, 1e-3, 3e-3, 10e-3])
def test_one_bucket_per_layer_closed_form(c_s):
    # L layers, backward b per layer, one bucket per layer taking c:
    # exposed = c if c ≤ b else L·(c − b) + b   (module docstring)
    num_layers, f_s, b_s = 10, 1e-3, 2e-3
    tl = overlap_timeline(num_layers, f_s, b_s, 100.0, _const(c_s), bucket_bytes=100.0)
    assert tl.buckets == tuple(range(num_layers - 1, -1, -1))
    assert tl.compute_end_s == pytest.approx(num_layers * (f_s + b_s))
    expected = c_s if c_s <= b_s else num_layers * (c_s - b_s) + b_s
    assert tl.exposed_comm_s == pytest.approx(expected)
    assert tl.comm_link_s == pytest.approx(num_layers * c_s)
    assert tl.step_time_s == pytest.approx(tl.compute_end_s + expected)


def test_no_overlap_exposes_everything():
    tl = overlap_timeline(8, 1e-3, 2e-3, 10.0, _const(1e-3), bucket_bytes=10.0, overlap=False)
    assert tl.exposed_comm_s == pytest.approx(tl.comm_link_s) == pytest.approx(8e-3)


def test_buckets_fill_in_backward_order():
    # 10 MiB per layer, 25 MiB buckets: gradients stream 7, 6, 5, …; bucket 0 (25 MiB) completes halfway through
    # layer 5's backward, bucket 1 at the end of layer 3 (50 MiB), bucket 2 inside layer 0 (75 MiB), bucket 3 = 5 MiB
    # rest; each layer's gradients come at an even rate over its backward.
    tl = overlap_timeline(8, 1e-3, 1e-3, 10 * 2**20, lambda s: s / 1e10)
    assert DDP_BUCKET_CAP_BYTES == 25 * 1024 * 1024
    assert tl.buckets == (5, 3, 0, 0)
    frame = timeline_frame(tl)
    comm = frame[frame["stream"] == "comm"]
    assert np.allclose(comm["size_bytes"], np.array([25, 25, 25, 5]) * 2**20)
    b5 = frame[(frame["kind"] == "backward") & (frame["index"] == 5)].iloc[0]
    assert comm.iloc[0]["start_s"] == pytest.approx((b5["start_s"] + b5["end_s"]) / 2)


def test_big_layers_fill_buckets_during_their_backward():
    # 100 B per layer, 30 B buckets, backward 1 s per layer: layer 1's gradients come over [2, 3] s, layer 0's over
    # [3, 4]; buckets are ready at 2.3, 2.6, 2.9, 3.2, 3.5, 3.8 and 4.0 s, each reduced in 0.1 s: only the last,
    # 20 B, waits for the end of the backward (before, every bucket of a layer waited for its end: 0.4 s exposed)
    tl = overlap_timeline(2, 1.0, 1.0, 100.0, _const(0.1), bucket_bytes=30.0)
    assert tl.buckets == (1, 1, 1, 0, 0, 0, 0)
    comm = timeline_frame(tl).query("stream == 'comm'")
    assert comm["start_s"].to_list() == pytest.approx([2.3, 2.6, 2.9, 3.2, 3.5, 3.8, 4.0])
    assert tl.exposed_comm_s == pytest.approx(0.1)


def test_the_embedding_gradient_waits_for_the_end_of_the_backward():
    """``final_bytes`` (the embedding's gradient) is complete only when the backward ends: its buckets queue then."""
    tl = overlap_timeline(2, 1.0, 1.0, 100.0, _const(0.1), bucket_bytes=100.0, final_bytes=200.0)
    comm = timeline_frame(tl).query("stream == 'comm'")
    assert comm["start_s"].to_list() == pytest.approx([3.0, 4.0, 4.1, 4.2])
    assert tl.exposed_comm_s == pytest.approx(0.3)


@pytest.mark.parametrize("flags", [["--tp", "1", "--pp", "1"], ["--tp", "2", "--pp", "2"],
                                   ["--tp", "1", "--pp", "1", "--zero", "0"], ["--tp", "1", "--stack", "ddp"],
                                   ["--tp", "2", "--stack", "fsdp2", "--zero", "2", "--global-batch", "32"]])
def test_the_timeline_exposes_what_estimate_prices(flags, tmp_path):
    """`plot timeline` and `estimate` of one layout: the same link time, and exposed reduction within 10% (the
    timeline schedules the buckets as they fill; the step model takes the embedding plus one whole bucket as the
    tail). Before, the timeline held each layer's buckets to its end and spread the embedding over the layers:
    2.6 ms exposed against estimate's 5.3 ms for Llama-3 8B on 64 H100 at tp 1."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    base = ["-m", "llama3-8b", "-n", "64", "-s", "dgx-h100", *flags, "--json"]
    runner = CliRunner()
    timeline = json.loads(runner.invoke(app, ["plot", "timeline", *base, "-o", str(tmp_path / "t.png")]).stdout)
    breakdown = json.loads(runner.invoke(app, ["estimate", *base]).stdout)["breakdown"]
    reduce = next(v for k, v in breakdown.items() if k in ("dp/reduce_scatter", "dp/all_reduce"))
    assert timeline["comm_link_s"] == pytest.approx(reduce["link_s"], rel=1e-9)
    assert timeline["comm_exposed_s"] == pytest.approx(reduce["exposed_s"], rel=0.10)


@settings(max_examples=60, deadline=None)
@given(
    num_layers=st.integers(1, 40),
    f_s=st.floats(1e-5, 1e-2), b_s=st.floats(1e-5, 1e-2), c_s=st.floats(0.0, 2e-2),
    layer_bytes=st.floats(1.0, 1e8), buckets_per_layer=st.floats(0.01, 20.0),
)
def test_schedule_invariants(num_layers, f_s, b_s, c_s, layer_bytes, buckets_per_layer):
    bucket_bytes = layer_bytes / buckets_per_layer
    tl = overlap_timeline(num_layers, f_s, b_s, layer_bytes, _const(c_s), bucket_bytes=bucket_bytes)
    frame = timeline_frame(tl)
    comm = frame[frame["stream"] == "comm"].sort_values("start_s")
    # all-reduces never overlap each other, and all gradient bytes are reduced exactly once
    assert np.all(comm["start_s"].to_numpy()[1:] >= comm["end_s"].to_numpy()[:-1] - 1e-15)
    assert comm["size_bytes"].sum() == pytest.approx(num_layers * layer_bytes)
    # buckets complete in backward order and the last one waits for layer 0
    assert list(tl.buckets) == sorted(tl.buckets, reverse=True) and tl.buckets[-1] == 0
    # overlap hides at most the link time, never adds to it
    assert 0.0 <= tl.exposed_comm_s <= tl.comm_link_s + 1e-12
    no_overlap = overlap_timeline(num_layers, f_s, b_s, layer_bytes, _const(c_s), bucket_bytes=bucket_bytes,
                                  overlap=False)
    assert tl.step_time_s <= no_overlap.step_time_s + 1e-12


def test_gantt_bars_equal_the_schedule():
    tl = overlap_timeline(6, 1e-3, 2e-3, 1.0, _const(4e-3), bucket_bytes=1.0)
    fig = plot_timeline(tl)
    (ax,) = fig.axes
    assert "ms" in ax.get_xlabel()
    bars = {c.get_gid(): c for c in ax.collections}
    assert set(bars) == {"forward", "backward", "all_reduce", "exposed"}
    frame = timeline_frame(tl)
    for kind in ("forward", "backward", "all_reduce"):
        part = frame[frame["kind"] == kind]
        paths = bars[kind].get_paths()
        assert len(paths) == len(part)
        starts_ms = sorted(p.vertices[:, 0].min() for p in paths)
        assert np.allclose(starts_ms, np.sort(part["start_s"].to_numpy()) * 1e3)
    exposed = bars["exposed"].get_paths()[0].vertices[:, 0]
    assert exposed.min() == pytest.approx(tl.compute_end_s * 1e3)
    assert exposed.max() - exposed.min() == pytest.approx(6 * (4e-3 - 2e-3) * 1e3 + 2e-3 * 1e3)
    assert ax.get_legend() is not None and "exposed" in ax.get_title()
    assert timeline_summary(tl)["num_buckets"] == 6


def test_bad_inputs_are_domain_errors():
    with pytest.raises(CommModelError, match="use a bucket of at least"):
        overlap_timeline(10, 1e-3, 1e-3, 1e9, _const(1e-3), bucket_bytes=1.0)
    with pytest.raises(CommModelError, match="num_layers"):
        overlap_timeline(0, 1e-3, 1e-3, 1.0, _const(1e-3))
    with pytest.raises(CommModelError, match="backward_s"):
        overlap_timeline(2, 1e-3, -1.0, 1.0, _const(1e-3))


def test_step_timeline_uses_the_step_models_compute_and_dp_group(dgx_h100):
    from commmodel.step import Layout, LayoutArrays, evaluate_layouts
    from commmodel.workload.presets import get_model

    model = get_model("1.3B")
    layout = Layout(tp=1, pp=1, dp=16, micro_batch=2, global_batch=64)
    cols = evaluate_layouts(model, dgx_h100, 16, LayoutArrays.from_layouts([layout]))
    tl = step_timeline(model, dgx_h100, 16, layout)
    per_micro_batch_s = float(cols["compute/link_s"][0] / cols["num_micro_batches"][0])
    assert tl.compute_end_s == pytest.approx(per_micro_batch_s, rel=1e-9)
    forward = timeline_frame(tl).query("kind == 'forward'")
    assert len(forward) == model.num_layers
    # gradient bytes: every parameter of the replica in fp32 on the wire (StepOptions default, no compression)
    comm = timeline_frame(tl).query("stream == 'comm'")
    assert comm["size_bytes"].sum() == pytest.approx(model.num_params * 4.0, rel=1e-6)
    # ZeRO-1 reduce-scatters the same buckets: half the bytes on the wire of an all-reduce
    zero1 = step_timeline(model, dgx_h100, 16, layout.model_copy(update={"zero": 1}))
    assert zero1.comm_link_s < tl.comm_link_s
    assert (tl.comm_op, zero1.comm_op) == ("all_reduce", "reduce_scatter")
    labels = [t.get_text() for t in plot_timeline(zero1).axes[0].get_legend().get_texts()]
    assert "gradient reduce-scatter (per bucket)" in labels
    # one replica: nothing to reduce
    alone = step_timeline(model, dgx_h100, 1, Layout(tp=1, pp=1, dp=1, micro_batch=2, global_batch=2))
    assert alone.comm_link_s == 0.0 and alone.exposed_comm_s == 0.0


def test_zero3_timeline_reduces_block_by_block_as_estimate_prices_it(tmp_path):
    """Under fsdp2 (ZeRO 3) the timeline cut the gradients into DDP-size buckets: 202 reduce-scatters, 34.6 ms a
    micro-batch, where estimate prices one per block, 139.6 ms over 8 micro-batches. Now one per block (and the
    embedding's): the link time per micro-batch within 3% of estimate's."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    base = ["--model", "1.3B", "--gpus", "32", "--system", "dgx-h100", "--micro-batch", "2", "--stack", "fsdp2",
            "--json"]
    runner = CliRunner()
    timeline = json.loads(runner.invoke(app, ["plot", "timeline", *base, "--out", str(tmp_path / "t.png")]).stdout)
    doc = json.loads(runner.invoke(app, ["estimate", *base]).stdout)
    per_micro_batch = doc["breakdown"]["dp/reduce_scatter"]["link_s"] / doc["num_micro_batches"]
    assert timeline["num_buckets"] == 24 + 3  # 24 blocks, the embedding's gradient in 3 more
    assert timeline["comm_link_s"] == pytest.approx(per_micro_batch, rel=0.03)


def test_timeline_json_rows_are_its_bars(tmp_path):
    """docs/plots.md promises each figure's `rows` in --json; the timeline's had only its summary. Its rows are the
    drawn bars: the reductions' bars sum to the link time, the last compute bar ends at the compute time."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    doc = json.loads(CliRunner().invoke(app, ["plot", "timeline", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--out",
                                              str(tmp_path / "t.png"), "--json"]).stdout)
    comm = [r for r in doc["rows"] if r["stream"] == "comm"]
    assert len(comm) == doc["num_buckets"]
    assert sum(r["end_s"] - r["start_s"] for r in comm) == pytest.approx(doc["comm_link_s"], rel=1e-9)
    assert max(r["end_s"] for r in doc["rows"] if r["stream"] == "compute") == pytest.approx(doc["compute_s"])
