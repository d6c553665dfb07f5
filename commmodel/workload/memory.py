"""Memory per GPU: weights, gradients, optimizer states, activations, buffers (DESIGN §5).

Vectorised over layouts. Activations follow Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models", arXiv:2205.05198) §4: per layer and micro-batch,

    no SP, no recompute:  s·b·h·(10 + 24/t + 5·a·s/(h·t))
    with SP:              s·b·h·(34/t + 5·a·s/(h·t))
    selective recompute:  s·b·h·34/t   (with SP)
    full recompute:       2·s·b·h      (/t with SP), the block input only
    op (torchtitan SAC):  block input + every other mm output + SDPA output (:mod:`.op_sac`)

(bytes, 16-bit activations). The "34" is 10 replicated bytes per h (two norm inputs 4, QKV and
fc1 inputs 4, two dropout masks 2) plus 24 split by tp (Q, K, V, projection input 8; fc1 output and
GeLU output 16); here it is derived from the shape so GQA, SwiGLU and experts follow. 1F1B keeps
up to p micro-batches in flight on the first stage (l/p layers each, i.e. l layers' worth); the
interleaved schedule multiplies that by 1 + (p−1)/(p·v) (§4.2.3); GPipe keeps all m.

Weights in the training dtype, fp32 main gradients (Megatron-LM accumulates bf16 gradients in fp32)
and Adam states (fp32 master copy, m, v: 12 bytes/param; 8 when training in fp32): Rajbhandari et
al. 2020 (ZeRO) §3; ZeRO-1 shards the optimizer states over dp, ZeRO-2 also the gradients,
ZeRO-3 also the weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from commmodel.errors import WorkloadError
from commmodel.workload import eager, mla_memory, moe_recompute, offload, op_sac, optimizer_states
from commmodel.workload import recompute_modules as modules_
from commmodel.workload.buffers import buffer_bytes, loss_buffer_bytes
from commmodel.workload.model import TransformerModel
from commmodel.workload.stages import chunk_layers, stage_layers
from commmodel.workload.optimizer_states import PrecisionAwareOptimizer
from commmodel.workload.recompute_policies import RECOMPUTE_FULL, RECOMPUTE_MOE, RECOMPUTE_OP, RECOMPUTE_SELECTIVE
from commmodel.workload.saved_inputs import SavedInputs
from commmodel.workload.select import select

GRAD_BYTES_PER_PARAM = 4.0
"""fp32 gradients: Megatron-LM's main grads under its argument default (``accumulate_allreduce_grads_in_fp32``, on
for bf16), FSDP2's sharded fp32 gradients, DDP's under AMP (fp32 parameters)."""

LOSS_BYTES_PER_LOGIT = 8.0
"""Loss buffers per element of the (vocabulary-parallel) logits at the step's peak: the logits in fp32 and
their fp32 gradient (the loss is computed in fp32; an assumption of Megatron-style fused cross entropy, which
upcasts the 16-bit logits once and writes its gradient into the same buffer)."""

TORCHTITAN_LOSS_BYTES_PER_LOGIT = 12.0
"""torchtitan's eager loss: ``F.cross_entropy(pred.flatten(0, 1).float(), labels)`` (torchtitan train.py
@9dec370 ``loss_fn``; its torch.compile is commented out there, "causes CUDA errors"). ``cross_entropy`` is
``log_softmax`` + ``nll_loss``; ``_log_softmax``'s backward reads its saved fp32 ``result`` and
``nll_loss``'s backward writes a dense fp32 gradient (pytorch tools/autograd/derivatives.yaml @d327a78), so
at the log-softmax backward three fp32 tensors of the logits' size are alive: the saved log-probabilities,
their gradient and the gradient of the fp32 logits, 12 bytes per logit (the forward holds 10: the bf16 logits,
their fp32 copy and the log-probabilities)."""

Dropout = tuple[bool, bool]
"""(hidden dropout on, attention dropout on): what the activation memory stores masks for (Korthikanti's formula:
both on, Megatron-LM's default probability 0.1)."""

def optimizer_bytes_per_param(model: TransformerModel, precision_aware: PrecisionAwareOptimizer | None = None,
                              mcore_master: bool = False) -> float:
    """Adam: m and v in fp32 (8), plus an fp32 master copy (4) when training in a 16-bit dtype. With Megatron-Core's
    precision-aware optimizer (``precision_aware``), the dtypes it keeps (:func:`.optimizer_states.state_bytes_per_param`;
    ``mcore_master``: Megatron-Core's own fp32 master copy, FP8 recipes other than delayed); refused for fp32 training."""
    if precision_aware is None:
        return 8.0 if model.dtype == "fp32" else 12.0
    if model.dtype == "fp32":
        raise WorkloadError(f"precision-aware optimizer with {model.name} in fp32: it narrows the states beside 16-bit "
                            "or low-precision weights; train in bf16 or drop it")
    return optimizer_states.state_bytes_per_param(precision_aware, model.dtype != "fp16", mcore_master)


def expert_data_parallel_degree(tp: np.ndarray, dp: np.ndarray, ep: np.ndarray | int = 1,
                                etp: np.ndarray | int = 1) -> np.ndarray:
    """Expert data-parallel ranks edp = tp·dp/(ep·etp), ``dp`` the gradient group (dp·cp): Megatron-Core
    ``expert_data_parallel_size = world / (etp·ep·pp)`` (megatron/core/parallel_state.py)."""
    stage = np.asarray(tp, dtype=np.int64) * np.asarray(dp, dtype=np.int64)
    return np.maximum(stage // (np.asarray(ep, dtype=np.int64) * np.asarray(etp, dtype=np.int64)), 1)


def expert_params_per_gpu(model: TransformerModel, pp: np.ndarray, ep: np.ndarray | int = 1,
                          etp: np.ndarray | int = 1) -> np.ndarray:
    """Routed-expert parameters on the busiest GPU: its stage's ⌈l/p⌉ blocks' share of the routed experts
    split over ep·etp (Megatron-Core theoretical_memory_usage @1bcb3b9: P_ex/(p·e·t_e)); 0 when dense."""
    fold = np.asarray(ep, dtype=float) * np.asarray(etp, dtype=float)
    return stage_layers(model, pp) * model.routed_expert_params_per_layer / fold


def dense_params_per_gpu(model: TransformerModel, tp: np.ndarray, pp: np.ndarray) -> np.ndarray:
    """Every other parameter on the busiest GPU: its stage's blocks without the routed experts / tp, plus
    the embedding on the first stage or the output head on the last (a tied head is a second copy when
    p > 1). These reduce their gradients over dp·cp."""
    t = np.asarray(tp, dtype=float)
    p = np.asarray(pp, dtype=float)
    block = model.layer_params - model.routed_expert_params_per_layer
    layers = stage_layers(model, pp) * block / t
    head = model.vocab_size * model.hidden_size / t
    first = model.embedding_params / t
    last = model.norm_params + head  # a tied head is a second copy on the last stage
    single = first + model.norm_params + (0.0 if model.tied_embeddings else head)
    ends = np.where(p > 1, np.maximum(first, last), single)
    return layers + ends


def params_per_gpu(model: TransformerModel, tp: np.ndarray, pp: np.ndarray, dp: np.ndarray | None = None, *,
                   ep: np.ndarray | int = 1, etp: np.ndarray | int = 1) -> np.ndarray:
    """Parameters held by the busiest GPU: :func:`dense_params_per_gpu` + :func:`expert_params_per_gpu`.
    ``dp`` is not used (experts split over the layout's ep, not over dp); it stays for positional callers."""
    return dense_params_per_gpu(model, tp, pp) + expert_params_per_gpu(model, pp, ep, etp)


def activation_bytes_per_layer(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray,
                               sequence_parallel: np.ndarray, recompute: np.ndarray,
                               flash_attention: bool, saved: SavedInputs = SavedInputs(),
                               dropout: Dropout = (True, True),
                               recompute_modules: tuple[str, ...] = modules_.DEFAULT_RECOMPUTE_MODULES) -> np.ndarray:
    """Stored activations of one block for one micro-batch on one GPU (Korthikanti et al. 2022 §4; recompute
    codes as step/layout.py ``RECOMPUTE_CODES``: 0 none, 1 selective (what ``recompute_modules`` checkpoint,
    :mod:`.recompute_modules`), 2 full, 3 op = :mod:`.op_sac`, 4 moe = :mod:`.moe_recompute`).
    ``saved``, ``dropout``: see :func:`linear_layer_bytes_per_token`."""
    return _activation_bytes(model, micro_batch, tp, sequence_parallel, recompute, flash_attention,
                             saved, dropout, recompute_modules)[0]


def linear_layer_bytes_per_token(model: TransformerModel, flash_attention: bool,
                                 saved: SavedInputs = SavedInputs(),
                                 hidden_dropout: bool = True) -> tuple[float, float]:
    """(replicated, split) stored bytes per token of one block before the tensor-parallel split: what stays whole
    over tp without sequence parallelism, and what tp divides (Korthikanti et al. 2022 §4's 10 + 24 per h).

    Replicated: two norm inputs (e·h each), the QKV and fc1 inputs (the norms' outputs: i·h each), two dropout
    masks (h each, where ``hidden_dropout``: a dropout of probability 0 keeps none). Split: Q, K and V
    (:func:`.mla_memory.qkv_widths`), the projection input (a·d_v at :meth:`.SavedInputs.projection` bytes), the
    fc1 output(s) the activation keeps (a per unit of f: (2 gated | 1)·e, or Megatron-Core's FP8 input store),
    the activation output that fc2 keeps (i·f), f the active width (k·f for top-k), and in MoE blocks the routed
    experts' fc1 input, the k dispatched copies of each token (i·k·h, :func:`.moe_recompute.routed_input_width`), and
    the query/key head norms' inputs (e·(a·d + g·d), :attr:`.TransformerModel.qk_norm_width`). Multi-latent
    attention keeps the
    norm output for two linears and its latents (replicated; :mod:`.mla_memory`). e is the training dtype's bytes;
    i and a come from ``saved`` (:class:`.SavedInputs`): e in 16-bit training, the narrow copy where a low-precision
    recipe keeps its cast (:func:`commmodel.step.precision.saved_input_bytes`). A narrow copy frees the 16-bit norm
    and activation outputs (nothing else reads them in the backward) but not the projection input, which fused
    attention keeps as its own output. A block run op by op (``saved.elementwise``) keeps more: the fp32 norm copies,
    the GQA K/V copies, the attention output's copy, the SwiGLU product's input
    (:func:`.eager.saved_extra_bytes_per_token`)."""
    e, i, a = model.dtype_bytes, saved.linear(model), saved.activation(model)
    h, f, o = float(model.hidden_size), model.active_ffn_width, model.attention_out_dim
    attention_in = (mla_memory.attention_input_bytes_per_token(model, e, i)
                    + mla_memory.latent_bytes_per_token(model, e, i))
    eager_replicated, eager_split = eager.saved_extra_bytes_per_token(model, saved.elementwise)
    replicated = 2 * e * h + attention_in + i * h + (2 * h if hidden_dropout else 0.0) + eager_replicated
    split = (e * sum(mla_memory.qkv_widths(model)) + saved.projection(model, flash_attention) * o + a * f + i * f
             + i * moe_recompute.routed_input_width(model) + e * model.qk_norm_width + eager_split)
    return replicated, split


def _scores_bytes_per_token(model: TransformerModel, flash_attention: bool, attention_dropout: bool) -> float:
    """What unfused attention keeps of its s×s scores per token: the softmax output (e·a·s) and, with attention
    dropout, the mask and dropout output too ((2e + 1)·a·s, Korthikanti's 5as/h); 0 with fused attention."""
    if flash_attention:
        return 0.0
    return (2 * model.dtype_bytes + 1 if attention_dropout else model.dtype_bytes) * model.num_heads * model.seq_len


def _activation_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray, sequence_parallel: np.ndarray,
                      recompute: np.ndarray, flash_attention: bool, saved: SavedInputs = SavedInputs(),
                      dropout: Dropout = (True, True),
                      recompute_modules: tuple[str, ...] = modules_.DEFAULT_RECOMPUTE_MODULES
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`activation_bytes_per_layer`, the same without recompute: a block's complete activations). ``dropout``
    (hidden, attention): whether each dropout is on; unfused attention keeps its softmax output (e·a·s per token)
    and, with attention dropout, the mask and dropout output too ((2e + 1)·a·s, Korthikanti's 5as/h).
    ``recompute_modules``: what selective (code 1) checkpoints (:mod:`.recompute_modules`; the scores go with
    core_attn, :func:`selective_dropped_bytes` with the others). ``saved``: see :func:`linear_layer_bytes_per_token`."""
    b = np.asarray(micro_batch, dtype=float)
    t = np.asarray(tp, dtype=float)
    sp = np.asarray(sequence_parallel, dtype=bool)
    rc = np.asarray(recompute)
    tokens = b * model.seq_len
    e, h = model.dtype_bytes, float(model.hidden_size)
    hidden_dropout, attention_dropout = dropout
    replicated, split = linear_layer_bytes_per_token(model, flash_attention, saved, hidden_dropout)
    scores = _scores_bytes_per_token(model, flash_attention, attention_dropout)
    rep = np.where(sp, replicated / t, replicated)
    none = tokens * (rep + split / t + scores / t)
    selective = tokens * (rep + split / t)
    if not modules_.is_default(recompute_modules):
        kept_scores = 0.0 if "core_attn" in recompute_modules else scores / t
        selective = (selective + tokens * kept_scores
                     - selective_dropped_bytes(model, b, t, sp, recompute_modules, saved))
    full = tokens * e * h / np.where(sp, t, 1.0)
    # op SAC and MoE-layer recompute only where some layout uses them (select never reads an unused choice)
    op = tokens * op_sac.saved_bytes_per_token(model, t, sp) if (rc == RECOMPUTE_OP).any() else 0.0
    is_moe = rc == RECOMPUTE_MOE
    dropped = moe_recompute.dropped_bytes_per_token(model, saved) if is_moe.any() else 0.0
    moe = none - tokens * dropped / t if is_moe.any() else 0.0
    policies = [is_moe, rc == RECOMPUTE_OP, rc == RECOMPUTE_FULL, rc == RECOMPUTE_SELECTIVE]
    return select(policies, [moe, op, full, selective], none), none


def selective_dropped_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray,
                            sequence_parallel: np.ndarray, recompute_modules: tuple[str, ...],
                            saved: SavedInputs = SavedInputs()) -> np.ndarray:
    """Bytes of one block and micro-batch on one GPU that the selective recompute modules beyond core_attn drop
    (:func:`commmodel.workload.recompute_modules.dropped_bytes_per_token`, b·s tokens; the replicated part /tp with
    sequence parallelism, the split part /tp). One block's worth comes back during its backward."""
    modules_.check_recompute_modules(recompute_modules, model)
    t = np.asarray(tp, dtype=float)
    replicated, split = modules_.dropped_bytes_per_token(model, recompute_modules, saved)
    rep = np.where(np.asarray(sequence_parallel, dtype=bool), replicated / t, replicated)
    return np.asarray(micro_batch, dtype=float) * model.seq_len * (rep + split / t)


def in_flight_layers(model: TransformerModel, pp: np.ndarray, vpp: np.ndarray, num_micro_batches: np.ndarray,
                     gpipe: bool, dualpipe: bool = False) -> np.ndarray:
    """Layer-micro-batches of activations the first stage holds at its peak.

    1F1B: min(p, m) micro-batches of l/p layers, × (1 + (p−1)/(p·v)) when interleaved (Korthikanti
    et al. 2022 §4.2.3); GPipe: m of them (with pp ≥ 2; at pp 1 gradient accumulation frees each micro-batch, as 1F1B); DualPipe: p + 1 of them (DeepSeek-V3, arXiv:2412.19437 Table 2:
    activation memory PP + 1 against 1F1B's PP). The interleaving term is (p−1) extra micro-batches of one
    chunk, (l/p)/v layers; with uneven chunks the busiest, ⌈l/(p·v)⌉ (:func:`chunk_layers`), is used:

        min(p, m)·⌈l/p⌉ + min(p, m)/p·(p−1)·⌈l/(p·v)⌉      (v > 1)
    """
    p = np.asarray(pp, dtype=float)
    v = np.asarray(vpp, dtype=float)
    m = np.asarray(num_micro_batches, dtype=float)
    per_stage = stage_layers(model, pp)
    if gpipe:  # without a pipeline (pp 1) there is no GPipe schedule: each micro-batch's backward frees it
        return per_stage * np.where(p > 1, m, np.minimum(p, m))
    if dualpipe:
        return per_stage * np.minimum(p + 1.0, m)
    in_flight = np.minimum(p, m)
    extra = np.where(v > 1, in_flight / p * (p - 1) * chunk_layers(model, pp, np.maximum(v, 1).astype(np.int64)), 0.0)
    return per_stage * in_flight + extra


def _stored_working_offloaded(model: TransformerModel, b: np.ndarray, t: np.ndarray, sp: np.ndarray, rc: np.ndarray,
                              flash_attention: bool, saved: SavedInputs, dropout: Dropout,
                              offload_modules: tuple[str, ...], recompute_modules: tuple[str, ...]) -> tuple:
    """(stored bytes per layer, working bytes, offloaded bytes per layer) of one block and micro-batch for
    :func:`memory_terms`. Full recompute rebuilds one block's complete activations (``whole``) during its backward;
    op SAC and the MoE layer the part they did not keep; selective the tensors its modules beyond
    core_attn dropped (:func:`selective_dropped_bytes`)."""
    per_layer, whole = _activation_bytes(model, b, t, sp, rc, flash_attention, saved, dropout, recompute_modules)
    # selective (core_attn) rebuilds one block's attention scores in its backward: the s×s tensors it did not keep
    core = b * model.seq_len * _scores_bytes_per_token(model, flash_attention, dropout[1]) / np.asarray(t, dtype=float)
    working = select([rc == RECOMPUTE_FULL, (rc == RECOMPUTE_OP) | (rc == RECOMPUTE_MOE), rc == RECOMPUTE_SELECTIVE],
                     [whole, np.maximum(whole - per_layer, 0.0), core], 0.0)
    if not modules_.is_default(recompute_modules):
        dropped = selective_dropped_bytes(model, b, t, sp, recompute_modules, saved)
        working = np.where(rc == RECOMPUTE_SELECTIVE, dropped, working)
    return per_layer, working, offload.offloaded_bytes_per_layer(model, offload_modules, b, t, sp, rc,
                                                                 flash_attention, saved)


def _held_unsharded(weights: np.ndarray, grads: np.ndarray, local_params: np.ndarray, keep: np.ndarray | bool,
                    weight_bytes: float, grad_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """(weights, gradients) where ``keep``: the gathered parameters added to the sharded ones, the unsharded
    gradients in place of the sharded ones (see :func:`memory_terms`, ``unsharded``)."""
    keep = np.asarray(keep, dtype=bool)
    return (np.where(keep, weights + local_params * weight_bytes, weights),
            np.where(keep, local_params * grad_bytes, grads))


_ACTIVATION_KEYS = ("micro_batch", "tp", "sequence_parallel", "recompute")
"""The layout columns one block's activation bytes depend on (:func:`memory_terms`' ``group`` keys)."""


def _with_unchecked_blocks(group: Callable[..., Any], activations: Callable[..., tuple], per_layer: np.ndarray,
                           args: tuple, full_share: np.ndarray | float) -> np.ndarray:
    """Stored bytes per layer where ``recompute: full`` checkpoints only ``full_share`` of the blocks (Megatron's block
    method): the others store all they make, as without recompute; unchanged where every block is checkpointed."""
    if not np.any(np.asarray(full_share) < 1.0):
        return per_layer
    rc = np.asarray(args[3])
    unchecked = group(activations, _ACTIVATION_KEYS, args[:3] + (np.zeros_like(rc),))[0]
    return np.where(rc == RECOMPUTE_FULL, full_share * per_layer + (1.0 - full_share) * unchecked, per_layer)


def memory_terms(model: TransformerModel, tp: np.ndarray, pp: np.ndarray, dp: np.ndarray, micro_batch: np.ndarray,
                 num_micro_batches: np.ndarray, zero: np.ndarray, recompute: np.ndarray,
                 sequence_parallel: np.ndarray, vpp: np.ndarray, bucket_size_bytes: np.ndarray | float,
                 flash_attention: bool, gpipe: bool, group: Callable[..., Any] | None = None,
                 ep: np.ndarray | int = 1, etp: np.ndarray | int = 1, moe_imbalance: float = 1.0,
                 dualpipe: bool = False,
                 loss_bytes_per_logit: float = LOSS_BYTES_PER_LOGIT,
                 params: np.ndarray | None = None,
                 unsharded: np.ndarray | bool = False, unsharded_weight_bytes: float = 2.0,
                 unsharded_grad_bytes: float = 4.0, grad_bytes: float = GRAD_BYTES_PER_PARAM,
                 saved: SavedInputs = SavedInputs(), dropout: Dropout = (True, True),
                 offload_modules: tuple[str, ...] = (),
                 recompute_modules: tuple[str, ...] = modules_.DEFAULT_RECOMPUTE_MODULES,
                 optimizer_bytes: float | None = None, full_share: np.ndarray | float = 1.0) -> dict:
    """Bytes per GPU by term: weights, gradients, optimizer, activations, buffers (arrays over layouts).

    ``group(fn, key_names, args)`` may evaluate ``fn(*args)`` once per distinct value of the named
    layout columns (here "tp", "pp", "dp", "micro_batch", "recompute", "sequence_parallel": the caller
    maps each name to its key, e.g. :func:`commmodel.step.grouping.grouped` on coded columns, the
    planner's fast path); by default everything is computed row by row.
    Mixtures of experts: routed-expert weights, gradients and optimizer states shard over the expert
    data-parallel group edp = tp·dp/(ep·etp) (``dp`` here is dp·cp), the rest over dp·cp (Megatron-Core
    theoretical_memory_usage @1bcb3b9; docs/moe-memory-reference.md); :func:`~.buffers.moe_buffer_bytes` adds the
    dispatch buffers. The loss buffers are ``loss_bytes_per_logit`` per logit (:data:`LOSS_BYTES_PER_LOGIT`).
    ``dualpipe``: each rank holds two pipeline stages' weights and gradients (DeepSeek-V3, arXiv:2412.19437
    Table 2: parameters 2×); their optimizer states are kept once (assumed: both copies are one parameter
    set, updated once), and activations follow :func:`in_flight_layers`. ``params``: the layouts'
    :func:`dense_params_per_gpu`, when the caller has computed it. ``bucket_size_bytes``: the gradient bucket of
    each layout (:func:`commmodel.step.buckets.effective_bucket_bytes`); where dp > 1 two are held (one filling, one
    in flight).
    ``unsharded`` (ZeRO 3 as ``torch.distributed.pipelining`` drives FSDP2,
    :func:`commmodel.step.comm.zero3_pp_unsharded`): the gathered parameters stay alive for the whole step beside
    the sharded ones (``unsharded_weight_bytes`` per parameter: the gather's wire dtype, 1 with FP8 all-gather), and
    the gradients accumulate unsharded in the reduce dtype (``unsharded_grad_bytes``, fp32: FSDP2
    ``to_accumulated_grad_if_needed``) until the last backward's reduce-scatter; the sharded gradients of the
    previous step are gone by then (torchtitan train.py @9dec370 calls ``optimizers.zero_grad()``, set_to_none,
    before the pipeline step), so they replace the gradients term.
    ``grad_bytes``: per gradient kept (fp32 4; a Megatron stack's bf16 main grads 2, ``StepOptions.main_grad_bytes``).
    ``saved``: what the linears and the MLP activation keep of their inputs (:class:`.SavedInputs`,
    :func:`linear_layer_bytes_per_token`); ``dropout``: (hidden, attention) on (:func:`_activation_bytes`).
    ``offload_modules``: Megatron-Core's activation offloading (:mod:`.offload`): the modules' saved inputs leave all
    in-flight layer-micro-batches but Megatron's one-layer margin (``offloaded_bytes_per_layer``, ``freed_layers``).
    ``recompute_modules``: what ``recompute: selective`` checkpoints (:mod:`.recompute_modules`): their tensors
    leave every stored layer-micro-batch and one block's worth comes back in its backward (as the moe code does);
    ``full_share`` the blocks ``recompute: full`` checkpoints (:func:`.stages.full_recompute_fraction`), the others
    storing what they make. ``optimizer_bytes``: per parameter (None: :func:`optimizer_bytes_per_param` of plain
    Adam)."""
    group = group or (lambda fn, key_names, args: fn(*args))
    z = np.asarray(zero)
    d = np.asarray(dp, dtype=float)
    if params is None:
        params = group(lambda *x: dense_params_per_gpu(model, *x), ("tp", "pp"), (tp, pp))
    # a dense model's routed-expert share is exactly 0 bytes: adding it changes nothing, so it is skipped
    routed = model.routed_expert_params_per_layer != 0
    experts = expert_params_per_gpu(model, pp, ep, etp) if routed else None
    d_e = expert_data_parallel_degree(tp, dp, ep, etp).astype(float) if routed else None

    def sharded(bytes_per_param: float, stage: int) -> np.ndarray:
        dense = params * bytes_per_param / np.where(z >= stage, d, 1.0)
        return dense if experts is None else dense + experts * bytes_per_param / np.where(z >= stage, d_e, 1.0)

    copies = 2.0 if dualpipe else 1.0
    weights = copies * sharded(model.dtype_bytes, 3)
    grads = copies * sharded(grad_bytes, 2)
    if np.any(unsharded):
        weights, grads = _held_unsharded(weights, grads, params if experts is None else params + experts,
                                         unsharded, unsharded_weight_bytes, unsharded_grad_bytes)
    optimizer = sharded(optimizer_bytes_per_param(model) if optimizer_bytes is None else optimizer_bytes, 1)
    def activations(b: np.ndarray, t: np.ndarray, sp: np.ndarray, rc: np.ndarray) -> tuple[np.ndarray, ...]:
        return _stored_working_offloaded(model, b, t, sp, rc, flash_attention, saved, dropout, offload_modules,
                                         recompute_modules)

    args = (micro_batch, tp, sequence_parallel, recompute)
    per_layer, working, off = group(activations, _ACTIVATION_KEYS, args)
    per_layer = _with_unchecked_blocks(group, activations, per_layer, args, full_share)
    layers = in_flight_layers(model, pp, vpp, num_micro_batches, gpipe, dualpipe)
    stored = per_layer * layers - off * offload.freed_layers(layers)
    return {"weights": weights, "gradients": grads, "optimizer": optimizer,
            "activations": stored + _past_the_loss(working, model, micro_batch, tp, pp, loss_bytes_per_logit),
            "buffers": buffer_bytes(model, micro_batch, tp, d, bucket_size_bytes, loss_bytes_per_logit, moe_imbalance)}


def _past_the_loss(working: np.ndarray, model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray,
                   pp: np.ndarray, loss_bytes_per_logit: float) -> np.ndarray:
    """The recompute working memory beyond the loss's buffers: without a pipeline the backward frees the loss's
    buffers before the last block recomputes, so the two never coexist and the peak holds the larger (the buffers are
    counted in full among the buffers); with one, the first stage, whose activations peak, has no loss."""
    loss = np.where(np.asarray(pp) == 1, loss_buffer_bytes(model, micro_batch, tp, loss_bytes_per_logit), 0.0)
    return np.maximum(working - loss, 0.0)
