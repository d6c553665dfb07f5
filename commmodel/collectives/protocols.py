"""NCCL's three wire protocols and the fixed costs its tuner charges (DESIGN §4, brief item 2).

NCCL moves data with one of three protocols and its tuner picks the fastest algorithm × protocol
for every call (``src/graph/tuning.cc``, ``ncclTopoTuneModel``):

* **LL** (low latency): 8-byte stores carrying 4 bytes of data and a 4-byte flag, so the receiver
  polls memory instead of waiting on a fence. Lowest per-step latency; the tuner credits it with
  1/4 of the link bandwidth for all-reduce/reduce (and across nodes), 1/3 otherwise.
* **LL128**: 128-byte lines with 8 flag bytes (120/128 payload); the tuner uses 0.92 of the link.
  NCCL enables it only where it is known safe: NVLink inside the node, GPUDirect-RDMA NICs across.
* **Simple**: plain bulk copies with fences between chunks; full bandwidth, the largest per-step
  latency.

Every constant of NCCL's tuner lives here once (NVIDIA/nccl ``src/graph/tuning.cc`` at commit b6475625);
:mod:`.tuner` (NCCL's estimate) and the algorithms' physical costs both import them.

The time of one collective is ``base + Σ steps α_step(tier, protocol) + bytes / (B × fraction)``.
Base latencies and the per-step latencies for the NVLink / PCI / network hardware classes are the
published constants of NCCL's tuner (NVIDIA/nccl ``src/graph/tuning.cc`` at commit b6475625,
``baseLat`` and ``hwLat``); the profile's own ``latency_s`` of a tier is its LL step latency
(e.g. 0.6 us for NVLink, 2.7 us plus the fabric's latency for a network), and the other protocols
add NCCL's per-class difference on top of it. Tree/Simple takes NCCL ≥ 2.23.4's constants (68b54236), which split
NCCL 2.20's 28 us hop into a 4.0 us hop and a chunk pipeline fill (:data:`TREE_SIMPLE_HOP_S`). Nothing here is fitted
to a validation row.
"""

from __future__ import annotations

from typing import get_args

import numpy as np

from commmodel.hardware.models import NcclProtocol

PROTOCOLS: tuple[str, ...] = get_args(NcclProtocol)
"""NCCL's protocols, lowest latency first: the profile schema's ``NcclProtocol`` spelling, in its order."""

PROTOCOL_INDEX: dict[str, int] = {name: index for index, name in enumerate(PROTOCOLS)}
"""Protocol -> its column in every {LL, LL128, Simple} triple of NCCL's and RCCL's ``tuning.cc`` tables
(``NCCL_PROTO_LL`` 0, ``NCCL_PROTO_LL128`` 1, ``NCCL_PROTO_SIMPLE`` 2: src/include/plugin/nccl_tuner.h@5067397c), and
the code a forced protocol is given."""

# NVIDIA/nccl src/graph/tuning.cc (b6475625): baseLat[algo][proto], microseconds.
BASE_LATENCY_S: dict[str, dict[str, float]] = {
    "ring": {"LL": 6.6e-6, "LL128": 14.0e-6, "Simple": 8.4e-6},
    "tree": {"LL": 6.8e-6, "LL128": 14.0e-6, "Simple": 0.0},
}
"""Fixed cost of launching one collective (kernel launch, setup), per latency family × protocol."""

# NVIDIA/nccl src/graph/tuning.cc (b6475625): hwLat[hw][algo][proto], microseconds.
HW_STEP_LATENCY_S: dict[str, dict[str, dict[str, float]]] = {
    "nvlink": {"ring": {"LL": 0.6e-6, "LL128": 1.9e-6, "Simple": 3.4e-6},
               "tree": {"LL": 0.6e-6, "LL128": 1.25e-6, "Simple": 28e-6}},
    "pcie": {"ring": {"LL": 1.0e-6, "LL128": 2.5e-6, "Simple": 5.7e-6},
             "tree": {"LL": 1.0e-6, "LL128": 1.9e-6, "Simple": 28e-6}},
    "net": {"ring": {"LL": 2.7e-6, "LL128": 4.0e-6, "Simple": 14.0e-6},
            "tree": {"LL": 5.0e-6, "LL128": 8.5e-6, "Simple": 28e-6}},
}
"""NCCL's per-step latency of one hop per hardware class × family × protocol (NCCL 2.20). Its tree/Simple 28 us is
the pipeline latency of one chunk; NCCL's double binary tree (its tuner estimate and its physical cost) uses NCCL
≥ 2.23.4's tree/Simple row instead (:data:`TREE_SIMPLE_HOP_S`) with the fill priced explicitly."""

TREE_SIMPLE_BASE_LATENCY_S = 8.4e-6
"""Base latency of a tree/Simple collective in NCCL ≥ 2.23.4: ``baseLat`` Tree Simple 8.4 us (NVIDIA/nccl
src/graph/tuning.cc@68b54236, 2.23.4-1; the same at 5067397c). NCCL 2.20 (b6475625, :data:`BASE_LATENCY_S`) had 0."""

TREE_SIMPLE_HOP_S: dict[str, float] = {"nvlink": 4.0e-6, "pcie": 4.0e-6, "net": 14.0e-6}
"""Per-hop latency of tree/Simple in NCCL ≥ 2.23.4: ``hwLat`` NVLINK/PCI Tree Simple 4.0 us, NET 14 us
(src/graph/tuning.cc@68b54236, 2.23.4-1; the same at 5067397c). NCCL 2.20 (b6475625, :data:`HW_STEP_LATENCY_S`) charged
28 us on every class, which is ≈ 4.0 us plus one 512 KiB chunk at one channel's NVLink rate (24 GB/s on Ampere,
21.8 us): the pipeline fill the physical tree cost now prices explicitly (:func:`simple_chunk_bytes`)."""

NCCL_STEPS = 8
"""``#define NCCL_STEPS 8`` (src/include/device.h@5067397c): slots of a connection's buffer."""

DEFAULT_BUFFSIZE_BYTES = 4 * 1024 * 1024
"""``DEFAULT_BUFFSIZE (1 << 22)`` for the Simple protocol (src/init.cc@5067397c, ``NCCL_BUFFSIZE``)."""

COMM_CHANNELS_PER_NIC = 2
"""Channels a communicator opens per NIC it crosses the network through: the ring graph has one channel per NIC and
NCCL duplicates the graph's channels into the communicator's (src/graph/connect.cc@5067397c ``ncclTopoPostset``:
"Duplication should be complete now", ``comm->nChannels = std::min(MAXCHANNELS, nChannels * 2)``) — the same doubling the tuner's ring plateau
test assumes (:mod:`.tuner`)."""


def simple_chunk_bytes(buffsize_bytes: float) -> float:
    """Tree/Simple chunk: one step of the buffer, ``stepSize = buffSizes[SIMPLE] / NCCL_STEPS`` with chunkSteps 1
    for tree (src/enqueue.cc@5067397c ``calcCollChunking``; no tree/Simple shrink): 512 KiB at the default 4 MiB."""
    return buffsize_bytes / NCCL_STEPS


NVLS_HW_LAT_S = 23e-6
"""tuning.cc hwLat NVLINK NVLS / NVLSTree Simple: the tuner's latency of one NVLS (or NVLS-tree) collective."""

NVLS_TREE_NET_STEP_S = 14e-6
"""tuning.cc hwLat NET NVLSTree Simple: one network hop of the NVLS-tree."""

MULTI_NODE_LL_INTRA_FACTOR = 1.8
"""tuning.cc: ``if (nNodes > 1 && p == LL) intraLat *= 1.8`` (LL flags also cross the network path)."""

NET_OVERHEAD_S = 1e-6
"""tuning.cc ``getNetOverhead``: 1 us on Intel x86 and by default (the CPU proxy's cost of posting a send)."""

SIMPLE_NET_OVERHEAD_FACTOR = 3.0
"""tuning.cc: the network overhead counts × 3 for the Simple protocol."""

NET_POST_OVERHEAD_S = NET_OVERHEAD_S * SIMPLE_NET_OVERHEAD_FACTOR
"""CPU proxy cost of posting one network send with Simple (3 us). Paid per extra remote peer by
point-to-point patterns (all-to-all)."""

MAXCHANNELS = 64
"""NCCL's channel limit: ``#define MAXCHANNELS 64`` (NVIDIA/nccl src/include/device.h@5067397c, NCCL 2.30.7;
32 before NCCL 2.25.1, commit 80f6bda4)."""

RING_GRAPH_MAX_CHANNELS = MAXCHANNELS // 2
"""Distinct ring paths NCCL's topology search may find: ``ringGraph->maxChannels = MAXCHANNELS / 2``
(src/init.cc@5067397c; the tree graph reuses the ring's count, the channels are then duplicated on the same
paths). Each path enters and leaves a node (an NVLink domain) through one NIC, so traffic leaving a domain
flows through at most this many NICs however many the domain holds: 32 of the 72 NICs of an NVL72 rack."""

NVLS_CHUNK_BYTES = 128 * 1024
"""NVLS chunk for large messages: ``NCCL_PARAM(NvlsChunkSize, "NVLS_CHUNKSIZE", 128 * 1024)``
(NVIDIA/nccl src/transport/nvls.cc@5067397c)."""

NVLS_CHUNK_STEPS: tuple[tuple[float, int], ...] = ((64.0, 65536), (8.0, 32768), (2.0, 16384))
"""enqueue.cc ``calcCollChunking``, NVLS (src/enqueue.cc@5067397c): with concurrentOps = nChannels × nHeads,
``if (nBytes < 64·concurrentOps·chunk && chunk > 64K) chunk = 64K``, then 8× → 32K, then 2× → 16K. Each
(multiple, chunk) pair is applied in order, with the chunk in force at that point."""

NVLS_ONE_NODE_PIPELINE_STAGES = 3
"""Stages a single-node NVLS all-reduce passes every chunk through (NVIDIA/nccl src/device/all_reduce.h@5067397c,
``RunWorkColl<ncclFuncAllReduce, T, RedOp, NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE>``, ``work->oneNode`` without registered
buffers, as nccl-tests runs it): *scatter* warps copy ``sendbuff`` into every head's NVLS buffer, *reduce* warps
(``directRecvDirectSend`` on ``nvls->down``) reduce the head's chunk through the switch (multimem ld_reduce) and
multicast the sum back, *gather* warps copy it to ``recvbuff``. Each stage hands its loop of ``nHeads × chunk``
bytes per channel (``loopCount = nvls->nHeads * chunkSize``) to the next through Simple-protocol FIFOs, so a
message of N loops takes N + 2 loop times, and one that fits in a single loop runs the three stages one after
the other."""

NVLS_KERNEL_BASE_LATENCY_S = 8.4e-6
"""Fixed cost of an NVLS kernel once its pipeline fill is priced: NCCL's base latency of a Simple-protocol
collective kernel, ``baseLatencies`` ring/Simple 8.4 us (src/graph/tuning.cc@5067397c, as at b6475625). NCCL's own
NVLS latency (hwLat NVLINK NVLS Simple, 23 us at b6475625, 25 us at 5067397c) is its estimate of the whole fixed cost,
the pipeline fill included; the physical cost prices that fill explicitly (:data:`NVLS_ONE_NODE_PIPELINE_STAGES`)."""

NVLS_CHANNELS_SM90 = 16
"""``#define NVLS_NCHANNELS_SM90 16`` (src/transport/nvls.cc@5067397c): NVLS channels on Hopper."""

NVLS_CHANNELS_SM100_ONE_NODE = 24
"""``#define NVLS_NCHANNELS_SM100_NVL 24`` (src/transport/nvls.cc@5067397c): Blackwell inside one node
(``NVLS_NCHANNELS_SM100`` = 32 across nodes)."""


def nvls_channels(sm_version: int) -> int:
    """NVLS channels NCCL opens on one node (nvls.cc ``ncclNvlsTuning``): 24 from sm_100, else 16."""
    return NVLS_CHANNELS_SM100_ONE_NODE if sm_version >= 100 else NVLS_CHANNELS_SM90


def nvls_chunk_bytes(size_bytes: np.ndarray, concurrent_ops: np.ndarray) -> np.ndarray:
    """NCCL's NVLS chunk for an all-reduce of ``size_bytes`` (enqueue.cc ``calcCollChunking``)."""
    size = np.asarray(size_bytes, dtype=float)
    chunk = np.full(np.broadcast_shapes(size.shape, np.shape(concurrent_ops)), float(NVLS_CHUNK_BYTES))
    for multiple, smaller in NVLS_CHUNK_STEPS:
        chunk = np.where((size < multiple * concurrent_ops * chunk) & (chunk > smaller), float(smaller), chunk)
    return chunk


def nvls_chunk_switches(concurrent_ops: np.ndarray) -> list[tuple[np.ndarray, float]]:
    """(size, chunk just below it) where NCCL's NVLS chunk shrinks, largest first (enqueue.cc thresholds)."""
    out, chunk = [], float(NVLS_CHUNK_BYTES)
    for multiple, smaller in NVLS_CHUNK_STEPS:
        out.append((multiple * np.asarray(concurrent_ops, dtype=float) * chunk, float(smaller)))
        chunk = float(smaller)
    return out


LAUNCH_PER_EXTRA_GPU_S = 2.5e-6
"""Extra launch cost per additional GPU driven by one thread (nccl-tests ``-g G``): fitted to
NVIDIA/nccl-tests#123 (DGX-A100, Ring, one channel, 8-128 B: 10 us on 2 GPUs to 33.7 us on 8, i.e.
≈ 2 × 0.6 us of ring steps + 2.5 us of launch per added GPU); AddyLaddy in nccl-tests#333 names
single-process multi-GPU launch overhead as the cause. 0 for one process per GPU (MPI, torchrun)."""

TREE_KERNEL_EFFICIENCY = 0.92
"""tuning.cc: ``if (a == TREE) busBw = min(busBw * .92, ...)`` — the tree kernel's reduce-and-forward
reaches 92% of what a ring kernel streams over the same NVLink."""

LL128_FRACTION = 0.92
"""tuning.cc: ring LL128 ``busBw * 0.92`` (120 of 128 bytes are payload, less flag handling)."""

TREE_LL128_FRACTION_ONE_NODE = 7.0 / 9.0
"""tuning.cc: tree LL128 on one node ``busBw * 7/9``."""

TREE_LL128_FRACTION_MULTI_NODE = 120.0 / 128.0
"""tuning.cc: tree LL128 across nodes ``busBw * 120/128``."""

TREE_LL_FRACTION = 1.0 / 3.8
"""tuning.cc: tree LL ``busBw * 1/3.8``."""

RING_LL_FRACTION_QUARTER = 0.25
"""tuning.cc: ring LL ``busBw * 1/4`` for all-reduce and reduce, and across nodes."""

RING_LL_FRACTION_THIRD = 1.0 / 3.0
"""tuning.cc: ring LL ``busBw * 1/3`` otherwise (one node, all-gather / reduce-scatter / broadcast)."""


def hardware_class(kind: str) -> str:
    """NCCL's hardware class of a tier kind: nvlink (NVSwitch, NVLink, C2C), pcie, or net."""
    if kind in ("nvswitch", "nvlink_direct", "nvlink_c2c", "xgmi"):  # RCCL inherits NCCL's NVLink class for xGMI
        return "nvlink"
    if kind in ("pcie_p2p", "pcie_host"):
        return "pcie"
    return "net"


def protocol_step_overhead_s(hw: str, family: str, protocol: str) -> float:
    """What ``protocol`` adds to a hop's LL latency on hardware class ``hw`` (NCCL table difference)."""
    table = HW_STEP_LATENCY_S[hw]
    return table[family][protocol] - table["ring"]["LL"]


def bandwidth_fraction(family: str, protocol: str, op: str, multi_domain: np.ndarray | bool) -> np.ndarray | float:
    """Share of the link bandwidth ``protocol`` delivers for ``op`` (NCCL tuner refinements).

    ring/p2p: LL 1/4 for all-reduce, reduce, or across nodes, else 1/3; LL128 0.92; Simple 1.
    tree: LL 1/3.8; LL128 7/9 on one node, 120/128 across nodes; Simple 1 (the 0.92 tree kernel
    factor is applied by the tree itself, to its NVLink part). A number where it does not depend on
    ``multi_domain`` (Simple, tree LL, ring LL128, ring LL for all-reduce and reduce), else an array of its shape.
    """
    if protocol == "Simple":
        return 1.0
    if family == "tree":
        if protocol == "LL":
            return TREE_LL_FRACTION
        return np.where(multi_domain, TREE_LL128_FRACTION_MULTI_NODE, TREE_LL128_FRACTION_ONE_NODE)
    if protocol == "LL128":
        return LL128_FRACTION
    if op in ("all_reduce", "reduce", "barrier"):
        return RING_LL_FRACTION_QUARTER
    return np.where(multi_domain, RING_LL_FRACTION_QUARTER, RING_LL_FRACTION_THIRD)


# --- The channel ramp: how many channels and threads NCCL gives one collective (src/enqueue.cc@5067397c) ---

THREAD_THRESHOLD_BYTES: dict[str, int] = {"LL": 8, "LL128": 8, "Simple": 64}
"""Bytes of the message per thread before NCCL adds a thread or a channel: ``NCCL_LL_THREAD_THRESHOLD 8``,
``NCCL_LL128_THREAD_THRESHOLD 8``, ``NCCL_SIMPLE_THREAD_THRESHOLD 64`` (NVIDIA/nccl src/include/comm.h@5067397c),
copied into ``comm->threadThresholds`` for every algorithm (src/graph/tuning.cc@5067397c); the ring's LL value is
then multiplied by the number of ranks (:data:`RING_LL_THRESHOLD_PER_RANK`). A log line of NCCL 2.19 on 4 ranks
confirms it: ``threadThresholds 8/8/64 | 32/8/64`` (tree | ring; NVIDIA/nccl#1189)."""

RING_LL_THRESHOLD_PER_RANK = True
"""tuning.cc@5067397c: ``comm->threadThresholds[NCCL_ALGO_RING][NCCL_PROTO_LL] *= nRanks``."""

MAX_THREADS: dict[str, int] = {"LL": 512, "LL128": 640, "Simple": 512}
"""Threads of one channel at full width: ``NCCL_LL_MAX_NTHREADS 512``, ``NCCL_LL128_MAX_NTHREADS 640``,
``NCCL_SIMPLE_MAX_NTHREADS 512`` (src/include/device.h@5067397c; ``comm->maxThreads`` in tuning.cc@5067397c,
ring and tree alike)."""

PCI_BW_BYTES_PER_S = 12e9
"""``#define PCI_BW 12.0 // PCI Gen3 x16`` (src/graph/topo.h@5067397c): a ring graph no faster than this gets
256 Simple threads instead of 512 (tuning.cc@5067397c ``simpleDefaultThreads``)."""

PCIE_RING_SIMPLE_THREADS = 256
"""tuning.cc@5067397c ``simpleDefaultThreads``: 256 ring/Simple threads when the ring graph's bandwidth ≤ PCI_BW."""

PER_CH_MAX_TREE_BW_GBPS = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0))
"""tuning.cc ``perChMaxTreeBws[arch][1 node, 2 nodes, more]`` (GB/s per channel; Volta, Ampere, Hopper rows as
NCCL's tuner estimate reads them, :mod:`.tuner`)."""

PER_CH_MAX_RING_LL128_BW_GBPS = (20.0, 20.0, 36.7)
"""tuning.cc ``perChMaxRingLL128Bws[arch]`` (same for every node count)."""

PER_CH_MAX_TREE_LL128_BW_GBPS = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0))
"""tuning.cc ``perChMaxTreeLL128Bws[arch][1 node, 2 nodes, more]``."""

BLACKWELL_PER_CHANNEL_GBPS = {"Simple": 70.0, "ring/LL128": 40.0, "tree/LL128": 55.6}
"""The Blackwell row's one-node entries of the three tables above (tuning.cc@5067397c ``perChMaxTreeBws``,
``perChMaxRingLL128Bws``, ``perChMaxTreeLL128Bws``), which the tuner's three-row view does not carry."""

PER_CHANNEL_SIMPLE_BW_GBPS: tuple[float, ...] = (*(row[0] for row in PER_CH_MAX_TREE_BW_GBPS),
                                                 BLACKWELL_PER_CHANNEL_GBPS["Simple"])
"""What one channel (one CTA at full threads) streams with Simple, busbw GB/s, per GPU architecture
(Volta/Turing, Ampere/Ada, Hopper, Blackwell): tuning.cc@5067397c ``perChMaxTreeBws[arch][N1]``, the
per-channel ceiling NCCL's tuner puts on a one-node tree — the only per-channel Simple rate NCCL states.
Chosen over "link rate / channels at full count", which is a lower bound: with fewer channels each one no
longer shares the links (8x H100 streams 64-256 KiB LL all-reduces at 19-20 us, which the lower bound
would price near 35 us)."""

PER_CHANNEL_RING_LL128_BW_GBPS: tuple[float, ...] = (*PER_CH_MAX_RING_LL128_BW_GBPS,
                                                     BLACKWELL_PER_CHANNEL_GBPS["ring/LL128"])
"""One channel with LL128, ring, busbw GB/s per architecture: tuning.cc@5067397c ``perChMaxRingLL128Bws[arch][N1]``."""

PER_CHANNEL_TREE_LL128_BW_GBPS: tuple[float, ...] = (*(row[0] for row in PER_CH_MAX_TREE_LL128_BW_GBPS),
                                                     BLACKWELL_PER_CHANNEL_GBPS["tree/LL128"])
"""One channel with LL128, tree, busbw GB/s per architecture: tuning.cc@5067397c ``perChMaxTreeLL128Bws[arch][N1]``."""

ARCH_MIN_SM: tuple[int, ...] = (80, 90, 100)
"""tuning.cc@5067397c ``compCapIndex``: Volta/Turing below sm_80, Ampere/Ada sm_80-89, Hopper sm_90-99,
Blackwell from sm_100 (a GPU whose compute capability the catalogue lacks counts as Volta)."""


def arch_column(sm_version: int) -> int:
    """tuning.cc's compCapIndex (0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell) of ``sm_version``."""
    return sum(sm_version >= edge for edge in ARCH_MIN_SM)
