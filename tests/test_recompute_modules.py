"""Megatron-Core's selective recompute modules (``--recompute-modules``, commmodel/workload/recompute_modules.py):
closed forms for the bytes each module drops and the forward work its backward redoes, the ``moe`` module against
the ``recompute: moe`` policy (the same checkpoint), Megatron's refusals in one line."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import WorkloadError
from commmodel.io.profiles import load_system
from commmodel.step.compute import KERNEL_OVERHEAD_S, HBM_EFFICIENCY, gemm_efficiency, stage_compute
from commmodel.step.experts import dispatch_count
from commmodel.step.layout import RECOMPUTE_CODES
from commmodel.step.options import StepOptions
from commmodel.step.precision import linear_peak_key
from commmodel.workload import moe_recompute
from commmodel.workload.flops import hardware_flops_per_step, layer_gemms
from commmodel.workload.memory import activation_bytes_per_layer, memory_terms
from commmodel.workload.presets import get_model
from commmodel.workload.recompute_modules import check_recompute_modules, dropped_bytes_per_token
from commmodel.workload.saved_inputs import SavedInputs

SEL = np.array([RECOMPUTE_CODES["selective"]])
MIXTRAL = get_model("mixtral-8x7b")  # h 4096, 32 MoE blocks, top-2 of 8, f_expert 14336, gated, bf16
DSV3 = get_model("deepseek-v3")      # 3 dense blocks of f 18432, 58 MoE blocks of 8 routed + 1 shared of 2048
LLAMA = get_model("llama3-8b")       # dense: h 4096, f 14336, gated, 32 blocks


def test_dropped_bytes_per_module_closed_forms() -> None:
    assert dropped_bytes_per_token(MIXTRAL, ("core_attn",)) == (0.0, 0.0)
    assert dropped_bytes_per_token(MIXTRAL, ("layernorm",)) == (2 * 2 * 4096, 0.0)  # two bf16 norm outputs
    assert dropped_bytes_per_token(MIXTRAL, ("moe_act",)) == (0.0, 2 * 2 * 14336)   # fc2's input, top-2
    assert dropped_bytes_per_token(LLAMA, ("mlp",)) == (0.0, (2 * 2 + 2) * 14336)   # gate, up, product
    assert dropped_bytes_per_token(DSV3, ("shared_experts",))[1] == pytest.approx(6 * 58 * 2048 / 61)
    assert dropped_bytes_per_token(DSV3, ("mlp",))[1] == pytest.approx(6 * 3 * 18432 / 61)
    # "moe" holds moe_act and shared_experts: they add nothing beside it
    moe = moe_recompute.dropped_bytes_per_token(DSV3)
    assert dropped_bytes_per_token(DSV3, ("moe", "moe_act", "shared_experts")) == (0.0, moe)
    # a narrow (MXFP8: 1 + 1/32 bytes) copy is what the linears keep of the norm outputs
    assert dropped_bytes_per_token(MIXTRAL, ("layernorm",), SavedInputs(1.03125)) == (2 * 1.03125 * 4096, 0.0)


def test_stored_activations_lose_the_modules_tensors() -> None:
    b, t, sp = np.ones(1), np.full(1, 2.0), np.ones(1, bool)
    default = activation_bytes_per_layer(MIXTRAL, b, t, sp, SEL, True)[0]
    custom = activation_bytes_per_layer(MIXTRAL, b, t, sp, SEL, True, recompute_modules=("moe_act", "layernorm"))[0]
    assert default - custom == pytest.approx(MIXTRAL.seq_len * (2 * 2 * 4096 / 2 + 2 * 2 * 14336 / 2), rel=1e-12)
    # unfused attention: without core_attn the scores stay stored, as with no recompute
    none = activation_bytes_per_layer(LLAMA, b, t, sp, np.array([0]), False)[0]
    kept = activation_bytes_per_layer(LLAMA, b, t, sp, SEL, False, recompute_modules=("mlp",))[0]
    assert none - kept == pytest.approx(LLAMA.seq_len * 6 * 14336 / 2, rel=1e-12)


def test_one_layers_dropped_tensors_come_back_in_its_backward() -> None:
    """Selective recompute of layernorm drops two norm outputs from every stored block; the recomputing block has
    them back. That working memory comes after the loss's buffers are freed (pp 1), so it adds to the peak only
    beyond them: with a tiny vocabulary nearly all of it does (31 blocks' worth and the loss's buffers freed), with
    Llama-3's 128K vocabulary none does (32 blocks' worth)."""
    one = np.ones(1)
    dropped = LLAMA.seq_len * 2 * 2 * 4096  # per block, tp 1
    tiny_loss = LLAMA.seq_len * 8 * 8.0  # 8 logits per token at LOSS_BYTES_PER_LOGIT
    for vocab, freed in ((8, 31 * dropped + tiny_loss), (LLAMA.vocab_size, 32 * dropped)):
        model = LLAMA.model_copy(update={"vocab_size": vocab})
        args = (model, one, one, np.full(1, 8.0), one, np.full(1, 4.0), np.zeros(1), SEL, np.zeros(1, bool), one, 0.0,
                True, False)
        default = memory_terms(*args)["activations"][0]
        custom = memory_terms(*args, recompute_modules=("core_attn", "layernorm"))["activations"][0]
        assert default - custom == pytest.approx(freed, rel=1e-12)  # 32 blocks in flight (pp 1)


def _compute(model, modules, rc=SEL):
    system = load_system("dgx-h100")
    one = np.ones(1)
    return stage_compute(model, system, one, one, one, rc, np.zeros(1, bool), True, recompute_modules=modules), system


def test_layernorm_redoes_the_two_norms_memory_bound_pass() -> None:
    base, system = _compute(LLAMA, ("core_attn",))
    more, _ = _compute(LLAMA, ("core_attn", "layernorm"))
    hbm = system.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY
    per_block = LLAMA.seq_len * 2 * 2 * 2 * 4096 / hbm + 2 * KERNEL_OVERHEAD_S
    assert more.recompute_s[0] - base.recompute_s[0] == pytest.approx(32 * per_block, rel=1e-9)


def test_mlp_redoes_the_dense_fc1_and_fc2_gemms() -> None:
    comp, system = _compute(LLAMA, ("mlp",))
    one = np.ones(1)
    gemms = [g for g in layer_gemms(LLAMA, one, one) if g.name in ("fc1", "fc2")]
    peak = system.gpu.peak_for(linear_peak_key("bf16"))
    redo_s = sum(g.flops[0] / (peak * gemm_efficiency(system, g, "bf16")[0]) for g in gemms)
    assert comp.recompute_s[0] == pytest.approx(32 * redo_s, rel=1e-9)  # no core_attn: nothing else
    extra = hardware_flops_per_step(LLAMA, one, SEL, ("mlp",))[0] - hardware_flops_per_step(LLAMA, one, np.zeros(1))[0]
    assert extra == pytest.approx(32 * sum(g.flops[0] for g in gemms), rel=1e-12)


def test_the_moe_module_is_the_moe_policy() -> None:
    module, _ = _compute(MIXTRAL, ("moe",))
    policy, _ = _compute(MIXTRAL, ("core_attn",), np.array([RECOMPUTE_CODES["moe"]]))
    assert module.recompute_s[0] == policy.recompute_s[0]
    assert module.routed_expert_s[0] == policy.routed_expert_s[0]
    assert dispatch_count(SEL, True).tolist() == [3.0] and dispatch_count(SEL).tolist() == [2.0]


@pytest.mark.parametrize(("modules", "model", "match"), [
    (("bogus",), None, "bogus unknown"), (("mhc",), None, "not modelled"),
    (("moe_act",), LLAMA, "dense"), (("shared_experts",), MIXTRAL, "no shared experts"),
    (("mla_up_proj",), MIXTRAL, "no multi-latent attention")])
def test_refusals_name_the_value(modules, model, match) -> None:
    with pytest.raises(WorkloadError, match=match):
        check_recompute_modules(modules, model)
    with pytest.raises(WorkloadError, match="delayed scaling"):
        check_recompute_modules(("layernorm",), LLAMA, fp8_delayed=True)


def test_options_default_and_cli_error_line() -> None:
    assert StepOptions().recompute_modules == ("core_attn",)
    with pytest.raises(ValueError, match="bogus unknown"):  # pydantic wraps the WorkloadError
        StepOptions(recompute_modules=("bogus",))
    result = CliRunner().invoke(app, ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--recompute",
                                      "selective", "--recompute-modules", "moe_act", "--global-batch", "64"])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0 and "dense" in result.output


def test_qwen3_gb200_mxfp8_row_drops_its_norm_and_activation_outputs() -> None:
    """[ZOO] run_gb200_235b.sh @e865051: --recompute-modules moe_act layernorm. MXFP8 linears keep a 1 + 1/32-byte
    copy of their input, so per token and block the two norm outputs 2·1.03125·4096 and the routed activation output
    1.03125·8·1536 leave 107 of the 108 in-flight layer-micro-batches of 12,288 tokens (one comes back in its
    backward): 27.77 GB, 166.2 → 138.4 GB (with the run's bf16 Adam moments)."""
    from commmodel.step.estimate import evaluate_single
    from commmodel.step.layout import Layout
    from commmodel.validation.moe import LAYOUT_FIELDS, _model, moe_run_options, read_training_moe

    run = next(r for r in read_training_moe() if r["id"] == "zoo-qwen3-235b-gb200-256gpu-mxfp8-ep64")
    opts = moe_run_options(run["stack"])
    assert opts.recompute_modules == ("moe_act", "layernorm")
    layout = Layout(**{k: v for k, v in run["layout"].items() if k in LAYOUT_FIELDS})
    model, system = _model(run["model"]), load_system(run["system"])
    on = evaluate_single(model, system, 256, layout, opts)
    off = evaluate_single(model, system, 256, layout, opts.model_copy(update={"recompute_modules": ("core_attn",)}))
    freed = off["memory/activations_bytes"] - on["memory/activations_bytes"]
    assert freed == pytest.approx(107 * 12288 * (2 * 1.03125 * 4096 + 1.03125 * 8 * 1536), rel=1e-12)
    assert on["memory_bytes_per_gpu"] == pytest.approx(138.44e9, rel=1e-3)


def test_offloading_inside_the_recomputed_moe_layer_is_refused() -> None:
    with pytest.raises(ValueError, match="offload_modules moe_act with recompute_modules moe"):
        StepOptions(recompute_modules=("moe",), offload_modules=("moe_act",))
    assert StepOptions(recompute_modules=("moe_act",), offload_modules=("moe_act",)).offload_modules == ("moe_act",)
