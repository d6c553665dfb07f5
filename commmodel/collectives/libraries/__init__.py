"""Communication libraries as an axis: each one's algorithm set, its selection rule and its transport.

* ``nccl`` (NVIDIA): the registry entries marked ``nccl``; ``auto`` chooses by NCCL's tuner estimate
  (:mod:`..tuner`) or, with ``selection="fastest"``, by physical time. Its costs are the registry's.
* ``rccl`` (AMD): ring, tree and the point-to-point patterns (no NVLS: ROCm/rccl@0cbce2a7
  ``src/graph/tuning.cc`` has all-zero NVLS and NVLS-tree rows), priced on the xGMI mesh by the registry;
  ``auto`` chooses by RCCL's own estimate with its per-gfx ``rcclTuningModel`` and, across ≥ 2 nodes, the
  model's ``llProtoRanges`` protocol override (:mod:`.rccl_tuning`); ``rccl-2.20`` is the release ROCm 6.2 ships,
  with its own tables and no override (:mod:`.rccl_2_20`). On a fully connected 8-GPU xGMI board
  one ring uses one link per GPU in each
  direction; RCCL builds several rings over disjoint links (7 links: up to 7 edge-disjoint Hamiltonian
  rings of K8), so the group streams at the profile's all-links rate × efficiency.
* ``gloo`` and ``mpi`` (Open MPI) / ``mpich``: a fixed rule read from their source (:mod:`.gloo`,
  :mod:`.mpi`) and the host α-β-γ forms of :mod:`.host` over their own transport.

Default per system (:func:`default_library`): gloo on CPU hosts, rccl on AMD Instinct (xGMI), nccl otherwise.
"""

from collections.abc import Callable, Mapping
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from commmodel.errors import CollectiveError
from commmodel.hardware.models import HOST_LIBRARY_KEYS, System

if TYPE_CHECKING:
    from commmodel.collectives.libraries.host import Form, Transport

Chooser = Callable[[str, np.ndarray, np.ndarray], np.ndarray]
"""(op, ranks, size_bytes) -> the library's algorithm name per element."""


class Library(NamedTuple):
    """One communication library."""

    name: str
    """--library name."""
    summary: str
    """What it is, in one line."""
    device_algorithms: frozenset[str] | None = None
    """Registry algorithms ``auto`` chooses among (device libraries, priced by the registry); None for host ones."""
    device_selection: str | None = None
    """Device libraries: "nccl" (NCCL's tuner estimate), "rccl" / "rccl-2.20" (that RCCL release's,
    :mod:`.rccl_tuning`, :mod:`.rccl_2_20`) or "fastest" (physical time) when asked for their own choice."""
    choose: Chooser | None = None
    """Host libraries: their fixed selection rule."""
    form_of: Callable[[str, str], str] = lambda op, name: name
    """Host libraries: the host form (:data:`.host.FORMS`) pricing one of the library's algorithm names."""
    host_algorithms: frozenset[str] = frozenset()
    """Host libraries: algorithms ``--algo NAME`` may force."""
    transport: str = ""
    """Host libraries: "gloo" (TCP) or "mpi" (shared memory / UCX)."""
    cost_why: str = ""
    """Where its time goes, in one clause (``compare`` quotes it to say why one library is slower)."""
    copied_bytes: Callable[[str, np.ndarray, np.ndarray], np.ndarray] = lambda op, n, s: 0.0 * s
    """Host libraries: bytes its own wrapper copies per call around the algorithm (op, ranks, S)."""
    forms: Mapping[tuple[str, str], "Form"] = MappingProxyType({})
    """Host libraries: their own forms where they differ from :data:`.host.FORMS` (gloo's segmented ring)."""

    @property
    def family(self) -> str:
        """The library a release belongs to ("rccl-2.20" → "rccl"): what per-library summaries group by."""
        return self.name.split("-")[0]

    @property
    def is_host(self) -> bool:
        """Whether it is priced by the host α-β-γ forms (gloo, MPI) rather than the device registry."""
        return self.choose is not None


DEVICE_LIBRARIES: dict[str, Library] = {lib.name: lib for lib in (
    Library("nccl", "NVIDIA NCCL: ring, tree, NVLS, CollNet/SHARP, p2p; NCCL's tuner chooses",
            device_algorithms=frozenset({"ring", "tree", "nvls", "nvls_tree", "sharp", "pairwise", "p2p"}),
            device_selection="nccl",
            cost_why="NCCL moves GPU buffers over NVLink/NVSwitch and the NICs (GPUDirect RDMA) and reduces on the GPU"),
    Library("rccl", "AMD RCCL: ring and tree (no NVLS) over xGMI; RCCL's tuner (per-gfx tuning model) chooses",
            device_algorithms=frozenset({"ring", "tree", "pairwise", "p2p"}), device_selection="rccl",
            cost_why="RCCL moves GPU buffers over xGMI and the NICs and reduces on the GPU"),
    Library("rccl-2.20", "AMD RCCL 2.20.5 as ROCm 6.2.x ships it: its own tuner tables (no llProtoRanges, no "
            "LL128 on gfx942); ring and tree over xGMI",
            device_algorithms=frozenset({"ring", "tree", "pairwise", "p2p"}), device_selection="rccl-2.20",
            cost_why="RCCL moves GPU buffers over xGMI and the NICs and reduces on the GPU"),
)}
"""The device libraries by name (priced by the algorithm registry)."""

HOST_LIBRARY_NAMES = HOST_LIBRARY_KEYS
"""The host libraries' names, in :func:`_host_libraries`' order (owned by the profile schema,
:data:`commmodel.hardware.models.HOST_LIBRARY_KEYS`, which ``host_libraries`` keys are checked against)."""


@cache
def _host_libraries() -> dict[str, Library]:
    """The host libraries (gloo, Open MPI, MPICH) by name, built when one is first asked for: their rules, forms
    and transports (gloo.py, mpi.py, host.py, rules.py) are imported then, not by every device-library command
    (issue 17: ~0.7 ms of a start)."""
    from commmodel.collectives.libraries.gloo import (GLOO_ALGORITHMS, GLOO_FORMS, GLOO_ONLY_ALGORITHMS, GLOO_RULES,
                                                      torch_copied_bytes)
    from commmodel.collectives.libraries.host import FORMS
    from commmodel.collectives.libraries.mpi import mpich_choose, ompi_choose, ompi_copied_bytes, ompi_form

    entries = {lib.name: lib for lib in (
        Library("gloo", "gloo over TCP (torch.distributed CPU backend): ring all-reduce, binomial broadcast, "
                "CPU reduction",
                choose=lambda op, n, s: GLOO_RULES[op].choose_all(n, s), host_algorithms=GLOO_ALGORITHMS,
                transport="gloo", copied_bytes=torch_copied_bytes, forms=GLOO_FORMS,
                cost_why="gloo copies GPU tensors to host memory and back over PCIe, sends them over TCP sockets "
                         "(about 0.1 ms per message and per call: thread hand-offs in gloo and torch's work queue; "
                         "one stream per peer at one core's copy rate, both ends copying an exchange) and sums them "
                         "on the CPU at the rank's share of host memory bandwidth"),
        Library("mpi", "Open MPI coll/tuned fixed decisions over shared memory / UCX",
                choose=ompi_choose, form_of=ompi_form, transport="mpi", copied_bytes=ompi_copied_bytes,
                cost_why="Open MPI stages a reduction's GPU tensors through host memory (its coll/cuda component), "
                         "moves them over shared memory or UCX and sums them on the CPU, and runs the other "
                         "collectives on the GPU buffers over CUDA IPC and UCX with one message per algorithm step",
                host_algorithms=frozenset(name for name, _ in FORMS) - GLOO_ONLY_ALGORITHMS),
        Library("mpich", "MPICH cvar thresholds (recursive doubling / Rabenseifner / Bruck / ring / binomial)",
                choose=mpich_choose, transport="mpi",
                host_algorithms=frozenset(name for name, _ in FORMS) - GLOO_ONLY_ALGORITHMS,
                cost_why="MPICH is priced CUDA-aware (GPU buffers over CUDA IPC and the network, one message per "
                         "algorithm step of its textbook algorithms; its GPU reduction path is not sourced here)"),
    )}
    assert tuple(entries) == HOST_LIBRARY_NAMES, "HOST_LIBRARY_NAMES names these entries"
    return entries


def __getattr__(name: str) -> Any:
    """``LIBRARIES`` (every library by name) and ``FORMS`` (:data:`.host.FORMS`), loaded on first use (PEP 562)."""
    if name == "LIBRARIES":
        return {**DEVICE_LIBRARIES, **_host_libraries()}
    if name == "FORMS":
        from commmodel.collectives.libraries.host import FORMS

        return FORMS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


LIBRARY_NAMES = (*DEVICE_LIBRARIES, *HOST_LIBRARY_NAMES)
"""Names accepted by ``--library``."""


def get_library(name: str) -> Library:
    """The library called ``name`` (openmpi is an alias of mpi)."""
    key = {"openmpi": "mpi", "ompi": "mpi"}.get(name.strip().lower(), name.strip().lower())
    if key in DEVICE_LIBRARIES:
        return DEVICE_LIBRARIES[key]
    if key in HOST_LIBRARY_NAMES:
        return _host_libraries()[key]
    raise CollectiveError(f"unknown library {name!r}; use one of {', '.join(LIBRARY_NAMES)}")


def default_library(system: System) -> tuple[str, str]:
    """(library, why) for a system: gloo on CPU hosts, rccl on AMD Instinct (xGMI), nccl on NVIDIA GPUs."""
    kind = system.scale_up.kind
    if system.ranks_are_cpus:
        return "gloo", f"{system.name} ranks are CPU processes (scale-up {kind}): torch.distributed's CPU backend is gloo"
    if kind == "xgmi":
        return "rccl", f"{system.name} has AMD Instinct GPUs on xGMI: ROCm's collective library is RCCL"
    return "nccl", f"{system.name} has NVIDIA GPUs ({system.gpu.name}): the CUDA collective library is NCCL"


def rank_noun(system: System, count: int | None = None) -> str:
    """What the ranks of ``system`` are, for output: "CPU ranks" on a CPU host (:attr:`System.ranks_are_cpus`),
    "GPUs" elsewhere; singular where ``count`` is 1 ("1 GPU")."""
    noun = "CPU ranks" if system.ranks_are_cpus else "GPUs"
    return noun[:-1] if count == 1 else noun


def resolve_library(system: System, library: str | None, flag: str = "--library ") -> tuple[str, str]:
    """(library name, why) for a requested ``library`` on ``system`` (the system's default when None); a device
    library asked for on the other vendor's GPUs (or on CPU ranks) is a :class:`CollectiveError` naming the fix in
    the words it was asked with (``flag``: the CLI's option, "" for a query's words)."""
    native, why = default_library(system)
    if library is None:
        return native, f"default: {why}"
    lib = get_library(library)
    if lib.family in ("nccl", "rccl") and lib.family != native:  # each device library runs on its vendor's GPUs
        runs_on = "NVIDIA GPUs" if lib.family == "nccl" else "AMD Instinct GPUs"
        has = "CPU ranks" if native == "gloo" else f"{'AMD Instinct' if native == 'rccl' else 'NVIDIA'} GPUs"
        raise CollectiveError(f"{flag}{library}: {lib.family.upper()} runs on {runs_on}, and {system.name} has {has} "
                              f"({system.gpu.name}); use {flag}{native} (its default) or "
                              f"{'mpi' if native == 'gloo' else 'a host library (gloo, mpi)'}")
    return lib.name, "--library"


def buffer_path(library: str, system: System, op: str) -> str | None:
    """How a host library moves GPU buffers for ``op`` on ``system`` (None for a device library or CPU ranks): the
    line ``collective`` and ``sweep`` print beside the library, so a priced figure says whether it includes staging."""
    name = get_library(library).name
    if name not in HOST_LIBRARY_NAMES or system.ranks_are_cpus:
        return None
    from commmodel.collectives.libraries.host import staging_bw_bytes_per_s  # host modules only when one is asked for
    from commmodel.collectives.libraries.mpi import ompi_stages
    from commmodel.collectives.primitives import get_primitive

    copies = f"in and out over the GPU's host link at {staging_bw_bytes_per_s(system) / 1e9:.1f} GB/s"
    summed = ", summed on the CPU" if get_primitive(op).needs_reduction else ""
    if name == "gloo":
        return f"GPU tensors staged through host memory ({copies}; torch's ProcessGroupGloo){summed}"
    if name == "mpi" and ompi_stages(system, op):
        return f"GPU buffers staged through host memory ({copies}; Open MPI's coll/cuda stages its reductions){summed}"
    return "CUDA-aware: the GPU buffers themselves, over CUDA IPC inside a node and GPUDirect RDMA across"


def host_transport(lib: Library, system: System, spans: np.ndarray, per_node: np.ndarray,
                   op: str | None = None) -> "Transport":
    """A host library's default transport on ``system`` for ``op`` (its sourced constants; not calibrated, not
    time-shared). Open MPI stages a GPU reduction through host memory and reduces on the CPU
    (:func:`~commmodel.collectives.libraries.mpi.ompi_stages`); MPICH and Open MPI's other collectives on GPU
    buffers reduce, where they do, at the GPU's memory rate."""
    from commmodel.collectives.libraries.gloo import (REDUCE_TRAFFIC_BYTES_PER_BYTE, gloo_transport,
                                                      host_memory_bw_per_rank)
    from commmodel.collectives.libraries.mpi import mpi_transport, ompi_stages

    if lib.transport == "gloo":
        return gloo_transport(system, spans, per_node)
    staged = lib.name == "mpi" and ompi_stages(system, op)
    on_host = system.ranks_are_cpus or staged
    reduce_bw = host_memory_bw_per_rank(system) if on_host else system.gpu.hbm_bw_bytes_per_s.value
    return mpi_transport(system, spans, per_node, reduce_bw / REDUCE_TRAFFIC_BYTES_PER_BYTE, staged)




def calibrated(tr: "Transport", system: System, library: str, spans: np.ndarray) -> "Transport":
    """``tr`` with the profile's calibrated intra-node numbers for ``library`` (``System.host_libraries``), if any:
    the fit's one α and one rate for every size (calibrate/host_fit.py solves one α, one β), so no rendezvous α and no
    cache-resident rate."""
    fit = (system.host_libraries or {}).get(library)
    if fit is None:
        return tr
    return tr._replace(call_s=fit.call_s.value, message_s=np.where(spans, tr.message_s, fit.message_s.value),
                       bw_bytes_per_s=np.where(spans, tr.bw_bytes_per_s, fit.bw_bytes_per_s.value),
                       reduce_bw_bytes_per_s=fit.reduce_bw_bytes_per_s.value, cached_bw_bytes_per_s=None,
                       rendezvous_s=None)


def host_library_cost(lib: Library, op: str, size: np.ndarray, system: System, n: np.ndarray,
                      per_node: np.ndarray, algorithm: str = "auto") -> tuple[np.ndarray, ...]:
    """(latency_s, bandwidth_s, bytes per rank, algorithm names) of a host library, element-wise.

    ``auto`` follows the library's rule; a name forces that algorithm where it has a form for ``op``."""
    from commmodel.collectives.libraries.host import FORMS, host_time_s, rank_sharing, time_shared
    from commmodel.collectives.libraries.mpi import OMPI_RULES

    if op not in OMPI_RULES:
        raise CollectiveError(f"{lib.name} does not model {op}")
    spans = np.ceil(n / per_node) > 1
    if system.scale_out is None and np.any(spans):
        raise CollectiveError(f"system {system.name} has no scale-out network; a {lib.name} group cannot leave a node")
    base = calibrated(host_transport(lib, system, spans, per_node, op), system, lib.name, spans)
    if algorithm == "auto":
        names = np.asarray(lib.choose(op, n, size), dtype=object)
    else:
        if algorithm not in lib.host_algorithms or (lib.form_of(op, algorithm), op) not in FORMS:
            known = sorted({a for a, o in FORMS if o == op and a in lib.host_algorithms})
            raise CollectiveError(f"{lib.name} has no {algorithm!r} for {op}; it has: {', '.join(known) or 'none'}")
        names = np.full(np.broadcast_shapes(n.shape, size.shape), algorithm, dtype=object)
    shape = names.shape
    lat, bw, wire = (np.zeros(shape) for _ in range(3))
    for name in set(names.ravel()):
        form_name = lib.form_of(op, name)
        where = names == name
        n_all, s_all = np.broadcast_arrays(n, size)
        tr = time_shared(base, rank_sharing(system, form_name, op, n_all, per_node, base.sleeping_waits))
        l, b, w = host_time_s(form_name, op, n_all, s_all, tr, lib.copied_bytes(op, n_all, s_all), lib.forms)
        lat, bw, wire = (np.where(where, np.broadcast_to(x, shape), acc) for x, acc in ((l, lat), (b, bw), (w, wire)))
    return lat, bw, wire, names


__all__ = ["DEVICE_LIBRARIES", "FORMS", "HOST_LIBRARY_NAMES", "LIBRARIES", "LIBRARY_NAMES", "Library", "buffer_path",
           "calibrated",
           "default_library", "get_library",
           "host_library_cost", "host_transport", "resolve_library"]
