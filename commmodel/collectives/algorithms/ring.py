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
"""

from __future__ import annotations

import math

import numpy as np

from commmodel.collectives.algorithms.base import AlgoCost, cost
from commmodel.collectives.channels import ramped_bw_bytes_per_s
from commmodel.collectives.protocols import BASE_LATENCY_S, bandwidth_fraction
from commmodel.collectives.topology import GroupTopology


def ring_bandwidth_bytes_per_s(topo: GroupTopology, simplex: bool = False, protocol: str = "Simple") -> np.ndarray:
    """Per-rank streaming rate of a ring or chain: min(intra-domain link, domain NICs) where it crosses."""
    return np.minimum(topo.intra_bw(simplex, protocol), topo.inter_domain_bw())


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
    messages to what the channels NCCL gives them stream (:func:`..channels.ramped_bw_bytes_per_s`).
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
    return cost(base + ring_hops_latency_s(topo, steps, protocol), wire / bw, wire, reduced)
