"""torchtitan's op-level selective activation checkpointing ("op" SAC) as a recompute policy.

Source: pytorch/torchtitan ``torchtitan/parallelisms/parallelize_llama.py`` @9dec370 (the commit of the
Dec 2024 H100 benchmarks, benchmarks/llama3_h100_202412_torchtitan.md @31a17bf), ``_save_list`` and
``_apply_ac_to_transformer_block`` with ``selective_ac_option = 'op'`` (train_configs/llama3_8b.toml
@9dec370). Each transformer block is wrapped in a non-reentrant checkpoint whose policy marks the outputs
of ``aten.mm``, ``_scaled_dot_product_{flash,efficient}_attention`` and ``_c10d_functional
.reduce_scatter_tensor`` MUST_SAVE, "except every second mm" (a per-block mm counter, reset for every
block); every other op is recomputed in the backward. Nothing else of the block is kept but its input.

The mm order is that of torchtitan's Llama block (torchtitan/models/llama/model.py @9dec370:
``wq, wk, wv`` then SDPA then ``wo``; ``w2(silu(w1(x)) * w3(x))``), so, counting from 1, the odd ones are
saved and the even ones recomputed:

    gated MLP:   wq ✓  wk ✗  wv ✓  wo ✗  w1 ✓  w3 ✗  w2 ✓
    plain MLP:   wq ✓  wk ✗  wv ✓  wo ✗  w1 ✓  w2 ✗

Stored per token and block (e bytes per element; tp shards the mm outputs, SDPA heads and, with sequence
parallelism, the block input; the flash kernel's logsumexp is fp32 per head):

    e·h_in + e·Σ saved widths/t + e·a·d_v/t + 4·a/t + (2·e·h/t reduce-scatter outputs when t > 1 with SP)

e.g. Llama 3 8B, t = 1: 2·(4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 4·32 = 63,616 B per token, against
Korthikanti et al.'s 34·h = 139,264 (their "selective" keeps every input, recomputes only the core).
Recomputed in the backward: the even mms (wk, wo, w3 for Llama: 36.5% of the 8B block's linear FLOPs)
and the block's memory-bound ops (norms, RoPE, activation); SDPA is not redone.
"""

from __future__ import annotations

import numpy as np

from commmodel.workload.model import TransformerModel

LSE_BYTES = 4.0
"""The flash SDPA kernel's saved logsumexp: one fp32 per head and token (PyTorch
``_scaled_dot_product_flash_attention`` returns ``(output, logsumexp, ...)``, logsumexp float32)."""


def block_matmuls(model: TransformerModel) -> tuple[tuple[str, str, float], ...]:
    """The block's ``aten.mm`` calls in torchtitan's order: (torchtitan name, the :class:`Gemm` of
    :func:`commmodel.workload.flops.layer_gemms` it belongs to, output width per token before tp)."""
    h, f = float(model.hidden_size), float(model.active_ffn_width)
    attention = (("wq", "qkv", float(model.query_dim)), ("wk", "qkv", float(model.kv_dim)),
                 ("wv", "qkv", float(model.kv_dim)), ("wo", "proj", h))
    mlp = (("w1", "fc1", f), ("w3", "fc1", f), ("w2", "fc2", h)) if model.gated_mlp else \
        (("w1", "fc1", f), ("w2", "fc2", h))
    return attention + mlp


def saved(index: int) -> bool:
    """Whether the ``index``-th mm of a block (0-based) keeps its output: the policy saves the odd ones
    counting from 1 ("except every second mm")."""
    return index % 2 == 0


def recomputed_share(model: TransformerModel) -> dict[str, float]:
    """Fraction of each :class:`Gemm`'s forward FLOPs redone in the backward (by Gemm name; the mms of one
    Gemm share its M and K, so FLOPs split as output widths). SDPA (scores, context) is saved: 0."""
    total: dict[str, float] = {}
    redone: dict[str, float] = {}
    for index, (_, gemm, width) in enumerate(block_matmuls(model)):
        total[gemm] = total.get(gemm, 0.0) + width
        redone[gemm] = redone.get(gemm, 0.0) + (0.0 if saved(index) else width)
    return {gemm: redone[gemm] / total[gemm] for gemm in total}


def saved_bytes_per_token(model: TransformerModel, tp: np.ndarray, sequence_parallel: np.ndarray) -> np.ndarray:
    """Bytes one block keeps per token on one GPU under op SAC (module docstring formula)."""
    t = np.asarray(tp, dtype=float)
    sp = np.asarray(sequence_parallel, dtype=bool) & (t > 1)
    e, h = model.dtype_bytes, float(model.hidden_size)
    block_input = e * h / np.where(sp, t, 1.0)
    kept = sum(width for index, (_, _, width) in enumerate(block_matmuls(model)) if saved(index))
    sdpa = e * model.attention_out_dim + LSE_BYTES * model.num_heads
    reduce_scatter = np.where(sp, 2.0 * e * h / t, 0.0)
    return block_input + (e * kept + sdpa) / t + reduce_scatter
