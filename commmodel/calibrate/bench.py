"""The distributed sweep behind ``commmodel calibrate run`` (every rank runs this; rank 0 writes).

Per (group kind, op, size): allocate, warm up, then ``iters`` timed iterations. Each iteration
starts after a barrier over the whole job (so concurrent sub-groups contend as they would in
training) and is timed on this rank with CUDA events on GPUs or ``perf_counter`` on CPUs. The
per-iteration times are reduced with MAX over all ranks (the slowest rank decides a collective),
and rank 0 writes median, p10 and p90 across iterations to the CSV at once (flushed).

A failed or hung rank ends the run with one line and the rows kept (:mod:`.bench_failures`).
"""

import datetime
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from commmodel.calibrate.dtypes import BENCH_DTYPES, ELEMENT_BYTES
from commmodel.calibrate.bench_failures import (Stop, default_store, end_run, failure_message, fault_spec,
                                               maybe_fail, start_watchdog)
from commmodel.calibrate.bench_ops import BENCH_OPS, element_count, probe_op, time_point
from commmodel.calibrate.launch import Placement, environment_block, placement
from commmodel.collectives import busbw_factor
from commmodel.errors import CalibrationError
from commmodel.io.measurements import MeasurementWriter, point_key
from commmodel.limits import MAX_BENCH_ITERS
from commmodel.sweep_sizes import whole_sweep_sizes_bytes
from commmodel.units import format_size

GroupKind = Literal["all", "intra", "inter"]


class BenchConfig(BaseModel):
    """What ``calibrate run`` measures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    out_path: Path
    """CSV the results are appended to (written by rank 0)."""
    backend: Literal["auto", "nccl", "gloo", "mpi"] = "auto"
    """auto = mpi under mpirun (no RANK set), else nccl when CUDA is available, else gloo; mpi = mpi4py (:mod:`.mpi_dist`)."""
    ops: tuple[str, ...] = tuple(BENCH_OPS)
    """Primitives to measure (nccl-tests names)."""
    min_size_bytes: int = Field(default=8, ge=1)
    """Smallest S."""
    max_size_bytes: int = Field(default=64 * 2**20, ge=1)
    """Largest S."""
    factor: float = Field(default=2.0, gt=1.0)
    """Geometric step between sizes."""
    warmup: int = Field(default=5, ge=0, le=MAX_BENCH_ITERS)
    """Untimed iterations per point."""
    iters: int = Field(default=20, ge=1, le=MAX_BENCH_ITERS)
    """Timed iterations per point."""
    groups: tuple[GroupKind, ...] = ("all",)
    """all = every rank; intra = the ranks of each node; inter = one rank per node (one group per local index)."""
    algorithm: str | None = None
    """NCCL_ALGO to force (ring, tree, nvls, ...); nccl backend only."""
    protocol: str | None = None
    """NCCL_PROTO to force (ll, ll128, simple); nccl backend only."""
    dtype: Literal[BENCH_DTYPES] = "float32"  # type: ignore[valid-type]  # the choices are dtypes.BENCH_DTYPES
    """Element type of the buffers."""
    timeout_s: float = Field(default=120.0, gt=0)
    """A collective that takes longer ends the run with an error."""
    resume: bool = False
    """Skip points already in ``out_path``."""
    system: str | None = None
    """Profile name recorded in the CSV (lets `calibrate fit` find its base)."""
    quiet: bool = False
    """No progress lines."""


def _groups(kind: str, node_of: list[str]) -> tuple[list[list[int]], str]:
    """Rank lists of the sub-groups of ``kind`` (and a reason when there are none)."""
    world = len(node_of)
    nodes = list(dict.fromkeys(node_of))
    members = {n: [r for r in range(world) if node_of[r] == n] for n in nodes}
    if kind == "all":
        return [list(range(world))], ""
    if kind == "intra":
        if all(len(m) < 2 for m in members.values()):
            return [], "intra: every node has one rank"
        return list(members.values()), ""
    if len(nodes) < 2:
        return [], "inter: the job runs on one node"
    per_node = {len(m) for m in members.values()}
    if len(per_node) != 1:
        return [], "inter: nodes have different numbers of ranks"
    return [[members[n][i] for n in nodes] for i in range(per_node.pop())], ""


def run_benchmark(config: BenchConfig) -> dict[str, Any] | None:
    """Run the sweep on this rank; rank 0 returns a summary, the others None."""
    import torch

    backend = config.backend
    if backend == "auto" and os.environ.get("RANK") is None:
        from commmodel.calibrate.mpi_dist import under_mpirun

        backend = "mpi" if under_mpirun() else backend
    if backend == "mpi":
        return _run_mpi(config, torch)
    import torch.distributed as dist

    where = placement()
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if (config.algorithm or config.protocol) and backend != "nccl":
        raise CalibrationError("--algo/--proto set NCCL_ALGO/NCCL_PROTO and apply to the nccl backend only; "
                               f"{backend} runs its own algorithm (drop --algo/--proto)")
    if config.algorithm:
        os.environ["NCCL_ALGO"] = config.algorithm
    if config.protocol:
        os.environ["NCCL_PROTO"] = config.protocol
    algorithm = os.environ.get("NCCL_ALGO", "").lower() if backend == "nccl" else ""
    protocol = os.environ.get("NCCL_PROTO", "").lower() if backend == "nccl" else ""
    device = torch.device("cpu")
    if backend == "nccl":
        if not (torch.cuda.is_available() and dist.is_nccl_available()):
            raise CalibrationError(f"--backend nccl needs CUDA GPUs and a torch built with NCCL; this torch "
                                   f"({torch.__version__}) sees none: use --backend gloo on CPU")
        device = torch.device("cuda", where.local_rank)
        torch.cuda.set_device(device)
    try:
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=config.timeout_s))
    except Exception as err:  # noqa: BLE001 - rendezvous/network errors become one line
        text = " ".join(str(err).split())[:200]
        raise CalibrationError(
            f"rank {where.rank} could not join the {backend} process group of {where.world_size} ranks "
            f"({type(err).__name__}: {text}); check MASTER_ADDR/MASTER_PORT and the network") from None
    result = _sweep(config, where, backend, algorithm or "auto", protocol, device, torch, dist)
    # Only after success: tearing down a group whose peer died can block (the launcher cleans up instead).
    dist.destroy_process_group()
    return result


def _run_mpi(config: BenchConfig, torch: Any) -> dict[str, Any] | None:
    """The same sweep over MPI: mpi4py answers the torch.distributed calls (:class:`.mpi_dist.MpiDist`) on CPU
    tensors; MPI chooses its own algorithm per call, recorded as "auto"."""
    from commmodel.calibrate.mpi_dist import MPI_DTYPES, MpiDist, import_mpi, mpi_placement, under_mpirun

    if config.algorithm or config.protocol:
        raise CalibrationError("--algo/--proto set NCCL_ALGO/NCCL_PROTO and apply to the nccl backend only; "
                               "mpi runs its own algorithm (drop --algo)")
    if config.dtype not in MPI_DTYPES:
        raise CalibrationError(f"--backend mpi measures {', '.join(MPI_DTYPES)} only (MPI has no 16-bit float "
                               f"reduction type); drop --dtype {config.dtype}")
    if not under_mpirun():  # under torchrun each worker would be a 1-rank MPI job, all racing for --out
        raise CalibrationError("--backend mpi runs under mpirun (mpirun -np N python -m commmodel calibrate run "
                               "--backend mpi ...), not torchrun or a bare process; use --backend gloo with torchrun")
    mpi = import_mpi()
    return _sweep(config, mpi_placement(mpi), "mpi", "auto", "", torch.device("cpu"), torch, MpiDist(mpi))


def _open_out(config, where: Placement, backend, device, torch, dist) -> tuple[Any, set, list[str]]:
    """Rank 0 opens the CSV (dropping a torn last row, with a warning); every rank learns the points to skip
    (or the error) from it. Returns (writer on rank 0 else None, points already measured, node key per rank)."""
    rank, world = where.rank, where.world_size
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    facts: list[Any] = [None] * world
    dist.all_gather_object(facts, (where.node_key, os.uname().nodename, device_name))
    node_of = [f[0] for f in facts]
    # Rank 0 opens the CSV; every rank learns the points to skip (or the error) from it.
    writer, shared = None, [None, []]
    if rank == 0:
        extra = {"launcher": where.launcher, "dtype": config.dtype, "warmup": config.warmup, "iters": config.iters,
                 "timeout_s": config.timeout_s, "system": config.system or ""}
        if backend == "mpi":
            from commmodel.calibrate.mpi_dist import mpi_versions

            extra.update(mpi_versions(dist.mpi), hosts=", ".join(sorted({f[1] for f in facts})))
        env = environment_block(torch, backend, world, node_of, [f[1] for f in facts], [f[2] for f in facts], extra)
        try:
            writer = MeasurementWriter(config.out_path, "collectives", env, resume=config.resume)
            for warning in writer.warnings:
                sys.stderr.write(f"warning: {warning}\n")
            if config.resume:
                shared[1] = sorted(writer.points_in_file)
        except CalibrationError as err:
            shared[0] = str(err)
    dist.broadcast_object_list(shared, src=0)
    if shared[0]:
        if rank == 0:
            raise CalibrationError(shared[0])
        raise SystemExit(1)
    return writer, set(shared[1]), node_of


def _sweep(config, where: Placement, backend, algorithm, protocol, device, torch, dist) -> dict[str, Any] | None:
    rank, world = where.rank, where.world_size
    writer, done, node_of = _open_out(config, where, backend, device, torch, dist)
    store = default_store(dist)
    fault = fault_spec()
    current = {"what": "start-up"}

    watchdog = start_watchdog(config, rank, writer)
    element_bytes = ELEMENT_BYTES[config.dtype]
    dtype = getattr(torch, config.dtype)
    sizes = whole_sweep_sizes_bytes(config.min_size_bytes, config.max_size_bytes, config.factor, CalibrationError)
    skipped: list[str] = []
    written_before = 0
    points_done = 0
    try:
        for kind in config.groups:
            lists, reason = _groups(kind, node_of)
            if reason:
                skipped.append(reason)
                if writer:
                    writer.note(f"skipped: group={kind} reason={reason}")
                continue
            handles = [None] if kind == "all" else [dist.new_group(ranks) for ranks in lists]
            mine = next(i for i, ranks in enumerate(lists) if rank in ranks)
            group, my_ranks = handles[mine], lists[mine]
            n0, nodes0 = len(lists[0]), len({node_of[r] for r in lists[0]})
            for op_name in config.ops:
                op = BENCH_OPS[op_name]
                probed = False
                for size in sizes:
                    count = element_count(op, size, n0, element_bytes)
                    size_bytes = count * element_bytes
                    row_key = {"op": op.name, "size_bytes": size_bytes, "num_ranks": n0, "num_nodes": nodes0,
                               "group": kind, "algorithm": algorithm, "protocol": protocol, "dtype": config.dtype}
                    if point_key(row_key) in done:
                        continue
                    done.add(point_key(row_key))
                    current["what"] = f"{op.name} of {format_size(size_bytes)} on {n0} ranks ({kind} groups)"
                    my_count = element_count(op, size, len(my_ranks), element_bytes)
                    bufs = op.make(torch, my_count, len(my_ranks), dtype, device)
                    if not probed:
                        probed = True
                        reason = probe_op(op, bufs, group, my_ranks, rank, dist, torch, device)
                        if reason:
                            skipped.append(f"{op.name} ({kind}): {reason}")
                            if writer:
                                writer.note(f"skipped: op={op.name} group={kind} reason={reason}")
                            break
                    maybe_fail(fault, rank, op.name, size_bytes, config.timeout_s)
                    watchdog.what, watchdog.started_at = current["what"], time.monotonic()
                    times = time_point(op, bufs, group, my_ranks, rank, config, dist, torch, device)
                    watchdog.started_at = None
                    points_done += 1
                    if rank == 0:
                        writer.write_row(_row(row_key, times, config))
                        _progress(config, row_key, times)
    except (Stop, KeyboardInterrupt, Exception) as err:  # noqa: BLE001 - any backend error, or Ctrl-C, ends the
        # run with one line
        if isinstance(err, CalibrationError):
            raise
        watchdog.started_at = None
        message, silent = failure_message(err, rank, world, store, current["what"], config.timeout_s)
        end_run(message, silent, rank, world, writer.rows_written if writer else points_done, config.out_path)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if writer:
            written_before = writer.rows_written
            writer.close()
    if rank != 0:
        return None
    return {"out": str(config.out_path), "rows_written": written_before, "skipped": skipped,
            "backend": backend, "world_size": world, "num_nodes": len(set(node_of)),
            "algorithm": algorithm, "protocol": protocol}


def _row(key: dict[str, Any], times: np.ndarray, config: BenchConfig) -> dict[str, Any]:
    median = float(np.median(times))
    algbw = key["size_bytes"] / median / 1e9 if median > 0 else None
    return {**key, "time_s_median": median, "time_s_p10": float(np.percentile(times, 10)),
            "time_s_p90": float(np.percentile(times, 90)), "algbw_GBps": algbw,
            "busbw_GBps": algbw * float(busbw_factor(key["op"], key["num_ranks"])) if algbw else None,
            "iters": config.iters, "time_stat": "median", "source": "commmodel calibrate run"}


def _progress(config: BenchConfig, key: dict[str, Any], times: np.ndarray) -> None:
    if config.quiet or not sys.stderr.isatty():
        return
    median = float(np.median(times))
    sys.stderr.write(f"{key['op']:>14} {format_size(key['size_bytes']):>10} {key['num_ranks']:>4} ranks "
                     f"{median * 1e6:10.2f} us\n")
