"""How well a (calibrated) profile predicts measured groups: time errors per band, large-message busbw."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from commmodel.calibrate.measured import (
    MeasuredGroup,
    bandwidth_rows,
    model_algorithm,
    model_times_s,
    unmodelled_reason,
)
from commmodel.calibrate.fit import band_masks
from commmodel.hardware.models import System


@dataclass(frozen=True)
class GroupCheck:
    """How well a (calibrated) profile predicts one measured group."""

    group: str
    """The group's label."""
    algorithm: str
    """The model algorithm used (auto or the forced one)."""
    bands: dict[str, tuple[int, float, float]]
    """Band -> (points, median |rel err| of time, max |rel err| of time)."""
    busbw_rel_err: tuple[float, float]
    """(median, max) |rel err| of busbw over the large-message rows (≥ 64 MiB, else the bandwidth-bound rows)."""


def check_group(system: System, group: MeasuredGroup) -> GroupCheck | None:
    """Model vs measured for one group: time errors per band and large-message busbw error (None: not modelled)."""
    if unmodelled_reason(system, group):
        return None
    algorithm = model_algorithm(system, group)
    fit = group.fit
    predicted = model_times_s(system, group, fit.sizes_bytes, algorithm)
    rel = np.abs(predicted / fit.times_s - 1.0)
    bands = {}
    for name, mask in band_masks(fit.sizes_bytes).items():
        vals = rel[mask]
        bands[name] = (int(mask.sum()), float(np.median(vals)) if vals.size else math.nan,
                       float(vals.max()) if vals.size else math.nan)
    large = bandwidth_rows(fit)
    # busbw = factor·S/t, so its relative error is t_measured/t_model − 1.
    busbw_err = np.abs(fit.times_s[large] / predicted[large] - 1.0)
    summary = (float(np.median(busbw_err)), float(busbw_err.max())) if busbw_err.size else (math.nan, math.nan)
    return GroupCheck(group=fit.label, algorithm=algorithm, bands=bands, busbw_rel_err=summary)
