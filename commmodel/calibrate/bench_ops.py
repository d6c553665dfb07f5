"""The benchmarked primitives, one small uniform entry each (like nccl-tests' per-collective table).

Sizes follow nccl-tests: S is the whole buffer. all-gather reads S/n per rank and writes S;
reduce-scatter reads S and writes S/n; all-to-all exchanges S/n with every rank; send/recv is
nccl-tests' ring shift (every rank sends S to the next rank and receives S from the previous one).
``torch`` and ``torch.distributed`` are passed in, never imported here at module level.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Buffers = tuple[Any, ...]


@dataclass(frozen=True)
class BenchOp:
    """One benchmarked primitive: how to allocate its buffers and run it once."""

    name: str
    """Canonical primitive name (nccl-tests vocabulary)."""
    split: bool
    """Whether S must divide into n equal pieces (gather/scatter-like ops)."""
    make: Callable[[Any, int, int, Any, Any], Buffers]
    """(torch, count, n, dtype, device) -> buffers, count = S / element size."""
    run: Callable[[Any, Buffers, Any, list[int], int], None]
    """(torch.distributed, buffers, group, group_ranks, my_rank) -> None (returns when done on this rank)."""


def _zeros(torch: Any, count: int, dtype: Any, device: Any) -> Any:
    # Zeros keep sums at zero across iterations (ones would overflow to inf after ~128 fp32 all-reduces).
    return torch.zeros(count, dtype=dtype, device=device)


def _one_buffer(torch, count, n, dtype, device):
    return (_zeros(torch, count, dtype, device),)


def _two_buffers(torch, count, n, dtype, device):
    return _zeros(torch, count, dtype, device), _zeros(torch, count, dtype, device)


def _gather_buffers(torch, count, n, dtype, device):
    return _zeros(torch, count // n, dtype, device), _zeros(torch, count, dtype, device)


def _scatter_buffers(torch, count, n, dtype, device):
    return _zeros(torch, count, dtype, device), _zeros(torch, count // n, dtype, device)


def _all_reduce(dist, bufs, group, ranks, me):
    dist.all_reduce(bufs[0], group=group)


def _all_gather(dist, bufs, group, ranks, me):
    # torch ≥ 2.12 renamed all_gather_into_tensor / reduce_scatter_tensor to *_single.
    run = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    run(bufs[1], bufs[0], group=group)


def _reduce_scatter(dist, bufs, group, ranks, me):
    run = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    run(bufs[1], bufs[0], group=group)


def _all_to_all(dist, bufs, group, ranks, me):
    dist.all_to_all_single(bufs[1], bufs[0], group=group)


def _broadcast(dist, bufs, group, ranks, me):
    dist.broadcast(bufs[0], src=ranks[0], group=group)


def _reduce(dist, bufs, group, ranks, me):
    dist.reduce(bufs[0], dst=ranks[0], group=group)


def _send_recv(dist, bufs, group, ranks, me):
    if len(ranks) < 2 and hasattr(dist, "get_backend") and dist.get_backend(group) == "gloo":
        # gloo pairs a rank with a peer, never itself ("Pair is not connected"); NCCL and MPI send to self
        raise NotImplementedError("send to itself not supported by gloo: send_recv needs 2 ranks")
    i = ranks.index(me)
    nxt, prv = ranks[(i + 1) % len(ranks)], ranks[(i - 1) % len(ranks)]
    ops = [dist.P2POp(dist.isend, bufs[0], nxt, group), dist.P2POp(dist.irecv, bufs[1], prv, group)]
    for request in dist.batch_isend_irecv(ops):
        request.wait()


BENCH_OPS: dict[str, BenchOp] = {
    op.name: op
    for op in (
        BenchOp("all_reduce", False, _one_buffer, _all_reduce),
        BenchOp("all_gather", True, _gather_buffers, _all_gather),
        BenchOp("reduce_scatter", True, _scatter_buffers, _reduce_scatter),
        BenchOp("broadcast", False, _one_buffer, _broadcast),
        BenchOp("reduce", False, _one_buffer, _reduce),
        BenchOp("all_to_all", True, _two_buffers, _all_to_all),
        BenchOp("send_recv", False, _two_buffers, _send_recv),
    )
}
"""Primitives ``calibrate run --ops`` accepts, in the default order."""


def element_count(op: BenchOp, size_bytes: int, num_ranks: int, element_bytes: int) -> int:
    """Elements in S rounded down so split ops give each rank a whole number (≥ 1) of elements."""
    unit = element_bytes * (num_ranks if op.split else 1)
    return max(size_bytes // unit, 1) * unit // element_bytes


def probe_op(op: BenchOp, bufs: Any, group: Any, ranks: list[int], rank: int, dist: Any, torch: Any, device: Any) -> str:
    """Run the op once; if any rank cannot (backend lacks it), every rank agrees to skip it."""
    reason = ""
    try:
        op.run(dist, bufs, group, ranks, rank)
    except (RuntimeError, NotImplementedError, ValueError) as err:
        text = " ".join(str(err).split())
        if not any(word in text.lower() for word in ("not supported", "not implemented", "unsupported", "no support")):
            raise
        reason = f"{type(err).__name__}: {text[:120]}"
    flag = torch.tensor([1.0 if reason else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if flag.item() and not reason:
        reason = "not supported by this backend on another rank"
    return reason


def time_point(op: BenchOp, bufs: Any, group: Any, ranks: list[int], rank: int, config: Any, dist: Any, torch: Any,
               device: Any) -> np.ndarray:
    """Per-iteration times after ``config.warmup`` runs, ``config.iters`` of them, MAX over all ranks (s, float64)."""
    cuda = device.type == "cuda"
    for _ in range(config.warmup):
        op.run(dist, bufs, group, ranks, rank)
    times = torch.zeros(config.iters, dtype=torch.float64, device=device)
    for i in range(config.iters):
        if cuda:
            torch.cuda.synchronize(device)
        dist.barrier()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            op.run(dist, bufs, group, ranks, rank)
            end.record()
            end.synchronize()
            times[i] = start.elapsed_time(end) * 1e-3
        else:
            t0 = time.perf_counter()
            op.run(dist, bufs, group, ranks, rank)
            times[i] = time.perf_counter() - t0
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    return times.cpu().numpy()
