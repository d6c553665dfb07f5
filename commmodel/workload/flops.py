"""FLOPs and HBM bytes of one transformer block on one GPU, vectorised over layouts (DESIGN §5).

Counting convention (Narayanan et al. 2021 §5.1; Korthikanti et al. 2022 Appendix A): a matmul of
(M×K)·(K×N) is 2·M·N·K FLOPs; attention scores and context are counted over the full s×s square
(no causal halving); backward costs twice the forward. For a GPT block this gives
24·B·s·h² + 4·B·s²·h forward per layer and 2·B·s·h·V for the logits, hence Megatron's

    model FLOPs per step    = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))    (no recompute)
    hardware FLOPs per step = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))    (full recompute)

Every function takes numpy arrays (one entry per layout) and returns arrays; ``tokens`` is the
micro-batch's token count b·s. GQA, gated MLPs and top-k experts generalise the same count: model
FLOPs per token are 6·N_active (the matmul weights a token passes through: top-k and shared experts,
the router, the output head; not the embedding lookup, norms or biases) plus 6·l·s·a·(d_qk + d_v) for
the attention scores and context (tests/test_workload_moe.py checks this closed form).
"""

from typing import Literal, NamedTuple, get_args

import numpy as np

from commmodel.workload import moe_recompute, op_sac, recompute_modules as modules_
from commmodel.workload.model import TransformerModel
from commmodel.workload.recompute_policies import RECOMPUTE_FULL, RECOMPUTE_MOE, RECOMPUTE_OP, RECOMPUTE_SELECTIVE
from commmodel.workload.select import select


class Gemm(NamedTuple):
    """One forward matmul of a block on one GPU: FLOPs and its (M, N, K) shape, arrays over layouts."""

    name: str
    """qkv, scores, context, proj, fc1, fc2, router (MoE) or logits."""
    flops: np.ndarray
    """Forward FLOPs on one GPU for one micro-batch (batch of small matmuls summed)."""
    m: np.ndarray
    """Rows of the output (tokens, or s for attention)."""
    n: np.ndarray
    """Columns of the output."""
    k: np.ndarray
    """Inner (reduction) dimension."""
    attention_core: bool
    """Part of the attention core that selective recompute redoes (scores, context)."""


def layer_gemms(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray, ep: np.ndarray | int = 1,
                etp: np.ndarray | int = 1) -> list[Gemm]:
    """The forward matmuls of one block on one of ``tp`` GPUs for a micro-batch of ``micro_batch`` sequences.

    Column-parallel QKV and fc1 split N by tp, row-parallel proj and fc2 split K by tp (Shoeybi et
    al. 2019). Scores and context are batched over b·a/tp heads: 2·b·(a/tp)·s²·d each (d = the
    query/key head width for scores, the value head width for context). MLA's chain of low-rank
    projections is priced as one GEMM of the same FLOPs (K = h).

    Mixture of experts: each token passes through ``experts_per_token`` routed experts plus the shared
    ones, so the MLP FLOPs use :attr:`TransformerModel.active_ffn_width` (averaged over the blocks when
    some are dense, as DeepSeek-V3's first three and Llama 4's alternate ones: the step model prices l
    identical blocks, so the total over the l blocks is exact); each routed expert's matmul sees
    tokens·k/E rows and f_expert columns. The router (h × E) is one more small GEMM in MoE blocks.
    With expert parallelism (Megatron-Core all-to-all dispatcher, sequence parallel: each rank routes its
    b·s/tp tokens) a GPU holds E/ep experts and each receives the tokens of ep ranks, all-gathered over
    etp: ep·etp·(b·s/tp)·k/E rows of f_expert/etp columns. The FLOPs are unchanged (the same token
    copies, spread over fewer, larger GEMMs); only the shape, hence the efficiency, follows ep and etp.
    """
    b = np.asarray(micro_batch, dtype=float)
    t = np.asarray(tp, dtype=float)
    s, h = float(model.seq_len), float(model.hidden_size)
    a = float(model.num_heads)
    d_qk, d_v = float(model.qk_head_dim), float(model.value_head_dim)
    qkv_width = model.attention_input_weights / h
    out_dim = float(model.attention_out_dim)
    tokens = b * s
    heads_per_gpu = a / t
    f_active = model.active_ffn_width
    f_one = float(model.expert_ffn_hidden_size if model.is_moe else model.ffn_hidden_size)
    expert_rows = tokens * model.experts_per_token / model.num_experts
    gate = 2.0 if model.gated_mlp else 1.0
    one = np.ones_like(tokens)
    mlp_n = f_one / t
    if model.is_moe:  # EP-folded expert GEMMs (docstring); dense shapes stay as they were
        fold = np.asarray(ep, dtype=float) * np.asarray(etp, dtype=float)
        expert_rows = fold * tokens / t * model.experts_per_token / model.num_experts
        mlp_n = f_one / np.asarray(etp, dtype=float) * one
    gemms = [
        Gemm("qkv", 2 * tokens * qkv_width / t * h, tokens, qkv_width / t, h * one, False),
        Gemm("scores", 2 * b * heads_per_gpu * s * s * d_qk, s * one, s * one, d_qk * one, True),
        Gemm("context", 2 * b * heads_per_gpu * s * s * d_v, s * one, d_v * one, s * one, True),
        Gemm("proj", 2 * tokens * out_dim * h / t, tokens, h * one, out_dim / t, False),
        Gemm("fc1", 2 * tokens * gate * f_active / t * h, expert_rows, gate * mlp_n, h * one, False),
        Gemm("fc2", 2 * tokens * f_active / t * h, expert_rows, h * one, mlp_n, False),
    ]
    if model.is_moe:
        e = float(model.num_experts)
        moe_share = model.num_moe_layers / model.num_layers
        gemms.append(Gemm("router", 2 * tokens * h * e * moe_share / t, tokens / t, e * one, h * one, False))
    return gemms


def logits_gemm(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray) -> Gemm:
    """The output projection to the (vocabulary-parallel) logits: 2·b·s·h·V/tp forward."""
    b = np.asarray(micro_batch, dtype=float)
    t = np.asarray(tp, dtype=float)
    tokens = b * model.seq_len
    h, v = float(model.hidden_size), float(model.vocab_size)
    return Gemm("logits", 2 * tokens * h * v / t, tokens, v / t, h * np.ones_like(tokens), False)


def layer_forward_flops(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Forward FLOPs of one block on one GPU (sum of :func:`layer_gemms`)."""
    return sum(g.flops for g in layer_gemms(model, micro_batch, tp))  # type: ignore[return-value]


def attention_core_flops(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Forward FLOPs of scores + context (4·b·s²·h/tp), what selective recompute redoes."""
    return sum(g.flops for g in layer_gemms(model, micro_batch, tp) if g.attention_core)  # type: ignore[return-value]


AttentionFlopsKind = Literal["square", "causal"]
"""How model FLOPs count the attention scores and context (:func:`counted_core_share`)."""
ATTENTION_FLOPS_KINDS: tuple[str, ...] = get_args(AttentionFlopsKind)
ATTENTION_FLOPS_SOURCES: dict[str, str] = {
    "square": "the full s×s square, causal or not (Narayanan et al. 2021 §5.1; torchtitan models/utils.py @b5bcd76 "
              "'do not account for sparsity in causal attention'; llm-foundry scripts/train/benchmarking/README.md "
              "@8c8dd48 attn_flops_per_seq = n_layers·2·2·d_model·seq_len²)",
    "causal": "the causal half of the s×s square (Megatron-LM training.py num_floating_point_operations from 20d66d5, "
              "2026-01-17, '/ 2  # causal mask'; Megatron-Bridge training/utils/flop_utils.py from d42316e, "
              "2025-09-26, seq_len / 2; NeMo nemo/utils/flops_formulas.py @6a5ad765, causal_self_attn = True)",
}
"""Who counts attention FLOPs which way: each stack reports MFU the way its framework logs it."""


def model_flops_line(kind: str) -> str:
    """The assumption line that says how a run's model FLOPs (TFLOP/s per GPU, MFU, HFU) count attention."""
    return (f"model FLOPs (TFLOP/s per GPU, MFU, HFU) count the attention scores and context over "
            f"{ATTENTION_FLOPS_SOURCES[kind]}; the step time does not depend on it (--attention-flops square|causal)")


def counted_core_share(model: TransformerModel, attention_flops: str = "square") -> float:
    """Share of the full s×s attention square counted as model FLOPs, over the blocks. ``square``: 1 where a block
    attends to the whole prefix (the published convention counts the square, causal or not: Narayanan et al. 2021
    §5.1), min(w, s)/s where it attends locally (``attention_window``: each query against w keys, the window's
    analogue of the square; a chunk of w the same). ``causal``: the keys each query sees under the causal mask,
    1/2 of the square for a whole-prefix block, (w/s)·(1 − w/(2s)) for a window of w (1/2 again at w = s)."""
    if attention_flops not in ATTENTION_FLOPS_KINDS:
        raise ValueError(f"attention flops {attention_flops!r}: use one of {', '.join(ATTENTION_FLOPS_KINDS)}")
    causal = attention_flops == "causal"
    full = 0.5 if causal else 1.0
    if model.attention_window is None:
        return full
    local = min(model.attention_window, model.seq_len) / model.seq_len
    local = local * (1.0 - local / 2.0) if causal else local
    return full - model.local_attention_fraction * (full - local)


def _counted(model: TransformerModel, gemm: Gemm, attention_flops: str = "square") -> np.ndarray:
    """A GEMM's FLOPs as model FLOPs count them (the attention core at :func:`counted_core_share`)."""
    return gemm.flops * counted_core_share(model, attention_flops) if gemm.attention_core else gemm.flops


def model_flops_per_step(model: TransformerModel, global_batch: np.ndarray, attention_flops: str = "square"
                         ) -> np.ndarray:
    """Model FLOPs of one optimizer step, whole job: 3 × (l × block forward + logits forward).

    Equals 72·B·s·l·h²·(1 + s/(6h) + V/(12lh)) for a GPT shape (Korthikanti et al. 2022, eq. for MFU).
    FLOPs are linear in the batch, so one sequence is counted and scaled. Local attention blocks count their window
    (:func:`counted_core_share`); ``attention_flops="causal"`` counts the causal half of the square (s/(12h) for
    s/(6h) above).
    """
    one = np.ones(1)
    block = sum(_counted(model, g, attention_flops) for g in layer_gemms(model, one, one))
    per_sequence = 3.0 * (model.num_layers * block + logits_gemm(model, one, one).flops)
    return np.asarray(global_batch, dtype=float) * per_sequence[0]


def hardware_flops_per_step(model: TransformerModel, global_batch: np.ndarray, recompute: np.ndarray,
                            recompute_modules: tuple[str, ...] = modules_.DEFAULT_RECOMPUTE_MODULES,
                            attention_flops: str = "square") -> np.ndarray:
    """Model FLOPs plus what recomputation redoes: full (code 2) one more block forward per layer,
    selective (code 1) the attention core forward with core_attn and the GEMM shares of ``recompute_modules``
    (:func:`commmodel.workload.recompute_modules.recomputed_gemm_share`), op (code 3) the mms torchtitan's op SAC does not keep
    (:func:`commmodel.workload.op_sac.recomputed_share`), moe (code 4) the MoE layers' router and expert GEMMs
    (:mod:`commmodel.workload.moe_recompute`). Full recompute gives Megatron's 96·B·s·l·h²·(…). The attention core
    counts as ``attention_flops`` says (:func:`counted_core_share`), as in :func:`model_flops_per_step`."""
    gb = np.asarray(global_batch, dtype=float)
    one = np.ones(1)
    gemms = layer_gemms(model, one, one)
    full = model.num_layers * sum(_counted(model, g, attention_flops) for g in gemms)[0]
    selective = model.num_layers * sum(_counted(model, g, attention_flops) for g in gemms if g.attention_core)[0]
    if not modules_.is_default(recompute_modules):
        sel_share = modules_.recomputed_gemm_share(model, recompute_modules)
        redo = sum(sel_share.get(g.name, 0.0) * g.flops for g in gemms)
        selective = (selective if "core_attn" in recompute_modules else 0.0) + model.num_layers * np.asarray(
            redo, dtype=float).reshape(-1)[0]
    share = op_sac.recomputed_share(model)
    op = model.num_layers * sum(share.get(g.name, 0.0) * g.flops for g in gemms)[0]
    moe_share = moe_recompute.recomputed_share(model)
    moe = model.num_layers * sum(moe_share.get(g.name, 0.0) * g.flops for g in gemms)[0] if moe_share else 0.0
    rc = np.asarray(recompute)
    extra_per_sequence = select([rc == RECOMPUTE_FULL, rc == RECOMPUTE_SELECTIVE, rc == RECOMPUTE_OP,
                                 rc == RECOMPUTE_MOE],
                                [full, selective, op, moe], 0.0)
    return model_flops_per_step(model, gb, attention_flops) + gb * extra_per_sequence


def megatron_flops_per_step(model: TransformerModel, global_batch: float, full_recompute: bool) -> float:
    """Megatron's closed forms for a GPT shape (used to check the general count and by validation).

    96·B·s·l·h²·(1 + s/(6h) + V/(16lh)) with full recompute (Narayanan et al. 2021 eq. 3),
    72·B·s·l·h²·(1 + s/(6h) + V/(12lh)) without (Korthikanti et al. 2022 Appendix A).
    """
    b, s, l, h, v = global_batch, model.seq_len, model.num_layers, model.hidden_size, model.vocab_size
    if full_recompute:
        return 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
    return 72.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))


def layer_elementwise_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray,
                            sequence_parallel: np.ndarray, flash_attention: bool) -> tuple[np.ndarray, np.ndarray]:
    """HBM bytes of the memory-bound (non-matmul) work of one block's forward on one GPU.

    Returns (total, attention-core part). Megatron's fused kernels are assumed (fused LayerNorm,
    bias-GeLU, scale-mask-softmax, bias-dropout-add); each reads its inputs and writes its output
    once in the training dtype (e bytes), dropout masks are 1 byte per element:

    - 2 norms: read + write h_r per token (h_r = h/tp with sequence parallelism, else h): 2·2e·h_r
    - 2 bias-dropout-adds: read x and the residual, write the sum and a mask: 2·(3e + 1)·h_r
    - activation (bias-GeLU reads f/tp and writes f/tp; SwiGLU reads 2f/tp), f the active width
      (:attr:`TransformerModel.active_ffn_width`: k · f for top-k experts)
    - RoPE on q and k (when used): read + write (a·d + kv)/tp
    - the query/key head norms (:attr:`TransformerModel.qk_layernorm`): read + write (a·d + g·d)/tp
    - softmax and dropout over the (a/tp)·s scores of each token (not with FlashAttention, which
      keeps them on chip): softmax read + write 2e, dropout read + write + mask 2e + 1.

    Backward is taken as twice the forward (gradient in, saved input, gradient out).
    """
    b = np.asarray(micro_batch, dtype=float)
    t = np.asarray(tp, dtype=float)
    tokens = b * model.seq_len
    e = model.dtype_bytes
    h, f, kv = float(model.hidden_size), model.active_ffn_width, float(model.kv_dim)
    h_rep = np.where(np.asarray(sequence_parallel, dtype=bool), h / t, h)
    norms = 2 * 2 * e * h_rep
    residual = 2 * (3 * e + 1) * h_rep
    act = (3 * e if model.gated_mlp else 2 * e) * f / t
    rope = 2 * e * (model.query_dim + kv) / t if model.position_embedding == "rope" else 0.0
    qk_norms = 2 * e * model.qk_norm_width / t
    if flash_attention:
        softmax = np.zeros_like(t)
    else:
        softmax = (model.num_heads / t) * model.seq_len * (4 * e + 1)
    return tokens * (norms + residual + act + rope + qk_norms + softmax), tokens * softmax


def logits_elementwise_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Forward HBM bytes of the vocabulary-parallel cross entropy: read the e-byte logits, write and
    re-read fp32 softmax (Megatron computes the loss in fp32): (e + 8)·V/tp per token."""
    return _logits_per_gpu(model, micro_batch, tp) * (model.dtype_bytes + 8.0)


def _logits_per_gpu(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Logits one GPU holds for a micro-batch: tokens × V/tp (the vocabulary-parallel output layer)."""
    return np.asarray(micro_batch, dtype=float) * model.seq_len * model.vocab_size / np.asarray(tp, dtype=float)


CrossEntropyKind = Literal["fused", "unfused", "eager"]
CROSS_ENTROPY_KINDS: tuple[str, ...] = get_args(CrossEntropyKind)
"""How the loss runs: ``fused`` (one pass in, softmax out; :func:`logits_elementwise_bytes`, backward twice
that), ``unfused`` (Megatron-Core's vocabulary-parallel cross entropy op by op in fp32) or ``eager`` (PyTorch's
``F.cross_entropy`` on an fp32 copy of the logits, as torchtitan and autocast run it)."""

EAGER_CE_FORWARD_FP32_BYTES_PER_LOGIT = 20.0
"""fp32 bytes per logit of PyTorch's eager ``F.cross_entropy(logits.float(), labels)`` forward, besides reading the
e-byte logits (torchtitan train.py @9dec370 ``loss_fn``; under ``torch.autocast`` PyTorch casts ``cross_entropy``'s
input to fp32 the same way: the AMP op reference's "CUDA Ops that can autocast to float32"): ``.float()`` writes 4;
``log_softmax`` over rows of V fp32 values, too long for one block's registers, reads each row three times (max,
sum of exponentials, the write pass) and writes 4: 16. Measured on a lent H100 SXM (benchmarks/one_gpu_step.py
--loss, 2026-11-27, tests/fixtures/device/one_gpu_loss_h100.json) on 2 × 4,096 × 128,256 logits: the cast 3.25 ms
(split in two 64-bit-indexed launches), ``cunn_SoftMaxForward`` 5.56 ms, i.e. 16 bytes per logit at 3.0 TB/s."""

EAGER_CE_BACKWARD_FP32_BYTES_PER_LOGIT = 24.0
"""fp32 bytes per logit of its backward, besides writing the e-byte gradient: ``nll_loss_backward`` zero-fills an
fp32 gradient (writes 4); ``log_softmax_backward`` (grad − exp(out)·Σgrad) reads the gradient for the sum, then
the gradient and the saved output and writes: 16; autograd casts the fp32 gradient to the logits' dtype (reads 4).
Forward + backward 2e + 44 = 48 bytes per bf16 logit: 18.8 ms at 0.8 × 3.35 TB/s for the 1.05e9 logits above,
where the lent H100 took 18.0 ms (20.06 ms less the test's 2.05 ms gradient accumulation into the leaf: fill 1.27,
``cunn_SoftMaxBackward`` 5.71, cast 2.05) alone, and 19.8 ms behind the output projection (its GEMMs left out)."""

UNFUSED_CE_FORWARD_FP32_BYTES_PER_LOGIT = 36.0
"""fp32 bytes per logit of Megatron-Core's unfused vocabulary-parallel cross entropy forward, besides reading
the e-byte logits (megatron/core/tensor_parallel/cross_entropy.py @937571c, the Megatron-LM default:
``--cross-entropy-loss-fusion`` is off, arguments.py @937571c): ``.float()`` writes 4; ``max`` reads 4;
the in-place ``-= logits_max`` reads and writes 8; ``torch.exp(out=)`` 8; ``sum`` reads 4; ``div_`` 8."""

UNFUSED_CE_BACKWARD_FP32_BYTES_PER_LOGIT = 12.0
"""fp32 bytes per logit of its backward, besides writing the e-byte gradient: ``grad_input.mul_(grad_output)``
reads and writes 8; autograd casts the fp32 gradient to the bf16 logits' dtype (reads 4, writes e). Measured on
one H100 SXM (benchmarks/megatron_kernels.py, 2026-11-26, two runs): forward + backward of the op-for-op code on
[4096, 1, 131072/tp] bf16 logits took 10.78-10.82 / 5.44-5.50 / 1.45-1.49 ms for tp 1 / 2 / 8, i.e. 53.8-54.0 /
54.3-54.9 / 57.8-59.3 bytes per logit at 0.8 × 3.35 TB/s, against 2e + 48 = 52 counted here."""


def cross_entropy_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray,
                        kind: str = "fused") -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes of the loss on the last stage, per micro-batch, tokens·V/tp logits.

    ``fused``: forward (e + 8) per logit (:func:`logits_elementwise_bytes`), backward twice that (the step
    model's backward rule): 3e + 24 in all. ``unfused``: forward e + 36, backward e + 12
    (:data:`UNFUSED_CE_FORWARD_FP32_BYTES_PER_LOGIT`, :data:`UNFUSED_CE_BACKWARD_FP32_BYTES_PER_LOGIT`):
    2e + 48 in all, 52 bytes per logit in bf16. ``eager``: forward e + 20, backward e + 24
    (:data:`EAGER_CE_FORWARD_FP32_BYTES_PER_LOGIT`, ...): 48 bytes per logit in bf16."""
    if kind not in CROSS_ENTROPY_KINDS:
        raise ValueError(f"cross entropy {kind!r}: use one of {', '.join(CROSS_ENTROPY_KINDS)}")
    if kind == "fused":
        forward = logits_elementwise_bytes(model, micro_batch, tp)
        return forward, 2.0 * forward
    logits = _logits_per_gpu(model, micro_batch, tp)
    e = model.dtype_bytes
    fp32_forward, fp32_backward = _CE_FP32_BYTES_PER_LOGIT[kind]
    return logits * (e + fp32_forward), logits * (e + fp32_backward)


_CE_FP32_BYTES_PER_LOGIT = {
    "unfused": (UNFUSED_CE_FORWARD_FP32_BYTES_PER_LOGIT, UNFUSED_CE_BACKWARD_FP32_BYTES_PER_LOGIT),
    "eager": (EAGER_CE_FORWARD_FP32_BYTES_PER_LOGIT, EAGER_CE_BACKWARD_FP32_BYTES_PER_LOGIT)}
"""(forward, backward) fp32 bytes per logit of each op-by-op loss, besides the e-byte logits and gradient."""
