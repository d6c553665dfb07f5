"""Where a communicator's ranks sit, and what each kind of step costs there (DESIGN §4).

A group of ``num_ranks`` ranks has ``ranks_per_node`` of them in each node (packed TP group:
min(n, gpus_per_node); strided DP group: often 1). Steps between ranks of one scale-up domain
use the scale-up tier; steps between domains use the scale-out tier. Every GPU of a node is
assumed busy with a similar collective at the same time (true for nccl-tests on full nodes and
for data/tensor-parallel training), so a group's share of the node's NICs is proportional to the
ranks it has there: NCCL's rails give each GPU its nearest NIC(s).

All fields are numpy arrays so one call evaluates many groups (the planner's layouts) at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commmodel.errors import CollectiveError
from commmodel.hardware.models import System

ArrayLike = float | int | np.ndarray


@dataclass(frozen=True)
class GroupTopology:
    """Per-group costs of one step inside a domain and of one step between domains (arrays)."""

    num_ranks: np.ndarray
    """n: ranks in the communicator."""
    ranks_per_domain: np.ndarray
    """r: ranks of the group inside one scale-up domain (≤ n)."""
    num_domains: np.ndarray
    """m = n / r: domains the group spans (1 = all inside NVLink/PCIe)."""
    intra_latency_s: float
    """α of a step inside the domain."""
    intra_bw_bytes_per_s: float
    """Achievable unidirectional bandwidth per GPU inside the domain (line rate × efficiency)."""
    inter_latency_s: float
    """α of a step between domains (inf when the system has no scale-out tier)."""
    inter_bw_per_domain_bytes_per_s: np.ndarray
    """Achievable scale-out bandwidth available to this group's ranks in one domain, all NICs summed."""
    inter_bw_per_rank_bytes_per_s: float
    """Achievable scale-out bandwidth of one rank (its share of the node's NICs)."""

    @property
    def spans_domains(self) -> np.ndarray:
        """True where the group crosses the scale-out network."""
        return self.num_domains > 1


def group_topology(system: System, num_ranks: ArrayLike, ranks_per_node: ArrayLike | None = None) -> GroupTopology:
    """The topology view of a group of ``num_ranks`` with ``ranks_per_node`` in each node.

    ``ranks_per_node`` defaults to packing: min(n, gpus_per_node). A scale-up domain larger than a
    node (NVL72) holds ``ranks_per_node × domain_size / gpus_per_node`` ranks of the group.
    """
    n = np.asarray(num_ranks, dtype=float)
    if np.any(n < 1) or np.any(n != np.floor(n)):
        raise CollectiveError(f"number of ranks must be a whole number ≥ 1, got {num_ranks!r}")
    gpn = system.gpus_per_node
    per_node = np.minimum(n, gpn) if ranks_per_node is None else np.asarray(ranks_per_node, dtype=float)
    if np.any(per_node < 1) or np.any(per_node > gpn) or np.any(per_node > n):
        raise CollectiveError(
            f"ranks per node {ranks_per_node!r} must lie between 1 and min(ranks, {gpn} GPUs per node of {system.name})"
        )
    domain = system.scale_up.domain_size
    nodes_per_domain = max(1, domain // gpn)
    per_domain = np.minimum(n, per_node * nodes_per_domain)
    num_domains = np.ceil(n / per_domain)
    up = system.scale_up
    out = system.scale_out
    if out is None:
        if np.any(num_domains > 1):
            raise CollectiveError(
                f"system {system.name} has no scale-out network, so a group cannot leave its "
                f"{domain}-GPU domain; use fewer ranks or --network LINK:N"
            )
        inter_latency_s = float("inf")
        per_rank_bw = 0.0
    else:
        inter_latency_s = out.latency_s.value
        per_rank_bw = out.node_bw_bytes_per_s / gpn
    return GroupTopology(
        num_ranks=n,
        ranks_per_domain=per_domain,
        num_domains=num_domains,
        intra_latency_s=up.latency_s.value,
        intra_bw_bytes_per_s=up.effective_bw_bytes_per_s,
        inter_latency_s=inter_latency_s,
        inter_bw_per_domain_bytes_per_s=per_rank_bw * per_domain,
        inter_bw_per_rank_bytes_per_s=per_rank_bw,
    )
