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

The time of one collective is ``base + Σ steps α_step(tier, protocol) + bytes / (B × fraction)``.
Base latencies and the per-step latencies for the NVLink / PCI / network hardware classes are the
published constants of NCCL's tuner (NVIDIA/nccl ``src/graph/tuning.cc`` at commit b6475625,
``baseLat`` and ``hwLat``); the profile's own ``latency_s`` of a tier is its LL step latency
(e.g. 0.6 us for NVLink, 2.7 us plus the fabric's latency for a network), and the other protocols
add NCCL's per-class difference on top of it. Nothing here is fitted to a validation row.
"""

from __future__ import annotations

import numpy as np

PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")
"""NCCL's protocols, lowest latency first."""

FAMILIES: tuple[str, ...] = ("ring", "tree")
"""Latency families of NCCL's table: ring-like step schedules and pipelined trees."""

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
"""NCCL's per-step latency of one hop per hardware class × family × protocol (tree/Simple is the
pipeline latency of one 256 kB chunk, tuning.cc's own comment)."""

NVLS_STEP_LATENCY_S = 23e-6
"""NCCL tuner latency of one NVLS all-reduce on NVLink (tuning.cc b6475625, hwLat NVLINK NVLS Simple)."""

MULTI_NODE_LL_INTRA_FACTOR = 1.8
"""tuning.cc: ``if (nNodes > 1 && p == LL) intraLat *= 1.8`` (LL flags also cross the network path)."""

NET_POST_OVERHEAD_S = 3e-6
"""CPU proxy cost of posting one network send with Simple: tuning.cc ``getNetOverhead`` (1 us on Intel
x86 and by default) × 3 for Simple. Paid per extra remote peer by point-to-point patterns (all-to-all)."""

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


def bandwidth_fraction(family: str, protocol: str, op: str, multi_domain: np.ndarray | bool) -> np.ndarray:
    """Share of the link bandwidth ``protocol`` delivers for ``op`` (NCCL tuner refinements).

    ring/p2p: LL 1/4 for all-reduce, reduce, or across nodes, else 1/3; LL128 0.92; Simple 1.
    tree: LL 1/3.8; LL128 7/9 on one node, 120/128 across nodes; Simple 1 (the 0.92 tree kernel
    factor is applied by the tree itself, to its NVLink part).
    """
    multi = np.asarray(multi_domain, dtype=bool)
    if protocol == "Simple":
        return np.ones_like(multi, dtype=float)
    if family == "tree":
        if protocol == "LL":
            return np.full(multi.shape, TREE_LL_FRACTION)
        return np.where(multi, TREE_LL128_FRACTION_MULTI_NODE, TREE_LL128_FRACTION_ONE_NODE)
    if protocol == "LL128":
        return np.full(multi.shape, LL128_FRACTION)
    quarter = multi | (op in ("all_reduce", "reduce", "barrier"))
    return np.where(quarter, 0.25, 1.0 / 3.0)
