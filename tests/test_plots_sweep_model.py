"""Sweep records on the full algorithm registry: the marks agree with collective_cost itself."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.io.profiles import load_system
from commmodel.plots.collectives import plot_collective_sweep
from commmodel.plots.sweep_data import collective_sweep, power_of_two_sizes

SIZES = power_of_two_sizes(8, 16 * 2**30)
CASES = [("dgx-h100", 16), ("dgx-h100", 8), ("dgx-a100", 64), ("pcie-2x-rtx2080ti", 2)]


@pytest.mark.parametrize(("name", "num_ranks"), CASES)
def test_best_is_autos_choice_and_marks_sit_on_equalities(name, num_ranks):
    system = load_system(name)
    sweep = collective_sweep("all_reduce", system, num_ranks, SIZES, selection="fastest")
    best = sweep.rows[sweep.rows["best"]].sort_values("size_bytes")
    assert list(best["size_bytes"]) == list(SIZES)  # exactly one winner per size
    auto = collective_cost("all_reduce", SIZES, system, num_ranks, selection="fastest")  # the curves' rule
    assert np.allclose(best["time_s"], auto.time_s, rtol=1e-12)
    for crossing in sweep.crossovers.itertuples():
        below = collective_cost("all_reduce", crossing.size_bytes, system, num_ranks, algorithm=crossing.below,
                                selection="fastest")
        above = collective_cost("all_reduce", crossing.size_bytes, system, num_ranks, algorithm=crossing.above,
                                selection="fastest")
        assert float(below.time_s) == pytest.approx(float(above.time_s), rel=1e-6)
        smaller = collective_cost("all_reduce", crossing.size_bytes / 1.01, system, num_ranks,
                                  algorithm=crossing.below, selection="fastest")
        rival = collective_cost("all_reduce", crossing.size_bytes / 1.01, system, num_ranks,
                                algorithm=crossing.above, selection="fastest")
        assert float(smaller.time_s) <= float(rival.time_s)
    balance = sweep.best_balance_bytes
    if np.isfinite(balance):
        # the winner at the first bandwidth-bound size owns the boundary (CollectiveSweep.best_balance_bytes)
        algo = best[best["latency_s"] < best["bandwidth_s"]]["algorithm"].iloc[0]
        cost = collective_cost("all_reduce", balance, system, num_ranks, algorithm=algo, selection="fastest")
        assert float(cost.latency_s) == pytest.approx(float(cost.bandwidth_s), rel=1e-5)
    fig = plot_collective_sweep(sweep)
    drawn = {a.get_gid() for a in fig.axes[0].get_lines() if str(a.get_gid()).startswith("algo:")}
    assert drawn == {f"algo:{a}" for a in sweep.rows["algorithm"].unique()}
    assert len([a for a in fig.axes[0].get_lines() if a.get_gid() == "crossover"]) == len(sweep.crossovers)


def test_two_dgx_h100_nodes_switch_from_tree_to_ring():
    # the published behaviour NCCL's tuner shows across nodes: tree for small, ring for large messages
    sweep = collective_sweep("all_reduce", load_system("dgx-h100"), 16, SIZES)
    best = sweep.rows[sweep.rows["best"]].sort_values("size_bytes")["algorithm"].tolist()
    # (on exactly two nodes with NVLS the large-message winner is NCCL's NVLS-tree, sjeaugey in nccl-tests#196)
    assert best[0] == "tree" and best[-1] in ("ring", "nvls_tree")
    assert len(sweep.crossovers) >= 1 and sweep.crossovers["above"].iloc[-1] in ("ring", "nvls_tree")


def test_all_adds_textbook_algorithms_dashed():
    sweep = collective_sweep("all_reduce", load_system("dgx-h100"), 16, SIZES, algorithms="all",
                             selection="fastest")
    textbook = sweep.rows.loc[~sweep.rows["nccl"], "algorithm"].unique()
    assert len(textbook) > 0
    fig = plot_collective_sweep(sweep)
    styles = {a.get_gid(): a.get_linestyle() for a in fig.axes[0].get_lines() if str(a.get_gid()).startswith("algo:")}
    assert all(styles[f"algo:{name}"] == "--" for name in textbook)
    assert styles["algo:ring"] == "-"
    only = collective_sweep("all_reduce", load_system("dgx-h100"), 16, SIZES, algorithms=["ring"], selection="fastest")
    assert set(only.rows["algorithm"]) == {"ring"} and only.crossovers.empty
