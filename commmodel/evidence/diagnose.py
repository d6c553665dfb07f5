"""Measured collectives set against the model: group, take the median, price, flag.

Per group (op × size × group size × algorithm × protocol, as the trace states them) the measured time
is the median over calls of each call's slowest rank (the i-th call of a key on every rank traced is one
call: a collective runs in the same order on each member; ``rank_spread`` is the slowest rank's median over the
fastest's, a straggler's sign); busbw = S/t × factor(op, n) (nccl-tests ``doc/PERFORMANCE.md``,
DESIGN §2). The model prices the same op, size and group with :func:`collective_cost` on the user's
system, the group packed ``min(n, gpus_per_node)`` ranks per node (a send/recv: its two ranks, in one node; the
trace does not name the peer), in the library the trace ran
(:func:`trace_library`: its process group's backend) with that library's own choice of algorithm
(``selection="library"``: what an unforced job runs; NCCL's tuner for NCCL). A group is flagged when its
measured busbw is below ``threshold`` × the model's.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from commmodel.collectives import busbw_factor, collective_cost
from commmodel.errors import CommModelError
from commmodel.evidence.timeline import split_windows
from commmodel.hardware.models import System

DEFAULT_THRESHOLD = 0.7
"""Flag below 70% of the model's busbw: the issue's default; our model's large-message error is ≤ 20%
per setup (DESIGN §9), so 0.7 leaves room for model error before blaming the cluster."""

USUAL_CAUSES = (
    "wrong NIC/HCA (NCCL_IB_HCA, GPU-NIC affinity)",
    "PCIe instead of NVLink (NCCL_P2P_DISABLE, P2P level)",
    "a straggler rank (the collective waits for the slowest)",
    "a forced algorithm or protocol (NCCL_ALGO/NCCL_PROTO)",
)
"""What usually makes a device library's collective slower than its fabric allows (NCCL docs, env.html; issue 15)."""
HOST_CAUSES = (
    "more ranks than free cores (each message waits for its receiver to be scheduled)",
    "a straggler rank (the collective waits for the slowest)",
    "the wrong interface (GLOO_SOCKET_IFNAME, or Open MPI's btl/UCX selection)",
    "GPU tensors staged through host memory (a host library copies them in and out)",
)
"""The same for gloo and MPI, whose collectives run on the CPU (collectives.libraries.host: time sharing, TCP,
staging)."""


@dataclass(frozen=True)
class Diagnosis:
    """What ``diagnose`` reports."""

    collectives: list[dict[str, Any]]
    """One row per group, keys as in ``diagnose --json``."""
    steps: list[dict[str, Any]]
    """One row per ``ProfilerStep#N``: the slowest rank's split."""
    library: str = "nccl"
    """The library the collectives are priced in (:func:`trace_library`)."""
    library_why: str = ""
    """Why that library: the traces' backend, or the system's default."""
    devices: str | None = None
    """The GPUs the traces name against the system's (:func:`commmodel.evidence.devices.devices_note`)."""


def _group(traces: list[Any]) -> dict[tuple, list[list[float]]]:
    """Calls of one (op, size, group, algorithm, protocol) key: for each trace (rank), its calls' times in order."""
    groups: dict[tuple, list[list[float]]] = defaultdict(list)
    for trace in traces:
        mine: dict[tuple, list[float]] = defaultdict(list)
        for call in trace.collectives:
            mine[(call.op, call.size_bytes, call.group_size, call.algorithm, call.protocol)].append(call.time_s)
        for key, times in mine.items():
            groups[key].append(times)
    return groups


def _per_call(per_rank: list[list[float]]) -> list[float]:
    """Each call's time over the ranks that traced it: the slowest rank's, the one the job waits for (call i is
    the i-th of that key on every rank: a collective runs in the same order on each member)."""
    calls = max(len(times) for times in per_rank)
    return [max(times[i] for times in per_rank if i < len(times)) for i in range(calls)]


def _rank_spread(per_rank: list[list[float]]) -> float | None:
    """The slowest rank's median over the fastest's (None with one rank's trace): a straggler shows as > 1."""
    if len(per_rank) < 2:
        return None
    medians = [statistics.median(times) for times in per_rank]
    return max(medians) / min(medians) if min(medians) > 0 else None


BACKEND_LIBRARIES = {"nccl": None, "gloo": "gloo", "mpi": "mpi"}
"""torch.distributed backend -> the library it runs: "nccl" is NCCL on NVIDIA GPUs and RCCL on AMD ones (ROCm's
PyTorch keeps the backend's name), so it takes the system's own device library (None: the default)."""


def trace_library(traces: list[Any], system: System) -> tuple[str, str]:
    """(library, why) of the traces: their backend's library on ``system``
    (:func:`~commmodel.collectives.libraries.resolve_library`: NCCL on a CPU host is a one-line error); the
    system's default where no trace says its backend."""
    from commmodel.collectives.libraries import resolve_library

    backends = sorted({t.backend.lower() for t in traces if t.backend})
    if len(backends) > 1:
        raise CommModelError(f"the traces come from {len(backends)} backends ({', '.join(backends)}); diagnose one "
                             "job's traces at a time")
    if not backends:
        return resolve_library(system, None)
    backend = backends[0]
    if backend not in BACKEND_LIBRARIES:
        raise CommModelError(f"the traces ran torch.distributed backend {backend!r}; diagnose prices "
                             f"{', '.join(BACKEND_LIBRARIES)} (their libraries: NCCL/RCCL, gloo, MPI)")
    native = resolve_library(system, None)[0]
    if backend == "nccl" and native not in ("nccl", "rccl"):
        raise CommModelError(f"the traces ran backend nccl, a GPU library, and {system.name} has CPU ranks; pass the "
                             "GPU system the job ran on (--system)")
    name = resolve_library(system, BACKEND_LIBRARIES[backend])[0]
    return name, f"the traces' backend {backend}" + (" (RCCL under ROCm's PyTorch)" if name == "rccl" else "")


def _is_host(library: str) -> bool:
    from commmodel.collectives.libraries import get_library

    return get_library(library).is_host


def _model_row(op: str, size_bytes: float | None, group_size: int, system: System,
               gpus_per_node: int, library: str) -> tuple[float | None, float | None]:
    if size_bytes is None or size_bytes <= 0 or op == "barrier" or group_size < 2:
        return None, None
    if op == "send_recv":  # a send or recv joins two ranks of its group, not all of them: priced as two of one node
        group_size = 2
    cost = collective_cost(op, size_bytes, system, group_size, min(group_size, gpus_per_node), selection="library",
                           library=library)
    time_s = float(np.asarray(cost.time_s))
    return time_s, float(np.asarray(cost.busbw_bytes_per_s)) / 1e9


def _flag(ratio: float | None, threshold: float, library: str, size_bytes: float | None = None) -> str | None:
    """The flag text of a row below ``threshold`` × the model's busbw, else None. At or below the small band's edge
    (DESIGN §9: latency-bound, the model's own target a time within ×1.5, validation.collectives) the threshold is
    divided by that factor, so a row inside the model's error is not blamed on the cluster."""
    from commmodel.size_bands import SMALL_MAX_BYTES
    from commmodel.validation.collectives import BAND_TARGETS

    if size_bytes is not None and size_bytes <= SMALL_MAX_BYTES:
        threshold = threshold / BAND_TARGETS["small"][0]
    if ratio is None or ratio >= threshold:
        return None
    causes = HOST_CAUSES if _is_host(library) else USUAL_CAUSES
    return f"busbw {ratio:.2f}x the model's (< {threshold:g}); usual causes: " + "; ".join(causes)


def compare_collectives(traces: list[Any], system: System, gpus_per_node: int | None = None,
                        threshold: float = DEFAULT_THRESHOLD, library: str | None = None) -> list[dict[str, Any]]:
    """One row per group of calls, largest total measured time first, priced in ``library`` (default: the
    traces', :func:`trace_library`)."""
    if not 0 < threshold <= 1:
        raise CommModelError(f"--threshold {threshold:g} must be in (0, 1]: the fraction of the model's busbw "
                             "below which a collective is flagged, e.g. 0.7")
    per_node = gpus_per_node or system.gpus_per_node
    library = library or trace_library(traces, system)[0]
    rows = []
    for (op, size, group, algo, proto), per_rank in _group(traces).items():
        times = _per_call(per_rank)
        measured_s = statistics.median(times)
        busbw = None
        if size is not None and measured_s > 0:
            busbw = size / measured_s * float(busbw_factor(op, group)) / 1e9
        model_s, model_busbw = _model_row(op, size, group, system, per_node, library)
        ratio = busbw / model_busbw if busbw is not None and model_busbw else None
        rows.append({"op": op, "size_bytes": size, "group_size": group, "count": len(times),
                     "algorithm": algo, "protocol": proto, "measured_time_s": measured_s,
                     "measured_busbw_GBps": busbw, "model_time_s": model_s, "model_busbw_GBps": model_busbw,
                     "ratio": ratio, "flag": _flag(ratio, threshold, library, size), "untimed": measured_s <= 0,
                     "ranks_traced": len(per_rank),
                     "rank_spread": _rank_spread(per_rank), "_total_s": sum(times)})
    rows.sort(key=lambda r: -r.pop("_total_s"))
    return rows


def split_steps(traces: list[Any]) -> list[dict[str, Any]]:
    """Per step number, the split of the rank whose step took longest."""
    by_step: dict[int, dict[str, Any]] = {}
    for trace in traces:
        splits = split_windows(trace.compute_intervals_s, trace.comm_intervals_s,
                               [(step.start_s, step.end_s) for step in trace.steps])
        for step, split in zip(trace.steps, splits):
            row = {"step": step.step, **split}
            if step.step not in by_step or row["time_s"] > by_step[step.step]["time_s"]:
                by_step[step.step] = row
    return [by_step[k] for k in sorted(by_step)]


def diagnose(traces: list[Any], system: System, gpus_per_node: int | None = None,
             threshold: float = DEFAULT_THRESHOLD) -> Diagnosis:
    """Collectives against the model, in the traces' library, and the per-step time split."""
    from commmodel.evidence.devices import devices_note

    check_one_job(traces)
    devices = devices_note(traces, system)
    library, why = trace_library(traces, system)
    return Diagnosis(collectives=compare_collectives(traces, system, gpus_per_node, threshold, library),
                     steps=split_steps(traces), library=library, library_why=why, devices=devices)


def check_one_job(traces: list[Any]) -> None:
    """The traces are one job's: one stated world size and no rank twice (two jobs' traces were merged step by step,
    and one rank given twice doubled every count)."""
    sizes = sorted({t.world_size for t in traces if t.world_size is not None})
    if len(sizes) > 1:
        shown = ", ".join(map(str, sizes))
        raise CommModelError(f"the traces come from jobs of different sizes (world sizes {shown}); diagnose one job's "
                             "traces at a time")
    ranks = [t.rank for t in traces if t.rank is not None]
    twice = sorted({r for r in ranks if ranks.count(r) > 1})
    if twice:
        raise CommModelError(f"rank {twice[0]} appears in more than one trace; give each rank's trace once")


def job_world_size(traces: list[Any], collectives: list[dict[str, Any]]) -> int:
    """The traced job's ranks: the traces' stated world size, else (older traces without ``distributedInfo``) the
    largest group a collective ran over; a CommModelError when neither says."""
    stated = [t.world_size for t in traces if t.world_size is not None]
    if stated:
        return max(stated)
    groups = [int(c["group_size"]) for c in collectives if c.get("group_size")]
    if not groups:
        raise CommModelError("the traces state no world size (no distributedInfo) and no collective says its group "
                             "size; diagnose them without --model, or export traces with the process group initialised")
    return max(groups)


def steps_vs_estimate(steps: list[dict[str, Any]], predicted: dict[str, Any]) -> dict[str, Any]:
    """The measured steps (median over ``ProfilerStep#N``) beside the model's ``estimate`` of the layout the user
    named: step time, compute and exposed communication, each with measured / predicted. ``predicted`` is an
    ``estimate --json`` document; the model's compute is its "compute" breakdown term and its exposed
    communication the sum the step model reports (``exposed_comm_fraction`` × step)."""
    step_s = predicted["step_time_s"]
    model = {"time_s": step_s, "compute_s": predicted["breakdown"]["compute"]["exposed_s"],
             "exposed_comm_s": predicted["exposed_comm_fraction"] * step_s}
    out: dict[str, Any] = {"layout": predicted["layout"], "system": predicted["system"], "model": model,
                           **{k: predicted[k] for k in ("stack", "assumptions", "dtype", "flash_attention",
                                                         "mfu_peak", "memory_headroom_bytes", "rank_noun")
                              if k in predicted}}
    if not steps:
        return {**out, "measured": None, "ratio": None}
    measured = {k: statistics.median(s[k] for s in steps) for k in ("time_s", "compute_s", "exposed_comm_s")}
    ratio = {k: (measured[k] / model[k] if model[k] > 0 else None) for k in measured}
    return {**out, "measured": measured, "ratio": ratio}
