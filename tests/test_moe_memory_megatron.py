"""Weights + gradients + optimizer of the scored MoE runs' layouts against Megatron-Core's own estimate.

``megatron_weight_and_optimizer_bytes`` transcribes NVIDIA/Megatron-LM
``megatron/training/theoretical_memory_usage.py::compute_weight_and_optimizer_memory`` @d98e8a64 (2026-08-22;
the same expert split as @1bcb3b9 in docs/moe-memory-reference.md): parameters split three ways (TP-sharded
attention/dense MLP/shared experts + embedding, replicated norms/router, routed experts over ep·etp), the most
loaded shard holding l/p blocks and one embedding, and 6 + 12/D bytes per parameter with the distributed
optimizer, D = dp for the first two groups and the expert data-parallel size world/(etp·ep·pp) for the experts.
Issue 13: the project's weights + gradients + optimizer within 5% of it. Megatron's estimate has no MoE
activation term, no DualPipe and no BF16 moments (see docs/moe.md "Memory of the scored runs")."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.io.validation_data import read_training_moe
from commmodel.workload import PRESETS
from commmodel.workload.memory import memory_terms
from commmodel.workload.model import TransformerModel


def _attention_params(m: TransformerModel) -> float:
    h, a = m.hidden_size, m.num_heads
    norm = 1 if m.norm == "rmsnorm" else 2
    if m.is_mla:
        c, c_r, c_v = m.qk_head_dim - m.qk_rope_head_dim, m.qk_rope_head_dim, m.value_head_dim
        q = (m.q_lora_rank * (h + a * (c + c_r) + norm) if m.q_lora_rank else h * a * (c + c_r))
        return q + m.kv_lora_rank * (h + a * (c + c_v) + norm) + h * c_r + a * c_v * h
    q_proj = m.head_dim * a
    return 2 * h * h * (1 + m.num_kv_heads / a) * q_proj / h


def megatron_weight_and_optimizer_bytes(m: TransformerModel, world: int, tp: int, pp: int, ep: int,
                                        etp: int = 1) -> float:
    """Megatron-Core @d98e8a64 compute_weight_and_optimizer_memory, distributed optimizer, bf16 (bytes)."""
    h, g = m.hidden_size, (1.5 if m.gated_mlp else 1.0)
    norm = 1 if m.norm == "rmsnorm" else 2
    l_moe = m.num_moe_layers
    l_dense = m.num_layers - l_moe
    attn = _attention_params(m)
    dense_mlp = 2 * h * m.ffn_hidden_size * g
    shared = 2 * h * m.num_shared_experts * m.expert_ffn_hidden_size * g
    routed = 2 * h * m.expert_ffn_hidden_size * m.num_experts * g
    layernorm, router = 2 * h * norm, h * m.num_experts
    embedding = h * m.vocab_size
    tp_sharded = (attn + dense_mlp) * l_dense + (attn + shared) * l_moe
    replicated = layernorm * l_dense + (layernorm + router) * l_moe + norm * h
    experts = routed * l_moe
    on_tp = (tp_sharded / pp + embedding) / tp
    if not m.tied_embeddings and pp == 1:
        on_tp += embedding / tp
    on_rep = replicated / pp
    on_ex = experts / pp / (etp * ep)
    # Megatron's args.data_parallel_size excludes cp; its distributed optimizer shards the dense states over
    # the data-parallel group with cp (parallel_state ``get_data_parallel_group(with_context_parallel=True)``),
    # so dp·cp = world/(tp·pp) is used here
    dp = world // (tp * pp)
    edp = world // (etp * ep * pp)
    return (on_tp + on_rep) * (6 + 12 / dp) + on_ex * (6 + 12 / edp)


def _ours(m: TransformerModel, world: int, tp: int, pp: int, ep: int, etp: int = 1, cp: int = 1) -> float:
    one = np.ones(1, dtype=np.int64)
    dp = world // (tp * pp * cp)
    mem = memory_terms(m, tp * one, pp * one, dp * cp * one, one, 8 * one, one, 0 * one, one > 0, one,
                       25 * 2**20, True, False, ep=ep * one, etp=etp * one)
    return float(mem["weights"][0] + mem["gradients"][0] + mem["optimizer"][0])


def test_transcription_reproduces_the_worked_numbers() -> None:
    """docs/moe-memory-reference.md's three worked layouts (weights + gradients + optimizer, GB)."""
    assert megatron_weight_and_optimizer_bytes(PRESETS["mixtral-8x7b"], 64, 1, 1, 8) / 1e9 == pytest.approx(52.21, rel=2e-3)
    assert megatron_weight_and_optimizer_bytes(PRESETS["deepseek-v3"], 1024, 2, 8, 64) / 1e9 == pytest.approx(24.14, rel=2e-3)
    assert megatron_weight_and_optimizer_bytes(PRESETS["qwen3-235b-a22b"], 256, 2, 8, 32) / 1e9 == pytest.approx(20.94, rel=2e-3)


def _scored_layouts() -> list[tuple[str, str, int, dict]]:
    out = []
    for run in read_training_moe():
        out.append((run["id"], run["model"]["preset"], run["num_gpus"], run["layout"]))
    return out


@pytest.mark.parametrize("run_id,preset,world,layout", _scored_layouts(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_scored_run_within_5pct_of_megatron(run_id, preset, world, layout) -> None:
    """Each scored MoE run's layout (1F1B accounting: DualPipe's second copy is not in Megatron's formula)."""
    m = PRESETS[preset]
    tp, pp, ep, etp, cp = layout["tp"], layout["pp"], layout["ep"], layout.get("etp", 1), layout.get("cp", 1)
    ours = _ours(m, world, tp, pp, ep, etp, cp)
    theirs = megatron_weight_and_optimizer_bytes(m, world, tp, pp, ep, etp)
    assert ours == pytest.approx(theirs, rel=0.05), f"{run_id}: {ours / 1e9:.2f} GB vs Megatron {theirs / 1e9:.2f} GB"
