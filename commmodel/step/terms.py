"""The step model's terms, one function per family (compute, tp, cp, pp, ep, dp, optimizer), and the
one term table from which the breakdown keys, the communication terms and the applicability rules come.

Each family function takes the :class:`EvalContext` of one evaluation (layout arrays, their dense key
codes and the collectives already priced once per distinct key) and returns link and exposed seconds.
Per-micro-batch families (tp, cp, pp send/recv, ep) return seconds of one micro-batch on the busiest
stage; the others return seconds per step. :func:`commmodel.step.evaluate.evaluate_layouts` wires them.
"""

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from commmodel.hardware.host_copy import pinned_copy_bw
from commmodel.hardware.models import System
from commmodel.step.comm import (
    DataParallelComm,
    data_parallel_from_times,
    pipeline_p2p_s,
    tensor_parallel_from_times,
    zero3_pp_unsharded,
)
from commmodel.step.async_tp import async_tp_exposed_s, fused_exposed_s
from commmodel.step.context_parallel import context_parallel_s
from commmodel.step.stack_precision import saved_inputs
from commmodel.step.compute import (HBM_EFFICIENCY, StageCompute, stage_compute,
                                    stage_compute_knobs)
from commmodel.step.experts import (a2a_overlap_exposed_share, combined_1f1b_exposed_s, dispatch_count,
                                     expert_grad_count, hierarchical_dispatch_s, moe_layers_on_stage, rank_imbalance)
from commmodel.step.grouping import Coded, grouped, spread
from commmodel.step.host_offload import offload_transfer_s
from commmodel.step.layout import Layout, LayoutArrays
from commmodel.step.options import StepOptions
from commmodel.step.overlap import overlapped_dp_exposure
from commmodel.workload.memory import expert_data_parallel_degree, expert_params_per_gpu
from commmodel.workload.model import TransformerModel
from commmodel.workload.stages import chunk_layers, full_recompute_fraction, stage_layers
from commmodel.workload.offload import offloaded_bytes_per_layer
from commmodel.workload.recompute_modules import recomputes_dispatch

FOREACH_ADAMW_BYTES_PER_PARAM = 92.0
"""HBM bytes per sharded fp32 parameter of a PyTorch optimizer step run as foreach kernels, not one fused kernel:
``torch.optim.AdamW(..., foreach=True)``, whose ``_multi_tensor_adamw`` (torch/optim/adamw.py, non-capturable path)
makes eight passes, each operand read once and the result written: weight decay ``_foreach_mul_`` (8),
``_foreach_lerp_`` of m (12), ``_foreach_mul_`` and ``_foreach_addcmul_`` of v (8 + 12), ``_foreach_sqrt``,
``_foreach_div_`` and ``_foreach_add_`` of the denominator (3 × 8), ``_foreach_addcdiv_`` of the weight (16): 80;
plus gradient-norm clipping (:data:`CLIP_GRAD_NORM_BYTES_PER_PARAM`): 92. What torchtitan ran before fused AdamW became
its default (pytorch/torchtitan#881, 2025-02-24): @9dec370 (the Dec 2024 H100 tables) ``build_optimizers`` passes
``foreach = not fused`` with ``--optimizer.fused`` a store_true flag, off; @0413364 (the A100 table) ``foreach=True``.
llm-foundry's ``decoupled_adamw`` (composer DecoupledAdamW.adamw, op by op: the same eight passes, the weight decay
skipped at ``weight_decay: 0.0`` but ``exp_avg.mul_().add_()`` two passes, 80) with ``gradient_clipping`` norm 1.0
(scripts/train/yamls/pretrain/mpt-*.yaml) moves as much."""

CLIP_GRAD_NORM_BYTES_PER_PARAM = 12.0
"""HBM bytes per sharded fp32 gradient of gradient-norm clipping with foreach kernels: ``get_total_norm``
(``_foreach_norm``: read 4) and ``clip_grads_with_norm_`` (``_foreach_mul_`` by the clamped coefficient, applied even
when it is 1: read and write 8) (torchtitan utils.clip_grad_norm_ @9dec370 and later, ``max_norm = 1.0``)."""

FSDP2_FUSED_ADAMW_BYTES_PER_PARAM = 28.0 + CLIP_GRAD_NORM_BYTES_PER_PARAM
"""torchtitan's optimizer step since pytorch/torchtitan#881 (2025-02-24; ``optimizer.implementation = "fused"`` in
job_config.py @bcdeaa3 and @6fc499f): ``torch._fused_adamw_`` over FSDP2's sharded fp32 parameters reads the weight,
gradient, m and v and writes the weight, m and v (28; no 16-bit copy to write, FSDP2 casts at the all-gather), after
foreach clipping (12): 40."""

MCORE_GRAD_BUFFER_PASSES = 4.0
"""Element passes per local parameter of what Megatron-Core does once a step to its whole gradient buffer
(not sharded by the distributed optimizer), beside the optimizer: ``zero_grad_buffer`` writes it (1); before
each bucket's reduce-scatter ``start_grad_sync`` reads it for the NaN check (``grad_data.norm(p=2)``, 1;
``check_for_nan_in_grad`` from ``--check-for-nan-in-loss-and-grad``, on by default) and scales it by 1/dp
(``grad_data *= gradient_scaling_factor``, read + write 2; ``average_in_collective`` off by default): 16 bytes per
parameter with fp32 main grads, 8 with bf16 (``StepOptions.main_grad_bytes``).
Sources @937571c: megatron/core/distributed/param_and_grad_buffer.py, distributed_data_parallel.py,
megatron/training/arguments.py. Measured on one H100 SXM for 1.7e9 fp32 elements (benchmarks/megatron_kernels.py,
2026-11-26, two runs): zero 2.07-2.09 ms, scale 4.53-4.58 ms, norm 2.27-2.28 ms, 8.9-9.0 ms in all = 14.0-14.1 bytes
per element at 0.8 × 3.35 TB/s."""

OVERLAP_INTERFERENCE = 0.189
"""Compute slows by this fraction of the communication time it hides: NCCL kernels take SMs and HBM
bandwidth from concurrent GEMMs. Lee et al. 2025, "Characterizing Compute-Communication Overlap in
GPU-Accelerated Distributed Deep Learning" (arXiv:2507.03114): 18.9% average compute slowdown under
overlap on current NVIDIA/AMD GPUs (up to 40%); the average is used."""

Applies = Callable[[TransformerModel, Layout, StepOptions, Mapping[str, Any]], bool]
"""(model, layout, options, evaluated row) -> whether the term exists for this layout."""


def _grad_ranks(x: Layout) -> int:
    return x.dp * x.cp  # gradients reduce over dp·cp ranks (placement "grad" group)


def _dp_op(ops: tuple[str, ...]) -> Applies:
    def applies(model: TransformerModel, x: Layout, o: StepOptions, row: Mapping[str, Any]) -> bool:
        if _grad_ranks(x) < 2:
            return False
        if o.dp_mode == "parameter_server":
            return "parameter_server" in ops
        return ("zero0" if x.zero == 0 else "zero") in ops
    return applies


def _priced(name: str) -> Applies:
    return lambda model, x, o, row: row[f"{name}/link_s"] > 0


class Term(NamedTuple):
    """One breakdown term: its key, whether it is communication and where it exists."""

    name: str
    """Breakdown key "<family>/<op>" (columns "<name>/link_s" and "<name>/exposed_s")."""
    comm: bool
    """Counts as communication (the bubble is idle time, not traffic; the slowdown hidden communication
    inflicts on compute counts as communication: it goes away with the traffic)."""
    applies: Applies
    """Whether the term exists for a layout (shown in ``estimate``'s breakdown)."""


_ALWAYS: Applies = lambda model, x, o, row: True  # noqa: E731

TERMS: tuple[Term, ...] = (
    Term("compute", False, _ALWAYS),
    Term("tp/all_reduce", True, lambda model, x, o, row: x.tp > 1 and not x.sequence_parallel),
    Term("tp/reduce_scatter", True, lambda model, x, o, row: x.tp > 1 and x.sequence_parallel),
    Term("tp/all_gather", True, lambda model, x, o, row: x.tp > 1 and x.sequence_parallel),
    Term("cp/send_recv", True, lambda model, x, o, row: x.cp > 1),
    Term("pp/p2p", True, lambda model, x, o, row: x.pp > 1),
    Term("pp/bubble", False, lambda model, x, o, row: x.pp > 1),
    Term("schedule/micro_batch", False, lambda model, x, o, row: o.micro_batch_overhead_s > 0 and x.pp > 1),
    Term("dp/all_reduce", True, _dp_op(("zero0",))),
    Term("dp/reduce_scatter", True, _dp_op(("zero",))),
    Term("dp/all_gather", True, _dp_op(("zero",))),
    Term("dp/parameter_server", True, _dp_op(("parameter_server",))),
    Term("ep/all_to_all", True, lambda model, x, o, row: model.is_moe and row["ep/all_to_all/link_s"] > 0),
    Term("ep/grad_reduce", True, lambda model, x, o, row: model.is_moe and row["ep/grad_reduce/link_s"] > 0),
    Term("ep/imbalance", False, lambda model, x, o, row: model.is_moe and row["ep/imbalance/link_s"] > 0),
    Term("offload", False, _priced("offload")),
    Term("copies", False, _priced("copies")),
    Term("overlap/interference", True, _priced("overlap/interference")),
    Term("optimizer", False, _ALWAYS),
    Term("straggler", False, _priced("straggler")),
)
"""Every breakdown term in breakdown order."""

BREAKDOWN_TERMS: tuple[str, ...] = tuple(t.name for t in TERMS)
"""Every breakdown term; each has "<term>/link_s" and "<term>/exposed_s" columns."""
COMM_TERMS: tuple[str, ...] = tuple(t.name for t in TERMS if t.comm)
"""The terms that are communication."""


def applicable_terms(model: TransformerModel, layout: Layout, options: StepOptions, row: Mapping[str, Any]) -> list[str]:
    """Breakdown terms that exist for this layout (:data:`TERMS` ``applies``), in breakdown order."""
    return [t.name for t in TERMS if t.applies(model, layout, options, row)]


class EvalContext(NamedTuple):
    """One evaluation's inputs, derived columns and key codes (arrays over layouts)."""

    model: TransformerModel
    """The workload."""
    system: System
    """The node type with the cluster formed (GPUs per node as used)."""
    options: StepOptions
    """Step options."""
    arrays: LayoutArrays
    """The layouts."""
    m: np.ndarray
    """Micro-batches per step (float, ≥ 1)."""
    v: np.ndarray
    """Model chunks per GPU (1 under GPipe)."""
    mb_local: np.ndarray
    """Sequences' worth of tokens per GPU per micro-batch: b/cp."""
    dp_grad: np.ndarray
    """Ranks of the gradient group: dp·cp."""
    codes: dict[str, Coded]
    """Dense codes of the key columns (layout fields, "mb_local", "dp_grad")."""
    tp_first: np.ndarray
    """One representative per distinct (b/cp, tp, pp, recompute, SP, cp, ep, etp): compute, TP and CP terms."""
    tp_inv: np.ndarray
    """Inverse index of ``tp_first``."""
    times: dict[str, np.ndarray]
    """Priced collectives: "tp/<name>" on ``tp_first`` rows, "dp/<name>" on the DP representatives
    already spread to every layout."""
    params: np.ndarray
    """Dense (non-expert) parameters on the busiest GPU of every layout
    (:func:`commmodel.workload.memory.dense_params_per_gpu`), computed once per evaluation."""

    def key(self, name: str) -> Coded:
        """The coded key column ``name``."""
        return self.codes[name]


def compute_first(ctx: EvalContext) -> StageCompute:
    """Compute of one micro-batch on the busiest stage, on the ``tp_first`` representatives (keyed on vpp too where
    ``recompute_layers`` makes the full recompute's share depend on the chunk)."""
    a, f, o = ctx.arrays, ctx.tp_first, ctx.options
    return stage_compute(ctx.model, ctx.system, ctx.mb_local[f], a.tp[f], a.pp[f], a.recompute[f],
                         a.sequence_parallel[f], o.flash_attention, o.flash_attention_rate, a.ep[f], a.etp[f],
                         cp=a.cp[f], **stage_compute_knobs(o),
                         full_share=full_recompute_fraction(ctx.model, a.pp[f], a.vpp[f], o.recompute_layers))


def tp_term(ctx: EvalContext, comp: StageCompute) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """({op: link per micro-batch}, link, exposed) of the tensor-parallel collectives of one micro-batch.

    With ``tp_comm_overlap`` (Transformer Engine userbuffers ring-exchange, PyTorch AsyncTP) each all-gather /
    reduce-scatter is split into tp chunks that travel while the GEMM works on the chunks already there
    (Wang et al. 2023, "Overlap Communication with Dependent Computation via Decomposition", ASPLOS; the
    AsyncTP design note, discuss.pytorch.org/t/209487): the first chunk must arrive before any GEMM starts,
    so 1/tp of the traffic stays exposed and the rest hides behind the matmuls it overlaps with:
    exposed = link/tp + max(0, link·(tp − 1)/tp − matmul). The GEMMs slow while they share SMs and HBM with
    the communication kernels: the ``overlap/interference`` term (OVERLAP_INTERFERENCE × hidden time). PyTorch
    AsyncTP (``tp_overlap_kind`` async-tp) prices that formula per fused collective against its own GEMMs, its
    unfused backward reduce-scatters exposed (:mod:`commmodel.step.async_tp`).

    The backward's re-gather of the column-parallel inputs (``tp_input_regather``) is launched before the
    input-gradient GEMM and waited after it, with or without ``tp_comm_overlap`` ([MLM-REGATHER] in
    :mod:`commmodel.step.stacks`): only what exceeds the input-gradient GEMMs (a third of the matmul time) shows."""
    f = ctx.tp_first
    times = {k[3:]: t for k, t in ctx.times.items() if k.startswith("tp/")}
    tpc = spread(tensor_parallel_from_times(ctx.model, times, ctx.arrays.pp[f], ctx.arrays.recompute[f],
                                            ctx.options.tp_input_regather), ctx.tp_inv)
    ops = {"all_reduce": tpc.all_reduce_s, "reduce_scatter": tpc.reduce_scatter_s, "all_gather": tpc.all_gather_s}
    link = tpc.all_reduce_s + tpc.reduce_scatter_s + tpc.all_gather_s
    regather_exposed = np.maximum(tpc.regather_s - comp.matmul_s / 3.0, 0.0)
    rest = link - tpc.regather_s
    if not ctx.options.tp_comm_overlap:
        return ops, link, rest + regather_exposed
    if ctx.options.tp_overlap_kind == "async-tp":  # the pass leaves all-reduces (no SP) alone: exposed
        a = ctx.arrays
        fused = async_tp_exposed_s(ctx.model, ctx.system, ctx.mb_local[f], a.tp[f], a.pp[f], a.recompute[f],
                                   ctx.times["tp/all_gather"], ctx.times["tp/reduce_scatter"], a.ep[f], a.etp[f],
                                   grad_all_gather_s=ctx.times["tp/grad_all_gather"])
        return ops, link, spread(fused, ctx.tp_inv) + tpc.all_reduce_s + regather_exposed
    # userbuffers: the step's TP traffic as one decomposed collective behind all of the step's matmuls
    return ops, link, fused_exposed_s(rest, comp.matmul_s, ctx.arrays.tp) + regather_exposed


def cp_term(ctx: EvalContext, comp_first: StageCompute) -> tuple[np.ndarray, np.ndarray]:
    """(link, exposed) of one micro-batch's context-parallel K/V exchange (:func:`context_parallel_s`; the ring or
    PyTorch's all-gather, ``StepOptions.cp_comm``; all exposed without ``cp_comm_overlap``)."""
    a, f = ctx.arrays, ctx.tp_first
    return spread(context_parallel_s(ctx.model, ctx.system, ctx.mb_local[f], a.tp[f], a.cp[f], a.pp[f],
                                     a.recompute[f], comp_first.attention_core_s, ctx.options.cp_comm,
                                     ctx.options.cp_comm_overlap), ctx.tp_inv)


def pp_p2p_term(ctx: EvalContext) -> tuple[np.ndarray, np.ndarray]:
    """(link, exposed) of one micro-batch's pipeline send/recv, v chunks each sending once; keyed on
    (b/cp, tp, pp, dp·cp). Without ``pp_p2p_overlap`` every hop sits between stages (exposed = link). With it, under
    the interleaved schedule (v ≥ 2), a chunk's send/recv is posted before the next chunk's compute and waited after
    it: only the fill's and the drain's p − 1 hops each way stay on the critical path, (p − 1)/(m·v) of the step's
    hops (NVIDIA/Megatron-LM @d98e8a6 megatron/training/arguments.py L1000-1016 and L3118:
    ``--no-overlap-p2p-communication`` store_false, "overlap pipeline parallel communication with forward and
    backward chunks in 1F1B", turned off without the interleaved schedule; core/pipeline_parallel/schedules.py
    ``forward_backward_pipelining_with_interleaving``)."""
    model, system, a = ctx.model, ctx.system, ctx.arrays
    one = grouped(lambda mb_, tp_, pp_, dp_: pipeline_p2p_s(model, system, mb_, tp_, pp_, dp_, np.ones_like(tp_)),
                  (ctx.key("mb_local"), ctx.key("tp"), ctx.key("pp"), ctx.key("dp_grad")),
                  (ctx.mb_local, a.tp, a.pp, ctx.dp_grad))
    link = ctx.v * one
    if not ctx.options.pp_p2p_overlap:
        return link, link
    hops = np.maximum(ctx.m * ctx.v, 1.0)
    share = np.where(ctx.v > 1, np.minimum((np.asarray(a.pp, dtype=float) - 1.0) / hops, 1.0), 1.0)
    return link, share * link


def ep_term(ctx: EvalContext, comp: StageCompute) -> tuple[np.ndarray, np.ndarray]:
    """(link, exposed) of one micro-batch's MoE dispatch and combine on the busiest stage
    (:mod:`commmodel.step.experts`): per MoE block and pass, two all-to-alls over the ep group and,
    with etp > 1, the etp all-gather and reduce-scatter; with ``moe_a2a_overlap`` the warmup and cooldown
    chunks' share (:func:`~commmodel.step.experts.a2a_overlap_exposed_share`) stays exposed and, in the steady
    phase, what its sub-module pairing cannot hide (:func:`~commmodel.step.experts.combined_1f1b_exposed_s`;
    DualPipe: what exceeds the micro-batch's matmul time). 0 for dense models."""
    if not ctx.model.is_moe:
        zero = np.zeros(len(ctx.arrays))
        return zero, zero
    a, t = ctx.arrays, ctx.times
    count = moe_layers_on_stage(ctx.model, a.pp) * dispatch_count(
        a.recompute, recomputes_dispatch(ctx.options.recompute_modules))
    one = hierarchical_dispatch_s(t["ep/all_to_all"], t["ep/inter_all_to_all"], ctx.options.moe_dispatcher)
    link = count * (2.0 * one + t["ep/etp_all_gather"] + t["ep/etp_reduce_scatter"])
    if not ctx.options.moe_a2a_overlap:
        return link, link
    if ctx.options.schedule == "dualpipe":  # DualPipe pairs chunks by its own schedule (not Megatron's warmup)
        return link, np.maximum(link - comp.matmul_s, 0.0)
    steady = combined_1f1b_exposed_s(link, comp.total_s - comp.routed_expert_s, comp.routed_expert_s)
    alone = a2a_overlap_exposed_share(a.pp, ctx.v, ctx.m)
    return link, alone * link + (1.0 - alone) * steady


def offload_term(ctx: EvalContext, comp: StageCompute) -> tuple[np.ndarray, np.ndarray]:
    """(link, exposed) of one micro-batch's activation-offload copies on the busiest stage
    (:func:`commmodel.step.host_offload.offload_transfer_s`): the bytes of
    :func:`commmodel.workload.offload.offloaded_bytes_per_layer` × the stage's ⌈l/p⌉ blocks at the pinned copy rate.
    0 without ``offload_modules``, and 0 (not priced) where the system has no ``host_link_bw_bytes_per_s``."""
    o, a, bw = ctx.options, ctx.arrays, pinned_copy_bw(ctx.system)
    if not o.offload_modules or bw is None:
        zero = np.zeros(len(a))
        return zero, zero
    per_layer = offloaded_bytes_per_layer(ctx.model, o.offload_modules, ctx.mb_local, a.tp, a.sequence_parallel,
                                          a.recompute, o.flash_attention,
                                          saved_inputs(ctx.model, ctx.system, o.elementwise, o.activation_fp8_input_store))
    return offload_transfer_s(per_layer * stage_layers(ctx.model, a.pp), bw.value, comp.forward_s,
                              comp.backward_s + comp.recompute_s)


def ep_imbalance_term(ctx: EvalContext, comp: StageCompute) -> np.ndarray:
    """Wait for the busiest EP rank per micro-batch: (ρ − 1) × the routed experts' GEMM time on the stage
    (forward, backward and what recompute redoes; :func:`~commmodel.step.experts.rank_imbalance`,
    :attr:`StageCompute.routed_expert_s`). The balanced expert GEMMs are already in compute; 0 for dense models."""
    if not ctx.model.is_moe:
        return np.zeros(len(ctx.arrays))
    rho = rank_imbalance(ctx.model, ctx.arrays.ep, ctx.options.moe_imbalance)
    return (rho - 1.0) * comp.routed_expert_s


def ep_grad_term(ctx: EvalContext) -> np.ndarray:
    """Link seconds per step of the expert gradients' reduction (and, ZeRO ≥ 1, the updated expert
    weights' all-gather) over the expert data-parallel group; 0 for dense models."""
    if not ctx.model.is_moe:
        return np.zeros(len(ctx.arrays))
    counts = expert_grad_count(ctx.arrays.zero, ctx.m)
    return sum(counts[op] * ctx.times[f"ep_grad/{op}"] for op in counts)


DUALPIPE_BUBBLE_PER_HALF_STAGE = 2.0 / 3.0
"""DualPipe's bubble over (p/2 − 1) micro-batch times of one stage. DeepSeek-V3 (arXiv:2412.19437 §3.2.1,
Table 2): bubble = (PP/2 − 1)(F&B + B − 3W), with F a forward chunk, B a full backward, W its weight-gradient
part and F&B an overlapped forward + backward pair. Overlap hides the pair's communication, not its compute,
so F&B = F + B; the backward is 2F split evenly between input and weight gradients (W = F; Qi et al. 2024,
"Zero Bubble Pipeline Parallelism", §2). With t = F + B = 3F per micro-batch: (F + B + B − 3W) = 2F = 2t/3."""


def bubble_term(ctx: EvalContext, t_mb: np.ndarray) -> np.ndarray:
    """Pipeline bubble: (p − 1) passes of the busiest chunk, ⌈l/(p·v)⌉ of the stage's ⌈l/p⌉ layers;
    DualPipe: (p/2 − 1) × 2/3 of a micro-batch (:data:`DUALPIPE_BUBBLE_PER_HALF_STAGE`)."""
    a = ctx.arrays
    if ctx.options.schedule == "dualpipe":
        return np.maximum(a.pp.astype(float) / 2.0 - 1.0, 0.0) * DUALPIPE_BUBBLE_PER_HALF_STAGE * t_mb
    gpipe = ctx.options.schedule == "gpipe"
    chunk_share = chunk_layers(ctx.model, a.pp, np.where(gpipe, 1, a.vpp)) / stage_layers(ctx.model, a.pp)
    return (a.pp.astype(float) - 1) * chunk_share * t_mb


class DataParallelTerms(NamedTuple):
    """Data-parallel traffic of one step: the counted collectives and what of them stays exposed."""

    comm: DataParallelComm
    """Link seconds of every DP collective, per step."""
    reduce_link: np.ndarray
    """Gradient reduction (all-reduce, reduce-scatter or parameter server) on the links."""
    reduce_exposed: np.ndarray
    """Of it, not hidden behind compute."""
    gather_link: np.ndarray
    """Parameter all-gathers on the links."""
    gather_exposed: np.ndarray
    """Of them, not hidden."""


def dp_term(ctx: EvalContext, comp: StageCompute, pipeline_s: np.ndarray) -> DataParallelTerms:
    """Gradient reduction and parameter gathers over the dp·cp group, and their exposure: hidden behind
    the backward (overlap), behind the whole pipeline (asynchronous), or not at all."""
    a, o = ctx.arrays, ctx.options
    dp_times = {k[3:]: t for k, t in ctx.times.items() if k.startswith("dp/")}
    if o.dp_mode == "parameter_server":
        dp_times = dict.fromkeys(("all_reduce", "layer_all_gather", "layer_reduce_scatter"), np.zeros(len(a)))
    dpc = data_parallel_from_times(ctx.model, ctx.system, dp_times, a.tp, a.pp, ctx.dp_grad, a.zero, ctx.m, o,
                                   ctx.params, cp=a.cp)
    reduce_link = dpc.all_reduce_s + dpc.reduce_scatter_s + dpc.parameter_server_s
    gather_link = dpc.all_gather_s
    if not o.synchronous:
        reduce_exposed = np.maximum(reduce_link + gather_link - pipeline_s, 0.0)
        gather_exposed = np.zeros_like(gather_link)
    elif o.overlap:
        embedding_share = ctx.model.embedding_params / np.asarray(a.tp, dtype=float) / np.maximum(ctx.params, 1.0)
        reduce_exposed, gather_exposed = overlapped_dp_exposure(ctx.model, comp, dpc, a.zero, a.pp, ctx.m,
                                                                reduce_link, gather_link, a.vpp, embedding_share,
                                                                zero3_pp_unsharded(a.zero, a.pp, o))
    else:
        reduce_exposed, gather_exposed = reduce_link, gather_link
    return DataParallelTerms(dpc, reduce_link, reduce_exposed, gather_link, gather_exposed)


def optimizer_term(ctx: EvalContext) -> np.ndarray:
    """The optimizer step over the GPU's parameters at HBM speed (``optimizer_bytes_per_param``: one fused Adam
    unless the stack runs another): from ZeRO 1 the dense ones sharded over dp·cp, the routed experts over the
    expert data-parallel group; plus the stack's once-a-step passes over the whole local gradient buffer
    (``grad_buffer_passes`` × ``main_grad_bytes`` × every local parameter)."""
    model, a = ctx.model, ctx.arrays
    sharded = ctx.params / np.where(a.zero >= 1, ctx.dp_grad, 1)
    local = ctx.params
    if model.is_moe:
        d_e = expert_data_parallel_degree(a.tp, ctx.dp_grad, a.ep, a.etp)
        experts = expert_params_per_gpu(model, a.pp, a.ep, a.etp)
        sharded = sharded + experts / np.where(a.zero >= 1, d_e, 1)
        local = local + experts
    hbm = ctx.system.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY
    o = ctx.options
    return (sharded * o.optimizer_bytes_per_param + local * o.grad_buffer_passes * o.main_grad_bytes) / hbm
