"""Tidy records for the collective plots, computed from the collective model (no drawing here).

* :func:`collective_sweep` prices one collective over a range of message sizes for every
  applicable algorithm and finds the **crossover sizes** (where the fastest algorithm changes)
  and the **balance sizes** (where an algorithm's latency part equals its bandwidth part: below
  it the collective is latency-bound, above it bandwidth-bound). Both are located by refining a
  sign change of the model's own times, so a marker sits where the model says, not at a grid point.
* :func:`collective_scaling` prices one collective on growing GPU counts of several systems.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from commmodel.collectives import all_algorithm_costs, busbw_factor, collective_cost, get_primitive
from commmodel.errors import CommModelError
from commmodel.hardware.models import System
from commmodel.sweep_sizes import sweep_sizes_bytes
from commmodel.hardware.cluster import Cluster

_REFINE_POINTS = 129
_REFINE_ROUNDS = 4


@dataclass(frozen=True)
class CollectiveSweep:
    """One collective priced over sizes: per-algorithm rows, crossovers, and balance sizes."""

    op: str
    """Canonical primitive name."""
    system: str
    """System name the sweep ran on."""
    num_ranks: int
    """Ranks in the communicator."""
    rows: Any
    """DataFrame: size_bytes, algorithm, protocol, time_s, latency_s, bandwidth_s, algbw_GBps, busbw_GBps,
    best (fastest of the drawn algorithms at that size), nccl (the library runs it: NCCL's registry flag, or the
    host library's own rule at some size of the sweep)."""
    crossovers: Any
    """DataFrame: size_bytes, below (fastest just below), above (fastest just above)."""
    balance: Any
    """DataFrame: algorithm, size_bytes where its latency part equals its bandwidth part (NaN if none in range)."""

    @property
    def best_balance_bytes(self) -> float:
        """Where the fastest algorithm turns from latency-bound to bandwidth-bound (NaN if outside the range)."""
        best = self.rows[self.rows["best"]].sort_values("size_bytes")
        lat_bound = (best["latency_s"] >= best["bandwidth_s"]).to_numpy()
        if lat_bound.all() or not lat_bound.any():
            return float("nan")
        algo = best["algorithm"].iloc[int(np.argmin(lat_bound))]
        hit = self.balance[self.balance["algorithm"] == algo]["size_bytes"]
        return float(hit.iloc[0]) if len(hit) else float("nan")


power_of_two_sizes = sweep_sizes_bytes
"""The sweep grid (:func:`commmodel.sweep_sizes.sweep_sizes_bytes`) under the name the notebooks and docs/plots.md
use."""


def _refine_root(fn: Callable[[np.ndarray], np.ndarray], lo: float, hi: float) -> float:
    """Size in [lo, hi] where ``fn`` (a vectorised function of size) changes sign, refined geometrically."""
    for _ in range(_REFINE_ROUNDS):
        grid = np.geomspace(lo, hi, _REFINE_POINTS)
        sign = np.sign(fn(grid))
        change = np.nonzero(sign[:-1] != sign[1:])[0]
        if not len(change):
            break
        i = int(change[0])
        lo, hi = float(grid[i]), float(grid[i + 1])
    return float(np.sqrt(lo * hi))


def _is_nccl(name: str) -> bool:
    """Whether NCCL runs this algorithm (the registry's ``nccl`` flag; True where the registry has none; False for a
    host library's own form, e.g. gloo's ``bcube``, which is not in the registry)."""
    from commmodel.collectives.algorithms import ALGORITHMS

    return name in ALGORITHMS and bool(getattr(ALGORITHMS[name], "nccl", True))


def _pricer(op: str, system: System, num_ranks: int, ranks_per_node: int | None,
            library: str | None, selection: str = "fastest") -> Callable[[str, np.ndarray], Any]:
    """(algorithm, sizes) -> the cost the sweep draws for it, in ``library``: with the protocol ``selection`` picks
    (the physically fastest, or the library's own choice); ``auto`` is the algorithm the selection picks."""
    def price(name: str, sizes: np.ndarray) -> Any:
        return collective_cost(op, sizes, system, num_ranks, ranks_per_node, algorithm=name, selection=selection,
                               library=library)
    return price


def _chooser(price: Callable[[str, np.ndarray], Any], op: str, library: str | None) -> Callable[[np.ndarray], np.ndarray]:
    """sizes -> the drawn curve the selection picks at each size (``auto``; a host library's algorithm named by
    its form, as the curves are)."""
    from commmodel.collectives.libraries import get_library

    lib = get_library(library) if library is not None else None
    label = (lambda name: lib.form_of(op, name)) if lib is not None and lib.is_host else str
    return lambda sizes: np.asarray([label(x) for x in np.ravel(price("auto", sizes).algorithm)], dtype=object)


def _crossovers(price: Callable[[str, np.ndarray], Any], sizes: np.ndarray, winners: list[str],
                choose: Callable[[np.ndarray], np.ndarray] | None = None) -> list[dict]:
    """Where the marked algorithm changes, refined between the two sweep sizes around each change: where two curves
    meet (the fastest), or where the library's own choice turns (``choose``)."""
    out = []
    for i in range(len(sizes) - 1):
        below, above = winners[i], winners[i + 1]
        if below == above:
            continue
        if choose is not None:
            gap = lambda s, b=above: np.where(choose(s) == b, 1.0, -1.0)  # noqa: E731
        else:
            gap = lambda s, a=below, b=above: price(a, s).time_s - price(b, s).time_s  # noqa: E731
        out.append({"size_bytes": _refine_root(gap, sizes[i], sizes[i + 1]), "below": below, "above": above})
    return out


def _balance(price: Callable[[str, np.ndarray], Any], costs: dict[str, Any], sizes: np.ndarray) -> list[dict]:
    """Per algorithm, where its latency part equals its bandwidth part (NaN if not in the swept range)."""
    out = []
    for name, cost in costs.items():
        diff = cost.latency_s - cost.bandwidth_s
        change = np.nonzero(np.sign(diff[:-1]) != np.sign(diff[1:]))[0]
        size = float("nan")
        if len(change):
            i = int(change[0])
            def gap(s: np.ndarray, name: str = name) -> np.ndarray:
                cost_s = price(name, s)
                return cost_s.latency_s - cost_s.bandwidth_s

            size = _refine_root(gap, sizes[i], sizes[i + 1])
        out.append({"algorithm": name, "size_bytes": size})
    return out


def collective_sweep(op: str, system: System, num_ranks: int, sizes_bytes: Sequence[float] | np.ndarray,
                     ranks_per_node: int | None = None, algorithms: str | Sequence[str] = "nccl",
                     library: str | None = None, selection: str = "library") -> CollectiveSweep:
    """Price ``op`` for each algorithm at each size, with crossovers and balance sizes.

    ``algorithms``: "nccl" (those NCCL runs, what ``auto`` chooses among), "all" (textbook ones too),
    or a list of registry names. ``selection="library"`` (the default, as ``commmodel plot collective``,
    ``collective`` and ``sweep``) is described below.
    ``selection="fastest"``: each curve is an algorithm with its physically fastest
    protocol, and the fastest drawn algorithm is marked ``best`` per size, so crossovers sit where two curves meet.
    ``selection="library"``: each curve
    has the protocol the library's own rule picks (NCCL's tuner estimate) and ``best`` marks the algorithm that rule
    picks, with crossovers where that choice turns. ``library`` (default: the system's own, NCCL's registry on NVIDIA
    GPUs) draws that
    library's algorithms as it runs them (:func:`~commmodel.collectives.api.library_algorithm_costs`: RCCL's device
    algorithms, gloo's and MPI's host forms, whose rule is theirs, so "nccl"/"all" do not narrow them).
    """
    import pandas as pd

    from commmodel.collectives.api import library_algorithm_costs
    from commmodel.collectives.libraries import get_library

    sizes = np.unique(np.asarray(sizes_bytes, dtype=float))
    host = library is not None and get_library(library).is_host
    costs = (library_algorithm_costs(op, sizes, system, num_ranks, library, ranks_per_node, selection=selection)
             if library is not None else all_algorithm_costs(op, sizes, system, num_ranks, ranks_per_node,
                                                             selection=selection))
    if isinstance(algorithms, str) and algorithms in ("nccl", "all"):
        picked = {k: v for k, v in costs.items() if host or algorithms == "all" or _is_nccl(k)} or costs
    else:
        wanted = [algorithms] if isinstance(algorithms, str) else list(algorithms)
        missing = [name for name in wanted if name not in costs]
        if missing:
            raise CommModelError(f"algorithm(s) {', '.join(missing)} do not apply to {op} on {num_ranks} ranks of "
                                 f"{system.name}; applicable: {', '.join(costs) or 'none'}")
        picked = {name: costs[name] for name in wanted}
    costs = picked
    if not costs:
        raise CommModelError(f"no algorithm applies to {op} on {num_ranks} ranks of {system.name}")
    names = list(costs)
    runs = _is_nccl
    if host:  # a host library runs what its own rule picks at some size of the sweep; its other forms are drawn dashed
        lib = get_library(library)
        picked_names = {lib.form_of(op, str(c)) for c in np.unique(lib.choose(op, np.asarray(float(num_ranks)), sizes))}
        runs = picked_names.__contains__
    price = _pricer(op, system, num_ranks, ranks_per_node, library, selection)
    choose = _chooser(price, op, library) if selection != "fastest" else None
    if choose is not None:
        winners = [str(x) for x in choose(sizes)]
    else:
        winners = [names[i] for i in np.argmin(np.stack([costs[name].time_s for name in names]), axis=0)]
    factor = float(busbw_factor(op, num_ranks))
    frames = []
    for name, cost in costs.items():
        time_s = cost.time_s
        algbw = np.where(time_s > 0, sizes / np.where(time_s > 0, time_s, 1.0), 0.0) / 1e9
        protocol = getattr(cost, "protocol", None)
        frames.append(pd.DataFrame({
            "size_bytes": sizes, "algorithm": name,
            "protocol": np.broadcast_to(protocol, sizes.shape) if protocol is not None else "",
            "time_s": time_s, "latency_s": cost.latency_s, "bandwidth_s": cost.bandwidth_s,
            "algbw_GBps": algbw, "busbw_GBps": algbw * factor, "best": np.array(winners) == name,
            "nccl": runs(name),
        }))
    rows = pd.concat(frames, ignore_index=True)

    crossovers, balance = _crossovers(price, sizes, winners, choose), _balance(price, costs, sizes)
    return CollectiveSweep(
        op=get_primitive(op).name, system=system.name, num_ranks=int(num_ranks), rows=rows,
        crossovers=pd.DataFrame(crossovers, columns=["size_bytes", "below", "above"]),
        balance=pd.DataFrame(balance, columns=["algorithm", "size_bytes"]),
    )


def collective_scaling(op: str, size_bytes: float, systems: Mapping[str, System] | Sequence[System],
                       gpu_counts: Sequence[int]) -> Any:
    """DataFrame of ``op`` at ``size_bytes`` on each GPU count of each system (packed, whole nodes), each priced as
    ``commmodel collective`` prices it: the system's own library with that library's choice of algorithm
    (``selection="library"``; NCCL's tuner on NVIDIA GPUs, gloo's rule on CPU hosts).

    Columns: system, num_gpus, num_nodes, library, algorithm, time_s, busbw_GBps. Counts a system cannot
    hold (partial nodes, a box without scale-out beyond its domain) are left out.
    """
    import pandas as pd

    from commmodel.collectives.libraries import resolve_library

    named = systems if isinstance(systems, Mapping) else {s.name: s for s in systems}
    rows = []
    for label, system in named.items():
        for n in gpu_counts:
            try:
                cluster = Cluster.for_gpus(system, int(n))
                library = resolve_library(cluster.system, None)[0]
                cost = collective_cost(op, size_bytes, cluster.system, int(n), selection="library", library=library)
            except ValueError:  # CommModelError, or pydantic's ValidationError wrapping one
                continue
            rows.append({
                "system": label, "num_gpus": int(n), "num_nodes": cluster.num_nodes, "library": library,
                "algorithm": str(cost.algorithm.item()), "time_s": float(cost.time_s),
                "busbw_GBps": float(cost.busbw_bytes_per_s) / 1e9,
            })
    return pd.DataFrame(rows, columns=["system", "num_gpus", "num_nodes", "library", "algorithm", "time_s",
                                       "busbw_GBps"])
