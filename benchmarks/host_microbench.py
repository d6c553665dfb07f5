"""The host-library constants of commmodel, measured: per-call and per-message costs, stream rates, reduction rate.

    python benchmarks/host_microbench.py [--samples 2000]
    python benchmarks/host_microbench.py --sweep [--max-size 64MiB]

Runs, each on its own processes (gloo through torch.distributed with ``world_size`` set by hand, MPI through
mpi4py under ``mpirun`` when it is installed), and prints medians (the machine is shared: medians, never means):

* ``gloo call``: one ``dist.all_reduce`` of 4 bytes on a world of **one** rank: torch's ProcessGroupGloo work
  queue (enqueue to its worker thread, run, wake the caller) with no message at all.
* ``gloo message``: half the round trip of a 4-byte ``dist.send``/``dist.recv`` ping-pong between 2 ranks
  (gloo's TCP pair: a write by the sender, the receiver's device-loop thread reads and wakes the waiting thread).
* ``gloo stream`` / ``gloo duplex``: 16 MiB one way (ping-pong, half round trip) and both ways at once
  (``isend`` + ``irecv`` on both ranks): the rate of one stream and of one rank that sends and receives together.
* ``reduce``: ``a.add_(b)`` on two 16 MiB fp32 tensors in one thread: bytes of S combined per second.
* ``ring round``: every rank sends 4 bytes to the next and receives from the previous one at once (nccl-tests'
  sendrecv pattern): one round with every rank active, on 2 ranks and on 4 (more ranks than this machine's cores:
  the time-shared round).
* ``mpi message`` / ``mpi ring round``: the same with mpi4py, on 2 and on 4 ranks.

``--sweep`` measures, instead, how the rates depend on the message size (64 KiB to ``--max-size`` by ×2, the
median of up to 200 samples per size):

* ``copy``: one core's ``np.copyto`` of S bytes from one buffer into another, the same two buffers every time
  (what a ping-pong or a repeated collective does): the cache-resident copy rate while 2·S fits the caches, the
  DRAM rate beyond.
* ``mpi pingpong``: S bytes one way between 2 ranks (half round trip; vader: eager fragments up to 4 KiB, then a
  single CMA ``process_vm_readv`` by the receiver), the same buffers every time: each rank sends the buffer it has
  just received (its lines are dirty in its own core's cache when the peer reads them).
* ``mpi one-way``: rank 0 sends S, rank 1 answers with 1 byte (osu_bw's pattern with a window of one): the sender's
  buffer is only ever read, as a broadcast's root's is; S / (round trip).
* ``mpi duplex``: both ranks ``Sendrecv`` S at once (the step of an exchange: all-gather, all-reduce): each core
  copies its S at the same time as the other; S / time per rank.
* ``gloo pingpong``: the same over gloo's TCP pair.

These are microbenchmarks of the transport, not of the collectives that ``benchmarks/library_accuracy.py`` checks:
the model's constants come from here (with the date and machine), the collectives judge the model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from commmodel.sweep_sizes import whole_sweep_sizes_bytes

SMALL_BYTES, BIG_BYTES = 4, 16 * 2**20
SWEEP_MIN_BYTES, SWEEP_SAMPLES = 64 * 2**10, 200


def small_pages() -> None:
    """Let NumPy allocate with 4 KiB pages, as the collectives' torch tensors are (NumPy otherwise asks for huge
    pages from 4 MiB up, ``madvise(MADV_HUGEPAGE)``; torch only with ``THP_MEM_ALLOC_ENABLE``): CMA pins the
    sender's pages one by one, so the page size changes the copy rate."""
    import numpy._core.multiarray as multiarray  # private, but the only switch NumPy has (numpy>=2)

    multiarray._set_madvise_hugepage(False)


def sweep_sizes(max_bytes: int) -> list[int]:
    """64 KiB, 128 KiB, ... up to ``max_bytes`` (the sweep rule every command uses, commmodel/sweep_sizes.py)."""
    return whole_sweep_sizes_bytes(SWEEP_MIN_BYTES, max_bytes, 2.0)


def sweep_samples(size_bytes: int) -> int:
    """Samples per size: about 0.5 GB moved per size at most, at least 10."""
    return int(max(10, min(SWEEP_SAMPLES, 2**29 // size_bytes)))


def copy_sweep(max_bytes: int) -> dict[int, float]:
    """One core's copy rate (S / median time of ``np.copyto``) per size, the same two buffers every time."""
    small_pages()
    rates = {}
    for size in sweep_sizes(max_bytes):
        src, dst = np.ones(size, dtype=np.uint8), np.zeros(size, dtype=np.uint8)
        rates[size] = size / _median(lambda: np.copyto(dst, src), sweep_samples(size))
    return rates


def _gloo_worker(rank: int, world: int, port: int, samples: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    result = {}
    if world == 1:
        x = torch.zeros(1)
        result["gloo_call_s"] = _median(lambda: dist.all_reduce(x), samples)
    else:
        peer = rank ^ 1
        small, got = torch.zeros(1), torch.zeros(1)
        nxt, prv = (rank + 1) % world, (rank - 1) % world

        def ring_round():
            reqs = [dist.isend(small, nxt), dist.irecv(got, prv)]
            for req in reqs:
                req.wait()

        result["gloo_ring_round_s"] = _median(ring_round, samples)
        result["gloo_message_s"] = _pingpong(lambda: dist.send(small, peer), lambda: dist.recv(got, peer), rank,
                                             samples) / 2
        big, back = torch.zeros(BIG_BYTES // 4), torch.zeros(BIG_BYTES // 4)
        one_way = _pingpong(lambda: dist.send(big, peer), lambda: dist.recv(back, peer), rank, 10) / 2
        result["gloo_stream_bytes_per_s"] = BIG_BYTES / one_way

        def duplex():
            reqs = [dist.isend(big, peer), dist.irecv(back, peer)]
            for req in reqs:
                req.wait()

        result["gloo_duplex_bytes_per_s"] = BIG_BYTES / _median(duplex, 10)
        if rank == 0:
            a, b = torch.zeros(BIG_BYTES // 4), torch.zeros(BIG_BYTES // 4)
            result["reduce_bytes_per_s"] = BIG_BYTES / _median(lambda: a.add_(b), 50)
    dist.barrier()
    if rank == 0:
        with open(out, "w") as fh:
            json.dump(result, fh)
    dist.destroy_process_group()


def _median(fn, samples: int) -> float:
    fn()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _pingpong(send, recv, rank: int, samples: int) -> float:
    """Median round trip of ``send()`` / ``recv()`` between rank pairs (the even rank starts)."""
    steps = (send, recv) if rank % 2 == 0 else (recv, send)
    return _median(lambda: [step() for step in steps], samples)


def _mpi_sweep_worker(max_bytes: int) -> None:
    """Half round trip of S bytes between ranks 0 and 1 per size; rank 0 prints {size: bytes per second}."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, peer = comm.Get_rank(), comm.Get_rank() ^ 1
    small_pages()
    rates: dict[str, dict[int, float]] = {"mpi pingpong": {}, "mpi one-way": {}, "mpi duplex": {}}
    ack = np.zeros(1, dtype=np.uint8)
    for size in sweep_sizes(max_bytes):
        buf = np.ones(size, dtype=np.uint8)
        half = _pingpong(lambda: comm.Send(buf, peer), lambda: comm.Recv(buf, peer), rank, sweep_samples(size)) / 2
        rates["mpi pingpong"][size] = size / half
        out = _pingpong(lambda: comm.Send(buf, peer), lambda: comm.Recv(ack, peer), rank, sweep_samples(size)) \
            if rank == 0 else _pingpong(lambda: comm.Send(ack, peer), lambda: comm.Recv(buf, peer), rank,
                                        sweep_samples(size))
        rates["mpi one-way"][size] = size / out
        got = np.zeros(size, dtype=np.uint8)
        both = _median(lambda: comm.Sendrecv(buf, peer, recvbuf=got, source=peer), sweep_samples(size))
        rates["mpi duplex"][size] = size / both
    if rank == 0:
        print(json.dumps(rates))


def _gloo_sweep_worker(rank: int, port: int, max_bytes: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    rates = {}
    for size in sweep_sizes(max_bytes):
        buf = torch.ones(size, dtype=torch.uint8)
        half = _pingpong(lambda: dist.send(buf, 1 - rank), lambda: dist.recv(buf, 1 - rank), rank,
                         sweep_samples(size)) / 2
        rates[size] = size / half
    if rank == 0:
        with open(out, "w") as fh:
            json.dump(rates, fh)
    dist.destroy_process_group()


def _mpi_worker(samples: int) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, peer = comm.Get_rank(), comm.Get_rank() ^ 1
    buf = np.zeros(1, dtype=np.float32)
    half = _pingpong(lambda: comm.Send(buf, peer), lambda: comm.Recv(buf, peer), rank, samples) / 2
    got = np.zeros(1, dtype=np.float32)
    nxt, prv = (rank + 1) % comm.Get_size(), (rank - 1) % comm.Get_size()
    ring = _median(lambda: comm.Sendrecv(buf, nxt, recvbuf=got, source=prv), samples)
    halves, rings = comm.gather(half), comm.gather(ring)
    if rank == 0:
        print(json.dumps({"mpi_message_s": float(np.median(halves)), "mpi_ring_round_s": float(np.max(rings))}))


def _spawn_processes(target, world: int, *args) -> dict:
    """Run ``target(rank, ..., out_path)`` in ``world`` spawned processes; the JSON rank 0 wrote to out_path."""
    import multiprocessing as mp
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        procs = [mp.get_context("spawn").Process(target=target, args=(r, *args, tmp.name)) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        with open(tmp.name) as fh:
            return json.load(fh)


def _spawn_gloo(world: int, samples: int) -> dict:
    port = 29500 + os.getpid() % 1000 + world
    return _spawn_processes(_gloo_worker, world, world, port, samples)


def _spawn_mpi(ranks: int, samples: int, *extra: str) -> dict:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    done = subprocess.run([shutil.which("mpirun"), "--oversubscribe", "-np", str(ranks), sys.executable, __file__,
                           "--mpi-worker", "--samples", str(samples), *extra], capture_output=True, text=True,
                          env=env, timeout=600)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _spawn_gloo_sweep(max_bytes: int) -> dict:
    port = 29700 + os.getpid() % 1000
    return _spawn_processes(_gloo_sweep_worker, 2, port, max_bytes)


def size_sweep(max_bytes: int) -> None:
    """Print the copy, MPI and gloo rates per size (GB/s), one row per size."""
    columns = {"copy": copy_sweep(max_bytes)}
    if shutil.which("mpirun"):
        columns.update(_spawn_mpi(2, 1, "--sweep", "--max-size", str(max_bytes)))
    columns["gloo pingpong"] = _spawn_gloo_sweep(max_bytes)
    print(f"{'size':>10s}" + "".join(f"{name:>16s}" for name in columns) + "   (GB/s, median)")
    for size in sweep_sizes(max_bytes):
        cells = "".join(f"{float(col[str(size)] if str(size) in col else col[size]) / 1e9:16.2f}"
                        for col in columns.values())
        print(f"{size / 2**10:>7.0f}KiB{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--sweep", action="store_true", help="rates per message size (copy, MPI, gloo) instead")
    parser.add_argument("--max-size", type=int, default=64 * 2**20, help="largest size of --sweep, bytes")
    parser.add_argument("--mpi-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mpi_worker:
        _mpi_sweep_worker(args.max_size) if args.sweep else _mpi_worker(args.samples)
        return
    if args.sweep:
        print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
        size_sweep(args.max_size)
        print(f"load after {os.getloadavg()[0]:.2f}")
        return
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; medians of {args.samples} samples")
    rows = {**_spawn_gloo(1, args.samples), **_spawn_gloo(2, args.samples)}
    rows["gloo_ring_round_4_ranks_s"] = _spawn_gloo(4, args.samples // 4)["gloo_ring_round_s"]
    if shutil.which("mpirun"):
        rows.update(_spawn_mpi(2, args.samples))
        rows["mpi_ring_round_4_ranks_s"] = _spawn_mpi(4, args.samples // 4)["mpi_ring_round_s"]
    for key, value in rows.items():
        rate = key.endswith("bytes_per_s")
        print(f"{key:30s} {value / 1e9:10.2f} GB/s" if rate else f"{key:30s} {value * 1e6:10.2f} us")
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
