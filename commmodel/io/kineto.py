"""Read the collectives, their kernels and the step markers out of a PyTorch profiler (Kineto) trace.

What a trace states, and where (PyTorch ``torch/csrc/distributed/c10d/ParamCommsUtils.hpp`` @ v2.3.0 writes
``record_param_comms`` args; ``ProcessGroupNCCL.cpp``/``ProcessGroupGloo.cpp`` open ``nccl:<op>`` /
``gloo:<op>`` record_function ranges with the input tensor's dims and type):

- ``record_param_comms`` (PyTorch ≥ 2.1): ``Collective name``, ``In msg nelems``/``Out msg nelems``,
  ``dtype``, ``Group size``, ``Process Group Ranks``;
- ``nccl:<op>`` / ``gloo:<op>`` ranges: ``Input Dims``/``Input type`` of the *input* tensor (for
  all-gather one rank's share, so the buffer S is that × the group size);
- GPU kernels (``cat == "kernel"``) carry ``correlation`` = the id of the CUDA runtime launch on the CPU
  thread; the launch sits inside the comm ranges of the collective that issued it. That is how each
  NCCL kernel is attributed to one collective (NCCL runs all-to-all, and some builds every op, as
  ``SendRecv`` kernels, so the kernel name alone cannot say which collective it was);
- ``gloo:<op>`` ranges span the work on gloo's run-loop thread (no kernels: CPU collectives);
- ``distributedInfo``: backend, rank, world size and, in newer traces, the process groups.

Only comm ranges, launches, NCCL kernels, GPU busy intervals and ``ProfilerStep#N`` ranges are kept.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commmodel.io.json_stream import TraceFileError, iter_trace
from commmodel.io.kineto_ops import COMM_KERNEL_PREFIXES, CommInstance, build_instances, is_comm_name
from commmodel.limits import MAX_GPUS

_US = 1e-6
MAX_EVENT_US = 7 * 24 * 3600 * 1e6
"""The longest duration one event may state: a week of microseconds. torch.profiler records a window of steps
(seconds to minutes); a longer event is a damaged or edited file, not a measurement."""
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_CAT_ALIASES = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime",
                "Operator": "cpu_op", "cuda_driver": "cuda_runtime"}
"""Older Kineto's capitalised categories (PyTorch 1.8-1.9) and the driver-API category: NCCL ≥ 2.23 launches
with ``cuLaunchKernelEx`` (src/enqueue.cc @ v2.23.4-1; 2.19-2.22 use cudaLaunchKernelExC), which Kineto files
under ``cuda_driver``."""
_LAUNCH = re.compile(r"(cu|cuda|hip)(Ext)?(Module)?LaunchKernel|(cuda|hip)LaunchCooperativeKernel")
"""Runtime calls that launch a kernel: CUDA (``cudaLaunchKernel``; NCCL 2.19-2.22's ``cudaLaunchKernelExC``,
NCCL ≥ 2.23's ``cuLaunchKernelEx``) and HIP
(``hipLaunchKernel``, ``hipExtLaunchKernel``, ``hipExtModuleLaunchKernel``: HTA's MI250 ROCm 6.2 trace)."""
_STEP = re.compile(r"ProfilerStep#(\d+)$")


@dataclass(frozen=True)
class Step:
    """One ``ProfilerStep#N`` range on the CPU."""

    step: int
    """N from the marker."""
    start_s: float
    """Start (trace clock, seconds)."""
    end_s: float
    """End (trace clock, seconds)."""


@dataclass
class Trace:
    """What :func:`read_trace` keeps from one trace file."""

    path: Path
    """The file read."""
    backend: str | None
    """``distributedInfo.backend`` (nccl, gloo) or None."""
    rank: int | None
    """This trace's global rank."""
    world_size: int | None
    """Ranks in the job."""
    collectives: list[CommInstance]
    """One entry per collective call that has a measured duration."""
    steps: list[Step]
    """``ProfilerStep#N`` ranges, in time order."""
    comm_intervals_s: list[tuple[float, float]]
    """Busy intervals of communication (NCCL kernels, or gloo ranges in CPU traces)."""
    compute_intervals_s: list[tuple[float, float]]
    """Busy intervals of other GPU work (kernels, copies, memsets); CPU ``aten::`` ops in CPU-only traces."""
    unattributed_kernels: int = 0
    """NCCL kernels whose launch is outside the trace window and that name no collective."""
    calls_without_kernel: int = 0
    """NCCL collective calls whose kernel fell outside the trace window."""
    notes: list[str] = field(default_factory=list)
    """Assumptions made while reading (group size taken from the world size, ...)."""
    devices: list[str] = field(default_factory=list)
    """The GPUs the trace's top-level ``deviceProperties`` names (the devices its process saw), in id order."""


@dataclass
class _Collect:
    meta: dict[str, Any] = field(default_factory=dict)
    comm_ops: list[dict] = field(default_factory=list)
    launches: dict[Any, tuple[Any, Any, float]] = field(default_factory=dict)
    nccl_kernels: list[dict] = field(default_factory=list)
    compute: list[tuple[float, float]] = field(default_factory=list)
    cpu_compute: list[tuple[float, float, Any]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    any_gpu: bool = False

    def add(self, event: dict) -> None:
        cat, name = event.get("cat"), event.get("name", "")
        cat = _CAT_ALIASES.get(cat, cat)  # type: ignore[arg-type]
        if event.get("ph") != "X" or not isinstance(name, str):
            return
        if "ts" not in event or "dur" not in event:  # Kineto writes both on every complete ("X") event
            raise ValueError(f"a complete ('X') event without {'ts' if 'ts' not in event else 'dur'}")
        ts_us, dur_us = float(event["ts"]), float(event["dur"])
        if not (0 <= dur_us <= MAX_EVENT_US and math.isfinite(ts_us)):  # a profiler never writes these
            raise ValueError(f"duration {dur_us!r} µs at ts {ts_us!r} is not a finite time from 0 to a week")
        if cat in _GPU_CATS:
            self.any_gpu = True
            self.cpu_compute.clear()
            if cat == "kernel" and name.startswith(COMM_KERNEL_PREFIXES):
                args = event.get("args") or {}
                self.nccl_kernels.append({"name": name, "start_s": ts_us * _US, "end_s": (ts_us + dur_us) * _US,
                                          "dur_s": dur_us * _US, "correlation": args.get("correlation"), "args": args})
            else:
                self.compute.append((ts_us * _US, (ts_us + dur_us) * _US))
        elif cat == "cuda_runtime" and _LAUNCH.search(name):
            corr = (event.get("args") or {}).get("correlation")
            if corr is not None:
                self.launches[corr] = (event.get("pid"), event.get("tid"), ts_us * _US)
        elif cat in ("cpu_op", "user_annotation"):
            self._cpu(event, name, ts_us * _US, (ts_us + dur_us) * _US, dur_us * _US)

    def _cpu(self, event: dict, name: str, start_s: float, end_s: float, dur_s: float) -> None:
        match = _STEP.match(name)
        if match:
            self.steps.append(Step(step=int(match.group(1)), start_s=start_s, end_s=end_s))
        elif is_comm_name(name):
            self.comm_ops.append({"name": name, "start_s": start_s, "end_s": end_s, "dur_s": dur_s,
                                  "thread": (event.get("pid"), event.get("tid")), "args": event.get("args") or {}})
        elif not self.any_gpu and name.startswith("aten::"):
            self.cpu_compute.append((start_s, end_s, (event.get("pid"), event.get("tid"))))


_MALFORMED = (ValueError, TypeError, KeyError, AttributeError, OverflowError)
"""What a field of the wrong type or form raises when read (``float("abc")``, ``int(None)``, ``{}["x"]``)."""


def read_trace(path: Path | str, on_progress: Callable[[int], None] | None = None) -> Trace:
    """Stream ``path`` (Kineto JSON, plain or .gz) and keep what ``diagnose`` needs; a field of the wrong type
    or form (``"ts": "abc"``, a non-numeric group size) is one :class:`TraceFileError` naming the file."""
    path = Path(path)  # a str path is read, not taken for a malformed trace
    try:
        return _read_trace(path, on_progress)
    except TraceFileError:
        raise
    except _MALFORMED as err:
        raise TraceFileError(f"{path}: malformed trace: {err}; the file is damaged or was edited, "
                             "export it again from torch.profiler (export_chrome_trace)") from None


def _read_trace(path: Path, on_progress: Callable[[int], None] | None) -> Trace:
    seen = _Collect()
    number = 0
    for kind, item in iter_trace(path, on_progress):
        if kind == "event":
            number += 1
            try:
                seen.add(item)
            except TraceFileError:
                raise
            except _MALFORMED as err:
                name = str(item.get("name") if isinstance(item, dict) else item)[:60]
                raise TraceFileError(f"{path}: event {number} ({name!r}): malformed "
                                     f"field ({err}); the file is damaged or was edited, export it again from "
                                     "torch.profiler (export_chrome_trace)") from None
        else:
            seen.meta[item[0]] = item[1]
    dist = _distributed_info(path, seen.meta.get("distributedInfo"))
    result = build_instances(seen.comm_ops, seen.nccl_kernels, seen.launches, dist)
    if not result.instances:
        _no_collectives(path, dist, seen, result.calls_without_group)
    comm = [(k["start_s"], k["end_s"]) for k in seen.nccl_kernels]
    if not seen.any_gpu:
        comm = [(c.start_s, c.start_s + c.time_s) for c in result.instances]
    return Trace(path=path, backend=dist.get("backend"), rank=dist.get("rank"), world_size=dist.get("world_size"),
                 collectives=result.instances, steps=sorted(seen.steps, key=lambda s: s.start_s),
                 comm_intervals_s=comm, compute_intervals_s=seen.compute or _top_level(seen.cpu_compute),
                 unattributed_kernels=result.unattributed_kernels, calls_without_kernel=result.calls_without_kernel,
                 notes=result.notes, devices=_device_names(seen.meta.get("deviceProperties")))


def _device_names(properties: Any) -> list[str]:
    """The ``name`` of each ``deviceProperties`` entry (Kineto writes one per visible GPU), [] where absent."""
    if not isinstance(properties, list):
        return []
    return [str(p["name"])[:80] for p in properties if isinstance(p, dict) and isinstance(p.get("name"), str)]


def _distributed_info(path: Path, dist: Any) -> dict:
    """``distributedInfo`` with its rank and world size checked: whole numbers, rank inside the world (a damaged or
    edited trace is one line); {} where the trace has none (older traces: the world size is then taken from the
    groups, :func:`commmodel.evidence.diagnose`)."""
    if not isinstance(dist, dict):
        return {}
    for key in ("rank", "world_size"):
        value = dist.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise TraceFileError(f"{path}: distributedInfo.{key} = {value!r} is not a whole number; the file is "
                                 "damaged or was edited, export it again from torch.profiler (export_chrome_trace)")
    rank, world = dist.get("rank"), dist.get("world_size")
    if world is not None and (world < 1 or world > MAX_GPUS or (rank is not None and rank >= world)):
        raise TraceFileError(f"{path}: distributedInfo says rank {rank} of {world} ranks (at most {MAX_GPUS:,}); the "
                             "file is damaged or was edited, export it again from torch.profiler (export_chrome_trace)")
    return dist


def _no_collectives(path: Path, dist: dict, seen: _Collect, without_group: int = 0) -> None:
    if "traceEvents" not in seen.meta:
        keys = ", ".join(sorted(seen.meta)[:6]) or "none"
        raise TraceFileError(f"{path}: not a Kineto trace: the JSON object has no 'traceEvents' array (keys: {keys}); "
                             "give the .pt.trace.json that torch.profiler wrote (export_chrome_trace)")
    if not dist and not seen.comm_ops:
        raise TraceFileError(f"{path}: no distributed info: the trace has no 'distributedInfo' and no collective "
                             "(record_param_comms, nccl:*, gloo:*); profile a torch.distributed job "
                             "(torch.profiler with the process group initialised)")
    if without_group:
        raise TraceFileError(f"{path}: {without_group} timed collective call(s), but the trace states no group size "
                             "for them and no world size (no 'distributedInfo': PyTorch before 1.13, or a trimmed "
                             "trace); profile with PyTorch 1.13 or later, or export the whole trace")
    if dist.get("world_size") == 1:
        raise TraceFileError(f"{path}: world size 1: its {len(seen.comm_ops)} comm ranges stay on one rank and no "
                             "collective kernel ran; profile a job with 2 or more ranks")
    raise TraceFileError(f"{path}: no collective with a measured duration ({len(seen.comm_ops)} comm ranges, "
                         f"{len(seen.nccl_kernels)} NCCL kernels); profile with ProfilerActivity.CUDA on GPUs "
                         "or a gloo process group on CPUs")


def _top_level(intervals: list[tuple[float, float, Any]]) -> list[tuple[float, float]]:
    """Outermost intervals per thread (nested aten ops are inside their parent)."""
    out: list[tuple[float, float]] = []
    ends: dict[Any, float] = {}
    for start, end, thread in sorted(intervals):
        if start >= ends.get(thread, float("-inf")):
            out.append((start, end))
            ends[thread] = end
    return out


def find_enclosing(starts: list[float], ends: list[float], time_s: float) -> int | None:
    """Index of the interval (sorted, non-overlapping) that contains ``time_s``, or None."""
    i = bisect.bisect_right(starts, time_s) - 1
    return i if i >= 0 and time_s <= ends[i] else None
