"""From a trace's comm ranges and NCCL kernels to one :class:`CommInstance` per collective call.

Names: PyTorch's ``Collective name`` values (``allreduce``, ``allgather``, ``_allgather_base``,
``reduce_scatter_tensor_coalesced``, ``all_to_allv``, ...; ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``
@ v2.3.0) and range names (``nccl:all_reduce``, ``gloo:all_gather``, ``c10d::alltoall_base_``) map to
nccl-tests' op names. What an NCCL kernel name states (and what it does not):

- NCCL ≤ 2.18 ``ncclKernel_AllReduce_RING_LL_Sum_float``: one kernel per collective × *algorithm*, built for
  the LL protocol only (``src/collectives/device/common.h`` @ v2.18.3-1, ``IMPL_COLL4`` →
  ``IMPL_COLL_KERN(func, algo, LL, ...)``); other protocols run through the function table inside it. So the
  name gives the algorithm, never the protocol. ``SendRecv`` kernels (``IMPL_COLL_P``: RING SIMPLE) give
  neither (some builds run every collective as SendRecv kernels).
- NCCL ≥ 2.19 ``ncclDevKernel_AllGather_RING_LL``, ``ncclDevKernel_AllReduce_Sum_f32_TREE_LL``: kernels are
  specialised for ``best_kernel()`` of each function, which maps every algorithm but TREE to RING and every
  protocol to LL (``src/device/generate.py`` @ v2.19.3-1 .. 5067397c); the name gives only "tree" vs "not tree".
- RCCL ``ncclDevKernel_Generic_4``, MSCCL ``mscclKernel_*``, NCCL ``ncclSymkDevKernel_*``: nothing parsed.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

DTYPE_BYTES = {
    "signed char": 1, "unsigned char": 1, "long int": 8, "short int": 2, "complexhalf": 4, "complexdouble": 16,
    "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "float": 4, "float32": 4, "int": 4, "int32": 4, "uint32": 4,
    "double": 8, "float64": 8, "long": 8, "int64": 8, "uint64": 8, "complexfloat": 8,
    "half": 2, "float16": 2, "bfloat16": 2, "short": 2, "int16": 2,
    "byte": 1, "char": 1, "bool": 1, "int8": 1, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}
"""Bytes per element of the dtypes traces name: torch ``ScalarType`` names (``c10/core/ScalarType.h``; ``Float``,
``BFloat16`` in record_param_comms) and C type names in ``Input type`` (``signed char``, ``unsigned char``);
a ``c10::`` prefix is dropped first."""

_OPS = {
    "allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all", "alltoallv": "all_to_all", "broadcast": "broadcast", "reduce": "reduce",
    "gather": "gather", "scatter": "scatter", "send": "send_recv", "recv": "send_recv",
    "sendrecv": "send_recv", "barrier": "barrier",
}
"""Collective names with underscores, prefixes and variant suffixes removed → nccl-tests op names."""

_SUFFIXES = ("coalesced", "intotensor", "tensor", "base", "single", "v")
_PREFIXES = ("nccl:", "gloo:", "c10d::")
_KERNEL_OLD = re.compile(r"^ncclKernel_(?P<op>[A-Za-z]+?)_(?P<algo>RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|"
                         r"PAT)_(?:LL128|LL|SIMPLE)(?:[_(]|$)")
_KERNEL_NEW = re.compile(r"^ncclDevKernel_[A-Za-z]+(?:_[A-Za-z0-9]+)*?_TREE_(?:LL128|LL|SIMPLE)(?:[_(]|$)")
COMM_KERNEL_PREFIXES = ("nccl", "rccl", "msccl")
"""GPU kernels that are communication: NCCL (``ncclKernel_``, ``ncclDevKernel_``, ``ncclSymkDevKernel_``), RCCL
(the same names, ``rccl*``) and MSCCL (``mscclKernel_``)."""


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
    """(algorithm, protocol) as far as an NCCL kernel name states them (module docstring): the algorithm of an
    NCCL ≤ 2.18 kernel, "tree" for an NCCL ≥ 2.19 TREE kernel, else None; the protocol never (always None)."""
    old = _KERNEL_OLD.match(name)
    if old and old.group("op") != "SendRecv":
        return old.group("algo").lower(), None
    return ("tree", None) if _KERNEL_NEW.match(name) else (None, None)


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
    """From the NCCL kernel name where it states one (ring, tree, nvls ...; see :func:`parse_kernel`)."""
    protocol: str | None = None
    """Not stated by any NCCL kernel name (kernels are built for LL only); None unless a source states it."""
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
    calls_without_group: int = 0
    """Timed calls dropped because the trace states no group size for them and no world size to assume (no
    ``distributedInfo``: PyTorch before 1.13, or a trimmed trace)."""


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
    """:func:`_stated_group_size`, checked against the trace's world size: a group of fewer than one rank or more
    ranks than the job has is damage (the reader's malformed-event line names it)."""
    size = _stated_group_size(args, dist, notes)
    world = dist.get("world_size")
    if size is not None and not 1 <= size <= (int(world) if world else size):
        raise ValueError(f"group size {size} is not between 1 and the trace's world size {world or '(unstated)'}")
    return size


def _stated_group_size(args: dict, dist: dict, notes: list[str]) -> int | None:
    """``Group size``, else the length of ``Process Group Ranks`` ("[0, 1]"), else the ``pg_config`` entry
    of the call's ``Process Group Name`` (or the only one), else the world size (noted as assumed)."""
    if args.get("Group size") is not None:
        return int(args["Group size"])
    ranks = args.get("Process Group Ranks")
    # PyTorch truncates long lists to 30 ranks and "..." (torch/csrc/profiler/util.cpp format_list, kTruncatLength)
    whole = isinstance(ranks, list) or (isinstance(ranks, str) and "..." not in ranks)
    listed = (ranks if isinstance(ranks, list) else re.findall(r"-?\d+", ranks)) if whole else []
    if listed:
        return len(listed)
    groups = [g for g in dist.get("pg_config") or [] if isinstance(g, dict)]
    named = [g for g in groups if "Process Group Name" in args and str(g.get("pg_name")) == str(args["Process Group Name"])]
    if len(named or groups) == 1 and (named or groups)[0].get("pg_size"):
        return int((named or groups)[0]["pg_size"])
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


MAX_TRACE_ELEMENTS = 2**40
"""Largest element count a traced collective may state (8 TiB of fp64): beyond it the field is damage, not a message
(a 1e30 count priced 4e30-byte collectives)."""


def _size(range_name: str, args: dict, op: str | None) -> float | None:
    """Element count × element bytes; all-gather ranges give one rank's input (× group later)."""
    if "In msg nelems" in args:
        counts = [int(args.get("In msg nelems") or 0), int(args.get("Out msg nelems") or 0)]
        if min(counts) < 0 or max(counts) > MAX_TRACE_ELEMENTS:  # the reader's malformed-event line names it
            raise ValueError(f"message element counts {counts} are not between 0 and {MAX_TRACE_ELEMENTS:.0e}")
        nelems = max(counts)
        dtype = _dtype(args.get("dtype"))
    elif range_name.startswith(("nccl:", "gloo:")) and args.get("Input Dims"):
        dims = args["Input Dims"][0]
        if not dims or not all(isinstance(d, int) for d in dims):
            return None
        if min(dims) < 0 or math.prod(dims) > MAX_TRACE_ELEMENTS:
            raise ValueError(f"input dims {dims} are not between 0 and {MAX_TRACE_ELEMENTS:.0e} elements")
        nelems = math.prod(dims) * (-1 if op == "all_gather" else 1)  # sign marks "× group size"
        dtype = _dtype((args.get("Input type") or [""])[0])
    else:
        return None
    return float(nelems * DTYPE_BYTES[dtype]) if dtype in DTYPE_BYTES else None


_OUT_IN_OPS = ("c10d::_allgather_base_", "c10d::_reduce_scatter_base_")
"""c10d ops whose first two arguments are (output, input) tensors (``torch/csrc/distributed/c10d/Ops.cpp``
@ v2.3.0 ``TORCH_LIBRARY(c10d)``): their ``Input Dims`` state both buffers, so S and the group size."""


def _output_input(ops: list[dict]) -> tuple[float, int] | None:
    """(S, group size) from an all-gather/reduce-scatter base op's output and input dims: S is the larger
    buffer, the group the ratio of the two (an all-gather's output is group × its input)."""
    for item in ops:
        dims = item["args"].get("Input Dims") or []
        if item["name"] not in _OUT_IN_OPS or len(dims) < 2 or not dims[0] or not dims[1]:
            continue
        if not all(isinstance(d, int) for d in dims[0] + dims[1]):
            continue
        small, large = sorted((math.prod(dims[0]), math.prod(dims[1])))
        dtype = _dtype((item["args"].get("Input type") or [""])[0])
        if small > 0 and large % small == 0 and large > small and dtype in DTYPE_BYTES:
            return float(large * DTYPE_BYTES[dtype]), large // small
    return None


def _dtype(name: object) -> str:
    return str(name or "").strip().lower().removeprefix("c10::")


def _why_no_size(ops: list[dict]) -> str:
    """Why a call's ranges give no byte count: an unknown dtype (named) or no element counts at all."""
    for item in ops:
        args = item["args"]
        named = args.get("dtype") if "In msg nelems" in args else (args.get("Input type") or [None])[0]
        if ("In msg nelems" in args or args.get("Input Dims")) and named and _dtype(named) not in DTYPE_BYTES:
            return f"dtype {named!r} is not in kineto_ops.DTYPE_BYTES"
    return ("the trace has no element counts (record_param_comms without 'In msg nelems', nccl:* ranges "
            "without 'Input Dims'): profile with record_shapes=True")


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
    missing: Counter[str] = Counter()
    out, without, no_group = [], 0, 0
    calls = [c for _, _, cs in per_thread.values() for c in cs]
    calls += [_Call(ops=[{"name": "record_param_comms", "args": k["args"]}], kernels=[k])
              for k in left if "Collective name" in k["args"]]
    for call in calls:
        gloo = next((o for o in call.ops if o["name"].startswith("gloo:")), None)
        op, args, size = _describe(call.ops)
        if op is None or (not call.kernels and gloo is None):
            without += op is not None and any(o["name"].startswith("nccl:") for o in call.ops)
            continue
        pair = _output_input(call.ops) if "Group size" not in args else None
        size, group = pair if pair else (size, _group_size(args, dist, notes))
        if group is None:
            no_group += 1
            continue
        if size is None and op not in ("barrier",):
            missing[_why_no_size(call.ops)] += 1
        out.append(_instance(op, size, group, call.kernels, gloo))
    notes += [f"{count} call(s) without a size: {why}" for why, count in missing.items()]
    unattributed = sum(1 for k in left if "Collective name" not in k["args"])
    return BuildResult(sorted(out, key=lambda c: c.start_s), unattributed, without, notes, no_group)
