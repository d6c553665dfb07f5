"""Interval arithmetic for a step's time split: compute, exposed communication, idle.

Within a step window W, with C the union of compute intervals and M the union of communication
intervals (all GPU streams of the rank): compute = |C|, exposed communication = |M \\ C| (communication
no computation hides), idle = |W| − |C ∪ M|. The three add up to the step time.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable


def union(intervals: Iterable[tuple[float, float]], start_s: float, end_s: float) -> list[tuple[float, float]]:
    """Sorted disjoint union of ``intervals`` clipped to [start_s, end_s]."""
    clipped = sorted((max(a, start_s), min(b, end_s)) for a, b in intervals if b > start_s and a < end_s)
    out: list[tuple[float, float]] = []
    for a, b in clipped:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


def total_s(intervals: Iterable[tuple[float, float]]) -> float:
    """Summed length of disjoint intervals."""
    return sum(b - a for a, b in intervals)


def step_split(compute: list[tuple[float, float]], comm: list[tuple[float, float]],
               start_s: float, end_s: float) -> dict[str, float]:
    """``{"time_s", "compute_s", "exposed_comm_s", "idle_s"}`` for the window [start_s, end_s]."""
    return split_windows(compute, comm, [(start_s, end_s)])[0]


def split_windows(compute: list[tuple[float, float]], comm: list[tuple[float, float]],
                  windows: list[tuple[float, float]]) -> list[dict[str, float]]:
    """:func:`step_split` of each window, the intervals merged once: a window reads only the merged intervals it
    overlaps (found by bisection), so a trace of millions of kernels and hundreds of steps is read once, not once
    a step."""
    merged_compute, merged_comm = _Merged(compute), _Merged(comm)
    out = []
    for start_s, end_s in windows:
        busy_compute = merged_compute.clip(start_s, end_s)
        compute_s = total_s(busy_compute)
        any_s = total_s(union(busy_compute + merged_comm.clip(start_s, end_s), start_s, end_s))
        out.append({"time_s": end_s - start_s, "compute_s": compute_s, "exposed_comm_s": any_s - compute_s,
                    "idle_s": (end_s - start_s) - any_s})
    return out


class _Merged:
    """Disjoint sorted intervals (their union over all time) with their ends for bisection."""

    def __init__(self, intervals: Iterable[tuple[float, float]]) -> None:
        self.intervals = union(intervals, float("-inf"), float("inf"))
        self.ends = [b for _, b in self.intervals]

    def clip(self, start_s: float, end_s: float) -> list[tuple[float, float]]:
        """The merged intervals inside [start_s, end_s] (disjoint, so starts and ends both ascend)."""
        out = []
        for a, b in self.intervals[bisect.bisect_right(self.ends, start_s):]:
            if a >= end_s:
                break
            out.append((max(a, start_s), min(b, end_s)))
        return out
