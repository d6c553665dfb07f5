"""The parameter server (centralised baseline) and the dissemination barrier.

**Parameter server** with the server on one of the n workers (DESIGN §4): every other worker pushes
its S-byte gradient to the server and pulls the S-byte averaged model back. The server's link is
full duplex, so pushes and pulls overlap and it carries (n−1)·S in each direction:
    T = base + 2α + (n−1)·S/B_server
— linear in the number of workers, unlike the ring. Seed: 1.2 GB over 1 GB/s adds 1.2 s with 2
workers and 10.8 s with 10. B_server is the server's own link: its scale-up rate inside one domain,
one rank's NIC rate (capped by the scale-up rate) once the workers span domains.
Li et al., "Scaling distributed machine learning with the parameter server", OSDI 2014.

**Dissemination barrier**: ⌈log₂n⌉ rounds, rank i signals i + 2^k; once the group spans domains
some rank crosses the network in every round. Hensgen, Finkel & Manber, IJPP 1988.
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.algorithms.base import AlgoCost, ceil_log2, cost
from commmodel.collectives.protocols import BASE_LATENCY_S
from commmodel.collectives.topology import GroupTopology


def parameter_server_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """T = base + 2α + (n−1)·S/B_server (pushes and pulls overlap on a full-duplex link)."""
    n = topo.num_ranks
    bw = np.minimum(topo.intra_bw(), topo.inter_rank_bw())
    latency = BASE_LATENCY_S["ring"][protocol] + 2.0 * topo.slowest_step_s("ring", protocol)
    wire = (n - 1) * size_bytes
    return cost(latency, wire / bw, wire, wire)


def dissemination_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """Barrier: base + ⌈log₂n⌉·α of the slowest tier used (no payload)."""
    n = topo.num_ranks
    latency = BASE_LATENCY_S["ring"][protocol] + ceil_log2(n) * topo.slowest_step_s("ring", protocol)
    zero = np.zeros_like(n)
    return cost(latency, zero, zero)
