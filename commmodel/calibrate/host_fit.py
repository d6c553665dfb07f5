"""``calibrate fit`` for the host libraries (gloo, MPI): one call cost, α, β and γ per library, solved against the
library's own algorithms rather than NCCL's per-tier α-β forms.

Once the library's rule has named the algorithm, a host library's time is linear in its transport numbers
(:mod:`commmodel.collectives.libraries.host`):

    T = f_call·call + f·m·α + f·b·β + f·r·γ + w·m·wait

per measured point: the rule (torch's gloo: ring all-reduce and all-gather, binomial broadcast; Open MPI
``coll/tuned``'s fixed decisions) picks the algorithm at that (ranks, size), its form gives m messages, b streamed
bytes (an exchange's bytes twice where the sender copies too) and r reduced bytes, and f_call, f and w the base
system's ranks per core and the receiver's chance to be off its core (``host_cores``;
:func:`commmodel.collectives.libraries.host.rank_sharing`: the same for every round unless waiting ranks sleep in a
binomial tree; the wait term is the library's, kept as a known offset). So every point of every
primitive and rank count is one row of one linear system in x = (call, α, β, γ), solved for x ≥ 0 by least
absolute relative error (iteratively reweighted least squares over the non-negative active sets): one robust joint
fit, no freedom per primitive. A number the rows cannot resolve (no reduction measured: γ; a zero) keeps the
base's value and a note says so. The result is written as ``host_libraries.<library>`` of the profile.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from commmodel.collectives import get_primitive
from commmodel.collectives.libraries import get_library, host_transport
from commmodel.collectives.libraries.host import host_terms, rank_sharing
from commmodel.errors import CalibrationError
from commmodel.hardware.models import System
from commmodel.hardware.cluster import Cluster

PARAMETERS = ("call_s", "message_s", "bw_bytes_per_s", "reduce_bw_bytes_per_s")
"""The solved numbers, in the order of the linear system's columns (β and γ are solved as their inverses)."""
IRLS_ROUNDS = 30
"""Reweighting rounds of the least-absolute-relative-error solve (converged well before on every sweep tried)."""
IRLS_FLOOR = 1e-3
"""Smallest |relative residual| a weight 1/|r| may use (keeps exact points from taking all the weight)."""


@dataclass(frozen=True)
class HostPoints:
    """Measured points of one host library on one node, with their linear-system rows."""

    op: np.ndarray
    """Primitive per point."""
    num_ranks: np.ndarray
    """Ranks per point."""
    size_bytes: np.ndarray
    """Message size S per point."""
    time_s: np.ndarray
    """Measured median time per point."""
    algorithm: np.ndarray
    """The library's own algorithm per point."""
    design: np.ndarray
    """(points, 4): coefficients of call, α, β, γ."""
    offset_s: np.ndarray
    """Known part of the time (the time-shared wait)."""


def host_library(env: dict[str, Any], system: System) -> str | None:
    """The host library a measurement file was run with, when its base system is a CPU host (else None)."""
    backend = str(env.get("backend") or "").lower()
    return backend if backend in {"gloo", "mpi"} and system.ranks_are_cpus else None


def host_points(rows: list[dict[str, Any]], system: System, library: str, ops: list[str] | None,
                notes: list[str]) -> HostPoints:
    """The single-node points of ``rows`` and their rows of the linear system."""
    lib, wanted = get_library(library), {get_primitive(o).name for o in ops} if ops else None
    cols: dict[str, list] = {k: [] for k in ("op", "n", "s", "t", "algo", "design", "offset")}
    skipped = 0
    for row in rows:
        op = get_primitive(str(row["op"])).name
        if row.get("time_s_median") is None or (wanted is not None and op not in wanted):
            continue
        n, nodes = int(row["num_ranks"]), int(row.get("num_nodes") or 1)
        if nodes != 1 or n < 2 or n > system.gpus_per_node:
            skipped += 1
            continue
        size = np.asarray(float(row["size_bytes"]))
        name = str(lib.choose(op, np.asarray(float(n)), size).item())
        view = Cluster.for_gpus(system, n, n).system
        tr = host_transport(lib, view, np.asarray(False), np.asarray(float(n)))
        ranks, form = np.asarray(float(n)), lib.form_of(op, name)
        call_f, f, share = (float(x) for x in rank_sharing(view, form, op, ranks, ranks, tr.sleeping_waits))
        msgs, streamed, reduced, _ = host_terms(form, op, ranks, size, tr.copies, lib.copied_bytes(op, ranks, size),
                                                lib.forms)
        for key, value in (("op", op), ("n", n), ("s", float(size)), ("t", float(row["time_s_median"])),
                           ("algo", name), ("design", [call_f, f * float(msgs), f * float(streamed), f * float(reduced)]),
                           ("offset", share * float(msgs) * tr.wait_s)):
            cols[key].append(value)
    if skipped:
        notes.append(f"{skipped} point(s) across nodes or beyond {system.gpus_per_node} ranks per node not used: the "
                     f"host fit solves the intra-node transport")
    if len(cols["t"]) < len(PARAMETERS):
        raise CalibrationError(f"{len(cols['t'])} single-node {library} point(s): too few to solve call, α, β, γ; "
                               f"measure more sizes (`calibrate run --backend {library}`)")
    return HostPoints(op=np.array(cols["op"]), num_ranks=np.array(cols["n"]), size_bytes=np.array(cols["s"]),
                      time_s=np.array(cols["t"]), algorithm=np.array(cols["algo"]), design=np.array(cols["design"]),
                      offset_s=np.array(cols["offset"]))


def _nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin ‖a·x − b‖ over x ≥ 0, by trying every active set (4 columns: 15 sets)."""
    best, best_rss = np.zeros(a.shape[1]), float(b @ b)
    for k in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), k):
            x_sub = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
            if np.any(x_sub < 0):
                continue
            x = np.zeros(a.shape[1])
            x[list(cols)] = x_sub
            rss = float(np.sum((a @ x - b) ** 2))
            if rss < best_rss:
                best, best_rss = x, rss
    return best


def solve_host(points: HostPoints, fixed: dict[int, float] | None = None) -> np.ndarray:
    """x = (call, α, β, γ) ≥ 0 minimising Σ |offset + design·x − t| / t (IRLS); ``fixed`` columns keep theirs."""
    fixed = fixed or {}
    free = [k for k in range(points.design.shape[1]) if k not in fixed]
    known = points.offset_s + sum(points.design[:, k] * v for k, v in fixed.items())
    rel_a = points.design[:, free] / points.time_s[:, None]
    rel_b = (points.time_s - known) / points.time_s
    scale = np.where(np.abs(rel_a).max(0) > 0, np.abs(rel_a).max(0), 1.0)  # columns on one scale
    weights = np.ones(len(rel_b))
    x_free = np.zeros(len(free))
    for _ in range(IRLS_ROUNDS):
        root = np.sqrt(weights)[:, None]
        x_free = _nonnegative_lstsq(rel_a / scale * root, rel_b * root[:, 0]) / scale
        weights = 1.0 / np.maximum(np.abs(rel_a @ x_free - rel_b), IRLS_FLOOR)
    x = np.zeros(points.design.shape[1])
    x[free] = x_free
    for k, v in fixed.items():
        x[k] = v
    return x


def host_values(points: HostPoints, base: dict[str, float], notes: list[str], library: str) -> dict[str, float]:
    """Solved numbers as profile values (rates inverted). A rate the points cannot resolve (its column is zero, or
    it solves to an infinite rate: collinear with another term, like γ with β on a 2-rank ring) keeps ``base`` and
    the others are solved again with it fixed; a fixed cost or α may solve to zero."""
    inverse = {k: 1.0 / base[name] for k, name in enumerate(PARAMETERS) if name.endswith("bytes_per_s")}
    fixed: dict[int, float] = {}
    x = solve_host(points)
    while any(x[k] <= 0 and k not in fixed for k in inverse):
        k = next(k for k in inverse if x[k] <= 0 and k not in fixed)
        fixed[k] = inverse[k]
        notes.append(f"{library} {PARAMETERS[k]}: not resolved by these points; kept the base value")
        x = solve_host(points, fixed)
    return {name: (1.0 / x[k] if k in inverse else float(x[k])) for k, name in enumerate(PARAMETERS)}


__all__ = ["PARAMETERS", "HostPoints", "host_library", "host_points", "host_values", "solve_host"]
