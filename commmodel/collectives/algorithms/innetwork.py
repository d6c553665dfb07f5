"""In-network reduction: NVLink SHARP (NVLS) inside an NVSwitch, InfiniBand SHARP (CollNet) across.

**NVLS** (NCCL ≥ 2.17 on H100/H200/B200 NVSwitch): each GPU owns S/n of the result; it pulls its
shard through the switch with a reducing multimem load (the switch reads that shard from all n
GPUs and adds) and pushes the sum back with a multicast store. Per GPU and direction the link
carries S (reads served to the switch) + S/n (own shard), so for large messages
    T ≈ α + S·(1 + 1/n) / (B_line·η_wire),   busbw = η_wire·B_line·2(n−1)/(n+1);
for smaller ones NCCL's chunk ramp and its three-stage pipeline fill add (:func:`nvls_pipeline_bytes`).
η_wire is derived from the profile's ``busbw_efficiency`` (quoted at 8 ranks, the HGX measurement it
comes from): η_wire = busbw_eff·9/14. On 8x H200 this reproduces 414/436/460/473 GB/s measured on
5/6/7/8 GPUs within 2% (stas00/ml-engineering, NCCL 2.27.7). NVLS can beat the Chan et al. bound:
the switch does the arithmetic. NCCL uses it only inside one node (tuning.cc: "MNNVL: NVLS not yet
supported"; the 72-GPU GB200 rack measured with NCCL 2.26 follows the ring, not NVLS), from
``min_ranks`` GPUs up, and with the Simple protocol only.

**NVLS-tree** (NCCL ≥ 2.18 across nodes): NVLS inside each node, NCCL's double binary tree between
nodes on the reduced shards. The node pushes S through its NICs on two nodes, 2·S beyond (as the
tree), so T = α_NVLS + 2⌈log₂m⌉·α_net + S / min(η_wire·B_line·r/(r+1), B_dom/k), k = 1 or 2. It wins on
two nodes (2x 8 H100, 8x 400G RoCE: 330 → 430 GB/s busbw with NVLS on, NVIDIA/nccl#1221) and loses to
the ring beyond (same issue: no gain on 4+ nodes). Network hop: NCCL's NVLSTree NET latency 14 us
(tuning.cc) instead of the ring's 2.7 us LL hop.

**SHARP / CollNet** (IB switches reduce): ranks reduce-scatter inside the domain, each rank's rail
sends its S/r shard up once and receives the sum once, then the domain all-gathers; the phases
pipeline: T = α + max(2(r−1)/r·S/B_intra, (S/r)/(B_rank·busbw_eff)). No validation row exists for it.
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.algorithms.base import AlgoCost, ceil_log2, cost
from commmodel.collectives.algorithms.tree import tree_network_share
from commmodel.collectives.protocols import (BASE_LATENCY_S, HW_STEP_LATENCY_S, NVLS_CHUNK_BYTES,
                                              NVLS_KERNEL_BASE_LATENCY_S, NVLS_ONE_NODE_PIPELINE_STAGES,
                                              NVLS_TREE_NET_STEP_S, nvls_channels, nvls_chunk_bytes,
                                              nvls_chunk_switches)
from commmodel.collectives.topology import GroupTopology

NVLS_REFERENCE_RANKS = 8
"""Group size at which a profile's NVLS ``busbw_efficiency`` is quoted (8-GPU HGX measurements)."""


def nvls_wire_efficiency(busbw_efficiency: float) -> float:
    """η_wire from busbw quoted at 8 ranks: busbw = η_wire·B·2(n−1)/(n+1) → η_wire = busbw_eff·(n+1)/(2(n−1))."""
    n = NVLS_REFERENCE_RANKS
    return busbw_efficiency * (n + 1) / (2.0 * (n - 1))


def nvls_applies(op: str, topo: GroupTopology) -> np.ndarray | bool:
    """An NVSwitch with NVLS, at least ``min_ranks`` ranks, all inside one node."""
    if topo.nvls is None:
        return False
    return (topo.num_ranks >= topo.nvls.min_ranks) & (topo.num_nodes == 1)


def nvls_chunk_slowdown(chunk_bytes: np.ndarray, topo: GroupTopology, bw_bytes_per_s: float) -> np.ndarray:
    """How much slower NVLS streams with chunks of ``chunk_bytes`` than with the large-message 128 KiB chunk
    the profile's ``busbw_efficiency`` was measured with (≥ 1).

    Each GPU's channels work through their chunks one after the other, and every chunk waits one NVLink hop
    (the scale-up tier's step latency τ) for its multimem load and store to complete, so a channel streaming
    at r = B/nChannels takes τ + c/r per chunk of c bytes: the slowdown against the 128 KiB chunk is
    (1 + τr/c)/(1 + τr/128 KiB). On 8x H100 (τ = 0.6 us, r ≈ 19 GB/s, τr ≈ 11 KB) that is 1.08 at 64 KiB,
    1.24 at 32 KiB and 1.56 at 16 KiB.
    """
    tau_rate = topo.intra_latency_s * bw_bytes_per_s / nvls_channels(topo.sm_version)
    return (1.0 + tau_rate / chunk_bytes) / (1.0 + tau_rate / NVLS_CHUNK_BYTES)


def nvls_pipeline_bytes(size_bytes: np.ndarray, topo: GroupTopology, bw_bytes_per_s: float,
                        heads: np.ndarray | None = None) -> np.ndarray:
    """Bytes of streaming time an NVLS all-reduce of ``size_bytes`` costs: (S + 2·min(S, L)) × chunk slowdown.

    NCCL runs nChannels × nHeads (one head per GPU of the node) NVLS operations at once and shrinks their
    chunk c from 128 KiB to 64/32/16 KiB as the message shrinks (enqueue.cc ``calcCollChunking``). A loop
    moves L = nChannels × nHeads × c bytes and passes three stages — scatter into the NVLS buffers, reduce
    and multicast through the switch, gather out (:data:`..protocols.NVLS_ONE_NODE_PIPELINE_STAGES`) — so
    the pipeline fills and drains over two extra loops, and a message within one loop runs the stages in
    series (3·S). On 8x H100 (16 × 8 operations): L = 2 MiB below 8 MiB, 4 MiB up to 64 MiB, 8 MiB up to
    1 GiB (``heads``: the GPUs of the node, the whole group by default; an NVLS-tree's node). Across a chunk switch the
    cost follows the continuous envelope: above the switch the cheaper of the
    two chunks, never below the cost at the switch (time never falls and never jumps as the message grows;
    the larger chunk's extra fill would otherwise make a step up, its smaller slowdown a step down).
    """
    ops = nvls_channels(topo.sm_version) * (topo.num_ranks if heads is None else heads)
    size = np.asarray(size_bytes, dtype=float)
    fill_loops = NVLS_ONE_NODE_PIPELINE_STAGES - 1.0

    def streamed(s, chunk):
        return (s + fill_loops * np.minimum(s, ops * chunk)) * nvls_chunk_slowdown(chunk, topo, bw_bytes_per_s)

    out = streamed(size, nvls_chunk_bytes(size, ops))
    for switch_bytes, smaller in nvls_chunk_switches(ops):
        envelope = np.maximum(np.minimum(out, streamed(size, smaller)), streamed(switch_bytes, smaller))
        out = np.where(size >= switch_bytes, envelope, out)
    return out


def nvls_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """T = α_kernel + 3τ + (S + 2·min(S, L))(1 + 1/n)/(B_line·η_wire) × chunk slowdown (:func:`nvls_pipeline_bytes`).

    α_kernel is NCCL's base latency of a Simple kernel (:data:`..protocols.NVLS_KERNEL_BASE_LATENCY_S`); each of
    the three pipeline stages waits at least one NVLink hop τ (the scale-up tier's step latency) for its FIFO.
    The profile's NVLS latency (NCCL's tuner estimate, fill included) prices only the NVLS-tree.
    """
    assert topo.nvls is not None
    n = topo.num_ranks
    bw = topo.intra_line_bw_bytes_per_s * nvls_wire_efficiency(topo.nvls.busbw_efficiency.value)
    wire = size_bytes * (1.0 + 1.0 / n)
    streamed = nvls_pipeline_bytes(size_bytes, topo, bw) * (1.0 + 1.0 / n)
    latency = NVLS_KERNEL_BASE_LATENCY_S + NVLS_ONE_NODE_PIPELINE_STAGES * topo.intra_latency_s
    return cost(np.full(n.shape, latency), streamed / bw, wire)


def nvls_tree_applies(op: str, topo: GroupTopology) -> np.ndarray | bool:
    """NVLS in every node (≥ min_ranks ranks per node, one node per NVLink domain) and several nodes."""
    if topo.nvls is None:
        return False
    return (topo.spans_domains & (topo.ranks_per_node >= topo.nvls.min_ranks)
            & (topo.num_nodes == topo.num_domains))


def nvls_tree_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """T = α_NVLS + 2⌈log₂m⌉·α_net + max(NVLS inside the node, k·S/B_dom).

    Inside the node the reduce and the multicast run as a single-node NVLS of the node's r GPUs does, chunk ramp
    and pipeline fill included (:func:`nvls_pipeline_bytes` with r heads): (S + 2·min(S, L))(1 + 1/r)/(η_wire·B_line)
    × chunk slowdown, so two nodes never beat one (the tree adds the network to the same node-local work)."""
    assert topo.nvls is not None
    r, m = topo.ranks_per_domain, topo.num_domains
    hop = topo.inter_latency_s - HW_STEP_LATENCY_S["net"]["ring"]["LL"] + NVLS_TREE_NET_STEP_S
    latency = topo.nvls.latency_s.value + 2.0 * ceil_log2(m) * hop
    line = topo.intra_line_bw_bytes_per_s * nvls_wire_efficiency(topo.nvls.busbw_efficiency.value)
    intra_s = nvls_pipeline_bytes(size_bytes, topo, line, heads=r) * (1.0 + 1.0 / r) / line
    inter_s = size_bytes * tree_network_share(m) / topo.inter_domain_bw()
    return cost(latency, np.maximum(intra_s, inter_s),
                size_bytes * (1.0 + 1.0 / r) + tree_network_share(m) * size_bytes / r)


def sharp_applies(op: str, topo: GroupTopology) -> np.ndarray | bool:
    """Switches with SHARP and a group that spans domains."""
    return False if topo.sharp is None else topo.spans_domains


def sharp_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """T = base + 2(r−1)α_intra + α_inter + α_SHARP + max(2(r−1)/r·S/B_intra, (S/r)/(B_rank·eff))."""
    assert topo.sharp is not None
    r = topo.ranks_per_domain
    latency = (BASE_LATENCY_S["ring"][protocol] + 2.0 * (r - 1) * topo.intra_step_s("ring", protocol)
               + topo.inter_step_s("ring", protocol) + topo.sharp.latency_s.value)
    intra = 2.0 * (r - 1) / r * size_bytes / topo.intra_bw()
    inter = size_bytes / r / (topo.inter_rank_bw() * topo.sharp.busbw_efficiency.value)
    wire = 2.0 * (r - 1) / r * size_bytes + size_bytes / r
    return cost(latency, np.maximum(intra, inter), wire)
