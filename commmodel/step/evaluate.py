"""The training-step model: one vectorised evaluation of many layouts (DESIGN §5, §6).

For each layout (arrays of length n) the step time is

    step = m·t_mb + bubble + exposed DP + optimizer (+ straggler wait)
    t_mb = compute(fwd + bwd + recompute) + exposed TP + exposed CP ring + PP send/recv + expert all-to-all
    bubble = (p − 1)·⌈l/(p·v)⌉/⌈l/p⌉ · t_mb  (1F1B, interleaved with v chunks; Narayanan et al. 2021
             §2.2: (p − 1)/v · t_mb when p·v divides l; with uneven chunks the busiest chunk paces the
             warm-up and cool-down)
           = (p − 1) · t_mb  (GPipe)

With context parallelism (cp > 1) every GPU holds b·s/cp tokens of each micro-batch: every
token-linear term (GEMMs, elementwise traffic, activations, TP and PP messages) and the attention
core (s/cp queries against all s keys, balanced by the 2·cp chunking) equal those of a micro-batch of
b/cp sequences, so they are evaluated at b/cp; the K/V ring is priced by
:func:`commmodel.step.comm.context_parallel_s`; gradients are reduced over dp·cp ranks.

on the slowest (last) stage, m = global_batch / (micro_batch · dp) micro-batches. DP traffic hides
behind the last micro-batch's backward except its last bucket (ZeRO-2/3: behind every micro-batch).
The single-layout :func:`commmodel.step.estimate.estimate` calls this with arrays of length 1.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from commmodel.hardware.models import Cluster, System
from commmodel.step.comm import (
    context_parallel_s,
    data_parallel_from_times,
    data_parallel_requests,
    expert_all_to_all_s,
    pipeline_p2p_s,
    price_collectives,
    tensor_parallel_from_times,
    tensor_parallel_requests,
)
from commmodel.step.overlap import overlapped_dp_exposure
from commmodel.step.compute import HBM_EFFICIENCY, stage_compute
from commmodel.step.grouping import Coded, spread, coded, grouped, unique_inverse
from commmodel.step.layout import LayoutArrays
from commmodel.step.options import StepOptions
from commmodel.workload.flops import hardware_flops_per_step, model_flops_per_step
from commmodel.workload.memory import memory_terms, params_per_gpu
from commmodel.workload.model import TransformerModel, chunk_layers, stage_layers

ADAM_BYTES_PER_PARAM = 30.0
"""HBM traffic of one fused Adam update per parameter: read the fp32 gradient (4), read and write the
fp32 master weight, m and v (3 × 8), write the 16-bit weight (2)."""

BREAKDOWN_TERMS: tuple[str, ...] = (
    "compute", "tp/all_reduce", "tp/reduce_scatter", "tp/all_gather", "cp/send_recv", "pp/p2p", "pp/bubble",
    "dp/all_reduce", "dp/reduce_scatter", "dp/all_gather", "dp/parameter_server", "ep/all_to_all",
    "overlap/interference", "optimizer", "straggler",
)
"""Every breakdown term; each has "<term>/link_s" and "<term>/exposed_s" columns."""

COMM_TERMS: tuple[str, ...] = tuple(t for t in BREAKDOWN_TERMS if t.split("/")[0] in ("tp", "cp", "dp", "ep", "overlap")
                                    or t == "pp/p2p")
"""The terms that are communication (the bubble is idle time, not traffic); the slowdown that hidden
communication inflicts on compute counts as communication: it goes away with the traffic."""

OVERLAP_INTERFERENCE = 0.189
"""Compute slows by this fraction of the communication time it hides: NCCL kernels take SMs and HBM
bandwidth from concurrent GEMMs. Lee et al. 2025, "Characterizing Compute-Communication Overlap in
GPU-Accelerated Distributed Deep Learning" (arXiv:2507.03114): 18.9% average compute slowdown under
overlap on current NVIDIA/AMD GPUs (up to 40%); the average is used."""

MEMORY_TERMS: tuple[str, ...] = ("weights", "gradients", "optimizer", "activations", "buffers")
"""Memory columns "memory/<term>_bytes"."""

BOUND_NAMES: tuple[str, ...] = ("compute", "communication", "bubble", "memory")
"""Meaning of the integer "bound" column."""


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
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def evaluate_layouts(model: TransformerModel, system: System, num_gpus: int, arrays: LayoutArrays,
                     options: StepOptions | None = None) -> StepColumns:
    """Step time, throughput, MFU/HFU, memory and the link/exposed breakdown of every layout.

    ``system`` is the node type; the cluster holding ``num_gpus`` of them is formed here. Layouts must
    already pass :func:`commmodel.step.layout.layout_divisibility_masks` (the planner filters first);
    others still get numbers but they mean nothing.
    """
    options = options or StepOptions()
    system = Cluster.for_gpus(system, num_gpus).system
    a = arrays
    tp, pp, dp, mb, vpp = a.tp, a.pp, a.dp, a.micro_batch, a.vpp
    gpipe = options.schedule == "gpipe"
    m = np.maximum(a.num_micro_batches, 1).astype(float)
    p = pp.astype(float)
    v = np.where(gpipe, 1.0, vpp.astype(float))

    rc, sp, z, cp = a.recompute, a.sequence_parallel, a.zero, a.cp
    # Context parallelism: each GPU holds b/cp sequences' worth of tokens; gradients reduce over dp·cp.
    mb_local = mb / cp.astype(float)
    dp_grad = dp * cp
    c = {name: coded(getattr(a, name)) for name in ("tp", "pp", "dp", "micro_batch", "zero", "recompute",
                                                      "sequence_parallel", "cp")}
    c["vpp"] = coded(v)
    c["dp_grad"] = coded(dp_grad)
    mb_first, mb_codes = unique_inverse(c["micro_batch"], c["cp"])
    c["mb_local"] = Coded(mb_codes, int(mb_first.size))
    # Price every collective of the step in one call per op, on one representative per distinct key:
    # TP and compute depend on (micro-batch, cp, tp, pp, recompute, SP), DP traffic on (tp, pp, dp·cp, ZeRO).
    tp_first, tp_inv = unique_inverse(c["mb_local"], c["tp"], c["pp"], c["recompute"], c["sequence_parallel"], c["cp"])
    dp_first, dp_inv = unique_inverse(c["tp"], c["pp"], c["dp_grad"], c["zero"])
    requests = {f"tp/{k}": r for k, r in
                tensor_parallel_requests(model, system, mb_local[tp_first], tp[tp_first], sp[tp_first]).items()}
    if options.dp_mode != "parameter_server":
        requests.update({f"dp/{k}": r for k, r in data_parallel_requests(
            model, system, tp[dp_first], pp[dp_first], dp_grad[dp_first], z[dp_first], options).items()})
    times = price_collectives(system, requests)
    comp_first = stage_compute(model, system, mb_local[tp_first], tp[tp_first], pp[tp_first], rc[tp_first],
                               sp[tp_first], options.flash_attention, options.flash_attention_rate)
    comp = spread(comp_first, tp_inv)
    cp_link_mb, cp_exposed_mb = spread(context_parallel_s(
        model, system, mb_local[tp_first], tp[tp_first], cp[tp_first], pp[tp_first], rc[tp_first],
        comp_first.attention_core_s), tp_inv)
    tpc = spread(tensor_parallel_from_times(model, {k[3:]: t for k, t in times.items() if k.startswith("tp/")},
                                             pp[tp_first], rc[tp_first]), tp_inv)
    tp_link_mb = tpc.all_reduce_s + tpc.reduce_scatter_s + tpc.all_gather_s
    tp_exposed_mb = np.maximum(tp_link_mb - comp.matmul_s, 0.0) if options.tp_comm_overlap else tp_link_mb
    # dp = GPUs / (tp·pp) in every valid layout, and the v chunks each send once: key on (mb, tp, pp).
    p2p_mb = v * grouped(lambda mb_, tp_, pp_, dp_: pipeline_p2p_s(model, system, mb_, tp_, pp_, dp_, np.ones_like(tp_)),
                         (c["mb_local"], c["tp"], c["pp"], c["dp_grad"]), (mb_local, tp, pp, dp_grad))
    ep_mb = (grouped(lambda *x: expert_all_to_all_s(model, system, *x),
                     (c["mb_local"], c["tp"], c["pp"], c["dp"]), (mb_local, tp, pp, dp))
             if model.is_moe else 0.0)
    t_mb = comp.total_s + tp_exposed_mb + cp_exposed_mb + p2p_mb + ep_mb
    # The busiest chunk paces warm-up and cool-down: (p − 1) chunk passes of ⌈l/(p·v)⌉ of the ⌈l/p⌉ layers.
    chunk_share = chunk_layers(model, pp, np.where(gpipe, 1, vpp)) / stage_layers(model, pp)
    bubble_s = (p - 1) * chunk_share * t_mb
    pipeline_s = m * t_mb + bubble_s

    dp_times = {k[3:]: t[dp_inv] for k, t in times.items() if k.startswith("dp/")}
    if options.dp_mode == "parameter_server":
        dp_times = dict.fromkeys(("all_reduce", "layer_all_gather", "layer_reduce_scatter"), np.zeros(len(a)))
    dpc = data_parallel_from_times(model, system, dp_times, tp, pp, dp_grad, z, m, options)
    reduce_link = dpc.all_reduce_s + dpc.reduce_scatter_s + dpc.parameter_server_s
    gather_link = dpc.all_gather_s
    if not options.synchronous:
        reduce_exposed = np.maximum(reduce_link + gather_link - pipeline_s, 0.0)
        gather_exposed = np.zeros_like(gather_link)
    elif options.overlap:
        reduce_exposed, gather_exposed = overlapped_dp_exposure(model, comp, dpc, z, pp, m, reduce_link, gather_link)
    else:
        reduce_exposed, gather_exposed = reduce_link, gather_link
    # Communication that hides behind compute still slows it (shared SMs and HBM bandwidth).
    hidden_s = ((reduce_link - reduce_exposed) + (gather_link - gather_exposed) + m * (tp_link_mb - tp_exposed_mb)
                + m * (cp_link_mb - cp_exposed_mb))
    interference_s = OVERLAP_INTERFERENCE * np.maximum(hidden_s, 0.0)

    params = grouped(lambda *x: params_per_gpu(model, *x), (c["tp"], c["pp"], c["dp"]), (tp, pp, dp))
    hbm = system.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY
    optimizer_s = params / np.where(z >= 1, dp_grad, 1) * ADAM_BYTES_PER_PARAM / hbm

    base_s = pipeline_s + reduce_exposed + gather_exposed + interference_s + optimizer_s
    straggle = options.straggler_cv * expected_max_standard_normal(num_gpus) if options.synchronous else 0.0
    straggler_s = base_s * straggle
    step_s = base_s + straggler_s

    cols = StepColumns()
    cols["step_time_s"] = step_s
    cols["num_micro_batches"] = m
    gb = a.global_batch.astype(float)
    cols["tokens_per_s"] = gb * model.seq_len / step_s
    # FLOPs are linear in the batch: count one sequence per recompute code and scale.
    per_sequence_hflops = hardware_flops_per_step(model, np.ones(3), np.arange(3))
    mflops = gb * model_flops_per_step(model, np.ones(1))[0]
    hflops = gb * per_sequence_hflops[a.recompute]
    peak = system.gpu.peak_for(model.dtype)
    cols["model_flops_per_step"] = mflops
    cols["hardware_flops_per_step"] = hflops
    cols["model_tflops_per_gpu"] = mflops / (step_s * num_gpus) / 1e12
    cols["hardware_tflops_per_gpu"] = hflops / (step_s * num_gpus) / 1e12
    cols["mfu"] = mflops / (step_s * num_gpus * peak)
    cols["hfu"] = hflops / (step_s * num_gpus * peak)

    coded_of = {id(tp): c["tp"], id(pp): c["pp"], id(dp_grad): c["dp_grad"], id(mb_local): c["mb_local"],
                id(a.recompute): c["recompute"], id(a.sequence_parallel): c["sequence_parallel"]}
    mem = memory_terms(model, tp, pp, dp_grad, mb_local, m, z, a.recompute, a.sequence_parallel, vpp,
                       options.bucket_size_bytes, options.flash_attention, gpipe,
                       group=lambda fn, keys, args: grouped(fn, tuple(coded_of.get(id(k), k) for k in keys), args))
    total_mem = sum(mem.values())
    cols["memory_bytes_per_gpu"] = total_mem
    for name in MEMORY_TERMS:
        cols[f"memory/{name}_bytes"] = mem[name]
    cols["fits"] = total_mem <= system.gpu.hbm_bytes.value

    def put(term: str, link: np.ndarray, exposed: np.ndarray) -> None:
        for suffix, value in (("link_s", link), ("exposed_s", exposed)):
            value = np.asarray(value, dtype=float)
            cols[f"{term}/{suffix}"] = value if value.shape == step_s.shape else np.broadcast_to(value, step_s.shape).copy()

    tp_share = np.divide(tp_exposed_mb, tp_link_mb, out=np.zeros_like(tp_link_mb), where=tp_link_mb > 0)
    put("compute", m * comp.total_s, m * comp.total_s)
    put("tp/all_reduce", m * tpc.all_reduce_s, m * tpc.all_reduce_s * tp_share)
    put("tp/reduce_scatter", m * tpc.reduce_scatter_s, m * tpc.reduce_scatter_s * tp_share)
    put("tp/all_gather", m * tpc.all_gather_s, m * tpc.all_gather_s * tp_share)
    put("cp/send_recv", m * cp_link_mb, m * cp_exposed_mb)
    put("pp/p2p", m * p2p_mb, m * p2p_mb)
    put("pp/bubble", bubble_s, bubble_s)
    red_share = np.divide(reduce_exposed, reduce_link, out=np.zeros_like(reduce_link), where=reduce_link > 0)
    put("dp/all_reduce", dpc.all_reduce_s, dpc.all_reduce_s * red_share)
    put("dp/reduce_scatter", dpc.reduce_scatter_s, dpc.reduce_scatter_s * red_share)
    put("dp/all_gather", gather_link, gather_exposed)
    put("dp/parameter_server", dpc.parameter_server_s, dpc.parameter_server_s * red_share)
    put("ep/all_to_all", m * ep_mb, m * ep_mb)
    put("overlap/interference", interference_s, interference_s)
    put("optimizer", optimizer_s, optimizer_s)
    put("straggler", straggler_s, straggler_s)

    comm_exposed = sum(cols[f"{t}/exposed_s"] for t in COMM_TERMS)
    cols["exposed_comm_s"] = comm_exposed
    cols["exposed_comm_fraction"] = comm_exposed / step_s
    cols["bubble_fraction"] = bubble_s / step_s
    cols["compute_fraction"] = m * comp.total_s / step_s
    compute_s = cols["compute/exposed_s"]
    bound = np.where((comm_exposed > compute_s) & (comm_exposed >= bubble_s), 1, np.where(bubble_s > compute_s, 2, 0))
    cols["bound"] = np.where(cols["fits"], bound, 3)
    return cols
