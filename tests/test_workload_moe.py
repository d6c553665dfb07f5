"""Mixture-of-experts shapes: presets against published totals, active parameters, model FLOPs."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.errors import WorkloadError
from commmodel.workload import PRESETS, TransformerModel
from commmodel.workload.flops import layer_gemms, model_flops_per_step

MOE_TOTALS = [
    # (preset, published total, published active, source). Tolerance 2%.
    ("mixtral-8x7b", 46.7e9, 12.9e9, "Jiang et al. 2024 (arXiv:2401.04088) §2: 47B total, 13B active; HF card 46.7B"),
    ("mixtral-8x22b", 141e9, 39e9, "Mistral AI, 'Cheaper, Better, Faster, Stronger' (2024-04-17): 141B, 39B active"),
    ("deepseek-v3", 671e9, 37e9, "DeepSeek-AI 2024 (arXiv:2412.19437) abstract: 671B total, 37B activated per token"),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, "Qwen3 technical report (arXiv:2505.09388) / HF card: 30.5B total, 3.3B activated"),
    ("qwen3-235b-a22b", 235e9, 22e9, "Qwen3 technical report (arXiv:2505.09388) Table 2: 235B total, 22B activated"),
    ("llama4-maverick", 400e9, 17e9, "Meta Llama 4 model card: 17B active, 400B total (text model counted)"),
    ("llama4-scout", 109e9, 17e9, "Meta Llama 4 model card: 17B active, 109B total (with the vision encoder: 1.1% over"
     " the 107.8B text model)"),
]


@pytest.mark.parametrize(("name", "total", "active", "source"), MOE_TOTALS)
def test_moe_totals_and_active(name: str, total: float, active: float, source: str) -> None:
    model = PRESETS[name]
    assert model.num_params == pytest.approx(total, rel=0.02), source
    assert model.num_active_params == pytest.approx(active, rel=0.02), source


def test_gpt_oss_model_card_counts() -> None:
    """gpt-oss model card (arXiv:2508.10925 Table 1): 116.83B total, 5.13B active; its "active" counts
    the unembedding but not the input embedding (MLP 114.71B, attention 0.96B, embed + unembed 1.16B)."""
    model = PRESETS["gpt-oss-120b"]
    assert model.num_params == pytest.approx(116.83e9, rel=0.001)
    input_embedding = model.vocab_size * model.hidden_size
    assert model.num_active_params - input_embedding == pytest.approx(5.13e9, rel=0.002)
    mlp = model.num_moe_layers * (model.mlp_params - model.router_params)
    assert mlp == pytest.approx(114.71e9, rel=0.001)
    assert 2 * input_embedding == pytest.approx(1.16e9, rel=0.005)


def test_gpt_oss_20b_model_card_counts() -> None:
    """gpt-oss model card (arXiv:2508.10925 Table 1): gpt-oss-20b 20.91B total, 3.61B active (unembedding counted,
    input embedding not, as for the 120b)."""
    model = PRESETS["gpt-oss-20b"]
    assert model.num_params == pytest.approx(20.91e9, rel=0.001)
    assert model.num_active_params - model.vocab_size * model.hidden_size == pytest.approx(3.61e9, rel=0.002)


def test_deepseek_v3_megatron_count() -> None:
    """Megatron-Core's count (megatron/training/theoretical_memory_usage.py @1bcb3b9, transcribed in
    docs/moe-memory-reference.md) written out for DeepSeek-V3's config."""
    h, a, l, v = 7168, 128, 61, 129280
    mla = (1536 * (h + a * (128 + 64) + 1) + 512 * (h + a * (128 + 128) + 1) + h * 64 + a * 128 * h)
    dense = 2 * h * (18432 * 3 / 2 + 1) + mla
    moe = 2 * h * (2048 * 256 * 3 / 2 + 2048 * 3 / 2 + 1) + mla
    router = h * 256  # counted from @1bcb3b9 on (the older @00caa53 left it out)
    closed = 3 * dense + 58 * (moe + router) + h + 2 * v * h
    assert PRESETS["deepseek-v3"].num_params == closed


def test_dense_counts_unchanged_by_moe_fields() -> None:
    """A dense model gives the same count as the pre-MoE formula l·(4h² + 2·f-matrices + norms) + V·h."""
    m = PRESETS["llama2-7b"]
    h, f, l, v = m.hidden_size, m.ffn_hidden_size, m.num_layers, m.vocab_size
    assert m.num_params == l * (4 * h * h + 3 * h * f + 2 * h) + 2 * v * h + h
    assert m.num_active_params == m.num_params and m.num_moe_layers == 0


def test_layer_pattern_counts() -> None:
    assert (PRESETS["deepseek-v3"].num_dense_layers, PRESETS["deepseek-v3"].num_moe_layers) == (3, 58)
    assert (PRESETS["llama4-maverick"].num_dense_layers, PRESETS["llama4-maverick"].num_moe_layers) == (24, 24)
    assert PRESETS["qwen3-235b-a22b"].num_moe_layers == 94


def _matmul_active_params(m: TransformerModel) -> float:
    """Active parameters that are matmul weights: no input embedding, norms or biases."""
    norms = m.num_layers * 2 * m.norm_params + m.norm_params
    norms += m.num_layers * (2 if m.norm == "layernorm" else 1) * ((m.q_lora_rank or 0) + (m.kv_lora_rank or 0))
    biases = 0
    if m.bias:
        routed = m.experts_per_token + m.num_shared_experts
        expert_bias = (2 if m.gated_mlp else 1) * m.expert_ffn_hidden_size + m.hidden_size
        biases = m.num_layers * (m.query_dim + 2 * m.kv_dim + m.hidden_size) + m.num_moe_layers * (
            routed * expert_bias + m.num_experts)
    return m.num_active_params - m.vocab_size * m.hidden_size - norms - biases


@pytest.mark.parametrize("name", ["mixtral-8x7b", "mixtral-8x22b", "deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b",
                                  "gpt-oss-120b", "llama4-maverick", "llama3-8b"])
def test_model_flops_are_six_n_active(name: str) -> None:
    """Model FLOPs per token = 6·N_active(matmul) + 6·l·s·a·(d_qk + d_v) (Kaplan et al. 2020 §2.1's
    6N, plus the attention scores and context over the full s × s square, as flops.py counts them); blocks with
    local attention count s·w instead of s² (gpt-oss: a 128-token window on half the blocks)."""
    m = PRESETS[name]
    per_token = model_flops_per_step(m, np.array([1.0]))[0] / m.seq_len
    keys = m.seq_len * (1 - m.local_attention_fraction) + m.local_attention_fraction * min(
        m.attention_window or m.seq_len, m.seq_len)
    closed = 6 * _matmul_active_params(m) + 6 * m.num_layers * keys * m.num_heads * (m.qk_head_dim + m.value_head_dim)
    assert per_token == pytest.approx(closed, rel=1e-9)


def test_expert_gemm_shapes() -> None:
    """Each routed expert's GEMM sees ep·etp·(b·s/tp)·k/E rows (sequence parallel: a rank routes b·s/tp
    tokens; its E/ep experts receive from ep ranks, all-gathered over etp) and gate·f_expert/etp columns;
    the FLOPs do not depend on ep or etp."""
    m = PRESETS["deepseek-v3"]

    def fc1(ep: int, etp: int):
        return next(g for g in layer_gemms(m, np.array([1.0]), np.array([2.0]), ep, etp) if g.name == "fc1")

    assert fc1(1, 1).m[0] == pytest.approx(4096 / 2 * 8 / 256) and fc1(1, 1).n[0] == pytest.approx(2 * 2048)
    assert fc1(8, 2).m[0] == pytest.approx(16 * 4096 / 2 * 8 / 256) and fc1(8, 2).n[0] == pytest.approx(2 * 2048 / 2)
    assert fc1(8, 2).flops[0] == pytest.approx(fc1(1, 1).flops[0])


@pytest.mark.parametrize(("fields", "message"), [
    ({"num_shared_experts": 1}, "only apply to a mixture of experts"),
    ({"moe_ffn_hidden_size": 512}, "only apply to a mixture of experts"),
    ({"num_experts": 8, "first_dense_layers": 4}, "no MoE block left"),
    ({"num_experts": 8, "moe_layer_interval": 5}, "no MoE block left"),
    ({"q_lora_rank": 64}, "only apply to multi-latent attention"),
    ({"kv_lora_rank": 64, "num_kv_heads": 2}, "one key/value head per query head"),
    ({"hidden_size": 130}, "not a multiple of num_heads"),
])
def test_moe_validation_messages(fields: dict, message: str) -> None:
    base = dict(name="toy", num_layers=4, hidden_size=128, num_heads=4, vocab_size=1000, seq_len=64)
    with pytest.raises((WorkloadError, ValueError), match=message):
        TransformerModel(**{**base, **fields})


def test_explicit_head_width() -> None:
    """kv_channels lifts the h % a rule and sets the query width (gpt-oss: 64 heads × 64 = 4096 ≠ 2880)."""
    m = PRESETS["gpt-oss-120b"]
    assert (m.head_dim, m.query_dim, m.kv_dim) == (64, 4096, 512)


# ---------------------------------------------------------------- commmodel/data/training_moe.yaml

def _moe_runs() -> list[dict]:
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[1] / "commmodel" / "data" / "training_moe.yaml"
    return yaml.safe_load(path.read_text())["runs"]


def _megatron_flops_per_token(m: TransformerModel) -> float:
    """Megatron-Core's count: 6·N_active(matmul) + 3·l·s·a·(d_qk + d_v) (causal half of the s × s square)."""
    return 6 * _matmul_active_params(m) + 3 * m.num_layers * m.seq_len * m.num_heads * (m.qk_head_dim + m.value_head_dim)


def test_moe_runs_cover_the_brief() -> None:
    """At least 8 published runs, EP from 8 to 64, Hopper and Blackwell systems, every one with a source."""
    runs = _moe_runs()
    assert len(runs) >= 8
    eps = {r["layout"]["ep"] for r in runs}
    assert min(eps) == 8 and max(eps) == 64
    assert {"dgx-h100", "gb200-nvl72"} <= {r["system"] for r in runs}
    for r in runs:
        assert r["source"] and r["assumptions"] and r["tolerance_pct"] == 30, r["id"]
        assert not any(word in r["source"] for word in ("Megatron-Bridge", "performance_summary", "MLPerf")), r["id"]


@pytest.mark.parametrize("run", _moe_runs(), ids=lambda r: r["id"])
def test_moe_run_layout_is_consistent(run: dict) -> None:
    """dp = n/(tp·cp·pp) and edp = n/(ep·etp·pp) (parallel folding); ep divides the experts; the model and
    the system resolve."""
    from commmodel.io.models import model_from_mapping
    from commmodel.io.profiles import load_system

    lay, n = run["layout"], run["num_gpus"]
    assert lay["dp"] * lay["tp"] * lay["cp"] * lay["pp"] == n
    assert lay["edp"] * lay["ep"] * lay["etp"] * lay["pp"] == n
    model = model_from_mapping(dict(run["model"]), run["id"])
    assert model.num_experts % lay["ep"] == 0
    assert lay["global_batch"] % (lay["micro_batch"] * lay["dp"]) == 0
    load_system(run["system"])


@pytest.mark.parametrize("run", _moe_runs(), ids=lambda r: r["id"])
def test_moe_run_derived_metric(run: dict) -> None:
    """tokens/s/GPU follows from the published step time, or from the published TFLOP/s with Megatron's
    FLOP count of the preset (the Qwen3 rows with both confirm that count, see the file header)."""
    from commmodel.io.models import model_from_mapping

    lay, n = run["layout"], run["num_gpus"]
    model = model_from_mapping(dict(run["model"]), run["id"])
    if "published_step_time_s" in run:
        tokens = lay["global_batch"] * model.seq_len / (run["published_step_time_s"] * n)
        assert run["published"] == pytest.approx(tokens, rel=1e-3)
        tflops = tokens * _megatron_flops_per_token(model) / 1e12
        assert tflops == pytest.approx(run["published_tflops_per_gpu"], rel=0.01)
    elif "published_tflops_per_gpu" in run:
        assert float(run["flops_per_token_source"]) == pytest.approx(_megatron_flops_per_token(model), rel=1e-3)
        assert run["published"] == pytest.approx(run["published_tflops_per_gpu"] * 1e12 / _megatron_flops_per_token(model),
                                                 rel=1e-3)
    else:  # DeepSeek-V3: 180K GPU-hours per trillion tokens
        assert run["published"] == pytest.approx(1e12 / (180e3 * 3600), rel=1e-3)


def test_moe_runs_tp_comm_overlap_as_launched() -> None:
    """The ModelZoo Qwen3-235B H100 launches pass no --tp-comm-overlap (Qwen3-235B-A22B.yaml and sbatch_benchmarking.sh
    @8017e11 and @b0b92ff; Megatron's flag is store_true): those rows price the attention's sequence-parallel
    all-gathers and reduce-scatters fully exposed (but the backward's re-gather of the QKV input, which runs behind
    the input-gradient GEMM either way, [MLM-REGATHER] in step/stacks.py); so does the GB200 128K MXFP8 launch
    (sbatch_benchmarking.sh @e865051 adds the flag for PR=bf16 only); every other run keeps the megatron-core stack's
    overlap."""
    from commmodel.io.profiles import load_system
    from commmodel.step.estimate import evaluate_single
    from commmodel.step.layout import LAYOUT_FIELDS, Layout
    from commmodel.validation.moe import moe_run_options

    runs = _moe_runs()
    off = {r["id"] for r in runs if not moe_run_options(r["stack"]).tp_comm_overlap}
    assert off == {r["id"] for r in runs if r["id"].startswith("zoo-qwen3-235b-h100")} | {
        "zoo-qwen3-235b-gb200-128gpu-seq128k-mxfp8-cp4"}
    run = next(r for r in runs if r["id"] == "zoo-qwen3-235b-h100-256gpu-ep8-tp4")
    layout = Layout(**{k: v for k, v in run["layout"].items() if k in LAYOUT_FIELDS})
    model, system = PRESETS[run["model"]["preset"]], load_system(run["system"])
    options = moe_run_options(run["stack"])
    row = evaluate_single(model, system, run["num_gpus"], layout, options)
    overlapped = evaluate_single(model, system, run["num_gpus"], layout, options.model_copy(update={"tp_comm_overlap": True}))
    ops = ("all_gather", "reduce_scatter")
    links = {op: row[f"tp/{op}/link_s"] for op in ops}
    regather = links["reduce_scatter"] / 2.0  # one re-gather per routed-only block (QKV), two reduce-scatters
    assert links["reduce_scatter"] > 0 and links["all_gather"] == pytest.approx(links["reduce_scatter"] + regather)
    assert sum(row[f"tp/{op}/exposed_s"] for op in ops) == pytest.approx(sum(links.values()) - regather, rel=1e-9)
    # with the overlap, 1/tp of the other traffic stays exposed (the GEMMs hide the rest): tp = 4
    exposed_overlapped = sum(overlapped[f"tp/{op}/exposed_s"] for op in ops)
    assert exposed_overlapped == pytest.approx((sum(links.values()) - regather) / 4, rel=1e-9)
