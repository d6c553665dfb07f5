"""One robust line t = a + b·S through measured collective times (the α-β fit of one regime).

Relative residuals r = (t − a − b·S)/t, Huber M-estimation by iteratively reweighted least squares
(IRLS) with a MAD scale, a ≥ 0 and b ≥ 0 by refitting the other coefficient alone when one comes out
negative. :mod:`commmodel.calibrate.fit` searches the regimes and reports confidence intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

HUBER_C = 1.345
"""Huber weight tuning constant in units of the robust scale: 95% asymptotic efficiency at Gaussian noise
(Huber 1964; Holland & Welsch 1977, 'Robust regression using iteratively reweighted least-squares')."""
MAD_TO_SIGMA = 1.4826
"""1/Φ⁻¹(3/4): the median absolute deviation of Gaussian noise times this is its standard deviation."""
SCALE_FLOOR = 1e-4
"""Smallest robust scale (a 0.01% relative residual): below any timer's noise, keeps noise-free data unweighted."""
IRLS_MAX_ITERATIONS = 50
"""Reweighting rounds of the Huber fit (it converges in < 20 on sweeps with a few gross outliers)."""


@dataclass(frozen=True)
class RobustLine:
    """One fitted regime t = a + b·S: intercept a (s), slope b (s/B), their covariance, the search loss."""

    a: float
    """Intercept (s), ≥ 0."""
    b: float
    """Slope (s/B), ≥ 0."""
    cov: np.ndarray
    """2×2 covariance of (a, b) in those units (rows/columns of a clamped coefficient are 0)."""
    rss: float
    """The regime search's loss Σ min(r², clip²) over relative residuals r."""
    clamped: str
    """Empty when both coefficients came out free, else the one held at 0: "intercept" or "slope"."""


def huber_lstsq(design: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Huber M-estimate of ``design @ coef ≈ target`` by iteratively reweighted least squares.

    Returns (coef, robustness weights in (0, 1], robust scale s). Weights w = min(1, c·s/|r|) with
    c = ``HUBER_C`` and s the MAD scale of the residuals, re-estimated every iteration.
    """
    coef, *_ = np.linalg.lstsq(design, target, rcond=None)
    weights = np.ones_like(target)
    scale = SCALE_FLOOR
    for _ in range(IRLS_MAX_ITERATIONS):
        residual = target - design @ coef
        scale = max(MAD_TO_SIGMA * float(np.median(np.abs(residual - np.median(residual)))), SCALE_FLOOR)
        weights = np.minimum(1.0, HUBER_C * scale / np.maximum(np.abs(residual), 1e-300))
        root = np.sqrt(weights)
        new, *_ = np.linalg.lstsq(design * root[:, None], target * root, rcond=None)
        if np.allclose(new, coef, rtol=1e-10, atol=1e-14):
            coef = new
            break
        coef = new
    return coef, weights, scale


def relative_line_fit(sizes: np.ndarray, times: np.ndarray, clip: np.ndarray | float = math.inf) -> RobustLine:
    """Relative-error robust least squares of t = a + b·S with a, b ≥ 0 (sizes scaled for conditioning).

    ``rss`` is the loss Σ min(r², clip²) that the regime search compares (clip is per point: finite only for the
    isolated outliers :func:`commmodel.calibrate.fit._outlier_clip` found).
    """
    scale = float(sizes.max()) or 1.0
    x = sizes / scale
    w = 1.0 / times
    design = np.column_stack([w, x * w])
    target = np.ones_like(times)
    coef, robust_w, _s = huber_lstsq(design, target)
    a, bs = float(coef[0]), float(coef[1])
    clamped = ""
    if a < 0:
        clamped, a = "intercept", 0.0
        col = design[:, 1]
        bs = float(huber_lstsq(col[:, None], target)[0][0])
    if bs < 0:
        clamped, bs = "slope", 0.0
        col = design[:, 0]
        a = float(huber_lstsq(col[:, None], target)[0][0])
    residual = target - design @ np.array([a, bs])
    rss = float(np.sum(np.minimum(residual**2, clip**2)))
    dof = max(len(times) - (2 if not clamped else 1), 1)
    # Covariance of the IRLS estimate: σ²(XᵀWX)⁻¹ with the robustness weights and σ² their weighted residual variance.
    sigma2 = float(np.sum(robust_w * residual**2)) / dof
    weighted = design * np.sqrt(robust_w)[:, None]
    try:
        cov_scaled = sigma2 * np.linalg.inv(weighted.T @ weighted)
    except np.linalg.LinAlgError:
        cov_scaled = np.full((2, 2), np.inf)
    unscale = np.diag([1.0, 1.0 / scale])
    cov = unscale @ cov_scaled @ unscale
    if clamped == "intercept":
        cov[0, :] = cov[:, 0] = 0.0
        cov[1, 1] = sigma2 / float(weighted[:, 1] @ weighted[:, 1]) / scale**2
    elif clamped == "slope":
        cov[1, :] = cov[:, 1] = 0.0
        cov[0, 0] = sigma2 / float(weighted[:, 0] @ weighted[:, 0])
    return RobustLine(a=a, b=bs / scale, cov=cov, rss=rss, clamped=clamped)
