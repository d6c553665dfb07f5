"""Hierarchical (two-level) all-reduce: reduce inside the domain, all-reduce across, gather back.

1. reduce-scatter inside each domain (ring over its r ranks): every rank holds S/r of the domain sum;
2. all-reduce of that S/r shard across the m domains, one **rail** per rank (rank i of every domain
   talks to rank i of the others over its own NIC): a ring (``hierarchical``) or NCCL's double
   binary tree (``hierarchical_tree``, the intra-ring/inter-tree mix);
3. all-gather inside each domain.

T = base + 2(r−1)·α_intra + 2(r−1)/r·S/B_intra + T_inter(S/r), the phases run one after another;
ring across: 2(m−1)·α_inter + 2(m−1)/m·(S/r)/B_rank; tree across: 2⌈log₂m⌉·α_inter + k·(S/r)/B_rank
(k = 1 on two nodes, 2 beyond: see :mod:`.tree`).
Each node's NICs carry 2(m−1)/m·S in total instead of the flat ring's 2(n−1)/n·S, at the price of
the NVLink phases not overlapping the network one.
Horovod's hierarchical all-reduce (Sergeev & Del Balso 2018); Jia et al., "Highly scalable deep
learning training system with mixed-precision" (2D/hierarchical all-reduce), 2018.
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.algorithms.base import AlgoCost, ceil_log2, cost
from commmodel.collectives.algorithms.tree import tree_network_share
from commmodel.collectives.protocols import BASE_LATENCY_S
from commmodel.collectives.topology import GroupTopology


def _intra_phases(topo: GroupTopology, size_bytes: np.ndarray, protocol: str) -> tuple[np.ndarray, np.ndarray]:
    r = topo.ranks_per_domain
    latency = 2.0 * (r - 1) * topo.intra_step_s("ring", protocol)
    bandwidth = 2.0 * (r - 1) / r * size_bytes / topo.intra_bw()
    return latency, bandwidth


def hierarchical_ring_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """Intra RS → inter ring AR of S/r per rail → intra AG (phases in sequence)."""
    r, m = topo.ranks_per_domain, topo.num_domains
    lat_in, bw_in = _intra_phases(topo, size_bytes, protocol)
    shard = size_bytes / r
    lat_out = 2.0 * (m - 1) * topo.inter_step_s("ring", protocol)
    bw_out = 2.0 * (m - 1) / m * shard / topo.inter_rank_bw()
    wire = 2.0 * (r - 1) / r * size_bytes + 2.0 * (m - 1) / m * shard
    return cost(BASE_LATENCY_S["ring"][protocol] + lat_in + lat_out, bw_in + bw_out, wire,
                (r - 1) / r * size_bytes + (m - 1) / m * shard)


def hierarchical_tree_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """Intra RS → inter double-binary-tree AR of S/r per rail → intra AG (phases in sequence)."""
    r, m = topo.ranks_per_domain, topo.num_domains
    lat_in, bw_in = _intra_phases(topo, size_bytes, protocol)
    shard = size_bytes / r
    lat_out = 2.0 * ceil_log2(m) * topo.inter_step_s("tree", protocol)
    bw_out = shard * tree_network_share(m) / topo.inter_rank_bw()
    wire = 2.0 * (r - 1) / r * size_bytes + 2.0 * shard
    return cost(BASE_LATENCY_S["ring"][protocol] + lat_in + lat_out, bw_in + bw_out, wire,
                (r - 1) / r * size_bytes + shard)


def spans_with_several_per_domain(op: str, topo: GroupTopology) -> np.ndarray:
    """Two levels exist: the group spans domains and has more than one rank in each."""
    return topo.spans_domains & (topo.ranks_per_domain > 1)
