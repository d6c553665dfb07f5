"""The last step of a calibration: keep the candidate profile that best reproduces the table's own rows.

The knob solver (:mod:`apply`) matches medians of log time ratios on a few row sets of each tier's primary group;
that is not the error a calibrated profile is judged by, and where the data cannot tell two knobs apart it
returns one of many equivalent splits. Two cases in the published tables:

- **hop vs fixed cost on a Simple-only fabric.** Google's TCPXO runs Simple at every size (tcpxo
  ``nccl_protocols``), so ``scale_out.latency_s`` and ``simple_fixed_s`` add the same constant to every row; only
  their sum is identified, and the solver wrote a 1 ns hop and a 39 us fixed cost (2 x a3-megagpu-8g).
- **scale-up efficiency from a mixed group.** Without rows inside one node the scale-up efficiency is raised
  only to the least value a two-node group proves (:mod:`legs`); that changes every NVLink stage the model
  prices, not just the binding one.

So the fit also solves variants that keep base values for such knobs (each tier's latency and fixed cost; the
scale-up lower bound), prices every candidate and the base profile on the groups' own rows, and keeps the best.
The error of a profile on a table is two medians, as the fit's check reports them: |busbw error| =
|t_measured / t_model − 1| on the rows ≥ 1 MiB (:data:`ROUND_TRIP_MIN_BYTES`, DESIGN §9's round-trip rows) and
|time error| on the latency-bound rows (:func:`measured.latency_rows`). A candidate is admissible only when
neither median is above the larger of the base profile's and :data:`ROUND_TRIP_TOLERANCE` (the base itself always
is): a fit never returns a profile worse than its base on the rows it was given, except that it may trade within the
accuracy a calibration promises — a hop that takes the latency rows from 62.5% to 6.3% off while the rows ≥ 1 MiB
move from 1.2% to 1.7% (amdsat MI300X) is kept. Among the admissible ones the least sum of the two medians wins; among those
within :data:`TIE_TOLERANCE` of it, the one that keeps the most base values (the data do not tell them apart, so
the sourced numbers stand), then the earlier one (a solved value before its refinement).

Pure: a System and measured groups in, a System and its Calibration out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from commmodel.calibrate.apply import Calibration, fit_candidate
from commmodel.calibrate.knobs import KnobPath, minimise, set_knob
from commmodel.calibrate.measured import MeasuredGroup, latency_rows, model_algorithm, model_times_s
from commmodel.hardware.models import System

TIE_TOLERANCE = 1e-4
"""Scores closer than this (0.01 percentage point of median relative error) are a tie: below any published
table's printed precision (nccl-tests prints busbw to 0.01 GB/s and times to 0.1 us)."""

ROUND_TRIP_MIN_BYTES = 2**20
"""The rows a calibration is judged on: at or above 1 MiB (DESIGN §9's round trip); below them, the latency rows."""

ROUND_TRIP_TOLERANCE = 0.05
"""The calibration round trip's accuracy (DESIGN §9: import → fit → predict within 5%): a candidate may be worse than
the base on one kind of row as long as that median stays within it."""

INCREASING = ("latency_s", "simple_fixed_s")
"""Knobs that add time (a hop, a fixed cost): the ones a Simple-only fabric cannot tell apart."""


@dataclass(frozen=True)
class TableError:
    """How far a profile's model is from a table's own rows."""

    bandwidth: float
    """Median |busbw error| (t_measured / t_model − 1) over every group's rows ≥ 1 MiB (0 without such rows)."""
    latency: float
    """Median |time error| (t_model / t_measured − 1) over every group's latency-bound rows (0 without any)."""

    @property
    def total(self) -> float:
        """The sum of the two medians: the score candidates are ranked by."""
        return self.bandwidth + self.latency

    def admissible(self, base: TableError) -> bool:
        """Whether neither median is above the larger of the base profile's and :data:`ROUND_TRIP_TOLERANCE` (within
        :data:`TIE_TOLERANCE`)."""
        bound_bw, bound_lat = (max(x, ROUND_TRIP_TOLERANCE) + TIE_TOLERANCE for x in (base.bandwidth, base.latency))
        return self.bandwidth <= bound_bw and self.latency <= bound_lat

    def text(self) -> str:
        """"busbw 5.2% on rows >= 1 MiB, time 3.1% on latency rows"."""
        return f"busbw {self.bandwidth:.1%} on rows >= 1 MiB, time {self.latency:.1%} on latency rows"


def table_error(system: System, groups: list[MeasuredGroup]) -> TableError:
    """The two medians of :class:`TableError` for ``system`` over ``groups``, priced as ``commmodel collective``."""
    busbw: list[np.ndarray] = []
    time: list[np.ndarray] = []
    for group in groups:
        fit = group.fit
        predicted = model_times_s(system, group, fit.sizes_bytes, model_algorithm(system, group))
        busbw.append(np.abs(fit.times_s / predicted - 1.0)[fit.sizes_bytes >= ROUND_TRIP_MIN_BYTES])
        time.append(np.abs(predicted / fit.times_s - 1.0)[latency_rows(fit) & (fit.sizes_bytes < ROUND_TRIP_MIN_BYTES)])
    bw, lat = (np.concatenate(x) if x else np.zeros(0) for x in (busbw, time))
    return TableError(bandwidth=float(np.median(bw)) if bw.size else 0.0,
                      latency=float(np.median(lat)) if lat.size else 0.0)


@dataclass(frozen=True)
class _Candidate:
    """One way to fit the table."""

    label: str
    """What it keeps from the base, for the note."""
    frozen: frozenset[KnobPath]
    """Knobs kept at their base values."""
    raise_scale_up: bool
    """Whether the scale-up lower bound (:mod:`legs`) may raise the scale-up efficiency."""


def _candidates(full: Calibration, usable_tiers: set[str]) -> list[_Candidate]:
    """The full fit's variants: each tier's hop or fixed cost kept, or both; the scale-up lower bound not applied;
    each combination; then the base (every knob kept). Only variants that differ from the full fit are listed."""
    raised = "scale_up" in {t.tier for t in full.tiers} and "scale_up" not in usable_tiers
    solved = full.values()
    out = [_Candidate("the full fit", frozenset(), True)]
    for tier in ("scale_up", "scale_out"):
        added = sorted(p for p in solved if p[0] == tier and p[-1] in INCREASING)
        for kept in [frozenset([p]) for p in added] * (len(added) > 1) + [frozenset(added)] * bool(added):
            out.append(_Candidate(f"{', '.join('.'.join(p) for p in sorted(kept))} kept from the base", kept, True))
    if raised:
        out += [_Candidate(f"{c.label.replace('the full fit', 'the fit')} without the scale-up lower bound"
                           if c.frozen else "the fit without the scale-up lower bound", c.frozen, False) for c in out]
    every = frozenset(p for t in full.tiers for p in (*t.base_values, *t.values))
    out.append(_Candidate("the base profile (every knob kept)", every, False))
    return out


BANDWIDTH = ("efficiency", "busbw_efficiency")
"""Knobs that set a tier's rate: refined on the table's own error (:func:`_refined`)."""


def _refined(fitted: tuple[System, Calibration], usable: list[MeasuredGroup]) -> tuple[System, Calibration] | None:
    """``fitted`` with each solved rate knob moved (within :data:`knobs.REFINE_FACTOR`) to the least
    :attr:`TableError.total`: the solver matches medians of log ratios on the primary group's rows ≥ 64 MiB, the
    table is judged on every group's rows ≥ 1 MiB. None when nothing moved."""
    system, calibration = fitted
    tiers = []
    moved = False
    sizes = np.concatenate([g.fit.sizes_bytes for g in usable])
    judged = (float(ROUND_TRIP_MIN_BYTES), float(sizes.max())) if (sizes >= ROUND_TRIP_MIN_BYTES).any() else None
    for tier in calibration.tiers:
        values, rows = dict(tier.values), dict(tier.knob_rows_bytes)
        for path in [p for p in values if p[-1] in BANDWIDTH and not tier.detail]:  # not a lower bound (legs.py)
            value = minimise(system, path, lambda s: table_error(s, usable).total, values[path])
            if abs(value / values[path] - 1.0) > 1e-6:
                values[path], moved = value, True
                rows[path] = judged or rows.get(path)
                system = set_knob(system, path, value)
        tiers.append(replace(tier, values=values, knob_rows_bytes={p: r for p, r in rows.items() if r}))
    if not moved:
        return None
    return system, Calibration(tiers=tiers, notes=list(calibration.notes))


def choose_profile(system: System, usable: list[MeasuredGroup]) -> tuple[System, Calibration]:
    """The full fit, or the variant or base profile with the least :class:`TableError` that is no worse than the
    base on either median; a note names the choice when it is not the full fit."""
    from commmodel.calibrate.measured import primary_groups

    full = fit_candidate(system, usable)
    if not full[1].tiers:
        return full
    base_error = table_error(system, usable)
    tiers = set(primary_groups(system, usable))
    options: list[tuple[str, tuple[System, Calibration], TableError, int]] = []
    for candidate in _candidates(full[1], tiers):
        fitted = full if candidate.label == "the full fit" else fit_candidate(system, usable, candidate.frozen,
                                                                              candidate.raise_scale_up)
        kept = len(candidate.frozen) + (not candidate.raise_scale_up)
        refined = _refined(fitted, usable)
        for label, option in ((candidate.label, fitted), (f"{candidate.label}, rates refined on the table", refined)):
            if option is not None:
                options.append((label, option, table_error(option[0], usable), kept))
    admissible = [o for o in options if o[2].admissible(base_error)]  # the base always is
    least = min(o[2].total for o in admissible)
    label, best, error, _ = max((o for o in admissible if o[2].total <= least + TIE_TOLERANCE), key=lambda o: o[3])
    if best is not full:
        best[1].notes.append(f"chose {label} ({error.text()}): the least error on the table's rows that is nowhere "
                             f"above the base's or 5% ({base_error.text()}); the full fit: {options[0][2].text()}")
    return best
