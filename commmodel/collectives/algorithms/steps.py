"""Latency step counts per algorithm family: the α multiplier a calibration fit divides its intercept by.

t(S) = steps(n)·α + wire(n)·S/B (``calibrate/forms.py``); each registry entry names its form
(``Algorithm.step_form``), entries without one count like a ring.

- ring (Patarasuk & Yuan 2009): all-reduce 2(n−1); all-gather, reduce-scatter, all-to-all,
  gather, scatter n−1; broadcast/reduce as a pipelined chain n−1; send/recv 1.
- tree (NCCL's double binary tree; binomial trees for broadcast/reduce): all-reduce 2⌈log₂n⌉
  (reduce up, broadcast down); broadcast/reduce ⌈log₂n⌉.
- in-network (NVLS, NVLS-tree, CollNet/SHARP): 2 steps for all-reduce (into the switch and back), 1 otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable

StepForm = Callable[[str, int], float]
"""(canonical op, num_ranks) -> latency-bound steps on the critical path."""


def ring_steps(op: str, n: int) -> float:
    """2(n−1) for all-reduce, 1 for send/recv, n−1 otherwise (at least 1)."""
    if op == "all_reduce":
        return 2.0 * (n - 1)
    if op == "send_recv":
        return 1.0
    return float(max(n - 1, 1))


def tree_steps(op: str, n: int) -> float:
    """2⌈log₂n⌉ for all-reduce, ⌈log₂n⌉ otherwise (at least 1)."""
    depth = float(max(math.ceil(math.log2(max(n, 2))), 1))
    return 2.0 * depth if op == "all_reduce" else depth


def in_network_steps(op: str, n: int) -> float:
    """2 for all-reduce (into the switch and back), 1 otherwise."""
    return 2.0 if op == "all_reduce" else 1.0
