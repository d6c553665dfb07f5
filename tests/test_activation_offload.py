"""Megatron-Core's fine-grained activation offloading (workload/offload.py, step/host_offload.py): the bytes each
module frees (closed forms on the per-token inventory), Megatron's one-layer margin and 1M-element floor, the
``offload`` term's closed form, the Qwen3 GB200 MXFP8 EP64 run with its documented ``--offload-modules``, and the
one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import WorkloadError
from commmodel.hardware.models import Sourced
from commmodel.io.profiles import load_system
from commmodel.io.validation_data import read_training_moe
from commmodel.step.estimate import evaluate_single
from commmodel.step.host_offload import offload_transfer_s
from commmodel.step.layout import LAYOUT_FIELDS, Layout
from commmodel.step.options import StepOptions
from commmodel.step.stacks import stack_options
from commmodel.validation.moe import _model, moe_run_options, validate_moe
from commmodel.workload.memory import in_flight_layers, memory_terms
from commmodel.workload.model import TransformerModel
from commmodel.workload.offload import (MIN_OFFLOADED_TENSOR_ELEMENTS, check_offload_modules, freed_layers,
                                        offloaded_bytes_per_layer)
from commmodel.workload.saved_inputs import SavedInputs

# A toy MoE shape: h 1024, 8 heads of 128 (query 1024), 2 KV heads (kv 256), gated experts of 512, top-2 of 8,
# 4 blocks all MoE, seq 2048.
TOY = TransformerModel(name="toy-moe", num_layers=4, hidden_size=1024, num_heads=8, num_kv_heads=2,
                       ffn_hidden_size=2048, vocab_size=32000, seq_len=2048, gated_mlp=True, num_experts=8,
                       experts_per_token=2, moe_ffn_hidden_size=512)
TOKENS = 2048.0  # micro-batch 1


def _per_layer(modules: tuple[str, ...], tp: int = 1, sp: bool = False, rc: int = 0, mb: float = 1.0,
               model: TransformerModel = TOY, lib: float | None = None) -> float:
    return float(offloaded_bytes_per_layer(model, modules, np.array([mb]), np.array([tp]), np.array([sp]),
                                           np.array([rc]), True, SavedInputs(lib))[0])


@pytest.mark.parametrize(("module", "bytes_per_token"), [
    ("attn_norm", 2 * 1024),            # the block input, e·h
    ("mlp_norm", 2 * 1024),             # the pre-MLP norm input, e·h
    ("qkv_linear", 2 * 1024),           # the QKV input, i·h (i = e in bf16)
    ("core_attn", 2 * 1024),            # Q, e·a·d; K and V (2048·256 = 524,288 elements each) under the 1M floor
    ("moe_act", 2 * 2 * 2 * 512),       # gated fc1 output of k = 2 routed copies: 2·e·k·f_e
    ("expert_fc1", 2 * 2 * 1024),       # its input, the k = 2 routed copies of each token: i·k·h
])
def test_module_bytes_closed_form(module: str, bytes_per_token: float) -> None:
    assert _per_layer((module,)) == TOKENS * bytes_per_token


def test_attn_proj_with_core_attn_and_tp_split() -> None:
    """The projection input a·d_v = 1024 elements, e each, on top of Q (K, V under the floor); split terms /tp,
    replicated ones only with sequence parallelism; 4 sequences lift K and V over the floor."""
    both = _per_layer(("core_attn", "attn_proj"))
    assert both == TOKENS * 2 * (1024 + 1024)
    assert _per_layer(("core_attn", "attn_proj"), mb=4.0) == 4 * TOKENS * 2 * (1024 + 512 + 1024)
    assert _per_layer(("core_attn", "attn_proj"), tp=2) == both / 2
    assert _per_layer(("attn_norm",), tp=2) == TOKENS * 2 * 1024  # replicated over tp without SP
    assert _per_layer(("attn_norm",), tp=2, sp=True) == TOKENS * 2 * 1024 / 2
    # MXFP8's kept input (1 + 1/32 bytes): the QKV input shrinks, fused attention keeps its output beside the copy
    mx = 1.0 + 1.0 / 32
    assert _per_layer(("qkv_linear",), lib=mx) == TOKENS * mx * 1024
    assert _per_layer(("core_attn", "attn_proj"), lib=mx) == TOKENS * (2 * 1024 + (2 + mx) * 1024)


def test_recompute_and_size_floor() -> None:
    """Full recompute (2) and op SAC (3) store none of these tensors; the moe recompute (4) keeps attention's but not
    the experts'; a tensor under 1M elements stays (K of one 512-token micro-batch: 512·256 = 131072 elements)."""
    assert _per_layer(("attn_norm", "moe_act"), rc=2) == _per_layer(("attn_norm", "moe_act"), rc=3) == 0.0
    assert _per_layer(("attn_norm", "moe_act"), rc=4) == TOKENS * 2 * 1024
    assert _per_layer(("attn_norm",), rc=1) == TOKENS * 2 * 1024
    short = TOY.model_copy(update={"seq_len": 512})
    assert 512 * 1024 < MIN_OFFLOADED_TENSOR_ELEMENTS
    assert _per_layer(("attn_norm", "core_attn"), model=short) == 0.0
    assert _per_layer(("attn_norm", "core_attn"), model=short, mb=4.0) == 2048 * 2 * (1024 + 1024)  # K, V still under
    assert _per_layer(("attn_norm", "core_attn"), model=short, mb=8.0) == 4096 * 2 * (1024 + 1024 + 512)


def test_memory_frees_all_but_one_layer_micro_batch() -> None:
    """memory_terms' activations drop the offloaded bytes of every in-flight layer-micro-batch but Megatron's margin
    of one: pp 2, vpp 1, m 8 → 2 × ⌈4/2⌉ = 4 in flight, 3 freed."""
    args = dict(model=TOY, tp=np.array([1]), pp=np.array([2]), dp=np.array([4]), micro_batch=np.array([1.0]),
                num_micro_batches=np.array([8.0]), zero=np.array([1]), recompute=np.array([0]),
                sequence_parallel=np.array([False]), vpp=np.array([1]), bucket_size_bytes=25 * 2**20,
                flash_attention=True, gpipe=False)
    base = memory_terms(**args)["activations"][0]
    off = memory_terms(**args, offload_modules=("moe_act",))["activations"][0]
    layers = in_flight_layers(TOY, np.array([2]), np.array([1]), np.array([8.0]), False)[0]
    assert layers == 4.0 and freed_layers(np.array([layers]))[0] == 3.0
    assert base - off == pytest.approx(3 * TOKENS * 2 * 2 * 2 * 512)
    assert freed_layers(np.array([1.0, 0.0]))[0] == 0.0


def test_transfer_closed_form() -> None:
    """B = 3.2 GB over 64 GB/s = 50 ms each way: link 100 ms; behind a 30 ms forward and 60 ms backward the D2H
    shows 20 ms, the H2D nothing."""
    link, exposed = offload_transfer_s(np.array([3.2e9]), 64e9, np.array([0.030]), np.array([0.060]))
    assert link[0] == pytest.approx(0.100)
    assert exposed[0] == pytest.approx(0.020)


def test_offload_term_on_a_toy_layout() -> None:
    """The offload term of TOY on one DGX H100 (PCIe Gen5 x16, 64 GB/s each way, a pinned copy 55.4/63 of it): per
    micro-batch the stage's 4 blocks move 4 × (2048 tokens × 2 × 2 × 2 × 512 B) = 33.55 MB each way; the term's link
    is 2·m·B/W."""
    system = load_system("dgx-h100")
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=32, zero=1)
    opts = stack_options("megatron-core", offload_modules=("moe_act",))
    row = evaluate_single(TOY, system, 8, layout, opts)
    one_way = 4 * TOKENS * 8 * 512 / (64e9 * 55.4 / 63.0)
    assert row["offload/link_s"] == pytest.approx(2 * 4 * one_way)
    # at a 100 MB/s link both copies outlast their pass: exposed = link − m·(forward + backward + recompute)
    slow = system.model_copy(update={"host_link_bw_bytes_per_s": Sourced[float](value=1e8, source="test link")})
    crawl = evaluate_single(TOY, slow, 8, layout, opts)
    assert crawl["offload/link_s"] == pytest.approx(2 * 4 * 4 * TOKENS * 8 * 512 / (1e8 * 55.4 / 63.0))
    assert crawl["offload/exposed_s"] == pytest.approx(crawl["offload/link_s"] - crawl["compute/link_s"])
    assert crawl["step_time_s"] > row["step_time_s"] + crawl["offload/exposed_s"] - row["offload/exposed_s"] - 1e-9
    none = evaluate_single(TOY, system, 8, layout, stack_options("megatron-core"))
    assert none["offload/link_s"] == 0.0
    bare = system.model_copy(update={"gpu": system.gpu.model_copy(update={"host_link_bw_bytes_per_s": None})})
    assert bare.host_link() is None
    unpriced = evaluate_single(TOY, bare, 8, layout, opts)  # neither the system nor its GPU states a host link
    assert unpriced["offload/link_s"] == 0.0
    assert unpriced["memory/activations_bytes"] == row["memory/activations_bytes"] < none["memory/activations_bytes"]


QWEN_GB200 = "zoo-qwen3-235b-gb200-256gpu-mxfp8-ep64"


def test_qwen3_gb200_mxfp8_ep64_fits_with_its_offload() -> None:
    """[ZOO] run_gb200_235b.sh @e865051 passes --offload-modules expert_fc1 moe_act ("activation offloading
    required"): moe_act's input, the gated fc1 output 2·2·8·1536 = 49,152 B per token, and expert_fc1's input, the
    k = 8 routed copies of each token at MXFP8's kept 1 + 1/32 bytes, 8·4096·1.03125 = 33,792 B, leave 107 of the
    108 in-flight layer-micro-batches of 12,288 tokens (PP 4, VPP 6, MBS 3): 109.1 GB freed, 247.5 → 138.4 GB of
    194 GB (23.1 GB of it the query/key head norms' inputs, 108 · 12,288 · 2 · 8,704 B, which no recompute module
    drops: Megatron-Core applies q_layernorm/k_layernorm outside the checkpoints) with the run's --recompute-modules moe_act layernorm (tests/test_recompute_modules.py) and bf16 Adam
    moments (tests/test_optimizer_states.py); without the offload it does not fit, as the launch says. Under MXFP8
    the attention projection keeps no copy of its own (Megatron-Core set_save_original_input).
    The copies (24 blocks × 12,288 × 82,944 B per micro-batch each way at 225 × 55.4/63 GB/s) hide behind the stage's
    forward."""
    run = next(r for r in read_training_moe() if r["id"] == QWEN_GB200)
    assert tuple(run["stack"]["offload_modules"]) == ("expert_fc1", "moe_act")
    layout = Layout(**{k: v for k, v in run["layout"].items() if k in LAYOUT_FIELDS})
    model, system = _model(run["model"]), load_system(run["system"])
    opts = moe_run_options(run["stack"])
    assert opts.offload_modules == ("expert_fc1", "moe_act")
    on = evaluate_single(model, system, 256, layout, opts)
    off = evaluate_single(model, system, 256, layout, opts.model_copy(update={"offload_modules": ()}))
    freed = off["memory/activations_bytes"] - on["memory/activations_bytes"]
    per_token = 49152 + 8 * 4096 * (1 + 1 / 32)
    assert freed == pytest.approx(107 * 12288 * per_token)
    assert on["fits"] and not off["fits"] and off["memory_bytes_per_gpu"] == pytest.approx(247.50e9, rel=1e-3)
    assert on["memory_bytes_per_gpu"] == pytest.approx(138.44e9, rel=1e-3)
    no_norms = evaluate_single(model.model_copy(update={"qk_layernorm": False}), system, 256, layout, opts)
    assert on["memory_bytes_per_gpu"] - no_norms["memory_bytes_per_gpu"] == pytest.approx(108 * 12288 * 2 * 8704)
    assert on["offload/link_s"] == pytest.approx(16 * 2 * 24 * 12288 * per_token / (225e9 * 55.4 / 63.0))
    assert on["offload/exposed_s"] == 0.0
    assert on["tokens_per_s"] == pytest.approx(off["tokens_per_s"])
    record = next(r for r in validate_moe() if r["id"] == QWEN_GB200)
    assert record["fits"] and record["error_pct"] == pytest.approx(19.10, abs=0.05)  # 26.22 before HybridEP's local
    # permute was priced and the pipeline sends overlapped (2026-11-27); 27.92 before the router ran in
    # 16 bits and Qwen3's query/key head norms were priced; 25.77 before the launch's fused loss
    # (--cross-entropy-loss-fusion); 26.19 before GB200 FP8 GEMMs took their own MAMF ratio (0.723, not bf16's 0.729);
    # 32.15 before the B200 cuDNN sweep


@pytest.mark.parametrize(("modules", "model", "needle"), [
    (("expert_fc2",), None, "offload_modules expert_fc2 unknown; choose from attn_norm"),
    (("attn_proj",), None, "attn_proj needs core_attn too"),
    (("moe_act",), TransformerModel(name="dense", num_layers=2, hidden_size=256, num_heads=4, ffn_hidden_size=1024,
                                    vocab_size=1000, seq_len=128), "exist only in MoE blocks and dense is dense"),
])
def test_bad_modules_one_line(modules: tuple[str, ...], model: TransformerModel | None, needle: str) -> None:
    with pytest.raises(WorkloadError, match=needle):
        check_offload_modules(modules, model)
    if model is None:
        with pytest.raises(ValueError, match=needle):
            StepOptions(offload_modules=modules)


def test_cli_bad_module_is_one_line_and_json_states_it() -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["estimate", "-m", "qwen3-30b-a3b", "-n", "8", "-s", "dgx-h100",
                              "--offload-modules", "core_attn,bogus"])
    assert bad.exit_code == 1
    assert bad.output.strip().splitlines() == [
        "error: offload_modules bogus unknown; choose from attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, "
        "expert_fc1, moe_act (Megatron-Core --offload-modules names)"]
    ok = runner.invoke(app, ["estimate", "-m", "qwen3-30b-a3b", "-n", "8", "-s", "aws-p5", "--json",
                             "--offload-modules", "core_attn,moe_act"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.output)
    assert doc["offload_modules"] == ["core_attn", "moe_act"]
    assert any("copies priced at 56.3 GB/s each way per GPU" in line and "H100 SXM interconnect: 'PCIe Gen5: 128GB/s'"
               in line for line in doc["assumptions"])  # aws-p5 states none: its GPU's datasheet link


def test_offloadable_recompute_codes_follow_the_layout_schema() -> None:
    """workload/offload.py cannot import the layout schema (step/layout.py owns the numbering): its codes must name
    none, selective and moe (attention-side modules) and none, selective (MoE-only modules)."""
    from commmodel.step.layout import RECOMPUTE_CODES
    from commmodel.workload.offload import OFFLOADABLE_RECOMPUTE_CODES

    names = {code: name for name, code in RECOMPUTE_CODES.items()}
    assert [names[c] for c in OFFLOADABLE_RECOMPUTE_CODES["attention"]] == ["none", "selective", "moe"]
    assert [names[c] for c in OFFLOADABLE_RECOMPUTE_CODES["moe"]] == ["none", "selective"]


@pytest.mark.parametrize("command", ["estimate", "plan"])
def test_layout_recompute_moe_refuses_offload_inside_the_moe_layer(command: str) -> None:
    """Megatron-Core refuses --offload-modules expert_fc1/moe_act while the MoE layer is checkpointed; the layout code
    ``recompute moe`` is that checkpoint, as ``--recompute-modules moe`` is (one line, exit 1, both commands)."""
    runner = CliRunner()
    bad = runner.invoke(app, [command, "-m", "qwen3-30b-a3b", "-n", "8", "-s", "aws-p5", "--recompute", "moe",
                              "--offload-modules", "core_attn,moe_act"])
    assert bad.exit_code == 1
    assert bad.output.strip().splitlines() == [
        "error: --recompute moe with --offload-modules moe_act: Megatron-Core refuses offloading inside the "
        "checkpointed MoE layer (transformer_config.py @d98e8a6); drop one of them"]
    fine = runner.invoke(app, [command, "-m", "qwen3-30b-a3b", "-n", "8", "-s", "aws-p5", "--recompute", "moe",
                               "--offload-modules", "core_attn"])
    assert fine.exit_code == 0, fine.output
