"""Ring algorithms (Patarasuk & Yuan 2009; NCCL's default for large messages).

A ring all-reduce is a reduce-scatter followed by an all-gather: 2(n−1) steps each moving S/n
bytes, T = base + 2(n−1)·α + 2(n−1)/n · S/B; all-gather and reduce-scatter take (n−1) steps.
Broadcast and reduce run the same ring as a pipelined chain: (n−1) hops of latency, S/B of data.

Topology: the ring is bound by its slowest hop. Inside a domain each GPU streams over its own
link at the scale-up rate. When the group spans m domains, NCCL builds several rings (channels)
that each enter and leave every domain once; together they push the whole 2(n−1)/n·S out of each
domain through that domain's NICs, so the inter-domain rate is the domain's aggregate NIC bandwidth
for this group. Of the n hops of a ring, m cross the network (NCCL tuning.cc charges the network
latency to those hops only); the rest pay the NVLink/PCIe step latency.

A ring whose every hop crosses the network (one rank per domain: 2 nodes × 1 GPU) also idles its links once per
loop (:func:`net_loop_bubble_s`).
"""

from __future__ import annotations

import math

import numpy as np

from commmodel.collectives.algorithms.base import AlgoCost, cost
from commmodel.collectives.channels import channel_rate_bytes_per_s, full_width_channels, ramped_bw_bytes_per_s
from commmodel.collectives.protocols import BASE_LATENCY_S, bandwidth_fraction
from commmodel.collectives.topology import GroupTopology


def ring_bandwidth_bytes_per_s(topo: GroupTopology, simplex: bool = False, protocol: str = "Simple") -> np.ndarray:
    """Per-rank streaming rate of a ring or chain: min(intra-domain link, domain NICs) where it crosses."""
    return np.minimum(topo.intra_bw(simplex, protocol), topo.inter_domain_bw())


SLICES_PER_CHUNK = 2
"""Slices of one ring/Simple chunk: ``ALLREDUCE_CHUNKSTEPS (NCCL_STEPS/2)`` over
``ALLREDUCE_SLICESTEPS (NCCL_STEPS/4)``, the same for all-gather and reduce-scatter (NVIDIA/nccl
src/include/collectives.h@5d3ab08b, v2.17.1-1; unchanged at 73cf1122, v2.30.7-1); ``genericOp`` copies and posts a
chunk slice by slice (src/collectives/device/prims_simple.h@5d3ab08b ``SlicePerChunk``)."""

BUBBLE_OPS = frozenset({"all_reduce", "all_gather", "reduce_scatter"})
"""The ring collectives whose loop is one thread block's chain of primitives ending in a receive (all_reduce.h,
all_gather.h, reduce_scatter.h ``runRing``, NVIDIA/nccl@5d3ab08b)."""


def net_loop_bubble_s(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> np.ndarray:
    """Time a ring/Simple collective's network links stand idle between loops, where every hop is a network hop.

    Each channel runs its loop as one thread block's sequence of primitives (NCCL ``runRing``: send, n−2 forwarding
    steps, then ``directRecv``), and each primitive copies its chunk slice by slice through the network transport's
    buffers, which the SM fills and drains (no direct peer pointer across a NIC). So the first slice of loop i+1
    is copied in only after the last slice of loop i is copied out: per loop the outgoing link idles for two slice
    copies at the channel's copy rate r_ch. Summed over the loops of S/(n·c·chunk) (all-gather, reduce-scatter:
    S/n per rank; all-reduce: S over n chunks, the same count), and with a partial loop's smaller chunk alike::

        t_bubble = 2/SLICES_PER_CHUNK · S / (n · c · r_ch)

    with c the channels the message uses (the communicator's across the network, fewer for a small message).
    Priced only where every hop crosses the network (one rank per domain): there both the copy-in and the
    copy-out go through network buffers. With several ranks per domain the copy-out comes from an NVLink peer,
    possibly written in place by it (P2P direct), which is not modelled. Simple only (LL/LL128 slices are a few KiB).
    """
    size = np.asarray(size_bytes, dtype=float)
    if protocol != "Simple" or op not in BUBBLE_OPS:
        return np.zeros(np.broadcast_shapes(size.shape, topo.num_ranks.shape))
    every_hop_on_net = topo.spans_domains & (topo.ranks_per_domain == 1)
    channels = np.minimum(topo.inter_channels, full_width_channels(size, topo.num_ranks, "ring", protocol))
    rate = channel_rate_bytes_per_s("ring", protocol, topo.sm_version, 1.0)
    bubble = 2.0 / SLICES_PER_CHUNK * size / (topo.num_ranks * np.maximum(channels, 1.0) * rate)
    return np.where(every_hop_on_net, bubble, 0.0)


def ring_hops_latency_s(topo: GroupTopology, hops: np.ndarray, protocol: str, family: str = "ring") -> np.ndarray:
    """Latency of ``hops`` consecutive ring hops: a share m/n of them on the network, the rest inside."""
    frac = topo.inter_steps_fraction
    inter = topo.inter_step_s(family, protocol) if math.isfinite(topo.inter_latency_s) else 0.0
    return hops * ((1.0 - frac) * topo.intra_step_s(family, protocol) + frac * inter)


def ring_steps(op: str, n: np.ndarray) -> np.ndarray:
    """Ring steps: 2(n−1) for all-reduce (and a barrier, a 0-byte all-reduce), n−1 otherwise."""
    return 2.0 * (n - 1) if op in ("all_reduce", "barrier") else (n - 1.0)


def _ramp(bw, size_bytes, topo: GroupTopology, protocol: str, frac, link) -> np.ndarray:
    """The ring's rate B lowered to what NCCL's channels for this size stream (:mod:`..channels`)."""
    return ramped_bw_bytes_per_s(bw, size_bytes, topo.num_ranks, "ring", protocol, topo.sm_version, frac, link)


def ring_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """Ring: all-reduce base + 2(n−1)·α + 2(n−1)/n·S/B; all-gather/reduce-scatter base + (n−1)·α + (n−1)/n·S/B;
    broadcast/reduce (pipelined chain) base + (n−1)·α + S/B.

    B = min(scale-up rate, the group's NICs per domain) × the protocol's bandwidth fraction, lowered for small
    messages to what the channels NCCL gives them stream (:func:`..channels.ramped_bw_bytes_per_s`); a ring whose
    every hop is a network hop adds its idle links between loops (:func:`net_loop_bubble_s`).
    Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 2009;
    NCCL tuning.cc for base and per-step latencies. Assumes all ranks stream concurrently.
    """
    n = topo.num_ranks
    frac = bandwidth_fraction("ring", protocol, op, topo.spans_domains)
    base = BASE_LATENCY_S["ring"][protocol]
    if op in ("broadcast", "reduce"):
        # Two ranks: one only sends, the other only receives (matters for host-staged PCIe).
        link = np.where(n == 2, ring_bandwidth_bytes_per_s(topo, True, protocol),
                        ring_bandwidth_bytes_per_s(topo, False, protocol))
        bw = _ramp(link * frac, size_bytes, topo, protocol, frac, link)
        reduced = size_bytes if op == "reduce" else 0.0
        return cost(base + ring_hops_latency_s(topo, n - 1.0, protocol), size_bytes / bw, size_bytes, reduced)
    steps = ring_steps(op, n)
    wire = steps / n * size_bytes
    link = ring_bandwidth_bytes_per_s(topo, False, protocol)
    bw = _ramp(link * frac, size_bytes, topo, protocol, frac, link)
    reduced = (n - 1) / n * size_bytes if op in ("all_reduce", "reduce_scatter") else 0.0
    stream_s = wire / bw + net_loop_bubble_s(op, size_bytes, topo, protocol)
    return cost(base + ring_hops_latency_s(topo, steps, protocol), stream_s, wire, reduced)
