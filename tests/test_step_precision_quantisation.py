"""Low-precision cast traffic per recipe (step/precision.py ``quantisation_bytes``) and per block (step/compute.py)."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.io.profiles import load_system
from commmodel.step.stack_precision import block_cast_bytes, quantised_elements
from commmodel.step.precision import RECIPES, quantisation_bytes, quantisation_recipe, with_fp8_params
from commmodel.workload.presets import get_model

H100 = load_system("dgx-h100")
B200 = load_system("hgx-b200")
MX = 1.0 + 1.0 / 32  # MXFP8 element + its e8m0 scale per 32
FP4 = 0.5 + 1.0 / 16  # NVFP4 element + its e4m3 scale per 16

# (recipe, sm): (X forward, X backward, W forward, W backward, dY backward) bytes per 16-bit element
CLOSED_FORMS = {
    ("te-fp8-delayed", 90): (2 + 2 * 1, 0, 2 + 2 * 1, 0, 2 + 2 * 1),  # cast-transpose: read 2, row + column copies
    ("te-fp8-delayed", 100): (2 + 1, 0, 2 + 1, 0, 2 + 1),  # Blackwell: one copy serves both usages
    ("te-fp8-current", 90): (2 + 2 + 2, 0, 2 + 2 + 2, 0, 2 + 2 + 2),  # + an amax read
    ("te-fp8-current", 100): (2 + 2 + 1, 0, 2 + 2 + 1, 0, 2 + 2 + 1),
    ("te-mxfp8", 100): (2 + 2 * MX, 0, 2 + 2 * MX, 0, 2 + 2 * MX),  # one kernel, 1x32 and 32x1 copies
    # FP8 blockwise (Hopper): X and dY 1x128 + 128x1 copies from one tile load, FP32 scale per 128: 2 + 2(1 + 4/128)
    # = 4.0625; W 128x128 blocks, one quantisation + transposed data and scales: 2 + 2(1 + 4/16384) = 4.00048828125
    ("te-fp8-blockwise", 90): (4.0625, 0, 4.00048828125, 0, 4.0625),
    ("te-nvfp4", 100): (2 + 2 + 2 * FP4, 0, 2 + 2 + 2 * FP4, 0, 2 + 2 + 2 * FP4),  # amax, then row + RHT column
    ("torchao-fp8-tensorwise", 90): (2 + 2 + 2, 0, 2 + 3, 3, 2 + 2 + 2),  # roofline_utils.py "tensorwise"
    ("torchao-fp8-rowwise", 90): (5, 3, 3, 4 + 3, 5 + 3),  # roofline_utils.py "rowwise"
    ("torchao-mxfp8", 100): (2 + MX, 2 + MX, 2 + MX, 2 + MX, 2 * (2 + MX)),  # "mxfp8_cublas": dim0 and dim1 casts
}


@pytest.mark.parametrize(("recipe", "sm"), sorted(CLOSED_FORMS))
def test_recipe_bytes_closed_forms(recipe: str, sm: int) -> None:
    q = quantisation_bytes(recipe, sm)
    got = (q.activation_forward, q.activation_backward, q.weight_forward, q.weight_backward, q.grad_output_backward)
    assert got == pytest.approx(CLOSED_FORMS[(recipe, sm)])


def test_every_recipe_has_a_closed_form_and_unknown_is_refused() -> None:
    assert {r for r, _ in CLOSED_FORMS} == set(RECIPES)
    with pytest.raises(ValueError, match="quantisation recipe"):
        quantisation_bytes("fp8-blockwise", 90)


def test_recipe_follows_library_and_dtype() -> None:
    assert quantisation_recipe("fp8", "te") == "te-fp8-delayed"  # Megatron-Core --fp8-recipe default
    assert quantisation_recipe("fp8", "torchao") == "torchao-fp8-tensorwise"
    assert quantisation_recipe("fp8-rowwise", "torchao") == "torchao-fp8-rowwise"
    assert quantisation_recipe("mxfp8", "te") == "te-mxfp8"
    assert quantisation_recipe("mxfp8", "torchao") == "torchao-mxfp8"
    assert quantisation_recipe("nvfp4", "torchao") == "te-nvfp4"


def test_dense_block_elements_closed_form() -> None:
    m = get_model("llama3-8b")
    s, h, f = m.seq_len, m.hidden_size, m.ffn_hidden_size
    qkv = h + 2 * m.kv_dim  # fused QKV width
    x, w, dy = quantised_elements(m, np.array([2.0]), np.array([2.0]))
    tokens = 2 * s
    assert x[0] == pytest.approx(tokens * (h + h / 2 + h + f / 2))  # qkv, proj (k = h/tp), fc1, fc2 (k = f/tp)
    assert dy[0] == pytest.approx(tokens * (qkv / 2 + h + 2 * f / 2 + h))
    assert w[0] == pytest.approx((h * qkv + h * h + 3 * h * f) / 2)


def test_moe_block_elements_count_every_routed_copy_and_local_experts() -> None:
    m = get_model("qwen3-235b-a22b")  # 128 experts, top-8, no shared, all blocks MoE
    h, fe, k = m.hidden_size, m.expert_ffn_hidden_size, m.experts_per_token
    x1, w1, _ = quantised_elements(m, np.array([1.0]), np.array([1.0]), ep=1)
    x8, w8, _ = quantised_elements(m, np.array([1.0]), np.array([1.0]), ep=8)
    assert x8[0] == pytest.approx(x1[0])  # the same token copies, whatever the EP degree
    mlp_x = m.seq_len * k * (h + fe)  # fc1 input h and fc2 input f_expert for each of top-k copies
    assert x1[0] - mlp_x == pytest.approx(m.seq_len * (h + m.attention_out_dim))
    assert w1[0] - w8[0] == pytest.approx(3 * h * fe * (128 - 128 / 8))


def test_block_bytes_are_elements_times_recipe_and_zero_in_bf16() -> None:
    m = get_model("llama3-8b").model_copy(update={"dtype": "fp8"})
    mb, tp = np.array([1.0]), np.array([1.0])
    x, w, dy = quantised_elements(m, mb, tp)
    fwd, bwd = block_cast_bytes(m, H100, mb, tp, 1, 1, "fused")  # TE delayed on Hopper
    assert (fwd[0], bwd[0]) == pytest.approx((4 * (x[0] + w[0]), 4 * dy[0]))
    fwd, bwd = block_cast_bytes(m, H100, mb, tp, 1, 1, "compiled")  # torchao tensorwise
    assert (fwd[0], bwd[0]) == pytest.approx((6 * x[0] + 5 * w[0], 3 * w[0] + 6 * dy[0]))
    mx = m.model_copy(update={"dtype": "mxfp8"})
    fwd, bwd = block_cast_bytes(mx, B200, mb, tp, 1, 1, "fused")
    assert (fwd[0], bwd[0]) == pytest.approx(((2 + 2 * MX) * (x[0] + w[0]), (2 + 2 * MX) * dy[0]))
    assert block_cast_bytes(get_model("llama3-8b"), H100, mb, tp, 1, 1, "fused") == (0.0, 0.0)


@pytest.mark.parametrize(("recipe", "sm", "weight"), [
    ("te-fp8-delayed", 90, (0.0, 2.0)),  # FP8 weight, FP8 transpose for dgrad (read 1, write 1)
    ("te-fp8-delayed", 100, (0.0, 0.0)),  # Blackwell: one layout
    ("torchao-fp8-tensorwise", 100, (0.0, 2.0)),  # _scaled_mm's column-major second operand
    ("te-mxfp8", 100, (0.0, 0.0)),  # MXFP8 parameters carry both usages
    ("torchao-mxfp8", 100, (2 + MX, 2 + MX)),  # gathered in 16 bits: casts unchanged
    ("torchao-fp8-rowwise", 90, (3.0, 7.0)),
])
def test_fp8_params_drop_the_weight_casts(recipe: str, sm: int, weight: tuple) -> None:
    q, plain = with_fp8_params(quantisation_bytes(recipe, sm), recipe, sm), quantisation_bytes(recipe, sm)
    assert (q.weight_forward, q.weight_backward) == pytest.approx(weight)
    assert (q.activation_forward, q.grad_output_backward) == (plain.activation_forward, plain.grad_output_backward)


def test_the_router_gemm_runs_in_16_bits_under_a_low_precision_dtype() -> None:
    """FP8 and MXFP8 training price the linears at the low-precision peak; the router, which no recipe casts (and
    whose operands the cast traffic already leaves out), runs at the 16-bit peak like the attention core."""
    from commmodel.step.compute import gemm_run_dtype
    from commmodel.workload.flops import layer_gemms
    from commmodel.workload.presets import get_model

    gemms = {g.name: g for g in layer_gemms(get_model("mixtral-8x7b"), np.asarray(1.0), np.asarray(1.0))}
    assert gemm_run_dtype(gemms["router"], "fp8") == "bf16" and gemm_run_dtype(gemms["router"], "mxfp8") == "bf16"
    assert gemm_run_dtype(gemms["scores"], "fp8") == "bf16"
    assert gemm_run_dtype(gemms["fc1"], "fp8") == "fp8" and gemm_run_dtype(gemms["router"], "bf16") == "bf16"
