"""The loop bubble of a ring whose every hop crosses the network (commmodel/collectives/algorithms/ring.py).

NCCL's ring kernels (all_gather.h / all_reduce.h ``runRing``, NVIDIA/nccl@5d3ab08b, v2.17.1-1) run each loop as one
thread block's chain of primitives ending in a receive; across a NIC the SM copies every slice into and out of the
network buffers, so each loop leaves the link idle for two slice copies:
t_bubble = 2/SLICES_PER_CHUNK · S/(n·c·r_ch).
"""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.collectives.algorithms.ring import SLICES_PER_CHUNK, net_loop_bubble_s
from commmodel.collectives.protocols import PER_CHANNEL_SIMPLE_BW_GBPS
from commmodel.collectives.topology import group_topology
from commmodel.io.profiles import load_system

GB = 1e9
GIB = 2.0**30


def ndm_busbw_GBps(op: str, n: int, per_node: int) -> float:
    ndm = load_system("azure-ndm-a100-v4")
    return float(collective_cost(op, GIB, ndm, n, per_node).busbw_bytes_per_s) / GB


@pytest.mark.parametrize(("op", "published"), [
    # microsoft/mscclpp docs/performance-ndmv4.md@7f3f366 (NCCL 2.17.1, 2 nodes x 1 GPU, 1 GiB, in-place busbw)
    ("all_gather", 15.84),
    ("all_reduce", 18.65),
])
def test_two_nodes_one_gpu_each_match_the_published_rows(op, published):
    """Without the bubble the model gives the NIC's 24.0 GB/s for both (+51% and +29%)."""
    assert ndm_busbw_GBps(op, 2, 1) == pytest.approx(published, rel=0.04)


def test_bubble_closed_form_on_two_a100_nodes():
    """2 ranks, 2 channels on the one HDR NIC (connect.cc duplication), Ampere's 24 GB/s per channel:
    1 GiB / (2 · 2 · 24 GB/s) = 11.18 ms, and the all-gather's busbw is then 24 · (1/2) / (1/2 + 1/4) = 16 GB/s."""
    topo = group_topology(load_system("azure-ndm-a100-v4"), 2, 1)
    assert SLICES_PER_CHUNK == 2 and PER_CHANNEL_SIMPLE_BW_GBPS[1] == 24.0
    bubble = float(net_loop_bubble_s("all_gather", np.asarray(GIB), topo, "Simple"))
    assert bubble == pytest.approx(GIB / (2 * 2 * 24e9), rel=1e-9)
    ring = collective_cost("all_gather", GIB, load_system("azure-ndm-a100-v4"), 2, 1, algorithm="ring",
                           protocol="Simple")
    assert float(ring.busbw_bytes_per_s) == pytest.approx(0.96 * 25e9 * 2 / 3, rel=0.01)


def test_bubble_only_where_every_hop_is_a_network_hop():
    system = load_system("azure-ndm-a100-v4")
    size = np.asarray(GIB)
    for n, per_node in ((16, 8), (8, 8)):  # NVLink neighbours on one side of the NIC, or no NIC at all
        assert float(net_loop_bubble_s("all_reduce", size, group_topology(system, n, per_node), "Simple")) == 0.0
    two = group_topology(system, 2, 1)
    assert float(net_loop_bubble_s("broadcast", size, two, "Simple")) == 0.0
    assert float(net_loop_bubble_s("all_reduce", size, two, "LL128")) == 0.0


def test_bubble_share_shrinks_with_ring_length():
    """Per loop the link carries n−1 chunks (all-gather) against one chunk's copies: with B = 24 GB/s over 2 channels
    (12 GB/s each) and r_ch = 24 GB/s, busbw = B · (n−1) / ((n−1) + B/(2·r_ch)) = 24 · (n−1)/(n − 1/2)."""
    for n in (2, 4, 8):
        assert ndm_busbw_GBps("all_gather", n, 1) == pytest.approx(24.0 * (n - 1) / (n - 0.5), rel=0.01)
