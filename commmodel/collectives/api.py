"""The one entry point the rest of commmodel uses: :func:`collective_cost`.

Vectorised: ``size_bytes``, ``num_ranks`` and ``ranks_per_node`` broadcast against each other, so
the step model and the planner price thousands of collectives in one call. ``algorithm="auto"``
takes the element-wise minimum over every applicable algorithm × protocol, the way NCCL's tuner
does (``src/graph/tuning.cc``: min over algorithm × protocol of base + steps·α + S/B), and reports
which one won. By default it chooses among the algorithms NCCL implements (``candidates="nccl"``),
because that is what runs on GPUs; ``candidates="all"`` lets the textbook ones win too.
"""

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from commmodel.collectives.libraries import get_library, host_library_cost, resolve_library
from commmodel.collectives.algorithms import ALGORITHMS, get_algorithm
from commmodel.collectives import choice
from commmodel.collectives.primitives import ArrayLike, busbw_factor, get_primitive
from commmodel.collectives.protocols import LAUNCH_PER_EXTRA_GPU_S, PROTOCOLS
from commmodel.collectives.topology import GroupTopology, group_topology
from commmodel.collectives.tuner import TunerView
from commmodel.errors import CollectiveError
from commmodel.hardware.models import System


class CollectiveCost(NamedTuple):
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
    protocol: np.ndarray
    """NCCL protocol of the winner (LL, LL128 or Simple), element-wise."""
    bytes_per_rank: np.ndarray
    """Bytes the busiest rank receives (ring all-reduce: 2(n−1)/n·S)."""

    @property
    def time_s(self) -> np.ndarray:
        """Total time: latency part + bandwidth part."""
        return self.latency_s + self.bandwidth_s

    @property
    def algbw_bytes_per_s(self) -> np.ndarray:
        """nccl-tests algbw = S / t (0 for a barrier, which moves no data whatever size it was asked with)."""
        moved = 0.0 if self.op == "barrier" else self.size_bytes
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.time_s > 0, moved / self.time_s, 0.0)

    @property
    def busbw_bytes_per_s(self) -> np.ndarray:
        """nccl-tests busbw = algbw × factor(op, n)."""
        return self.algbw_bytes_per_s * busbw_factor(self.op, self.num_ranks)

    def records(self) -> list[dict[str, Any]]:
        """One plain dict per element (Python scalars, JSON-ready, one row of a DataFrame each): op, size_bytes,
        num_ranks, algorithm, protocol, time_s, latency_s, bandwidth_s, algbw_GBps, busbw_GBps, bytes_per_rank."""
        columns = {"size_bytes": self.size_bytes, "num_ranks": self.num_ranks, "algorithm": self.algorithm,
                   "protocol": self.protocol, "time_s": self.time_s, "latency_s": self.latency_s,
                   "bandwidth_s": self.bandwidth_s, "algbw_GBps": self.algbw_bytes_per_s / 1e9,
                   "busbw_GBps": self.busbw_bytes_per_s / 1e9, "bytes_per_rank": self.bytes_per_rank}
        flat = {k: np.ravel(np.broadcast_to(np.asarray(v), np.shape(self.time_s))) for k, v in columns.items()}
        rows = [{"op": self.op, **{k: _scalar(v[i]) for k, v in flat.items()}} for i in range(flat["time_s"].size)]
        return [{**row, "num_ranks": int(row["num_ranks"])} for row in rows]


def _scalar(value: Any) -> Any:
    """A numpy element as the Python scalar it holds (names in object arrays already are)."""
    return value.item() if hasattr(value, "item") else value


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
            elif (mask := choice.shaped(rule, topo.num_ranks.shape)).any():
                out[algo.name] = mask
    return out


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


def _library_of(system: System, library: str | None) -> str:
    """The library priced: ``library`` checked against the system's GPUs, or the system's own when None."""
    if not isinstance(system, System):
        raise CollectiveError(f"system must be a System (commmodel.io.profiles.load_system('dgx-h100')), "
                              f"got {type(system).__name__} {system!r}")
    return resolve_library(system, library, flag="library=")[0]


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
    selection: str | None = None,
    gpus_per_process: int = 1,
    include_reduction: bool = False,
    library: str | None = None,
) -> CollectiveCost:
    """Price ``op`` on ``num_ranks`` ranks of ``system`` for buffers of ``size_bytes``.

    ``algorithm`` is ``"auto"`` or a registry name. With ``auto``, ``selection="library"`` (the default, None: what
    ``commmodel collective`` and ``sweep`` answer) picks what the library runs: NCCL's (or RCCL's) own tuner estimate
    ranks the pairs (:mod:`commmodel.collectives.tuner`) and the chosen pair's physical time is reported — what
    nccl-tests measures —, gloo and MPI follow their own rules; ``selection="nccl"`` is NCCL's tuner by name;
    ``selection="fastest"`` picks the physically fastest algorithm × protocol (element-wise, among the library's
    algorithms unless ``candidates="all"``): the physical optimum, monotone in size and bandwidth, what the step
    model and planner price (:func:`collective_times`). ``library`` None is the system's own (nccl on NVIDIA GPUs,
    rccl on AMD Instinct, gloo on CPU ranks: :func:`.libraries.default_library`); a device library on the other
    vendor's GPUs is an error. A named algorithm that does not
    implement ``op`` or does not apply to the group is an error. ``protocol`` forces LL, LL128 or
    Simple. ``gpus_per_process`` > 1 adds the launch cost of nccl-tests' ``-g G`` mode (one thread
    driving G GPUs). ``include_reduction`` adds the γ term (3 bytes of device memory traffic per
    reduced byte, not overlapped: an upper estimate; measured efficiencies already contain it).
    ``library`` (:mod:`.libraries`: nccl, rccl, gloo, mpi, mpich) restricts ``auto`` to that library's
    algorithms; gloo and MPI are priced by their host forms.
    """
    prim = get_primitive(op)
    selection = selection or "library"
    size = _check_inputs(size_bytes, gpus_per_process, protocol, candidates, selection)
    lib = get_library(_library_of(system, library))
    if lib.is_host:  # unless asked for the fastest, a host library runs what its rule picks
        return _host_cost(lib, prim.name, size, system, num_ranks, ranks_per_node, algorithm, selection)
    if selection == "library":
        selection = lib.device_selection
    elif selection == "nccl" and lib.family != "nccl":
        raise CollectiveError(f"selection 'nccl' is NCCL's tuner, and {system.name} runs {lib.name}; use "
                              f"selection='library' ({lib.name}'s own choice) or 'fastest'")
    topo = group_topology(system, num_ranks, ranks_per_node)
    shape = np.broadcast_shapes(size.shape, topo.num_ranks.shape)
    size = choice.shaped(size, shape)
    view = _tuner_view(selection)  # the library's own estimate (NCCL's, or per RCCL release)
    found, best = _chosen(prim.name, size, topo, system, num_ranks, algorithm, candidates, lib, protocol,
                          include_reduction, view)
    if protocol != "auto" and not np.all(np.isfinite(best[0])):
        raise CollectiveError(
            f"protocol {protocol} cannot run {prim.name} with {', '.join(found)} here (LL128 needs NVLink, and an "
            f"RDMA network across nodes; point-to-point across nodes is Simple only; {system.name}'s network allows only "
            f"{', '.join(p for p in PROTOCOLS if p in topo.inter_protocols)}); use protocol auto"
        )
    latency, bandwidth, code, labels, moved = best
    single = choice.shaped(topo.num_ranks, shape) == 1
    latency = np.where(single, 0.0, latency + (gpus_per_process - 1) * LAUNCH_PER_EXTRA_GPU_S)
    bandwidth = np.where(single, 0.0, bandwidth)
    names, protos = choice.names(np.where(single, choice.NONE_CODE, code), labels)
    return CollectiveCost(
        op=prim.name,
        size_bytes=size,
        num_ranks=choice.shaped(topo.num_ranks, shape),
        algorithm=names,
        latency_s=latency,
        bandwidth_s=bandwidth,
        protocol=protos,
        bytes_per_rank=np.where(single, 0.0, moved),
    )


STEP_SELECTION_LINE = ("collectives of a step: each priced at the fastest algorithm × protocol the device library "
                       "runs at its size and group (`commmodel collective --selection fastest` answers the same; "
                       "`collective`'s default is the library's own tuner choice, what nccl-tests measures); a host "
                       "library (gloo, MPI) by its own rule")
"""The assumption line every step command prints for how :func:`collective_times` picks each collective."""


def collective_times(ops: Sequence[str], op_code: np.ndarray, size_bytes: np.ndarray, system: System,
                     num_ranks: np.ndarray, ranks_per_node: np.ndarray, *, library: str | None = None) -> np.ndarray:
    """Seconds of many collectives of several ops in one pass: element i is, bit for bit,
    ``collective_cost(ops[op_code[i]], size_bytes[i], system, num_ranks[i], ranks_per_node[i], library=library,
    selection="fastest").time_s`` (algorithm and protocol ``auto``; a host library's own rule), for 1-d arrays of one
    length.

    The inputs are checked and the groups' topology built once for every element; each op is then priced on its
    own elements (one :func:`.choice.best` per op) and no names or :class:`CollectiveCost` are built: the step model's
    per-evaluation cost (issue 17: fixed cost per call). Host libraries (gloo, MPI) use their own forms, op by op."""
    lib = get_library(_library_of(system, library))
    times = np.zeros(np.shape(size_bytes))
    if lib.is_host:
        for code, op in enumerate(ops):
            mine = op_code == code
            if mine.any():
                times[mine] = collective_cost(op, size_bytes[mine], system, num_ranks[mine], ranks_per_node[mine],
                                              library=lib.name).time_s
        return times
    size = _check_inputs(size_bytes, 1, "auto", "nccl")
    topo = group_topology(system, num_ranks, ranks_per_node)
    for code, op in enumerate(ops):
        index = np.flatnonzero(op_code == code)
        if index.size:
            mine = topo if index.size == size.size else topo.take(index)
            times[index] = _auto_time_s(get_primitive(op).name, size.take(index), mine, system, lib)
    return times


def _auto_time_s(op: str, size: np.ndarray, topo: GroupTopology, system: System, lib) -> np.ndarray:
    """:func:`collective_cost`'s time for algorithm, protocol and ``candidates`` auto, selection ``fastest``, one
    process per GPU, on a topology already built (1-d arrays)."""
    latency, bandwidth = _chosen(op, size, topo, system, topo.num_ranks, "auto", "nccl", lib, "auto", False,
                                 None)[1][:2]
    single = topo.num_ranks == 1
    return np.where(single, 0.0, latency) + np.where(single, 0.0, bandwidth)


def _chosen(op: str, size: np.ndarray, topo: GroupTopology, system: System, num_ranks: ArrayLike, algorithm: str,
            candidates: str, lib, protocol: str, include_reduction: bool, view: Any) -> tuple[dict, tuple]:
    """(the candidates, :func:`.choice.best`'s winner) of ``op`` on ``size`` (already of the groups' shape; a barrier
    moves nothing), scored by ``view``'s estimate (:func:`_tuner_view`) — what :func:`collective_cost` and
    :func:`collective_times` share. ``num_ranks`` as the caller gave it, for the error."""
    if op == "barrier":
        size = np.zeros(size.shape)
    found = _candidates(op, topo, algorithm, candidates, lib)
    if not found:
        raise CollectiveError(f"no algorithm applies to {op} on {num_ranks!r} ranks of {system.name}")
    tuner = None if view is None else view(system, topo, size)
    return found, choice.best(op, size, topo, found, size.shape, protocol, include_reduction, tuner)


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


def _host_forms(lib, op: str) -> list[str]:
    """The forms a host library has for ``op`` (one per algorithm family it runs), the names ``--algo all`` lists
    and ``--selection fastest`` picks among."""
    from commmodel.collectives.libraries.host import FORMS  # loaded with the host library itself

    return sorted({lib.form_of(op, a) for a, o in FORMS if o == op and a in lib.host_algorithms})


def _host_fastest(lib, op: str, size: np.ndarray, system: System, n: np.ndarray,
                  per_node: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`.libraries.host_library_cost` of the physically fastest of ``lib``'s algorithms for ``op``,
    element-wise (``--selection fastest``: the time, not the library's own rule, picks)."""
    best = None
    for name in _host_forms(lib, op):
        found = host_library_cost(lib, op, size, system, n, per_node, name)
        if best is None:
            best = found
            continue
        better = found[0] + found[1] < best[0] + best[1]
        best = tuple(np.where(better, new, old) for new, old in zip(found, best))
    if best is None:
        raise CollectiveError(f"{lib.name} has no algorithm for {op}")
    return best


def _host_cost(lib, op: str, size: np.ndarray, system: System, num_ranks: ArrayLike,
               ranks_per_node: ArrayLike | None, algorithm: str, selection: str = "library") -> CollectiveCost:
    """A host library's cost (:func:`.libraries.host_library_cost`) as a :class:`CollectiveCost`: ``auto`` by the
    library's own rule, or by the time where ``selection`` is ``fastest``."""
    topo = group_topology(system, num_ranks, ranks_per_node)
    n = topo.num_ranks
    size = np.zeros_like(size) if op == "barrier" else size
    if algorithm == "auto" and selection == "fastest":
        latency, bandwidth, wire, names = _host_fastest(lib, op, size, system, n, topo.ranks_per_node)
    else:
        latency, bandwidth, wire, names = host_library_cost(lib, op, size, system, n, topo.ranks_per_node, algorithm)
    single = np.broadcast_to(n, names.shape) == 1
    return CollectiveCost(
        op=op, size_bytes=np.broadcast_to(size, names.shape), num_ranks=np.broadcast_to(n, names.shape),
        algorithm=np.where(single, "none", names).astype(object),
        latency_s=np.where(single, 0.0, latency), bandwidth_s=np.where(single, 0.0, bandwidth),
        protocol=np.asarray(np.full(names.shape, "none" if lib.transport == "" else lib.transport, dtype=object)),
        bytes_per_rank=np.where(single, 0.0, wire),
    )


def all_algorithm_costs(op: str, size_bytes: ArrayLike, system: System, num_ranks: ArrayLike,
                        ranks_per_node: ArrayLike | None = None, *, gpus_per_process: int = 1,
                        selection: str = "library", library: str | None = None) -> dict[str, CollectiveCost]:
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


def library_algorithm_costs(op: str, size_bytes: ArrayLike, system: System, num_ranks: ArrayLike,
                            library: str, ranks_per_node: ArrayLike | None = None,
                            selection: str = "library") -> dict[str, CollectiveCost]:
    """Every algorithm ``library`` runs for ``op``, priced separately as it runs it: a host library's forms (the
    candidates of its own rule, :mod:`.libraries.host`), a device library's registry algorithms (NCCL: every
    applicable one; RCCL: its device algorithms), each with the protocol ``selection`` picks."""
    lib = get_library(library)
    if lib.is_host:
        return {name: collective_cost(op, size_bytes, system, num_ranks, ranks_per_node, algorithm=name,
                                      library=library) for name in _host_forms(lib, op)}
    costs = {name: cost for name, cost in all_algorithm_costs(op, size_bytes, system, num_ranks, ranks_per_node,
                                                               selection=selection, library=library).items()
             if lib.name == "nccl" or name in lib.device_algorithms}
    if not costs:
        raise CollectiveError(f"no algorithm of {lib.name} applies to {op} on these ranks of {system.name}")
    return costs


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
