"""``calibrate fit`` end to end: read, fit, calibrate a base system, write the profile, report.

Returns one JSON-ready document and the human lines that show the same numbers (the CLI prints
one or the other). Keys of the document::

    {"file", "groups": [{"label", "op", "algorithm", "num_ranks", "num_nodes", "ranks_per_node", "r2",
                         "bic_gain", "bandwidth_only", "segments": [{"size_min_bytes", "size_max_bytes", "num_points",
                         "alpha_s", "alpha_ci_s", "bw_bytes_per_s", "bw_ci_bytes_per_s", "intercept_s",
                         "slope_s_per_byte", "clamped"}], "bands": {band: {"num_points",
                         "median_abs_rel_err", "max_abs_rel_err"}}}],
     "profile": null | {"path", "base", "name", "written", "tiers": [{"tier", "group", "values":
                         {"scale_up.efficiency": {"value", "base_value"}}, "direct_alpha_s",
                         "direct_bw_bytes_per_s", "line_rate_bytes_per_s", "direct_efficiency"}],
                         "matmul_efficiency": null | {"value", "base_value", "detail"}},
     "checks": [{"group", "algorithm", "bands": {...}, "busbw_median_abs_rel_err", "busbw_max_abs_rel_err"}],
     "notes": [...]}

``checks`` compare commmodel's collective model with the calibrated profile against every
measured group (the base profile's numbers when nothing could be calibrated).
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

from commmodel.calibrate.apply import calibrate_system
from commmodel.calibrate.check import check_group
from commmodel.calibrate.fit import BANDS
from commmodel.calibrate.groups import fit_measurements
from commmodel.calibrate.host_fit import host_library
from commmodel.errors import CalibrationError
from commmodel.io.measurements import read_measurements
from commmodel.io.text_table import format_table
from commmodel.units import format_rate, format_size, format_time


def _num(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _pct(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def _rate(value: float) -> str:
    return "latency-bound" if not math.isfinite(value) else format_rate(value)


def _group_doc(group) -> dict[str, Any]:
    fit = group.fit
    return {
        "label": fit.label, "op": fit.op, "algorithm": fit.algorithm, "num_ranks": fit.num_ranks,
        "num_nodes": group.num_nodes, "ranks_per_node": group.ranks_per_node, "r2": _num(fit.r2),
        "bic_gain": _num(fit.bic_gain), "bandwidth_only": fit.bandwidth_only,
        "segments": [{
            "size_min_bytes": s.size_min_bytes, "size_max_bytes": s.size_max_bytes, "num_points": s.num_points,
            "alpha_s": s.alpha_s, "alpha_ci_s": list(s.alpha_ci_s), "bw_bytes_per_s": _num(s.bw_bytes_per_s),
            "bw_ci_bytes_per_s": [_num(v) for v in s.bw_ci_bytes_per_s], "intercept_s": s.intercept_s,
            "slope_s_per_byte": s.slope_s_per_byte, "clamped": s.clamped,
        } for s in fit.segments],
        "bands": {b.band: {"num_points": b.num_points, "median_abs_rel_err": _num(b.median_abs_rel_err),
                           "max_abs_rel_err": _num(b.max_abs_rel_err)} for b in fit.bands},
    }


def _fit_lines(groups) -> list[str]:
    rows = []
    for group in groups:
        fit = group.fit
        bands = {b.band: b for b in fit.bands}
        for k, seg in enumerate(fit.segments):
            rows.append([
                fit.label if k == 0 else "", f"{format_size(seg.size_min_bytes)} - {format_size(seg.size_max_bytes)}",
                "not fitted (bandwidth only)" if fit.bandwidth_only else
                f"{format_time(seg.alpha_s)} [{format_time(seg.alpha_ci_s[0])}, {format_time(seg.alpha_ci_s[1])}]",
                _rate(seg.bw_bytes_per_s) if math.isinf(seg.bw_bytes_per_s) else
                f"{_rate(seg.bw_bytes_per_s)} [{_rate(seg.bw_ci_bytes_per_s[0])}, {_rate(seg.bw_ci_bytes_per_s[1])}]",
                f"{fit.r2:.4f}" if k == 0 else "",
                " / ".join(_pct(bands[b].median_abs_rel_err) for b in BANDS) if k == 0 else "",
            ])
    return [format_table(rows, ["group", "regime", "alpha per step [95% CI]", "B busbw [95% CI]", "R2",
                                "fit |err| <=64K / mid / >=64M"], align="llllrl")]


def _check_lines(checks: list[dict[str, Any]], title: str) -> list[str]:
    rows = [[c["group"], c["algorithm"],
             " / ".join(_pct(c["bands"][b]["median_abs_rel_err"]) for b in BANDS),
             f"{_pct(c['busbw_median_abs_rel_err'])} (max {_pct(c['busbw_max_abs_rel_err'])})"] for c in checks]
    return ["", title, format_table(rows, ["group", "model algo", "time |err| <=64K / mid / >=64M",
                                           "large-message busbw |err|"], align="llll")]


def _matmul_from(compute: Path, system: Any, date: str) -> tuple[dict[tuple[str, str], Any], dict[str, Any]]:
    """``--compute``: the GPU's matmul efficiency from a ``calibrate compute`` CSV (profile value, report entry)."""
    from commmodel.calibrate.compute import efficiency_field, matmul_efficiency
    from commmodel.calibrate.profile_writer import source_text

    compute_data = read_measurements(compute)
    if compute_data.schema != "compute":
        raise CalibrationError(f"--compute {compute} holds {compute_data.schema} measurements; "
                               f"give a `calibrate compute` CSV")
    value, detail = matmul_efficiency(compute_data.rows, system.gpu)
    field = efficiency_field(compute_data.rows)
    extra = {("gpu", field): (value, source_text(Path(compute).name, date, detail))}
    base = getattr(system.gpu, field)
    return extra, {"field": field, "value": value, "base_value": base.value if base is not None else None,
                   "detail": detail}


def _check_docs(calibrated: Any, groups: list[Any]) -> list[dict[str, Any]]:
    """Each fitted group re-priced with the calibrated profile: error per size band and on busbw."""
    checks = []
    for group in groups:
        result = check_group(calibrated, group)
        if result is None:
            continue
        checks.append({"group": result.group, "algorithm": result.algorithm,
                       "bands": {k: {"num_points": v[0], "median_abs_rel_err": _num(v[1]),
                                     "max_abs_rel_err": _num(v[2])} for k, v in result.bands.items()},
                       "busbw_median_abs_rel_err": _num(result.busbw_rel_err[0]),
                       "busbw_max_abs_rel_err": _num(result.busbw_rel_err[1])})
    return checks


def _profile_lines(calibration: Any, matmul: dict[str, Any] | None) -> list[str]:
    """Human lines: every calibrated value (before -> after) and each tier's fitted B and α."""
    lines = []
    for tier in calibration.tiers:
        for path, value in tier.values.items():
            old = tier.base_values.get(path)
            fmt = format_time if path[-1] == "latency_s" else (lambda v: f"{v:.4g}")
            lines.append(f"  {'.'.join(path):<44} {fmt(old) if old is not None else '-':>12} -> {fmt(value):<12} "
                         f"({tier.group})")
        lines.append(f"  {tier.tier}: fitted B {_rate(tier.direct_bw_bytes_per_s)} busbw / line rate "
                     f"{format_rate(tier.line_rate_bytes_per_s)} = {tier.direct_efficiency:.4g}; "
                     f"{tier.alpha_text}")
    if matmul:
        before = "none" if matmul["base_value"] is None else f"{matmul['base_value']:.4g}"
        lines.append(f"  {'gpu.' + matmul['field']:<44} {before:>12} -> {matmul['value']:.4g} ({matmul['detail']})")
    return lines


def fit_report(file: Path, out: Path | None = None, base: str | None = None, ops: list[str] | None = None,
               compute: Path | None = None, name: str | None = None, max_segments: int = 3
               ) -> tuple[dict[str, Any], list[str]]:
    """Run ``calibrate fit``: the document for ``--json`` and the lines for humans."""
    from commmodel.io.profiles import load_system

    data = read_measurements(file)
    if data.schema != "collectives":
        raise CalibrationError(f"{file} holds {data.schema} measurements; pass it with --compute, not as FILE")
    if base is not None and not base.strip():
        raise CalibrationError("--base is empty; give the system to calibrate, e.g. --base dgx-h100, or leave it out "
                               "to use the one the file records")
    base = base or data.env.get("system") or None
    if base is not None and host_library(data.env, load_system(base)) is not None:  # gloo/MPI: the library's forms
        from commmodel.calibrate.host_report import host_fit_report

        if compute is not None:
            raise CalibrationError(f"--compute {compute}: a {host_library(data.env, load_system(base))} fit calibrates "
                                   "the host library's costs, not a GPU's matmul rate; drop --compute or fit it "
                                   "with a GPU measurements file")
        system = load_system(base)
        return host_fit_report(data, system, host_library(data.env, system), Path(file), out, base, ops, name)
    groups = fit_measurements(data.rows, ops=ops, max_segments=max_segments)
    doc: dict[str, Any] = {"file": str(file), "groups": [_group_doc(g) for g in groups], "profile": None,
                           "checks": [], "notes": []}
    lines = [f"fit of {file}: {len(groups)} group(s)", *_fit_lines(groups)]
    if base is None:
        if out is not None or compute is not None:
            raise CalibrationError(
                "--out needs a base system to calibrate: pass --base SYSTEM (e.g. dgx-h100 or a YAML path), or record "
                "it with `calibrate run/import --system NAME`"
            )
        return doc, lines
    system = load_system(base)
    date = datetime.date.today().isoformat()
    extra, matmul = _matmul_from(compute, system, date) if compute is not None else ({}, None)  # a bad file fails fast
    calibrated, calibration = calibrate_system(system, groups)
    profile: dict[str, Any] = {
        "path": str(out) if out else None, "base": base, "name": name or f"{system.name}-calibrated", "written": False,
        "tiers": [{
            "tier": t.tier, "group": t.group,
            "values": {".".join(p): {"value": v, "base_value": t.base_values.get(p)} for p, v in t.values.items()},
            "direct_alpha_s": _num(t.direct_alpha_s), "direct_bw_bytes_per_s": _num(t.direct_bw_bytes_per_s),
            "line_rate_bytes_per_s": t.line_rate_bytes_per_s, "direct_efficiency": _num(t.direct_efficiency),
        } for t in calibration.tiers],
        "matmul_efficiency": matmul,
    }
    doc["profile"] = profile
    checks = _check_docs(calibrated, groups)
    doc["checks"] = checks
    doc["notes"] = list(calibration.notes)
    lines += ["", f"profile from base {system.name}:", *_profile_lines(calibration, matmul)]
    lines += _check_lines(checks, "check: commmodel with the calibrated numbers vs the measurements")
    if out is not None:
        from commmodel.calibrate.profile_writer import write_profile

        summary = [f"{g['label']}: R2 {g['r2']:.4f}" if g["r2"] is not None else g["label"] for g in doc["groups"]]
        write_profile(out, base, calibration, Path(file).name, extra_values=extra, name=name, summary=summary,
                      date=date)
        profile["written"] = True
        lines += ["", f"profile written to {out}; use it with --system {out}"]
    lines += [f"note: {n}" for n in calibration.notes]
    return doc, lines


__all__ = ["fit_report"]
