"""Megatron-Core's data-parallel schedule (megatron/core @937571c, the README's H100 runs): the parameter all-gather
chained bucket by bucket through the first micro-batch's forward, the reduce-scatter only in the last micro-batch,
with interleaving chunk by chunk after each chunk's last backward (closed forms; :mod:`commmodel.step.overlap`)."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.step.comm import data_parallel_comm
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions
from commmodel.step.overlap import interleaved_reduce_exposure, param_gather_exposure
from commmodel.step.placement import dp_ranks_per_node
from commmodel.workload import PRESETS
from commmodel.workload.memory import dense_params_per_gpu

from toys import toy_system

MODEL = PRESETS["gpt3-1.3b"]  # 24 layers


def test_chained_gather_comm_bound_exposes_all_but_the_forward_it_runs_beside() -> None:
    # 5 buckets of gather g = 2 s, forward f = 0.5 s each: the first gather, then 4 stalls of 1.5 s.
    exposed = param_gather_exposure(np.array(10.0), np.array(5.0), np.array(2.5))
    assert exposed == pytest.approx(2.0 + 4 * 1.5)
    assert exposed == pytest.approx(5 * 2.0 - 4 * 0.5)  # N·g − (N − 1)·f


def test_chained_gather_compute_bound_exposes_the_first_bucket() -> None:
    exposed = param_gather_exposure(np.array(1.0), np.array(5.0), np.array(10.0))
    assert exposed == pytest.approx(0.2)
    assert param_gather_exposure(np.array(0.0), np.array(5.0), np.array(10.0)) == 0.0


def test_interleaving_chains_only_the_first_chunk() -> None:
    # 8 buckets, vpp 4: the first model chunk has 2 buckets (the others are one bucket each, gathered ahead).
    g, f = 2.0, 0.5
    assert param_gather_exposure(np.array(8 * g), np.array(8.0), np.array(8 * f), 4) == pytest.approx(g + (g - f))
    # 5 buckets over vpp 2: the first chunk holds ⌈5/2⌉ = 3
    assert param_gather_exposure(np.array(5 * g), np.array(5.0), np.array(5 * f), 2) == pytest.approx(g + 2 * (g - f))


def test_pipeline_depth_does_not_add_stalls() -> None:
    """Stages after the first keep one bucket (bucket_size = None for pipeline rank > 0), gathered while they wait
    for their first input: the step exposes the first stage's chain, whatever pp is."""
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    m = 8
    for pp in (2, 4):
        row = evaluate_single(MODEL, system, 4 * pp, Layout(pp=pp, dp=4, global_batch=4 * m, zero=1), StepOptions())
        dpc = data_parallel_comm(MODEL, system, np.array([1]), np.array([pp]), np.array([4]), np.array([1]),
                                 np.array([float(m)]), StepOptions())
        forward = row["compute/link_s"] / m / 3
        expect = param_gather_exposure(dpc.all_gather_s, dpc.gather_buckets, np.array([forward]))
        assert dpc.gather_buckets[0] > 1 and expect[0] > dpc.all_gather_s[0] / dpc.gather_buckets[0]
        assert row["dp/all_gather/exposed_s"] == pytest.approx(expect[0], rel=1e-9)


def test_gather_runs_in_the_gradient_buckets_each_paying_its_latency() -> None:
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    tp, pp, dp, z = (np.array([x]) for x in (1, 1, 8, 1))
    options = StepOptions(bucket_size_bytes="400MB")
    dpc = data_parallel_comm(MODEL, system, tp, pp, dp, z, np.array([4.0]), options)
    params = dense_params_per_gpu(MODEL, tp, pp)[0]
    grad_bytes, weight_bytes = params * 4.0, params * MODEL.dtype_bytes  # fp32 gradients, bf16 weights
    full = np.floor(grad_bytes / 400e6)
    rest = (grad_bytes - full * 400e6) * weight_bytes / grad_bytes
    rpn = dp_ranks_per_node(system, tp, dp)

    def gather(size: float) -> float:
        return float(np.ravel(collective_cost("all_gather", size, system, dp, rpn).time_s)[0])

    assert dpc.gather_buckets[0] == full + 1
    assert dpc.all_gather_s[0] == pytest.approx(full * gather(400e6 * weight_bytes / grad_bytes) + gather(rest),
                                                rel=1e-12)
    off = data_parallel_comm(MODEL, system, tp, pp, dp, z, np.array([4.0]), options.model_copy(update={"overlap": False}))
    assert off.gather_buckets[0] == 1 and off.all_gather_s[0] == pytest.approx(gather(weight_bytes), rel=1e-12)


def test_step_prices_the_gather_chain_behind_one_micro_batch_forward() -> None:
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    m = 4
    row = evaluate_single(MODEL, system, 8, Layout(dp=8, global_batch=8 * m, zero=1), StepOptions())
    dpc = data_parallel_comm(MODEL, system, np.array([1]), np.array([1]), np.array([8]), np.array([1]),
                             np.array([float(m)]), StepOptions())
    forward = row["compute/link_s"] / m / 3  # forward = a third of forward + backward, no recompute
    expect = param_gather_exposure(dpc.all_gather_s, dpc.gather_buckets, np.array([forward]))
    assert row["dp/all_gather/link_s"] == pytest.approx(dpc.all_gather_s[0], rel=1e-12)
    assert row["dp/all_gather/exposed_s"] == pytest.approx(expect[0], rel=1e-9)


def test_reduce_scatter_waits_for_the_last_micro_batch_only() -> None:
    """register_grad_ready (param_and_grad_buffer.py @937571c) launches nothing before the last micro-batch:
    the exposed reduce-scatter is the same for 2 and 8 micro-batches of the same size."""
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    rows = [evaluate_single(MODEL, system, 8, Layout(dp=8, global_batch=8 * m, zero=1), StepOptions()) for m in (2, 8)]
    assert rows[0]["dp/reduce_scatter/exposed_s"] > 0
    assert rows[0]["dp/reduce_scatter/exposed_s"] == pytest.approx(rows[1]["dp/reduce_scatter/exposed_s"], rel=1e-12)
    assert rows[1]["compute/link_s"] == pytest.approx(4 * rows[0]["compute/link_s"], rel=1e-9)


def _simulated_interleaved_reduce(link: float, share: float, pp: int, vpp: int, backward: float) -> float:
    """Oracle: the first stage's last p·v chunk-backwards run chunk v−1 first, chunk 0 last (schedules.py @937571c
    get_model_chunk_id(forward=False)), each b/v; chunk k's whole reduction is launched when its last backward ends,
    one after the other on one stream. Returns how far the reductions run past the end of the backward."""
    step = backward / vpp
    end = pp * vpp * step
    sizes = [(1.0 - share) * link / vpp] * vpp
    sizes[0] += share * link  # chunk 0 of the first stage holds the input embedding
    free = 0.0
    for k in reversed(range(vpp)):  # launch order: chunk v−1 first
        launched = end - k * pp * step
        free = max(free, launched) + sizes[k]
    return max(free - end, 0.0)


@pytest.mark.parametrize(("pp", "vpp", "backward"), [(2, 2, 0.1), (2, 2, 3.0), (4, 4, 0.2), (8, 3, 0.05), (6, 16, 1.0)])
def test_interleaved_reduce_matches_a_chunk_by_chunk_schedule(pp: int, vpp: int, backward: float) -> None:
    link, share = 1.2, 0.1
    exposed = interleaved_reduce_exposure(np.array(link), np.array(share), np.array(1.0 / vpp), np.array(backward),
                                          np.array(pp), np.array(vpp))
    assert exposed == pytest.approx(_simulated_interleaved_reduce(link, share, pp, vpp, backward), rel=1e-12)


def test_interleaved_reduce_exposes_chunk_zero_whatever_the_window() -> None:
    # R = 1 s, embedding 10%, vpp 4, pp 4: chunk 0 = 0.9/4 + 0.1 = 0.325 s, launched after the backward.
    args = (np.array(1.0), np.array(0.1), np.array(0.25))
    assert interleaved_reduce_exposure(*args, np.array(0.5), np.array(4), np.array(4)) == pytest.approx(0.325)
    # comm-bound (b = 0.1 s: p·b/v = 0.1 s behind each chunk): 0.325 + 3·(0.225 − 0.1) = 0.7 s
    assert interleaved_reduce_exposure(*args, np.array(0.1), np.array(4), np.array(4)) == pytest.approx(0.7)


def test_step_prices_the_interleaved_reduce_chunk_by_chunk() -> None:
    """pp 2, vpp 2, ZeRO 1: the dp/reduce_scatter exposure is the chunk-by-chunk form, not the bucket-by-bucket one
    of vpp 1 (its whole chunk 0 waits for the end of the backward)."""
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    m, layout = 4, dict(pp=2, dp=4, zero=1)
    row = evaluate_single(MODEL, system, 8, Layout(**layout, vpp=2, global_batch=4 * m), StepOptions())
    flat = evaluate_single(MODEL, system, 8, Layout(**layout, vpp=1, global_batch=4 * m), StepOptions())
    params = dense_params_per_gpu(MODEL, np.array([1]), np.array([2]))[0]
    backward = row["compute/link_s"] / m * 2 / 3  # backward = two thirds of forward + backward, no recompute
    expect = interleaved_reduce_exposure(np.array(row["dp/reduce_scatter/link_s"]),
                                         np.array(MODEL.embedding_params / params), np.array(0.5),
                                         np.array(backward), np.array(2), np.array(2))
    assert row["dp/reduce_scatter/exposed_s"] == pytest.approx(float(expect), rel=1e-9)
    assert row["dp/reduce_scatter/exposed_s"] > flat["dp/reduce_scatter/exposed_s"]
