"""Multi-latent attention's stored tensors and Megatron-Core's ``--recompute-modules mla_up_proj``
(commmodel/workload/mla_memory.py): closed forms from the DeepSeek-V3 shape, the per-tensor account against the
Megatron-MoE-ModelZoo estimator's list, the recomputed GEMM share and time, Megatron's refusal on a model without
MLA, the CLI and ``--emit megatron``, and the DeepSeek-V3 H800 row (arXiv:2412.19437 §3.2.3).

DeepSeek-V3 (HF config): h 7168, n 128 heads, d_n 128 (qk_nope_head_dim), d_r 64 (qk_rope_head_dim), d_v 128,
r_q 1536 (q_lora_rank), r_kv 512 (kv_lora_rank); 61 blocks, s 4096."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import WorkloadError
from commmodel.io.profiles import load_system
from commmodel.step.compute import HBM_EFFICIENCY, KERNEL_OVERHEAD_S, gemm_efficiency, stage_compute
from commmodel.step.layout import RECOMPUTE_CODES
from commmodel.step.precision import linear_peak_key
from commmodel.workload.flops import hardware_flops_per_step, layer_gemms
from commmodel.workload.memory import activation_bytes_per_layer, linear_layer_bytes_per_token
from commmodel.workload.model import TransformerModel
from commmodel.workload.presets import get_model
from commmodel.workload.recompute_modules import (check_recompute_modules, dropped_bytes_per_token,
                                                  recomputed_gemm_share)
from commmodel.workload.saved_inputs import SavedInputs

DSV3 = get_model("deepseek-v3")
H, N, D_N, D_R, D_V, R_Q, R_KV, S, L = 7168, 128, 128, 64, 128, 1536, 512, 4096, 61
SEL = np.array([RECOMPUTE_CODES["selective"]])
QKV = N * (D_N + D_R) + N * (D_N + D_R) + N * D_V  # Q and K carry the rotary part, V does not: 65,536 elements


def test_the_up_projection_drops_q_k_v_and_the_normed_latents() -> None:
    """Split: Q, K, V in bf16, 2·65,536. Replicated: the normed latents i·(r_q + r_kv), less the k rope part the
    checkpoint keeps, e·d_r: 2·2048 − 2·64 = 3,968 in bf16; 1·2048 − 128 = 1,920 with FP8 copies (i = 1)."""
    assert dropped_bytes_per_token(DSV3, ("mla_up_proj",)) == (2 * (R_Q + R_KV) - 2 * D_R, 2 * QKV)
    assert dropped_bytes_per_token(DSV3, ("mla_up_proj",)) == (3968.0, 131072.0)
    assert dropped_bytes_per_token(DSV3, ("mla_up_proj",), SavedInputs(1.0)) == (1 * (R_Q + R_KV) - 2 * D_R, 2 * QKV)
    # with core_attn beside it nothing more goes (fused attention stores no scores)
    assert dropped_bytes_per_token(DSV3, ("core_attn", "mla_up_proj")) == (3968.0, 131072.0)
    # no q latent: the query projection from h runs inside the checkpoint, which keeps the 16-bit norm output in
    # place of that projection's narrow copy: (i − e)·h more, 0 in bf16
    no_q = TransformerModel.model_validate({**DSV3.model_dump(), "q_lora_rank": None})
    assert dropped_bytes_per_token(no_q, ("mla_up_proj",)) == (2 * R_KV - 2 * D_R, 2 * QKV)
    assert dropped_bytes_per_token(no_q, ("mla_up_proj",), SavedInputs(1.0)) == (R_KV + (1 - 2) * H - 2 * D_R, 2 * QKV)


def test_mla_inventory_matches_the_modelzoo_tensor_list() -> None:
    """yanring/Megatron-MoE-ModelZoo @e865051 misc/tools/deepseek_mem_estimate.py, bf16, tp 1 (bytes per token):
    input_mem + input_norm_out + q_down_out + q_norm_out + kv_compressed + kv_norm_out + q/k/v_apply_rope_out +
    attn_out. The inventory's attention part is the block's account less the MLP's (the pre-MLP norm input e·h,
    fc1's input i·h, the gated fc1 outputs and activation output (2e + i)·f, the routed fc1 input i·k·h in the MoE
    blocks)."""
    e = 2.0
    modelzoo = (e * H + e * H + e * R_Q + e * R_Q + e * R_KV + e * R_KV
                + e * N * (D_N + D_R) + e * N * (D_N + D_R) + e * N * D_V + e * N * D_V)
    replicated, split = linear_layer_bytes_per_token(DSV3, True, hidden_dropout=False)
    attention = (replicated - (e * H + e * H) + split - 3 * e * DSV3.active_ffn_width
                 - e * DSV3.experts_per_token * H * DSV3.num_moe_layers / DSV3.num_layers)
    assert attention == pytest.approx(modelzoo, rel=1e-12)
    assert modelzoo == 2 * (2 * H + 2 * R_Q + 2 * R_KV) + 2 * (QKV + N * D_V)  # 200,704 bytes
    # FP8 copies (i = 1): the two down projections keep one cast each of the norm output, 2·1·h (TE _Linear)
    rep_fp8, _ = linear_layer_bytes_per_token(DSV3, True, SavedInputs(1.0), hidden_dropout=False)
    assert rep_fp8 == 2 * 2 * H + 2 * 1 * H + (2 + 1) * (R_Q + R_KV) + 1 * H


def test_layernorm_drops_both_down_projection_copies_under_a_narrow_recipe() -> None:
    assert dropped_bytes_per_token(DSV3, ("layernorm",)) == (2 * 2 * H, 0.0)  # one bf16 norm output each
    assert dropped_bytes_per_token(DSV3, ("layernorm",), SavedInputs(1.0)) == (3 * 1 * H, 0.0)  # q_down, kv_down, fc1 casts


def test_stored_activations_lose_the_split_part_over_tp() -> None:
    b, t = np.ones(1), np.full(1, 2.0)
    for sp, rep in ((True, 3968.0 / 2), (False, 3968.0)):
        flag = np.array([sp])
        default = activation_bytes_per_layer(DSV3, b, t, flag, SEL, True)[0]
        up = activation_bytes_per_layer(DSV3, b, t, flag, SEL, True, recompute_modules=("core_attn", "mla_up_proj"))[0]
        assert default - up == pytest.approx(S * (rep + 131072.0 / 2), rel=1e-12)


def test_the_up_projections_share_of_the_qkv_gemm() -> None:
    """Up projections r_q·n·(d_n + d_r) + r_kv·n·(d_n + d_v) over MLA's whole chain (down projections h·r_q and
    h·(r_kv + d_r) too): 54,525,952 / 69,664,768 = 0.7827."""
    up = R_Q * N * (D_N + D_R) + R_KV * N * (D_N + D_V)
    chain = R_Q * (H + N * (D_N + D_R)) + R_KV * (H + N * (D_N + D_V)) + H * D_R
    assert (up, chain) == (54_525_952, 69_664_768)
    assert recomputed_gemm_share(DSV3, ("mla_up_proj",)) == {"qkv": pytest.approx(up / chain, rel=1e-15)}
    one = np.ones(1)
    extra = hardware_flops_per_step(DSV3, one, SEL, ("mla_up_proj",))[0] - hardware_flops_per_step(DSV3, one,
                                                                                                   np.zeros(1))[0]
    assert extra == pytest.approx(L * 2 * S * up, rel=1e-12)  # 2·tokens·weights per block, once more


def test_the_recompute_time_is_the_gemm_share_and_the_rope_pass() -> None:
    system = load_system("dgx-h100")
    one = np.ones(1)
    comp = stage_compute(DSV3, system, one, one, one, SEL, np.zeros(1, bool), True, recompute_modules=("mla_up_proj",))
    qkv = next(g for g in layer_gemms(DSV3, one, one) if g.name == "qkv")
    peak = system.gpu.peak_for(linear_peak_key("bf16"))
    gemm_s = 54_525_952 / 69_664_768 * qkv.flops[0] / (peak * gemm_efficiency(system, qkv, "bf16")[0])
    hbm = system.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY
    rope_s = S * 2 * 2 * (N * (D_N + D_R) + N * D_N) / hbm  # the forward's RoPE term, read + write (q + kv)
    assert comp.recompute_s[0] == pytest.approx(L * (gemm_s + rope_s + 2 * KERNEL_OVERHEAD_S), rel=1e-9)


def test_mla_up_proj_is_refused_without_multi_latent_attention() -> None:
    """Megatron-Core transformer_config.py @d98e8a6: "mla_up_proj in recompute_modules is only supported with
    multi_latent_attention"."""
    for name in ("llama3-8b", "mixtral-8x7b"):
        with pytest.raises(WorkloadError, match="no multi-latent attention"):
            check_recompute_modules(("mla_up_proj",), get_model(name))
    check_recompute_modules(("mla_up_proj", "layernorm"), DSV3)  # accepted with MLA
    result = CliRunner().invoke(app, ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--recompute",
                                      "selective", "--recompute-modules", "mla_up_proj", "--global-batch", "64"])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0 and "multi-latent" in result.output


def test_cli_estimate_prices_and_emits_mla_up_proj() -> None:
    args = ["estimate", "-m", "deepseek-v3", "-n", "1024", "-s", "dgx-h100", "--pp", "16", "--ep", "64",
            "--recompute", "selective", "--json"]
    runner = CliRunner()
    base = runner.invoke(app, args)
    up = runner.invoke(app, [*args, "--recompute-modules", "mla_up_proj", "--emit", "megatron"])
    assert base.exit_code == 0 and up.exit_code == 0, up.output
    base_doc, up_doc = json.loads(base.output), json.loads(up.output)
    assert up_doc["memory_bytes_per_gpu"] < base_doc["memory_bytes_per_gpu"]
    argv = up_doc["emit"]["args"]
    assert argv[argv.index("--recompute-modules") + 1] == "mla_up_proj"
    assert "--recompute-granularity" in argv and argv[argv.index("--recompute-granularity") + 1] == "selective"


def test_deepseek_v3_h800_row_recomputes_the_mla_up_projections() -> None:
    """[DSV3] §3.2.3: RMSNorm and the MLA up-projections recomputed. The row under dtype fp8 (TE delayed scaling,
    its recipe before it ran fp8-blockwise) with recompute_modules [mla_up_proj] alone (layernorm is refused under
    delayed scaling) and plain Adam: with FP8 copies (i = 1) 1,920 + 131,072 bytes per token and block leave 67 of
    the 68 in-flight layer-micro-batches (DualPipe: 17 of 4 blocks; one comes back in its backward) of 4,096 tokens:
    36.5 GB; 134.6 → 98.2 GB (113.8 with the routed fc1 input counted), still over 85.5 GB
    (tests/test_fp8_blockwise.py prices the row's own recipe)."""
    from commmodel.step.estimate import evaluate_single
    from commmodel.step.layout import Layout
    from commmodel.validation.moe import LAYOUT_FIELDS, _model, moe_run_options, read_training_moe

    run = next(r for r in read_training_moe() if r["id"] == "deepseek-v3-h800-2048gpu")
    stack = {k: v for k, v in run["stack"].items() if k not in ("optimizer", "activation_fp8_input_store")}
    opts = moe_run_options({**stack, "recompute_modules": ["mla_up_proj"]})
    assert opts.recompute_modules == ("mla_up_proj",)
    layout = Layout(**{k: v for k, v in run["layout"].items() if k in LAYOUT_FIELDS})
    model, system = _model({**run["model"], "dtype": "fp8"}), load_system(run["system"])
    on = evaluate_single(model, system, 2048, layout, opts)
    off = evaluate_single(model, system, 2048, layout, opts.model_copy(update={"recompute_modules": ("core_attn",)}))
    freed = off["memory/activations_bytes"] - on["memory/activations_bytes"]
    assert freed == pytest.approx(67 * S * (1920 + 131072), rel=1e-12)
    assert on["memory_bytes_per_gpu"] == pytest.approx(113.83e9, rel=1e-3) and not on["fits"]  # 98.15 before the
    # routed fc1 input (8 × 7168 FP8 bytes per token in 58 of 61 blocks) was counted
    with pytest.raises(WorkloadError, match="delayed scaling"):
        evaluate_single(model, system, 2048, layout, opts.model_copy(update={"recompute_modules": ("layernorm",
                                                                                                   "mla_up_proj")}))
