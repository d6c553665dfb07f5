"""Write a calibrated profile: the base system's own YAML with the fitted numbers replaced.

The output keeps the base file's terse form (catalogue ``link:`` and ``gpu:`` names) and adds only
the calibrated fields, each ``{value: "<number with unit>", source: "calibrated: <file>, <date> (...)"}``;
:func:`commmodel.io.profiles.load_system` merges them over the catalogue exactly as for a shipped
profile. The fit summary goes on top as YAML comments. The file is written to a temporary name,
loaded back with ``load_system`` and only then moved into place, so a profile that would not load
is never left behind.
"""

from __future__ import annotations

import copy
import datetime
import math
from pathlib import Path
from typing import Any

import yaml

from commmodel.calibrate.apply import Calibration
from commmodel.calibrate.knobs import KnobPath
from commmodel.errors import CalibrationError
from commmodel.io.outpath import replace_checked
from commmodel.units import format_rate, format_size, format_time


def base_raw(base: str) -> tuple[dict[str, Any], str]:
    """The base system's YAML mapping as written (library name or path) and its display name."""
    from commmodel.io.profiles import read_yaml, system_paths

    known = system_paths()
    path = known.get(base) or Path(base)
    raw = read_yaml(Path(path))
    if not isinstance(raw, dict):
        raise CalibrationError(f"--base {base}: the profile is not a YAML mapping")
    return copy.deepcopy(raw), str(raw.get("name") or Path(base).stem)


def _format_value(path: KnobPath, value: float) -> Any:
    if path[-1].endswith("bytes_per_s"):
        return format_rate(value, digits=6)
    if path[-1].endswith("_s"):
        return format_time(value, digits=6)
    return float(f"{value:.5g}")


def source_text(csv_name: str, date: str, detail: str) -> str:
    """``calibrated: <file>, <date> (<detail>)``: the source every calibrated number carries."""
    return f"calibrated: {csv_name}, {date}" + (f" ({detail})" if detail else "")


def apply_overrides(raw: dict[str, Any], values: dict[KnobPath, tuple[float, str]]) -> dict[str, Any]:
    """Put each ``path -> (value, source)`` into the raw system mapping (tiers, in-network reduction, gpu)."""
    out = copy.deepcopy(raw)
    for path, (value, source) in values.items():
        entry = {"value": _format_value(path, value), "source": source}
        if path[0] == "gpu":
            gpu = out.get("gpu")
            if isinstance(gpu, str):
                gpu = {"base": gpu}
            elif not isinstance(gpu, dict):
                raise CalibrationError("base profile has no gpu entry to calibrate")
            gpu[path[1]] = entry
            out["gpu"] = gpu
            continue
        tier = out.setdefault(path[0], {}) if path[0] == "host_libraries" else out.get(path[0])
        if not isinstance(tier, dict):
            raise CalibrationError(f"base profile has no {path[0]} tier to calibrate; pick a --base with one")
        node = tier
        for part in path[1:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = entry
    return out


def _comment_block(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)


def _changed(tier: Any) -> bool:
    """Whether the fit moved any of ``tier``'s numbers off the base profile's: a tier whose every number was kept
    stays *sourced* (no ``calibrated_sizes``), so its predictions do not claim a calibration (DESIGN §7)."""
    base = getattr(tier, "base_values", None) or {}
    return any(path not in base or not math.isclose(value, base[path], rel_tol=1e-9)
               for path, value in tier.values.items())


def write_profile(out_path: Path, base: str, calibration: Calibration, csv_name: str,
                  extra_values: dict[KnobPath, tuple[float, str]] | None = None, name: str | None = None,
                  summary: list[str] | None = None, date: str | None = None) -> Path:
    """Write the calibrated profile to ``out_path`` and check that it loads; returns the path."""
    from commmodel.io.profiles import load_system

    date = date or datetime.date.today().isoformat()
    raw, base_name = base_raw(base)
    values: dict[KnobPath, tuple[float, str]] = {}
    for tier in calibration.tiers:
        detail = tier.detail or (f"{tier.tier} set from {tier.group}; {tier.alpha_text}, "
                                 f"B {format_rate(tier.direct_bw_bytes_per_s)} busbw")
        for path, value in tier.values.items():
            rows = tier.knob_rows_bytes.get(path)
            where = f"; fitted to rows {format_size(rows[0])}-{format_size(rows[1])}" if rows and not tier.detail else ""
            if where and tier.peer_groups:
                where += f" and the bandwidth rows of {', '.join(tier.peer_groups)}"
            values[path] = (value, source_text(csv_name, date, detail + where))
    values.update(extra_values or {})
    if not values and not calibration.tiers:  # tiers without values: the base profile was kept (calibrate/choose.py)
        raise CalibrationError("nothing was calibrated (see the notes above); no profile written")
    doc = apply_overrides(raw, values)
    for tier in calibration.tiers:  # the sizes each tier was measured at: beyond them a prediction is extrapolated
        if tier.measured_sizes_bytes is not None and isinstance(doc.get(tier.tier), dict) and _changed(tier):
            low, high = tier.measured_sizes_bytes
            sizes = {"min_bytes": f"{low:.0f} B", "max_bytes": f"{high:.0f} B",
                     "source": source_text(csv_name, date, f"sizes of {tier.group}")}
            host = tier.tier == "host_libraries"  # keyed by library: host_libraries.<library>.calibrated_sizes
            (doc[tier.tier][next(iter(tier.values))[1]] if host else doc[tier.tier])["calibrated_sizes"] = sizes
    doc["name"] = name or f"{base_name}-calibrated"
    doc["description"] = f"{raw.get('description') or base_name} - calibrated from {csv_name} on {date}"
    sources = list(doc.get("sources") or [])
    doc["sources"] = sources + [source_text(csv_name, date, f"base profile {base_name}")]
    header = [f"{doc['name']}: written by `commmodel calibrate fit` on {date}", f"base: {base_name}; data: {csv_name}"]
    header += summary or []
    header += [f"note: {n}" for n in calibration.notes]
    text = _comment_block(header) + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    return replace_checked(Path(out_path), text, lambda tmp: load_system(str(tmp)), CalibrationError,
                           "the calibrated profile")
