"""``calibrate fit`` end to end for a gloo/MPI measurement on a CPU host: solve (:mod:`.host_fit`), check, write.

Returns the same document keys as :func:`commmodel.calibrate.report.fit_report` (``file``, ``groups``,
``profile``, ``checks``, ``notes``) plus ``library``; the profile's ``tiers`` hold one entry, tier
``host_libraries``, whose values are ``host_libraries.<library>.<number>``. ``checks`` re-price every measured
(primitive, ranks) group with ``--library <library>`` on the calibrated profile.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from commmodel.calibrate.apply import Calibration, TierCalibration
from commmodel.calibrate.fit import BANDS, band_masks
from commmodel.calibrate.host_fit import PARAMETERS, HostPoints, host_points, host_values
from commmodel.collectives import collective_cost
from commmodel.collectives.libraries import get_library, host_transport
from commmodel.hardware.models import HostLibraryTransport, System
from commmodel.hardware.cluster import Cluster
from commmodel.io.text_table import format_table
from commmodel.units import format_rate, format_time


def _base_values(system: System, library: str) -> dict[str, float]:
    tr = host_transport(get_library(library), Cluster.for_gpus(system, 2, 2).system, np.asarray(False),
                        np.asarray(2.0))
    return {"call_s": tr.call_s, "message_s": float(tr.message_s), "bw_bytes_per_s": float(tr.bw_bytes_per_s),
            "reduce_bw_bytes_per_s": tr.reduce_bw_bytes_per_s}


def with_host_values(system: System, library: str, values: dict[str, float], source: str) -> System:
    """``system`` with ``host_libraries.<library>`` set to ``values``."""
    text = {k: (format_rate if k.endswith("bytes_per_s") else format_time)(float(values[k]), digits=6)
            for k in PARAMETERS}
    entry = HostLibraryTransport(**{k: {"value": text[k], "source": source} for k in PARAMETERS})
    return system.model_copy(update={"host_libraries": {**(system.host_libraries or {}), library: entry}})


def host_model_times_s(system: System, library: str, op: str, num_ranks: int, sizes_bytes: np.ndarray) -> np.ndarray:
    """``op`` on ``num_ranks`` local ranks (one host) priced in ``library`` as it runs it: what a host fit checks
    against and ``plot calibration`` draws."""
    view = Cluster.for_gpus(system, num_ranks, num_ranks).system
    return collective_cost(op, np.asarray(sizes_bytes, dtype=float), view, num_ranks, num_ranks, library=library,
                           selection="library").time_s


@dataclass(frozen=True)
class HostCalibration:
    """The one host-library calibration ``calibrate fit`` writes and ``plot calibration`` draws."""

    system: System
    """The base system with ``host_libraries.<library>`` set to :attr:`values`."""
    points: HostPoints
    """The single-node points solved against."""
    base_values: dict[str, float]
    """The base profile's call, α, β and γ (:data:`.host_fit.PARAMETERS`)."""
    values: dict[str, float]
    """The solved ones."""
    notes: list[str]
    """What the solve could not resolve and kept from the base."""


def host_calibrated(data: Any, system: System, library: str, file: Path,
                    ops: list[str] | None = None) -> HostCalibration:
    """``system``'s ``host_libraries.<library>`` solved from the measurements ``data`` (of ``file``)."""
    notes: list[str] = []
    points = host_points(data.rows, system, library, ops, notes)
    base_values = _base_values(system, library)
    values = host_values(points, base_values, notes, library)
    source = f"calibrated: {Path(file).name}, {datetime.date.today().isoformat()}"
    return HostCalibration(with_host_values(system, library, values, source), points, base_values, values, notes)


def _checks(system: System, library: str, points: HostPoints) -> list[dict[str, Any]]:
    checks = []
    for op, n in sorted({(str(o), int(k)) for o, k in zip(points.op, points.num_ranks)}):
        mine = (points.op == op) & (points.num_ranks == n)
        model = host_model_times_s(system, library, op, n, points.size_bytes[mine])
        rel = np.abs(model / points.time_s[mine] - 1.0)
        bands = {b: {"num_points": int(m.sum()), "median_abs_rel_err": float(np.median(rel[m])) if m.any() else None}
                 for b, m in band_masks(points.size_bytes[mine]).items()}
        checks.append({"group": f"{op} on {n} ranks (1 node, {library})",
                       "algorithm": "/".join(sorted(set(points.algorithm[mine]))), "bands": bands})
    return checks


def _lines(library: str, values: dict[str, float], base: dict[str, float], checks: list[dict[str, Any]]) -> list[str]:
    fmt = {"call_s": format_time, "message_s": format_time, "bw_bytes_per_s": format_rate,
           "reduce_bw_bytes_per_s": format_rate}
    lines = [f"  host_libraries.{library}.{k:<22} {fmt[k](base[k]):>12} -> {fmt[k](values[k])}" for k in PARAMETERS]
    rows = [[c["group"], c["algorithm"], " / ".join("-" if c["bands"][b]["median_abs_rel_err"] is None else
                                                    f"{100 * c['bands'][b]['median_abs_rel_err']:.1f}%" for b in BANDS)]
            for c in checks]
    return lines + ["", "check: the calibrated library model vs the measurements",
                    format_table(rows, ["group", "library algorithm", "time |err| <=64K / mid / >=64M"], align="lll")]


def host_fit_report(data: Any, system: System, library: str, file: Path, out: Path | None, base: str,
                    ops: list[str] | None = None, name: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """Solve, check and (with ``out``) write the calibrated ``host_libraries.<library>``."""
    solved = host_calibrated(data, system, library, file, ops)
    calibrated, points, base_values, values, notes = (solved.system, solved.points, solved.base_values,
                                                      solved.values, solved.notes)
    date = datetime.date.today().isoformat()
    checks = _checks(calibrated, library, points)
    tier = TierCalibration(
        tier="host_libraries", group=f"{len(points.time_s)} {library} points ({', '.join(sorted(set(points.op)))})",
        values={("host_libraries", library, k): v for k, v in values.items()},
        base_values={("host_libraries", library, k): v for k, v in base_values.items()},
        direct_alpha_s=values["message_s"], direct_bw_bytes_per_s=values["bw_bytes_per_s"],
        line_rate_bytes_per_s=system.scale_up.bw_bytes_per_s.value,
        measured_sizes_bytes=(float(points.size_bytes.min()), float(points.size_bytes.max())))
    calibration = Calibration(tiers=[tier], notes=notes)
    profile = {"path": str(out) if out else None, "base": base, "name": name or f"{system.name}-calibrated",
               "written": False, "library": library,
               "tiers": [{"tier": tier.tier, "group": tier.group,
                          "values": {".".join(p): {"value": v, "base_value": tier.base_values[p]}
                                     for p, v in tier.values.items()}}]}
    doc = {"file": str(file), "library": library, "groups": [], "profile": profile, "checks": checks, "notes": notes}
    lines = [f"fit of {file}: {len(points.time_s)} {library} point(s) solved against {library}'s own algorithms",
             "", f"profile from base {system.name}:", *_lines(library, values, base_values, checks)]
    if out is not None:
        from commmodel.calibrate.profile_writer import write_profile

        kept = {("host_libraries", library, k): (base_values[k], f"commmodel's default (collectives.libraries."
                                                                 f"{library}): not resolved by {Path(file).name}")
                for k in PARAMETERS if k.endswith("bytes_per_s") and values[k] == base_values[k]}
        write_profile(out, base, calibration, Path(file).name, extra_values=kept, name=name, date=date,
                      summary=[f"host library {library}: call, α, β, γ solved against its own algorithms"])
        profile["written"] = True
        lines += ["", f"profile written to {out}; use it with --system {out} --library {library}"]
    return doc, lines + [f"note: {n}" for n in notes]


__all__ = ["HostCalibration", "host_calibrated", "host_fit_report", "host_model_times_s", "with_host_values"]
