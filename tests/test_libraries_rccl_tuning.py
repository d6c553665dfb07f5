"""RCCL's decision rule against its own tuning tables (ROCm/rccl@9e22c79d src/graph/tuning.cc).

The reference below re-derives RCCL's estimate with scalar arithmetic straight from the transcribed tables
(``ncclTopoTuneModel`` HIP branch + ``ncclTopoGetAlgoTime``) and the group's graph bandwidths, then applies
the enqueue-time ``llProtoRanges`` override across nodes (``rcclUpdateCollectiveProtocol``); the library
selection must pick the same algorithm × protocol at every (ranks, nodes, size) cell.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.collectives import collective_cost
from commmodel.collectives.libraries.rccl_tuning import (
    CORRECTION_COLUMNS,
    MODEL_BY_GFX,
    TUNING_MODELS,
    RcclTunerView,
    correction_column,
)
from commmodel.collectives.topology import group_topology
from commmodel.errors import CollectiveError
from commmodel.io.profiles import load_system

P = {"LL": 0, "LL128": 1, "Simple": 2}


def reference_us(system, op, n, per_node, algo, proto, size):
    """RCCL's estimated time (us) for one cell, scalar, from the tables (the test's own derivation)."""
    gfx = {"mi300x": "gfx942", "mi325x": "gfx942", "mi355x": "gfx950"}[system.gpu.name]
    m = TUNING_MODELS[MODEL_BY_GFX[gfx]]
    topo = group_topology(system, n, per_node)
    nodes = int(math.ceil(n / per_node))
    intra_gbps = float(topo.intra_bw(simplex=True)) / 1e9
    inter_gbps = float(topo.inter_domain_bw()) / 1e9 if nodes > 1 else math.inf
    row = 0 if nodes <= 2 else 1
    col = min(max(int(size) >> 6, 1).bit_length() - 1, 26)
    net_family = "tree" if n / nodes == 1 else algo
    intra, inter = m.hw_lat_us["nvlink"][algo][P[proto]], m.hw_lat_us["net"][net_family][P[proto]]
    if algo == "ring":
        steps = 2 * (n - 1) if op == "all_reduce" else n - 1
        bw = min(intra_gbps, inter_gbps) * m.bw_ratio[row]["ring"][P[proto]] * n / steps
        if nodes > 1:
            bw *= m.ring_correction[proto][col]
            intra = max(intra, 2.0 * (3 if proto == "Simple" else 1))
        hops = 0 if nodes == 1 else (2 if op == "all_reduce" else 1) * (nodes - 1)
        lat = (12.0 if proto != "Simple" else 17.0) + (steps - hops) * intra + hops * inter
        return lat + size / (1e3 * bw)
    if proto == "Simple" and nodes == 1:
        return math.inf  # tuning.cc: tree/Simple off on gfx942/gfx950 inside one node
    graph = inter_gbps if nodes > 2 else min(intra_gbps, 2 * inter_gbps) if nodes == 2 else intra_gbps
    bw = graph * m.bw_ratio[row]["tree"][P[proto]] * 0.5 * m.tree_correction[proto][col]
    lat = (12.0 if proto != "Simple" else 17.0) + 2 * ((n // nodes - 1) * intra + int(math.log2(nodes)) * inter)
    return lat + size / (1e3 * bw)


def reference_choice(system, op, n, per_node, size):
    """RCCL's pick: the first minimum over (tree, ring) × (LL, LL128, Simple) where both run here."""
    topo = group_topology(system, n, per_node)
    ll128 = bool(np.all(topo.ll128_enabled()))
    cells = [(a, p) for a in ("ring", "tree") for p in P
             if (a == "ring" or op == "all_reduce") and (p != "LL128" or ll128)]
    algo, proto = min(cells, key=lambda c: reference_us(system, op, n, per_node, c[0], c[1], size))
    return algo, reference_override(system, op, n, per_node, size, ll128) or proto


def reference_override(system, op, n, per_node, size, ll128):
    """rcclUpdateCollectiveProtocol's protocol across >= 2 nodes (None on one node), scalar, from llProtoRanges."""
    nodes = math.ceil(n / per_node)
    if nodes < 2:
        return None
    gfx = {"mi300x": "gfx942", "mi325x": "gfx942", "mi355x": "gfx950"}[system.gpu.name]
    (ll_lo, ll_hi, _, _), (hi_lo, hi_hi, _, _) = TUNING_MODELS[MODEL_BY_GFX[gfx]].ll_proto_ranges[op].values()
    per_rank = int(size) // n if op != "all_reduce" else int(size)
    if op == "all_reduce" and nodes > 2:
        hi_hi = int(hi_hi * 3.8)
    if ll128 and hi_lo < per_rank <= hi_hi:
        return "LL128"
    return "LL" if ll_lo < per_rank <= ll_hi else "Simple"


GRID = [(system, op, n, size)
        for system in ("amd-mi300x", "amd-mi325x", "amd-mi355x")
        for op in ("all_reduce", "all_gather", "reduce_scatter")
        for n in (2, 4, 8, 16, 32)
        for size in (2 ** k for k in range(6, 33, 2))]


@pytest.mark.parametrize("name", ["amd-mi300x", "amd-mi355x"])
def test_library_choice_matches_the_rccl_table_at_every_cell(name):
    system = load_system(name)
    for _, op, n, size in (g for g in GRID if g[0] == name):
        per_node = min(n, 8)
        cost = collective_cost(op, size, system, n, per_node, selection="library", library="rccl")
        expected = reference_choice(system, op, n, per_node, size)
        assert (str(cost.algorithm), str(cost.protocol)) == expected, (op, n, size)


def test_closed_form_cells_mi300x():
    """Hand arithmetic from tuning_model_5 (gfx942), 8 GPUs on one node, intra graph bandwidth B GB/s."""
    system = load_system("amd-mi300x")
    topo = group_topology(system, 8, 8)
    bus = float(topo.intra_bw(simplex=True)) / 1e9
    view = RcclTunerView(system, topo, np.asarray(2.0 ** 20))
    size = 2.0 ** 20
    # ring Simple: 17 + 14 x 2.1 us, algbw = B x 1.00 x 8/14
    assert float(view.ring("all_reduce", "Simple", size)) == pytest.approx((17 + 14 * 2.1 + size / (1e3 * bus * 8 / 14)) * 1e-6)
    # ring LL: 12 + 14 x 0.8 us, algbw = B x 0.08 x 8/14
    assert float(view.ring("all_reduce", "LL", size)) == pytest.approx((12 + 14 * 0.8 + size / (1e3 * bus * 0.08 * 8 / 14)) * 1e-6)
    # tree LL at 1 MiB: log2(2^20 / 64) = 14 -> treeCorrectionFactor[LL][14] = 1.0; 12 + 2 x 7 x 0.9 us
    assert float(view.tree("LL", size)) == pytest.approx((12 + 14 * 0.9 + size / (1e3 * bus * 0.06 * 0.5)) * 1e-6)
    assert float(view.tree("Simple", size)) == math.inf


def test_closed_form_two_nodes_ring_correction():
    """16 GPUs on two MI300X nodes at 64 MiB: ring/Simple reads ringCorrectionFactor[Simple][20] = 0.1."""
    system = load_system("amd-mi300x")
    topo = group_topology(system, 16, 8)
    size = 64.0 * 2 ** 20
    view = RcclTunerView(system, topo, np.asarray(size))
    bus = min(float(topo.intra_bw(simplex=True)), float(topo.inter_domain_bw())) / 1e9
    lat = 17 + 28 * 6.0 + 2 * 320.0  # 30 steps: 28 intra at max(2.1, 2 x 3) us, 2 inter at the NET ring Simple 320 us
    expected = (lat + size / (1e3 * bus * 16 / 30 * 0.1)) * 1e-6
    assert float(view.ring("all_reduce", "Simple", size)) == pytest.approx(expected)


def test_tables_have_27_columns_and_the_cited_model_per_arch():
    for model in TUNING_MODELS.values():
        for table in (model.tree_correction, model.ring_correction):
            assert sorted(table) == ["LL", "LL128", "Simple"]
            assert all(len(row) == CORRECTION_COLUMNS for row in table.values())
    assert MODEL_BY_GFX == {"gfx942": 5, "gfx950": 6}
    assert list(correction_column(np.array([0, 63, 64, 127, 128, 2.0 ** 20, 2.0 ** 40]))) == [0, 0, 0, 0, 1, 14, 26]


@pytest.mark.parametrize("size", [2 ** k for k in range(6, 33, 3)])
def test_one_node_never_runs_tree_simple(size):
    c = collective_cost("all_reduce", size, load_system("amd-mi300x"), 8, 8, selection="library", library="rccl")
    assert (str(c.algorithm), str(c.protocol)) != ("tree", "Simple")


def test_uncovered_gpu_is_an_error_not_a_guess():
    # RCCL's tables cover AMD Instinct parts only: asked for on NVIDIA GPUs, the library itself is refused
    with pytest.raises(CollectiveError, match="RCCL runs on AMD Instinct GPUs, and dgx-h100 has NVIDIA GPUs"):
        collective_cost("all_reduce", 1 << 20, load_system("dgx-h100"), 8, 8, selection="library", library="rccl")


def test_cli_states_rccls_choice():
    out = CliRunner().invoke(app, ["collective", "all_reduce", "--size", "64MiB", "--gpus", "8", "--system", "amd-mi300x"])
    assert out.exit_code == 0, out.output
    assert "rccl's own choice" in out.output
    expected = reference_choice(load_system("amd-mi300x"), "all_reduce", 8, 8, 64 * 2 ** 20)
    assert "/".join(expected) in out.output
