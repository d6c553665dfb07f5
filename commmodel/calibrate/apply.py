"""Turn α-β fits into profile numbers that make commmodel's own collective model reproduce them.

For each tier (scale-up inside a domain, scale-out between domains) one measured group is the
*primary* one and sets that tier's numbers, each solved against the collective model for that
group's own topology: for scale-out, a group with one rank per node (``--groups inter``: only the
NICs) before a whole-job group (which mixes both tiers); then all-reduce, the most ranks,
``auto``/``ring`` over forced algorithms, the most points. Scale-up is solved first, so a scale-out
group that also crosses NVLink is priced with the calibrated scale-up. Two numbers of that tier are solved, each by bisection in
log space on a quantity the model is monotone in:

- **bandwidth** (``efficiency``; or the in-network reduction's ``busbw_efficiency`` when the model
  prices the group with NVLS/SHARP at large sizes): the model's times over the large-message rows
  (≥ 64 MiB in the largest regime; without such rows, the largest regime's bandwidth-bound rows,
  where the fitted bandwidth term is ≥ 50% of the time) match the measured times in the median
  (log ratio 0), so the written efficiency is the large-message one the profile field promises.
- **latency** (``latency_s``; or the in-network reduction's): the model's times over the
  latency-bound rows of the smallest regime (fitted latency term ≥ 50% of the time) match the
  measured times in the median; without such rows the base value is kept and a note says why.

The two are alternated until both hold, then refined together by minimising the summed absolute
log error over both row sets and the bandwidth rows of the run's other groups on the tier (its *peers*:
all-gather and all-to-all next to the all-reduce; golden-section search per knob): when the data are not
exactly α-β shaped (gloo on a busy CPU, protocol switches) or one efficiency cannot follow every op's
measured ratio, the profile is the model's best robust fit to all of the tier's groups.

A group that spans nodes also crosses NVLink: when no group inside one node measured the scale-up tier and the
model, with the network at its fastest, is still slower than that group's large rows, the intra-node leg binds;
the scale-up efficiency is raised to the least value those rows prove (:mod:`legs`) and scale-out solved again.

For a ring inside one domain, T = 2(n−1)·α + 2(n−1)/n·S/(bw·eff), this is exactly latency_s = α
and efficiency = B / bw (the fitted bus bandwidth over the line rate), which
:attr:`TierCalibration.direct_efficiency` reports for every case. Whatever formula the collective
model uses (protocols, trees, hierarchies), the written numbers are the ones that make
*it* agree with the measurement; a target it cannot reach (efficiency above 1.5) is clamped and said.

Pure: Systems and fits in, values and notes out. Writing YAML is :mod:`profile_writer`'s job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from commmodel.calibrate.knobs import BOUNDS, KnobPath, get_knob, minimise, sensitive, set_knob, solve
from commmodel.calibrate.legs import least_binding_value
from commmodel.calibrate.measured import (MeasuredGroup, bandwidth_rows, group_view, latency_rows, model_algorithm,
                                          model_protocols, model_times_s, primary_groups, selection_note, tier_of,
                                          unmodelled_reason)
from commmodel.hardware.models import System
from commmodel.units import format_size, format_time

FIXED_MIN_BYTES = 2**20
"""Rows at or above 1 MiB that the model prices with the Simple protocol set a tier's ``simple_fixed_s``."""



@dataclass(frozen=True)
class TierCalibration:
    """Numbers solved for one tier from its primary group."""

    tier: str
    """"scale_up" or "scale_out"."""
    group: str
    """The primary group's label."""
    values: dict[KnobPath, float]
    """Solved knob -> value (SI: seconds, fractions)."""
    base_values: dict[KnobPath, float]
    """The base profile's value of each solved knob."""
    direct_alpha_s: float
    """Fitted α of the smallest-size regime (nan after a bandwidth-only fit: α was not fitted)."""
    direct_bw_bytes_per_s: float
    """Fitted bus bandwidth B of the largest-size regime."""
    line_rate_bytes_per_s: float
    """The tier's line rate seen by one rank of this group (per GPU inside a domain; the node's NICs across nodes)."""
    measured_sizes_bytes: tuple[float, float] | None = None
    """Smallest and largest message S of the group's measurements (the calibrated range of this tier)."""
    knob_rows_bytes: dict[KnobPath, tuple[float, float]] = field(default_factory=dict)
    """Solved knob -> (smallest, largest) message S of the rows it was fitted to (its provenance)."""
    peer_groups: tuple[str, ...] = ()
    """Labels of the other groups on this tier whose bandwidth rows entered the joint refinement (their provenance)."""
    detail: str = ""
    """How the values were fitted when not the usual way (a lower bound from a group that spans both tiers);
    the profile writer puts it in each value's source."""

    @property
    def alpha_text(self) -> str:
        """"fitted α 4.1 us", or that α was not fitted (a bandwidth-only fit)."""
        if not math.isfinite(self.direct_alpha_s):
            return "α not fitted"
        return f"fitted α {format_time(self.direct_alpha_s)}"

    @property
    def direct_efficiency(self) -> float:
        """B / line rate: the brief's definition, equal to the solved efficiency for a ring inside one domain."""
        return self.direct_bw_bytes_per_s / self.line_rate_bytes_per_s


@dataclass
class Calibration:
    """Everything solved for a profile, plus what could not be."""

    tiers: list[TierCalibration] = field(default_factory=list)
    """One entry per calibrated tier."""
    notes: list[str] = field(default_factory=list)
    """Warnings: clamped values, unresolved latencies, groups that do not fit the base system."""

    def values(self) -> dict[KnobPath, float]:
        """Every solved knob -> value."""
        out: dict[KnobPath, float] = {}
        for tier in self.tiers:
            out.update(tier.values)
        return out


@dataclass(frozen=True)
class _Knob:
    """One number of a tier solved on some rows of a group: the median log ratio there is zero."""

    path: KnobPath
    """Where the number lives."""
    rows: np.ndarray
    """The group's rows that set it (boolean mask)."""
    increasing: bool
    """Whether the model's time grows with the number (latencies, fixed costs) or falls (efficiencies)."""


def _tier_knobs(system: System, tier: str, group: MeasuredGroup, algorithm: str, notes: list[str]) -> list[_Knob]:
    """Which numbers of ``tier`` the group can set: bandwidth (large rows), latency (latency-bound rows) and
    the Simple-protocol fixed cost (the other rows ≥ 1 MiB the model prices with Simple)."""
    fit, label = group.fit, group.fit.label
    sizes = fit.sizes_bytes
    bw_rows, lat_rows = bandwidth_rows(fit), latency_rows(fit)
    inr = ["in_network_reduction"] if getattr(getattr(system, tier), "in_network_reduction", None) else []
    knobs = []
    bw_path = sensitive(system, [(tier, "efficiency")] + [(tier, *inr, "busbw_efficiency")] * bool(inr),
                         lambda s: model_times_s(s, group, sizes[bw_rows], algorithm))
    if bw_path is None:
        notes.append(f"{label}: the model's large-message time does not depend on the {tier} bandwidth; not calibrated")
    else:
        knobs.append(_Knob(bw_path, bw_rows, increasing=False))
    if fit.bandwidth_only:
        notes.append(f"{label}: {len(np.unique(sizes))} size(s) only, so a bandwidth-only fit on the rows ≥ 64 MiB; "
                     f"{tier} latency kept from the base")
    elif not lat_rows.any():
        notes.append(f"{label}: no latency-bound size (the smallest is {sizes[0]:g} B); {tier} latency kept from the base")
    else:
        lat_path = sensitive(system, [(tier, "latency_s")] + [(tier, *inr, "latency_s")] * bool(inr),
                              lambda s: model_times_s(s, group, sizes[lat_rows], algorithm))
        if lat_path is None:
            notes.append(f"{label}: the model's small-message time does not depend on the {tier} latency; not calibrated")
        else:
            knobs.append(_Knob(lat_path, lat_rows, increasing=True))
    simple = model_protocols(system, group, sizes, algorithm) == "Simple"
    fixed_rows = (sizes >= FIXED_MIN_BYTES) & simple & ~bw_rows & ~lat_rows
    if fixed_rows.any():
        knobs.append(_Knob((tier, "simple_fixed_s"), fixed_rows, increasing=True))
    return knobs


def _peer_loss(system: System, peers: list[MeasuredGroup]) -> float:
    """Summed absolute log error of the model over the peers' bandwidth rows."""
    total = 0.0
    for peer in peers:
        rows = bandwidth_rows(peer.fit)
        times = model_times_s(system, peer, peer.fit.sizes_bytes[rows], model_algorithm(system, peer))
        total += float(np.sum(np.abs(np.log(times / peer.fit.times_s[rows]))))
    return total


def _fit_knobs(system: System, group: MeasuredGroup, algorithm: str, knobs: list[_Knob],
               peers: list[MeasuredGroup]) -> tuple[System, dict[KnobPath, float]]:
    """Anchor each knob on its rows (medians, alternated; among several roots the one with the least joint
    error over the group and its ``peers``), then refine all of them together by least absolute log error on the
    union of their rows and the peers' bandwidth rows (a robust joint fit of the model to every group of the tier).

    The peers belong in the refinement too: it moves each knob within a factor :data:`knobs.REFINE_FACTOR` per round,
    and over rounds a primary group alone can walk into another algorithm's branch that reproduces it while
    mispricing the rest of the run (mscclpp NDmv4 2 x 8: from the ring/tree switch at NIC efficiency 0.89 into a
    tree at 0.51 that matches the all-reduce and prices all_gather 45% slow)."""
    fit = group.fit
    values: dict[KnobPath, float] = {}

    def median_log_ratio(rows: np.ndarray):
        return lambda s: float(np.median(np.log(model_times_s(s, group, fit.sizes_bytes[rows], algorithm)
                                                / fit.times_s[rows])))

    union = np.zeros(len(fit.sizes_bytes), dtype=bool)
    for knob in knobs:
        union |= knob.rows

    def loss(s: System) -> float:
        return float(np.sum(np.abs(np.log(model_times_s(s, group, fit.sizes_bytes[union], algorithm)
                                          / fit.times_s[union]))))

    for _ in range(4):
        for knob in knobs:
            values[knob.path], _hit = solve(system, knob.path, median_log_ratio(knob.rows), knob.increasing,
                                             lambda s: loss(s) + _peer_loss(s, peers))
            system = set_knob(system, knob.path, values[knob.path])

    def joint(s: System) -> float:
        return loss(s) + _peer_loss(s, peers)

    for _ in range(6):
        before = joint(system)
        for knob in knobs:
            values[knob.path] = minimise(system, knob.path, joint, values[knob.path])
            system = set_knob(system, knob.path, values[knob.path])
        if before - joint(system) < 1e-9 * max(before, 1.0):
            break
    return system, values


def _joint_loss(system: System, group: MeasuredGroup, algorithm: str, knobs: list[_Knob],
                peers: list[MeasuredGroup]) -> float:
    """Summed absolute log error over the rows that set ``knobs`` and the ``peers``' bandwidth rows."""
    union = np.zeros(len(group.fit.sizes_bytes), dtype=bool)
    for knob in knobs:
        union |= knob.rows
    times = model_times_s(system, group, group.fit.sizes_bytes[union], algorithm)
    return float(np.sum(np.abs(np.log(times / group.fit.times_s[union])))) + _peer_loss(system, peers)


def _latency_floored(values: dict[KnobPath, float]) -> bool:
    """Whether a solved latency sits at its range's floor (1 ns): not identified by its rows.

    Across a fabric that runs Simple only (EFA v1, TCPX/TCPXO: ``nccl_protocols``) the latency-bound rows run Simple
    too, so ``latency_s`` and ``simple_fixed_s`` add the same constant to every row of the group. When the small rows
    ask for less than the rows ≥ 1 MiB, the two medians pull against each other until the latency hits 1 ns
    (2 x a3-megagpu-8g: 123 us at 8 B-16 KiB, ~870 us + S/B from 32 MiB; the fit wrote a 1 ns network hop and a
    43 us fixed cost)."""
    return any(path[-1] == "latency_s" and value <= BOUNDS["latency_s"][0] * 1.001 for path, value in values.items())


def _fit_consistent(system: System, group: MeasuredGroup, algorithm: str, knobs: list[_Knob],
                    peers: list[MeasuredGroup], notes: list[str]) -> tuple[System, dict[KnobPath, float]]:
    """:func:`_fit_knobs`, keeping a latency or fixed-cost knob at its base value where solving it raises the
    joint error over the group and the other groups measured on the tier (``peers``).

    A latency solved on a few small rows can flip NCCL's estimated choice at large sizes (a faster network
    hop makes the tree look better than the ring); only a wrong bandwidth then reproduces the primary group,
    and every other collective of the same run is mispriced (mscclpp NDmv4 2x8: a 4.6 us fitted hop turned the
    1-4 GiB all-reduce into a tree and cut the NIC efficiency to 0.51-0.69; all-gather ran at half speed). The
    peers are measurements too, so the knob set with the smaller joint error is written and the kept knob is
    reported. Without peers every knob is solved, unless a latency lands on its range's floor: then another knob
    supplies its effect on the same rows (:func:`_latency_floored`) and the knob sets are compared the same way.
    """
    best = _fit_knobs(system, group, algorithm, knobs, peers)
    if not peers and not _latency_floored(best[1]):
        return best
    best_loss = _joint_loss(best[0], group, algorithm, knobs, peers)
    floored = [".".join(p) for p, v in best[1].items() if _latency_floored({p: v})]
    for dropped in [k for k in knobs if k.increasing]:
        trial = _fit_knobs(system, group, algorithm, [k for k in knobs if k is not dropped], peers)
        trial_loss = _joint_loss(trial[0], group, algorithm, knobs, peers)
        if trial_loss < best_loss:
            why = (f" (solved with it, {', '.join(floored)} went to its 1 ns floor: on these rows both add the same "
                   f"constant)") if floored and dropped.path not in {tuple(f.split(".")) for f in floored} else ""
            notes.append(f"{group.fit.label}: {'.'.join(dropped.path)} kept from the base: solving it raised the joint "
                         f"error over this group's rows{' and its peers' if peers else ''} (summed |log ratio| "
                         f"{best_loss:.3g} vs {trial_loss:.3g}){why}")
            best, best_loss = trial, trial_loss
    return best


def calibrate_tier(system: System, tier: str, group: MeasuredGroup, notes: list[str],
                   peers: list[MeasuredGroup] | None = None,
                   frozen: frozenset[KnobPath] = frozenset()) -> tuple[System, TierCalibration]:
    """Solve the bandwidth, latency and Simple fixed-cost knobs of ``tier`` so the model matches ``group``'s fit;
    where several values do, the one that also best matches the ``peers`` (other groups on this tier) wins.
    Knobs in ``frozen`` keep their base values (a candidate of :mod:`choose`)."""
    fit = group.fit
    algorithm = model_algorithm(system, group)
    if algorithm == "auto" and fit.algorithm.lower() not in {"", "auto"}:
        notes.append(f"{fit.label}: algorithm {fit.algorithm!r} is not in commmodel's registry here; "
                     f"calibrated against auto")
    knobs = [k for k in _tier_knobs(system, tier, group, algorithm, notes) if k.path not in frozen]
    base_values = {k.path: get_knob(system, k.path) for k in knobs}
    system, values = _fit_consistent(system, group, algorithm, knobs, peers or [], notes)
    clamped = {p for p, v in values.items() if min(abs(math.log(v / b)) for b in BOUNDS[p[-1]]) < 1e-3
               and not (p[-1] == "simple_fixed_s" and v <= BOUNDS[p[-1]][0] * 1.001)}  # no fixed cost is valid
    for path in sorted(clamped):
        notes.append(f"{fit.label}: {'.'.join(path)} hit its limit {values[path]:g}; the model cannot reproduce "
                     f"the fit with this base system and algorithm")
    view = group_view(system, group)
    if tier == "scale_up":
        line_rate = view.scale_up.bw_bytes_per_s.value
    else:
        out = view.scale_out
        line_rate = out.nics_per_node * out.nic_bw_bytes_per_s.value * group.ranks_per_node / view.gpus_per_node
    return system, TierCalibration(
        tier=tier, group=fit.label, values=values, base_values=base_values,
        direct_alpha_s=math.nan if fit.bandwidth_only else fit.latency_segment.alpha_s,
        direct_bw_bytes_per_s=fit.bandwidth_segment.bw_bytes_per_s,
        line_rate_bytes_per_s=line_rate,
        measured_sizes_bytes=(float(np.min(fit.sizes_bytes)), float(np.max(fit.sizes_bytes))),
        knob_rows_bytes={k.path: _size_range(fit.sizes_bytes[k.rows]) for k in knobs},
        peer_groups=tuple(p.fit.label for p in peers or []),
    )


def _size_range(sizes_bytes: np.ndarray) -> tuple[float, float]:
    return float(np.min(sizes_bytes)), float(np.max(sizes_bytes))


def scale_up_lower_bound(system: System, group: MeasuredGroup, scale_out: TierCalibration) -> TierCalibration | None:
    """The scale-up efficiency a multi-node ``group`` proves (:func:`legs.least_binding_value`): the least value
    at which the model reaches its bandwidth rows with the scale-out bandwidth at its upper bound; None when the
    base value already allows that (the intra-node leg does not bind) or the model does not depend on it."""
    fit = group.fit
    algorithm = model_algorithm(system, group)
    rows = bandwidth_rows(fit)

    def times(s: System) -> np.ndarray:
        return model_times_s(s, group, fit.sizes_bytes[rows], algorithm)

    path = sensitive(system, [("scale_up", "efficiency")], times)
    fastest = [p for p in scale_out.values if p[-1] in {"efficiency", "busbw_efficiency"}]
    value = least_binding_value(system, path, fastest, times, fit.times_s[rows]) if path and fastest else None
    if value is None:
        return None
    sizes = fit.sizes_bytes[rows]
    detail = (f"lower bound: the least {'.'.join(path)} at which the model reproduces {fit.label} rows "
              f"{format_size(sizes.min())}-{format_size(sizes.max())} with {', '.join('.'.join(p) for p in fastest)} "
              f"at its upper bound; the scale-up tier was not measured alone")
    view = group_view(system, group)
    return TierCalibration(
        tier="scale_up", group=fit.label, values={path: value}, base_values={path: get_knob(system, path)},
        direct_alpha_s=math.nan if fit.bandwidth_only else fit.latency_segment.alpha_s,
        direct_bw_bytes_per_s=fit.bandwidth_segment.bw_bytes_per_s,
        line_rate_bytes_per_s=view.scale_up.bw_bytes_per_s.value, detail=detail,
        knob_rows_bytes={path: _size_range(sizes)},
    )


def usable_groups(system: System, groups: list[MeasuredGroup], notes: list[str]) -> list[MeasuredGroup]:
    """The groups the model can price on ``system``; each one left out gets a note saying why."""
    usable = []
    for group in groups:
        if group.ranks_per_node > system.gpus_per_node:
            notes.append(
                f"{group.fit.label}: {group.ranks_per_node} ranks per node exceed the {system.gpus_per_node} GPUs per "
                f"node of {system.name}; group ignored (pick a matching --base)"
            )
            continue
        reason = unmodelled_reason(system, group)
        if reason:
            notes.append(f"{group.fit.label}: not used for the profile: {reason}")
            continue
        usable.append(group)
    return usable


def fit_candidate(system: System, usable: list[MeasuredGroup], frozen: frozenset[KnobPath] = frozenset(),
                  raise_scale_up: bool = True) -> tuple[System, Calibration]:
    """Calibrate every tier some usable group exercises, scale-up first (a scale-out ring also crosses NVLink);
    knobs in ``frozen`` keep their base values, and ``raise_scale_up`` allows the scale-up lower bound (:mod:`legs`)."""
    calibration = Calibration()
    primaries = primary_groups(system, usable)
    for tier in ("scale_up", "scale_out"):
        if tier in primaries:
            peers = [g for g in usable if g is not primaries[tier] and tier_of(system, g) == tier]
            base = system
            notes: list[str] = []
            system, result = calibrate_tier(base, tier, primaries[tier], notes, peers, frozen)
            if tier == "scale_out" and "scale_up" not in primaries and raise_scale_up:
                raised = scale_up_lower_bound(system, primaries[tier], result)
                if raised is not None:
                    notes = []
                    for path, value in raised.values.items():
                        base = set_knob(base, path, value)
                    system, result = calibrate_tier(base, tier, primaries[tier], notes, peers, frozen)
                    calibration.tiers.append(raised)
            calibration.notes.extend(notes)
            calibration.tiers.append(result)
    for group in primaries.values():
        note = selection_note(system, group)
        if note:
            calibration.notes.append(note)
    return system, calibration


def calibrate_system(system: System, groups: list[MeasuredGroup]) -> tuple[System, Calibration]:
    """Calibrate every tier some group exercises, then keep the candidate profile that best reproduces the groups'
    own rows, never one worse than the base (:func:`choose.choose_profile`)."""
    from commmodel.calibrate.choose import choose_profile

    notes: list[str] = []
    usable = usable_groups(system, groups, notes)
    calibrated, calibration = choose_profile(system, usable)
    calibration.notes[:0] = notes
    return calibrated, calibration
