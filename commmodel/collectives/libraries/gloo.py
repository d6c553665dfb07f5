"""gloo (torch.distributed's CPU backend): its algorithms, torch's choice, TCP transport, CPU reduction.

Algorithms (facebookincubator/gloo@cc441984 ``gloo/``): all-reduce ``allreduce_ring.h``,
``allreduce_ring_chunked.h``, ``allreduce_halving_doubling.h`` (Rabenseifner's reduce-scatter by halving +
all-gather by doubling), ``allreduce_bcube.h`` and the newer ``allreduce.cc`` (ring or bcube);
``broadcast.cc`` a binomial tree (``for (i < dim)`` rounds over virtual ranks); ``allgather.cc`` a ring;
``alltoall.cc`` direct pairwise exchange; ``barrier`` a dissemination pattern.

torch's choice: ``ProcessGroupGloo::allreduce`` (pytorch/pytorch torch/csrc/distributed/c10d/
ProcessGroupGloo.cpp, ``AsyncAllreduceWork::allreduce``) builds ``gloo::AllreduceOptions`` without
``setAlgorithm``, so ``gloo/allreduce.cc`` (@cc441984, ``switch (opts.algorithm)``: ``UNSPECIFIED`` falls
through to ``RING``) runs the ring — for every size and rank count. GPU tensors are copied to pinned host
memory first (``AsyncAllreduceCUDAWork``) and back after.

Transport: gloo's TCP pairs, one socket per peer. Inside a host: loopback TCP; across hosts: TCP over
the NIC (IPoIB or Ethernet), one stream per peer, each stream bounded by the CPU copies of one core.
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.libraries.host import Form, Transport, staging_bw_bytes_per_s
from commmodel.collectives.primitives import REDUCTION_BYTES_PER_BYTE
from commmodel.collectives.libraries.rules import DecisionTable, always
from commmodel.hardware.models import System

TORCH_GLOO_ALLREDUCE_SOURCE = ("pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupGloo.cpp AsyncAllreduceWork "
                               "(no setAlgorithm) + facebookincubator/gloo@cc441984 gloo/allreduce.cc "
                               "(UNSPECIFIED -> ring)")

GLOO_RULES: dict[str, DecisionTable] = {
    "all_reduce": always("ring", TORCH_GLOO_ALLREDUCE_SOURCE),
    "broadcast": always("binomial_tree", "facebookincubator/gloo@cc441984 gloo/broadcast.cc (binomial rounds)"),
    "all_gather": always("ring", "facebookincubator/gloo@cc441984 gloo/allgather.cc (ring)"),
    "reduce_scatter": always("ring", "pytorch ProcessGroupGloo reduce_scatter: gloo reduce_scatter (ring)"),
    "reduce": always("binomial_tree", "facebookincubator/gloo@cc441984 gloo/reduce.cc"),
    "all_to_all": always("pairwise", "facebookincubator/gloo@cc441984 gloo/alltoall.cc (direct pairs)"),
    "gather": always("pairwise", "facebookincubator/gloo@cc441984 gloo/gather.cc (every rank to the root)"),
    "scatter": always("pairwise", "facebookincubator/gloo@cc441984 gloo/scatter.cc (the root to every rank)"),
    "send_recv": always("p2p", "one TCP pair"),
    "barrier": always("dissemination", "facebookincubator/gloo@cc441984 gloo/barrier.cc"),
}
"""What torch.distributed with gloo runs, per primitive."""

def torch_copied_bytes(op: str, n: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Buffer copies torch's ProcessGroupGloo adds around gloo's algorithm: all-gather gathers into a new flat
    tensor and copies it out to the output (S; ``AsyncAllgatherWork``: ``newLikeFlat`` then ``copy_``), after gloo
    copied the rank's own block into its slot (S/n; gloo/allgather.cc). All-reduce and broadcast run in place."""
    return size + size / n if op == "all_gather" else 0.0 * size


GLOO_MAX_SEGMENT_BYTES = 1 << 20
"""``AllreduceOptionsImpl::kMaxSegmentSize = 1024 * 1024`` (pytorch/gloo@70dc360 gloo/allreduce.h): the largest
send/recv of the all-reduce ring, "of which two are in flight at all times"."""


def gloo_ring_segments_per_rank(n: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Segments per rank of gloo's all-reduce ring: ``numSegments = roundUp(max(ceil(S / kMaxSegmentSize), 2n), n)``
    (pytorch/gloo@70dc360 gloo/allreduce.cc ``ring``: at least two per rank, so that one is in flight while the other
    is reduced), so numSegments / n = ceil(max(ceil(S / 1 MiB), 2n) / n) ≥ 2."""
    n = np.asarray(n, dtype=float)
    return np.ceil(np.maximum(np.ceil(np.asarray(size, dtype=float) / GLOO_MAX_SEGMENT_BYTES), 2.0 * n) / n)


def _gloo_ring_all_reduce(n, s):
    """gloo/allreduce.cc ``ring`` (what torch runs): a reduce-scatter then an all-gather, each of (n − 1)·k segment
    steps of S / (n·k) bytes (k = :func:`gloo_ring_segments_per_rank`), two in flight; each received segment lands
    in a scratch buffer and is summed into the output (``opts.reduce(out, out, tmp)``: (n − 1)/n·S reduced). Every
    segment is its own send/recv, so 2(n − 1)·k messages where the textbook ring sends 2(n − 1). Exact while every
    segment holds at least one element (torch passes the tensor as the one output: no input copy, no
    ``broadcastOutputs`` copy)."""
    k = gloo_ring_segments_per_rank(n, s)
    return 2.0 * (n - 1) * k, 2.0 * (n - 1) / n * s, (n - 1) / n * s


def _gloo_ring_all_gather(n, s):
    """gloo/allgather.cc: n − 1 ring steps, each sending the rank's block as two halves (``chunkSize[0..1]``, both in
    flight): 2(n − 1) messages, (n − 1)/n·S received."""
    return 2.0 * (n - 1), (n - 1) / n * s, 0.0 * s


GLOO_FORMS: dict[tuple[str, str], Form] = {
    ("ring", "all_reduce"): _gloo_ring_all_reduce, ("ring", "all_gather"): _gloo_ring_all_gather,
}
"""gloo's own forms where its ring differs from the textbook one (:data:`.host.FORMS`): its messages are segments.
Each is a rendezvous over TCP (gloo/transport/tcp/pair.cc ``Pair::send``: the data leaves once the peer's
``sendNotifyRecvReady`` arrived), which the two messages in flight overlap: one α per message."""


GLOO_ALGORITHMS = frozenset({"ring", "ring_chunked", "halving_doubling", "bcube", "binomial_tree", "pairwise",
                             "p2p", "dissemination"})
"""gloo's own algorithms (``--algo NAME`` may force any that implements the op)."""

GLOO_ONLY_ALGORITHMS = frozenset({"ring_chunked", "halving_doubling", "bcube"})
"""gloo's implementations no MPI library runs (gloo/allreduce.cc ring-chunked, halving-doubling and bcube): ``--algo``
refuses them under Open MPI and MPICH, whose own choices are recursive doubling, Rabenseifner, ring, Bruck, binomial."""

GLOO_CALL_S = 60e-6
"""One torch.distributed gloo collective call with nothing to send: ``dist.all_reduce`` of 4 bytes on a world of
one rank, i.e. ProcessGroupGloo's work queue (enqueue to its worker thread, run, wake the caller). Median of 2000
calls, median over 4 runs (97, 98, 15, 22 us: the wake-ups cost more when the host is busy) of
``python benchmarks/host_microbench.py`` on the commmodel development VM (2 vCPU, shared, 2026-11-24)."""

GLOO_HANDOFF_S = 63e-6
"""gloo's own cost per message beyond the TCP link's: a 4-byte ``dist.send``/``dist.recv`` ping-pong between 2
gloo ranks takes 86 us per half round trip (median over 4 runs of 78-98 us, same benchmark, VM and date) where
one over raw loopback TCP takes the link's 23 us (links.yaml loopback-tcp): the receive is read by gloo's
device-loop thread, which then wakes the waiting thread (two thread hand-offs per message)."""

TCP_EXCHANGE_EVIDENCE = ("a 16 MiB exchange both ways at once runs at 1.45 GB/s per direction (median over 4 runs, "
                         "1.37-1.52) against the one-way loopback rate of 2.7 GB/s (links.yaml): 1.86x, near the 2x of "
                         "both ends copying (benchmarks/host_microbench.py, development VM, 2026-11-24)")
"""Why gloo's transport has ``copies="both"``: over TCP an exchanging rank copies each byte out and in."""

EEVDF_BASE_SLICE_S = 0.70e-3
"""Linux's scheduler slice before scaling: ``sysctl_sched_base_slice = 700000ULL`` ns (torvalds/linux
kernel/sched/fair.c from v6.15, lkml 20250208075322; 750000 in v6.6-v6.14), scaled by 1 + ilog2(min(cpus, 8))
(``update_sysctl``/``get_update_sysctl_factor``, SCHED_TUNABLESCALING_LOG, the default): 1.4 ms on 2 cores."""

LOOPBACK_TCP_LATENCY_S = 23e-6
"""One message over loopback TCP: the catalogue's ``loopback-tcp`` link (hardware_profiles/links.yaml, measured
on the commmodel development VM, 1-byte ping-pong, median half round trip); a test keeps them equal."""

LOOPBACK_TCP_BW_BYTES_PER_S = 2.7e9
"""One loopback TCP stream: the catalogue's ``loopback-tcp`` rate (best of 10 × 64 MiB on the development VM)."""

TCP_STREAM_BW_BYTES_PER_S = LOOPBACK_TCP_BW_BYTES_PER_S
"""A TCP stream across hosts is bounded like one over loopback by one core's kernel copies (assumed equal)."""


DEFAULT_HOST_MEMORY_BW_BYTES_PER_S = 614.4e9
"""Host memory bandwidth of a dual-socket GPU server when its profile omits it: 2 sockets × 8 channels ×
DDR5-4800 × 8 B = 614.4 GB/s (Intel Xeon Platinum 8480+ spec, ark.intel.com: 8 channels DDR5-4800; the DGX H100
carries two)."""

REDUCE_TRAFFIC_BYTES_PER_BYTE = REDUCTION_BYTES_PER_BYTE
"""A CPU reduction of one byte reads two operands and writes one result
(:data:`commmodel.collectives.primitives.REDUCTION_BYTES_PER_BYTE`)."""


def host_memory_bw_per_rank(system: System) -> float:
    """One rank's share of host memory bandwidth (CPU hosts: their per-rank DDR share is the 'GPU' memory)."""
    if system.ranks_are_cpus:
        return system.gpu.hbm_bw_bytes_per_s.value
    node = (system.host_memory_bw_bytes_per_s.value if system.host_memory_bw_bytes_per_s is not None
            else DEFAULT_HOST_MEMORY_BW_BYTES_PER_S)
    return node / system.gpus_per_node


def scheduler_slice_s(system: System) -> float:
    """The slice a runnable rank waits behind a running one on ``system``'s cores (:data:`EEVDF_BASE_SLICE_S`)."""
    cores = 8.0 if system.host_cores is None else min(system.host_cores.value, 8.0)
    return EEVDF_BASE_SLICE_S * (1.0 + np.floor(np.log2(max(cores, 1.0))))


def time_shared_wait_s(system: System) -> float:
    """Expected wait of a woken gloo rank for a core when all c of ``system``'s cores are busy: each running task is
    at a uniformly random point of its slice (:func:`scheduler_slice_s`) and the first of the c to end frees a core,
    so the wait is E[min of c uniforms on [0, slice]] = slice / (c + 1): 0.47 ms on 2 cores. (Evidence, not a fit:
    4 gloo ranks on the 2-core development VM, 4-64 KiB, 3 sweeps each, 2026-11-26: the all-reduce's 12 messages
    and the all-gather's 6 leave 0.56 and 0.46 ms per message beyond f·(call + α); the full slice, 1.4 ms, priced
    them ×2 too slow.)"""
    cores = 8.0 if system.host_cores is None else max(system.host_cores.value, 1.0)
    return scheduler_slice_s(system) / (cores + 1.0)


def gloo_transport(system: System, spans_nodes: np.ndarray, ranks_per_node: np.ndarray) -> Transport:
    """α, β, γ of gloo: loopback TCP inside a host (the profile's own link on a CPU host) plus gloo's hand-off per
    message, TCP over the NIC across; torch's work queue per call; both ends copy (TCP_EXCHANGE_EVIDENCE).
    gloo's threads block between messages: a time-shared receiver is reached when a core frees
    (:func:`time_shared_wait_s`), and a rank waiting for its message sleeps (``sleeping_waits``: pytorch/gloo @70dc360
    gloo/transport/tcp/unbound_buffer.cc L59 ``recvCv_.wait_for``, loop.cc L200 ``epoll_wait``), so the cores are
    shared only by the ranks a round involves."""
    cpu = system.ranks_are_cpus
    intra_s = (system.scale_up.latency_s.value if cpu else LOOPBACK_TCP_LATENCY_S) + GLOO_HANDOFF_S
    intra_bw = system.scale_up.effective_bw_bytes_per_s if cpu else LOOPBACK_TCP_BW_BYTES_PER_S
    out = system.scale_out
    if out is None:
        inter_s, inter_bw = np.inf, 0.0
    else:
        inter_s = out.latency_s.value + intra_s  # the fabric plus the TCP stack's and gloo's per-message cost
        inter_bw = np.minimum(out.node_bw_bytes_per_s / ranks_per_node, TCP_STREAM_BW_BYTES_PER_S)
    return Transport(
        message_s=np.where(spans_nodes, inter_s, intra_s),
        bw_bytes_per_s=np.where(spans_nodes, np.minimum(inter_bw, intra_bw), intra_bw),
        reduce_bw_bytes_per_s=host_memory_bw_per_rank(system) / REDUCE_TRAFFIC_BYTES_PER_BYTE,
        staging_bw_bytes_per_s=np.inf if cpu else staging_bw_bytes_per_s(system),
        call_s=GLOO_CALL_S, copies="both", wait_s=time_shared_wait_s(system), sleeping_waits=True,
    )
