"""nccl-tests' ``-J`` JSON report (file version 2: config, results, args, env) read into the rows and environment of
:class:`~commmodel.io.nccl_tests.Imported`, with the text reader's rules for ops, ranks and nodes
(:func:`~commmodel.io.nccl_tests._finish`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from commmodel.errors import CalibrationError
from commmodel.io.nccl_tests import Imported, _finish, _summarise, measured_row_ok, op_from_program


def _nccl_version_text(code: Any) -> str:
    """22703 -> '2.27.3' (NCCL_VERSION_CODE = major*10000 + minor*100 + patch since 2.9)."""
    try:
        value = int(code)
    except (TypeError, ValueError):
        return str(code)
    if value >= 10000:
        return f"{value // 10000}.{value // 100 % 100}.{value % 100}"
    return f"{value // 1000}.{value // 100 % 10}.{value % 100}"


def parse_json(text: str, path: Path, options: dict[str, Any]) -> Imported:
    """Parse an nccl-tests ``-J`` report (JSON file version 2: config, results, args, env)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise CalibrationError(
            f"{path}: malformed JSON at line {err.lineno} column {err.colno} ({err.msg}); truncated report?") from None
    except RecursionError:  # json's decoder recurses once per nesting level
        raise CalibrationError(f"{path}: JSON nested too deep; not an nccl-tests -J report") from None
    except ValueError as err:  # int() of a 5000-digit number
        from commmodel.io.yaml_read import too_many_digits

        raise too_many_digits(path, text, CalibrationError) or CalibrationError(f"{path}: not JSON ({err})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise CalibrationError(f"{path}: JSON without a 'results' list; not an nccl-tests -J report")
    try:
        return _parse_report(doc, path, options)
    except CalibrationError:
        raise
    except (AttributeError, TypeError, ValueError, KeyError, OverflowError) as err:  # a field of another shape
        raise CalibrationError(f"{path}: a field of an unexpected type ({type(err).__name__}: {err}); not an "
                               "nccl-tests -J report (file version 2)") from None


def _check_verdict(doc: dict[str, Any], path: Path) -> None:
    """A one-line error where the report says its run failed: ``out_of_bounds.okay`` false (results outside the
    check's bounds) or a non-empty ``errors`` list (nccl-tests' JSON writer, file version 2)."""
    bounds = doc.get("out_of_bounds")
    if isinstance(bounds, dict) and str(bounds.get("okay", "true")).lower() == "false":
        raise CalibrationError(f"{path}: out_of_bounds {bounds}: nccl-tests says the run's results failed its check; "
                               "its timings are not a measurement to fit: fix the run and import the new report")
    errors = doc.get("errors")
    if isinstance(errors, list) and errors:
        raise CalibrationError(f"{path}: the report lists errors ({str(errors[0])[:80]!r}): the run failed; fix it "
                               "and import the new report")


def _parse_report(doc: dict[str, Any], path: Path, options: dict[str, Any]) -> Imported:
    """The rows and environment of a parsed ``-J`` report (its fields' types not checked: the caller maps a
    field of the wrong type to one line)."""
    out = Imported()
    _check_verdict(doc, path)
    for key, kind in (("config", dict), ("args", list), ("env", list)):
        if doc.get(key) is not None and not isinstance(doc[key], kind):
            raise CalibrationError(f"{path}: '{key}' is a {type(doc[key]).__name__}, not a {kind.__name__} as in an "
                                   f"nccl-tests -J report (file version 2); the file was edited or is another format")
    config = doc.get("config") or {}
    args = doc.get("args") or []
    env_list = [e for e in doc.get("env") or [] if isinstance(e, str)]
    env_vars = dict(e.split("=", 1) for e in env_list if "=" in e)
    op = options.get("op") or (op_from_program(args[0]) if args else None) or op_from_program(path.name)
    devices = [d for d in config.get("devices") or [] if isinstance(d, dict)]
    ranks_seen = {}
    if devices and options.get("ranks") is None:
        per_process = int(config.get("nthreads", 1)) * int(config.get("ngpus", 1))
        for proc, device in enumerate(devices):
            for local in range(per_process):
                ranks_seen[proc * per_process + local] = str(device.get("hostname", ""))
    if "nccl_version" in doc:
        out.env["nccl_version"] = _nccl_version_text(doc["nccl_version"])
    if devices:
        out.env["devices"] = _summarise([str(d.get("device_info", "")) for d in devices])
    if args:
        out.env["command"] = " ".join(str(a) for a in args)
    algorithm = options.get("algorithm") or env_vars.get("NCCL_ALGO", "auto").lower()
    protocol = options.get("protocol") or env_vars.get("NCCL_PROTO", "").lower()
    key = "in_place" if options.get("in_place") else "out_of_place"
    rows = []
    for position, result in enumerate(doc["results"]):
        where = f"{path}: results[{position}]"
        if not isinstance(result, dict) or "size" not in result:
            raise CalibrationError(f"{where}: not an nccl-tests result (needs size and {key})")
        part = result.get(key)
        if part is None:
            continue
        time_us = part.get("time", part.get("cpu_time"))
        try:
            size = float(result["size"])
            time_us, algbw, busbw = float(time_us), float(part["alg_bw"]), float(part["bus_bw"])
        except (TypeError, ValueError, KeyError):
            raise CalibrationError(f"{where}: size/time/alg_bw/bus_bw missing or not numbers") from None
        wrong = part.get("nwrong")
        if not measured_row_ok(where, size, time_us, algbw, busbw, None if wrong is None else str(wrong)):
            continue
        size, time_s = int(size), time_us * 1e-6
        rows.append({
            "size_bytes": size, "group": "all", "algorithm": algorithm, "protocol": protocol,
            "dtype": str(result.get("type", "")), "time_s_median": time_s, "time_s_p10": None, "time_s_p90": None,
            "algbw_GBps": algbw, "busbw_GBps": busbw, "time_stat": "mean", "source": f"nccl-tests -J: {path.name}",
        })
    options = {**options, "op": op}
    _finish(out, path, op, ranks_seen, options, rows, config.get("iterations"))
    if not out.rows:
        raise CalibrationError(f"{path}: the JSON report has no {key.replace('_', '-')} results")
    out.env["hostnames"] = str(len({h for h in ranks_seen.values()})) if ranks_seen else out.env.get("hostnames", "")
    return out
