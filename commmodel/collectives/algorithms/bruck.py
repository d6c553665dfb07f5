"""Bruck's algorithm for all-gather and all-to-all (few rounds, for short messages).

Round k sends to rank (i − 2^k) mod n, ⌈log₂ n⌉ rounds for any n:

* all-gather: round k forwards min(2^k, n − 2^k) blocks of S/n: ⌈log₂n⌉·α + (n−1)/n·S/B;
* all-to-all: round k forwards the blocks whose index has bit k set, about n/2 blocks of S/n:
  ⌈log₂n⌉·(α + S/(2B)) (plus two local rotations, not counted).

Because of the wrap-around, the ranks at a domain boundary talk across the network in every round,
so once the group spans domains every round runs at the network's latency and one rank's NIC rate.
Bruck, Ho, Kipnis, Upfal & Weathersby, "Efficient algorithms for all-to-all communications in
multiport message-passing systems", IEEE TPDS 1997; Thakur et al., IJHPCA 2005.
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.algorithms.base import AlgoCost, ceil_log2, cost
from commmodel.collectives.protocols import BASE_LATENCY_S
from commmodel.collectives.topology import GroupTopology


def bruck_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """All-gather ⌈log₂n⌉α + (n−1)/n·S/B; all-to-all ⌈log₂n⌉(α + S/(2B)); B, α of the slowest tier used."""
    n = topo.num_ranks
    rounds = ceil_log2(n)
    alpha = topo.slowest_step_s("ring", protocol)
    bw = np.minimum(topo.intra_bw(), topo.inter_rank_bw())
    latency = BASE_LATENCY_S["ring"][protocol] + rounds * alpha
    if op == "all_gather":
        wire = (n - 1) / n * size_bytes
    else:
        wire = rounds * np.floor(n / 2.0) / n * size_bytes
    return cost(latency, wire / bw, wire)
