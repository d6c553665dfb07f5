"""FP8 block-wise scaling as a training dtype (``fp8-blockwise``: Transformer Engine ``Float8BlockScaling``, Megatron
``--fp8-recipe blockwise``, DeepSeek-V3 arXiv:2412.19437 §3.3), Megatron-Core's ``activation_func_fp8_input_store``
and the DeepSeek-V3 H800 row's documented recipe (§3.2.3, §3.3.3).

Closed forms (TE @d0067d0 fp8_blockwise_scaling.rst; quantize_transpose_vector/square_blockwise.cu):
  activation / dY element: read 2, write row-wise and column-wise FP8 copies with one FP32 scale per 128:
      2 + 2·(1 + 4/128) = 4.0625 bytes
  weight element: read 2, write the 128×128-scaled copy and its transpose: 2 + 2·(1 + 4/16384) = 4.00048828125
  kept input (TE linear.py keeps the column-wise copy): 1 + 4/128 = 1.03125 bytes per element
FP8 input store (Megatron-LM @d98e8a6 fused_bias_swiglu.py: ``input.to(torch.float8_e4m3fn)``): the SwiGLU input,
2·f wide, kept at 1 byte instead of e = 2: frees 2·f·(2 − 1) bytes per token and block."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import WorkloadError
from commmodel.io.profiles import load_system
from commmodel.step.compute import HBM_EFFICIENCY
from commmodel.step.stack_precision import block_store_cast_bytes, saved_inputs
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions
from commmodel.step.precision import (NARROW_BYTES, check_precision, param_wire_bytes, quantisation_bytes,
                                      quantisation_recipe,
                                      saved_input_bytes, with_fp8_params)
from commmodel.step.stacks import stack_options
from commmodel.workload.activation_store import activation_input_bytes, store_cast_bytes
from commmodel.workload.saved_inputs import SavedInputs
from commmodel.workload.presets import get_model
from commmodel.workload.recompute_modules import dropped_bytes_per_token, mlp_widths

H100 = load_system("dgx-h100")
LLAMA = get_model("llama3-8b")
ONE_NODE = Layout(tp=1, pp=1, dp=8, cp=1, ep=1, etp=1, vpp=1, micro_batch=1, global_batch=8, zero=1,
                  recompute="selective", sequence_parallel=False)


def test_blockwise_cast_and_kept_bytes_closed_forms() -> None:
    q = quantisation_bytes("te-fp8-blockwise", 90)
    assert q.activation_forward == q.grad_output_backward == 2 + 2 * (1 + 4 / 128) == 4.0625
    assert q.weight_forward == 2 + 2 * (1 + 4 / 16384) == 4.00048828125
    assert q.activation_backward == q.weight_backward == 0.0  # both copies written in the forward's one kernel
    assert NARROW_BYTES["fp8-blockwise"] == saved_input_bytes("te-fp8-blockwise", "fp8-blockwise", 90) == 1.03125
    blockwise = LLAMA.model_copy(update={"dtype": "fp8-blockwise"})
    assert saved_inputs(blockwise, H100, "fused").linear_bytes == 1.03125
    assert quantisation_recipe("fp8-blockwise", "te") == "te-fp8-blockwise"


def test_blockwise_needs_hopper_and_transformer_engine() -> None:
    check_precision(H100.gpu, "fp8-blockwise")  # sm_90: allowed
    with pytest.raises(WorkloadError, match=r"sm_90.*a100-sxm-80gb is sm_80; use --dtype bf16$"):
        check_precision(load_system("dgx-a100").gpu, "fp8-blockwise")
    with pytest.raises(WorkloadError, match="emulates FP8 block scaling with mxfp8.*use --dtype mxfp8"):
        check_precision(load_system("hgx-b200").gpu, "fp8-blockwise")
    with pytest.raises(WorkloadError, match="Float8BlockScaling"):
        quantisation_recipe("fp8-blockwise", "torchao")
    # FP8 weights gathered block-scaled: the gather is 1 byte, but the post-gather swizzle is not modelled, so the
    # recipe keeps its weight casts (an overcount), not an error: megatron-core gathers FP8 weights by default
    blockwise_q = quantisation_bytes("te-fp8-blockwise", 90)
    assert with_fp8_params(blockwise_q, "te-fp8-blockwise", 90) == blockwise_q
    assert param_wire_bytes(2.0, "fp8-blockwise", True) == 1.0 and param_wire_bytes(2.0, "nvfp4", True) == 2.0


def test_recompute_layernorm_allowed_under_blockwise_refused_under_delayed() -> None:
    """Megatron-Core (transformer_config.py @d98e8a6) refuses layernorm/moe_act recompute with delayed scaling only:
    layernorm frees the linears' kept copies of the two norm outputs, 2·i·h per token and block (i = 1.03125)."""
    options = stack_options("megatron-core", recompute_modules=("core_attn", "layernorm"))
    with pytest.raises(WorkloadError, match="delayed scaling"):
        evaluate_single(LLAMA.model_copy(update={"dtype": "fp8"}), H100, 8, ONE_NODE, options)
    blockwise = LLAMA.model_copy(update={"dtype": "fp8-blockwise"})
    on = evaluate_single(blockwise, H100, 8, ONE_NODE, options)
    off = evaluate_single(blockwise, H100, 8, ONE_NODE, stack_options("megatron-core"))
    freed = off["memory/activations_bytes"] - on["memory/activations_bytes"]
    # all 32 stored blocks lose them; the recomputing block has them back only after the loss's buffers
    # (1.05e9 logits) are freed, and they are larger: memory_terms' _past_the_loss
    assert freed == pytest.approx(32 * 8192 * 2 * 1.03125 * 4096, rel=1e-12)


def test_blockwise_keeps_megatron_fp32_master_copy() -> None:
    """Precision-aware Adam bf16,bf16: 2 + 2 + 2 (int16 remainders, TE FusedAdam) under delayed scaling, 2 + 2 + 4
    (Megatron-Core's own fp32 master) under blockwise (optimizer_config.py @d98e8a6)."""
    from commmodel.workload.optimizer_states import PrecisionAwareOptimizer

    opt = stack_options("megatron-core", precision_aware_optimizer=PrecisionAwareOptimizer(
        exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16"))
    delayed = evaluate_single(LLAMA.model_copy(update={"dtype": "fp8"}), H100, 8, ONE_NODE, opt)
    blockwise = evaluate_single(LLAMA.model_copy(update={"dtype": "fp8-blockwise"}), H100, 8, ONE_NODE, opt)
    assert blockwise["memory/optimizer_bytes"] / delayed["memory/optimizer_bytes"] == pytest.approx(8 / 6)


def test_fp8_input_store_frees_the_swiglu_input() -> None:
    """llama3-8b (f 14336, s 8192, 32 blocks) on 8 H100, tp 1, micro-batch 1: each stored block keeps its SwiGLU
    input at 1 byte instead of 2 over 2·f: 8192 · 2 · 14336 · (2 − 1) = 234,881,024 bytes, × 32 blocks in flight =
    7,516,192,768 bytes."""
    options = stack_options("megatron-core")
    off = evaluate_single(LLAMA, H100, 8, ONE_NODE, options)
    on = evaluate_single(LLAMA, H100, 8, ONE_NODE, options.model_copy(update={"activation_fp8_input_store": True}))
    assert off["memory/activations_bytes"] - on["memory/activations_bytes"] == 7_516_192_768
    assert activation_input_bytes(LLAMA, True) == 2.0 and activation_input_bytes(LLAMA, False) == 4.0


def test_fp8_input_store_casts_closed_form() -> None:
    """Forward ``to(float8_e4m3fn)`` reads 2 writes 1, backward reads 1 writes 2, over 2·f per token: 6 bytes per
    element of f each way; llama3-8b micro-batch 1, tp 1: 8192 · 14336 · 6 bytes per block."""
    assert store_cast_bytes(LLAMA, True) == (6.0, 6.0) and store_cast_bytes(LLAMA, False) == (0.0, 0.0)
    fwd, bwd = block_store_cast_bytes(LLAMA, np.array([1.0]), np.array([1.0]), True)
    assert fwd[0] == bwd[0] == 8192 * 14336 * 6
    options = stack_options("megatron-core")
    off = evaluate_single(LLAMA, H100, 8, ONE_NODE, options)
    on = evaluate_single(LLAMA, H100, 8, ONE_NODE, options.model_copy(update={"activation_fp8_input_store": True}))
    extra_s = 32 * (fwd[0] + bwd[0]) / (H100.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY)
    assert on["compute/link_s"] - off["compute/link_s"] == pytest.approx(extra_s, rel=1e-9)


def test_fp8_input_store_with_moe_act_keeps_the_routed_input_16_bit() -> None:
    """moe_act's CheckpointWithoutOutput keeps its 16-bit input (tensor_parallel/random.py @d98e8a6), so with the
    store it drops the output i and gives back (2e − 2): per unit of routed width, i − 2 (bf16 i = 2: 0)."""
    model = get_model("deepseek-v3")
    w = mlp_widths(model)["routed"]
    _, plain = dropped_bytes_per_token(model, ("moe_act",), SavedInputs(1.03125))
    _, stored = dropped_bytes_per_token(model, ("moe_act",), SavedInputs(1.03125, activation_input_bytes(model, True)))
    assert plain == pytest.approx(1.03125 * w) and stored == pytest.approx((1.03125 - 2.0) * w)


def test_fp8_input_store_rules() -> None:
    with pytest.raises(WorkloadError, match="only for SwiGLU"):
        activation_input_bytes(get_model("gpt3-1.3b"), True)
    with pytest.raises(ValueError, match="offload_modules moe_act with activation_fp8_input_store"):
        StepOptions(activation_fp8_input_store=True, offload_modules=("moe_act",))
    assert all(not stack_options(name).activation_fp8_input_store
               for name in ("megatron-core", "megatron-lm-2021", "fsdp2", "deepspeed", "ddp"))


def test_cli_blockwise_on_h100_and_one_line_error_on_a100() -> None:
    runner = CliRunner()
    args = ["estimate", "-m", "llama3-8b", "-n", "8", "--tp", "1", "--pp", "1", "--dtype", "fp8-blockwise"]
    ok = runner.invoke(app, [*args, "-s", "dgx-h100", "--activation-fp8-input-store", "--emit", "megatron", "--json"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.output)
    argv = doc["emit"]["args"]
    assert doc["dtype"] == "fp8-blockwise"
    assert argv[argv.index("--fp8-format") + 1] == "e4m3" and argv[argv.index("--fp8-recipe") + 1] == "blockwise"
    # Megatron-LM @d98e8a6 has no such flag (arguments.py excludes the TransformerConfig field): a note, not an argument
    assert not any("fp8-input-store" in word for word in argv)
    assert any("TransformerConfig.activation_func_fp8_input_store" in note for note in doc["emit"]["notes"])
    assert any("activation_fp8_input_store = True" in line for line in doc["assumptions"])
    bad = runner.invoke(app, [*args, "-s", "dgx-a100"])
    assert bad.exit_code == 1
    assert bad.output.strip().count("\n") == 0 and "sm_90" in bad.output and "sm_80" in bad.output


def test_deepseek_v3_h800_row_runs_its_documented_recipe() -> None:
    """[DSV3] §3.3 fp8-blockwise, §3.2.3 recompute of the RMSNorms and MLA up-projections, §3.3.3 the SwiGLU input in
    FP8 with its output recomputed and BF16 moments beside FP32 master weights: 98.7 GB (fp8 delayed, mla_up_proj,
    plain Adam) -> 85.5 GB -> 80.8 GB once the attention projection keeps no copy of its own under a non-delayed recipe
    -> 96.5 GB once the routed fc1 input (8 × 7168 × 1.03125 B per token in 58 of 61 blocks) is counted;
    (Megatron-Core set_save_original_input: 67 × 4096 × 16384 × 1.03125 B = 4.6 GB), still over the H800's 85.5 GB
    (81559 MiB; the row's assumptions say what remains)."""
    from commmodel.validation.moe import LAYOUT_FIELDS, _model, moe_run_options, read_training_moe

    run = next(r for r in read_training_moe() if r["id"] == "deepseek-v3-h800-2048gpu")
    opts = moe_run_options(run["stack"])
    assert run["model"]["dtype"] == "fp8-blockwise"
    assert opts.recompute_modules == ("layernorm", "mla_up_proj", "moe_act") and opts.activation_fp8_input_store
    assert opts.precision_aware_optimizer.exp_avg_dtype == "bf16"
    layout = Layout(**{k: v for k, v in run["layout"].items() if k in LAYOUT_FIELDS})
    row = evaluate_single(_model(run["model"]), load_system(run["system"]), 2048, layout, opts)
    assert row["memory_bytes_per_gpu"] == pytest.approx(96.48e9, rel=2e-3) and not row["fits"]
