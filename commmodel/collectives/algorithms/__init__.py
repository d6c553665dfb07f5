"""The algorithm registry (one small uniform entry per algorithm, like nccl-tests' table)."""

from __future__ import annotations

from commmodel.collectives.algorithms.base import Algorithm
from commmodel.collectives.algorithms.ring import ring_cost
from commmodel.errors import CollectiveError

ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("ring", frozenset({"all_reduce", "all_gather", "reduce_scatter"}), ring_cost),
    )
}


def get_algorithm(name: str) -> Algorithm:
    """The registry entry called ``name``."""
    key = name.strip().lower().replace("-", "_")
    if key not in ALGORITHMS:
        raise CollectiveError(f"unknown algorithm {name!r}; known: auto, all, {', '.join(ALGORITHMS)}")
    return ALGORITHMS[key]
