"""The training-step model: one vectorised evaluation of many layouts (DESIGN §5, §6).

For each layout (arrays of length n) the step time is

    step = m·t_mb + bubble + exposed DP + optimizer (+ straggler wait)
    t_mb = compute(fwd + bwd + recompute) + exposed TP + exposed CP ring + PP send/recv + expert all-to-all
           + the stack's per-micro-batch pipeline-engine overhead (pp > 1)
    bubble = (p − 1)·⌈l/(p·v)⌉/⌈l/p⌉ · t_mb  (1F1B, interleaved with v chunks; Narayanan et al. 2021
             §2.2: (p − 1)/v · t_mb when p·v divides l; with uneven chunks the busiest chunk paces the
             warm-up and cool-down)
           = (p − 1) · t_mb  (GPipe)

With context parallelism (cp > 1) every GPU holds b·s/cp tokens of each micro-batch: every
token-linear term (GEMMs, elementwise traffic, activations, TP and PP messages) and the attention
core (s/cp queries against all s keys, balanced by the 2·cp chunking) equal those of a micro-batch of
b/cp sequences, so they are evaluated at b/cp; the K/V ring is priced by
:func:`commmodel.step.context_parallel.context_parallel_s`; gradients are reduced over dp·cp ranks.

on the slowest (last) stage, m = global_batch / (micro_batch · dp) micro-batches. DP traffic hides
behind the last micro-batch's backward except its last bucket (ZeRO-2/3: behind every micro-batch).
The single-layout :func:`commmodel.step.estimate.estimate` calls this with arrays of length 1.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from commmodel.hardware.models import System

from commmodel.hardware.cluster import Cluster
from commmodel.step.stack_precision import saved_inputs, stack_recipe
from commmodel.step.buckets import effective_bucket_bytes
from commmodel.step.comm import (data_parallel_requests, price_collectives, zero3_pp_unsharded,
                                  tensor_parallel_requests)
from commmodel.step.compute import HBM_EFFICIENCY
from commmodel.step.experts import moe_requests
from commmodel.step.stack_copies import ddp_copy_bytes, fsdp_copy_bytes
from commmodel.step.tp_wire import tp_wire_bytes
from commmodel.step.grouping import Coded, coded, grouped, spread, unique_inverse
from commmodel.step.layout import LayoutArrays
from commmodel.step.options import ADAM_BYTES_PER_PARAM, StepOptions
from commmodel.workload.recompute_modules import DEFAULT_RECOMPUTE_MODULES
from commmodel.step.precision import linear_peak_key, mfu_peak, param_wire_bytes
from commmodel.step.terms import (
    BREAKDOWN_TERMS,
    COMM_TERMS,
    OVERLAP_INTERFERENCE,
    EvalContext,
    bubble_term,
    compute_first,
    cp_term,
    dp_term,
    ep_grad_term,
    ep_imbalance_term,
    offload_term,
    ep_term,
    optimizer_term,
    pp_p2p_term,
    tp_term,
)
from commmodel.workload.flops import hardware_flops_per_step, model_flops_per_step
from commmodel.workload.buffers import loss_buffer_bytes
from commmodel.workload.memory import (GRAD_BYTES_PER_PARAM, dense_params_per_gpu, memory_terms,
                                       optimizer_bytes_per_param)
from commmodel.workload.model import TransformerModel
from commmodel.workload.recompute_policies import RECOMPUTE_FULL, RECOMPUTE_NAMES
from commmodel.workload.stages import full_recompute_fraction

__all__ = [
    "ADAM_BYTES_PER_PARAM", "BOUND_NAMES", "BREAKDOWN_TERMS", "COMM_TERMS", "MEMORY_TERMS", "OVERLAP_INTERFERENCE",
    "StepColumns", "evaluate_layouts", "expected_max_standard_normal", "memory_columns",
]

MEMORY_TERMS: tuple[str, ...] = ("weights", "gradients", "optimizer", "activations", "buffers")
"""Memory columns "memory/<term>_bytes"."""

BOUND_NAMES: tuple[str, ...] = ("compute", "communication", "bubble", "memory")
"""Meaning of the integer "bound" column."""

EXPOSED_COMM_FLAG = 0.30
"""Exposed communication above this fraction of the step is flagged as a bottleneck (DESIGN §5): ``estimate``'s
warning and ``query``'s ``comm_bottleneck`` read this one value."""


class StepColumns(dict):
    """Column name -> numpy array (one entry per layout): the step model's whole answer."""

    @property
    def num_layouts(self) -> int:
        """Rows in every column."""
        return int(np.shape(self["step_time_s"])[0])

    def take(self, index: np.ndarray) -> "StepColumns":
        """The rows selected by a boolean mask or an index array."""
        return StepColumns({k: v[index] for k, v in self.items()})

    def row(self, i: int) -> dict[str, float]:
        """Row ``i`` as plain Python scalars."""
        return {k: v[i].item() for k, v in self.items()}


def expected_max_standard_normal(n: int) -> float:
    """E[max of n i.i.d. standard normals], Blom's (1958) approximation Φ⁻¹((n − 0.375)/(n + 0.25)); 0 for n = 1."""
    if n <= 1:
        return 0.0
    from statistics import NormalDist  # only a straggler spread needs it (issue 17: start-up imports)

    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def step_requests(model: TransformerModel, system: System, arrays: LayoutArrays, options: StepOptions,
                  tp_first: np.ndarray, dp_first: np.ndarray, ep_first: np.ndarray | None = None,
                  eg_first: np.ndarray | None = None, params: np.ndarray | None = None) -> dict[str, Any]:
    """Every collective one step issues, as ``"<family>/<name>": (op, size_bytes, num_ranks, ranks_per_node)``
    on the representative layouts given (the ``*_first`` indices; all ``[0]`` for one layout): TP per block,
    DP per step (whole buffers, buckets, ZeRO-3 layers), and for MoE the dispatch/combine and expert gradients.
    ``params``: the layouts' dense parameters per GPU (:func:`dense_params_per_gpu`), when already computed."""
    a = arrays
    mb_local = a.micro_batch / a.cp.astype(float)
    wire = tp_wire_bytes(stack_recipe(model, options.elementwise), model.dtype_bytes)
    requests = {f"tp/{k}": r for k, r in tensor_parallel_requests(
        model, system, mb_local[tp_first], a.tp[tp_first], a.sequence_parallel[tp_first], wire).items()}
    if options.dp_mode != "parameter_server":
        requests.update({f"dp/{k}": r for k, r in data_parallel_requests(
            model, system, a.tp[dp_first], a.pp[dp_first], (a.dp * a.cp)[dp_first], a.zero[dp_first], options,
            None if params is None else params[dp_first], cp=a.cp[dp_first]).items()})
    if model.is_moe and ep_first is not None and eg_first is not None:
        requests.update(moe_requests(model, system, a, mb_local, options, ep_first, eg_first))
    return requests


def _context(model: TransformerModel, system: System, arrays: LayoutArrays, options: StepOptions) -> EvalContext:
    """Derived columns, key codes, and every collective of the step priced in one call per op on one
    representative per distinct key: TP and compute depend on (b/cp, tp, pp, recompute, SP, cp), DP
    traffic on (tp, pp, dp·cp, ZeRO), and cp too where the bucket grows with dp (:func:`effective_bucket_bytes`)."""
    a = arrays
    v = np.where(options.schedule in ("gpipe", "dualpipe"), 1.0, a.vpp.astype(float))
    # Context parallelism: each GPU holds b/cp sequences' worth of tokens; gradients reduce over dp·cp.
    mb_local = a.micro_batch / a.cp.astype(float)
    dp_grad = a.dp * a.cp
    names = ("tp", "pp", "micro_batch", "zero", "recompute", "sequence_parallel", "cp")
    c = {name: coded(getattr(a, name)) for name in names + (("dp", "ep", "etp") if model.is_moe else ())}
    c["dp_grad"] = coded(dp_grad)
    mb_first, mb_codes = unique_inverse(c["micro_batch"], c["cp"])
    c["mb_local"] = Coded(mb_codes, int(mb_first.size))
    experts = (c["ep"], c["etp"]) if model.is_moe else ()  # a dense model's compute never reads ep or etp
    partial = (coded(a.vpp),) if options.recompute_layers is not None else ()  # full recompute's share: per chunk
    tp_first, tp_inv = unique_inverse(c["mb_local"], c["tp"], c["pp"], c["recompute"], c["sequence_parallel"], c["cp"],
                                      *experts, *partial)
    grows = (c["cp"],) if options.bucket_params_per_dp_rank > 0 else ()  # the bucket grows with dp = dp·cp / cp
    dp_first, dp_inv = unique_inverse(c["tp"], c["pp"], c["dp_grad"], c["zero"], *grows)
    ep_first = ep_inv = eg_first = eg_inv = None
    if model.is_moe:  # dispatch keyed on (b/cp, tp, cp, dp, ep, etp); expert gradients on the layout's groups
        ep_first, ep_inv = unique_inverse(c["mb_local"], c["tp"], c["cp"], c["dp"], c["ep"], c["etp"])
        eg_first, eg_inv = unique_inverse(c["tp"], c["cp"], c["dp"], c["pp"], c["ep"], c["etp"], c["zero"])
    params = dense_params_per_gpu(model, a.tp, a.pp)  # once: DP buffers, buckets, optimizer and memory read it
    requests = step_requests(model, system, a, options, tp_first, dp_first, ep_first, eg_first, params)
    times = price_collectives(system, requests, options.library)
    times.update({k: t.take(dp_inv) for k, t in times.items() if k.startswith("dp/")})
    if model.is_moe:
        times.update({k: t.take(ep_inv) for k, t in times.items() if k.startswith("ep/")})
        times.update({k: t.take(eg_inv) for k, t in times.items() if k.startswith("ep_grad/")})
    return EvalContext(model=model, system=system, options=options, arrays=a,
                       m=np.maximum(a.num_micro_batches, 1).astype(float), v=v, mb_local=mb_local, dp_grad=dp_grad,
                       codes=c, tp_first=tp_first, tp_inv=tp_inv, times=times, params=params)


def evaluate_layouts(model: TransformerModel, system: System, num_gpus: int, arrays: LayoutArrays,
                     options: StepOptions | None = None, *, memory: dict[str, np.ndarray] | None = None) -> StepColumns:
    """Step time, throughput, MFU/HFU, memory and the link/exposed breakdown of every layout.

    ``system`` is the node type; the cluster holding ``num_gpus`` of them is formed here. Layouts must
    already pass :func:`commmodel.step.layout_rules.layout_divisibility_masks` (the planner filters first);
    others still get numbers but they mean nothing. Each family's term comes from
    :mod:`commmodel.step.terms`. ``memory``: the :func:`memory_columns` of these arrays and options, when the
    caller already has them (the planner's memory-first pass); they are used as given, not recomputed.
    """
    options = options or StepOptions()
    ctx = _context(model, Cluster.node_for_gpus(system, num_gpus), arrays, options)
    m = ctx.m
    comp_first = compute_first(ctx)
    comp = spread(comp_first, ctx.tp_inv)
    cp_link_mb, cp_exposed_mb = cp_term(ctx, comp_first)
    tp_ops, tp_link_mb, tp_exposed_mb = tp_term(ctx, comp)
    p2p_link_mb, p2p_mb = pp_p2p_term(ctx)
    ep_link_mb, ep_mb = ep_term(ctx, comp)
    imbalance_mb = ep_imbalance_term(ctx, comp)
    offload_link_mb, offload_mb = offload_term(ctx, comp)
    # the pipeline engine's fixed cost per micro-batch and stage (only where there is a pipeline)
    sched_mb = options.micro_batch_overhead_s * (arrays.pp > 1)
    t_mb = comp.total_s + tp_exposed_mb + cp_exposed_mb + p2p_mb + ep_mb + imbalance_mb + offload_mb + sched_mb
    bubble_s = bubble_term(ctx, t_mb)
    pipeline_s = m * t_mb + bubble_s
    dp = dp_term(ctx, comp, pipeline_s)
    # Communication that hides behind compute still slows it (shared SMs and HBM bandwidth).
    red_share = np.divide(dp.reduce_exposed, dp.reduce_link, out=np.zeros_like(dp.reduce_link),
                          where=dp.reduce_link > 0)
    ep_grad_s = ep_grad_term(ctx)  # hides as much as the dense gradients do (none when dp·cp = 1)
    ep_grad_exposed = ep_grad_s * np.where(dp.reduce_link > 0, red_share, 1.0)
    hidden_s = ((dp.reduce_link - dp.reduce_exposed) + (dp.gather_link - dp.gather_exposed)
                + m * (tp_link_mb - tp_exposed_mb) + m * (cp_link_mb - cp_exposed_mb)
                + m * (ep_link_mb - ep_mb) + (ep_grad_s - ep_grad_exposed))
    interference_s = OVERLAP_INTERFERENCE * np.maximum(hidden_s, 0.0)
    optimizer_s = optimizer_term(ctx)
    copies_s = _copies_s(ctx)
    base_s = (pipeline_s + dp.reduce_exposed + dp.gather_exposed + ep_grad_exposed + interference_s + optimizer_s
              + copies_s)
    # no spread, no wait (0 × E[max] = 0): the normal quantile, and the statistics import, only when there is one
    straggle = (options.straggler_cv * expected_max_standard_normal(num_gpus)
                if options.synchronous and options.straggler_cv > 0 else 0.0)
    straggler_s = base_s * straggle
    step_s = base_s + straggler_s

    cols = StepColumns()
    cols["step_time_s"] = step_s
    cols["num_micro_batches"] = m
    _throughput(cols, model, ctx.system, num_gpus, arrays, step_s, ctx.options)
    if memory is None:
        _memory(cols, ctx)
    else:
        cols.update(memory)
    tp_share = np.divide(tp_exposed_mb, tp_link_mb, out=np.zeros_like(tp_link_mb), where=tp_link_mb > 0)
    dpc = dp.comm
    total_s = comp.total_s
    del ctx, comp, comp_first  # their per-layout intermediates are freed before the output columns are built
    terms = {
        "compute": (m * total_s, m * total_s),
        **{f"tp/{op}": (m * link, m * link * tp_share) for op, link in tp_ops.items()},
        "cp/send_recv": (m * cp_link_mb, m * cp_exposed_mb),
        "pp/p2p": (m * p2p_link_mb, m * p2p_mb),
        "pp/bubble": (bubble_s, bubble_s),
        "schedule/micro_batch": (m * sched_mb, m * sched_mb),
        "dp/all_reduce": (dpc.all_reduce_s, dpc.all_reduce_s * red_share),
        "dp/reduce_scatter": (dpc.reduce_scatter_s, dpc.reduce_scatter_s * red_share),
        "dp/all_gather": (dp.gather_link, dp.gather_exposed),
        "dp/parameter_server": (dpc.parameter_server_s, dpc.parameter_server_s * red_share),
        "ep/all_to_all": (m * ep_link_mb, m * ep_mb),
        "ep/grad_reduce": (ep_grad_s, ep_grad_exposed),
        "ep/imbalance": (m * imbalance_mb, m * imbalance_mb),
        "offload": (m * offload_link_mb, m * offload_mb),
        "copies": (copies_s, copies_s),
        "overlap/interference": (interference_s, interference_s),
        "optimizer": (optimizer_s, optimizer_s),
        "straggler": (straggler_s, straggler_s),
    }
    _breakdown(cols, terms, step_s, bubble_s, m * total_s)
    return cols


def _copies_s(ctx: EvalContext) -> np.ndarray:
    """The stack's copies per step (:mod:`commmodel.step.stack_copies`: FSDP2's around its collectives, DDP's
    buckets, autocast's casts) at the HBM rate the memory-bound kernels run at."""
    o, a, model = ctx.options, ctx.arrays, ctx.model
    wire = param_wire_bytes(model.dtype_bytes, model.dtype, o.fp8_param_allgather)
    copy_bytes = fsdp_copy_bytes(model, ctx.params, a.zero, a.pp, a.tp, ctx.dp_grad, ctx.m, wire, o,
                                 zero3_pp_unsharded(a.zero, a.pp, o))
    copy_bytes = copy_bytes + ddp_copy_bytes(model, ctx.params, a.pp, a.tp, ctx.m, wire, o)
    return copy_bytes / (ctx.system.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY)


@lru_cache(maxsize=16)
def _flops_per_sequence(model: TransformerModel, recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES,
                        attention_flops: str = "square") -> tuple[float, tuple[float, ...]]:
    """(model FLOPs, hardware FLOPs by recompute code) of one sequence's step: FLOPs are linear in the
    batch, so each evaluation scales these (cached per model, selective recompute modules and counting rule)."""
    codes = np.arange(len(RECOMPUTE_NAMES))
    hardware = hardware_flops_per_step(model, np.ones(codes.size), codes, recompute_modules, attention_flops)
    return float(model_flops_per_step(model, np.ones(1), attention_flops)[0]), tuple(float(x) for x in hardware)


def _throughput(cols: StepColumns, model: TransformerModel, system: System, num_gpus: int, a: LayoutArrays,
                step_s: np.ndarray, options: StepOptions) -> None:
    """Tokens/s, FLOPs per step (attention counted as ``options.attention_flops`` says; full recompute's extra
    forward over the share of blocks it checkpoints), TFLOP/s per GPU, MFU and HFU."""
    gb = a.global_batch.astype(float)
    cols["tokens_per_s"] = gb * model.seq_len / step_s
    model_per_sequence, hardware_per_sequence = _flops_per_sequence(model, tuple(options.recompute_modules),
                                                                    options.attention_flops)
    mflops = gb * model_per_sequence
    extra = np.asarray(hardware_per_sequence)[a.recompute] - model_per_sequence
    full = full_recompute_fraction(model, a.pp, a.vpp, options.recompute_layers)
    share = np.where(a.recompute == RECOMPUTE_FULL, full, 1.0)
    hflops = gb * (model_per_sequence + share * extra)
    # MFU against the dense 16-bit peak, as published tables report it; the low-precision-peak MFU beside it.
    peak = mfu_peak(system.gpu, model.dtype)
    low_peak = system.gpu.peak_for(linear_peak_key(model.dtype))
    cols["model_flops_per_step"] = mflops
    cols["hardware_flops_per_step"] = hflops
    cols["model_tflops_per_gpu"] = mflops / (step_s * num_gpus) / 1e12
    cols["hardware_tflops_per_gpu"] = hflops / (step_s * num_gpus) / 1e12
    cols["mfu"] = mflops / (step_s * num_gpus * peak)
    cols["hfu"] = hflops / (step_s * num_gpus * peak)
    cols["mfu_low_precision_peak"] = mflops / (step_s * num_gpus * low_peak)


def memory_columns(model: TransformerModel, system: System, arrays: LayoutArrays | Any,
                   options: StepOptions | None = None) -> dict[str, np.ndarray]:
    """Memory per GPU ("memory_bytes_per_gpu", "memory/<term>_bytes") and "fits" of every layout: the memory
    columns of :func:`evaluate_layouts` alone, from the same :func:`commmodel.workload.memory.memory_terms`
    call (same values, row for row), without the step model. ``system`` is the node type (only its GPU's
    memory is read). The planner runs it on every candidate first and the step model only on those that fit; it
    passes the factored grid's fields (:class:`commmodel.planner.enumerate.GridFields`: the same attributes as
    mutually broadcastable arrays), and every column then has their broadcast shape."""
    options = options or StepOptions()
    a = arrays
    m = np.maximum(a.num_micro_batches, 1).astype(float)
    return _memory_table(_memory_terms(model, system, a, a.dp * a.cp, a.micro_batch / a.cp.astype(float), m, options),
                         system, options)


def _memory_terms(model: TransformerModel, system: System, a: LayoutArrays, dp_grad: np.ndarray, mb_local: np.ndarray,
                  m: np.ndarray, o: StepOptions, group: Any = None,
                  params: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """:func:`commmodel.workload.memory.memory_terms` of the layouts (gradients over dp·cp, b/cp sequences; linear
    inputs kept as the stack's low-precision recipe keeps them, :func:`commmodel.step.stack_precision.saved_inputs`;
    DDP's bucket copy of the gradients among the buffers where ``o.grad_bucket_copy``; where ``o.grads_set_to_none``
    and neither accumulation nor a pipeline holds them, the gradients beyond the activation and loss peak only)."""
    mem = memory_terms(model, a.tp, a.pp, dp_grad, mb_local, m, a.zero, a.recompute, a.sequence_parallel, a.vpp,
                       effective_bucket_bytes(o, a.dp), o.flash_attention, o.schedule == "gpipe", group=group, ep=a.ep, etp=a.etp,
                       moe_imbalance=o.moe_imbalance, dualpipe=o.schedule == "dualpipe",
                       loss_bytes_per_logit=o.loss_bytes_per_logit, params=params,
                       unsharded=zero3_pp_unsharded(a.zero, a.pp, o),
                       unsharded_weight_bytes=param_wire_bytes(model.dtype_bytes, model.dtype, o.fp8_param_allgather),
                       unsharded_grad_bytes=o.main_grad_bytes,
                       grad_bytes=o.main_grad_bytes if o.main_grad_accumulation else GRAD_BYTES_PER_PARAM,
                       saved=saved_inputs(model, system, o.elementwise, o.activation_fp8_input_store),
                       dropout=(o.hidden_dropout > 0, o.attention_dropout > 0), offload_modules=o.offload_modules,
                       recompute_modules=o.recompute_modules, optimizer_bytes=_optimizer_bytes(model, o),
                       full_share=full_recompute_fraction(model, a.pp, a.vpp, o.recompute_layers))
    if o.grad_bucket_copy:
        mem["buffers"] = mem["buffers"] + mem["gradients"]
    if o.grads_set_to_none:
        held = (np.asarray(m) > 1) | (np.asarray(a.pp) > 1)  # accumulated or pipelined: held beside activations
        first_peak = mem["activations"] + loss_buffer_bytes(model, mb_local, a.tp, o.loss_bytes_per_logit)
        mem["gradients"] = np.where(held, mem["gradients"], np.maximum(mem["gradients"] - first_peak, 0.0))
    return mem


def _optimizer_bytes(model: TransformerModel, o: StepOptions) -> float | None:
    """Optimizer bytes per parameter under ``o.precision_aware_optimizer`` (None: plain Adam). Megatron-Core keeps
    its own fp32 master copy under a low-precision recipe other than TE's delayed scaling
    (:mod:`commmodel.workload.optimizer_states`); the recipe is the one the stack's elementwise kind implies."""
    if o.precision_aware_optimizer is None:
        return None
    recipe = stack_recipe(model, o.elementwise)
    mcore_master = recipe is not None and recipe != "te-fp8-delayed"
    return optimizer_bytes_per_param(model, o.precision_aware_optimizer, mcore_master)


def _memory_table(mem: dict[str, np.ndarray], system: System, o: StepOptions) -> dict[str, np.ndarray]:
    """The memory columns from the terms: total, each term, and whether the total fits (after the headroom)."""
    total_mem = sum(mem.values())
    cols = {"memory_bytes_per_gpu": total_mem}
    for name in MEMORY_TERMS:
        cols[f"memory/{name}_bytes"] = mem[name]
    cols["fits"] = total_mem <= system.gpu.hbm_bytes.value - o.memory_headroom_bytes
    return cols


def _memory(cols: StepColumns, ctx: EvalContext) -> None:
    """Memory per GPU by term (sub-terms evaluated once per distinct coded key) and whether it fits."""
    keys = {"tp": ctx.key("tp"), "pp": ctx.key("pp"), "dp": ctx.key("dp_grad"), "micro_batch": ctx.key("mb_local"),
            "recompute": ctx.key("recompute"), "sequence_parallel": ctx.key("sequence_parallel")}
    mem = _memory_terms(ctx.model, ctx.system, ctx.arrays, ctx.dp_grad, ctx.mb_local, ctx.m, ctx.options,
                        group=lambda fn, names, args: grouped(fn, tuple(keys[n] for n in names), args),
                        params=ctx.params)
    cols.update(_memory_table(mem, ctx.system, ctx.options))


def _breakdown(cols: StepColumns, terms: dict[str, tuple], step_s: np.ndarray, bubble_s: np.ndarray,
               compute_s: np.ndarray) -> None:
    """The "<term>/link_s" and "<term>/exposed_s" columns in :data:`BREAKDOWN_TERMS` order, the
    exposed-communication and bubble fractions and the bound."""
    assert tuple(terms) == BREAKDOWN_TERMS, "every breakdown term is computed once"
    for term, pair in terms.items():
        for suffix, value in zip(("link_s", "exposed_s"), pair):
            value = np.asarray(value, dtype=float)
            cols[f"{term}/{suffix}"] = value if value.shape == step_s.shape else np.broadcast_to(value, step_s.shape).copy()
    comm_exposed = sum(cols[f"{t}/exposed_s"] for t in COMM_TERMS)
    cols["exposed_comm_s"] = comm_exposed
    cols["exposed_comm_fraction"] = comm_exposed / step_s
    cols["bubble_fraction"] = bubble_s / step_s
    cols["compute_fraction"] = compute_s / step_s
    compute_exposed = cols["compute/exposed_s"]
    bound = np.where((comm_exposed > compute_exposed) & (comm_exposed >= bubble_s), 1,
                     np.where(bubble_s > compute_exposed, 2, 0))
    cols["bound"] = np.where(cols["fits"], bound, 3)
