"""Bucketed data-parallel reduction: every bucket pays the collective's latency, the tail cannot hide."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.hardware.cluster import Cluster
from commmodel.io.profiles import load_system
from commmodel.step.buckets import bucket_split, bucket_tail_bytes
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.options import DDP_BUCKET_CAP_BYTES, StepOptions
from commmodel.workload import PRESETS, TransformerModel

from toys import toy_system

TOY = TransformerModel(name="toy", num_layers=2, hidden_size=64, num_heads=4, vocab_size=128, seq_len=16)
BUCKET = StepOptions(bucket_size_bytes="100 kB")


def test_toy_parameter_count_by_hand() -> None:
    # block: QKVO 4·64² + 4·64 biases; MLP 2·64·256 + 256 + 64; two LayerNorms 2·128
    block = 4 * 64 * 64 + 4 * 64 + 2 * 64 * 256 + 256 + 64 + 2 * 128
    embedding = 128 * 64 + 16 * 64  # words + learned positions
    assert TOY.embedding_params == embedding == 9216
    assert TOY.num_params == 2 * block + embedding + 128 == 109_312  # + final norm, tied head


def test_bucket_split_by_hand() -> None:
    full, rest = bucket_split(np.array([437_248.0, 300_000.0, 50.0]), 100_000.0)
    assert full.tolist() == [4.0, 3.0, 0.0]
    assert rest.tolist() == pytest.approx([37_248.0, 0.0, 50.0])
    # tail: the 36,864 fp32 embedding gradient bytes + the blocks' bytes past their last full bucket (400,384 block
    # bytes = 4 buckets + 384), never more than the buffer; 50,000 bytes hold 13,136 block bytes, no full bucket
    tail = bucket_tail_bytes(TOY, np.array([1, 2]), np.array([437_248.0, 50_000.0]), BUCKET,
                             BUCKET.bucket_size_bytes)
    assert tail.tolist() == [37_248.0, 50_000.0]


@pytest.mark.parametrize(("nic", "micro_batch"), [("8 Gb/s", 1), ("400 Gb/s", 64)])
def test_toy_bucketed_all_reduce_by_hand(nic: str, micro_batch: int) -> None:
    """437,248 gradient bytes (fp32) in 100 kB buckets: 4 full + 37,248; the tail is that last bucket (the
    embedding's 36,864 bytes and the blocks' 384 that share its bucket)."""
    system = toy_system(gpus_per_node=1, nic=nic)
    lay = Layout(dp=8, global_batch=8 * micro_batch, micro_batch=micro_batch)
    row = evaluate_single(TOY, system, 8, lay, BUCKET)

    view = Cluster.for_gpus(system, 8).system
    t = lambda size: float(collective_cost("all_reduce", size, view, 8, 1, selection="fastest").time_s)  # noqa: E731
    link = 4 * t(100_000) + t(37_248)
    tail = t(37_248)
    assert row["dp/all_reduce/link_s"] == pytest.approx(link, rel=1e-12)
    window = row["compute/link_s"] * 2 / 3  # backward of the last micro-batch (= 2 × its forward), m = 1
    assert row["dp/all_reduce/exposed_s"] == pytest.approx(max(link - window, tail), rel=1e-12)
    # without overlap: one all-reduce of the whole buffer, all exposed
    off = evaluate_single(TOY, system, 8, lay, StepOptions(bucket_size_bytes="100 kB", overlap=False))
    assert off["dp/all_reduce/link_s"] == pytest.approx(t(437_248), rel=1e-12)
    assert off["dp/all_reduce/exposed_s"] == off["dp/all_reduce/link_s"]
    # each bucket pays a latency: the bucketed link is never below one big all-reduce
    assert link > t(437_248)


def test_both_overlap_regimes_are_exercised() -> None:
    slow = evaluate_single(TOY, toy_system(1, "8 Gb/s"), 8, Layout(dp=8, global_batch=8), BUCKET)
    fast = evaluate_single(TOY, toy_system(1, "400 Gb/s"), 8, Layout(dp=8, global_batch=512, micro_batch=64), BUCKET)
    assert slow["dp/all_reduce/link_s"] > slow["compute/link_s"]              # the excess shows
    assert fast["dp/all_reduce/link_s"] < fast["compute/link_s"] * 2 / 3      # only the tail shows
    assert 0 < fast["dp/all_reduce/exposed_s"] < fast["dp/all_reduce/link_s"]


def test_gpt3_1p3b_on_32_h100_matches_the_bucket_timeline() -> None:
    """⌈5.26 GB / 25 MiB⌉ = 201 buckets (PyTorch DDP's default) on 32 H100 (8× NDR): 49.7 ms of link time (tree/LL128
    at 247 us a bucket; 46.8 ms while the NVLS-tree skipped the node's NVLS pipeline fill and undercut it),
    where one all-reduce of all 5.26 GB of fp32 gradients takes 27.8 ms; the overlap timeline
    (:func:`commmodel.step.gradients.step_timeline`) schedules the same buckets."""
    from commmodel.step.gradients import step_timeline

    model, system = PRESETS["gpt3-1.3b"], load_system("dgx-h100")
    lay = Layout(dp=32, micro_batch=8, global_batch=256)
    row = evaluate_single(model, system, 32, lay, StepOptions())
    timeline = step_timeline(model, system, 32, lay, StepOptions())
    assert len(timeline.buckets) == int(np.ceil(4.0 * model.num_params / DDP_BUCKET_CAP_BYTES)) == 201
    assert row["dp/all_reduce/link_s"] == pytest.approx(timeline.comm_link_s, rel=1e-9)
    assert row["dp/all_reduce/link_s"] == pytest.approx(0.0497, abs=0.001)
    off = evaluate_single(model, system, 32, lay, StepOptions(overlap=False))
    assert off["dp/all_reduce/link_s"] == pytest.approx(0.0278, abs=0.001)
    # exposed: the embedding's 0.42 GB + the blocks' bytes in its bucket after the backward ends: 16 full + a rest
    full, rest = bucket_split(bucket_tail_bytes(model, np.array([1]), np.array([4.0 * model.num_params]),
                                                StepOptions(), DDP_BUCKET_CAP_BYTES), DDP_BUCKET_CAP_BYTES)
    view = Cluster.for_gpus(system, 32).system
    one = lambda size: float(collective_cost("all_reduce", size, view, 32, 8, selection="fastest").time_s)  # noqa: E731
    assert full[0] == 16
    assert row["dp/all_reduce/exposed_s"] == pytest.approx(full[0] * one(DDP_BUCKET_CAP_BYTES) + one(rest[0]), rel=1e-9)


@pytest.mark.parametrize("zero", [1, 2])
def test_zero_reduce_scatter_is_bucketed_too(zero: int) -> None:
    system = toy_system(gpus_per_node=1, nic="8 Gb/s")
    view = Cluster.for_gpus(system, 8).system
    t = lambda size: float(  # noqa: E731
        collective_cost("reduce_scatter", size, view, 8, 1, selection="fastest").time_s)
    row = evaluate_single(TOY, system, 8, Layout(dp=8, global_batch=16, zero=zero), BUCKET)
    per_pass = 4 * t(100_000) + t(37_248)
    m = 2
    assert row["dp/reduce_scatter/link_s"] == pytest.approx(per_pass * (m if zero == 2 else 1), rel=1e-12)
