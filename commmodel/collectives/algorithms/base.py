"""The algorithm registry entry: a name, the primitives it serves, where it applies, its cost.

Every algorithm prices one primitive for one protocol and returns an :class:`AlgoCost`; the API
takes the element-wise minimum over algorithms × protocols (``auto``). ``nccl`` marks the
algorithms NCCL (and so nccl-tests, PyTorch and Megatron on GPUs) actually runs: ``auto`` chooses
among those by default, the textbook ones (recursive doubling, Bruck, ...) are there to compare.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from commmodel.collectives.algorithms.steps import StepForm
from commmodel.collectives.topology import GroupTopology
from commmodel.collectives.tuner import TunerEstimate


class AlgoCost(NamedTuple):
    """One algorithm × protocol priced on one group (arrays broadcast over sizes and groups)."""

    latency_s: np.ndarray
    """The α part: launch plus per-step latencies on the critical path."""
    bandwidth_s: np.ndarray
    """The β part: bytes over the bandwidth of the tier that limits them."""
    bytes_per_rank: np.ndarray
    """Bytes the busiest rank receives (the seed examples: ring all-reduce of S moves 2(n−1)/n·S)."""
    reduced_bytes_per_rank: np.ndarray
    """Bytes the busiest rank must combine arithmetically (for the optional γ term)."""


CostFn = Callable[[str, np.ndarray, GroupTopology, str], AlgoCost]
"""(op, size_bytes, topology, protocol) -> AlgoCost."""
AppliesFn = Callable[[str, GroupTopology], np.ndarray | bool]
"""(op, topology) -> where the algorithm can run (bool or boolean array)."""


def always(op: str, topo: GroupTopology) -> bool:
    """Applies everywhere."""
    return True


class Algorithm(NamedTuple):
    """One collective algorithm: formula, assumptions and citation live in ``cost``'s docstring."""

    name: str
    """Registry name used by --algo (ring, tree, ...)."""
    primitives: frozenset[str]
    """Primitives it implements."""
    cost: CostFn
    """Its α-β(-γ) cost for one protocol."""
    protocols: tuple[str, ...] = ("Simple",)
    """NCCL protocols it can run with (textbook algorithms: Simple only)."""
    applies: AppliesFn = always
    """Where it can run."""
    applies_when: str = "always"
    """The applicability rule in words, for error messages."""
    nccl: bool = False
    """Whether NCCL implements it (auto considers these by default)."""
    in_network: bool = False
    """Whether switches reduce the data (may beat the Chan et al. lower bound)."""
    summary: str = ""
    """One line for --algo all tables and docs."""
    nccl_estimate: TunerEstimate | None = None
    """NCCL's own time estimate for it (tuning.cc, :mod:`..tuner`), by which ``selection="nccl"`` chooses;
    None: chosen by its physical time."""
    step_form: StepForm | None = None
    """Latency steps a calibration fit divides its intercept by (:mod:`.steps`); None: counted like a ring."""


def ceil_log2(n: np.ndarray) -> np.ndarray:
    """⌈log₂ n⌉ (0 for n = 1)."""
    return np.ceil(np.log2(np.maximum(np.asarray(n, dtype=float), 1.0)))


def floor_pow2(n: np.ndarray) -> np.ndarray:
    """The largest power of two ≤ n."""
    return 2.0 ** np.floor(np.log2(np.maximum(np.asarray(n, dtype=float), 1.0)))


def is_pow2(n: np.ndarray) -> np.ndarray:
    """n is a power of two."""
    return floor_pow2(n) == np.asarray(n, dtype=float)


def cost(latency_s, bandwidth_s, bytes_per_rank, reduced_bytes_per_rank=0.0) -> AlgoCost:
    """An :class:`AlgoCost` from array-likes."""
    return AlgoCost(np.asarray(latency_s, dtype=float), np.asarray(bandwidth_s, dtype=float),
                    np.asarray(bytes_per_rank, dtype=float), np.asarray(reduced_bytes_per_rank, dtype=float))
