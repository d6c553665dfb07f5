"""auto chooses by NCCL's own tuner estimate (collectives/tuner.py, NVIDIA/nccl src/graph/tuning.cc b6475625)
and reports the physical time of what it chose. Hand-computed refinements and NCCL's documented choices."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.collectives.topology import group_topology
from commmodel.collectives.tuner import TunerView, arch_index
from commmodel.errors import CollectiveError
from commmodel.hardware.cluster import Cluster
from commmodel.io.profiles import compose_from_names, load_system

GiB = 2.0**30
A100_4HDR = compose_from_names("a100-sxm-80gb", 8, "nvlink3", "ib-hdr", 4)
"""2x HGX A100 with four 200 Gb/s HDR NICs per node (NVIDIA/nccl-tests#100, #175)."""


def _view(system, n, size, per_node=None):
    size = np.asarray(size, dtype=float)
    return TunerView(system, group_topology(system, n, per_node), size)


def _algbw_GBps(fn, system, n, per_node=None):
    """Estimated algbw from two bandwidth-bound sizes (latency and correction factors cancel past 512 MiB)."""
    big, bigger = 4 * GiB, 8 * GiB
    t = fn(_view(system, n, [big, bigger], per_node), np.array([big, bigger]))
    return (bigger - big) / (t[1] - t[0]) / 1e9


def test_two_node_ring_estimate_is_bound_by_the_nics():
    # ring graph: one channel per NIC, bwIntra = bwInter: 4 x 25 GB/s x 0.96 = 96 GB/s busBw; algbw x 16/30
    algbw = _algbw_GBps(lambda v, s: v.ring("all_reduce", "Simple", s), A100_4HDR, 16)
    assert algbw == pytest.approx(96.0 * 16 / 30, rel=1e-6)


def test_two_node_tree_estimate_is_capped_per_channel():
    # tree on 2 nodes: bwIntra up to 2 x bwInter = 192 > NVLink 232.5 x ... -> min(232.5, 192) x 0.92 = 176.6,
    # capped at 4 channels x 23.6 GB/s (perChMaxTreeBws Ampere, 2 nodes) = 94.4; algbw x 1/2 = 47.2
    algbw = _algbw_GBps(lambda v, s: v.tree("Simple", s), A100_4HDR, 16)
    assert algbw == pytest.approx(4 * 23.6 / 2, rel=1e-6)


def test_tree_ll_and_ll128_fractions_and_caps():
    # LL: busBw/3.8 (94.4/3.8 = 24.8 < llMaxBw 39); LL128 across nodes: min(94.4 x 120/128, 4 x 20) = 80
    ll = _algbw_GBps(lambda v, s: v.tree("LL", s), A100_4HDR, 16)
    ll128 = _algbw_GBps(lambda v, s: v.tree("LL128", s), A100_4HDR, 16)
    assert ll == pytest.approx(94.4 / 3.8 / 2, rel=1e-6)
    assert ll128 == pytest.approx(80.0 / 2, rel=1e-6)


def test_ring_ll_quarter_and_ll128_per_channel_cap():
    # LL: min(llMaxBw 39 (2 nodes, Intel), 96/4 = 24); LL128: min(96 x 0.92 = 88.3, 4 ch x 20) = 80
    ll = _algbw_GBps(lambda v, s: v.ring("all_reduce", "LL", s), A100_4HDR, 16)
    ll128 = _algbw_GBps(lambda v, s: v.ring("all_reduce", "LL128", s), A100_4HDR, 16)
    assert ll == pytest.approx(24.0 * 16 / 30, rel=1e-6)
    assert ll128 == pytest.approx(80.0 * 16 / 30, rel=1e-6)


def test_ring_ll128_with_one_rank_per_node_is_0_7():
    # ppn < 2: LL128 x 0.7 (2 nodes x 1 GPU: one NIC share = 0.5 NIC -> 1 channel, 12 GB/s, cap 20 not binding)
    ll128 = _algbw_GBps(lambda v, s: v.ring("all_reduce", "LL128", s), A100_4HDR, 2, 1)
    assert ll128 == pytest.approx(0.5 * 24.0 * 0.7 * 2 / 2, rel=1e-6)


def test_tree_correction_factor_at_1MiB():
    # log2i(1 MiB >> 6) = 14: Simple factor 0.5; bandwidth part doubles against the uncorrected 47.2 GB/s
    view = _view(A100_4HDR, 16, 2.0**20)
    lat = _view(A100_4HDR, 16, 8.0).tree("Simple", np.asarray(8.0)) - 8.0 / (0.9 * 47.2e9)  # 8 B: factor 0.9
    t = view.tree("Simple", np.asarray(2.0**20))
    assert t - lat == pytest.approx(2.0**20 / (0.5 * 47.2e9), rel=1e-6)


def test_ring_simple_plateau_multiplies_latency_across_nodes():
    # ring/Simple all-reduce across nodes: latency x 1.4 (Ampere) once S/(channels x n) >= 64
    view = _view(A100_4HDR, 16, np.array([16.0, 2.0**30]))
    t = view.ring("all_reduce", "Simple", np.array([16.0, 2.0**30]))
    lat_small = t[0] - 16.0 / (51.2e9)
    lat_big = t[1] - 2.0**30 / 51.2e9
    assert lat_big == pytest.approx(1.4 * lat_small, rel=1e-6)


def test_nvls_estimate_one_node():
    # NVLS: 23 us + S / (NVLink rate x 5/6); H100 NVLink4 450 GB/s x its profile efficiency
    system = load_system("dgx-h100")
    topo = group_topology(system, 8)
    t = _view(system, 8, GiB).nvls(np.asarray(GiB))
    assert t == pytest.approx(23e-6 + GiB / (topo.intra_bw() * 5 / 6), rel=1e-9)


def test_arch_index_from_the_compute_capability():
    assert arch_index(load_system("dgx-a100")) == 1
    assert arch_index(load_system("dgx-h100")) == 2
    assert arch_index(load_system("pcie-2x-rtx2080ti")) == 0
    assert arch_index(load_system("hgx-b200")) == 2       # sm_100: tuning.cc's Hopper-and-later row
    assert arch_index(load_system("pcie-8x-rtx4090")) == 1  # sm_89 (Ada) shares the Ampere row


def test_arch_index_refuses_a_gpu_without_compute_capability():
    from commmodel.errors import ProfileError

    system = load_system("dgx-a100")
    bare = system.model_copy(update={"gpu": system.gpu.model_copy(update={"compute_capability": None})})
    with pytest.raises(ProfileError, match="has no compute_capability"):
        arch_index(bare)


@pytest.mark.parametrize(("system", "n", "expected"), [
    (A100_4HDR, 16, "ring"),                        # nccl-tests#100/#175: ring-like 86-91 GB/s by default
    (load_system("dgx-h100"), 8, "nvls"),           # one H100 node: NVLS at large sizes (NCCL >= 2.17)
    (load_system("aws-p4de"), 16, "tree"),          # 2x p4de EFA: 78 GB/s on 50 GB/s of NICs = a tree
    (load_system("dgx-h100"), 16, "nvls_tree"),     # two DGX H100 nodes: NVLS-tree (sjeaugey, nccl-tests#196)
    (load_system("dgx-a100"), 32, "ring"),          # beyond two nodes the tree's bwInter/2 loses to the ring
])
def test_auto_reports_nccls_documented_choice_at_1GiB(system, n, expected):
    view = Cluster.for_gpus(system, n).system
    assert str(collective_cost("all_reduce", GiB, view, n, selection="nccl").algorithm) == expected


def test_fastest_selection_keeps_the_physical_winner():
    # the 2-node tree is physically faster (S per node through the NICs) but NCCL does not run it
    nccl = collective_cost("all_reduce", 4 * GiB, A100_4HDR, 16, selection="nccl")
    fastest = collective_cost("all_reduce", 4 * GiB, A100_4HDR, 16, selection="fastest")
    assert str(nccl.algorithm) == "ring" and str(fastest.algorithm) == "tree"
    assert float(fastest.time_s) < float(nccl.time_s)


def test_reported_time_is_the_physical_time_of_the_chosen_pair():
    sizes = 2.0 ** np.arange(3, 34)
    auto = collective_cost("all_reduce", sizes, A100_4HDR, 16, selection="nccl")
    for i, size in enumerate(sizes):
        forced = collective_cost("all_reduce", size, A100_4HDR, 16, algorithm=str(auto.algorithm[i]),
                                 protocol=str(auto.protocol[i]))
        assert float(forced.time_s) == float(auto.time_s[i])


def test_untuned_primitives_choose_as_before():
    # broadcast and all-to-all are not priced by the tuner formulas: both selections agree
    system = Cluster.for_gpus(load_system("dgx-h100"), 32).system
    sizes = 2.0 ** np.arange(3, 34)
    for op in ("broadcast", "all_to_all"):
        a = collective_cost(op, sizes, system, 32, selection="nccl")
        b = collective_cost(op, sizes, system, 32, selection="fastest")
        assert np.array_equal(a.time_s, b.time_s)


def test_unknown_selection_is_an_error():
    with pytest.raises(CollectiveError, match="selection"):
        collective_cost("all_reduce", GiB, A100_4HDR, 16, selection="best")


def test_protocol_order_has_one_owner_in_nccls_numbering():
    """The profile schema's protocol names are the collectives core's, in NCCL's ``NCCL_PROTO_*`` numbering
    (src/include/plugin/nccl_tuner.h@5067397c: LL 0, LL128 1, SIMPLE 2), which RCCL's forced protocol and the
    algorithm table read too."""
    from typing import get_args

    from commmodel.collectives.algorithms import ALGORITHMS
    from commmodel.collectives.libraries import rccl_tuning
    from commmodel.collectives.protocols import PROTOCOL_INDEX, PROTOCOLS
    from commmodel.hardware.models import NcclProtocol

    assert PROTOCOLS == get_args(NcclProtocol) == ("LL", "LL128", "Simple")
    assert PROTOCOL_INDEX == {"LL": 0, "LL128": 1, "Simple": 2}
    assert rccl_tuning.PROTOCOL_INDEX is PROTOCOL_INDEX
    assert ALGORITHMS["ring"].protocols == PROTOCOLS


def test_a_buffer_no_gpu_could_hold_is_priced_with_a_note():
    """The α-β formula prices any size, but a 1 PB all-reduce on H100s (85.5 GB each) could never run: the CLI says
    so under the table; a barrier's unused --size says it is unused."""
    from typer.testing import CliRunner

    from commmodel.cli.app import app

    runner = CliRunner()
    huge = runner.invoke(app, ["collective", "all_reduce", "--size", "1PB", "--gpus", "16", "--system", "dgx-h100"])
    assert huge.exit_code == 0 and "note: a 1 PB buffer is larger than one h100-sxm-80gb's 85.52 GB" in huge.output
    fits = runner.invoke(app, ["collective", "all_reduce", "--size", "1GiB", "--gpus", "16", "--system", "dgx-h100"])
    assert "note:" not in fits.output
    barrier = runner.invoke(app, ["collective", "barrier", "--size", "1GiB", "--gpus", "16", "--system", "dgx-h100"])
    assert barrier.output.startswith("barrier (no message: --size unused) on 16 GPUs")


def test_collective_and_sweep_json_state_the_selection_they_priced_with():
    """The choice rule changes the number (NCCL's tuner vs the fastest pair), so --json says which ran."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    runner = CliRunner()
    base = ["--gpus", "16", "--system", "dgx-h100", "--json"]
    one = json.loads(runner.invoke(app, ["collective", "all_reduce", "--size", "256MB", *base]).output)
    fast = json.loads(runner.invoke(app, ["collective", "all_reduce", "--size", "256MB", *base,
                                          "--selection", "fastest"]).output)
    swept = json.loads(runner.invoke(app, ["sweep", "all_reduce", "-b", "1MB", "-e", "4MB", *base]).output)
    assert (one["selection"], fast["selection"], swept["selection"]) == ("library", "fastest", "library")
