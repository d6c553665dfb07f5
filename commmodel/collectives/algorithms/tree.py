"""Tree algorithms: NCCL's pipelined double binary tree, and the textbook binomial tree.

**Double binary tree** (Sanders, Speck & Träff 2009; NCCL ≥ 2.4, Jeaugey 2019): two binary trees
over the nodes, each carrying half the data, arranged so every node is a leaf in one and interior
in the other; inside a node the ranks form a chain. The data is pipelined in chunks, so the time is
latency + S over the slowest stage's rate:

* inside a node every rank of the chain sends its half up (reduce) and down (broadcast) in both
  trees, 2·S out of its link in total: rate η_tree·B_intra/2 (η_tree = 0.92, NCCL tuning.cc);
* between m ≥ 3 nodes the busiest node is interior in one tree and a leaf in the other: it sends
  S/2 up and S/2 to each of two children in the first, S/2 up in the second, 2·S through its NICs
  (NCCL's tuner likewise halves the tree's bus bandwidth); on **two nodes** each node is the root of
  one tree and the leaf of the other, only S per node each way, so all-reduce busbw can reach
  2(n−1)/n × the node's NIC rate — why 2x p4de (4x100 Gb/s EFA, 50 GB/s per node) shows 78 GB/s;
* latency: base + 2·((r−1)·α_intra + ⌈log₂ m⌉·α_inter) (NCCL tuning.cc); tree/Simple's per-hop
  α is the pipeline latency of one chunk (28 us in NCCL's table).

**Binomial tree** (broadcast, reduce, gather, scatter; van de Geijn 1994, Thakur et al. 2005): ⌈log₂ n⌉
rounds; in broadcast/reduce each round moves the full S, in gather/scatter the pieces halve so the
root's link carries (n−1)/n·S. Ranks are ordered node-major, so the far (first) ⌈log₂ m⌉ rounds
cross the network at one rank's own NIC rate and the rest stay inside the domain.
"""

from __future__ import annotations

import math

import numpy as np

from commmodel.collectives.algorithms.base import AlgoCost, ceil_log2, cost
from commmodel.collectives.channels import channel_rate_bytes_per_s, full_width_channels, ramped_bw_bytes_per_s
from commmodel.collectives.protocols import (
    BASE_LATENCY_S,
    HW_STEP_LATENCY_S,
    TREE_KERNEL_EFFICIENCY,
    TREE_SIMPLE_BASE_LATENCY_S,
    TREE_SIMPLE_HOP_S,
    bandwidth_fraction,
)
from commmodel.collectives.topology import GroupTopology


def tree_network_share(num_domains: np.ndarray) -> np.ndarray:
    """Bytes per S each node pushes through its NICs in a double binary tree: 1 on two nodes, else 2."""
    return np.where(num_domains > 2, 2.0, 1.0)


def double_binary_tree_algbw(topo: GroupTopology, protocol: str = "Simple") -> np.ndarray:
    """Rate S/t of the double binary tree before protocol fractions: min(chain inside, trees across)."""
    r, m = topo.ranks_per_domain, topo.num_domains
    chain = np.where(r > 1, TREE_KERNEL_EFFICIENCY * topo.intra_bw(protocol=protocol) / 2.0, np.inf)
    across = topo.inter_domain_bw() / tree_network_share(m)  # inf inside one domain (m = 1)
    return np.minimum(chain, across)


def tree_simple_hops_s(topo: GroupTopology) -> tuple[np.ndarray, float]:
    """(α of one chain hop inside the domain, α of one tree hop between domains) for tree/Simple at NCCL ≥ 2.23.4's
    constants (:data:`..protocols.TREE_SIMPLE_HOP_S`): the tier's LL latency plus NCCL's Simple difference, the network
    hop paying the fabric latency twice (the receive flush), as every Simple network hop does."""
    intra = topo.intra_latency_s + TREE_SIMPLE_HOP_S[topo.intra_hw] - HW_STEP_LATENCY_S[topo.intra_hw]["ring"]["LL"]
    if not math.isfinite(topo.inter_latency_s):
        return np.full(topo.num_ranks.shape, intra), 0.0
    fabric = max(topo.inter_latency_s - HW_STEP_LATENCY_S["net"]["ring"]["LL"], 0.0)
    return np.full(topo.num_ranks.shape, intra), topo.inter_latency_s + TREE_SIMPLE_HOP_S["net"] - HW_STEP_LATENCY_S["net"]["ring"]["LL"] + fabric


def tree_simple_fill_s(size_bytes: np.ndarray, topo: GroupTopology) -> np.ndarray:
    """Pipeline fill of tree/Simple: every stage but the slowest passes one piece before the slowest streams.

    A piece is what one channel carries per step: min(chunk, nBytes / channels), chunk = NCCL_BUFFSIZE / NCCL_STEPS
    (512 KiB by default; src/enqueue.cc@5067397c ``calcCollChunking``, chunkSteps 1 for tree), channels the ramp's
    count u = nBytes / (512 threads × 64 B) (:mod:`..channels`) capped at the communicator's: two per NIC across
    domains (:attr:`GroupTopology.inter_channels`), inside one domain as many as reach the link (B / r_ch). The chain
    has 2(r−1) NVLink/PCIe stages at one channel's rate, min(r_ch, B_intra / channels): the lone channel's ceiling
    (:data:`..protocols.PER_CHANNEL_SIMPLE_BW_GBPS`) or, when the channels filling at once need more than the GPU's
    link, their share of it — per channel the same cap as the ramp's min(B, u·r_ch) (:mod:`..channels`); every channel
    passes its first piece at the same time. The 2⌈log₂m⌉ network stages run at the channel's share of the domain's
    NICs; fill = Σ stages · piece / rate − the slowest stage's (already in the S/B term). NCCL 2.20's 28 us tree/Simple
    hop was this fill at a full 512 KiB chunk. The share binds where a domain's NICs give the communicator more
    channels than its link feeds at r_ch: 2x a3-megagpu-8g (16 channels, 366.75/16 = 22.9 < 38.7 GB/s on Hopper), not
    2x p4de (8 channels, 29 > 24 GB/s on Ampere).
    """
    r, m = topo.ranks_per_domain, topo.num_domains
    r_intra = np.minimum(channel_rate_bytes_per_s("tree", "Simple", topo.sm_version, 1.0), topo.intra_bw())
    comm = np.where(topo.spans_domains, topo.inter_channels, np.maximum(topo.intra_bw() / r_intra, 1.0))
    used = np.clip(full_width_channels(size_bytes, topo.num_ranks, "tree", "Simple"), 1.0, comm)
    piece = np.minimum(topo.simple_chunk_bytes, size_bytes / used)
    r_net = np.where(topo.spans_domains, topo.inter_channel_bw(), np.inf)
    intra_s, inter_s = piece / np.minimum(r_intra, topo.intra_bw() / used), piece / r_net
    stages = 2.0 * ((r - 1) * intra_s + ceil_log2(m) * inter_s)
    slowest = np.where(topo.spans_domains, np.maximum(inter_s, np.where(r > 1, intra_s, 0.0)), intra_s)
    return np.maximum(stages - slowest, 0.0)


def double_binary_tree_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """All-reduce: base + 2((r−1)α_intra + ⌈log₂m⌉α_inter) + S / (min(η·B_intra/2, B_dom/k) × f_p), k = 1 on 2 nodes, else 2.

    Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan",
    Parallel Computing 2009; NCCL tuning.cc (latency, 0.92 tree factor, LL 1/3.8, LL128 7/9 or 120/128).
    Assumes the pipeline is full (chunking) and one chain per node through NVLink/PCIe; small messages stream
    on fewer channels (:func:`..channels.ramped_bw_bytes_per_s`, busbw = 2 × algbw as in NCCL's tuner).
    """
    r, m, n = topo.ranks_per_domain, topo.num_domains, topo.num_ranks
    if protocol == "Simple":
        intra_hop, inter_hop = tree_simple_hops_s(topo)
        latency = (TREE_SIMPLE_BASE_LATENCY_S + 2.0 * ((r - 1) * intra_hop + ceil_log2(m) * inter_hop)
                   + tree_simple_fill_s(size_bytes, topo))
    else:
        inter = topo.inter_step_s("tree", protocol) if math.isfinite(topo.inter_latency_s) else 0.0
        latency = BASE_LATENCY_S["tree"][protocol] + 2.0 * ((r - 1) * topo.intra_step_s("tree", protocol)
                                                              + ceil_log2(m) * inter)
    frac = bandwidth_fraction("tree", protocol, op, topo.spans_domains)
    # the channel ramp caps the tree's busbw (algbw × 2, tuning.cc's tree ratio) at u·r_ch (:mod:`..channels`)
    bus = ramped_bw_bytes_per_s(2.0 * double_binary_tree_algbw(topo, protocol) * frac, size_bytes, n, "tree",
                                protocol, topo.sm_version, frac)
    bw = bus / 2.0
    received = np.where(n > 2, 2.0, 1.0) * size_bytes
    return cost(latency, size_bytes / bw, received, size_bytes)


def _binomial_split(topo: GroupTopology) -> tuple[np.ndarray, np.ndarray]:
    """(rounds across domains, rounds inside a domain) of a binomial schedule over node-major ranks."""
    inter_rounds = ceil_log2(topo.num_domains)
    return inter_rounds, np.maximum(ceil_log2(topo.num_ranks) - inter_rounds, 0.0)


def binomial_tree_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """Broadcast/reduce: Σ rounds (α + S/B) = ⌈log₂n⌉(α + S/B); gather/scatter: ⌈log₂n⌉α + (n−1)/n·S/B.

    Rounds crossing domains use one rank's NIC rate (B_rank), the others the scale-up rate; in
    gather/scatter the cross-domain rounds carry S(1 − 1/m) and the inner ones S(1/m − 1/n).
    van de Geijn, "On global combine operations", JPDC 1994; Thakur, Rabenseifner & Gropp, IJHPCA 2005.
    """
    n, m = topo.num_ranks, topo.num_domains
    inter_rounds, intra_rounds = _binomial_split(topo)
    base = BASE_LATENCY_S["ring"][protocol]
    inter_step = topo.inter_step_s("ring", protocol) if math.isfinite(topo.inter_latency_s) else 0.0
    latency = base + inter_rounds * inter_step + intra_rounds * topo.intra_step_s("ring", protocol)
    b_in, b_out = topo.intra_bw(simplex=True), topo.inter_rank_bw()
    if op in ("broadcast", "reduce"):
        bandwidth = inter_rounds * size_bytes / b_out + intra_rounds * size_bytes / b_in
        reduced = ceil_log2(n) * size_bytes if op == "reduce" else 0.0
        return cost(latency, bandwidth, size_bytes, reduced)
    inter_bytes = size_bytes * (1.0 - 1.0 / m)
    intra_bytes = size_bytes * (1.0 / m - 1.0 / n)
    bandwidth = np.where(m > 1, inter_bytes / b_out, 0.0) + intra_bytes / b_in
    return cost(latency, bandwidth, (n - 1) / n * size_bytes)
