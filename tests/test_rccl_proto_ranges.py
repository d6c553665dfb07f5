"""RCCL's enqueue-time protocol override from ``llProtoRanges`` (rcclUpdateCollectiveProtocol).

Every boundary below is a cell of ``llProtoRanges`` (ROCm/rccl@9e22c79d src/graph/tuning.cc, tuning_model_5 for
gfx942 and tuning_model_6 for gfx950) read through the rule of ``rcclUpdateCollectiveProtocol``
(ROCm/rccl@00c78b70 src/rccl_wrap.cc): across >= 2 nodes, Simple unless the size per rank s lies in
(LL.min, LL.max] (LL) or, where LL128 runs, in (LL128.min, LL128.max'] (LL128, winning an overlap);
all-reduce above 2 nodes reads LL128.max' = trunc(LL128.max x 3.8). One node: no override.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.collectives.choice import forced_protocol as _forced_protocol
from commmodel.collectives.libraries.rccl_tuning import (
    ALL_REDUCE_LL128_MAX_SCALE,
    PROTOCOL_INDEX,
    TUNING_MODELS,
    RcclTunerView,
)
from commmodel.collectives.topology import group_topology
from commmodel.io.profiles import load_system

NAME = {v: k for k, v in PROTOCOL_INDEX.items()}
SYSTEM_BY_MODEL = {5: "amd-mi300x", 6: "amd-mi355x"}


def forced(system_name, op, n, size, per_node=8, ll128=True):
    """The override's protocol name at one cell ("keep" where RCCL keeps its tuner's choice, None: never)."""
    system = load_system(system_name)
    topo = group_topology(system, n, per_node)
    if not ll128:
        topo = dataclasses.replace(topo, inter_ll128=False)
    out = RcclTunerView(system, topo, np.asarray(float(size))).protocol_override(op, np.asarray(float(size)))
    return None if out is None else ("keep" if int(out) < 0 else NAME[int(out)])


def boundary_cells(model, op, n, nodes):
    """(size, expected protocol) at each edge of the op's LL and LL128 ranges, for n ranks on ``nodes`` nodes."""
    (ll_lo, ll_hi, _, _), (hi_lo, hi_hi, _, _) = TUNING_MODELS[model].ll_proto_ranges[op].values()
    if op == "all_reduce" and nodes > 2:
        hi_hi = int(hi_hi * ALL_REDUCE_LL128_MAX_SCALE)
    scale = 1 if op == "all_reduce" else n  # the size compared is per rank: all-gather/reduce-scatter S / n
    cells = []
    for s in {ll_lo + 1, ll_hi, ll_hi + 1, hi_lo, hi_lo + 1, hi_hi, hi_hi + 1}:
        expected = "LL128" if hi_lo < s <= hi_hi else "LL" if ll_lo < s <= ll_hi else "Simple"
        cells.append((s * scale, expected))
    return cells


@pytest.mark.parametrize("model", [5, 6])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("nodes", [2, 4])
def test_every_range_edge_across_nodes(model, op, nodes):
    n = 8 * nodes
    for size, expected in boundary_cells(model, op, n, nodes):
        assert forced(SYSTEM_BY_MODEL[model], op, n, size) == expected, (size, expected)


def test_published_edges_gfx942_all_reduce():
    """tuning_model_5 all-reduce: LL (0, 1048576], LL128 (1048576, 9437184]; above 2 nodes 9437184 x 3.8."""
    assert [forced("amd-mi300x", "all_reduce", 16, s) for s in (1, 1048576, 1048577, 9437184, 9437185)] == \
        ["LL", "LL", "LL128", "LL128", "Simple"]
    assert [forced("amd-mi300x", "all_reduce", 32, s) for s in (9437185, 35861299, 35861300)] == \
        ["LL128", "LL128", "Simple"]


def test_all_gather_compares_the_per_rank_shard_with_integer_division():
    """tuning_model_5 all-gather LL max 98304 bytes per rank; 16 ranks: S = 16 x 98304 (+15 still floors to it)."""
    assert forced("amd-mi300x", "all_gather", 16, 16 * 98304) == "LL"
    assert forced("amd-mi300x", "all_gather", 16, 16 * 98304 + 15) == "LL"
    assert forced("amd-mi300x", "all_gather", 16, 16 * 98305) == "LL128"
    assert forced("amd-mi300x", "all_gather", 32, 16 * 98305) == "LL"  # same S, twice the ranks: half the shard


def test_gfx950_all_gather_ll_range_is_empty_past_7_bytes():
    """tuning_model_6 all-gather: LL (0, 7], LL128 (7, 8388608] per rank."""
    assert forced("amd-mi355x", "all_gather", 16, 16 * 7) == "LL"
    assert forced("amd-mi355x", "all_gather", 16, 16 * 8) == "LL128"
    assert forced("amd-mi355x", "all_gather", 16, 16 * 8388609) == "Simple"


def test_ll128_range_falls_back_where_ll128_does_not_run():
    """Without LL128 (comm->topo->ll128Enabled false) the LL128 range reads Simple and LL keeps its own."""
    assert forced("amd-mi300x", "all_reduce", 16, 4 << 20, ll128=False) == "Simple"
    assert forced("amd-mi300x", "all_reduce", 16, 1 << 20, ll128=False) == "LL"


def test_all_reduce_scale_applies_above_two_nodes_only():
    size = 9437184 + 1  # just past tuning_model_5's all-reduce LL128 max
    assert forced("amd-mi300x", "all_reduce", 16, size) == "Simple"
    assert forced("amd-mi300x", "all_reduce", 24, size) == "LL128"
    assert forced("amd-mi300x", "reduce_scatter", 32, 32 * 3211265) == "Simple"  # no scale outside all-reduce


@pytest.mark.parametrize("n", [2, 4, 8])
def test_one_node_has_no_override(n):
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        assert forced("amd-mi300x", op, n, 1 << 20, per_node=n) is None
        assert forced("amd-mi355x", op, n, 1 << 20, per_node=n) is None


def test_mixed_groups_keep_the_tuner_on_one_node():
    system = load_system("amd-mi300x")
    topo = group_topology(system, np.array([8, 16]), 8)
    size = np.array([4.0 * 2 ** 20, 4.0 * 2 ** 20])
    out = RcclTunerView(system, topo, size).protocol_override("all_reduce", size)
    assert out.tolist() == [-1, PROTOCOL_INDEX["LL128"]]


def test_broadcast_and_reduce_are_left_to_the_physical_choice():
    for op in ("broadcast", "reduce"):
        assert forced("amd-mi355x", op, 16, 1 << 10) is None


@pytest.mark.parametrize("field", [2, 3])  # factor, thread threshold
def test_factor_and_thread_threshold_do_not_move_the_protocol(field):
    """The factor is read only by a commented-out line; the thread threshold feeds rcclUpdateThreadThreshold."""
    system = load_system("amd-mi300x")
    sizes = np.array([2.0 ** k for k in range(6, 31)])
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        view = RcclTunerView(system, group_topology(system, 32, 8), sizes)
        base = view.protocol_override(op, sizes)
        ranges = {op: {p: tuple(v * 7 + 1 if i == field else v for i, v in enumerate(entry))
                       for p, entry in view.model.ll_proto_ranges[op].items()}}
        view.model = dataclasses.replace(view.model, ll_proto_ranges=ranges)
        assert view.protocol_override(op, sizes).tolist() == base.tolist()


def test_undefined_ranges_leave_the_tuner_alone():
    """RCCL_LL_LIMITS_UNDEFINED = 0 (src/include/rccl_common.h): no cut-offs, no override."""
    system = load_system("amd-mi300x")
    view = RcclTunerView(system, group_topology(system, 16, 8), np.asarray(1024.0))
    view.model = dataclasses.replace(view.model, ll_proto_ranges={"all_reduce": {"LL": (0, 0, 0, 0),
                                                                               "LL128": (0, 0, 0, 0)}})
    assert view.protocol_override("all_reduce", np.asarray(1024.0)) is None


SIZES = np.array([2.0 ** k for k in range(10, 31)])


@pytest.mark.parametrize("name", ["amd-mi300x", "amd-mi325x", "amd-mi355x"])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_the_algorithm_stays_and_the_price_is_the_physical_one(name, op, monkeypatch):
    system = load_system(name)
    after = {n: collective_cost(op, SIZES, system, n, 8, selection="library", library="rccl") for n in (8, 16, 32)}
    monkeypatch.setattr(RcclTunerView, "protocol_override", lambda self, op, size: None)
    before = {n: collective_cost(op, SIZES, system, n, 8, selection="library", library="rccl") for n in (8, 16, 32)}
    monkeypatch.undo()
    for n in (8, 16, 32):
        assert after[n].algorithm.tolist() == before[n].algorithm.tolist()
        if n == 8:  # one node: byte-identical
            assert after[n].protocol.tolist() == before[n].protocol.tolist()
            assert np.array_equal(after[n].latency_s, before[n].latency_s)
            assert np.array_equal(after[n].bandwidth_s, before[n].bandwidth_s)
    for n in (16, 32):
        for i, size in enumerate(SIZES):
            algo, proto = after[n].algorithm[i], after[n].protocol[i]
            assert proto == forced(name, op, n, size)
            pinned = collective_cost(op, size, system, n, 8, algorithm=algo, protocol=proto, library="rccl")
            assert float(after[n].latency_s[i] + after[n].bandwidth_s[i]) == \
                pytest.approx(float(pinned.latency_s + pinned.bandwidth_s), rel=1e-12)


def test_forced_pair_that_cannot_run_keeps_the_tuners_pick():
    labels = [("", ""), ("ring", "LL"), ("ring", "Simple"), ("tree", "LL")]
    totals = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [np.inf, 3.0, 3.0]])
    pick = np.array([0, 2, 2])
    simple, ll128 = PROTOCOL_INDEX["Simple"], PROTOCOL_INDEX["LL128"]
    # cell 0: ring/LL -> ring/Simple; cell 1: tree has no Simple candidate; cell 2: ring/LL128 not a candidate
    assert _forced_protocol(pick, np.array([simple, simple, ll128]), labels, totals).tolist() == [1, 2, 2]
    # forced LL on a tree pick whose own LL is there: stays 2; on ring/Simple (index 1) -> ring/LL unless it cannot run
    ll = PROTOCOL_INDEX["LL"]
    assert _forced_protocol(np.array([1, 1, 1]), np.array([ll, -1, ll]), labels, totals).tolist() == [0, 1, 0]
    totals_off = totals.copy()
    totals_off[0, 0] = np.inf
    assert _forced_protocol(np.array([1]), np.array([ll]), labels, totals_off[:, :1]).tolist() == [1]
