"""The one entry point the rest of commmodel uses: :func:`collective_cost`.

Vectorised: ``size_bytes``, ``num_ranks`` and ``ranks_per_node`` broadcast against each other, so
the step model and the planner price thousands of collectives in one call. ``algorithm="auto"``
takes the element-wise minimum over every applicable algorithm × protocol, the way NCCL's tuner
does (``src/graph/tuning.cc``: min over algorithm × protocol of base + steps·α + S/B), and reports
which one won. By default it chooses among the algorithms NCCL implements (``candidates="nccl"``),
because that is what runs on GPUs; ``candidates="all"`` lets the textbook ones win too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from commmodel.collectives.libraries import get_library, host_library_cost
from commmodel.collectives.algorithms import ALGORITHMS, NET_SIMPLE_ONLY, AlgoCost, Algorithm, get_algorithm
from commmodel.collectives.primitives import ArrayLike, busbw_factor, get_primitive
from commmodel.collectives.protocols import LAUNCH_PER_EXTRA_GPU_S, PROTOCOLS
from commmodel.collectives.topology import GroupTopology, group_topology
from commmodel.collectives.tuner import TunerView
from commmodel.errors import CollectiveError
from commmodel.hardware.models import System

REDUCTION_BYTES_PER_BYTE = 3.0
"""γ term: reducing one byte reads two operands and writes one result in device memory."""


@dataclass(frozen=True)
class CollectiveCost:
    """Predicted cost of one collective (arrays, broadcast over the inputs)."""

    op: str
    """Canonical primitive name (all_reduce, ...)."""
    size_bytes: np.ndarray
    """S, the whole buffer as nccl-tests counts it."""
    num_ranks: np.ndarray
    """Ranks in the communicator."""
    algorithm: np.ndarray
    """Name of the algorithm priced (the winner, with auto), element-wise."""
    latency_s: np.ndarray
    """The α part of the time (launch and per-step latencies)."""
    bandwidth_s: np.ndarray
    """The β (and γ) part of the time (bytes over bandwidth)."""
    protocol: np.ndarray = field(default_factory=lambda: np.asarray("Simple"))
    """NCCL protocol of the winner (LL, LL128 or Simple), element-wise."""
    bytes_per_rank: np.ndarray = field(default_factory=lambda: np.asarray(np.nan))
    """Bytes the busiest rank receives (ring all-reduce: 2(n−1)/n·S)."""

    @property
    def time_s(self) -> np.ndarray:
        """Total time: latency part + bandwidth part."""
        return self.latency_s + self.bandwidth_s

    @property
    def algbw_bytes_per_s(self) -> np.ndarray:
        """nccl-tests algbw = S / t."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.time_s > 0, self.size_bytes / self.time_s, 0.0)

    @property
    def busbw_bytes_per_s(self) -> np.ndarray:
        """nccl-tests busbw = algbw × factor(op, n)."""
        return self.algbw_bytes_per_s * busbw_factor(self.op, self.num_ranks)


def applicable(op: str, topo: GroupTopology, system: System | None = None,
               among: frozenset[str] | None = None) -> dict[str, np.ndarray]:
    """Algorithm name -> boolean mask of where it applies to ``op`` on this topology (of the algorithms
    named in ``among`` only, when given: the others' rules are not evaluated), in registry order."""
    prim = get_primitive(op)
    out = {}
    for algo in ALGORITHMS.values():
        if prim.name in algo.primitives and (among is None or algo.name in among):
            rule = algo.applies(prim.name, topo)
            if isinstance(rule, bool):  # a plain bool holds everywhere or nowhere
                if rule:
                    out[algo.name] = np.broadcast_to(True, topo.num_ranks.shape)
            elif (mask := _shaped(rule, topo.num_ranks.shape)).any():
                out[algo.name] = mask
    return out


def protocol_mask(algo: Algorithm, protocol: str, topo: GroupTopology) -> np.ndarray | None:
    """Where ``algo`` may run with ``protocol``: across domains only what the fabric's software allows
    (``scale_out.nccl_protocols``), LL128 only where NCCL enables it; point-to-point patterns use Simple once they
    cross the network. None: everywhere (no mask to apply)."""
    mask = topo.protocol_allowed(protocol)
    if protocol == "LL128":
        mask = topo.ll128_enabled() if mask is None else mask & topo.ll128_enabled()
    if algo.name in NET_SIMPLE_ONLY and protocol != "Simple":
        mask = ~topo.spans_domains if mask is None else mask & ~topo.spans_domains
    return mask


ALL_ALGORITHMS = frozenset(ALGORITHMS)
NCCL_ALGORITHMS = frozenset(name for name, algo in ALGORITHMS.items() if algo.nccl)
"""The algorithms ``candidates="nccl"`` chooses among."""

SELECTIONS = ("nccl", "fastest", "library")
"""How ``auto`` (and ``protocol="auto"``) chooses: by NCCL's own tuner estimate (:mod:`.tuner`), the
physically fastest candidate, or the library's own rule (``library``: NCCL's tuner for nccl, see
:mod:`.libraries`)."""


def _check_inputs(size_bytes: ArrayLike, gpus_per_process: int, protocol: str, candidates: str,
                  selection: str = "nccl") -> np.ndarray:
    size = np.asarray(size_bytes, dtype=float)
    if not (np.isfinite(size) & (size >= 0)).all():
        raise CollectiveError(f"message size must be a finite number of bytes ≥ 0, got {size_bytes!r}; e.g. --size 1GiB")
    if int(gpus_per_process) != gpus_per_process or gpus_per_process < 1:
        raise CollectiveError(f"gpus_per_process {gpus_per_process!r} must be a whole number ≥ 1 (1 = one process per GPU)")
    if protocol != "auto" and protocol not in PROTOCOLS:
        raise CollectiveError(f"unknown protocol {protocol!r}; use auto or one of {', '.join(PROTOCOLS)}")
    if candidates not in ("nccl", "all"):
        raise CollectiveError(f"candidates {candidates!r} must be 'nccl' (what NCCL runs) or 'all'")
    if selection not in SELECTIONS:
        raise CollectiveError(f"selection {selection!r} must be 'nccl' (choose by NCCL's tuner estimate), "
                              f"'library' (the library's own rule) or 'fastest' (choose the physically fastest)")
    return size


def collective_cost(
    op: str,
    size_bytes: ArrayLike,
    system: System,
    num_ranks: ArrayLike,
    ranks_per_node: ArrayLike | None = None,
    algorithm: str = "auto",
    *,
    protocol: str = "auto",
    candidates: str = "nccl",
    selection: str = "fastest",
    gpus_per_process: int = 1,
    include_reduction: bool = False,
    library: str | None = None,
) -> CollectiveCost:
    """Price ``op`` on ``num_ranks`` ranks of ``system`` for buffers of ``size_bytes``.

    ``algorithm`` is ``"auto"`` or a registry name. With ``auto``, ``selection="fastest"`` (default: the
    physical optimum, monotone in size and bandwidth, what the step model and planner use) picks the
    physically fastest algorithm × protocol (element-wise, among NCCL's algorithms unless
    ``candidates="all"``); ``selection="nccl"`` picks the pair NCCL's own tuner estimate ranks first
    (:mod:`commmodel.collectives.tuner`) and reports that pair's physical time — what nccl-tests measures,
    used by ``commmodel collective``/``sweep`` and ``validate``; a named algorithm that does not
    implement ``op`` or does not apply to the group is an error. ``protocol`` forces LL, LL128 or
    Simple. ``gpus_per_process`` > 1 adds the launch cost of nccl-tests' ``-g G`` mode (one thread
    driving G GPUs). ``include_reduction`` adds the γ term (3 bytes of device memory traffic per
    reduced byte, not overlapped: an upper estimate; measured efficiencies already contain it).
    ``library`` (:mod:`.libraries`: nccl, rccl, gloo, mpi, mpich) restricts ``auto`` to that library's
    algorithms; ``selection="library"`` follows its own rule; gloo and MPI are priced by their host forms.
    """
    prim = get_primitive(op)
    size = _check_inputs(size_bytes, gpus_per_process, protocol, candidates, selection)
    lib = None if library is None else get_library(library)
    if lib is not None and lib.is_host:
        return _host_cost(lib, prim.name, size, system, num_ranks, ranks_per_node, algorithm)
    if selection == "library":
        selection = "nccl" if lib is None else lib.device_selection
    topo = group_topology(system, num_ranks, ranks_per_node)
    shape = np.broadcast_shapes(size.shape, topo.num_ranks.shape)
    if prim.name == "barrier":
        size = np.zeros(shape)
    size = _shaped(size, shape)
    found = _candidates(prim.name, topo, algorithm, candidates, lib)
    if not found:
        raise CollectiveError(f"no algorithm applies to {prim.name} on {num_ranks!r} ranks of {system.name}")
    view = _tuner_view(selection)  # the library's own estimate (NCCL's, or per RCCL release)
    tuner = None if view is None else view(system, topo, size)
    best = _best(prim.name, size, topo, found, shape, protocol, include_reduction, tuner)
    if protocol != "auto" and not np.all(np.isfinite(best[0])):
        raise CollectiveError(
            f"protocol {protocol} cannot run {prim.name} with {', '.join(found)} here (LL128 needs NVLink, and an "
            f"RDMA network across nodes; point-to-point across nodes is Simple only; {system.name}'s network allows only "
            f"{', '.join(p for p in PROTOCOLS if p in topo.inter_protocols)}); use protocol auto"
        )
    latency, bandwidth, code, labels, moved = best
    single = _shaped(topo.num_ranks, shape) == 1
    latency = np.where(single, 0.0, latency + (gpus_per_process - 1) * LAUNCH_PER_EXTRA_GPU_S)
    bandwidth = np.where(single, 0.0, bandwidth)
    names, protos = _names(np.where(single, NONE_CODE, code), labels)
    return CollectiveCost(
        op=prim.name,
        size_bytes=size,
        num_ranks=_shaped(topo.num_ranks, shape),
        algorithm=names,
        latency_s=latency,
        bandwidth_s=bandwidth,
        protocol=protos,
        bytes_per_rank=np.where(single, 0.0, moved),
    )


def _tuner_view(selection: str) -> Any:
    """The tuner view a selection chooses by: NCCL's :class:`TunerView`, an RCCL release's (its tables are
    imported only when an RCCL selection asks for them: issue 17, start-up), or None (``fastest``)."""
    if selection in ("nccl", "fastest"):
        return TunerView if selection == "nccl" else None
    from commmodel.collectives.libraries.rccl_tuning import RCCL_VIEWS

    return RCCL_VIEWS.get(selection)


def _candidates(op: str, topo: GroupTopology, algorithm: str, candidates: str, lib) -> dict[str, np.ndarray]:
    """Algorithm name -> mask of where it may run: the named one (checked), or ``auto``'s candidate set
    (NCCL's algorithms unless ``candidates="all"``, within the library's), in registry order."""
    prim = get_primitive(op)
    if algorithm == "auto":  # only the candidates' applicability rules are evaluated
        among = NCCL_ALGORITHMS if candidates == "nccl" else None
        if lib is not None:
            among = frozenset(lib.device_algorithms) & (ALL_ALGORITHMS if among is None else among)
        return applicable(prim.name, topo, among=among)
    found = applicable(prim.name, topo)
    algo = get_algorithm(algorithm)
    if prim.name not in algo.primitives:
        raise CollectiveError(
            f"algorithm {algo.name!r} does not implement {prim.name}; it serves {', '.join(sorted(algo.primitives))}. "
            f"Use --algo auto or one of: {', '.join(found) or 'none'}"
        )
    if algo.name not in found or not np.all(found[algo.name]):
        raise CollectiveError(
            f"algorithm {algo.name!r} does not apply to {prim.name} on this group ({algo.applies_when}); "
            f"applicable here: {', '.join(found) or 'none'}"
        )
    return {algo.name: found[algo.name]}


def _host_cost(lib, op: str, size: np.ndarray, system: System, num_ranks: ArrayLike,
               ranks_per_node: ArrayLike | None, algorithm: str) -> CollectiveCost:
    """A host library's cost (:func:`.libraries.host_library_cost`) as a :class:`CollectiveCost`."""
    topo = group_topology(system, num_ranks, ranks_per_node)
    n = topo.num_ranks
    size = np.zeros_like(size) if op == "barrier" else size
    latency, bandwidth, wire, names = host_library_cost(lib, op, size, system, n, topo.ranks_per_node, algorithm)
    single = np.broadcast_to(n, names.shape) == 1
    return CollectiveCost(
        op=op, size_bytes=np.broadcast_to(size, names.shape), num_ranks=np.broadcast_to(n, names.shape),
        algorithm=np.where(single, "none", names).astype(object),
        latency_s=np.where(single, 0.0, latency), bandwidth_s=np.where(single, 0.0, bandwidth),
        protocol=np.asarray(np.full(names.shape, "none" if lib.transport == "" else lib.transport, dtype=object)),
        bytes_per_rank=np.where(single, 0.0, wire),
    )


NONE_CODE = -1
"""Winner code of a single-rank group (nothing to do): its algorithm and protocol read "none"."""


def _shaped(values: np.ndarray | float, shape: tuple) -> np.ndarray:
    """``values`` as an array of ``shape``: itself when it already has it (most candidates), else broadcast."""
    return values if getattr(values, "shape", None) == shape else np.broadcast_to(values, shape)


def _best(op: str, size: np.ndarray, topo: GroupTopology, found: dict[str, np.ndarray], shape: tuple,
          protocol: str, include_reduction: bool, tuner: TunerView | None = None) -> tuple[np.ndarray, ...]:
    """Element-wise choice over algorithms × protocols: (latency, bandwidth, winner code, labels, bytes).

    Each candidate's score is stacked and ``argmin`` picks the winner (the first on ties). The score is
    NCCL's tuner estimate where ``tuner`` models the candidate (its physical time elsewhere), or the
    physical time when ``tuner`` is None; the reported time is always the physical one. The winner
    travels as an integer code into ``labels`` (code 0 = no candidate applies), names are built once
    at the end by :func:`_names`.
    """
    labels: list[tuple[str, str]] = [("", "")]
    rows: list[list[np.ndarray]] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for name, mask in found.items():
            algo = ALGORITHMS[name]
            for proto in algo.protocols:
                if protocol not in ("auto", proto):
                    continue
                rule = protocol_mask(algo, proto, topo)
                where = mask if rule is None else mask & rule  # mask holds somewhere (applicable)
                if rule is not None and not where.any():
                    continue
                labels.append((name, proto))
                rows.append(_priced(op, size, topo, algo, proto, where, include_reduction, tuner))
    if not rows:
        inf = np.full(shape, np.inf)
        return inf, inf, np.zeros(shape, dtype=np.intp), labels, np.full(shape, np.nan)
    table = _candidate_table(rows, shape)
    pick = np.argmin(table[:, 1], axis=0)
    forced = None if tuner is None else tuner.protocol_override(op, size)
    if forced is not None:
        pick = _forced_protocol(pick, np.broadcast_to(forced, shape), labels, table[:, 0])
    total, _, latency, bandwidth, moved = np.take_along_axis(table, pick[None, None], axis=0)[0]
    found_any = np.isfinite(total)
    code = np.where(found_any, pick + 1, 0)
    return (np.where(found_any, latency, np.inf), np.where(found_any, bandwidth, np.inf), code, labels,
            np.where(found_any, moved, np.nan))


def _candidate_table(rows: list[list[np.ndarray]], shape: tuple) -> np.ndarray:
    """One array: candidate × (total, score, latency, bandwidth, bytes) × the groups' ``shape``."""
    try:  # every value already has the groups' shape (the step model's calls): no broadcasting
        table = np.array(rows)
    except ValueError:  # numpy refuses values of different shapes
        table = None
    if table is None or table.shape[2:] != shape:
        table = np.array([[_shaped(value, shape) for value in row] for row in rows])
    return table


def _priced(op: str, size: np.ndarray, topo: GroupTopology, algo: Algorithm, proto: str, where: np.ndarray,
            include_reduction: bool, tuner: TunerView | None) -> list[np.ndarray]:
    """[total, score, latency, bandwidth, bytes] of one algorithm × protocol; total and score are inf where it
    may not run (not ``where``) or prices NaN."""
    priced: AlgoCost = algo.cost(op, size, topo, proto)
    latency = priced.latency_s
    if proto == "Simple":  # calibrated pipeline fill / proxy cost of large messages, per tier
        latency = latency + topo.simple_fixed_s
    bw = priced.bandwidth_s
    if include_reduction:
        bw = bw + priced.reduced_bytes_per_rank * (REDUCTION_BYTES_PER_BYTE / topo.hbm_bw_bytes_per_s)
    total = latency + bw
    total = np.where(where & (total == total), total, np.inf)  # NaN and masked-out never win
    score = tuner.estimate_s(op, algo.nccl_estimate, proto, size) if tuner is not None else None
    score = total if score is None else np.where(np.isfinite(total) & (score == score), score, np.inf)
    return [total, score, latency, bw, priced.bytes_per_rank]


def _forced_protocol(pick: np.ndarray, forced: np.ndarray, labels: list[tuple[str, str]],
                     totals: np.ndarray) -> np.ndarray:
    """``pick`` moved to the same algorithm with the ``forced`` protocol (a PROTOCOL_INDEX code, −1: keep) where
    that pair is a candidate that runs here; elsewhere the tuner's pick stays (the override's pair unpriced)."""
    order = ("LL", "LL128", "Simple")
    pairs = labels[1:]
    # target[k, p]: index of (algorithm of pair k, protocol p) among the candidates, −1 if none
    target = np.array([[pairs.index((a, p)) if (a, p) in pairs else -1 for p in order] for a, _ in pairs])
    moved = target[pick, np.maximum(forced, 0)]
    ok = (forced >= 0) & (moved >= 0)
    moved = np.where(ok, moved, pick)
    runs = np.isfinite(np.take_along_axis(totals, moved[None], 0)[0])
    return np.where(ok & runs, moved, pick)


def _names(code: np.ndarray, labels: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    """(algorithm, protocol) name arrays from winner codes; :data:`NONE_CODE` reads "none"."""
    algos = np.array([a for a, _ in labels] + ["none"], dtype=object)
    protos = np.array([p for _, p in labels] + ["none"], dtype=object)
    # NONE_CODE = -1 indexes the trailing "none"; asarray keeps 0-d results arrays
    return np.asarray(algos[code], dtype=object), np.asarray(protos[code], dtype=object)


def all_algorithm_costs(op: str, size_bytes: ArrayLike, system: System, num_ranks: ArrayLike,
                        ranks_per_node: ArrayLike | None = None, *, gpus_per_process: int = 1,
                        selection: str = "fastest", library: str | None = None) -> dict[str, CollectiveCost]:
    """Every applicable algorithm priced separately (``--algo all``), each with the protocol ``selection``
    picks: NCCL's tuner choice (``"nccl"``), the library's own (``"library"``) or the physically fastest
    (``"fastest"``), priced as ``library`` runs it."""
    topo = group_topology(system, num_ranks, ranks_per_node)
    return {
        name: collective_cost(op, size_bytes, system, num_ranks, ranks_per_node, algorithm=name,
                              gpus_per_process=gpus_per_process, selection=selection, library=library)
        for name, mask in applicable(get_primitive(op).name, topo).items()
        if np.all(mask)
    }


def bytes_moved_per_rank(op: str, algorithm: str, size_bytes: ArrayLike, num_ranks: ArrayLike) -> np.ndarray:
    """Bytes the busiest rank receives when ``algorithm`` runs ``op`` on ``num_ranks`` ranks of one domain.

    Ring all-reduce of 4 GB on 8 GPUs: 2·7/8·4 GB = 7 GB; ring all-gather of S = 8 GB (1 GB per GPU):
    7/8·8 GB = 7 GB per GPU; parameter server: (n−1)·S at the server.
    """
    prim = get_primitive(op)
    algo = get_algorithm(algorithm)
    if prim.name not in algo.primitives:
        raise CollectiveError(f"algorithm {algo.name!r} does not implement {prim.name}")
    n = np.asarray(num_ranks, dtype=float)
    flat = GroupTopology(
        num_ranks=n, ranks_per_node=n, ranks_per_domain=n, num_domains=np.ones_like(n), num_nodes=np.ones_like(n),
        intra_latency_s=0.0, intra_bw_bytes_per_s=1.0, intra_line_bw_bytes_per_s=1.0, intra_hw="nvlink",
        host_staged=False, inter_latency_s=float("inf"), inter_bw_per_domain_bytes_per_s=np.zeros_like(n),
        inter_bw_per_rank_bytes_per_s=0.0, inter_ll128=False, nvls=None, sharp=None, hbm_bw_bytes_per_s=1.0,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(algo.cost(prim.name, np.asarray(size_bytes, dtype=float), flat, "Simple").bytes_per_rank)
