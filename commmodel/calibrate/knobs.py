"""The numbers a calibration solves (knobs) and the searches that solve them.

A knob is a sourced number of a System at a path (``("scale_up", "efficiency")``). :func:`solve` finds the
value that zeroes an objective (the model's median log time ratio on some rows), :func:`minimise` refines it
locally on a joint loss, :func:`sensitive` picks the first knob the model's time depends on.
"""

from __future__ import annotations

import math

import numpy as np

from commmodel.hardware.models import Sourced, System

KnobPath = tuple[str, ...]
"""Where a number lives in a System: ("scale_up", "efficiency"), ("scale_out", "in_network_reduction", "latency_s")."""

BOUNDS = {"efficiency": (1e-6, 1.0), "busbw_efficiency": (1e-6, 1.5), "latency_s": (1e-9, 10.0),
          "simple_fixed_s": (1e-9, 1.0)}
"""Search ranges (the profile rules): a tier efficiency is an achievable fraction of the line rate in (0, 1];
an in-network reduction's busbw efficiency may reach 1.5 (the switch reduces); latencies from 1 ns to 10 s;
a Simple-protocol fixed cost from 1 ns to 1 s."""

REFINE_FACTOR = 1.25
"""The joint refinement moves a knob at most this factor from its anchored value."""


def get_knob(system: System, path: KnobPath) -> float | None:
    """The current value at ``path`` (None when the tier or in-network reduction is absent)."""
    node = system
    for part in path:
        node = getattr(node, part, None)
        if node is None:
            return None
    return float(node.value)


def set_knob(system: System, path: KnobPath, value: float, source: str | None = None) -> System:
    """A copy of ``system`` with the sourced number at ``path`` replaced (no re-validation: values are in SI)."""
    tier_name, *rest = path
    tier = getattr(system, tier_name)
    if len(rest) == 1:
        old = getattr(tier, rest[0])
        if old is None:  # an optional knob the base does not set (simple_fixed_s)
            old = Sourced[float](value=value, source=source or "calibrated")
        new = old.model_copy(update={"value": value, "source": source or old.source})
        new_tier = tier.model_copy(update={rest[0]: new})
    else:
        inr = tier.in_network_reduction
        old = getattr(inr, rest[1])
        new = old.model_copy(update={"value": value, "source": source or old.source})
        new_inr = inr.model_copy(update={rest[1]: new})
        new_tier = tier.model_copy(update={"in_network_reduction": new_inr})
    return system.model_copy(update={tier_name: new_tier})


SOLVE_GRID_POINTS = 64
"""Knob values (log-spaced over its range) scanned for sign changes before bisecting each."""

SOLVE_LOCAL_POINTS = 25
"""Extra knob values, log-spaced within a factor :data:`REFINE_FACTOR` either side of the current (base) value.
The coarse grid steps by a factor 1.25; where the model's choice flips inside one such step (a tree below, a
ring above) the objective can cross zero twice between two coarse points and the root next to the sourced
base value would be missed (mscclpp NDmv4 2x8 all-reduce: the ring root at efficiency 0.945 fell between
0.80 and 1.0, leaving only a tree root at 0.51 that halved every other collective's bandwidth)."""


KEEP_BASE_LOG_TOLERANCE = 0.01
"""|median log(model/measured)| of a knob's rows at its current (sourced) value below which that value is itself a
candidate root (1%: within the run-to-run spread of an nccl-tests row): where the rows do not pin the knob (a
plateau, e.g. a NIC efficiency that an NVLS-priced all-reduce never reaches), the sourced value stays unless
another value fits the group's rows better (before: the plateau's edge, found as the only sign change, replaced a
sourced 0.95 by 0.683 and mispriced every other collective by 17%)."""


def solve(system: System, path: KnobPath, objective, increasing: bool, loss=None) -> tuple[float, bool]:
    """x in the knob's range with objective(set_knob(system, path, x)) = 0; (value, clamped).

    Where the model's choice of algorithm × protocol switches with the knob (NCCL's tuner picks a tree
    once a ring looks slow) the objective has several roots. Every sign change on a log grid is bisected;
    the current value joins them where it already fits (:data:`KEEP_BASE_LOG_TOLERANCE`); the root with the
    smallest ``loss`` (the joint error over all the group's fitted rows) wins, ties going to the root nearest the
    current value. Without a root the better end of the range is returned (clamped).
    """
    low, high = (math.log(v) for v in BOUNDS[path[-1]])
    current = get_knob(system, path)
    here = min(max(math.log(current), low), high) if current else 0.5 * (low + high)

    def f(log_x: float) -> float:
        return objective(set_knob(system, path, math.exp(log_x)))

    local = np.linspace(here - math.log(REFINE_FACTOR), here + math.log(REFINE_FACTOR), SOLVE_LOCAL_POINTS)
    grid = np.unique(np.concatenate([np.linspace(low, high, SOLVE_GRID_POINTS), np.clip(local, low, high)]))
    values = [f(x) for x in grid]
    roots = []
    for a, b, fa, fb in zip(grid[:-1], grid[1:], values[:-1], values[1:]):
        if fa == 0 or (fa < 0) != (fb < 0):
            roots.append(a if fa == 0 else bisect(f, a, b, fa < 0))
    if current and low <= here <= high and abs(f(here)) <= KEEP_BASE_LOG_TOLERANCE:
        roots.append(here)  # the sourced value already fits: it competes (and wins ties, at distance 0)
    if not roots:
        end = low if abs(values[0]) <= abs(values[-1]) else high
        return math.exp(end), True

    def rank(root: float) -> tuple[float, float]:
        error = loss(set_knob(system, path, math.exp(root))) if loss is not None else 0.0
        return (round(error, 9), abs(root - here))

    return math.exp(min(roots, key=rank)), False


def bisect(f, a: float, b: float, negative_at_a: bool) -> float:
    """The sign change of ``f`` between ``a`` and ``b`` (log knob)."""
    for _ in range(50):
        mid = 0.5 * (a + b)
        if (f(mid) < 0) == negative_at_a:
            a = mid
        else:
            b = mid
    return 0.5 * (a + b)


def minimise(system: System, path: KnobPath, loss, start: float) -> float:
    """Golden-section search of ``loss`` over log(knob) within a factor :data:`REFINE_FACTOR` of ``start`` (the
    anchored value) and the knob's range: local, so it keeps the anchor's choice of algorithm × protocol."""
    low, high = (math.log(v) for v in BOUNDS[path[-1]])
    a, b = max(low, math.log(start) - math.log(REFINE_FACTOR)), min(high, math.log(start) + math.log(REFINE_FACTOR))
    ratio = (math.sqrt(5.0) - 1.0) / 2.0

    def f(x: float) -> float:
        return loss(set_knob(system, path, math.exp(x)))

    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(50):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(d)
    anchor = math.log(start)
    # equal losses (a plateau the rows cannot resolve) keep the anchored value: ties go to the nearest to it
    best = min((f(anchor), anchor), (fc, c), (fd, d), key=lambda pair: (round(pair[0], 12), abs(pair[1] - anchor)))
    return math.exp(best[1])


def sensitive(system: System, paths: list[KnobPath], probe) -> KnobPath | None:
    """The first knob whose halving changes the model's time at the probe sizes by more than 0.1%."""
    reference = probe(system)
    for path in paths:
        value = get_knob(system, path)
        if value is None:
            continue
        changed = probe(set_knob(system, path, value * 0.5))
        if np.max(np.abs(changed / reference - 1.0)) > 1e-3:
            return path
    return None
