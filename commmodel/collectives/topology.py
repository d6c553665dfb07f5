"""Where a communicator's ranks sit, and what each kind of step costs there (DESIGN §4).

A group of ``num_ranks`` ranks has ``ranks_per_node`` of them in each node (packed TP group:
min(n, gpus_per_node); strided DP group: often 1). Steps between ranks of one scale-up domain
use the scale-up tier; steps between domains use the scale-out tier. A domain can be larger than
a node (NVL72: 18 trays of 4 GPUs share one NVLink domain), so a 72-rank group there never touches
the network. Every GPU of a node is assumed busy with a similar collective at the same time (true
for nccl-tests on full nodes and for data/tensor-parallel training), so a group's share of the
node's NICs is proportional to the ranks it has there: NCCL's rails give each GPU its nearest NIC,
and a ring or tree spreads its channels over all of the group's NICs in a node.

Latencies: a tier's ``latency_s`` is its LL-protocol step latency; :mod:`.protocols` adds NCCL's
per-protocol difference. All group fields are numpy arrays so one call evaluates many groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from commmodel.collectives.protocols import (
    COMM_CHANNELS_PER_NIC,
    DEFAULT_BUFFSIZE_BYTES,
    HW_STEP_LATENCY_S,
    MULTI_NODE_LL_INTRA_FACTOR,
    NCCL_STEPS,
    PROTOCOLS,
    RING_GRAPH_MAX_CHANNELS,
    hardware_class,
    protocol_step_overhead_s,
)
from commmodel.errors import CollectiveError
from commmodel.hardware.models import InNetworkReduction, System

ArrayLike = float | int | np.ndarray

LL128_NETWORK_KINDS = frozenset({"infiniband", "roce"})
"""Scale-out kinds over which NCCL runs LL128: GPUDirect RDMA verbs NICs close to the GPU (tuning.cc:
NIC at most PXB/PXN from the GPU). Not EFA: LL128 needs in-order 128-byte delivery, which EFA does
not give (aws/aws-ofi-nccl#76: "EFA doesn't support LL and LL128"; #715: the plugin turns protocols
off when FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES is missing); the 2x p4de rows show LL-like
small-message times but no LL128 speed-up between 256 KiB and 64 MiB. Not socket fabrics
(ethernet, tcpx, tcpxo, omnipath) nor libfabric ones (slingshot)."""

HOST_STAGED_SIMPLEX_GAIN = 2.77
"""Without GPU peer-to-peer NCCL stages data through pinned host memory. The tier's efficiency is
measured with every GPU sending and receiving at once (ring all-reduce); when each GPU only sends or
only receives (2-GPU broadcast/reduce, one send/recv) the host path runs this much faster.
Fitted on the only host-staged measurement (2x RTX 2080 Ti, Gen3, autodl-2080ti-pcie3-noP2P:
broadcast/reduce 11.1 GB/s vs all-reduce 4.00 GB/s busbw); p2pBandwidthLatencyTest on the same box
shows the same asymmetry (both directions together: 6.1 GB/s in total, one direction: 5.71).
LL and LL128 are paced by flag handling on small transfers, not by bulk duplex DMA through the host
bridge, so they get the one-way rate too (the box's 8-16 KiB all-reduce times need it)."""


def host_staged_bw_bytes_per_s(system: System) -> float:
    """Per-GPU streaming rate of host-staged PCIe (``pcie_host``) with every GPU of the node busy.

    NCCL's SHM transport (no GPU peer-to-peer) writes each byte into pinned host memory over the
    sender's PCIe link and reads it back over the receiver's, so the rate is the smaller of

    * the PCIe link share: line × efficiency / GPUs sharing one host link (``gpus_per_host_link``);
      the efficiency is the fraction of one x16 link that duplex staged traffic reaches
      (``links.yaml``, derived on the 2x RTX 2080 Ti box whose two GPUs share one switch uplink), and
    * host memory: peak memory bandwidth / (2 × GPUs of the node) when the profile states it —
      every staged byte crosses host memory twice, write and read (sjeaugey, NVIDIA/nccl#1639: PCIe
      systems are bounded by what CPU and memory deliver, "8 flows at 28 GB/s in both directions").
    """
    up = system.scale_up
    sharing = min(up.gpus_per_host_link, system.gpus_per_node)
    link_bw = up.effective_bw_bytes_per_s / sharing
    if system.host_memory_bw_bytes_per_s is None:
        return link_bw
    memory_bw = system.host_memory_bw_bytes_per_s.value / (2.0 * system.gpus_per_node)
    return min(link_bw, memory_bw)


def _read_only(values: np.ndarray) -> np.ndarray:
    """``values``, no longer writable: a cached array is shared by every algorithm priced on the topology
    (a numpy scalar, from 0-d inputs, is immutable already)."""
    if isinstance(values, np.ndarray):
        values.flags.writeable = False
    return values


@dataclass(frozen=True, eq=False)  # holds arrays: a generated == or hash could not compare them
class GroupTopology:
    """Per-group costs of one step inside a domain and of one step between domains (arrays)."""

    num_ranks: np.ndarray
    """n: ranks in the communicator."""
    ranks_per_node: np.ndarray
    """Ranks of the group in each node (≤ gpus_per_node)."""
    ranks_per_domain: np.ndarray
    """r: ranks of the group inside one scale-up domain (≤ n)."""
    num_domains: np.ndarray
    """m = n / r: domains the group spans (1 = all inside NVLink/PCIe)."""
    num_nodes: np.ndarray
    """Nodes the group spans (> num_domains when a domain holds several nodes, as in NVL72)."""
    intra_latency_s: float
    """α of an LL step inside the domain (the scale-up tier's ``latency_s``)."""
    intra_bw_bytes_per_s: float
    """Achievable unidirectional bandwidth per GPU inside the domain (line rate × efficiency)."""
    intra_line_bw_bytes_per_s: float
    """Unidirectional line rate per GPU inside the domain."""
    intra_hw: str
    """NCCL hardware class of the scale-up tier: nvlink or pcie."""
    host_staged: bool
    """True for PCIe without peer-to-peer (NCCL's SHM transport through host memory)."""
    inter_latency_s: float
    """α of an LL step between domains (inf when the system has no scale-out tier)."""
    inter_bw_per_domain_bytes_per_s: np.ndarray
    """Achievable scale-out bandwidth available to this group's ranks in one domain: their NICs summed, at
    most :data:`RING_GRAPH_MAX_CHANNELS` NICs (the channel paths crossing the domain boundary), each at its
    achievable rate over the spine's oversubscription (:func:`domain_exit_bw_bytes_per_s`)."""
    inter_bw_per_rank_bytes_per_s: float
    """Achievable scale-out bandwidth of one rank (its share of the node's NICs)."""
    inter_ll128: bool
    """Whether NCCL runs LL128 across this network (verbs RDMA: InfiniBand, RoCE)."""
    nvls: InNetworkReduction | None
    """NVLink SHARP of the scale-up switch, if any."""
    sharp: InNetworkReduction | None
    """InfiniBand SHARP / CollNet of the scale-out switches, if any."""
    hbm_bw_bytes_per_s: float
    """Device memory bandwidth (for the optional γ reduction term)."""
    sm_version: int = 0
    """The GPU's compute capability as a number (90 = sm_90); 0 when the profile does not state it."""
    intra_simple_fixed_s: float = 0.0
    """The scale-up tier's calibrated Simple-protocol fixed cost (0 when the profile has none)."""
    inter_simple_fixed_s: float = 0.0
    """The scale-out tier's calibrated Simple-protocol fixed cost (0 when the profile has none)."""
    inter_protocols: frozenset[str] = frozenset(PROTOCOLS)
    """The NCCL protocols a communicator may use once it crosses the scale-out fabric (its ``nccl_protocols``; all
    three when the fabric states none). Groups inside one domain keep all three."""
    simple_chunk_bytes: float = DEFAULT_BUFFSIZE_BYTES / NCCL_STEPS
    """Tree/Simple chunk (NCCL_BUFFSIZE / NCCL_STEPS): the fabric's ``nccl_buffsize_bytes`` where it crosses it."""
    inter_channels: np.ndarray | float = 1.0
    """Channels the communicator opens across the network: :data:`COMM_CHANNELS_PER_NIC` per NIC of the group's
    share of a domain's NICs (at least 1)."""
    last_domain_ranks: np.ndarray | None = None
    """Ranks of the group in its last domain when the domains hold unequal shares (packed: 76 ranks on NVL72 are
    72 + 4); None where every domain holds ``ranks_per_domain``. :attr:`fewest_ranks_per_domain` reads it."""

    @property
    def fewest_ranks_per_domain(self) -> np.ndarray:
        """The fewest ranks of the group in one domain: those ranks send the most over the network (their peers
        elsewhere are the most), so they set the pace of all-to-all-like patterns."""
        return self.ranks_per_domain if self.last_domain_ranks is None else self.last_domain_ranks

    def take(self, index: np.ndarray) -> "GroupTopology":
        """The groups at ``index`` (an integer index array): the same topology, element for element, without
        building it again from the system (:func:`commmodel.collectives.api.collective_times` prices several
        ops' groups on one topology)."""
        per_group = {name: getattr(self, name).take(index) for name in _PER_GROUP_FIELDS}
        if isinstance(self.inter_channels, np.ndarray):
            per_group["inter_channels"] = self.inter_channels.take(index)
        if self.last_domain_ranks is not None:
            per_group["last_domain_ranks"] = self.last_domain_ranks.take(index)
        return replace(self, **per_group)

    # cached_property (here and for spans_domains, inter_steps_fraction, inter_domain_bw): computed once per
    # topology, i.e. once per collective_cost call, not once per algorithm × protocol priced on it
    @cached_property
    def simple_fixed_s(self) -> np.ndarray:
        """Fixed cost of a Simple-protocol collective: the scale-up tier's, plus the scale-out tier's where
        the group crosses it."""
        return _read_only(self.intra_simple_fixed_s + np.where(self.spans_domains, self.inter_simple_fixed_s, 0.0))

    @cached_property
    def spans_domains(self) -> np.ndarray:
        """True where the group crosses the scale-out network."""
        return _read_only(self.num_domains > 1)

    @cached_property
    def inter_steps_fraction(self) -> np.ndarray:
        """Share of a ring's hops that cross domains: m of its n hops (0 inside one domain)."""
        return _read_only(np.where(self.spans_domains, self.num_domains / self.num_ranks, 0.0))

    def intra_step_s(self, family: str, protocol: str) -> np.ndarray:
        """α of one hop inside the domain for ``protocol``; LL hops slow down ×1.8 once the group
        spans domains (tuning.cc)."""
        base = self.intra_latency_s + protocol_step_overhead_s(self.intra_hw, family, protocol)
        if protocol == "LL":
            return np.where(self.spans_domains, base * MULTI_NODE_LL_INTRA_FACTOR, base)
        return np.full(self.num_ranks.shape, base)

    def inter_step_s(self, family: str, protocol: str) -> float:
        """α of one hop between domains; Simple pays the fabric latency twice (the receive flush)."""
        if not math.isfinite(self.inter_latency_s):
            return float("inf")
        step = self.inter_latency_s + protocol_step_overhead_s("net", family, protocol)
        if protocol == "Simple":
            step += max(self.inter_latency_s - HW_STEP_LATENCY_S["net"]["ring"]["LL"], 0.0)
        return step

    def slowest_step_s(self, family: str, protocol: str) -> np.ndarray:
        """α of a hop on the slowest tier the group uses."""
        inter = self.inter_step_s(family, protocol) if math.isfinite(self.inter_latency_s) else 0.0
        return np.where(self.spans_domains, np.maximum(inter, self.intra_step_s(family, protocol)),
                        self.intra_step_s(family, protocol))

    def protocol_allowed(self, protocol: str) -> np.ndarray | None:
        """Where the fabric's software lets NCCL run ``protocol``: everywhere inside one domain, across domains only if
        the fabric allows it (None: everywhere)."""
        if protocol in self.inter_protocols:
            return None
        return ~self.spans_domains

    def inter_channel_bw(self) -> np.ndarray:
        """What one channel streams through the network: the group's scale-out rate per domain over its channels
        (inf inside one domain)."""
        return self.inter_domain_bw() / self.inter_channels

    def ll128_enabled(self) -> np.ndarray:
        """Where NCCL enables LL128: NVLink inside the domain and, across domains, a verbs RDMA NIC."""
        if self.intra_hw != "nvlink":
            return np.zeros(self.num_ranks.shape, dtype=bool)
        return ~self.spans_domains | self.inter_ll128

    def intra_bw(self, simplex: bool = False, protocol: str = "Simple") -> float:
        """Per-GPU streaming rate inside the domain; host-staged PCIe is faster one way only (or with LL/LL128)."""
        if (simplex or protocol != "Simple") and self.host_staged:
            return min(self.intra_bw_bytes_per_s * HOST_STAGED_SIMPLEX_GAIN, self.intra_line_bw_bytes_per_s)
        return self.intra_bw_bytes_per_s

    def inter_rank_bw(self) -> np.ndarray:
        """One rank's own scale-out rate (inf inside one domain, so ``min`` ignores it)."""
        return np.where(self.spans_domains, self.inter_bw_per_rank_bytes_per_s, np.inf)

    def inter_domain_bw(self) -> np.ndarray:
        """The group's aggregate scale-out rate per domain (inf inside one domain)."""
        return self._inter_domain_bw

    @cached_property
    def _inter_domain_bw(self) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return _read_only(np.where(self.spans_domains, self.inter_bw_per_domain_bytes_per_s, np.inf))


_PER_GROUP_FIELDS = ("num_ranks", "ranks_per_node", "ranks_per_domain", "num_domains", "num_nodes",
                     "inter_bw_per_domain_bytes_per_s")
"""The :class:`GroupTopology` fields that are arrays of one value per group (``inter_channels`` too, when an array)."""


def domain_exit_bw_bytes_per_s(system: System, ranks_in_domain: np.ndarray) -> np.ndarray:
    """Scale-out rate leaving one domain for a group with ``ranks_in_domain`` ranks there.

    The group's share of the node's NICs (every GPU busy, rails: one NIC share per rank), capped by the
    channels that cross the domain boundary: NCCL's rings and trees use at most
    :data:`RING_GRAPH_MAX_CHANNELS` distinct NIC paths per domain, so a 72-GPU NVL72 rack with one
    400 Gb/s NIC per GPU leaves through 32 NICs, not 72. Each NIC's achievable rate already carries the
    fabric's ``oversubscription`` (:attr:`ScaleOutTier.node_bw_bytes_per_s`): traffic between racks
    crosses the spine.
    """
    out = system.scale_out
    if out is None:
        return np.zeros_like(np.asarray(ranks_in_domain, dtype=float))
    per_rank = out.node_bw_bytes_per_s / system.gpus_per_node
    per_nic = out.node_bw_bytes_per_s / out.nics_per_node
    return np.minimum(per_rank * ranks_in_domain, RING_GRAPH_MAX_CHANNELS * per_nic)


def group_topology(system: System, num_ranks: ArrayLike, ranks_per_node: ArrayLike | None = None) -> GroupTopology:
    """The topology view of a group of ``num_ranks`` with ``ranks_per_node`` in each node.

    ``ranks_per_node`` defaults to packing: min(n, gpus_per_node). A scale-up domain larger than a
    node (NVL72) holds ``ranks_per_node × domain_size / gpus_per_node`` ranks of the group.
    """
    n = np.asarray(num_ranks, dtype=float)
    if not (np.isfinite(n) & (n >= 1) & (n == np.floor(n))).all():
        raise CollectiveError(f"number of ranks must be a whole number ≥ 1, got {num_ranks!r}; use e.g. --gpus 8")
    gpn = system.gpus_per_node
    per_node = np.minimum(n, gpn) if ranks_per_node is None else np.asarray(ranks_per_node, dtype=float)
    if ranks_per_node is not None and not ((per_node >= 1) & (per_node <= gpn) & (per_node <= n) & (per_node == np.floor(per_node))).all():
        raise CollectiveError(
            f"ranks per node {ranks_per_node!r} must be a whole number between 1 and min(ranks, "
            f"{gpn} GPUs per node of {system.name})"
        )
    domain = system.scale_up.domain_size
    nodes_per_domain = max(1, domain // gpn)
    per_domain = np.minimum(n, per_node * nodes_per_domain)
    num_domains = np.ceil(n / per_domain)
    # packed, the last domain holds what is left (76 ranks on NVL72: 72 + 4); traffic between domains crosses every
    # domain's NICs alike, so the fewest ranks' NICs set the rate out of a domain
    exit_ranks = np.where(num_domains > 1, np.minimum(per_domain, n - per_domain * (num_domains - 1)), per_domain)
    up = system.scale_up
    out = system.scale_out
    if out is None:
        if np.any(num_domains > 1):
            raise CollectiveError(
                f"system {system.name} has no scale-out network, so a group cannot leave its "
                f"{domain}-GPU domain; use fewer ranks or --network LINK:N"
            )
        inter_latency_s = float("inf")
        per_rank_bw = 0.0
    else:
        inter_latency_s = out.latency_s.value
        per_rank_bw = out.node_bw_bytes_per_s / gpn
    return GroupTopology(
        num_ranks=n,
        ranks_per_node=per_node * np.ones_like(n),
        ranks_per_domain=per_domain,
        num_domains=num_domains,
        num_nodes=np.ceil(n / per_node),
        intra_latency_s=up.latency_s.value,
        intra_bw_bytes_per_s=(host_staged_bw_bytes_per_s(system) if up.kind == "pcie_host"
                              else up.effective_bw_bytes_per_s),
        intra_line_bw_bytes_per_s=up.bw_bytes_per_s.value,
        intra_hw=hardware_class(up.kind),
        host_staged=up.kind == "pcie_host",
        inter_latency_s=inter_latency_s,
        inter_bw_per_domain_bytes_per_s=domain_exit_bw_bytes_per_s(system, exit_ranks),
        inter_bw_per_rank_bytes_per_s=per_rank_bw,
        inter_ll128=out is not None and out.kind in LL128_NETWORK_KINDS,
        nvls=up.in_network_reduction,
        sharp=out.in_network_reduction if out is not None else None,
        hbm_bw_bytes_per_s=system.gpu.hbm_bw_bytes_per_s.value,
        sm_version=system.gpu.sm_version() if system.gpu.compute_capability is not None else 0,
        intra_simple_fixed_s=_fixed_s(up),
        inter_simple_fixed_s=_fixed_s(out),
        inter_protocols=_inter_protocols(out),
        simple_chunk_bytes=_buffsize_bytes(out) / NCCL_STEPS,
        inter_channels=_inter_channels(system, exit_ranks),
        last_domain_ranks=exit_ranks * np.ones_like(n),
    )


def _inter_protocols(tier) -> frozenset[str]:
    """The protocols NCCL may use across ``tier`` (its ``nccl_protocols``, else all three)."""
    stated = None if tier is None else tier.nccl_protocols
    return frozenset(PROTOCOLS) if stated is None else frozenset(stated.value)


def _buffsize_bytes(tier) -> float:
    """NCCL_BUFFSIZE across ``tier``: the fabric's stated value, else NCCL's default."""
    stated = None if tier is None else tier.nccl_buffsize_bytes
    return float(DEFAULT_BUFFSIZE_BYTES if stated is None else stated.value)


def _inter_channels(system: System, ranks_in_domain: np.ndarray) -> np.ndarray | float:
    """Channels across the network: two per NIC of the group's share of a domain's NICs (at most the ring graph's
    paths, :data:`RING_GRAPH_MAX_CHANNELS`), at least 1."""
    out = system.scale_out
    if out is None:
        return 1.0
    nics = np.minimum(out.nics_per_node * ranks_in_domain / system.gpus_per_node, RING_GRAPH_MAX_CHANNELS)
    return np.maximum(COMM_CHANNELS_PER_NIC * nics, 1.0)


def _fixed_s(tier) -> float:
    """A tier's calibrated Simple-protocol fixed cost, 0 when absent."""
    fixed = getattr(tier, "simple_fixed_s", None)
    return 0.0 if fixed is None else float(fixed.value)
