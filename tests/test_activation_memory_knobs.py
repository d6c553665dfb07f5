"""What the activation memory stores per block: what a low-precision linear keeps of its input for the weight gradient
(step/precision.py ``saved_input_bytes``, step/stack_precision.py ``saved_inputs``) and the dropout masks
(StepOptions ``hidden_dropout`` / ``attention_dropout``), in workload/memory.py ``linear_layer_bytes_per_token``."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.io.profiles import load_system
from commmodel.step.stack_precision import saved_inputs
from commmodel.step.precision import RECIPES, saved_input_bytes
from commmodel.workload.memory import activation_bytes_per_layer, linear_layer_bytes_per_token
from commmodel.workload.model import TransformerModel
from commmodel.workload.presets import get_model
from commmodel.workload.saved_inputs import SavedInputs

H100 = load_system("dgx-h100")
MX = 1.0 + 1.0 / 32
FP4 = 0.5 + 1.0 / 16

# recipe -> (dtype, bytes kept per input element): TE keeps its cast (linear.py @0004dbd0 saves inputmat/inputmat_t),
# torchao tensorwise its FP8 cast (@eab345c input_fp8), torchao rowwise and MX the 16-bit input (input_hp).
KEPT = {
    "te-fp8-delayed": ("fp8", 1.0), "te-fp8-current": ("fp8", 1.0), "te-mxfp8": ("mxfp8", MX),
    "te-nvfp4": ("nvfp4", FP4), "torchao-fp8-tensorwise": ("fp8", 1.0), "torchao-fp8-rowwise": ("fp8-rowwise", 2.0),
    "torchao-mxfp8": ("mxfp8", 2.0), "te-fp8-blockwise": ("fp8-blockwise", 1.03125),  # column-wise copy + 4 B / 128
}


@pytest.mark.parametrize("recipe", RECIPES)
def test_kept_input_bytes_per_recipe(recipe: str) -> None:
    dtype, kept = KEPT[recipe]
    assert saved_input_bytes(recipe, dtype, 90) == saved_input_bytes(recipe, dtype, 100) == kept


def test_stack_library_decides_what_is_kept() -> None:
    fp8 = get_model("llama3-8b").model_copy(update={"dtype": "fp8"})
    assert saved_inputs(fp8, H100, "fused").linear_bytes == 1.0  # Megatron-Core / llm-foundry: Transformer Engine
    assert saved_inputs(fp8, H100, "compiled").linear_bytes == 1.0  # torchtitan: torchao tensorwise
    rowwise = fp8.model_copy(update={"dtype": "fp8-rowwise"})
    assert saved_inputs(rowwise, H100, "compiled").linear_bytes == 2.0
    bf16 = get_model("llama3-8b")
    assert saved_inputs(bf16, H100, "fused").linear(bf16) == 2.0  # bf16: the training dtype


MPT3B = TransformerModel(name="mpt-3b", num_layers=32, hidden_size=2560, num_heads=20, vocab_size=50368,
                         seq_len=8192, bias=False)


@pytest.mark.parametrize("flash", [True, False])
def test_fp8_block_bytes_closed_form(flash: bool) -> None:
    """MPT-3B block (MHA, GeLU MLP 4h): 16-bit 10h + 24h; a 1-byte kept input saves 1 byte on the QKV and fc1 inputs
    (h each) and on fc2's input (4h); the projection input is FlashAttention's own output, so fused attention adds
    a 1-byte copy (+h) while unfused keeps only the copy (−h)."""
    h = 2560.0
    rep16, split16 = linear_layer_bytes_per_token(MPT3B, flash)
    assert (rep16, split16) == (10 * h, 24 * h)
    rep8, split8 = linear_layer_bytes_per_token(MPT3B, flash, SavedInputs(1.0))
    assert rep8 == 8 * h
    assert split8 == (24 - 4 + (1 if flash else -1)) * h


def test_16bit_bytes_unchanged_and_gated_mlp_form() -> None:
    """Passing the training dtype's bytes is the 16-bit formula; SwiGLU (gate, up, product) keeps the product for
    fc2: 2 bytes -> 1 on f."""
    llama = get_model("llama3-8b")
    assert linear_layer_bytes_per_token(llama, True, SavedInputs(2.0)) == linear_layer_bytes_per_token(llama, True)
    f = float(llama.ffn_hidden_size)
    h, o = float(llama.hidden_size), float(llama.attention_out_dim)
    (rep16, split16), (rep8, split8) = (linear_layer_bytes_per_token(llama, True, SavedInputs(i)) for i in (None, 1.0))
    assert rep16 - rep8 == 2 * h and split16 - split8 == pytest.approx(f - o)


def test_published_mpt_3b_8k_fp8_run_fits_an_80gb_h100() -> None:
    """llm-foundry's H100 FP8 table trained MPT-3B at 8K, micro-batch 3, no checkpointing, on 80 GB GPUs ([MPT] in
    commmodel/data/training_modern.yaml): with Transformer Engine's 1-byte kept inputs the block stores 29 h per token
    (34 before), 68.5 -> 58.4 GB of activations."""
    fp8 = MPT3B.model_copy(update={"dtype": "fp8"})
    args = (np.array([3.0]), np.array([1]), np.array([False]), np.array([0]), True)
    kept16 = activation_bytes_per_layer(fp8, *args)[0]
    kept8 = activation_bytes_per_layer(fp8, *args, saved=SavedInputs(1.0))[0]
    tokens = 3 * 8192
    assert kept16 == pytest.approx(tokens * 34 * 2560)
    assert kept8 == pytest.approx(tokens * 29 * 2560)
    assert 32 * kept8 == pytest.approx(58.38e9, rel=1e-3)


def test_dropout_masks_only_where_dropout_is_on() -> None:
    """Hidden dropout stores two 1-byte masks per hidden element (2h of Korthikanti's 34h); a dropout of probability 0
    returns its input (aten Dropout.cpp ``_dropout_impl``) and stores none. Unfused attention keeps its softmax
    output (e·a·s per token) and, with attention dropout, the mask and the dropout output ((2e + 1)·a·s)."""
    h, a, s = 2560.0, 20.0, 8192.0
    assert linear_layer_bytes_per_token(MPT3B, True, hidden_dropout=False) == (8 * h, 24 * h)
    args = (np.array([1.0]), np.array([1]), np.array([False]), np.array([0]), False)
    korthikanti = activation_bytes_per_layer(MPT3B, *args)[0]
    none = activation_bytes_per_layer(MPT3B, *args, dropout=(False, False))[0]
    assert korthikanti == pytest.approx(s * (34 * h + 5 * a * s))
    assert none == pytest.approx(s * (32 * h + 2 * a * s))


def test_stacks_state_their_dropout_and_the_step_model_follows() -> None:
    """megatron-lm-2021 and deepspeed keep Megatron's default 0.1 (Korthikanti's formula); the other stacks train
    without dropout, so their blocks store 2h bytes per token less (here tp 1, 32 layers, one micro-batch)."""
    from commmodel.step.estimate import evaluate_single
    from commmodel.step.layout import Layout
    from commmodel.step.stacks import stack_options

    assert stack_options("megatron-lm-2021").hidden_dropout == 0.1 == stack_options("deepspeed").attention_dropout
    assert stack_options("megatron-core").hidden_dropout == 0.0 == stack_options("fsdp2").hidden_dropout
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, zero=1, recompute="none")
    core = stack_options("megatron-core")
    with_masks = core.model_copy(update={"hidden_dropout": 0.1})
    rows = [evaluate_single(MPT3B, H100, 8, layout, o) for o in (core, with_masks)]
    gained = rows[1]["memory/activations_bytes"] - rows[0]["memory/activations_bytes"]
    assert gained == pytest.approx(32 * 8192 * 2 * 2560)


def test_projection_keeps_its_original_input_under_non_delayed_te_recipes() -> None:
    """Megatron-LM @d98e8a6 attention.py: ``set_save_original_input(self.linear_proj)`` when fp8_recipe != 'delayed'
    or FP4: the projection keeps the 16-bit attention output (which FlashAttention keeps anyway) and no cast of its
    own. Per token and block that is i·o fewer bytes than a recipe that keeps its copy (Llama 3 70B: o = 8192)."""
    b200 = load_system("hgx-b200")
    llama = get_model("llama3-70b")
    o = float(llama.attention_out_dim)
    mx = llama.model_copy(update={"dtype": "mxfp8"})
    fp8 = llama.model_copy(update={"dtype": "fp8"})
    assert saved_inputs(mx, b200, "fused") == SavedInputs(MX, None, projection_copy=False)  # te-mxfp8
    assert saved_inputs(fp8, H100, "fused").projection_copy  # te-fp8-delayed keeps its copy
    assert saved_inputs(fp8, H100, "compiled").projection_copy  # torchao tensorwise: input_fp8
    kept = SavedInputs(MX)
    original = kept._replace(projection_copy=False)
    assert original.projection(mx, True) == 2.0 and kept.projection(mx, True) == 2.0 + MX
    assert original.projection(mx, False) == 2.0 and kept.projection(mx, False) == MX
    (_, split_copy), (_, split_orig) = (linear_layer_bytes_per_token(mx, True, s) for s in (kept, original))
    assert split_copy - split_orig == pytest.approx(MX * o)
    assert SavedInputs().projection(llama, True) == 2.0  # 16-bit training: the one output
