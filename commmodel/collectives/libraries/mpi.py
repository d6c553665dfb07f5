"""MPI: Open MPI ``coll/tuned`` fixed decisions and MPICH's size thresholds over the textbook algorithms.

Open MPI (open-mpi/ompi ``ompi/mca/coll/tuned/coll_tuned_decision_fixed.c``, identical at v4.1.8 =
ea8f4d03 and main 8efebee7; Debian 12 ships 4.1.4): ``ompi_coll_tuned_allreduce_intra_dec_fixed``
(commutative branch), ``ompi_coll_tuned_bcast_intra_dec_fixed`` and
``ompi_coll_tuned_allgather_intra_dec_fixed`` (which compares the *per-rank* bytes ``dsize × scount``;
the other two the whole buffer). The tables below are those if-chains row by row, with Open MPI's own
algorithm names; :data:`OMPI_FORMS` says which host form prices each. Recursive-doubling all-gather on a
non-power-of-two count runs Bruck (``coll_base_allgather.c``: ``if (!pow2) ... bruck``).

MPICH (pmodels/mpich@6a79bf65 ``src/mpi/coll/cvars.txt`` defaults, rules in
``src/mpi/coll/mpir_coll_sched_auto.c``): all-reduce recursive doubling while S ≤
``MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE`` = 2048, else Rabenseifner; all-gather recursive doubling while
S < ``ALLGATHER_LONG_MSG_SIZE`` = 524288 on a power of two, else Bruck while S < ``ALLGATHER_SHORT_MSG_SIZE``
= 81920, else ring; broadcast binomial while S < ``BCAST_SHORT_MSG_SIZE`` = 12288 or n < ``BCAST_MIN_PROCS``
= 8, else scatter + recursive-doubling all-gather while S < ``BCAST_LONG_MSG_SIZE`` = 524288 on a power of two,
else scatter + ring all-gather.

Transport: shared memory inside a node (Open MPI vader / MPICH nemesis), UCX verbs across nodes. GPU buffers under
Open MPI (:data:`OMPI_STAGED_OPS`): the reductions are staged through host memory and reduced on the CPU; the other
collectives run CUDA-aware on the device buffers (CUDA IPC inside a node, GPUDirect RDMA across). MPICH is priced
CUDA-aware for every collective (its GPU reduction path is not sourced here).
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.algorithms.base import is_pow2
from commmodel.collectives.libraries.host import Transport, staging_bw_bytes_per_s
from commmodel.collectives.libraries.rules import DecisionTable, always, inf
from commmodel.hardware.models import System

OMPI_SOURCE = "open-mpi/ompi@ea8f4d03 (v4.1.8) ompi/mca/coll/tuned/coll_tuned_decision_fixed.c"

OMPI_ALLREDUCE = DecisionTable((
    (4, ((8, "ring"), (4096, "recursive_doubling"), (8192, "ring"), (16384, "recursive_doubling"), (65536, "ring"),
         (262144, "segmented_ring"), (inf, "rabenseifner"))),
    (8, ((16, "ring"), (8192, "recursive_doubling"), (inf, "rabenseifner"))),
    (16, ((8192, "recursive_doubling"), (inf, "rabenseifner"))),
    (32, ((64, "segmented_ring"), (4096, "recursive_doubling"), (inf, "rabenseifner"))),
    (64, ((128, "segmented_ring"), (inf, "rabenseifner"))),
    (128, ((262144, "recursive_doubling"), (inf, "rabenseifner"))),
    (256, ((131072, "nonoverlapping"), (262144, "recursive_doubling"), (inf, "rabenseifner"))),
    (512, ((4096, "nonoverlapping"), (inf, "rabenseifner"))),
    (2048, ((2048, "nonoverlapping"), (16384, "recursive_doubling"), (inf, "rabenseifner"))),
    (4096, ((2048, "nonoverlapping"), (4096, "segmented_ring"), (16384, "recursive_doubling"), (inf, "rabenseifner"))),
    (inf, ((2048, "nonoverlapping"), (16384, "segmented_ring"), (32768, "recursive_doubling"), (inf, "rabenseifner"))),
), OMPI_SOURCE + " ompi_coll_tuned_allreduce_intra_dec_fixed (commutative op)")
"""Open MPI's all-reduce choice for a commutative op (sum), by communicator size then total bytes."""

OMPI_BCAST = DecisionTable((
    (4, ((32, "pipeline"), (256, "binary_tree"), (512, "pipeline"), (1024, "knomial"), (32768, "basic_linear"),
         (131072, "binary_tree"), (262144, "chain"), (524288, "basic_linear"), (1048576, "binomial"),
         (inf, "binary_tree"))),
    (8, ((64, "binary_tree"), (128, "binomial"), (2048, "binary_tree"), (8192, "binomial"), (1048576, "basic_linear"),
         (inf, "chain"))),
    (16, ((8, "knomial"), (64, "binary_tree"), (4096, "knomial"), (16384, "binary_tree"), (32768, "binomial"),
          (inf, "basic_linear"))),
    (32, ((4096, "knomial"), (1048576, "binomial"), (inf, "scatter_allgather"))),
    (64, ((2048, "binomial"), (inf, "knomial"))),
    (128, ((inf, "knomial"),)),
    (256, ((2, "binomial"), (16384, "binary_tree"), (32768, "basic_linear"), (65536, "binary_tree"),
           (inf, "knomial"))),
    (1024, ((16384, "knomial"), (32768, "split_binary_tree"), (inf, "knomial"))),
    (2048, ((524288, "knomial"), (inf, "scatter_allgather"))),
    (4096, ((262144, "knomial"), (inf, "scatter_allgather"))),
    (inf, ((8192, "knomial"), (16384, "binary_tree"), (262144, "knomial"), (inf, "scatter_allgather"))),
), OMPI_SOURCE + " ompi_coll_tuned_bcast_intra_dec_fixed")
"""Open MPI's broadcast choice by communicator size then total bytes."""

OMPI_ALLGATHER = DecisionTable((
    (3, ((inf, "two_proc"),)),
    (32, ((inf, "recursive_doubling"),)),
    (64, ((1024, "recursive_doubling"), (65536, "neighbor"), (inf, "ring"))),
    (128, ((512, "recursive_doubling"), (65536, "neighbor"), (inf, "ring"))),
    (256, ((512, "recursive_doubling"), (131072, "neighbor"), (524288, "ring"), (1048576, "neighbor"), (inf, "ring"))),
    (512, ((32, "recursive_doubling"), (128, "bruck"), (1024, "recursive_doubling"), (131072, "neighbor"),
           (524288, "ring"), (1048576, "neighbor"), (inf, "ring"))),
    (1024, ((64, "recursive_doubling"), (256, "bruck"), (2048, "recursive_doubling"), (inf, "neighbor"))),
    (2048, ((4, "recursive_doubling"), (8, "bruck"), (16, "recursive_doubling"), (32, "bruck"),
            (256, "recursive_doubling"), (512, "bruck"), (4096, "recursive_doubling"), (inf, "neighbor"))),
    (4096, ((32, "bruck"), (128, "recursive_doubling"), (512, "bruck"), (4096, "recursive_doubling"),
            (inf, "neighbor"))),
    (inf, ((2, "recursive_doubling"), (8, "bruck"), (16, "recursive_doubling"), (512, "bruck"),
           (4096, "recursive_doubling"), (inf, "neighbor"))),
), OMPI_SOURCE + " ompi_coll_tuned_allgather_intra_dec_fixed (per-rank bytes)", size_is_per_rank=True)
"""Open MPI's all-gather choice by communicator size then per-rank bytes."""

OMPI_RULES: dict[str, DecisionTable] = {
    "all_reduce": OMPI_ALLREDUCE, "broadcast": OMPI_BCAST, "all_gather": OMPI_ALLGATHER,
    "reduce_scatter": always("ring", "modelled as a ring (Open MPI's reduce_scatter table not transcribed)"),
    "reduce": always("binomial_tree", "modelled as a binomial tree (reduce table not transcribed)"),
    "all_to_all": always("pairwise", "modelled as pairwise exchange (alltoall table not transcribed)"),
    "gather": always("pairwise", "linear gather"), "scatter": always("pairwise", "linear scatter"),
    "send_recv": always("p2p", "one message"), "barrier": always("dissemination", "recursive doubling barrier"),
}

OMPI_FORMS: dict[str, str] = {
    "basic_linear": "parameter_server", "nonoverlapping": "reduce_bcast", "segmented_ring": "ring",
    "pipeline": "ring", "chain": "ring", "split_binary_tree": "binomial_tree", "binary_tree": "binomial_tree",
    "binomial": "binomial_tree", "knomial": "binomial_tree", "scatter_allgather_ring": "scatter_allgather",
    "neighbor": "neighbor_exchange", "two_proc": "ring",
}
"""Open MPI algorithm name -> the host form pricing it (names not listed price as themselves). Broadcast's
basic_linear is the ``linear`` form (see :func:`ompi_form`)."""

MPICH_SOURCE = "pmodels/mpich@6a79bf65 src/mpi/coll/cvars.txt + src/mpi/coll/mpir_coll_sched_auto.c"
MPICH_ALLREDUCE_SHORT_MSG_BYTES = 2048
"""MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE default (recursive doubling while S ≤ it)."""
MPICH_ALLGATHER_SHORT_MSG_BYTES = 81920
"""MPIR_CVAR_ALLGATHER_SHORT_MSG_SIZE default (Bruck below it on a non-power of two)."""
MPICH_ALLGATHER_LONG_MSG_BYTES = 524288
"""MPIR_CVAR_ALLGATHER_LONG_MSG_SIZE default (recursive doubling below it on a power of two)."""
MPICH_BCAST_SHORT_MSG_BYTES = 12288
"""MPIR_CVAR_BCAST_SHORT_MSG_SIZE default (binomial below it)."""
MPICH_BCAST_LONG_MSG_BYTES = 524288
"""MPIR_CVAR_BCAST_LONG_MSG_SIZE default (scatter + recursive doubling below it on a power of two)."""
MPICH_BCAST_MIN_PROCS = 8
"""MPIR_CVAR_BCAST_MIN_PROCS default (binomial below this many ranks)."""


def ompi_form(op: str, name: str) -> str:
    """The host form of one of Open MPI's algorithms for ``op``."""
    if name == "basic_linear" and op == "broadcast":
        return "linear"
    return OMPI_FORMS.get(name, name)


def ompi_copied_bytes(op: str, n: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Bytes Open MPI copies locally around the algorithm: an all-gather from a separate send buffer first copies the
    rank's own block (S/n) into its slot of the output (open-mpi/ompi@v4.1.4 ompi/mca/coll/base/
    coll_base_allgather.c: ``if (MPI_IN_PLACE != sbuf) ompi_datatype_sndrcv(...)`` in the two_proc, recursive
    doubling, ring, neighbor exchange and Bruck algorithms; Bruck's final rotation is not priced). MPI_IN_PLACE
    skips it; the sweep (calibrate/mpi_dist.py) passes separate buffers, as ``MPI_Allgather`` callers usually do."""
    return size / n if op == "all_gather" else 0.0 * size


def ompi_choose(op: str, n: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Open MPI's algorithm per element (its own names)."""
    return OMPI_RULES[op].choose_all(n, size)


def mpich_choose(op: str, n: np.ndarray, size: np.ndarray) -> np.ndarray:
    """MPICH's algorithm per element (registry names) from the cvar thresholds."""
    n, s = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(size, dtype=float))
    pow2 = is_pow2(n)
    if op == "all_reduce":
        out = np.where(s <= MPICH_ALLREDUCE_SHORT_MSG_BYTES, "recursive_doubling", "rabenseifner")
    elif op == "all_gather":
        out = np.where((s < MPICH_ALLGATHER_LONG_MSG_BYTES) & pow2, "recursive_doubling",
                       np.where(s < MPICH_ALLGATHER_SHORT_MSG_BYTES, "bruck", "ring"))
    elif op == "broadcast":
        short = (s < MPICH_BCAST_SHORT_MSG_BYTES) | (n < MPICH_BCAST_MIN_PROCS)
        out = np.where(short, "binomial_tree", "scatter_allgather")
    else:
        out = OMPI_RULES[op].choose_all(n, s)
    return np.asarray(out, dtype=object)


SHM_MESSAGE_S = 1.06e-6
"""One shared-memory message between two ranks of a host (Open MPI 4.1.4 vader, mpi4py): median half round trip
of a 1-byte ping-pong, 2000 samples (minimum 0.80 us), measured on the commmodel development VM (2 vCPU AMD
EPYC, shared, 2026-11-23); replace with ``commmodel calibrate run --backend mpi`` on your host."""

SHM_BW_BYTES_PER_S = 5.52e9
"""One rank's shared-memory streaming rate (vader, single copy through CMA): median of 10 half round trips of
64 MiB (best 8.38 GB/s), same VM and date as :data:`SHM_MESSAGE_S`: the two 64 MiB buffers are 4× the VM's 32 MiB
last-level cache, so this is (within the VM's ±20% day to day: 7.3 GB/s on 2026-11-27 with 4 KiB pages) the rate
of buffers that do not stay in the cache."""

SHM_CACHED_BW_BYTES_PER_S = 15.2e9
"""One rank's shared-memory copy rate (vader: one CMA ``process_vm_readv`` of the whole message above the eager
limit, ``ompi_info``: btl_vader_get_limit unlimited) when the buffers stay in the last-level cache: median of the
1-4 MiB rows (13.2-16.4 GB/s) of the one-way stream (the sender's buffer only read, as a broadcast root's), 4 runs
of ``python benchmarks/host_microbench.py --sweep`` on the development VM (2 vCPU AMD EPYC, 32 MiB L3, buffers on
4 KiB pages as torch allocates them, 2026-11-27). Beyond the cache the same runs fall to 8.7 GB/s at 16 MiB (32 MiB
of buffers) and 7.0-8.1 GB/s at 64 MiB. A ping-pong, whose sender sends lines it has just written, ran either at
that rate (15.1-15.8) or at 8.3-8.7 GB/s from one run to the next: not modelled (exchanges use this rate too).
gloo's TCP stream is not memory-bound: 4.4-5.8 GB/s from 1 to 64 MiB in the same runs."""

SHM_EAGER_LIMIT_BYTES = 4096.0
"""``btl_vader_eager_limit`` default (``ompi_info --all``, Open MPI 4.1.4): larger messages go by rendezvous."""

SHM_RENDEZVOUS_S = 2.1e-6
"""α of a message above the eager limit: ob1's RGET rendezvous (a header to the receiver, its CMA get, a FIN back)
where an eager message is one copy through a fast box. Intercept of time vs size of the one-way stream's 64 KiB and
1 MiB rows, 3.0-3.9 us over the 4 runs of :data:`SHM_CACHED_BW_BYTES_PER_S` (median 3.2), less the 1-byte
acknowledgement's :data:`SHM_MESSAGE_S`: about 2 eager messages."""

MPI_TIME_SHARED_WAIT_S = 51e-6
"""Waiting for a time-shared receiver under Open MPI: with more ranks than cores Open MPI runs in "degraded mode"
and its polling ranks ``sched_yield`` (mpi_yield_when_idle; Open MPI FAQ, running jobs: oversubscribing nodes), so
the receiver gets the core at the next yield, not after a scheduler slice. Measured as a ring round (every rank
``Sendrecv`` 4 bytes to its neighbours) on 4 ranks of the 2-vCPU development VM: 27.6 us (median of 2 runs, 23.6
and 31.6; ``benchmarks/host_microbench.py``, 2026-11-24) = 2·α + (1 − 1/2)·wait with α = SHM_MESSAGE_S."""

MPI_SOFTWARE_OVERHEAD_S = 0.5e-6
"""Per-message MPI matching and progress cost added to a network or CUDA-IPC hop (assumed; calibration fits it)."""


OMPI_STAGED_OPS = frozenset({"all_reduce", "reduce", "reduce_scatter"})
"""Collectives Open MPI stages through host memory when their buffers are on a GPU: its coll/cuda component
(open-mpi/ompi@ea8f4d03, v4.1.8, ompi/mca/coll/cuda: coll_cuda_allreduce.c, coll_cuda_reduce.c,
coll_cuda_reduce_scatter_block.c, also scan and exscan) copies each device buffer whole into a ``malloc``'d host buffer
(``cudaMemcpy``, synchronous), runs the host algorithm of coll/tuned on it, reduction on the CPU, and copies the
result back. All-gather, broadcast and all-to-all are not intercepted there and run on the device buffers through
the point-to-point layer (UCX: CUDA IPC, GPUDirect RDMA). Open MPI main (8efebee7) renames the component
coll/accelerator and stages those three as well, but only below 256 B (broadcast) and 64 KiB (all-gather,
all-to-all) per rank (coll_accelerator_component.c ``*_thresh``). Priced at the pinned copy rate of the GPU's host
link (:func:`~commmodel.collectives.libraries.host.staging_bw_bytes_per_s`): the pageable buffers copy slower, so
the staged cost is a lower bound."""


def ompi_stages(system: System, op: str | None) -> bool:
    """Whether Open MPI stages ``op`` through host memory on ``system``: a reduction on GPU buffers."""
    return not system.ranks_are_cpus and op in OMPI_STAGED_OPS


def mpi_transport(system: System, spans_nodes: np.ndarray, ranks_per_node: np.ndarray,
                  reduce_bw_bytes_per_s: float, staged: bool = False) -> Transport:
    """α, β, γ of MPI: shared memory inside a CPU host (CUDA IPC over the scale-up link for GPU buffers), UCX across.
    ``staged`` (a GPU reduction under Open MPI, :func:`ompi_stages`): the host path on the host copies of the buffers,
    with each whole buffer copied in and out at the staging rate. Inside a CPU host with a known last-level cache,
    each rank's share of it is copied at the cache-resident rate."""
    cpu = system.ranks_are_cpus
    host_path = cpu or staged
    cached = host_path and system.host_llc_bytes is not None
    intra_s = SHM_MESSAGE_S if host_path else system.scale_up.latency_s.value + MPI_SOFTWARE_OVERHEAD_S
    intra_bw = SHM_BW_BYTES_PER_S if host_path else system.scale_up.effective_bw_bytes_per_s
    out = system.scale_out
    inter_s = np.inf if out is None else out.latency_s.value + MPI_SOFTWARE_OVERHEAD_S
    inter_bw = 0.0 if out is None else out.node_bw_bytes_per_s / ranks_per_node
    bw = np.where(spans_nodes, np.minimum(inter_bw, intra_bw), intra_bw)
    return Transport(
        message_s=np.where(spans_nodes, inter_s, intra_s), bw_bytes_per_s=bw,
        reduce_bw_bytes_per_s=reduce_bw_bytes_per_s,
        staging_bw_bytes_per_s=staging_bw_bytes_per_s(system) if staged and not cpu else np.inf,
        wait_s=MPI_TIME_SHARED_WAIT_S, copies="receiver" if host_path else "none",
        cached_bw_bytes_per_s=np.where(spans_nodes, bw, SHM_CACHED_BW_BYTES_PER_S) if cached else None,
        cache_bytes=system.host_llc_bytes.value / np.asarray(ranks_per_node, dtype=float) if cached else 0.0,
        rendezvous_s=np.where(spans_nodes, inter_s, SHM_RENDEZVOUS_S) if host_path else None,
        eager_limit_bytes=SHM_EAGER_LIMIT_BYTES,
    )
