"""Communication of one training step: TP, PP, DP/ZeRO and expert terms, vectorised over layouts.

Placement follows Megatron-LM's rank order (tensor fastest, then data, then pipeline):
- a TP group is packed inside a node: ranks_per_node = min(tp, gpus_per_node);
- a DP (and expert) group is strided by tp: ranks_per_node = clip(gpus_per_node // tp, 1, dp);
- pipeline neighbours are tp·dp ranks apart; once the pipeline spans nodes (tp·dp·pp > gpus_per_node)
  at least one stage boundary sends over the network, and that slowest boundary paces every stage.

Every collective is priced by :func:`commmodel.collectives.collective_cost` (algorithm ``auto``);
message sizes follow nccl-tests (the whole buffer S).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commmodel.collectives import collective_cost
from commmodel.collectives.topology import group_topology
from commmodel.hardware.models import System
from commmodel.step.options import StepOptions
from commmodel.workload.memory import expert_parallel_degree, params_per_gpu
from commmodel.workload.model import TransformerModel


def _cost_s(op: str, size_bytes: np.ndarray, system: System, num_ranks: np.ndarray,
            ranks_per_node: np.ndarray) -> np.ndarray:
    """Time of one collective; 0 where the group has one rank or the buffer is empty."""
    n = np.asarray(num_ranks, dtype=float)
    size = np.asarray(size_bytes, dtype=float)
    shape = np.broadcast_shapes(n.shape, size.shape, np.shape(ranks_per_node))
    n_b = np.broadcast_to(n, shape)
    size_b = np.broadcast_to(size, shape)
    rpn_b = np.broadcast_to(np.asarray(ranks_per_node, dtype=float), shape)
    active = (n_b > 1) & (size_b > 0)
    out = np.zeros(shape)
    if np.any(active):  # price only real groups: a 1-rank "group" may not even fit the topology
        out[active] = collective_cost(op, size_b[active], system, n_b[active], rpn_b[active]).time_s
    return out


def tp_ranks_per_node(system: System, tp: np.ndarray) -> np.ndarray:
    """A TP group packed inside nodes: min(tp, gpus_per_node)."""
    return np.minimum(np.asarray(tp), system.gpus_per_node)


def dp_ranks_per_node(system: System, tp: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """A DP group strided by tp: clip(gpus_per_node // tp, 1, dp)."""
    return np.clip(system.gpus_per_node // np.asarray(tp), 1, np.asarray(dp))


@dataclass(frozen=True)
class TensorParallelComm:
    """TP collectives of one micro-batch on one stage (seconds, arrays)."""

    all_reduce_s: np.ndarray
    """All-reduces without sequence parallelism."""
    reduce_scatter_s: np.ndarray
    """Reduce-scatters with sequence parallelism."""
    all_gather_s: np.ndarray
    """All-gathers with sequence parallelism."""


def tensor_parallel_comm(model: TransformerModel, system: System, micro_batch: np.ndarray, tp: np.ndarray,
                         pp: np.ndarray, recompute: np.ndarray, sequence_parallel: np.ndarray) -> TensorParallelComm:
    """Per block: 2 all-reduces of b·s·h·e bytes forward and 2 backward (Shoeybi et al. 2019), or with
    sequence parallelism 2 all-gathers + 2 reduce-scatters each way (Korthikanti et al. 2022 §4.2.2);
    full recompute repeats the forward ones. × l/p blocks per stage."""
    size = np.asarray(micro_batch, dtype=float) * model.seq_len * model.hidden_size * model.dtype_bytes
    t = np.asarray(tp)
    rpn = tp_ranks_per_node(system, t)
    sp = np.asarray(sequence_parallel, dtype=bool)
    # Per block: 2 forward + 2 backward (+ 2 when full recompute redoes the forward).
    per_direction = 2.0 * (2.0 + np.where(np.asarray(recompute) == 2, 1.0, 0.0))
    layers = model.num_layers / np.asarray(pp, dtype=float)
    count = per_direction * layers
    ar = _cost_s("all_reduce", np.where(sp, 0.0, size), system, t, rpn)
    rs = _cost_s("reduce_scatter", np.where(sp, size, 0.0), system, t, rpn)
    ag = _cost_s("all_gather", np.where(sp, size, 0.0), system, t, rpn)
    return TensorParallelComm(all_reduce_s=count * ar, reduce_scatter_s=count * rs, all_gather_s=count * ag)


def pipeline_p2p_s(model: TransformerModel, system: System, micro_batch: np.ndarray, tp: np.ndarray,
                   pp: np.ndarray, dp: np.ndarray, vpp: np.ndarray) -> np.ndarray:
    """Send/recv of one micro-batch on one stage: activations forward and their gradients backward,
    once per model chunk (v per GPU). Each of the tp ranks sends b·s·h·e/tp (Megatron's scatter/gather
    optimisation, Narayanan et al. 2021 §4.1); the slowest boundary sets the pace, and it crosses the
    network when tp·dp·pp > gpus_per_node."""
    size = np.asarray(micro_batch, dtype=float) * model.seq_len * model.hidden_size * model.dtype_bytes / np.asarray(tp)
    # Stages are tp·dp ranks apart: a node holds gpus_per_node / (tp·dp) consecutive stages, so some
    # boundary leaves the node as soon as the pipeline spans more than one node; the topology then
    # says whether that hop stays in a multi-node NVLink domain (NVL72) or uses the network.
    cross_node = np.asarray(tp) * np.asarray(dp) * np.asarray(pp) > system.gpus_per_node
    one = np.zeros(np.shape(size))
    piped = np.asarray(pp) > 1
    if np.any(piped):
        topo = group_topology(system, np.full(int(piped.sum()), 2.0), np.where(cross_node[piped], 1, 2))
        spans = topo.spans_domains
        # One send/recv: α + S/B of the hop it uses (T = α + S·β; DESIGN §4 send/recv lower bound).
        bw = np.where(spans, topo.inter_bw_per_rank_bytes_per_s, topo.intra_bw_bytes_per_s)
        alpha = np.where(spans, topo.inter_latency_s, topo.intra_latency_s)
        one[piped] = alpha + size[piped] / bw
    return 2.0 * np.asarray(vpp, dtype=float) * one


@dataclass(frozen=True)
class DataParallelComm:
    """DP gradient/parameter traffic of one step (seconds, arrays) and what can hide behind compute."""

    all_reduce_s: np.ndarray
    """Gradient all-reduce (ZeRO 0), once per step."""
    reduce_scatter_s: np.ndarray
    """Gradient reduce-scatter (ZeRO 1: once per step; ZeRO 2-3: every micro-batch)."""
    all_gather_s: np.ndarray
    """Parameter all-gather (ZeRO 1-2: once after the update; ZeRO 3: forward and backward of every micro-batch)."""
    parameter_server_s: np.ndarray
    """Parameter-server push + pull, once per step."""
    last_bucket_s: np.ndarray
    """One bucket's reduction: what stays exposed after the backward ends."""


def parameter_server_s(system: System, size_bytes: np.ndarray, dp: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Central server on one worker: its link carries (n−1)·S in and the same out, full duplex,
    T = α + (n−1)·S / B with B the worker's own link (DESIGN §4: 1.2 GB over 1 GB/s, 10 workers: 10.8 s)."""
    n = np.asarray(dp, dtype=float)
    topo = group_topology(system, n, dp_ranks_per_node(system, tp, dp))
    bw = np.where(topo.spans_domains, topo.inter_bw_per_rank_bytes_per_s, topo.intra_bw_bytes_per_s)
    alpha = np.where(topo.spans_domains, topo.inter_latency_s, topo.intra_latency_s)
    return np.where(n > 1, alpha + (n - 1) * np.asarray(size_bytes, dtype=float) / bw, 0.0)


def data_parallel_comm(model: TransformerModel, system: System, tp: np.ndarray, pp: np.ndarray, dp: np.ndarray,
                       zero: np.ndarray, num_micro_batches: np.ndarray, options: StepOptions,
                       keys: tuple | None = None) -> DataParallelComm:
    """Gradients of the busiest GPU's parameters over the dp group (bytes per element set by compression).

    ZeRO-0 all-reduces once per step (gradient accumulation: once per m micro-batches); ZeRO-1
    (Megatron's distributed optimizer) reduce-scatters once and all-gathers the updated 16-bit weights;
    ZeRO-2/3 reduce-scatter every micro-batch (partitioned gradients cannot accumulate locally) and
    ZeRO-3 all-gathers the weights for every micro-batch's forward and backward (Rajbhandari et al. 2020).
    """
    def once(tp_: np.ndarray, pp_: np.ndarray, dp_: np.ndarray, z: np.ndarray) -> DataParallelComm:
        """One occurrence of each collective (independent of the micro-batch count)."""
        params = params_per_gpu(model, tp_, pp_, dp_)
        grad_bytes = params * options.grad_wire_bytes_per_element
        weight_bytes = params * model.dtype_bytes
        rpn = dp_ranks_per_node(system, tp_, dp_)
        bucket = np.minimum(options.bucket_size_bytes, grad_bytes)
        if options.dp_mode == "parameter_server":
            zeros = np.zeros_like(params)
            return DataParallelComm(zeros, zeros, zeros, parameter_server_s(system, grad_bytes, dp_, tp_),
                                    parameter_server_s(system, bucket, dp_, tp_))
        ar = _cost_s("all_reduce", np.where(z == 0, grad_bytes, 0.0), system, dp_, rpn)
        rs = _cost_s("reduce_scatter", np.where(z > 0, grad_bytes, 0.0), system, dp_, rpn)
        ag = _cost_s("all_gather", np.where(z > 0, weight_bytes, 0.0), system, dp_, rpn)
        last_bucket = np.where(z == 0, _cost_s("all_reduce", np.where(z == 0, bucket, 0.0), system, dp_, rpn),
                               _cost_s("reduce_scatter", np.where(z > 0, bucket, 0.0), system, dp_, rpn))
        return DataParallelComm(ar, rs, ag, np.zeros_like(ar), last_bucket)

    from commmodel.step.grouping import grouped

    args = (np.asarray(tp), np.asarray(pp), np.asarray(dp), np.asarray(zero))
    one = grouped(once, keys or args, args)  # priced once per distinct (tp, pp, dp, ZeRO)
    z = np.asarray(zero)
    m = np.asarray(num_micro_batches, dtype=float)
    return DataParallelComm(
        all_reduce_s=one.all_reduce_s,
        reduce_scatter_s=np.where(z >= 2, m, 1.0) * one.reduce_scatter_s,
        all_gather_s=np.where(z == 3, 2.0 * m, 1.0) * one.all_gather_s,
        parameter_server_s=one.parameter_server_s,
        last_bucket_s=one.last_bucket_s,
    )


def expert_all_to_all_s(model: TransformerModel, system: System, micro_batch: np.ndarray, tp: np.ndarray,
                        pp: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """MoE token dispatch and combine: 2 all-to-alls forward and 2 backward per block over the expert
    group (ep = gcd(E, dp), strided like DP), each of b·s·k·h·e/tp bytes per rank (Lepikhin et al. 2020)."""
    if not model.is_moe:
        return np.zeros(np.shape(tp), dtype=float)
    ep = expert_parallel_degree(model, np.asarray(dp))
    size = (np.asarray(micro_batch, dtype=float) * model.seq_len * model.experts_per_token * model.hidden_size
            * model.dtype_bytes / np.asarray(tp))
    one = _cost_s("all_to_all", size, system, ep, dp_ranks_per_node(system, tp, ep))
    return 4.0 * model.num_layers / np.asarray(pp, dtype=float) * one
