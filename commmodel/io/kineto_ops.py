"""From a trace's comm ranges and NCCL kernels to one :class:`CommInstance` per collective call.

Names: PyTorch's ``Collective name`` values (``allreduce``, ``allgather``, ``_allgather_base``,
``reduce_scatter_tensor_coalesced``, ``all_to_allv``, ...; ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``
@ v2.3.0) and range names (``nccl:all_reduce``, ``gloo:all_gather``, ``c10d::alltoall_base_``) map to
nccl-tests' op names. NCCL kernel names carry the algorithm and protocol:
``ncclKernel_AllReduce_RING_LL_Sum_float`` (NCCL ≤ 2.18), ``ncclDevKernel_AllGather_RING_LL(...)``
(NCCL ≥ 2.19; ``src/device/generate.py`` @ v2.19.3 names them ``ncclDevKernel_{coll}_{algo}_{proto}``).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from typing import Any

DTYPE_BYTES = {
    "float": 4, "float32": 4, "int": 4, "int32": 4, "uint32": 4,
    "double": 8, "float64": 8, "long": 8, "int64": 8, "uint64": 8, "complexfloat": 8,
    "half": 2, "float16": 2, "bfloat16": 2, "short": 2, "int16": 2,
    "byte": 1, "char": 1, "bool": 1, "int8": 1, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}
"""Bytes per element of the torch dtypes traces name (``c10/core/ScalarType.h``)."""

_OPS = {
    "allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all", "alltoallv": "all_to_all", "broadcast": "broadcast", "reduce": "reduce",
    "gather": "gather", "scatter": "scatter", "send": "send_recv", "recv": "send_recv",
    "sendrecv": "send_recv", "barrier": "barrier",
}
"""Collective names with underscores, prefixes and variant suffixes removed → nccl-tests op names."""

_SUFFIXES = ("coalesced", "intotensor", "tensor", "base", "single", "v")
_PREFIXES = ("nccl:", "gloo:", "c10d::")
_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_(?P<op>[A-Za-z]+?)(?:_(?P<algo>RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|"
                     r"NVLS_TREE|NVLS|PAT)_(?P<proto>LL128|LL|SIMPLE))?(?:[_(]|$)")


def is_comm_name(name: str) -> bool:
    """A CPU range that belongs to a collective call."""
    return name == "record_param_comms" or name.startswith(_PREFIXES)


def canonical_op(name: str) -> str | None:
    """nccl-tests op name for a trace's collective name, or None when it is not a collective."""
    text = name
    for prefix in _PREFIXES:
        text = text.removeprefix(prefix)
    key = text.lower().replace("_", "")
    while key not in _OPS:
        for suffix in _SUFFIXES:
            if key.endswith(suffix) and len(key) > len(suffix):
                key = key[: -len(suffix)]
                break
        else:
            return None
    return _OPS[key]


def parse_kernel(name: str) -> tuple[str | None, str | None]:
    """(algorithm, protocol) from an NCCL kernel name, e.g. ('ring', 'LL'); (None, None) when absent."""
    match = _KERNEL.match(name)
    if not match or not match.group("algo"):
        return None, None
    proto = {"LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}[match.group("proto")]
    return match.group("algo").lower(), proto


@dataclass(frozen=True)
class CommInstance:
    """One collective call as the trace shows it."""

    op: str
    """nccl-tests op name."""
    size_bytes: float | None
    """S, the whole buffer as nccl-tests counts it; None when the trace does not give counts."""
    group_size: int
    """Ranks in the process group."""
    start_s: float
    """First kernel start (or gloo range start), trace clock."""
    time_s: float
    """First kernel start to last kernel end (or the gloo range's duration)."""
    algorithm: str | None = None
    """From the NCCL kernel name (ring, tree, nvls ...)."""
    protocol: str | None = None
    """From the NCCL kernel name (LL, LL128, Simple)."""
    num_kernels: int = 0
    """NCCL kernels attributed to this call."""


@dataclass
class _Call:
    ops: list[dict]
    kernels: list[dict] = field(default_factory=list)


@dataclass
class BuildResult:
    """Instances plus what could not be attributed."""

    instances: list[CommInstance]
    unattributed_kernels: int
    calls_without_kernel: int
    notes: list[str]


def _calls(comm_ops: list[dict]) -> dict[Any, tuple[list[float], list[float], list[_Call]]]:
    """Group nested comm ranges per thread: each outermost range and what it encloses is one call."""
    per_thread: dict[Any, tuple[list[float], list[float], list[_Call]]] = {}
    for op in sorted(comm_ops, key=lambda o: (o["start_s"], -o["end_s"])):
        starts, ends, calls = per_thread.setdefault(op["thread"], ([], [], []))
        if calls and op["start_s"] <= ends[-1]:
            calls[-1].ops.append(op)
            ends[-1] = max(ends[-1], op["end_s"])
        else:
            starts.append(op["start_s"])
            ends.append(op["end_s"])
            calls.append(_Call(ops=[op]))
    return per_thread


def _attach(per_thread: dict, kernels: list[dict], launches: dict) -> list[dict]:
    """Attach each kernel to the call whose range holds its launch; return the kernels left over."""
    left = []
    for kernel in kernels:
        launch = launches.get(kernel["correlation"])
        if launch is not None and (launch[0], launch[1]) in per_thread:
            starts, ends, calls = per_thread[(launch[0], launch[1])]
            i = bisect.bisect_right(starts, launch[2]) - 1
            if i >= 0 and launch[2] <= ends[i]:
                calls[i].kernels.append(kernel)
                continue
        left.append(kernel)
    return left


def _group_size(args: dict, dist: dict, notes: list[str]) -> int | None:
    if args.get("Group size"):
        return int(args["Group size"])
    groups = dist.get("pg_config") or []
    if len(groups) == 1 and groups[0].get("pg_size"):
        return int(groups[0]["pg_size"])
    if dist.get("world_size"):
        note = "group size taken as the world size: the trace does not name each collective's process group"
        if note not in notes:
            notes.append(note)
        return int(dist["world_size"])
    return None


def _describe(ops: list[dict]) -> tuple[str | None, dict, float | None]:
    """(op, merged args, element count × bytes) from a call's ranges, best source first."""
    ranked = sorted(ops, key=lambda o: (o["name"] != "record_param_comms" or "Collective name" not in o["args"],
                                        not o["name"].startswith(("nccl:", "gloo:"))))
    op_name, size, merged = None, None, {}
    for item in ranked:
        args = item["args"]
        merged = {**args, **merged}
        name = args.get("Collective name") if item["name"] == "record_param_comms" else item["name"]
        op_name = op_name or (canonical_op(str(name)) if name else None)
        if size is None:
            size = _size(item["name"], args, op_name)
    return op_name, merged, size


def _size(range_name: str, args: dict, op: str | None) -> float | None:
    """Element count × element bytes; all-gather ranges give one rank's input (× group later)."""
    if "In msg nelems" in args:
        nelems = max(int(args.get("In msg nelems") or 0), int(args.get("Out msg nelems") or 0))
        dtype = str(args.get("dtype", "")).lower()
    elif range_name.startswith(("nccl:", "gloo:")) and args.get("Input Dims"):
        dims = args["Input Dims"][0]
        if not dims or not all(isinstance(d, int) for d in dims):
            return None
        nelems = math.prod(dims) * (-1 if op == "all_gather" else 1)  # sign marks "× group size"
        dtype = str((args.get("Input type") or [""])[0]).lower()
    else:
        return None
    return float(nelems * DTYPE_BYTES[dtype]) if dtype in DTYPE_BYTES else None


def _instance(op: str, size: float | None, group: int, kernels: list[dict], gloo: dict | None) -> CommInstance:
    if size is not None and size < 0:
        size = -size * group
    if kernels:
        start = min(k["start_s"] for k in kernels)
        span_s = kernels[0]["dur_s"] if len(kernels) == 1 else max(k["end_s"] for k in kernels) - start
        algo, proto = parse_kernel(kernels[0]["name"])
        return CommInstance(op=op, size_bytes=size, group_size=group, start_s=start,
                            time_s=span_s, algorithm=algo, protocol=proto,
                            num_kernels=len(kernels))
    assert gloo is not None
    return CommInstance(op=op, size_bytes=size, group_size=group, start_s=gloo["start_s"],
                        time_s=gloo["dur_s"])


def build_instances(comm_ops: list[dict], kernels: list[dict], launches: dict, dist: dict) -> BuildResult:
    """One instance per call with kernels (NCCL) or a gloo range (CPU); kernels without a launch in the
    window become calls of their own when their args name the collective (newer Kineto copies them)."""
    per_thread = _calls(comm_ops)
    left = _attach(per_thread, kernels, launches)
    notes: list[str] = []
    out, without = [], 0
    calls = [c for _, _, cs in per_thread.values() for c in cs]
    calls += [_Call(ops=[{"name": "record_param_comms", "args": k["args"]}], kernels=[k])
              for k in left if "Collective name" in k["args"]]
    for call in calls:
        gloo = next((o for o in call.ops if o["name"].startswith("gloo:")), None)
        op, args, size = _describe(call.ops)
        if op is None or (not call.kernels and gloo is None):
            without += op is not None and any(o["name"].startswith("nccl:") for o in call.ops)
            continue
        group = _group_size(args, dist, notes)
        if group is None:
            continue
        out.append(_instance(op, size, group, call.kernels, gloo))
    unattributed = sum(1 for k in left if "Collective name" not in k["args"])
    return BuildResult(sorted(out, key=lambda c: c.start_s), unattributed, without, notes)
