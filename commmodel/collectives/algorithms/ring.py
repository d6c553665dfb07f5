"""Ring algorithms (Patarasuk & Yuan 2009; NCCL's default for large messages).

A ring all-reduce is a reduce-scatter followed by an all-gather: 2(n−1) steps each moving S/n
bytes, T = 2(n−1)·(α + S/(n·B)); all-gather and reduce-scatter take (n−1) steps.

Topology: the ring is bound by its slowest hop. Inside a domain each GPU streams over its own
link at ``intra_bw``. When the group spans m domains, NCCL builds several rings (channels) that
each enter and leave every domain once; together they push the whole 2(n−1)/n·S out of each domain
through that domain's NICs, so the inter-domain rate is the domain's aggregate NIC bandwidth for
this group. Per-step latency is the slower tier's α once the ring crosses the network.
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.topology import GroupTopology
from commmodel.hardware.models import System


def ring_bandwidth_bytes_per_s(topo: GroupTopology) -> np.ndarray:
    """Per-rank streaming rate of a ring: min(intra-domain link, domain NICs) where it crosses domains."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inter = np.where(topo.spans_domains, topo.inter_bw_per_domain_bytes_per_s, np.inf)
    return np.minimum(topo.intra_bw_bytes_per_s, inter)


def ring_step_latency_s(topo: GroupTopology) -> np.ndarray:
    """α of one ring step: the network's once the ring leaves the domain."""
    return np.where(topo.spans_domains, max(topo.inter_latency_s, topo.intra_latency_s) if np.isfinite(topo.inter_latency_s) else topo.intra_latency_s, topo.intra_latency_s)


def ring_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, system: System) -> tuple[np.ndarray, np.ndarray]:
    """Ring: all-reduce 2(n−1)(α + S/(nB)); all-gather / reduce-scatter (n−1)(α + S/(nB)).

    Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 2009.
    """
    n = topo.num_ranks
    steps = 2.0 * (n - 1) if op == "all_reduce" else (n - 1)
    bw = ring_bandwidth_bytes_per_s(topo)
    return steps * ring_step_latency_s(topo), steps * size_bytes / (n * bw)
