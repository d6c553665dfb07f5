"""Collective pricing speed: calls/s of ``collective_cost`` the way the planner calls it.

Run: ``python benchmarks/collective_speed.py``. The planner prices ~thousands of groups per search
in one vectorised call per collective (H8 measured ~1.2 ms of the planner's 3.2 ms there). Prints
calls/s for a 2,000-group auto call on a multi-node system, a scalar call, and groups/s.
"""

from __future__ import annotations

import time

import numpy as np

from commmodel.collectives import collective_cost
from commmodel.hardware.cluster import Cluster
from commmodel.io.profiles import load_system


def _rate(fn, min_time_s: float = 1.0) -> float:
    fn()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_time_s:
        fn()
        calls += 1
    return calls / (time.perf_counter() - start)


def main() -> None:
    system = Cluster.for_gpus(load_system("dgx-h100"), 1024).system
    rng = np.random.default_rng(0)
    groups = 2000
    n = 2.0 ** rng.integers(1, 11, groups)
    per_node = np.minimum(n, 2.0 ** rng.integers(0, 4, groups))
    sizes = 2.0 ** rng.integers(10, 32, groups)
    for selection in ("nccl", "fastest"):  # auto by NCCL's tuner estimate (default) / physically fastest
        print(f"selection={selection}")
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            rate = _rate(lambda: collective_cost(op, sizes, system, n, per_node, selection=selection))
            print(f"{op:<15} {groups} groups/call: {rate:8.0f} calls/s  {rate * groups / 1e6:6.2f} M groups/s  "
                  f"{1e3 / rate:6.3f} ms/call")
        rate = _rate(lambda: collective_cost("all_reduce", 2**30, system, 16, selection=selection))
        print(f"{'all_reduce':<15} scalar call:       {rate:8.0f} calls/s  {1e6 / rate:6.1f} us/call")


if __name__ == "__main__":
    main()
