"""A ring with one rank per node: the GPU sends and receives through its one NIC (NCCL's ppn < 2 discount).

Source cells: NVIDIA/nccl src/graph/tuning.cc@v2.17.1-1 (5d3ab08b) to @v2.22.3-1 (178b6b75), ring LL128
``busBw * (ppn < 2 ? 0.7 : 0.92)``, "if ppn < 2, then we are sending/receiving at the same GPU through the NIC,
apply some bw discount". Synthetic system B (toys.py): 4 GPUs per node, one 10 GB/s NIC per GPU.
"""

from __future__ import annotations

import pytest

from commmodel.collectives import collective_cost
from commmodel.collectives.protocols import (
    LL128_FRACTION,
    ONE_RANK_PER_NODE_NIC_SHARE,
    RING_LL128_FRACTION_ONE_PER_NODE,
)
from commmodel.io.profiles import load_system
from toys import B

S = 1e9


def test_source_cells():
    assert RING_LL128_FRACTION_ONE_PER_NODE == 0.7
    assert LL128_FRACTION == 0.92
    assert ONE_RANK_PER_NODE_NIC_SHARE == pytest.approx(0.7 / 0.92)


def _bandwidth_s(op, n, per_node, protocol="Simple", algorithm="ring"):
    c = collective_cost(op, S, B, n, per_node, algorithm=algorithm, protocol=protocol, candidates="all")
    return float(c.bandwidth_s)


@pytest.mark.parametrize(("op", "steps"), [("all_reduce", 2.0), ("all_gather", 1.0), ("reduce_scatter", 1.0)])
def test_ring_of_one_gpu_per_node_keeps_0_761_of_the_nic(op, steps):
    # 4 nodes x 1 GPU: ring rate = 10 GB/s x 0.7/0.92; 4 nodes x 2 GPUs (ppn 2): the NIC's 2 x 10 GB/s, undiscounted
    wire = steps * 3 / 4 * S
    assert _bandwidth_s(op, 4, 1) == pytest.approx(wire / (10e9 * 0.7 / 0.92), rel=1e-9)
    wire = steps * 7 / 8 * S
    assert _bandwidth_s(op, 8, 2) == pytest.approx(wire / 20e9, rel=1e-9)


def test_ll128_reaches_nccls_own_0_7_and_ll_is_untouched():
    # LL128: 0.92 (protocol) x 0.7/0.92 (alone on the node) = NCCL's 0.7 exactly
    assert _bandwidth_s("all_reduce", 4, 1, "LL128") == pytest.approx(1.5 * S / (10e9 * 0.7), rel=1e-9)
    # LL streams a quarter of the rate, far below the NIC: no discount
    assert _bandwidth_s("all_reduce", 4, 1, "LL") == pytest.approx(1.5 * S / (10e9 / 4), rel=1e-9)


def test_two_rank_chain_only_sends_or_receives():
    # broadcast on 2 ranks: one GPU only sends, the other only receives: the NIC's full rate
    assert _bandwidth_s("broadcast", 2, 1) == pytest.approx(S / 10e9, rel=1e-9)


def test_pairwise_all_to_all_is_not_discounted():
    # NCCL states the discount for its ring only (nor is the tree discounted: the one 1-GPU-per-node tree sweep (H100, nccl-tests#232)
    # reaches 0.86 of its NIC at 32 MiB, above 0.761).
    assert _bandwidth_s("all_to_all", 4, 1, algorithm="pairwise") == pytest.approx(0.75 * S / 10e9, rel=1e-9)


def test_ndm_a100_v4_two_nodes_one_gpu_each():
    # One HDR NIC at 200 Gb/s x 0.96 (links.yaml ib-hdr) x 0.7/0.92: 18.26 GB/s ring busbw at 1 GiB
    # (measured, NCCL 2.17.1: all-gather 15.84, all-reduce 18.65 GB/s; microsoft/mscclpp docs/performance-ndmv4.md)
    ndm = load_system("azure-ndm-a100-v4")
    c = collective_cost("all_reduce", 2.0**30, ndm, 2, 1, algorithm="ring", protocol="Simple")
    assert float(c.busbw_bytes_per_s) / 1e9 == pytest.approx(25 * 0.96 * 0.7 / 0.92, rel=0.01)
