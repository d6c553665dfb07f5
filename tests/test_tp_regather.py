"""The backward's re-gather of the column-parallel inputs under sequence parallelism ([MLM-REGATHER] in
commmodel/step/stacks.py: Megatron-LM megatron/mpu/layers.py @02bb1f5c and core/tensor_parallel/layers.py
@937571c L441-462; Transformer Engine module/layernorm_linear.py @v1.8 L413-446): two more all-gathers per block
and micro-batch, launched before the input-gradient GEMM and waited after it, so they add link time and
overlap interference but no exposed time."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.io.profiles import load_system_with_network
from commmodel.io.validation_data import read_training_modern
from commmodel.step.comm import tensor_parallel_from_times
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.stacks import stack_options
from commmodel.step.terms import OVERLAP_INTERFERENCE
from commmodel.validation.modern import run_options
from commmodel.validation.training import _oos_model
from commmodel.workload.presets import PRESETS

TIMES = {"all_reduce": np.array([0.0]), "reduce_scatter": np.array([1.0]), "all_gather": np.array([1.0])}
ROW = "mlm-gpt-177b-h100-96gpu-strong"


def test_six_all_gathers_and_four_reduce_scatters_per_block() -> None:
    """Forward 2 AG + 2 RS, backward 2 AG + 2 RS (Korthikanti §4.2.2) and the 2 re-gathers: 6 + 4 per block."""
    dense, qwen = PRESETS["llama2-7b"], PRESETS["qwen3-235b-a22b"]
    pp, rc = np.array([1]), np.array([0])
    tpc = tensor_parallel_from_times(dense, TIMES, pp, rc, regather=True)
    assert (tpc.all_gather_s[0], tpc.reduce_scatter_s[0], tpc.regather_s[0]) == pytest.approx((6.0 * 32, 4.0 * 32, 64))
    # routed-only MoE blocks: the attention's QKV input only (fc1 of the routed experts is on the expert-TP group)
    moe = tensor_parallel_from_times(qwen, TIMES, pp, rc, regather=True)
    assert (moe.all_gather_s[0], moe.regather_s[0]) == pytest.approx((3.0 * 94, 94.0))
    assert tensor_parallel_from_times(dense, TIMES, pp, rc).regather_s[0] == 0.0
    no_sp = {**TIMES, "all_gather": np.array([0.0])}  # without sequence parallelism the inputs are whole
    assert tensor_parallel_from_times(dense, no_sp, pp, rc, regather=True).regather_s[0] == 0.0


def test_the_megatron_stacks_regather_and_pytorch_does_not() -> None:
    assert stack_options("megatron-core").tp_input_regather
    assert stack_options("megatron-lm-2021").tp_input_regather
    assert not stack_options("fsdp2").tp_input_regather  # DTensor's autograd keeps the gathered input


@pytest.mark.parametrize("overlap", [True, False])
def test_regather_adds_link_and_interference_not_exposed_time(overlap: bool) -> None:
    """GPT 177B, TP 8 x PP 6 x DP 2 on 96 H100: 16 blocks per stage, 576 micro-batches. The re-gather adds
    2 x 16 x 576 all-gathers of link time, none exposed (each hides behind a larger input-gradient GEMM), and
    OVERLAP_INTERFERENCE x that hidden time."""
    run = [r for r in read_training_modern() if r["id"] == ROW][0]
    model = _oos_model({**run["model"], "dtype": run["dtype"]})
    system = load_system_with_network(run["system"], run.get("network"))
    layout = Layout(**run["layout"])
    base = run_options(run).model_copy(update={"tp_comm_overlap": overlap})
    on = evaluate_single(model, system, 96, layout, base.model_copy(update={"tp_input_regather": True}))
    off = evaluate_single(model, system, 96, layout, base.model_copy(update={"tp_input_regather": False}))
    one_gather_s = off["tp/all_gather/link_s"] / (4.0 * 16 * 576)
    added_s = 2.0 * 16 * 576 * one_gather_s
    assert on["tp/all_gather/link_s"] - off["tp/all_gather/link_s"] == pytest.approx(added_s)
    exposed = [sum(r[f"tp/{op}/exposed_s"] for op in ("all_gather", "reduce_scatter")) for r in (on, off)]
    assert exposed[0] == pytest.approx(exposed[1])
    interference = on["overlap/interference/exposed_s"] - off["overlap/interference/exposed_s"]
    assert interference == pytest.approx(OVERLAP_INTERFERENCE * added_s, rel=1e-6)
