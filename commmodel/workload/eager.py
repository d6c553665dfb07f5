"""HBM bytes of one torchtitan Llama block's elementwise work in eager PyTorch and under torch.compile (issue 12).

The step model's default (:func:`commmodel.workload.flops.layer_elementwise_bytes`) is Megatron's fused kernels:
one read + write per norm, activation, residual add and RoPE, backward twice the forward. torchtitan's Llama runs
the same work op by op when ``[training] compile = false`` (its default: train_configs/llama3_8b.toml @9dec370):

- RMSNorm, torchtitan/models/norms.py @9dec370 ``RMSNorm``: ``_norm(x.float()).type_as(x) * self.weight`` with
  ``_norm(x) = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``: six passes over [tokens, h] forward
  (cast up e+4, pow 8, mean 4, mul 8, cast down 4+e, weight mul 2e per element = 28 + 4e) and thirteen
  backward (weight mul's two products 3e + 2e and the weight-gradient sum e, cast e+4, mul 12, mul 8, sum 4, the
  mean's expand-divide 4, pow's derivative 2·x as pow 8 + mul 8 + mul 12, the sum of the two gradients of the fp32
  x 12, cast 4+e: 76 + 8e);
- RoPE, torchtitan/models/llama/model.py @9dec370 ``apply_rotary_emb``: per element of q and k a cast up (e+4), a
  complex multiply (8) and a cast down (4+e), forward and backward alike: 16 + 2e;
- ``repeat_kv`` (GQA, n_rep > 1): expand + reshape copies K and V to every query head: per token e·(kv + q) each,
  forward (copy) and backward (sum over the copies);
- SwiGLU, ``FeedForward.forward``: ``F.silu(w1(x)) * w3(x)``: silu 2e, mul 3e per element of f forward; backward
  the mul's two products and silu_backward, 3e each;
- residuals, ``TransformerBlock.forward``: two adds of 3e per element of h forward; backward the sum of the
  gradients at each of the two branch points (3e), and of the input gradients of the separate wq/wk/wv (two sums)
  and w1/w3 (one) linears over the full h (3e each), which Megatron's fused QKV and fc1 GEMMs do not have.

At e = 2, tp = 1: forward 84h + 24(q + kv) + 10f, backward 214h + 24(q + kv) + 18f bytes per token and layer
(Llama-3 8B: 610,304 and 1,257,472), where the fused estimate is 196,608 and 393,216. Counted op for op by
``python benchmarks/eager_elementwise.py`` (TorchDispatchMode over forward + backward of that block on CPU:
613,424 and 1,264,720 bytes per token at 8 tokens, the difference being the [h] norm weights, the RoPE table and
the harness's seed gradient), with 28 elementwise kernels forward and 50 backward beside 8 and 15 matmul/SDPA.

``torch.compile`` (``[training] compile = true``, applied per TransformerBlock by torchtitan's ``apply_compile``)
lets Inductor fuse each chain of pointwise ops and reductions between two matmuls into one kernel. The model's
assumption: one read + write per fused region, i.e. the fused estimate, plus the ``repeat_kv`` copy, which stays:
SDPA takes the materialised [tokens, a, d] K and V.
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

from commmodel.workload.model import TransformerModel

ElementwiseKind = Literal["fused", "eager", "compiled", "eager-fused-rmsnorm"]
ELEMENTWISE_KINDS: tuple[str, ...] = get_args(ElementwiseKind)
"""How a block's elementwise work runs: ``fused`` (Megatron's fused kernels), ``eager`` (torchtitan's Llama op by op),
``compiled`` (torch.compile: fused regions plus the GQA K/V copy), ``eager-fused-rmsnorm`` (eager, but the two
RMSNorms as torchtitan's Triton ``FusedRMSNorm``, ``norm_type = "fused_rmsnorm"``)."""

EAGER_KERNELS_FORWARD = 36
"""Kernels in one torchtitan Llama block forward in eager mode: 28 elementwise (16 of the two RMSNorms, 6 of
RoPE, 2 repeat_kv copies, 2 residual adds, silu, mul) + 7 linears + SDPA (benchmarks/eager_elementwise.py)."""
EAGER_KERNELS_BACKWARD = 65
"""Kernels of its backward: 50 elementwise + 14 matmuls + SDPA backward (benchmarks/eager_elementwise.py)."""

RMSNORM_FORWARD_FP32_BYTES = 28.0
"""Bytes per element of torchtitan's eager RMSNorm forward besides 4e (see the module docstring)."""
RMSNORM_BACKWARD_FP32_BYTES = 76.0
"""Bytes per element of its backward besides 8e."""
FUSED_RMSNORM_FORWARD_E = 2.0
"""torchtitan's Triton RMSNorm forward (``norm_type = "fused_rmsnorm"``; torchtitan/models/norms.py @0413364
``_rms_norm_fwd_kernel``): reads x, writes y, e bytes each per element (the [h] weight and the fp32 rstd per row
aside): 2e."""
FUSED_RMSNORM_BACKWARD_E = 3.0
"""Its backward (``_rms_norm_bwd_kernel_sm``): reads x and dy, writes dx: 3e per element (per-SM dw partials aside)."""
FUSED_RMSNORM_KERNELS = (1, 2)
"""Kernels of one fused RMSNorm forward and backward (the backward kernel and the sum of its dw partials), where the
eager one launches 8 and 13 (of ``EAGER_KERNELS_FORWARD`` / ``_BACKWARD``)."""
EAGER_RMSNORM_KERNELS = (8, 13)
"""Kernels of one eager RMSNorm forward and backward (benchmarks/eager_elementwise.py)."""
ROPE_FP32_BYTES = 16.0
"""Bytes per element of q and k of the complex-multiply RoPE besides 2e, forward and again backward."""


def gqa_copy_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray) -> np.ndarray | float:
    """Bytes of ``repeat_kv``'s K and V copies per micro-batch and layer, forward (the same again backward):
    tokens · 2e·(kv + q)/tp, 0 without GQA (n_rep = 1 returns x)."""
    q, kv = float(model.query_dim), float(model.kv_dim)
    if kv >= q:
        return 0.0
    tokens = np.asarray(micro_batch, dtype=float) * model.seq_len
    return tokens * 2.0 * model.dtype_bytes * (q + kv) / np.asarray(tp, dtype=float)


def eager_elementwise_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray,
                            sequence_parallel: np.ndarray, fused_rmsnorm: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes of one block's elementwise work on one GPU in eager torchtitan (module
    docstring), the attention core excluded. Norms and residuals run on h/tp per token with sequence
    parallelism (else h); a model without a gated MLP pays one activation pass (2e·f forward, 3e·f backward),
    one without RoPE no RoPE bytes; with ``fused_rmsnorm`` the two norms move 2e forward and 3e backward per element
    (``FUSED_RMSNORM_FORWARD_E`` / ``_BACKWARD_E``) instead of 28 + 4e and 76 + 8e; query/key head norms
    (``qk_layernorm``) the same per element of a·d + g·d (their kernels are not added to :func:`eager_kernels`)."""
    b, t = np.asarray(micro_batch, dtype=float), np.asarray(tp, dtype=float)
    tokens = b * model.seq_len
    e = model.dtype_bytes
    h, f = float(model.hidden_size), model.active_ffn_width
    q, kv = float(model.query_dim), float(model.kv_dim)
    h_rep = np.where(np.asarray(sequence_parallel, dtype=bool), h / t, h)
    rope = (ROPE_FP32_BYTES + 2 * e) * (q + kv) / t if model.position_embedding == "rope" else 0.0
    act_fwd, act_bwd = ((5 * e, 9 * e) if model.gated_mlp else (2 * e, 3 * e))
    norm_fwd, norm_bwd = ((FUSED_RMSNORM_FORWARD_E * e, FUSED_RMSNORM_BACKWARD_E * e) if fused_rmsnorm else
                          (RMSNORM_FORWARD_FP32_BYTES + 4 * e, RMSNORM_BACKWARD_FP32_BYTES + 8 * e))
    qk_norms = model.qk_norm_width / t  # the query/key head norms, the same RMSNorm per element
    forward = tokens * (2 * norm_fwd * h_rep + norm_fwd * qk_norms + 2 * 3 * e * h_rep + rope + act_fwd * f / t)
    linear_inputs = 3 if model.gated_mlp else 2  # separate wq/wk/wv (+ w1/w3): input gradients summed over h
    backward = tokens * (2 * norm_bwd * h_rep + norm_bwd * qk_norms + 2 * 3 * e * h_rep
                         + linear_inputs * 3 * e * h + rope + act_bwd * f / t)
    copy = gqa_copy_bytes(model, micro_batch, tp)
    return forward + copy, backward + copy


EAGER_KINDS = ("eager", "eager-fused-rmsnorm")
"""The elementwise kinds that run torchtitan's block op by op (and keep what its ops save)."""


def saved_extra_bytes_per_token(model: TransformerModel, kind: str) -> tuple[float, float]:
    """(replicated, split over tp) bytes per token that one block keeps for its backward beyond the fused inventory
    (:func:`commmodel.workload.memory.linear_layer_bytes_per_token`) when its elementwise work runs as ``kind``,
    counted from the ops that save them (torchtitan @9dec370, module docstring):

    - eager RMSNorm (``eager``): ``x.float()`` is saved by ``pow`` and the first ``mul`` (4 bytes per element) and the
      normalised 16-bit tensor by the weight ``mul``, where a fused norm keeps its e-byte input: +4 per element of h,
      two norms (the Triton norm of ``eager-fused-rmsnorm`` keeps its input, as the fused inventory);
    - ``repeat_kv`` (GQA, eager and compiled): SDPA saves the K and V copies at the query width: +2e·(q − kv);
    - the attention output's ``.transpose(1, 2).contiguous()`` (eager): ``wo`` saves the copy beside SDPA's own output:
      +e·o;
    - SwiGLU (eager, gated MLP): ``F.silu(a) * b`` saves ``silu(a)`` beside a and b: +e·f.

    Llama-3 8B at e = 2: 8h + 12,288 + 8,192 + 2f = 81,920 bytes per token and block beyond the fused 139,264: 221,184,
    where a lent H100 measured 213,300 between 2- and 4-block models (tests/test_one_gpu_step.py)."""
    e, h = model.dtype_bytes, float(model.hidden_size)
    q, kv = float(model.query_dim), float(model.kv_dim)
    gqa = 2.0 * e * (q - kv) if kind in (*EAGER_KINDS, "compiled") and kv < q else 0.0
    if kind not in EAGER_KINDS:
        return 0.0, gqa
    norms = 2.0 * 4.0 * h if kind == "eager" else 0.0
    silu = e * model.active_ffn_width if model.gated_mlp else 0.0
    return norms, gqa + e * model.attention_out_dim + silu


def eager_kernels(fused_rmsnorm: bool = False) -> tuple[int, int]:
    """(forward, backward) kernels of one eager block: ``EAGER_KERNELS_FORWARD`` / ``_BACKWARD``, with the two
    RMSNorms' eager kernels swapped for the fused ones where ``fused_rmsnorm``."""
    if not fused_rmsnorm:
        return EAGER_KERNELS_FORWARD, EAGER_KERNELS_BACKWARD
    return (EAGER_KERNELS_FORWARD - 2 * (EAGER_RMSNORM_KERNELS[0] - FUSED_RMSNORM_KERNELS[0]),
            EAGER_KERNELS_BACKWARD - 2 * (EAGER_RMSNORM_KERNELS[1] - FUSED_RMSNORM_KERNELS[1]))


__all__ = ["ELEMENTWISE_KINDS", "EAGER_KERNELS_BACKWARD", "EAGER_KERNELS_FORWARD", "EAGER_KINDS",
           "eager_elementwise_bytes", "eager_kernels", "gqa_copy_bytes", "saved_extra_bytes_per_token"]
