"""What the sequence-parallel TP collectives carry under FP8 (commmodel/step/tp_wire.py): torchao float8
tensorwise (torchtitan's Float8ColwiseParallel / PrepareFloat8ModuleInput / Float8RowwiseParallel, pytorch/ao
torchao/float8/float8_tensor_parallel.py @eab345c and @624304080, float8_ops.py ``allgather_fp8``) and Transformer
Engine delayed/current scaling (layernorm_linear.py and base.py ``grad_output_preprocess`` @v1.12, @v2.4) cast
before they all-gather, so the input and output-gradient all-gathers move 1 byte per element; the reduce-scatters
of GEMM outputs stay 16-bit; torchao rowwise runs torchtitan's regular TP (parallelize_llama.py @820504e), 16-bit."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.io.profiles import load_system_with_network
from commmodel.step.comm import tensor_parallel_from_times, tensor_parallel_requests
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import RECOMPUTE_CODES, Layout
from commmodel.step.stack_assumptions import assumptions
from commmodel.step.stacks import stack_options
from commmodel.step.tp_wire import tp_wire_bytes
from commmodel.workload.presets import PRESETS

# tt2506-llama31-8b-h100-64gpu-tp8-*: b 12 per FSDP rank, s 8192, h 4096 = 402,653,184 elements per collective
ELEMENTS = 12 * 8192 * 4096


@pytest.mark.parametrize(("recipe", "expected"), [
    ("torchao-fp8-tensorwise", (1.0, 1.0, 2.0)), ("te-fp8-delayed", (1.0, 1.0, 2.0)),
    ("te-fp8-current", (1.0, 1.0, 2.0)), ("torchao-fp8-rowwise", (2.0, 2.0, 2.0)),
    ("te-fp8-blockwise", (2.0, 2.0, 2.0)), ("te-mxfp8", (2.0, 2.0, 2.0)), (None, (2.0, 2.0, 2.0))])
def test_wire_bytes_per_recipe(recipe: str | None, expected: tuple) -> None:
    assert tuple(tp_wire_bytes(recipe, 2.0)) == expected


def test_requests_gather_fp8_and_reduce_scatter_bf16() -> None:
    """8B at TP 8 with SP: each all-gather 402.7 MB in FP8 (805.3 MB in bf16), each reduce-scatter 805.3 MB."""
    model, system = PRESETS["llama3-8b"], load_system_with_network("meta-grand-teton-h100", "roce-400g:8")
    args = (model, system, np.array([12.0]), np.array([8]), np.array([True]))
    fp8 = tensor_parallel_requests(*args, tp_wire_bytes("torchao-fp8-tensorwise", 2.0))
    bf16 = tensor_parallel_requests(*args)
    assert fp8["all_gather"][1][0] == fp8["grad_all_gather"][1][0] == pytest.approx(ELEMENTS * 1.0)
    assert fp8["reduce_scatter"][1][0] == bf16["reduce_scatter"][1][0] == pytest.approx(ELEMENTS * 2.0)
    assert bf16["all_gather"][1][0] == bf16["grad_all_gather"][1][0] == pytest.approx(ELEMENTS * 2.0)


def test_counts_split_input_and_gradient_gathers() -> None:
    """Per block: forward 2 input AG + 2 RS, backward 2 gradient AG + 2 RS; op SAC repeats the 2 input AG
    only, full AC the forward's four (Llama 3 8B: 32 blocks)."""
    times = {"all_reduce": np.array([0.0]), "reduce_scatter": np.array([1.0]), "all_gather": np.array([10.0]),
             "grad_all_gather": np.array([100.0])}
    pp = np.array([1])
    model = PRESETS["llama3-8b"]
    for name, (ag, rs) in (("none", (2 * 10 + 2 * 100, 4)), ("op", (4 * 10 + 2 * 100, 4)),
                           ("full", (4 * 10 + 2 * 100, 6))):
        tpc = tensor_parallel_from_times(model, times, pp, np.array([RECOMPUTE_CODES[name]]))
        assert (tpc.all_gather_s[0], tpc.reduce_scatter_s[0]) == pytest.approx((32.0 * ag, 32.0 * rs)), name


def test_fsdp2_fp8_tensorwise_halves_the_all_gather_link_only() -> None:
    """The tt2506 8B layout (FSDP 8 x TP 8, op SAC) under fsdp2: tensorwise FP8's all-gather link is that of the
    half-size message, the reduce-scatter link equals bf16's; rowwise gathers in bf16."""
    system = load_system_with_network("meta-grand-teton-h100", "roce-400g:8")
    layout = Layout(tp=8, dp=8, micro_batch=12, global_batch=96, zero=3, recompute="op", sequence_parallel=True)
    opts = stack_options("fsdp2", elementwise="compiled")
    rows = {d: evaluate_single(PRESETS["llama3-8b"].model_copy(update={"dtype": d}), system, 64, layout, opts)
            for d in ("bf16", "fp8", "fp8-rowwise")}
    assert rows["fp8"]["tp/reduce_scatter/link_s"] == pytest.approx(rows["bf16"]["tp/reduce_scatter/link_s"])
    assert rows["fp8-rowwise"]["tp/all_gather/link_s"] == pytest.approx(rows["bf16"]["tp/all_gather/link_s"])
    ratio = rows["fp8"]["tp/all_gather/link_s"] / rows["bf16"]["tp/all_gather/link_s"]
    assert 0.5 <= ratio < 0.6  # bandwidth-bound: half the bytes, plus the unchanged per-call latency


def test_assumption_line_names_the_rule() -> None:
    model = PRESETS["llama3-8b"].model_copy(update={"dtype": "fp8"})
    lines = assumptions("fsdp2", stack_options("fsdp2"), None, model)
    assert any("TP all-gathers" in line and "tp_wire" in line for line in lines)
    rowwise = PRESETS["llama3-8b"].model_copy(update={"dtype": "fp8-rowwise"})
    assert not any("tp_wire" in line for line in assumptions("fsdp2", stack_options("fsdp2"), None, rowwise))
