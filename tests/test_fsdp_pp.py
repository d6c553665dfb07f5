"""FSDP2 under torch.distributed.pipelining (zero3_pp_keep_unsharded): one all-gather and one reduce-scatter per
block per step, the chunk-by-chunk reduction after each chunk's last backward, the unsharded memory (closed forms).
Source: commmodel.step.comm.zero3_pp_unsharded (torchtitan @9dec370, torch pipelining stage.py)."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.step.comm import data_parallel_comm
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions
from commmodel.step.overlap import fsdp_pp_gather_exposure, interleaved_reduce_exposure
from commmodel.step.placement import dp_ranks_per_node
from commmodel.step.stacks import get_stack, stack_options
from commmodel.workload import PRESETS
from commmodel.workload.memory import dense_params_per_gpu

from toys import toy_system

MODEL = PRESETS["gpt3-1.3b"]  # 24 layers
KEEP = StepOptions(zero3_pp_keep_unsharded=True)


def _one_layer(op: str, bytes_per_param: float, tp: np.ndarray, pp: np.ndarray, dp: np.ndarray, system) -> float:
    layers = MODEL.num_layers / int(pp[0])
    size = dense_params_per_gpu(MODEL, tp, pp) * bytes_per_param / layers
    return float(collective_cost(op, size, system, dp, dp_ranks_per_node(system, tp, dp)).time_s[0])


def test_gather_exposure_closed_forms() -> None:
    # compute-bound: only the first block of each of the v chunks waits for its gather
    assert fsdp_pp_gather_exposure(np.array(16.0), np.array(0.01), np.array(1.6), 2) == pytest.approx(2 * 0.01)
    # comm-bound (g 0.3 > f 0.1 per block): v·g + (L − v)·(g − f) = 2·0.3 + 14·0.2
    assert fsdp_pp_gather_exposure(np.array(16.0), np.array(0.3), np.array(1.6), 2) == pytest.approx(0.6 + 2.8)
    assert fsdp_pp_gather_exposure(np.array(16.0), np.array(0.3), np.array(1.6), 1) == pytest.approx(0.3 + 15 * 0.2)


def test_one_gather_and_one_reduce_scatter_per_block_per_step() -> None:
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    tp, pp, dp, z, m = np.array([1]), np.array([2]), np.array([8]), np.array([3]), np.array([4.0])
    ag, rs = _one_layer("all_gather", 2.0, tp, pp, dp, system), _one_layer("reduce_scatter", 4.0, tp, pp, dp, system)
    kept = data_parallel_comm(MODEL, system, tp, pp, dp, z, m, KEEP)
    assert kept.all_gather_s[0] == pytest.approx(12 * ag, rel=1e-12)
    assert kept.reduce_scatter_s[0] == pytest.approx(12 * rs, rel=1e-12)
    resharded = data_parallel_comm(MODEL, system, tp, pp, dp, z, m, StepOptions())  # DeepSpeed ZeRO-3 as before
    assert resharded.all_gather_s[0] == pytest.approx(2 * 4 * 12 * ag, rel=1e-12)
    assert resharded.reduce_scatter_s[0] == pytest.approx(4 * 12 * rs, rel=1e-12)
    no_pp = data_parallel_comm(MODEL, system, tp, np.array([1]), dp, z, m, KEEP)  # FSDP without PP: per micro-batch
    assert no_pp.reduce_scatter_s[0] == pytest.approx(4 * 24 * _one_layer("reduce_scatter", 4.0, tp, np.array([1]), dp,
                                                                          system), rel=1e-12)


def _step(vpp: int) -> tuple[dict, float, float]:
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    lay = Layout(dp=8, pp=2, vpp=vpp, global_batch=64, zero=3)  # 8 micro-batches of 1
    row = evaluate_single(MODEL, system, 16, lay, KEEP)
    forward = row["compute/link_s"] / 8 / 3  # per micro-batch: forward + backward (2× forward), no recompute
    return row, forward, _one_layer("all_gather", 2.0, np.array([1]), np.array([2]), np.array([8]), system)


def test_one_chunk_exposes_its_whole_reduction_and_the_first_gather() -> None:
    row, forward, ag = _step(1)
    assert row["dp/reduce_scatter/exposed_s"] == pytest.approx(row["dp/reduce_scatter/link_s"], rel=1e-12)
    assert row["dp/all_gather/link_s"] == pytest.approx(12 * ag, rel=1e-12)
    assert row["dp/all_gather/exposed_s"] == pytest.approx(
        float(fsdp_pp_gather_exposure(np.array(12.0), np.array(ag), np.array(forward), 1)), rel=1e-9)


def test_interleaving_hides_the_later_chunks_reduction() -> None:
    row, forward, _ = _step(2)
    link = row["dp/reduce_scatter/link_s"]
    params = float(dense_params_per_gpu(MODEL, np.array([1]), np.array([2]))[0])
    share = MODEL.embedding_params / params
    expected = interleaved_reduce_exposure(np.array(link), np.array(share), np.array(0.5), np.array(2 * forward),
                                           np.array([2]), np.array([2.0]))
    assert row["dp/reduce_scatter/exposed_s"] == pytest.approx(float(expected[0]), rel=1e-9)
    # compute-bound here: only chunk 0 (half the blocks, all the embedding) is exposed
    assert row["dp/reduce_scatter/exposed_s"] == pytest.approx(link * (share + (1 - share) / 2), rel=1e-9)


def test_unsharded_parameters_and_fp32_gradients_are_held() -> None:
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    lay = Layout(dp=8, pp=2, global_batch=64, zero=3)
    kept, resharded = (evaluate_single(MODEL, system, 16, lay, o) for o in (KEEP, StepOptions()))
    params = float(dense_params_per_gpu(MODEL, np.array([1]), np.array([2]))[0])
    assert kept["memory/gradients_bytes"] == pytest.approx(4.0 * params, rel=1e-12)
    assert kept["memory/weights_bytes"] == pytest.approx(resharded["memory/weights_bytes"] + 2.0 * params, rel=1e-12)


def test_only_fsdp2_keeps_blocks_gathered_under_pp() -> None:
    assert stack_options("fsdp2").zero3_pp_keep_unsharded
    for name in ("megatron-core", "megatron-lm-2021", "deepspeed", "ddp"):
        assert not stack_options(name).zero3_pp_keep_unsharded
    assert any("reshard_after_forward=False with PP" in b.source for b in get_stack("fsdp2").behaviours)
