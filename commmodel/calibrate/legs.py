"""Which leg binds a multi-node group's large messages, and the least scale-up rate the measurement proves.

A collective that spans nodes runs two legs at once: the NICs between nodes (scale-out) and NVLink/PCIe
inside each node (scale-up). Its large-message rate is the slower leg's, e.g. NCCL's double binary tree on
two nodes runs at min(η_tree·B_intra/2, B_node) (:mod:`commmodel.collectives.algorithms.tree`), so a sweep
of that group constrains only the minimum: one number, not two. A calibration that solves the scale-out
efficiency alone cannot reproduce a measured rate above the model's intra-node bound (2x a3-megagpu-8g:
180.7 GB/s algbw at 8 GiB against the tree's NVLink chain bound 0.92 × 362 GB/s / 2 = 166.7 GB/s).

What the data do prove is a **lower bound** on the other leg: the measured rate was carried through it, so
its rate is at least the one that lets the model reach the measurement with the network at its fastest
(scale-out efficiency at its upper bound 1). :func:`least_binding_value` solves that least value; the
calibration raises the scale-up number to it only when it is above the base profile's (the sourced value
stands wherever the data do not contradict it) and only when no group inside one node measured the scale-up
tier directly (that group identifies it; a mixed group does not).

Pure: Systems and a pricing callable in, a number out.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from commmodel.calibrate.knobs import BOUNDS, KnobPath, get_knob, set_knob, solve
from commmodel.hardware.models import System

BINDING_TOLERANCE = 1e-3
"""A leg binds when the model, with the other leg at its fastest, is still slower than the measurement by more than
this median log ratio (0.1%: below any nccl-tests row's timer resolution, well above the bisection's precision)."""


def median_log_ratio(times: Callable[[System], np.ndarray], measured_s: np.ndarray) -> Callable[[System], float]:
    """System -> median of log(model time / measured time) over the rows ``times`` prices."""
    return lambda system: float(np.median(np.log(times(system) / measured_s)))


def least_binding_value(system: System, path: KnobPath, fastest: list[KnobPath],
                        times: Callable[[System], np.ndarray], measured_s: np.ndarray) -> float | None:
    """The least value of the efficiency at ``path`` at which the model reproduces ``measured_s`` with every knob of
    ``fastest`` at its upper bound; None when the base value already allows it (this leg does not bind) or when no
    value in the knob's range does (the other leg binds even at its fastest: the data blame neither on this one).
    """
    fast = system
    for other in fastest:
        if get_knob(fast, other) is not None:
            fast = set_knob(fast, other, BOUNDS[other[-1]][1])
    objective = median_log_ratio(times, measured_s)
    if objective(fast) <= BINDING_TOLERANCE:
        return None
    value, clamped = solve(fast, path, objective, increasing=False)
    base = get_knob(system, path)
    if clamped or (base is not None and value <= base * (1.0 + 1e-9)):
        return None
    return value
