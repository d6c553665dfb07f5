"""Direct (pairwise) point-to-point patterns: all-to-all, gather, scatter, send/recv.

NCCL has no all-to-all, gather or scatter kernel: nccl-tests and PyTorch issue one grouped
``ncclSend``/``ncclRecv`` per peer, and all peers proceed at once.

* **all-to-all**: each rank sends S/n to every other rank. The (r−1)/n·S that stays in the domain
  streams over the scale-up link; the (n−r)/n·S for other domains goes through **the rank's own NIC**
  — a GPU cannot aggregate several NICs for all-to-all (sjeaugey, NVIDIA/nccl-tests#267), which is
  why all-to-all busbw ≈ per-GPU network rate × N/(N−1) on N nodes (nccl-tests#130). Both parts run
  concurrently: T = α + max((r−1)/n·S/B_intra, (n−r)/n·S/B_rank).
* **gather/scatter**: the root receives/sends (n−1)/n·S, split the same way over its links.
* **send/recv**: one S-byte transfer over the tier between the two ranks; NCCL's point-to-point path
  uses a few channels per peer, which caps it near 190 GB/s on NVLink (see ``P2P_MAX_BW_BYTES_PER_S``).

Latency: NCCL base + one hop on the slowest tier + the CPU proxy's post per extra remote peer
(tuning.cc getNetOverhead, Simple). Across the network NCCL's point-to-point path uses Simple only.
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.algorithms.base import AlgoCost, cost
from commmodel.collectives.protocols import BASE_LATENCY_S, NET_POST_OVERHEAD_S, bandwidth_fraction
from commmodel.collectives.topology import GroupTopology

P2P_MAX_BW_BYTES_PER_S = 190e9
"""Ceiling of one NCCL send/recv stream between two GPUs: sendrecv_perf plateaus at 195 GB/s on 8x A100
NVLink3 (li-plus/playground cuda/nccl.md) and ~180 GB/s on 2x H100 NVLink4 (NVIDIA/nccl-tests#268),
far below those links' 234/367 GB/s ring rates: p2p uses only a few channels per peer."""


def _latency(topo: GroupTopology, protocol: str, remote_peers: np.ndarray) -> np.ndarray:
    extra_posts = np.maximum(remote_peers - 1.0, 0.0) * NET_POST_OVERHEAD_S
    return BASE_LATENCY_S["ring"][protocol] + topo.slowest_step_s("ring", protocol) + extra_posts


def pairwise_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """All-to-all / gather / scatter: α + max((r−1)/n·S/B_intra, (n−r')/n·S/B_rank), r' the fewest ranks of the group
    in one domain (a rank alone in a partial rack sends (n−1)/n of its data over its NIC)."""
    n, r, fewest = topo.num_ranks, topo.ranks_per_domain, topo.fewest_ranks_per_domain
    frac = bandwidth_fraction("ring", protocol, op, topo.spans_domains)
    simplex = op in ("gather", "scatter")
    intra = (r - 1) / n * size_bytes / (topo.intra_bw(simplex, protocol) * frac)
    inter = np.where(topo.spans_domains, (n - fewest) / n * size_bytes / (topo.inter_rank_bw() * frac), 0.0)
    return cost(_latency(topo, protocol, n - fewest), np.maximum(intra, inter), (n - 1) / n * size_bytes)


def p2p_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """Send/recv of S bytes: base + α + S/B, B = the scale-up rate (≤ the p2p ceiling) or one rank's NIC."""
    frac = bandwidth_fraction("ring", protocol, op, topo.spans_domains)
    intra = min(topo.intra_bw(simplex=True), P2P_MAX_BW_BYTES_PER_S)
    bw = np.where(topo.spans_domains, np.minimum(topo.inter_rank_bw(), intra), intra) * frac
    return cost(_latency(topo, protocol, np.zeros_like(topo.num_ranks)), size_bytes / bw, size_bytes)

