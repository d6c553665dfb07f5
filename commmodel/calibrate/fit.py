"""α-β fits of measured collective times: weighted least squares, piecewise regimes, uncertainty.

Model per regime: t(S) = a + b·S, with a = steps(n)·α and b = wire(n)/B (see :mod:`forms`).

- **Weights**: the residual of each point is relative, r = (t − a − b·S)/t (weights 1/t²), so an
  8-byte point at 10 µs counts as much as a 16 GiB point at 60 ms; plain least squares would let
  the largest messages decide everything. Each regime's line is a Huber IRLS fit
  (:mod:`commmodel.calibrate.robust_line`); this module searches the regimes and reports them.
- **Constraints**: a ≥ 0 and b ≥ 0. A regime whose slope comes out at zero is latency-bound (B not
  resolved, reported as ∞); only the smallest-size regime may be so.
- **Regimes**: NCCL switches protocol (LL → LL128 → Simple) and algorithm with size, so one line
  rarely fits 8 B–16 GiB. Splits between sizes are accepted greedily while they lower the Bayesian
  information criterion BIC = m·ln(RSS/m) + p·ln(m) by at least 14 (see ``BIC_MIN_GAIN``),
  up to ``max_segments`` regimes of at least 4 points each.
- **Uncertainty**: 95% confidence intervals from the weighted covariance σ²(XᵀWX)⁻¹ with Student-t
  quantiles; R² is the weighted (relative-error) coefficient of determination; residuals are
  summarised per size band (≤64 KiB, 64 KiB–64 MiB, ≥64 MiB: the bands of DESIGN §9).

Degenerate input (fewer than 3 sizes, all times equal, a negative or unresolved slope) raises
:class:`~commmodel.errors.CalibrationError` naming the group and what to measure instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from commmodel.calibrate.forms import latency_steps, wire_fraction
from commmodel.calibrate.robust_line import HUBER_C, huber_lstsq, relative_line_fit
from commmodel.errors import CalibrationError
from commmodel.size_bands import BAND_LABELS, LARGE_MIN_BYTES, SMALL_MAX_BYTES, band_codes

__all__ = ["BANDS", "BIC_MIN_GAIN", "HUBER_C", "LARGE_MIN_BYTES", "MIN_SEGMENT_POINTS", "SMALL_MAX_BYTES", "TUKEY_C",
           "BandStats", "FitResult", "Segment", "band_masks", "fit_alpha_beta", "t_quantile_975"]

BIC_MIN_GAIN = 14.0
"""BIC improvement a split must bring. Kass & Raftery (1995) call > 10 very strong evidence; the greedy
search takes the best of ~20 split positions, which inflates the gain under pure noise: over 200
simulated one-regime sweeps (28 sizes, 1-10% noise) the best split gained 7.6 at the 99th percentile
and 11.3 at most, while real protocol changes in the published tables gain 17-70."""
MIN_SEGMENT_POINTS = 4
"""Fewest points in one regime (two parameters plus two degrees of freedom: one outlier cannot make a regime)."""
BANDS = BAND_LABELS
"""Labels of the size bands (:data:`commmodel.size_bands.BAND_LABELS`, from the edges) in residual summaries."""
TUKEY_C = 4.685
"""Rejection point of Tukey's biweight, same 95% efficiency (Beaton & Tukey 1974): residuals beyond 4.685 robust
scales, in runs shorter than a regime, count as gross outliers in the regime search's loss (see _outlier_clip)."""


def band_masks(sizes_bytes: np.ndarray) -> dict[str, np.ndarray]:
    """Boolean masks of the three size bands."""
    codes = band_codes(sizes_bytes)
    return {label: codes == code for code, label in enumerate(BANDS)}


# Two-sided 95% Student-t quantiles t(0.975, dof) for dof 1..30 (Abramowitz & Stegun, Table 26.10).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile_975(dof: int) -> float:
    """t(0.975, dof): the table up to 30, then the Cornish-Fisher series (A&S 26.7.5) around z = 1.96."""
    if dof < 1:
        return math.inf
    if dof <= len(_T975):
        return _T975[dof - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


@dataclass(frozen=True)
class Segment:
    """One regime t = a + b·S over a size range, with α and B and their 95% intervals."""

    size_min_bytes: float
    """Smallest size in the regime."""
    size_max_bytes: float
    """Largest size in the regime."""
    num_points: int
    """Points fitted."""
    intercept_s: float
    """a: time at S → 0."""
    slope_s_per_byte: float
    """b: extra time per byte of S."""
    intercept_ci_s: tuple[float, float]
    """95% interval of a."""
    slope_ci_s_per_byte: tuple[float, float]
    """95% interval of b."""
    alpha_s: float
    """α = a / steps: latency per step."""
    alpha_ci_s: tuple[float, float]
    """95% interval of α."""
    bw_bytes_per_s: float
    """B = wire / b: the bus bandwidth approached for large S (inf when the regime is latency-bound)."""
    bw_ci_bytes_per_s: tuple[float, float]
    """95% interval of B (upper end inf when b's interval reaches 0)."""
    clamped: str
    """"" if both parameters are free; "intercept" or "slope" when the constraint ≥ 0 was active."""

    def predict_s(self, size_bytes: np.ndarray | float) -> np.ndarray:
        """a + b·S."""
        return self.intercept_s + self.slope_s_per_byte * np.asarray(size_bytes, dtype=float)


@dataclass(frozen=True)
class BandStats:
    """Relative residuals |model − measured| / measured in one size band."""

    band: str
    """Band name (<=64KiB, 64KiB-64MiB, >=64MiB)."""
    num_points: int
    """Points in the band."""
    median_abs_rel_err: float
    """Median of |r| (nan when empty)."""
    max_abs_rel_err: float
    """Largest |r| (nan when empty)."""


@dataclass(frozen=True)
class FitResult:
    """The fit of one (op, algorithm, protocol, group size, nodes) group."""

    label: str
    """Human description, e.g. "all_reduce on 8 ranks (1 node, auto)"."""
    op: str
    """Canonical primitive."""
    algorithm: str
    """Algorithm recorded with the measurements (auto when the library chose)."""
    num_ranks: int
    """Ranks in the measured communicator."""
    steps: float
    """Latency steps used to turn a into α."""
    wire: float
    """busbw factor used to turn b into B."""
    segments: tuple[Segment, ...]
    """Regimes from small to large sizes."""
    sizes_bytes: np.ndarray
    """Measured sizes, ascending."""
    times_s: np.ndarray
    """Measured times, in the same order."""
    r2: float
    """Weighted R² of the chosen (piecewise) fit."""
    bands: tuple[BandStats, ...]
    """Residual summary per size band."""
    bic_gain: float
    """BIC of one line minus BIC of the chosen fit (0 for one regime)."""
    bandwidth_only: bool = False
    """True when the sweep has fewer than 3 sizes: only B is fitted, from the rows ≥ 64 MiB (α is not, a = 0)."""

    @property
    def latency_segment(self) -> Segment:
        """The smallest-size regime (sets the latency α)."""
        return self.segments[0]

    @property
    def bandwidth_segment(self) -> Segment:
        """The largest-size regime (sets the bandwidth B)."""
        return self.segments[-1]

    def predict_s(self, size_bytes: np.ndarray | float) -> np.ndarray:
        """Piecewise prediction: each size uses the regime it falls in (geometric midpoints between regimes)."""
        size = np.asarray(size_bytes, dtype=float)
        out = self.segments[0].predict_s(size)
        for low, high in zip(self.segments[:-1], self.segments[1:]):
            boundary = math.sqrt(max(low.size_max_bytes, 1.0) * max(high.size_min_bytes, 1.0))
            out = np.where(size >= boundary, high.predict_s(size), out)
        return out

    @property
    def relative_residuals(self) -> np.ndarray:
        """(model − measured) / measured per point."""
        return (self.predict_s(self.sizes_bytes) - self.times_s) / self.times_s


def _segment(sizes: np.ndarray, times: np.ndarray, steps: float, wire: float,
             clip: np.ndarray | float = math.inf) -> tuple[Segment, float]:
    line = relative_line_fit(sizes, times, clip)
    dof = max(len(times) - (1 if line.clamped else 2), 1)
    q = t_quantile_975(dof)
    da = q * math.sqrt(max(line.cov[0, 0], 0.0))
    db = q * math.sqrt(max(line.cov[1, 1], 0.0))
    a_ci = (max(line.a - da, 0.0), line.a + da)
    b_ci = (max(line.b - db, 0.0), line.b + db)
    bw = wire / line.b if line.b > 0 else math.inf
    bw_ci = (wire / b_ci[1] if b_ci[1] > 0 else math.inf, wire / b_ci[0] if b_ci[0] > 0 else math.inf)
    seg = Segment(
        size_min_bytes=float(sizes.min()), size_max_bytes=float(sizes.max()), num_points=len(sizes),
        intercept_s=line.a, slope_s_per_byte=line.b, intercept_ci_s=a_ci, slope_ci_s_per_byte=b_ci,
        alpha_s=line.a / steps, alpha_ci_s=(a_ci[0] / steps, a_ci[1] / steps),
        bw_bytes_per_s=bw, bw_ci_bytes_per_s=bw_ci, clamped=line.clamped,
    )
    return seg, line.rss


def _outlier_clip(residuals: np.ndarray, scale: float) -> np.ndarray:
    """Per-point cap on the regime search's squared residual: TUKEY_C·scale for isolated outliers, else ∞.

    A point beyond TUKEY_C robust scales of the one-line fit is an outlier when it sits in a run of fewer than
    ``MIN_SEGMENT_POINTS`` consecutive sizes beyond the line on the same side: a straggler or two. A longer run is
    a regime the line misses (a protocol change), and its residuals count in full so the split still pays.
    """
    limit = TUKEY_C * scale
    side = np.where(residuals > limit, 1, np.where(residuals < -limit, -1, 0))
    clip = np.full(residuals.shape, math.inf)
    start = 0
    for i in range(1, len(side) + 1):
        if i == len(side) or side[i] != side[start]:
            if side[start] != 0 and i - start < MIN_SEGMENT_POINTS:
                clip[start:i] = limit
            start = i
    return clip


def _bic(rss: float, num_points: int, num_segments: int) -> float:
    params = 3 * num_segments - 1  # a, b per regime + one breakpoint between regimes
    return num_points * math.log(max(rss, 1e-12 * num_points) / num_points) + params * math.log(num_points)


def _split_candidates(sizes: np.ndarray) -> list[int]:
    """Indices i where a split [:i] | [i:] falls between two distinct sizes and leaves ≥ 3 points each side."""
    out = []
    for i in range(MIN_SEGMENT_POINTS, len(sizes) - MIN_SEGMENT_POINTS + 1):
        if sizes[i] > sizes[i - 1] and len(np.unique(sizes[:i])) >= 2 and len(np.unique(sizes[i:])) >= 2:
            out.append(i)
    return out


def _segments_for(bounds: list[int], sizes: np.ndarray, times: np.ndarray, steps: float, wire: float,
                  clip: np.ndarray | None = None) -> tuple[list[Segment], float] | None:
    segs, total = [], 0.0
    for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        seg, rss = _segment(sizes[lo:hi], times[lo:hi], steps, wire, math.inf if clip is None else clip[lo:hi])
        if k > 0 and seg.slope_s_per_byte <= 0:
            return None  # only the smallest regime may be latency-bound
        segs.append(seg)
        total += rss
    return segs, total


def _bands(sizes: np.ndarray, residuals: np.ndarray) -> tuple[BandStats, ...]:
    out = []
    for name, mask in band_masks(sizes).items():
        vals = np.abs(residuals[mask])
        out.append(BandStats(name, int(mask.sum()), float(np.median(vals)) if vals.size else math.nan,
                             float(vals.max()) if vals.size else math.nan))
    return tuple(out)


def bandwidth_only_fit(sizes: np.ndarray, times: np.ndarray, op: str, num_ranks: int, algorithm: str,
                       label: str) -> FitResult:
    """B alone from a sweep of fewer than 3 sizes: b = median t/S over the rows ≥ 64 MiB, a = 0 (not fitted).

    At ≥ 64 MiB the latency is < 1% of the time on every shipped tier (≤ 0.2 ms of ≥ 20 ms at ≤ 3.2 GB/s busbw),
    so t/S is the bandwidth term; the calibration keeps the profile's latency (:mod:`apply` finds no latency rows)
    and solves the efficiency against the full model. The slope's 95% interval is Student-t over the large rows'
    t/S, unresolved (0, ∞) with one row.
    """
    large = sizes >= LARGE_MIN_BYTES
    per_byte = times[large] / sizes[large]
    slope = float(np.median(per_byte))
    if per_byte.size > 1:
        half = t_quantile_975(per_byte.size - 1) * float(np.std(per_byte, ddof=1)) / math.sqrt(per_byte.size)
        slope_ci = (max(slope - half, 0.0), slope + half)
    else:
        slope_ci = (0.0, math.inf)
    wire = wire_fraction(op, num_ranks)
    seg = Segment(
        size_min_bytes=float(sizes[large].min()), size_max_bytes=float(sizes.max()), num_points=int(large.sum()),
        intercept_s=0.0, slope_s_per_byte=slope, intercept_ci_s=(0.0, 0.0), slope_ci_s_per_byte=slope_ci,
        alpha_s=0.0, alpha_ci_s=(0.0, 0.0), bw_bytes_per_s=wire / slope,
        bw_ci_bytes_per_s=(wire / slope_ci[1], wire / slope_ci[0] if slope_ci[0] > 0 else math.inf),
        clamped="intercept",
    )
    residuals = (seg.predict_s(sizes[large]) - times[large]) / times[large]
    return FitResult(label=label, op=op, algorithm=algorithm, num_ranks=int(num_ranks),
                     steps=latency_steps(op, algorithm, num_ranks), wire=wire, segments=(seg,), sizes_bytes=sizes,
                     times_s=times, r2=math.nan, bands=_bands(sizes[large], residuals), bic_gain=0.0,
                     bandwidth_only=True)


def fit_alpha_beta(sizes_bytes: np.ndarray, times_s: np.ndarray, op: str, num_ranks: int,
                   algorithm: str = "auto", max_segments: int = 3, label: str | None = None) -> FitResult:
    """Fit t = steps·α + wire·S/B per regime to measured (size, time) points of one group."""
    label = label or f"{op} on {num_ranks} ranks ({algorithm})"
    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_s, dtype=float)
    keep = np.isfinite(sizes) & np.isfinite(times) & (times > 0) & (sizes > 0)
    sizes, times = sizes[keep], times[keep]
    order = np.argsort(sizes, kind="stable")
    sizes, times = sizes[order], times[order]
    distinct = np.unique(sizes)
    if len(distinct) < 3:
        if np.any(distinct >= LARGE_MIN_BYTES) and np.all(times > 0):
            return bandwidth_only_fit(sizes, times, op, num_ranks, algorithm, label)
        shown = ", ".join(f"{s:g} B" for s in distinct) or "none"
        raise CalibrationError(
            f"{label}: only {len(distinct)} distinct message size(s) ({shown}), none ≥ 64 MiB; α and B need a sweep "
            f"of at least 3 sizes spanning latency- and bandwidth-bound messages (B alone needs one size ≥ 64 MiB), "
            f"e.g. --min-size 8 --max-size 64MiB --factor 2"
        )
    if np.ptp(times) == 0:
        raise CalibrationError(
            f"{label}: all {len(times)} times equal ({times[0]:.4g} s) from {sizes[0]:g} to {sizes[-1]:g} B, so the "
            f"bandwidth cannot be fitted; check the timer and sweep up to sizes where time grows "
            f"(e.g. --max-size 256MiB)"
        )
    steps = latency_steps(op, algorithm, num_ranks)
    wire = wire_fraction(op, num_ranks)
    if wire <= 0:
        raise CalibrationError(f"{label}: {op} moves no payload, so there is no bandwidth to fit")
    scale = sizes.max()
    design = np.column_stack([1 / times, sizes / scale / times])
    free, _w, noise = huber_lstsq(design, np.ones_like(times))
    clip = _outlier_clip(np.ones_like(times) - design @ free, noise)
    if free[1] <= 0:
        raise CalibrationError(
            f"{label}: time falls as size grows (fitted slope {free[1] / scale:.3g} s/B ≤ 0), so no bandwidth can be "
            f"fitted; the sweep is too noisy or too small: raise --iters, or extend --max-size"
        )
    bounds = [0, len(sizes)]
    best = _segments_for(bounds, sizes, times, steps, wire, clip)
    assert best is not None
    segments, rss = best
    single_bic = best_bic = _bic(rss, len(sizes), 1)
    while len(bounds) - 1 < max_segments:
        trial_best = None
        for k in range(len(bounds) - 1):
            lo, hi = bounds[k], bounds[k + 1]
            for cut in _split_candidates(sizes[lo:hi]):
                trial = sorted(bounds + [lo + cut])
                fitted = _segments_for(trial, sizes, times, steps, wire, clip)
                if fitted is None:
                    continue
                bic = _bic(fitted[1], len(sizes), len(trial) - 1)
                if trial_best is None or bic < trial_best[0]:
                    trial_best = (bic, trial, fitted[0])
        if trial_best is None or best_bic - trial_best[0] < BIC_MIN_GAIN:
            break
        best_bic, bounds, segments = trial_best
    last = segments[-1]
    if last.slope_s_per_byte <= 0 or last.slope_ci_s_per_byte[0] <= 0:
        raise CalibrationError(
            f"{label}: the largest sizes ({last.size_min_bytes:g}-{last.size_max_bytes:g} B) do not resolve a "
            f"bandwidth (slope interval reaches 0); sweep larger messages (--max-size) or raise --iters"
        )
    result = FitResult(
        label=label, op=op, algorithm=algorithm, num_ranks=int(num_ranks), steps=steps, wire=wire,
        segments=tuple(segments), sizes_bytes=sizes, times_s=times, r2=math.nan, bands=(),
        bic_gain=single_bic - best_bic,
    )
    residuals = result.relative_residuals
    weighted_mean = float(np.sum(times / times**2) / np.sum(1 / times**2))
    ss_tot = float(np.sum(((times - weighted_mean) / times) ** 2))
    r2 = 1.0 - float(residuals @ residuals) / ss_tot if ss_tot > 0 else math.nan
    return FitResult(**{**result.__dict__, "r2": r2, "bands": _bands(sizes, residuals)})
