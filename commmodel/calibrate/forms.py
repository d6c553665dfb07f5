"""The α-β form a fit uses for each (primitive, algorithm): t(S) = steps(n)·α + wire(n)·S/B.

``steps`` is the number of latency-bound steps on the critical path and ``wire`` the fraction of S
each rank must move (the busbw factor of nccl-tests ``doc/PERFORMANCE.md``), so the fitted B is the
**bus bandwidth** the collective approaches for large messages, directly comparable with a link's
line rate × efficiency. The fit itself is on t = a + b·S; these forms only turn the intercept a and
slope b into α = a/steps and B = wire/b.

Step counts come from the algorithm registry: each entry's ``step_form``
(:mod:`commmodel.collectives.algorithms.steps`: ring, tree, in-network). NCCL's own spellings of an
algorithm (``NVLSTree``, ``CollNet*`` in NCCL_ALGO and its logs) map to their registry entry;
anything else, and ``auto`` (the library chose), count like a ring, the large-message behaviour of
NCCL and gloo alike. The reported α is then per ring step; the intercept a is exact either way.
"""

from __future__ import annotations

from commmodel.collectives import get_primitive
from commmodel.collectives.algorithms import ALGORITHMS
from commmodel.collectives.algorithms.steps import ring_steps

NCCL_ALGO_SPELLINGS: dict[str, str] = {
    "nvlstree": "nvls_tree",
    "collnet": "sharp",
    "collnet_direct": "sharp",
    "collnet_chain": "sharp",
}
"""NCCL's algorithm names (NCCL_ALGO values, lower-cased; NVIDIA/nccl src/include/device.h ncclAlgoStr)
-> the registry entry that models them."""


def latency_steps(op: str, algorithm: str, num_ranks: int) -> float:
    """Latency-bound steps of ``op`` with ``algorithm`` on ``num_ranks`` ranks (α multiplier)."""
    canonical = get_primitive(op).name
    key = algorithm.strip().lower().replace("-", "_")
    entry = ALGORITHMS.get(NCCL_ALGO_SPELLINGS.get(key, key))
    form = entry.step_form if entry is not None and entry.step_form is not None else ring_steps
    return form(canonical, int(num_ranks))


def wire_fraction(op: str, num_ranks: int) -> float:
    """Bytes each rank moves per byte of S (the busbw factor): 2(n−1)/n for all-reduce, (n−1)/n, or 1."""
    prim = get_primitive(op)
    return float(prim.busbw_factor(float(num_ranks)))
