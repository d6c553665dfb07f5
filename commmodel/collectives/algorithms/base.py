"""The algorithm registry entry: a name, the primitives it serves, where it applies, its cost."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from commmodel.collectives.topology import GroupTopology
from commmodel.hardware.models import System

CostFn = Callable[[str, np.ndarray, GroupTopology, System], tuple[np.ndarray, np.ndarray]]
"""(op, size_bytes, topology, system) -> (latency_s, bandwidth_s), arrays broadcast over the inputs."""
AppliesFn = Callable[[str, GroupTopology, System], np.ndarray | bool]
"""(op, topology, system) -> where the algorithm can run (bool or boolean array)."""


def always(op: str, topo: GroupTopology, system: System) -> bool:
    """Applies everywhere."""
    return True


@dataclass(frozen=True)
class Algorithm:
    """One collective algorithm: formula, assumptions and citation live in ``cost``'s docstring."""

    name: str
    """Registry name used by --algo (ring, tree, ...)."""
    primitives: frozenset[str]
    """Primitives it implements."""
    cost: CostFn
    """Its α-β(-γ) cost."""
    applies: AppliesFn = always
    """Where it can run."""
    applies_when: str = "always"
    """The applicability rule in words, for error messages."""
