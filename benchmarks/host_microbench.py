"""The host-library constants of commmodel, measured: per-call and per-message costs, stream rates, reduction rate.

    python benchmarks/host_microbench.py [--samples 2000]

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

SMALL_BYTES, BIG_BYTES = 4, 16 * 2**20


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


def _spawn_gloo(world: int, samples: int) -> dict:
    import multiprocessing as mp
    import tempfile

    port = 29500 + os.getpid() % 1000 + world
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        procs = [mp.get_context("spawn").Process(target=_gloo_worker, args=(r, world, port, samples, tmp.name))
                 for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        with open(tmp.name) as fh:
            return json.load(fh)


def _spawn_mpi(ranks: int, samples: int) -> dict:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    done = subprocess.run([shutil.which("mpirun"), "--oversubscribe", "-np", str(ranks), sys.executable, __file__,
                           "--mpi-worker", "--samples", str(samples)], capture_output=True, text=True, env=env,
                          timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--mpi-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mpi_worker:
        _mpi_worker(args.samples)
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
