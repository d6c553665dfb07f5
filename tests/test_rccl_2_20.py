"""RCCL 2.20.5 (ROCm 6.2) — ``--library rccl-2.20`` — against its own source (ROCm/rccl tag rocm-6.2.0 = 45b618a3).

What the release does on gfx942 (MI300X): ``tuning_model_5`` as it was before ROCm/rccl@a25ca9bb (LL bwRatio 0.41,
ring hop 0.8/3.6 us LL/Simple), no ``llProtoRanges`` override, no LL128 (bwRatio 0.00; pEnable gfx90a only), tree/Simple
off on one node. The reference below re-derives the pick with scalar arithmetic from the transcribed table; the
closed-form cells are the same numbers by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.collectives.libraries import get_library
from commmodel.collectives.libraries.rccl_2_20 import RELEASE_2_20, TUNING_MODEL_5_620
from commmodel.collectives.libraries.rccl_tuning import RELEASES, RcclTunerView
from commmodel.collectives.topology import group_topology
from commmodel.errors import CollectiveError
from commmodel.io.profiles import load_system

P = {"LL": 0, "LL128": 1, "Simple": 2}
M = TUNING_MODEL_5_620


def reference_us(n: int, algo: str, proto: str, size: float, bus_gbps: float) -> float:
    """RCCL 2.20.5's estimate (us) of one all-reduce on n GPUs of one gfx942 node (HIP branch of tuning.cc)."""
    ratio = M.bw_ratio[0][algo][P[proto]]
    if ratio == 0.0 or (algo == "tree" and proto == "Simple"):
        return math.inf  # LL128: bwRatio 0.00 -> time -1 (never picked); tree/Simple skipped on one gfx94 node
    base = 17.0 if proto == "Simple" else 12.0
    hop = M.hw_lat_us["nvlink"][algo][P[proto]]
    if algo == "ring":  # nsteps = 2(n-1), no ring correction on one node
        return base + 2 * (n - 1) * hop + size / (1e3 * bus_gbps * ratio * n / (2 * (n - 1)))
    col = min(max(int(size) >> 6, 1).bit_length() - 1, 26)
    return base + 2 * (n - 1) * hop + size / (1e3 * bus_gbps * ratio * 0.5 * M.tree_correction[proto][col])


SIZES = [2 ** k for k in range(16, 24)]  # 64 KiB ... 8 MiB, the band the release question is about


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("size", SIZES)
def test_choice_matches_the_620_table_cell_by_cell(n, size):
    system = load_system("amd-mi300x")
    bus = float(group_topology(system, n, n).intra_bw(simplex=True)) / 1e9
    cells = [(a, p) for a in ("ring", "tree") for p in P]
    expected = min(cells, key=lambda c: reference_us(n, c[0], c[1], size, bus))
    cost = collective_cost("all_reduce", size, system, n, n, selection="library", library="rccl-2.20")
    assert (str(cost.algorithm), str(cost.protocol)) == expected


def test_eight_mi300x_switch_ll_to_simple_between_4_and_8_mib():
    """By hand: ring LL 12 + 14 x 0.8 = 23.2 us at 0.41 B x 8/14; ring Simple 17 + 14 x 3.6 = 67.4 us at B x 8/14.
    Equal at S* = 44.2 us x (B x 8/14) x 0.41 / 0.59; B = 312.704 GB/s (the profile's xGMI rate) -> 5.4885 MB."""
    system = load_system("amd-mi300x")
    bus = float(group_topology(system, 8, 8).intra_bw(simplex=True)) / 1e9
    assert bus == pytest.approx(312.704)
    crossover_bytes = 44.2 * 1e3 * (bus * 8 / 14) * 0.41 / 0.59
    assert crossover_bytes == pytest.approx(5.4885e6, rel=1e-4)
    sizes = np.array([2.0 ** 16, 2.0 ** 18, 2.0 ** 20, 2.0 ** 22, 2.0 ** 23, 2.0 ** 24])
    cost = collective_cost("all_reduce", sizes, system, 8, 8, selection="library", library="rccl-2.20")
    assert list(cost.protocol) == ["LL", "LL", "LL", "LL", "Simple", "Simple"]
    assert set(cost.algorithm) == {"ring"}
    newest = collective_cost("all_reduce", sizes, system, 8, 8, selection="library", library="rccl")
    assert list(newest.protocol) == ["LL", "LL", "Simple", "Simple", "Simple", "Simple"]  # 9e22c79d: LL 0.08


def test_estimate_closed_form():
    system = load_system("amd-mi300x")
    topo = group_topology(system, 8, 8)
    bus = float(topo.intra_bw(simplex=True)) / 1e9
    size = 2.0 ** 20
    view = RcclTunerView(system, topo, np.asarray(size), release="rccl-2.20")
    assert float(view.ring("all_reduce", "LL", size)) == pytest.approx((23.2 + size / (1e3 * bus * 0.41 * 8 / 14)) * 1e-6)
    assert float(view.ring("all_reduce", "Simple", size)) == pytest.approx((67.4 + size / (1e3 * bus * 8 / 14)) * 1e-6)
    # tree LL at 1 MiB: log2i(2^20 >> 6) = 14 -> treeCorrectionFactor[LL][14] = 0.6; 12 + 2 x 7 x 0.8 us
    assert float(view.tree("LL", size)) == pytest.approx((23.2 + size / (1e3 * bus * 0.41 * 0.5 * 0.6)) * 1e-6)
    assert float(view.tree("Simple", size)) == math.inf
    with np.errstate(divide="ignore"):
        assert float(view.ring("all_reduce", "LL128", size)) == math.inf  # bwRatio 0.00


def test_transcription_spot_values():
    """Cells read off rocm-6.2.0 src/graph/tuning.cc lines 224-252 (tuning_model_5)."""
    assert M.hw_lat_us["net"]["ring"] == (9.5, 0.0, 19.8) and M.hw_lat_us["net"]["tree"] == (12.5, 0.0, 22.4)
    assert M.bw_ratio[1]["tree"] == (0.41, 0.00, 0.86)
    assert M.tree_correction["Simple"][8] == 1.0 and M.tree_correction["Simple"][26] == 0.9
    assert M.ring_correction["LL"][7] == 1.0 and M.ring_correction["Simple"][9] == 0.7
    for table in (M.tree_correction, M.ring_correction):
        assert all(len(row) == 27 for row in table.values())
        assert set(table["LL128"]) == {0.0}
    assert RELEASE_2_20.ll128_archs == frozenset({"gfx90a"}) and M.ll_proto_ranges == {}


def test_no_protocol_override_across_nodes():
    """2.20.5 has no rcclUpdateCollectiveProtocol: the tuner's pair runs as chosen across nodes too."""
    system = load_system("amd-mi300x")
    topo = group_topology(system, 16, 8)
    view = RcclTunerView(system, topo, np.asarray(2.0 ** 20), release="rccl-2.20")
    assert view.protocol_override("all_reduce", np.asarray(2.0 ** 20)) is None
    newest = RcclTunerView(system, topo, np.asarray(2.0 ** 20), release="rccl")
    assert newest.protocol_override("all_reduce", np.asarray(2.0 ** 20)) is not None


def test_release_registry_and_errors():
    assert set(RELEASES) == {"rccl", "rccl-2.20"}
    assert get_library("rccl-2.20").family == "rccl" and get_library("rccl").family == "rccl"
    with pytest.raises(CollectiveError, match="no tuning model for gfx950"):
        collective_cost("all_reduce", 2.0 ** 20, load_system("amd-mi355x"), 8, 8, selection="library",
                        library="rccl-2.20")
