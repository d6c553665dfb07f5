"""The channel ramp: NCCL runs a small message on fewer channels and threads, so it streams slower.

NCCL's ``topoGetAlgoInfo`` (NVIDIA/nccl src/enqueue.cc@5067397c) sizes every ring and tree collective of
``nBytes`` (the whole buffer: ``ncclFuncMaxSendRecvCount``, src/include/enqueue.h@5067397c) from the
communicator's channels down::

    while (nBytes < nc * nt * threadThreshold) { if (nc >= 2) nc--; else break; }
    while (nBytes < nc * nt * threadThreshold) { if (nt % 128 == 0) nt /= 2; else break; }

so a channel gets at least ``nt × threadThreshold`` bytes (32 KiB for ring/Simple; 4 KiB × n for ring/LL;
5 KiB for LL128) before a second one is opened, and a lone channel sheds threads (512 → 256 → 128 → 64;
LL128 640 → 320) below that. Tree re-widens its block to all 640 threads afterwards (``nt =
NCCL_MAX_NTHREADS``), so only its channel count ramps. NVLS and CollNet keep their fixed channel counts
(:mod:`.algorithms.innetwork` has NVLS's own chunk ramp).

Rate. One channel at full width streams ``r_ch`` (:data:`..protocols.PER_CHANNEL_SIMPLE_BW_GBPS` and the
LL128 tables: NCCL tuner's per-channel ceilings per GPU architecture); LL gets the protocol's share of the
Simple rate (the fraction :func:`..protocols.bandwidth_fraction` applies to the link), and a channel with
``nt`` of its ``nt_max`` threads gets ``nt/nt_max`` of it (the copy loop keeps one load per thread in flight).
The collective streams at ``min(B, u·r_ch)`` with ``u = nBytes / (nt_max·threadThreshold)`` channels at full
width, never below the lone channel's last thread step. ``u`` is NCCL's channel count ``nc`` exactly where
nBytes is a multiple of ``nt·threadThreshold`` (every power-of-two size of an nccl-tests sweep on 2^k ranks)
and its lower envelope in between — where the integer count would make the time fall as the size grows.

The communicator's own channel count (24 on an 8x A100 NVSwitch node, NVIDIA/nccl-tests#100) is not a profile
fact; it only caps ``u``, and the cap never binds for a profile whose plateau ``B`` its channels reach
(``nChannels·r_ch ≥ B``), which the large-message fit of every profile assumes. Large messages are unchanged:
once ``u·r_ch ≥ B`` the ramp returns ``B``.
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.protocols import (
    MAX_THREADS,
    PCI_BW_BYTES_PER_S,
    PCIE_RING_SIMPLE_THREADS,
    PER_CHANNEL_RING_LL128_BW_GBPS,
    PER_CHANNEL_SIMPLE_BW_GBPS,
    PER_CHANNEL_TREE_LL128_BW_GBPS,
    RING_LL_THRESHOLD_PER_RANK,
    THREAD_THRESHOLD_BYTES,
    arch_column,
)

GB = 1e9

MIN_THREAD_STEP = 128
"""enqueue.cc@5067397c: a lone channel halves its threads only while ``nt % 128 == 0``."""


def thread_threshold_bytes(family: str, protocol: str, num_ranks: np.ndarray) -> np.ndarray | float:
    """``comm->threadThresholds[algo][proto]``: 8/8/64 B per thread, the ring's LL value × nRanks (tuning.cc).
    A number where it does not depend on the group (every protocol but the ring's LL)."""
    base = float(THREAD_THRESHOLD_BYTES[protocol])
    if family == "ring" and protocol == "LL" and RING_LL_THRESHOLD_PER_RANK:
        return base * np.asarray(num_ranks, dtype=float)
    return base


def max_threads(family: str, protocol: str, ring_bw_bytes_per_s: np.ndarray | float = np.inf) -> np.ndarray | float:
    """``comm->maxThreads[algo][proto]``: 512 LL and Simple, 640 LL128; 256 for ring/Simple on a ring no faster
    than PCI_BW (tuning.cc ``simpleDefaultThreads``). A number where it is one value for every group (no ring
    that slow)."""
    full = float(MAX_THREADS[protocol])
    if family == "ring" and protocol == "Simple":
        pcie = np.asarray(ring_bw_bytes_per_s) <= PCI_BW_BYTES_PER_S
        return np.where(pcie, float(PCIE_RING_SIMPLE_THREADS), full) if pcie.any() else full
    return full


def min_threads(full_threads: np.ndarray | float) -> np.ndarray | float:
    """Threads a lone channel keeps after halving while ``nt % 128 == 0``: 512 → 64, 256 → 64, 640 → 320
    (whole thread counts ≥ 1; a number for a number).

    An array goes through the loop in closed form, one pass instead of one per halving: with 2^v the largest
    power of two dividing nt, the halving stops once that is 64, after max(v − 6, 0) steps."""
    if isinstance(full_threads, float):
        nt = full_threads
        while nt % MIN_THREAD_STEP == 0:
            nt /= 2.0
        return nt
    nt = np.asarray(full_threads, dtype=float)
    whole = nt.astype(np.int64)
    power_of_two = whole & -whole  # 2^v
    return nt / np.maximum(power_of_two / (MIN_THREAD_STEP // 2), 1.0)


def nccl_channels_threads(size_bytes: np.ndarray, num_ranks: np.ndarray, family: str, protocol: str,
                          comm_channels: int, ring_bw_bytes_per_s: np.ndarray | float = np.inf
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(nc, nt) exactly as ``topoGetAlgoInfo`` sets them for a communicator of ``comm_channels`` channels.

    The reference the tests check by hand; the pricing uses the continuous :func:`full_width_channels`.
    """
    size = np.asarray(size_bytes, dtype=float)
    threshold = thread_threshold_bytes(family, protocol, num_ranks)
    nt = max_threads(family, protocol, ring_bw_bytes_per_s) * np.ones_like(size)
    nc = np.clip(np.floor(size / (nt * threshold)), 1.0, float(comm_channels))
    floor_nt = min_threads(nt)
    while np.any(shrink := (size < nc * nt * threshold) & (nt > floor_nt)):
        nt = np.where(shrink, nt / 2.0, nt)
    if family == "tree":
        return nc, np.full_like(size, 640.0)  # enqueue.cc: "Tree now uses all threads always" (NCCL_MAX_NTHREADS)
    return nc, nt


def full_width_channels(size_bytes: np.ndarray, num_ranks: np.ndarray, family: str, protocol: str,
                        ring_bw_bytes_per_s: np.ndarray | float = np.inf) -> np.ndarray:
    """u = nBytes / (nt_max·threadThreshold): channels at full thread width the message is given, at least the
    lone channel's last thread step (nt_min/nt_max; tree keeps all threads, so 1 channel)."""
    size = np.asarray(size_bytes, dtype=float)
    full = max_threads(family, protocol, ring_bw_bytes_per_s)
    floor = 1.0 if family == "tree" else min_threads(full) / full
    return np.maximum(size / (full * thread_threshold_bytes(family, protocol, num_ranks)), floor)


def channel_rate_bytes_per_s(family: str, protocol: str, sm_version: int, fraction: np.ndarray) -> np.ndarray | float:
    """r_ch: what one full-width channel streams (busbw) — NCCL's per-channel ceilings (tuning.cc@5067397c);
    LL: ``fraction`` (the protocol's share of the link) of the Simple rate (LL128 and Simple: a number)."""
    arch = arch_column(sm_version)
    if protocol == "LL128":
        table = PER_CHANNEL_TREE_LL128_BW_GBPS if family == "tree" else PER_CHANNEL_RING_LL128_BW_GBPS
        return table[arch] * GB
    simple = PER_CHANNEL_SIMPLE_BW_GBPS[arch] * GB
    return simple * np.asarray(fraction, dtype=float) if protocol == "LL" else simple


def ramped_bw_bytes_per_s(bw_bytes_per_s: np.ndarray, size_bytes: np.ndarray, num_ranks: np.ndarray,
                          family: str, protocol: str, sm_version: int, fraction: np.ndarray,
                          ring_bw_bytes_per_s: np.ndarray | float = np.inf) -> np.ndarray:
    """min(B, u·r_ch): the streaming rate (busbw) of a ring or tree collective of ``size_bytes``.

    ``bw_bytes_per_s`` is the plateau B (link × protocol fraction); ``fraction`` the protocol's share used
    for LL's per-channel rate; ``ring_bw_bytes_per_s`` the ring graph's rate (decides 256 vs 512 Simple threads).
    """
    u = full_width_channels(size_bytes, num_ranks, family, protocol, ring_bw_bytes_per_s)
    return np.minimum(bw_bytes_per_s, u * channel_rate_bytes_per_s(family, protocol, sm_version, fraction))
