"""α-β fitter: recovery from synthetic data, piecewise regimes, uncertainty, degenerate input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from commmodel.calibrate.fit import band_masks, fit_alpha_beta, t_quantile_975
from commmodel.calibrate.forms import latency_steps, wire_fraction
from commmodel.errors import CalibrationError

SIZES = 2.0 ** np.arange(3, 31)  # 8 B .. 1 GiB, the nccl-tests -b 8 -e 1G -f 2 sweep


def ring_all_reduce_s(size, n, alpha_s, bw):
    """Ring all-reduce closed form: 2(n−1)·α + 2(n−1)/n·S/B (Patarasuk & Yuan 2009)."""
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * size / bw


def noisy(times, rel_sigma, seed):
    rng = np.random.default_rng(seed)
    return times * (1.0 + rel_sigma * rng.standard_normal(times.shape))


@pytest.mark.parametrize("n, alpha_s, bw", [(8, 5e-6, 100e9), (2, 12e-6, 4e9), (16, 20e-6, 45e9)])
def test_recovers_alpha_and_bandwidth_within_5_percent(n, alpha_s, bw):
    times = noisy(ring_all_reduce_s(SIZES, n, alpha_s, bw), 0.03, seed=n)
    fit = fit_alpha_beta(SIZES, times, "all_reduce", n)
    assert len(fit.segments) == 1
    seg = fit.segments[0]
    assert seg.alpha_s == pytest.approx(alpha_s, rel=0.05)
    assert seg.bw_bytes_per_s == pytest.approx(bw, rel=0.05)
    assert seg.alpha_ci_s[0] <= alpha_s <= seg.alpha_ci_s[1]
    assert seg.bw_ci_bytes_per_s[0] <= bw <= seg.bw_ci_bytes_per_s[1]
    assert fit.r2 > 0.98


@pytest.mark.parametrize("op, n, steps, wire", [
    ("all_gather", 8, 7, 7 / 8), ("reduce_scatter", 4, 3, 3 / 4), ("broadcast", 8, 7, 1.0),
    ("send_recv", 2, 1, 1.0), ("all_to_all", 4, 3, 3 / 4),
])
def test_recovery_for_other_primitives(op, n, steps, wire):
    alpha_s, bw = 3e-6, 20e9
    assert latency_steps(op, "ring", n) == steps
    assert wire_fraction(op, n) == pytest.approx(wire)
    times = noisy(steps * alpha_s + wire * SIZES / bw, 0.02, seed=7)
    seg = fit_alpha_beta(SIZES, times, op, n, algorithm="ring").segments[-1]
    assert seg.alpha_s == pytest.approx(alpha_s, rel=0.05)
    assert seg.bw_bytes_per_s == pytest.approx(bw, rel=0.05)


@settings(max_examples=25, deadline=None)
@given(alpha_us=st.floats(1.0, 500.0), bw_gbps=st.floats(0.5, 900.0), n=st.sampled_from([2, 4, 8, 16, 64]),
       seed=st.integers(0, 10_000))
def test_recovery_property(alpha_us, bw_gbps, n, seed):
    alpha_s, bw = alpha_us * 1e-6, bw_gbps * 1e9
    # The sweep must become bandwidth-bound: at 1 GiB the bandwidth term is ≥ 10x the latency term (at 4x, 2% noise
    # on the few bandwidth-bound points moves the fitted bandwidth by more than 5%: alpha 157 us, 203 GB/s, 8 ranks).
    assume(2 * (n - 1) / n * SIZES[-1] / bw >= 10 * 2 * (n - 1) * alpha_s)
    times = noisy(ring_all_reduce_s(SIZES, n, alpha_s, bw), 0.02, seed)
    fit = fit_alpha_beta(SIZES, times, "all_reduce", n, max_segments=1)
    assert fit.segments[0].alpha_s == pytest.approx(alpha_s, rel=0.05)
    assert fit.segments[0].bw_bytes_per_s == pytest.approx(bw, rel=0.05)


def test_noise_free_data_is_fitted_exactly():
    times = ring_all_reduce_s(SIZES, 8, 2e-6, 300e9)
    fit = fit_alpha_beta(SIZES, times, "all_reduce", 8)
    assert fit.segments[0].alpha_s == pytest.approx(2e-6, rel=1e-9)
    assert fit.segments[0].bw_bytes_per_s == pytest.approx(300e9, rel=1e-9)
    assert np.max(np.abs(fit.relative_residuals)) < 1e-9


def test_protocol_change_is_fitted_piecewise():
    # LL-like regime up to 64 KiB (α 1 µs, 50 GB/s), Simple-like above (α 4 µs, 200 GB/s): NCCL's protocol switch.
    small = SIZES <= 64 * 2**10
    times = np.where(small, ring_all_reduce_s(SIZES, 8, 1e-6, 50e9), ring_all_reduce_s(SIZES, 8, 4e-6, 200e9))
    fit = fit_alpha_beta(SIZES, noisy(times, 0.02, seed=3), "all_reduce", 8)
    assert len(fit.segments) == 2
    first, last = fit.segments
    assert first.size_max_bytes == 64 * 2**10 and last.size_min_bytes == 128 * 2**10
    assert first.alpha_s == pytest.approx(1e-6, rel=0.05)
    assert last.bw_bytes_per_s == pytest.approx(200e9, rel=0.05)
    assert last.alpha_s == pytest.approx(4e-6, rel=0.10)
    assert fit.bic_gain >= 10
    one_line = fit_alpha_beta(SIZES, noisy(times, 0.02, seed=3), "all_reduce", 8, max_segments=1)
    assert fit.r2 > one_line.r2


def test_one_regime_is_not_split_by_noise():
    for seed in range(5):
        times = noisy(ring_all_reduce_s(SIZES, 8, 5e-6, 100e9), 0.05, seed)
        assert len(fit_alpha_beta(SIZES, times, "all_reduce", 8).segments) == 1


def test_relative_weights_let_small_messages_count():
    # Unweighted least squares would put the intercept near 0 (dominated by 1 GiB points); relative weights keep α.
    times = noisy(ring_all_reduce_s(SIZES, 4, 30e-6, 10e9), 0.01, seed=1)
    seg = fit_alpha_beta(SIZES, times, "all_reduce", 4, max_segments=1).segments[0]
    assert seg.alpha_s == pytest.approx(30e-6, rel=0.03)


def test_bands_and_prediction():
    masks = band_masks(np.array([8.0, 65536.0, 65537.0, 64 * 2**20 - 1, 64 * 2**20]))
    assert masks["<=64KiB"].tolist() == [True, True, False, False, False]
    assert masks["64KiB-64MiB"].tolist() == [False, False, True, True, False]
    assert masks[">=64MiB"].tolist() == [False, False, False, False, True]
    times = ring_all_reduce_s(SIZES, 8, 2e-6, 300e9)
    fit = fit_alpha_beta(SIZES, times, "all_reduce", 8)
    counts = {b.band: b.num_points for b in fit.bands}
    assert counts == {"<=64KiB": 14, "64KiB-64MiB": 9, ">=64MiB": 5}
    assert float(fit.predict_s(1e6)) == pytest.approx(float(ring_all_reduce_s(1e6, 8, 2e-6, 300e9)))


def test_t_quantiles():
    assert t_quantile_975(1) == pytest.approx(12.706)
    assert t_quantile_975(10) == pytest.approx(2.228)
    assert t_quantile_975(30) == pytest.approx(2.042)
    assert t_quantile_975(60) == pytest.approx(2.000, abs=0.002)  # A&S table 26.10
    assert t_quantile_975(120) == pytest.approx(1.980, abs=0.002)
    assert math.isinf(t_quantile_975(0))


def test_tree_and_in_network_step_counts():
    assert latency_steps("all_reduce", "tree", 16) == 8  # 2·⌈log₂16⌉
    assert latency_steps("broadcast", "tree", 5) == 3
    assert latency_steps("all_reduce", "nvls", 8) == 2
    assert latency_steps("all_reduce", "auto", 8) == 14  # auto uses ring's 2(n−1)
    # NCCL's own spellings (NCCL_ALGO=NVLSTree / CollNetDirect) reach the registry entry that models them
    assert latency_steps("all_reduce", "NVLSTree", 8) == 2
    assert latency_steps("all_reduce", "nvls_tree", 8) == 2
    assert latency_steps("all_reduce", "CollNet-Direct", 8) == 2
    assert latency_steps("all_gather", "pairwise", 8) == 7  # no step form of its own: counted like a ring


def test_registry_entries_carry_estimate_and_step_form():
    from commmodel.collectives.algorithms import ALGORITHMS

    estimated = {name for name, a in ALGORITHMS.items() if a.nccl_estimate is not None}
    assert estimated == {"ring", "tree", "nvls", "nvls_tree"}  # tuning.cc's modelled algorithms
    assert all(ALGORITHMS[name].nccl for name in estimated)
    formed = {name for name, a in ALGORITHMS.items() if a.step_form is not None}
    assert formed == {"ring", "tree", "nvls", "nvls_tree", "sharp"}


# ------------------------------------------------------------------ degenerate input


def test_one_size_is_an_error():
    with pytest.raises(CalibrationError, match=r"only 1 distinct message size.*--min-size"):
        fit_alpha_beta(np.full(5, 1024.0), np.full(5, 1e-5) * [1, 1.1, 0.9, 1.05, 1], "all_reduce", 2)


def test_two_sizes_is_an_error():
    with pytest.raises(CalibrationError, match="only 2 distinct.*none ≥ 64 MiB"):
        fit_alpha_beta(np.array([8.0, 16.0, 16.0]), np.array([1e-5, 2e-5, 2e-5]), "all_reduce", 2)


def test_two_sizes_with_one_large_give_a_bandwidth_only_fit():
    """1 KiB and 1 GiB on 8 ranks (the mscclpp NDmv4 shape): B = 2·7/8 × 1 GiB / t(1 GiB), no latency fitted."""
    sizes = np.array([1024.0, 2.0**30])
    times = np.array([17e-6, 8.1186e-3])
    fit = fit_alpha_beta(sizes, times, "all_reduce", 8)
    assert fit.bandwidth_only
    assert len(fit.segments) == 1 and fit.segments[0].intercept_s == 0.0
    assert fit.bandwidth_segment.bw_bytes_per_s == pytest.approx(1.75 * 2**30 / 8.1186e-3, rel=1e-9)  # 231.4 GB/s
    assert fit.bandwidth_segment.bw_ci_bytes_per_s == (0.0, math.inf)  # one large row: no interval


def test_a_bandwidth_only_fit_of_two_large_sizes_takes_the_median_and_a_student_t_interval():
    """8 and 16 GiB (the OCI MI355X shape): b = mean of t/S; half width t(0.975, 1) = 12.706 × s / √2."""
    sizes = np.array([2.0**33, 2.0**34])
    per_byte = np.array([1.0e-11, 1.1e-11])
    fit = fit_alpha_beta(sizes, sizes * per_byte, "all_reduce", 8)
    half = 12.706 * float(np.std(per_byte, ddof=1)) / math.sqrt(2)
    assert fit.bandwidth_segment.slope_s_per_byte == pytest.approx(1.05e-11)
    assert fit.bandwidth_segment.slope_ci_s_per_byte == pytest.approx((1.05e-11 - half, 1.05e-11 + half))


def test_all_equal_times_is_an_error():
    with pytest.raises(CalibrationError, match=r"all 28 times equal.*bandwidth cannot be fitted"):
        fit_alpha_beta(SIZES, np.full(SIZES.shape, 1.5e-5), "all_reduce", 8, label="all_reduce on 8 ranks")


def test_negative_slope_is_an_error():
    times = 1e-3 - SIZES / SIZES.max() * 5e-4
    with pytest.raises(CalibrationError, match=r"time falls as size grows.*slope"):
        fit_alpha_beta(SIZES, times, "all_reduce", 8)


def test_unresolved_bandwidth_is_an_error():
    sizes = 2.0 ** np.arange(3, 13)  # 8 B .. 4 KiB: all latency-bound
    times = noisy(np.full(sizes.shape, 20e-6) + sizes / 400e9, 0.05, seed=2)
    with pytest.raises(CalibrationError, match="bandwidth|slope"):
        fit_alpha_beta(sizes, times, "all_reduce", 8)


def test_errors_name_the_group():
    with pytest.raises(CalibrationError, match="^broadcast on 4 ranks"):
        fit_alpha_beta(np.array([8.0]), np.array([1e-5]), "broadcast", 4, label="broadcast on 4 ranks")


def test_non_positive_times_are_dropped():
    times = ring_all_reduce_s(SIZES, 8, 2e-6, 300e9)
    times[3] = 0.0
    times[5] = np.nan
    fit = fit_alpha_beta(SIZES, times, "all_reduce", 8)
    assert len(fit.sizes_bytes) == len(SIZES) - 2


def test_one_group_measured_in_two_dtypes_is_refused_not_averaged():
    """`calibrate run --resume --dtype float16` into a float32 file: the same op and ranks in two element types (gloo
    reduced fp16 3-10x slower on this machine) cannot be one α-β line; nccl-tests' 'float' and torch's 'float32' are
    one type."""
    from commmodel.calibrate.groups import fit_measurements


    rows = [{"op": "all_reduce", "size_bytes": 2 ** k, "num_ranks": 2, "num_nodes": 1, "algorithm": "auto",
             "dtype": dtype, "time_s_median": 2e-5 + 2 ** k / 1e9} for k in range(10, 24) for dtype in ("float32",)]
    rows += [{**rows[0], "dtype": "float"}]
    assert fit_measurements(rows)  # float and float32: one type
    mixed = rows + [{**row, "dtype": "float16", "time_s_median": 3 * row["time_s_median"]} for row in rows[:5]]
    with pytest.raises(CalibrationError, match=r"rows measured in 2 dtypes \(float32 15, float16 5 rows\)"):
        fit_measurements(mixed)
