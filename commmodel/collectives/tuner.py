"""NCCL's own time estimate per algorithm × protocol: what ``auto`` chooses by (``selection="nccl"``).

NCCL does not run the truly fastest algorithm; it runs the one its tuner *estimates* fastest
(NVIDIA/nccl ``src/graph/tuning.cc`` at commit b6475625, ``ncclTopoTuneModel`` and
``ncclTopoGetAlgoTime``): time = latency + S / algbw, with

* ``busBw = nChannels × bw`` from the topology search's graphs. A ring graph has one speed inside
  and across nodes (``search.cc``: ``bwIntra = bwInter``), one channel per NIC across nodes, so its
  busBw is min(intra line rate, the group's NIC line rate per node). A tree graph on two nodes may
  raise ``bwIntra`` up to twice ``bwInter`` (search.cc pass 2: ``bwIntra < bwInter*2``); on one or
  two nodes both ring and tree read ``bwIntra``, beyond two nodes ``bwInter``.
* refinements: ring LL ×1/4 (all-reduce, reduce, or multi-node) else ×1/3, capped at ``llMaxBw``;
  ring LL128 ×0.92 (×0.7 with < 2 ranks per node) capped at nChannels × ``perChMaxRingLL128Bw``;
  tree ×0.92 capped at nChannels × ``perChMaxTreeBw``; tree LL ×1/3.8 (≤ llMaxBw); tree LL128 ×7/9
  (one node) or ×120/128 capped at nChannels × ``perChMaxTreeLL128Bw``; NVLS on one node,
  NVLS-tree with min(bwIntra, bwInter, halved beyond two nodes).
* busBw → algbw: ring × n/nsteps, tree × 1/2, NVLS and NVLS-tree × 5/6.
* latency: ``baseLat`` + ring (nsteps − nInterSteps)·intraLat + nInterSteps·interLat (multi-node:
  LL intra ×1.8, intra ≥ the network post overhead 1 us, ×3 for Simple), tree
  2((n/nNodes − 1)·intraLat + log₂nNodes·interLat); interLat adds the fabric latency (twice for
  Simple: the flush); NVLS 23 us, NVLS-tree 23 us + 2·log₂nNodes·(14 us + fabric). Tree/Simple takes NCCL ≥ 2.23.4's
  row (tuning.cc@68b54236: base 8.4 us, NVLink/PCI 4.0, NET 14; b6475625 had 0/28/28), the one NCCL ships today.
* protocols a fabric's software forbids (``scale_out.nccl_protocols``: Simple only across EFA v1 and TCPX(O)) are
  not candidates for communicators that cross it (:func:`.choice.protocol_mask`).
* at run time: tree bandwidth × ``treeCorrectionFactor[protocol][log₂(S/64)]`` below 256 MiB, and
  ring/Simple all-reduce latency × 1.4 (× 1.9 before Ampere) across nodes once S/(nChannels·n) ≥ 64
  ("plateau effect of ring").

Graph bandwidths here are the profile's achievable rates (line × efficiency: NCCL's own speeds
are already discounted, e.g. 20 of an A100 NVLink's 25 GB/s, 24 of an HDR port's 25, and a
calibrated profile keeps the tuner consistent with what it measured): the NVLink/PCIe rate per GPU
and the group's NIC rate per node (its share of the rails, one channel per NIC). Not modelled: the search's speed-array rounding,
channel duplication, the 0.85 fallback-tree pattern, CollNet (SHARP's estimate is its physical
time) and per-CPU-vendor LL caps (Intel assumed). The estimate only chooses; the time reported is
the physical cost of the chosen pair (``api.py``). Each algorithm registry entry names its estimate
(``nccl_estimate``); the shared tuning.cc constants live in :mod:`.protocols`.
"""

from __future__ import annotations

import numpy as np

from collections.abc import Callable

from commmodel.collectives.protocols import (
    BASE_LATENCY_S,
    HW_STEP_LATENCY_S,
    LL128_FRACTION,
    MULTI_NODE_LL_INTRA_FACTOR,
    NET_OVERHEAD_S,
    NVLS_HW_LAT_S,
    NVLS_TREE_NET_STEP_S,
    PER_CH_MAX_RING_LL128_BW_GBPS,
    PER_CH_MAX_TREE_BW_GBPS,
    PER_CH_MAX_TREE_LL128_BW_GBPS,
    SIMPLE_NET_OVERHEAD_FACTOR,
    TREE_KERNEL_EFFICIENCY,
    TREE_LL128_FRACTION_MULTI_NODE,
    TREE_LL128_FRACTION_ONE_NODE,
    TREE_LL_FRACTION,
    TREE_SIMPLE_BASE_LATENCY_S,
    TREE_SIMPLE_HOP_S,
    bandwidth_fraction,
)
from commmodel.collectives.topology import GroupTopology
from commmodel.hardware.models import System

GB = 1e9

TUNED_OPS = frozenset({"all_reduce", "all_gather", "reduce_scatter"})
"""Primitives priced by the tuner formulas here (tuning.cc's nsteps for broadcast/reduce depend on the
ring graph's ``sameChannels``, which the profile does not tell; those keep the physical choice)."""

TUNER_ARCH_MIN_SM = (80, 90)
"""tuning.cc ``compCapIndex``: 0 Volta and Turing (< sm_80), 1 Ampere and Ada (sm_80-sm_89), 2 Hopper and later
(≥ sm_90); the GPU's ``compute_capability`` comes from the catalogue (gpus.yaml)."""

LL_MAX_BW_GBPS = {"1node": (39.0, 87.7, 87.7), "2nodes": 39.0, "more": 20.4}
"""tuning.cc ``llMaxBws``: one node by GPU architecture (Volta, Ampere, Hopper); across nodes by CPU
(Intel row: 39.0 on two nodes, 20.4 beyond)."""

TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}
"""tuning.cc ``treeCorrectionFactor[protocol][log2i(S >> 6)]``, powers of two from 64 B to 256 MiB."""

_CORRECTION_TABLES = {p: np.asarray(t + (1.0,)) for p, t in TREE_CORRECTION.items()}
"""The tables with a trailing 1.0 for sizes past 256 MiB."""

RING_PLATEAU = (1.9, 1.4)
"""tuning.cc: multi-node ring/Simple all-reduce latency × 1.9 before Ampere, × 1.4 from Ampere."""

NVLS_ALGBW_RATIO = 5.0 / 6.0
"""tuning.cc: NVLS and NVLS-tree busBw → algbw ratio."""

RING_LL128_FRACTION_ONE_PER_NODE = 0.7
"""tuning.cc: ring LL128 ``busBw * 0.7`` instead of 0.92 when fewer than 2 ranks share a node."""


def _hw_lat(hw: str, family: str, protocol: str) -> float:
    """tuning.cc ``hwLat[hw][family][protocol]``: NCCL 2.20's table (b6475625) except tree/Simple, which takes NCCL
    ≥ 2.23.4's (:data:`.protocols.TREE_SIMPLE_HOP_S`, 68b54236 = 5067397c)."""
    if family == "tree" and protocol == "Simple":
        return TREE_SIMPLE_HOP_S[hw]
    return HW_STEP_LATENCY_S[hw][family][protocol]


def arch_index(system: System) -> int:
    """tuning.cc's compCapIndex (0 Volta, 1 Ampere, 2 Hopper and later) for the system's GPU."""
    return sum(system.gpu.sm_version() >= edge for edge in TUNER_ARCH_MIN_SM)


class TunerView:
    """Graph bandwidths, channel counts and latencies NCCL's tuner would see for a group (arrays)."""

    def __init__(self, system: System, topo: GroupTopology, size_bytes: np.ndarray):
        self.topo = topo
        # treeCorrectionFactor column: log2i(S >> 6), past the table (>= 512 MiB) the factor is 1
        log_size = np.floor(np.log2(np.maximum(size_bytes, 64.0) / 64.0))
        self.log_idx = np.minimum(log_size, len(TREE_CORRECTION["Simple"])).astype(np.intp)
        self.arch = arch_index(system)
        n_nodes = topo.num_domains  # NCCL counts an NVL72 (MNNVL) domain as one node
        self.n_nodes = n_nodes
        self.multi = n_nodes > 1
        self.node_idx = np.where(n_nodes <= 1, 0, np.where(n_nodes == 2, 1, 2))
        self.g_intra = topo.intra_bw(simplex=True) / GB  # host-staged PCIe: NCCL sees the PCIe link, not the duplex penalty
        self.g_inter = topo.inter_domain_bw() / GB
        out = system.scale_out
        if out is None:
            nics = np.zeros_like(topo.num_ranks)
            self.fabric_lat_s = 0.0
        else:
            nics = out.nics_per_node * topo.ranks_per_domain / system.gpus_per_node
            self.fabric_lat_s = max(out.latency_s.value - HW_STEP_LATENCY_S["net"]["ring"]["LL"], 0.0)
        # one channel per NIC across nodes; inside one node NVSwitch graphs have >= 12 channels and the
        # per-channel caps do not bind (tuning.cc's caps x 12 exceed the NVLink rate)
        self.channels = np.where(self.multi, np.maximum(1.0, np.round(nics)), np.inf)
        self.ppn = topo.num_ranks / n_nodes
        self.ll_max = np.where(~self.multi, LL_MAX_BW_GBPS["1node"][self.arch],
                               np.where(n_nodes == 2, LL_MAX_BW_GBPS["2nodes"], LL_MAX_BW_GBPS["more"]))

    def _inter_lat(self, family: str, protocol: str) -> float:
        lat = _hw_lat("net", family, protocol) + self.fabric_lat_s
        return lat + self.fabric_lat_s if protocol == "Simple" else lat

    def _intra_lat(self, family: str, protocol: str) -> np.ndarray:
        lat = _hw_lat(self.topo.intra_hw, family, protocol)
        return np.where(self.multi & (protocol == "LL"), lat * MULTI_NODE_LL_INTRA_FACTOR, lat)

    def ring(self, op: str, protocol: str, size: np.ndarray) -> np.ndarray:
        """Estimated ring time (s)."""
        n = self.topo.num_ranks
        bus = np.minimum(self.g_intra, self.g_inter)
        if protocol == "LL":
            bus = np.minimum(self.ll_max, bus * bandwidth_fraction("ring", "LL", op, self.multi))
        elif protocol == "LL128":
            bus = np.minimum(bus * np.where(self.ppn < 2, RING_LL128_FRACTION_ONE_PER_NODE, LL128_FRACTION),
                             self.channels * PER_CH_MAX_RING_LL128_BW_GBPS[self.arch])
        nsteps = 2.0 * (n - 1) if op == "all_reduce" else n - 1.0
        if op == "all_reduce":
            n_inter = np.where(self.multi, 2.0 * self.n_nodes, 0.0)
        else:
            n_inter = self.n_nodes - 1.0
        overhead = NET_OVERHEAD_S * (SIMPLE_NET_OVERHEAD_FACTOR if protocol == "Simple" else 1.0)
        intra = np.where(self.multi, np.maximum(self._intra_lat("ring", protocol), overhead),
                         self._intra_lat("ring", protocol))
        lat = BASE_LATENCY_S["ring"][protocol] + (nsteps - n_inter) * intra + n_inter * self._inter_lat("ring", protocol)
        if op == "all_reduce" and protocol == "Simple":
            plateau = self.multi & (size / (2.0 * self.channels * n) >= 64)  # comm channels = 2 x graph's
            lat = np.where(plateau, lat * RING_PLATEAU[min(self.arch, 1)], lat)
        return lat + size / (bus * n / nsteps * GB)

    def tree(self, protocol: str, size: np.ndarray) -> np.ndarray:
        """Estimated double-binary-tree all-reduce time (s)."""
        two = self.n_nodes == 2
        bw = np.where(self.n_nodes > 2, self.g_inter,
                      np.where(two, np.minimum(self.g_intra, 2.0 * self.g_inter), self.g_intra))
        idx = self.node_idx
        bus = np.minimum(bw * TREE_KERNEL_EFFICIENCY, self.channels * np.take(PER_CH_MAX_TREE_BW_GBPS[self.arch], idx))
        if protocol == "LL":
            bus = np.minimum(bus * TREE_LL_FRACTION, self.ll_max)
        elif protocol == "LL128":
            bus = np.minimum(bus * np.where(self.multi, TREE_LL128_FRACTION_MULTI_NODE, TREE_LL128_FRACTION_ONE_NODE),
                             self.channels * np.take(PER_CH_MAX_TREE_LL128_BW_GBPS[self.arch], idx))
        corr = _CORRECTION_TABLES[protocol][self.log_idx]
        per_node = np.floor(self.ppn)
        base = TREE_SIMPLE_BASE_LATENCY_S if protocol == "Simple" else BASE_LATENCY_S["tree"][protocol]
        lat = base + 2.0 * ((per_node - 1) * self._intra_lat("tree", protocol)
                                                         + np.floor(np.log2(self.n_nodes)) * self._inter_lat("tree", protocol))
        return lat + size / (bus * 0.5 * corr * GB)

    def nvls(self, size: np.ndarray) -> np.ndarray:
        """Estimated NVLS (one node) time (s)."""
        return NVLS_HW_LAT_S + size / (self.g_intra * NVLS_ALGBW_RATIO * GB)

    def nvls_tree(self, size: np.ndarray) -> np.ndarray:
        """Estimated NVLS-tree time (s)."""
        inter = np.where(self.n_nodes <= 2, self.g_inter, self.g_inter / 2.0)
        bus = np.minimum(self.g_intra, inter)
        hop = NVLS_TREE_NET_STEP_S + 2.0 * self.fabric_lat_s
        lat = NVLS_HW_LAT_S + 2.0 * np.floor(np.log2(self.n_nodes)) * hop
        return lat + size / (bus * NVLS_ALGBW_RATIO * GB)

    def protocol_override(self, op: str, size: np.ndarray) -> None:
        """NCCL keeps its tuner's protocol (RCCL's enqueue may not: :class:`.libraries.rccl_tuning.RcclTunerView`)."""
        return None

    def estimate_s(self, op: str, estimate: "TunerEstimate | None", protocol: str,
                   size: np.ndarray) -> np.ndarray | None:
        """NCCL's estimated time with a registry entry's ``nccl_estimate``, or None where tuning.cc is not
        modelled (no estimate for the algorithm, or an op outside :data:`TUNED_OPS`)."""
        if op not in TUNED_OPS or estimate is None:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            return estimate(self, op, protocol, size)


TunerEstimate = Callable[[TunerView, str, str, np.ndarray], np.ndarray]
"""(view, op, protocol, size_bytes) -> NCCL's estimated time (s): what an algorithm registry entry carries."""


def ring_estimate_s(view: TunerView, op: str, protocol: str, size: np.ndarray) -> np.ndarray:
    """tuning.cc's ring estimate (:meth:`TunerView.ring`)."""
    return view.ring(op, protocol, size)


def tree_estimate_s(view: TunerView, op: str, protocol: str, size: np.ndarray) -> np.ndarray:
    """tuning.cc's double-binary-tree all-reduce estimate (:meth:`TunerView.tree`)."""
    return view.tree(protocol, size)


def nvls_estimate_s(view: TunerView, op: str, protocol: str, size: np.ndarray) -> np.ndarray:
    """tuning.cc's NVLS estimate (:meth:`TunerView.nvls`)."""
    return view.nvls(size)


def nvls_tree_estimate_s(view: TunerView, op: str, protocol: str, size: np.ndarray) -> np.ndarray:
    """tuning.cc's NVLS-tree estimate (:meth:`TunerView.nvls_tree`)."""
    return view.nvls_tree(size)
