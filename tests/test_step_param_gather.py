"""Megatron-Core's data-parallel schedule (megatron/core @937571c, the README's H100 runs): the parameter all-gather
chained bucket by bucket through the first micro-batch's forward, the reduce-scatter only in the last micro-batch
(closed forms; :mod:`commmodel.step.overlap`)."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.step.comm import data_parallel_comm
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions
from commmodel.step.overlap import param_gather_exposure
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
