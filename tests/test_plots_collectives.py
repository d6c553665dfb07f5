"""Collective plots: the markers sit where the α-β model puts them, series and axes are right."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from commmodel.collectives import algorithms as algo_registry
from commmodel.collectives import api, choice, collective_cost
from commmodel.collectives.algorithms.base import Algorithm
from commmodel.collectives.algorithms.base import cost as algo_cost
from commmodel.collectives.topology import group_topology
from commmodel.io.profiles import load_system_with_network
from commmodel.plots._style import PlotInputError, format_size_tick, format_time_tick
from commmodel.plots.collectives import describe_crossovers, plot_collective_sweep, plot_scaling
from commmodel.plots.sweep_data import collective_scaling, collective_sweep, power_of_two_sizes

SIZES = power_of_two_sizes(8, 16 * 2**30)

# A made-up "flat" all-reduce with a tenth of ring's per-step latency but a quarter of its bandwidth,
# registered only inside the tests that need two algorithms: t = 2α/10 + 2(n−1)/n·S/(B/4).
FLAT_ALPHA_FRACTION = 0.1
FLAT_BW_FRACTION = 0.25


def _flat_cost(op, size_bytes, topo, protocol):
    n = topo.num_ranks
    latency_s = 2.0 * FLAT_ALPHA_FRACTION * topo.intra_latency_s * np.ones_like(n)
    bandwidth_s = 2.0 * (n - 1) / n * size_bytes / (FLAT_BW_FRACTION * topo.intra_bw_bytes_per_s)
    return algo_cost(latency_s, bandwidth_s, 2.0 * (n - 1) / n * size_bytes)


@pytest.fixture(autouse=True)
def ring_only(monkeypatch):
    """The all-reduce registry reduced to NCCL's ring on the Simple protocol, so closed forms hold:
    t = base + 2(n−1)·α_S + 2(n−1)/n·S/B (NCCL base 8.4 us, α_S = LL hop + 2.8 us)."""
    ring = algo_registry.ALGORITHMS["ring"]._replace(protocols=("Simple",))
    kept = {name: a for name, a in algo_registry.ALGORITHMS.items() if "all_reduce" not in a.primitives}
    monkeypatch.setattr(algo_registry, "ALGORITHMS", {"ring": ring, **kept})
    monkeypatch.setattr(api, "ALGORITHMS", algo_registry.ALGORITHMS)
    monkeypatch.setattr(choice, "ALGORITHMS", algo_registry.ALGORITHMS)  # the choice prices the candidates


@pytest.fixture()
def two_algorithms(ring_only, monkeypatch):
    monkeypatch.setitem(algo_registry.ALGORITHMS, "flat",
                        Algorithm("flat", frozenset({"all_reduce"}), _flat_cost, nccl=True))


def _artists(fig, prefix):
    return [a for ax in fig.axes for a in ax.get_children() if (a.get_gid() or "").startswith(prefix)]


def _span_x(span):
    """x extent of an axvspan (a Rectangle in matplotlib ≥ 3.9, a Polygon before)."""
    if hasattr(span, "get_width"):
        return np.array([span.get_x(), span.get_x() + span.get_width()])
    return np.asarray(span.get_xy())[:, 0]


def _ring_alpha_bw(system, n):
    """(base + 2(n−1)·α_Simple, the per-step α of the LL protocol, B) of a one-node ring."""
    topo = group_topology(system, n)
    fixed = 8.4e-6 + 2 * (n - 1) * (topo.intra_latency_s + 2.8e-6)
    return fixed, topo.intra_latency_s, topo.intra_bw_bytes_per_s


def test_power_of_two_sizes_match_nccl_tests_range():
    assert list(power_of_two_sizes(8, 64)) == [8, 16, 32, 64]
    assert len(SIZES) == 32  # 8 B .. 16 GiB, like nccl-tests -b 8 -e 16G -f 2


def test_ring_balance_size_is_alpha_n_bandwidth(dgx_h100):
    # ring all-reduce: base + 2(n−1)α = 2(n−1)·S/(n·B)  <=>  S* = (base + 2(n−1)α)·n·B/(2(n−1))
    sweep = collective_sweep("all_reduce", dgx_h100, 8, SIZES, selection="fastest")
    fixed_s, _, bw = _ring_alpha_bw(dgx_h100, 8)
    expected = fixed_s * 8 * bw / 14
    assert sweep.best_balance_bytes == pytest.approx(expected, rel=1e-6)
    assert sweep.crossovers.empty
    ring = sweep.rows[sweep.rows["algorithm"] == "ring"]
    assert np.allclose(ring["busbw_GBps"], ring["algbw_GBps"] * 2 * 7 / 8)
    assert ring["best"].all()


def test_crossover_is_where_the_two_times_are_equal(dgx_h100, two_algorithms):
    sweep = collective_sweep("all_reduce", dgx_h100, 8, SIZES, selection="fastest")
    fixed_s, alpha_s, bw = _ring_alpha_bw(dgx_h100, 8)
    n = 8
    # ring: fixed + 2(n−1)S/(nB); flat: 0.2α + 2(n−1)S/(n·B/4)  => S× = (fixed − 0.2α) / (2(n−1)/n · 3/B)
    expected = (fixed_s - 2 * FLAT_ALPHA_FRACTION * alpha_s) / (2 * (n - 1) / n * 3 / bw)
    assert len(sweep.crossovers) == 1
    row = sweep.crossovers.iloc[0]
    assert (row["below"], row["above"]) == ("flat", "ring")
    assert row["size_bytes"] == pytest.approx(expected, rel=1e-6)
    t = {a: collective_cost("all_reduce", row["size_bytes"], dgx_h100, 8, algorithm=a, selection="fastest").time_s
         for a in ("ring", "flat")}
    assert t["ring"] == pytest.approx(t["flat"], rel=1e-6)
    assert describe_crossovers(sweep)[0].startswith("flat → ring at ")

    fig = plot_collective_sweep(sweep)
    lines = _artists(fig, "crossover")
    assert len(lines) == 2  # one per panel
    for line in lines:
        assert line.get_xdata()[0] == pytest.approx(expected, rel=1e-6)
    assert sorted(a.get_gid() for a in _artists(fig, "algo:")) == ["algo:flat", "algo:flat", "algo:ring", "algo:ring"]


def test_sweep_figure_axes_regions_and_measurements(dgx_h100):
    sweep = collective_sweep("all_reduce", dgx_h100, 8, SIZES, selection="fastest")
    measured = pd.DataFrame({"size_bytes": [2**20, 2**30], "time_us": [30.0, 3000.0], "busbw_GBps": [61.0, 360.0]})
    fig = plot_collective_sweep(sweep, measured, measured_label="nccl-tests")
    ax_time, ax_bw = fig.axes
    assert ax_time.get_xscale() == ax_time.get_yscale() == ax_bw.get_yscale() == "log"
    assert "bytes" in ax_time.get_xlabel() and "(s)" in ax_time.get_ylabel() and "GB/s" in ax_bw.get_ylabel()
    assert fig.get_suptitle() == "all_reduce on 8 ranks of dgx-h100"
    assert ax_time.get_legend() is not None
    assert [t.get_text() for t in ax_time.get_legend().get_texts()] == ["ring", "the library's choice", "nccl-tests"]
    (chosen,) = [a for a in ax_time.get_lines() if a.get_gid() == "choice"]  # the best rows, under the curves
    best = sweep.rows[sweep.rows["best"]].sort_values("size_bytes")
    assert np.allclose(chosen.get_ydata(), best["time_s"]) and chosen.get_zorder() < 2
    # the ring line holds the model's times; the markers hold the measured numbers (µs converted to s)
    (ring_time,) = [a for a in ax_time.get_lines() if a.get_gid() == "algo:ring"]
    assert np.allclose(ring_time.get_ydata(), sweep.rows["time_s"])
    (points,) = [a for a in ax_time.get_lines() if a.get_gid() == "measured:nccl-tests"]
    assert np.allclose(points.get_ydata(), [30e-6, 3000e-6])
    (bw_points,) = [a for a in ax_bw.get_lines() if a.get_gid() == "measured:nccl-tests"]
    assert np.allclose(bw_points.get_ydata(), [61.0, 360.0])
    # latency-bound shading ends exactly at the balance size
    (lat_span,) = [a for a in ax_time.patches if a.get_gid() == "region:latency"]
    xs = _span_x(lat_span)
    assert xs.max() == pytest.approx(sweep.best_balance_bytes, rel=1e-9)
    assert xs.min() == pytest.approx(8.0)


def test_size_and_time_tick_labels():
    assert format_size_tick(8) == "8 B"
    assert format_size_tick(4096) == "4 KiB"
    assert format_size_tick(16 * 2**30) == "16 GiB"
    assert format_size_tick(1.5 * 2**20) == "1.5 MiB"
    assert format_time_tick(1e-5) == "10 µs"
    assert format_time_tick(2.5e-3) == "2.5 ms"
    assert format_time_tick(3.0) == "3 s"


def test_scaling_records_and_figure(dgx_h100):
    slow = load_system_with_network("dgx-h100", "eth-100g:1")
    counts = [8, 16, 64, 256]
    records = collective_scaling("all_reduce", 2**30, {"NDR x8": dgx_h100, "100GbE x1": slow}, counts)
    assert len(records) == 8
    one = records[(records["system"] == "NDR x8") & (records["num_gpus"] == 64)].iloc[0]
    assert one["num_nodes"] == 8
    assert one["time_s"] == pytest.approx(float(collective_cost("all_reduce", 2**30, dgx_h100, 64).time_s))
    # the slow network is never faster, and inside one node the two are identical
    fast = records[records["system"] == "NDR x8"].set_index("num_gpus")["time_s"]
    slow_t = records[records["system"] == "100GbE x1"].set_index("num_gpus")["time_s"]
    assert slow_t[8] == pytest.approx(fast[8])
    assert (slow_t[[16, 64, 256]] > fast[[16, 64, 256]]).all()

    fig = plot_scaling(records, title="all_reduce 1 GiB")
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "GPUs" and ax.get_ylabel() == "time (s)"
    lines = _artists(fig, "system:")
    assert len(lines) == 2
    assert list(lines[0].get_xdata()) == counts
    assert ax.get_legend() is not None and ax.get_title() == "all_reduce 1 GiB"


def test_plot_input_errors_name_the_missing_column():
    with pytest.raises(PlotInputError, match="num_gpus"):
        plot_scaling([{"system": "x", "time_s": 1.0}])
    with pytest.raises(PlotInputError, match="no records"):
        plot_scaling(pd.DataFrame(columns=["system", "num_gpus", "time_s"]))
