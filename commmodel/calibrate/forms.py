"""The α-β form a fit uses for each (primitive, algorithm): t(S) = steps(n)·α + wire(n)·S/B.

``steps`` is the number of latency-bound steps on the critical path and ``wire`` the fraction of S
each rank must move (the busbw factor of nccl-tests ``doc/PERFORMANCE.md``), so the fitted B is the
**bus bandwidth** the collective approaches for large messages, directly comparable with a link's
line rate × efficiency. The fit itself is on t = a + b·S; these forms only turn the intercept a and
slope b into α = a/steps and B = wire/b.

Step counts (one small uniform entry per algorithm family):
- ring (Patarasuk & Yuan 2009): all-reduce 2(n−1); all-gather, reduce-scatter, all-to-all,
  gather, scatter n−1; broadcast/reduce as a pipelined chain n−1; send/recv 1.
- tree (NCCL's double binary tree; binomial trees for broadcast/reduce): all-reduce 2⌈log₂n⌉
  (reduce up, broadcast down); broadcast/reduce ⌈log₂n⌉.
- nvls / collnet / sharp (in-switch reduction): 2 steps for all-reduce (into the switch and back), 1 otherwise.
- anything else, and ``auto`` (the library chose): ring's counts, the large-message behaviour of
  NCCL and gloo alike. The reported α is then per ring step; the intercept a is exact either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from commmodel.collectives import get_primitive


def _ring(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2.0 * (n - 1)
    if op == "send_recv":
        return 1.0
    return float(max(n - 1, 1))


def _tree(op: str, n: int) -> float:
    depth = float(max(math.ceil(math.log2(max(n, 2))), 1))
    return 2.0 * depth if op == "all_reduce" else depth


def _in_network(op: str, n: int) -> float:
    return 2.0 if op == "all_reduce" else 1.0


STEP_FORMS: dict[str, Callable[[str, int], float]] = {
    "ring": _ring,
    "tree": _tree,
    "nvls": _in_network,
    "nvlstree": _in_network,
    "collnet": _in_network,
    "collnet_direct": _in_network,
    "collnet_chain": _in_network,
    "sharp": _in_network,
}
"""Algorithm family -> latency step count; unknown names and ``auto`` use ring."""


def latency_steps(op: str, algorithm: str, num_ranks: int) -> float:
    """Latency-bound steps of ``op`` with ``algorithm`` on ``num_ranks`` ranks (α multiplier)."""
    canonical = get_primitive(op).name
    form = STEP_FORMS.get(algorithm.strip().lower().replace("-", "_"), _ring)
    return form(canonical, int(num_ranks))


def wire_fraction(op: str, num_ranks: int) -> float:
    """Bytes each rank moves per byte of S (the busbw factor): 2(n−1)/n for all-reduce, (n−1)/n, or 1."""
    prim = get_primitive(op)
    return float(prim.busbw_factor(float(num_ranks)))
