"""Rank placement (tp-cp-dp-pp) against an explicit rank grid, and the p2p hop against α + S/B."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.step.placement import GROUPS, RANK_ORDER, Placement, p2p_hop_s
from toys import B, make_system

POW2 = st.sampled_from([1, 2, 4, 8])


def _grid(tp: int, cp: int, dp: int, pp: int) -> np.ndarray:
    """Megatron's rank grid: axis i of the array is RANK_ORDER[::-1][i] (tensor fastest)."""
    return np.arange(tp * cp * dp * pp).reshape(pp, dp, cp, tp)


def _groups(grid: np.ndarray, group: str) -> list[np.ndarray]:
    """Every group of ``group``: the ranks that differ only along its axes."""
    names = RANK_ORDER[::-1]  # pp, dp, cp, tp: the grid's axis order
    axes = sorted(names.index(a) for a in GROUPS[group])  # slowest first, fastest last
    rest = [i for i in range(4) if i not in axes]
    moved = np.moveaxis(grid, rest + axes, list(range(4)))
    return list(moved.reshape(-1, int(np.prod([grid.shape[i] for i in axes]))))


@settings(max_examples=60, deadline=None)
@given(tp=POW2, cp=POW2, dp=POW2, pp=POW2, gpus_per_node=st.sampled_from([2, 4, 8]))
def test_placement_matches_the_rank_grid(tp, cp, dp, pp, gpus_per_node):
    system = make_system(gpus_per_node=gpus_per_node, domain=gpus_per_node, nics=gpus_per_node)
    place = Placement(system, tp=tp, cp=cp, dp=dp, pp=pp)
    grid = _grid(tp, cp, dp, pp)
    for group in GROUPS:
        members = _groups(grid, group)
        nodes = [np.unique(g // gpus_per_node, return_counts=True) for g in members]
        assert int(place.size(group)) == members[0].size
        assert int(place.ranks_per_node(group)) == max(int(c.max()) for _, c in nodes)
        assert bool(place.crosses_nodes(group)) == any(n.size > 1 for n, _ in nodes)
        if members[0].size > 1:
            assert int(place.stride(group)) == int(members[0][1] - members[0][0])


def test_placement_works_on_arrays_and_scalars_alike():
    system = make_system(gpus_per_node=8, domain=72)
    arrays = Placement(system, tp=np.array([1, 8, 2]), cp=np.array([1, 1, 8]), dp=np.array([16, 4, 2]))
    assert arrays.ranks_per_node("grad").tolist() == [8, 1, 4]
    assert arrays.ranks_per_domain("grad").tolist() == [16, 4, 16]
    assert arrays.crosses_nodes("cp").tolist() == [False, False, True]
    assert int(Placement(system, tp=2, cp=8, dp=2).ranks_per_node("grad")) == 4


def test_p2p_hop_is_alpha_plus_size_over_bandwidth():
    """System B (toys): NVSwitch 100 GB/s with a 1 us hop inside a node, one 10 GB/s NIC per GPU with a
    10 us hop between nodes (efficiencies 1)."""
    size = np.array([0.0, 1e6, 1e9])
    inside = p2p_hop_s(B, size, np.zeros(3, dtype=bool))
    across = p2p_hop_s(B, size, np.ones(3, dtype=bool))
    assert inside == pytest.approx(1e-6 + size / 100e9, rel=1e-9)
    assert across == pytest.approx(10e-6 + size / 10e9, rel=1e-9)
    both = p2p_hop_s(B, np.stack([size, 2 * size]), np.ones(3, dtype=bool))
    assert both[1] == pytest.approx(10e-6 + 2 * size / 10e9, rel=1e-9)
