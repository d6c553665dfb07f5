"""The one entry point the rest of commmodel uses: :func:`collective_cost`.

Vectorised: ``size_bytes``, ``num_ranks`` and ``ranks_per_node`` broadcast against each other, so
the step model and the planner price thousands of collectives in one call. ``algorithm="auto"``
takes the element-wise minimum over every applicable algorithm (NCCL's tuner picks the fastest
algorithm × protocol the same way) and reports which one won.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commmodel.collectives.algorithms import ALGORITHMS, Algorithm, get_algorithm
from commmodel.collectives.primitives import ArrayLike, busbw_factor, get_primitive
from commmodel.collectives.topology import GroupTopology, group_topology
from commmodel.errors import CollectiveError
from commmodel.hardware.models import System


@dataclass(frozen=True)
class CollectiveCost:
    """Predicted cost of one collective (arrays, broadcast over the inputs)."""

    op: str
    """Canonical primitive name (all_reduce, ...)."""
    size_bytes: np.ndarray
    """S, the whole buffer as nccl-tests counts it."""
    num_ranks: np.ndarray
    """Ranks in the communicator."""
    algorithm: np.ndarray
    """Name of the algorithm priced (the winner, with auto), element-wise."""
    latency_s: np.ndarray
    """The α part of the time (per-step latencies summed)."""
    bandwidth_s: np.ndarray
    """The β (and γ) part of the time (bytes over bandwidth)."""

    @property
    def time_s(self) -> np.ndarray:
        """Total time: latency part + bandwidth part."""
        return self.latency_s + self.bandwidth_s

    @property
    def algbw_bytes_per_s(self) -> np.ndarray:
        """nccl-tests algbw = S / t."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.time_s > 0, self.size_bytes / self.time_s, 0.0)

    @property
    def busbw_bytes_per_s(self) -> np.ndarray:
        """nccl-tests busbw = algbw × factor(op, n)."""
        return self.algbw_bytes_per_s * busbw_factor(self.op, self.num_ranks)


def applicable(op: str, topo: GroupTopology, system: System) -> dict[str, np.ndarray]:
    """Algorithm name -> boolean mask of where it applies to ``op`` on this topology."""
    prim = get_primitive(op)
    out = {}
    for algo in ALGORITHMS.values():
        if prim.name in algo.primitives:
            mask = np.broadcast_to(algo.applies(prim.name, topo, system), topo.num_ranks.shape)
            if np.any(mask):
                out[algo.name] = mask
    return out


def _price(algo: Algorithm, op: str, size: np.ndarray, topo: GroupTopology, system: System) -> tuple[np.ndarray, np.ndarray]:
    latency_s, bandwidth_s = algo.cost(op, size, topo, system)
    shape = np.broadcast_shapes(size.shape, topo.num_ranks.shape)
    return np.broadcast_to(latency_s, shape).astype(float), np.broadcast_to(bandwidth_s, shape).astype(float)


def collective_cost(
    op: str,
    size_bytes: ArrayLike,
    system: System,
    num_ranks: ArrayLike,
    ranks_per_node: ArrayLike | None = None,
    algorithm: str = "auto",
) -> CollectiveCost:
    """Price ``op`` on ``num_ranks`` ranks of ``system`` for buffers of ``size_bytes``.

    ``algorithm`` is ``"auto"`` (fastest applicable, element-wise) or a registry name; a named
    algorithm that does not implement ``op`` or does not apply to the group is an error.
    """
    prim = get_primitive(op)
    size = np.asarray(size_bytes, dtype=float)
    if np.any(~np.isfinite(size)) or np.any(size < 0):
        raise CollectiveError(f"message size must be a finite number of bytes ≥ 0, got {size_bytes!r}")
    topo = group_topology(system, num_ranks, ranks_per_node)
    shape = np.broadcast_shapes(size.shape, topo.num_ranks.shape)
    if prim.name == "barrier":
        size = np.zeros(shape)
    candidates = applicable(prim.name, topo, system)
    if algorithm != "auto":
        algo = get_algorithm(algorithm)
        if prim.name not in algo.primitives:
            raise CollectiveError(
                f"algorithm {algo.name!r} does not implement {prim.name}; it serves {', '.join(sorted(algo.primitives))}. "
                f"Use --algo auto or one of: {', '.join(candidates) or 'none'}"
            )
        if algo.name not in candidates or not np.all(candidates[algo.name]):
            raise CollectiveError(
                f"algorithm {algo.name!r} does not apply to {prim.name} on this group ({algo.applies_when}); "
                f"applicable here: {', '.join(candidates) or 'none'}"
            )
        candidates = {algo.name: candidates[algo.name]}
    if not candidates:
        raise CollectiveError(f"no algorithm applies to {prim.name} on {num_ranks!r} ranks of {system.name}")
    best_latency = np.full(shape, np.inf)
    best_bandwidth = np.full(shape, np.inf)
    best_name = np.full(shape, "", dtype=object)
    for name, mask in candidates.items():
        latency_s, bandwidth_s = _price(ALGORITHMS[name], prim.name, size, topo, system)
        total = np.where(np.broadcast_to(mask, shape), latency_s + bandwidth_s, np.inf)
        better = total < best_latency + best_bandwidth
        best_latency = np.where(better, latency_s, best_latency)
        best_bandwidth = np.where(better, bandwidth_s, best_bandwidth)
        best_name = np.where(better, name, best_name)
    return CollectiveCost(
        op=prim.name,
        size_bytes=np.broadcast_to(size, shape),
        num_ranks=np.broadcast_to(topo.num_ranks, shape),
        algorithm=best_name,
        latency_s=best_latency,
        bandwidth_s=best_bandwidth,
    )


def all_algorithm_costs(op: str, size_bytes: ArrayLike, system: System, num_ranks: ArrayLike,
                        ranks_per_node: ArrayLike | None = None) -> dict[str, CollectiveCost]:
    """Every applicable algorithm priced separately (``--algo all``)."""
    topo = group_topology(system, num_ranks, ranks_per_node)
    return {
        name: collective_cost(op, size_bytes, system, num_ranks, ranks_per_node, algorithm=name)
        for name, mask in applicable(get_primitive(op).name, topo, system).items()
        if np.all(mask)
    }
