"""Mixture-of-experts communication: token dispatch and combine, expert gradients, load imbalance.

Megatron-Core's all-to-all token dispatcher (NVIDIA/Megatron-LM
``megatron/core/transformer/moe/token_dispatcher.py``, ``MoEAlltoAllTokenDispatcher``): with sequence
parallelism (which Megatron-Core requires for MoE with tp > 1) each rank holds b·s/(tp·cp) tokens of
its micro-batch; the router picks top-k experts per token, ``permute`` copies every token once per
chosen expert, and one ``all_to_all`` over the ep group sends each copy to the rank holding its
expert (``input_splits`` per peer); with expert tensor parallelism (etp > 1) the received tokens are
all-gathered over the etp group before the expert MLP. Combine runs the same in reverse
(reduce-scatter over etp, all-to-all back, ``unpermute``). Dropless routing (Megatron's default:
no ``--moe-expert-capacity-factor``) keeps every copy, so one rank's dispatch buffer is

    S = (b·s/(tp·cp)) · k · h · bytes                       (:func:`dispatch_tokens_per_rank` × h × bytes)

and the all-to-all's busiest receiver gets ρ·S, ρ the rank-level load imbalance
(:func:`rank_imbalance`). Per MoE block and micro-batch: forward dispatch + combine, backward the
same two (the gradients travel back the same way), and full recompute repeats the forward two.
DeepEP-style overlap (dispatch/combine of one micro-batch behind the other's compute, Megatron
``--overlap-moe-expert-parallel-comm``) is an option, off by default: then the combines hide behind the
other micro-batch's attention side and the dispatches behind its routed experts (:func:`combined_1f1b_exposed_s`).

Expert gradients reduce over the expert data-parallel group edp = tp·cp·dp/(ep·etp) (Megatron-Core
``distributed_data_parallel.py``: expert-parallel buffers use the expert data-parallel group), the
dense ones over dp·cp as before.
"""

from __future__ import annotations

import numpy as np

from commmodel.hardware.models import System
from commmodel.step.comm import CollectiveRequest
from commmodel.step.layout import LayoutArrays
from commmodel.step.options import StepOptions
from commmodel.step.placement import Placement
from commmodel.workload.memory import expert_data_parallel_degree, expert_params_per_gpu
from commmodel.workload.model import TransformerModel
from commmodel.workload.recompute_policies import RECOMPUTE_FULL, RECOMPUTE_MOE, RECOMPUTE_SELECTIVE
from commmodel.workload.stages import stage_layers


def dispatch_tokens_per_rank(model: TransformerModel, local_micro_batch: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Token copies one rank sends in one dispatch: (b/cp)·s/tp tokens × top-k (dropless)."""
    return np.asarray(local_micro_batch, dtype=float) * model.seq_len / np.asarray(tp, dtype=float) * model.experts_per_token


NODE_AWARE_DISPATCHERS = ("deepep", "hybridep")
"""Dispatchers that send a token over the network once per remote NVLink domain and fan it out over NVLink there,
the two legs overlapped (:func:`dispatch_requests`, :func:`hierarchical_dispatch_s`): DeepEP and NVIDIA's HybridEP
(Megatron-LM @d98e8a6 ``token_dispatcher.py`` ``_HybridEPManager``: TMA and IBGDA kernels of the same design)."""

PERMUTE_PASSES: dict[str, tuple[float, float]] = {"alltoall": (3.0, 7.0), "deepep": (4.0, 4.0), "hybridep": (4.0, 4.0)}
"""Token-copy passes of one MoE block's forward, in k·h·e bytes per local token (+ h·e for the unpermute's output
where it is a separate kernel), with one local expert and with several: what each dispatcher moves in HBM besides
the all-to-all (NVIDIA/Megatron-LM @d98e8a6 ``megatron/core/transformer/moe/token_dispatcher.py``).

* ``alltoall`` (``MoEAlltoAllTokenDispatcher``): ``permute`` reads and writes each token's k copies (2k), the
  unpermute reads the k expert outputs and writes the token (k + 1); with several local experts the received copies
  are sorted by local expert and sorted back (``sort_chunks_by_idxs``, 2k each way): 3k + 1 or 7k + 1.
* ``deepep`` (``_DeepepManager``): DeepEP sends each token once per destination rank; Megatron permutes the received
  rows into expert order after the dispatch and unpermutes before the combine (``permute``/``unpermute``, about 2k
  each way): 4k.
* ``hybridep`` (``_HybridEPManager``): as DeepEP, 4k. The dispatch kernel does the global permute (one copy per
  destination rank), and a permute kernel still sorts the received rows by local expert; the copy out of
  HybridEP's buffer and the FP8 M-padding are fused into that permute, not removed ("The Flex Dispatcher of DeepEP
  or HybridEP fuses the global permute into the communication kernel ... but still requires a permute kernel to
  copy and rearrange the tokens distributed to different local experts", §2.1.1; "we choose to fuse this D2D copy
  with the subsequent permute", §2.5: NVIDIA/Megatron-LM @1d9edcf8c7
  docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md).

The backward moves the same bytes (the gradients take the mirror path). ``--moe-permute-fusion`` makes each pass one
kernel; the bytes are the same."""
SEPARATE_UNPERMUTE = frozenset({"alltoall"})
"""Dispatchers whose unpermute is a separate kernel writing each token once more (the + 1 of 3k + 1)."""


def permute_bytes(model: TransformerModel, local_micro_batch: np.ndarray, tp: np.ndarray, ep: np.ndarray | int,
                  dispatcher: str) -> np.ndarray:
    """HBM bytes of one MoE block's token permutations in one micro-batch's forward on one GPU (the backward moves the
    same), averaged over the blocks (dense blocks move none): :data:`PERMUTE_PASSES` × k·h·e per local token."""
    if not model.is_moe:
        return np.zeros(np.shape(tp), dtype=float)
    one_expert, several = PERMUTE_PASSES[dispatcher]
    local_experts = model.num_experts / np.asarray(ep, dtype=float)
    passes = np.where(local_experts > 1, several, one_expert)
    unpermute_out = float(dispatcher in SEPARATE_UNPERMUTE)  # the separate unpermute writes each token once
    tokens = np.asarray(local_micro_batch, dtype=float) * model.seq_len / np.asarray(tp, dtype=float)
    per_token = (passes * model.experts_per_token + unpermute_out) * model.hidden_size * model.dtype_bytes
    return tokens * per_token * model.num_moe_layers / model.num_layers


def _rows_text(dispatcher: str) -> str:
    """"3k + 1 or, with several local experts, 7k + 1" from :data:`PERMUTE_PASSES` (one owner for the counts)."""
    one, several = PERMUTE_PASSES[dispatcher]
    extra = " + 1" if dispatcher in SEPARATE_UNPERMUTE else ""
    if one == several:
        return f"{one:g}k{extra}"
    return f"{one:g}k{extra} or, with several local experts, {several:g}k{extra}"


_DISPATCHER_TEXT = {
    "alltoall": "Megatron-Core's all-to-all token dispatcher (--moe-token-dispatcher-type alltoall: every token copy "
                "crosses on its own; permute, sort by local expert and back, unpermute: {rows} token rows of HBM "
                "traffic each way)",
    "deepep": "DeepEP (--moe-token-dispatcher-type flex: one copy per remote NVLink domain, fanned out over NVLink, "
              "the two legs overlapped; Megatron's permute and unpermute around it: {rows} token rows each way)",
    "hybridep": "HybridEP (--moe-flex-dispatcher-backend hybridep: DeepEP's routing with the permutation fused into "
                "its kernels)",
}


def moe_assumption(options: StepOptions) -> str:
    """The assumption line of a mixture-of-experts run: its dispatcher, whether dispatch and combine overlap the
    other micro-batch's compute, and the load imbalance (:class:`~commmodel.step.options.StepOptions`)."""
    paired = ("DualPipe's chunk pairing: what exceeds its matmul time exposed" if options.schedule == "dualpipe" else
              "Megatron-Core's combined 1F1B: combines beside its attention side, dispatches beside its routed "
              "experts; warm-up and cool-down chunks exposed; the schedule's host synchronisation not priced")
    overlap = (f"dispatch and combine overlapped with the other micro-batch's compute (--overlap-moe-expert-parallel-"
               f"comm; {paired})" if options.moe_a2a_overlap else
               "dispatch and combine not overlapped (--overlap-moe-expert-parallel-comm off: --moe-a2a-overlap)")
    dispatcher = _DISPATCHER_TEXT[options.moe_dispatcher].format(rows=_rows_text(options.moe_dispatcher))
    return (f"mixture of experts: {dispatcher} (--moe-dispatcher); {overlap}; "
            f"the busiest expert gets {options.moe_imbalance:g}× the mean load (--moe-imbalance; step/options.py "
            f"DEFAULT_MOE_IMBALANCE; token_dispatcher.py @d98e8a6)")


def rank_imbalance(model: TransformerModel, ep: np.ndarray, imbalance: float) -> np.ndarray:
    """Tokens on the busiest EP rank ÷ the mean, from the expert-level factor f (max expert load ÷ mean):
    one expert carries f·μ, the other E − 1 share the rest evenly, and the rank holding the hot expert
    holds E/ep experts:

        ρ = (f + (E/ep − 1)·(E − f)/(E − 1)) / (E/ep)

    ρ = 1 at ep = 1 (one GPU holds every expert: the grouped GEMM sees the whole load) and ρ = f at
    ep = E; 1 for dense models."""
    if not model.is_moe:
        return np.ones(np.shape(ep), dtype=float)
    e = float(model.num_experts)
    local = e / np.asarray(ep, dtype=float)
    f = min(max(imbalance, 1.0), e)
    return (f + (local - 1.0) * (e - f) / (e - 1.0)) / local


def moe_layers_on_stage(model: TransformerModel, pp: np.ndarray) -> np.ndarray:
    """MoE blocks on the busiest stage: ⌈l/p⌉ × (MoE blocks / l) (dense first blocks spread evenly)."""
    return stage_layers(model, pp) * (model.num_moe_layers / model.num_layers)


def remote_domains_per_token(model: TransformerModel, domains: np.ndarray) -> np.ndarray:
    """Expected other NVLink domains a token's top-k experts land in, the E experts spread evenly over
    ``domains`` domains of the EP group and the k experts drawn without replacement:

        (G − 1)·(1 − C(E − E/G, k)/C(E, k)),   C(E − E/G, k)/C(E, k) = Π_{i<k} (E − E/G − i)/(E − i)"""
    g = np.maximum(np.asarray(domains, dtype=float), 1.0)
    e, k = float(model.num_experts), model.experts_per_token
    miss = np.ones(np.shape(g))
    for i in range(k):
        miss = miss * np.clip((e - e / g - i) / (e - i), 0.0, 1.0)
    return (g - 1.0) * (1.0 - miss)


def dispatch_requests(model: TransformerModel, system: System, local_micro_batch: np.ndarray, tp: np.ndarray,
                      cp: np.ndarray, dp: np.ndarray, ep: np.ndarray, etp: np.ndarray,
                      options: StepOptions) -> dict[str, CollectiveRequest]:
    """One dispatch's collectives: the all-to-all of ρ·S bytes over the ep group (ranks etp apart), and
    with etp > 1 the all-gather of the received tokens over the etp group (output buffer etp·ρ·S).

    DeepEP (``options.moe_dispatcher`` deepep, and HybridEP, which routes the same way; DeepSeek-V3
    arXiv:2412.19437 §3.2.2: each token goes
    over InfiniBand once per destination node, then over NVLink to the experts' GPUs) where the ep group
    spans G = ep/r NVLink domains (r of its ranks per domain): a network all-to-all over the G domains of
    ρ·tokens·h·bytes × G/(G − 1)·:func:`remote_domains_per_token` per rank (one copy per remote domain
    hit), and the all-to-all of ρ·S inside the domain's r ranks; the two legs overlap
    (:func:`hierarchical_dispatch_s`)."""
    place = Placement(system, tp=tp, cp=cp, dp=dp, ep=ep, etp=etp)
    rho = rank_imbalance(model, ep, options.moe_imbalance)
    tokens = dispatch_tokens_per_rank(model, local_micro_batch, tp) / model.experts_per_token
    size = tokens * model.experts_per_token * model.hidden_size * model.dtype_bytes * rho
    e, t = np.asarray(ep), np.asarray(etp)
    rpd = place.ranks_per_domain("ep")
    out = {"all_to_all": ("all_to_all", size, e, place.ranks_per_node("ep")),
           "etp_all_gather": ("all_gather", size * t, t, place.ranks_per_node("etp")),
           "etp_reduce_scatter": ("reduce_scatter", size * t, t, place.ranks_per_node("etp")),
           "inter_all_to_all": ("all_to_all", np.zeros(np.shape(size)), e, place.ranks_per_node("ep"))}
    if options.moe_dispatcher in NODE_AWARE_DISPATCHERS:
        domains = np.maximum(np.asarray(e) // np.maximum(rpd, 1), 1)
        spans = domains > 1
        remote = remote_domains_per_token(model, domains)
        inter = np.where(spans, tokens * model.hidden_size * model.dtype_bytes * rho * remote
                         * domains / np.maximum(domains - 1.0, 1.0), 0.0)
        out["inter_all_to_all"] = ("all_to_all", inter, domains, np.ones(np.shape(domains)))
        out["all_to_all"] = ("all_to_all", size, np.where(spans, rpd, e), np.where(spans, rpd, place.ranks_per_node("ep")))
    return out


def hierarchical_dispatch_s(intra_s: np.ndarray, inter_s: np.ndarray, dispatcher: str) -> np.ndarray:
    """One dispatch (or combine) from its two legs (:func:`dispatch_requests`): the all-to-all inside the NVLink
    domain and, where the ep group spans domains, the network all-to-all between them.

    DeepEP forwards each token over NVLink as soon as it arrives over InfiniBand, with separate warps for IB
    sending, IB-to-NVLink forwarding and NVLink receiving, so "communications via IB and NVLink are fully
    overlapped" (DeepSeek-V3, arXiv:2412.19437 §3.2.2): the slower leg sets the time, max(intra, inter). The
    plain all-to-all dispatcher has no network leg (``inter_s`` = 0) and pays its one all-to-all."""
    if dispatcher in NODE_AWARE_DISPATCHERS:
        return np.maximum(intra_s, inter_s)
    return np.asarray(intra_s) + np.asarray(inter_s)


def dispatch_count(recompute: np.ndarray, selective_redispatches: bool = False) -> np.ndarray:
    """Dispatches (and as many combines) per MoE block per micro-batch: forward 1, backward 1, full or MoE-layer
    recompute (:mod:`commmodel.workload.moe_recompute`: the checkpointed layer dispatches again) 1 more; selective
    too where ``selective_redispatches`` (its recompute modules hold "moe",
    :func:`commmodel.workload.recompute_modules.recomputes_dispatch`)."""
    rc = np.asarray(recompute)
    again = (rc == RECOMPUTE_FULL) | (rc == RECOMPUTE_MOE)
    if selective_redispatches:
        again = again | (rc == RECOMPUTE_SELECTIVE)
    return 2.0 + np.where(again, 1.0, 0.0)


def a2a_overlap_exposed_share(pp: np.ndarray, vpp: np.ndarray, num_micro_batches: np.ndarray) -> np.ndarray:
    """Share of a step's dispatch and combine that Megatron-Core's EP overlap (``--overlap-moe-expert-parallel-comm``)
    leaves exposed on the busiest (first) pipeline rank: only the steady phase pairs one micro-batch's forward
    with another's backward (``combined_1f1b``); the warmup forwards and the cooldown backwards run alone, so
    their all-to-alls are not hidden.

    NVIDIA/Megatron-LM @d98e8a6 ``megatron/core/pipeline_parallel/schedules.py::get_pp_rank_microbatches``:
    interleaved (p > 1) rank 0 warms up with W = 2(p − 1) + (v − 1)·g + 1 of its m·v chunks (g =
    ``microbatch_group_size_per_vp_stage``, default p: ``model_parallel_config.py``; "+1": the overlap
    schedules one extra forward); without a pipeline (``combined_1f1b_schedule_for_no_pipelining``) the first
    forward and the last backward stand alone, W = 1 of m. Exposed share = min(W, m·v)/(m·v). (Megatron refuses
    the overlap with p > 1 and no virtual stages; such a layout is priced with v = 1.)"""
    p = np.asarray(pp, dtype=float)
    v = np.maximum(np.asarray(vpp, dtype=float), 1.0)
    m = np.maximum(np.asarray(num_micro_batches, dtype=float), 1.0)
    warmup = np.where(p > 1, 2.0 * (p - 1.0) + (v - 1.0) * p + 1.0, 1.0)
    chunks = m * np.where(p > 1, v, 1.0)
    return np.minimum(warmup, chunks) / chunks


def combined_1f1b_exposed_s(link_s: np.ndarray, attention_side_s: np.ndarray, expert_side_s: np.ndarray) -> np.ndarray:
    """Dispatch and combine left exposed in the steady phase of Megatron-Core's EP overlap
    (``--overlap-moe-expert-parallel-comm --delay-wgrad-compute``), one micro-batch's worth:

        exposed = max(0, link/2 − attention side) + max(0, link/2 − expert side)

    NVIDIA/Megatron-LM @d98e8a6 ``megatron/core/models/common/model_chunk_schedule_plan.py``
    ``TransformerLayerSchedulePlan.run`` pairs layer i's forward of one micro-batch with a layer's backward of
    another, sub-module by sub-module: "comm_stream: combine_bwd | dispatch_fwd->dispatch_bwd | combine_fwd;
    comp_stream: pre_dispatch_fwd | mlp_bwd->mlp_bwd_dw->mlp_fwd | pre_dispatch_bwd". Each node waits on and
    records its own micro-batch's event (``pipeline_parallel/utils.py`` ``ScheduleNode.stream_acquire_context``;
    the delayed weight gradients, ``models/common/utils.py`` ``backward_dw``, record none), so a layer pair runs
    in two lock-stepped phases: the combines (backward, forward) beside the attention side's forward, input-
    and weight-gradient pieces (attention, norms, router, permute: ``pre_dispatch_computation``), and the
    dispatches beside the routed experts' three pieces (``mlp``). With c one all-to-all and x one piece
    (backward = input + weight gradient, each the forward's size), a phase lasts max(max(c, x) + c,
    max(2x, c) + x) = 3x + max(0, 2c − 3x): each phase hides two all-to-alls behind one side's compute, never
    behind the other side's. Summed over the micro-batch's MoE layers that is the formula above, link the
    micro-batch's four all-to-alls per MoE layer, each side its forward + backward compute. ``expert_side_s``
    is the routed-expert GEMMs (:attr:`~commmodel.step.compute.StageCompute.routed_expert_s`); the rest of the
    block's compute is counted on the attention side."""
    half = 0.5 * np.asarray(link_s, dtype=float)
    return np.maximum(half - np.asarray(attention_side_s), 0.0) + np.maximum(half - np.asarray(expert_side_s), 0.0)


def expert_grad_requests(model: TransformerModel, system: System, tp: np.ndarray, cp: np.ndarray, dp: np.ndarray,
                         pp: np.ndarray, ep: np.ndarray, etp: np.ndarray, zero: np.ndarray,
                         options: StepOptions) -> dict[str, CollectiveRequest]:
    """Expert gradients over the edp group: an all-reduce (ZeRO 0) or a reduce-scatter plus the
    updated weights' all-gather (ZeRO ≥ 1, Megatron's distributed optimizer), whole buffers."""
    place = Placement(system, tp=tp, cp=cp, dp=dp, ep=ep, etp=etp)
    n = expert_data_parallel_degree(tp, np.asarray(dp) * np.asarray(cp), ep, etp)
    rpn = place.ranks_per_node("edp")
    params = expert_params_per_gpu(model, pp, ep, etp)
    grad = params * options.grad_wire_bytes_per_element
    z = np.asarray(zero)
    return {"all_reduce": ("all_reduce", np.where(z == 0, grad, 0.0), n, rpn),
            "reduce_scatter": ("reduce_scatter", np.where(z >= 1, grad, 0.0), n, rpn),
            "all_gather": ("all_gather", np.where(z >= 1, params * model.dtype_bytes, 0.0), n, rpn)}


def expert_grad_count(zero: np.ndarray, num_micro_batches: np.ndarray) -> dict[str, np.ndarray]:
    """Times per step of each expert-gradient collective, as the dense ones (:mod:`commmodel.step.comm`):
    once per step for ZeRO 0-1, the reduce-scatter every micro-batch for ZeRO 2, and for ZeRO 3 also
    the all-gather twice per micro-batch (whole buffers: per-layer granularity is not priced here)."""
    z = np.asarray(zero)
    m = np.asarray(num_micro_batches, dtype=float)
    return {"all_reduce": np.ones(np.shape(z)), "reduce_scatter": np.where(z >= 2, m, 1.0),
            "all_gather": np.where(z == 3, 2.0 * m, 1.0)}


def routed_mlp_share(model: TransformerModel) -> float:
    """Fraction of the MLP GEMMs' (fc1, fc2) work done by routed experts: MoE blocks × k × f_expert ÷
    (l × :attr:`TransformerModel.active_ffn_width`); the shared experts and the dense blocks see every token
    whatever the router does. 0 when dense."""
    if not model.is_moe:
        return 0.0
    routed = model.num_moe_layers * model.experts_per_token * model.expert_ffn_hidden_size
    return routed / (model.num_layers * model.active_ffn_width)


def moe_requests(model: TransformerModel, system: System, arrays: LayoutArrays, local_micro_batch: np.ndarray,
                 options: StepOptions, dispatch_first: np.ndarray,
                 grad_first: np.ndarray) -> dict[str, CollectiveRequest]:
    """Every MoE collective to price: "ep/<name>" (:func:`dispatch_requests`) on the ``dispatch_first``
    representatives, "ep_grad/<name>" (:func:`expert_grad_requests`) on the ``grad_first`` ones."""
    a, f, g = arrays, dispatch_first, grad_first
    out = {f"ep/{k}": r for k, r in dispatch_requests(model, system, local_micro_batch[f], a.tp[f], a.cp[f], a.dp[f],
                                                       a.ep[f], a.etp[f], options).items()}
    out.update({f"ep_grad/{k}": r for k, r in expert_grad_requests(model, system, a.tp[g], a.cp[g], a.dp[g], a.pp[g],
                                                                   a.ep[g], a.etp[g], a.zero[g], options).items()})
    return out
