"""Model vs the published measurements shipped in ``commmodel/data`` (``commmodel validate``).

A **validator** is one section of the report: a name, a title, and a function returning
``{"records": [...], "summary": [...]}`` (plain dicts, JSON-ready). :data:`VALIDATORS` lists them in
order; another part of commmodel adds its section with :func:`register_validator` (the training-step
rows, for instance) and ``commmodel validate`` prints every section.

The collective section reads ``nccl_tests.csv`` (published nccl-tests rows, see data/README.md) and
``nccl_setups.yaml`` (which shipped profile describes each setup, how nccl-tests was launched, what
the publisher forced) and prices every row with :func:`commmodel.collectives.collective_cost`.
Errors per setup and size band (DESIGN §9):

* small, S ≤ 64 KiB (latency-bound): predicted / measured **time**; target: within a factor 1.5;
* mid, 64 KiB < S < 64 MiB: busbw relative error, reported without a target;
* large, S ≥ 64 MiB (bandwidth-bound): **busbw** relative error; target: median ≤ 10 %, worst ≤ 25 %.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from commmodel.errors import CommModelError

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
NCCL_TESTS_CSV = DATA_DIR / "nccl_tests.csv"
NCCL_SETUPS_YAML = DATA_DIR / "nccl_setups.yaml"
NCCL_OUT_OF_SAMPLE_YAML = DATA_DIR / "nccl_out_of_sample.yaml"

SMALL_MAX_BYTES = 64 * 1024
"""Upper edge of the latency-bound band (≤ 64 KiB)."""
LARGE_MIN_BYTES = 64 * 1024**2
"""Lower edge of the bandwidth-bound band (≥ 64 MiB)."""
TARGET_LARGE_MEDIAN = 0.10
"""DESIGN §9: large-message busbw within 10% median per setup."""
TARGET_LARGE_WORST = 0.25
"""DESIGN §9: large-message busbw within 25% worst per setup."""
TARGET_SMALL_FACTOR = 1.5
"""DESIGN §9: small-message time within a factor 1.5."""

_OP_NAMES = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
             "alltoall": "all_to_all", "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "send_recv"}


@dataclass(frozen=True)
class Validator:
    """One section of ``commmodel validate``."""

    name: str
    """Key of the section in the JSON document (e.g. "collectives")."""
    title: str
    """Heading of the human table."""
    run: Callable[[], dict[str, Any]]
    """Returns {"records": [...], "summary": [...]} of plain, JSON-ready dicts."""


VALIDATORS: list[Validator] = []
"""Every section, in print order."""


def register_validator(validator: Validator) -> Validator:
    """Add a section to ``commmodel validate`` (idempotent by name)."""
    VALIDATORS[:] = [v for v in VALIDATORS if v.name != validator.name] + [validator]
    return validator


def band_of(size_bytes: float) -> str:
    """small (≤ 64 KiB), mid, or large (≥ 64 MiB)."""
    if size_bytes <= SMALL_MAX_BYTES:
        return "small"
    if size_bytes >= LARGE_MIN_BYTES:
        return "large"
    return "mid"


def read_nccl_rows(path: Path = NCCL_TESTS_CSV) -> list[dict[str, str]]:
    """The published nccl-tests rows as dictionaries of strings."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def read_setups(path: Path = NCCL_SETUPS_YAML) -> dict[str, dict[str, Any]]:
    """setup_id -> {system, gpus_per_process, algorithm?, algorithms?}."""
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    if not isinstance(data, dict):
        raise CommModelError(f"{path}: must map setup ids to {{system, gpus_per_process, ...}}")
    return data


def _float(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None


def parse_collective(label: str) -> str:
    """The canonical op of a CSV collective label: "all_reduce (in-place)" -> all_reduce."""
    key = re.split(r"[\s(]", label.strip(), maxsplit=1)[0]
    if key not in _OP_NAMES:
        raise CommModelError(f"nccl_tests.csv: unknown collective label {label!r}")
    return _OP_NAMES[key]


def measured_time_s(row: dict[str, str], op: str, num_ranks: int) -> float:
    """Published time: the time column, else S/algbw, else S·factor/busbw."""
    from commmodel.collectives import busbw_factor

    size = float(row["size_bytes"])
    time_us, algbw, busbw = _float(row["time_us"]), _float(row["algbw_GBps"]), _float(row["busbw_GBps"])
    if time_us:
        return time_us * 1e-6
    if algbw:
        return size / (algbw * 1e9)
    if busbw:
        return size * float(busbw_factor(op, num_ranks)) / (busbw * 1e9)
    return float("nan")


def collective_records(rows: list[dict[str, str]] | None = None,
                       setups: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One record per published row: measured and predicted time and busbw, band, errors."""
    from commmodel.collectives import busbw_factor, collective_cost
    from commmodel.hardware.models import Cluster
    from commmodel.io.profiles import load_system

    rows = read_nccl_rows() if rows is None else rows
    setups = read_setups() if setups is None else setups
    records = []
    for row in rows:
        setup_id = row["setup_id"]
        if setup_id not in setups:
            raise CommModelError(f"nccl_setups.yaml has no entry for setup {setup_id!r}; add its system profile")
        setup = setups[setup_id]
        op = parse_collective(row["collective"])
        n, nodes = int(row["n_gpus"]), int(row["n_nodes"])
        gpus_per_node = n // nodes
        system = Cluster.for_gpus(load_system(setup["system"]), n, gpus_per_node).system
        algorithm = setup.get("algorithms", {}).get(row["collective"], setup.get("algorithm", "auto"))
        size = float(row["size_bytes"])
        cost = collective_cost(op, size, system, n, algorithm=algorithm, selection="nccl",  # NCCL's own choice
                               gpus_per_process=int(setup.get("gpus_per_process", 1)))
        factor = float(busbw_factor(op, n))
        meas_t = measured_time_s(row, op, n)
        pred_t = float(cost.time_s)
        meas_bus = size * factor / meas_t / 1e9
        pred_bus = float(cost.busbw_bytes_per_s) / 1e9
        records.append({
            "setup_id": setup_id, "system": setup["system"], "op": op, "collective": row["collective"],
            "num_ranks": n, "gpus_per_node": gpus_per_node, "size_bytes": size, "band": band_of(size),
            "forced_algorithm": None if algorithm == "auto" else algorithm,
            "algorithm": str(cost.algorithm), "protocol": str(cost.protocol),
            "measured_time_s": meas_t, "predicted_time_s": pred_t, "time_ratio": pred_t / meas_t,
            "measured_busbw_GBps": meas_bus, "predicted_busbw_GBps": pred_bus,
            "busbw_error": pred_bus / meas_bus - 1.0,
            "source": row["source"],
        })
    return records


def _band_summary(recs: list[dict[str, Any]], band: str) -> dict[str, Any]:
    if band == "small":
        factors = np.array([max(r["time_ratio"], 1.0 / r["time_ratio"]) for r in recs])
        ratios = np.array([r["time_ratio"] for r in recs])
        worst = float(factors.max())
        return {"rows": len(recs), "metric": "time ratio (pred/meas)", "median": float(np.median(ratios)),
                "worst": float(ratios[np.argmax(factors)]), "worst_factor": worst,
                "target": f"factor <= {TARGET_SMALL_FACTOR}", "passed": worst <= TARGET_SMALL_FACTOR}
    errors = np.array([abs(r["busbw_error"]) for r in recs])
    signed = np.array([r["busbw_error"] for r in recs])
    out = {"rows": len(recs), "metric": "busbw error (pred/meas - 1)", "median": float(np.median(errors)),
           "worst": float(signed[np.argmax(errors)]), "median_signed": float(np.median(signed))}
    if band == "large":
        med, worst = float(np.median(errors)), float(errors.max())
        out.update(target=f"median <= {TARGET_LARGE_MEDIAN:.0%}, worst <= {TARGET_LARGE_WORST:.0%}",
                   passed=med <= TARGET_LARGE_MEDIAN and worst <= TARGET_LARGE_WORST)
    else:
        out.update(target="none (reported)", passed=None)
    return out


def summarize_collectives(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per setup × band: rows, median and worst error, target and whether it is met."""
    out = []
    for setup_id in dict.fromkeys(r["setup_id"] for r in records):
        mine = [r for r in records if r["setup_id"] == setup_id]
        for band in ("small", "mid", "large"):
            recs = [r for r in mine if r["band"] == band]
            if recs:
                out.append({"setup_id": setup_id, "system": mine[0]["system"], "band": band,
                            **_band_summary(recs, band)})
    return out


def run_collectives() -> dict[str, Any]:
    """The collective section: every published nccl-tests row and its per-setup, per-band summary."""
    records = collective_records()
    return {"records": records, "summary": summarize_collectives(records)}


def _with_host(system: Any, point: dict[str, Any]) -> Any:
    """The composed system with the point's host facts: ``host_memory_bw`` (``{value, source}``) and
    ``gpus_per_host_link`` (GPUs sharing one PCIe link to the CPU), both optional."""
    from commmodel.hardware.models import Sourced
    from commmodel.units import parse_rate_bytes_per_s

    update: dict[str, Any] = {}
    if "host_memory_bw" in point:
        mem = point["host_memory_bw"]
        update["host_memory_bw_bytes_per_s"] = Sourced[float](value=parse_rate_bytes_per_s(mem["value"]),
                                                              source=mem["source"])
    if "gpus_per_host_link" in point:
        update["scale_up"] = system.scale_up.model_copy(update={"gpus_per_host_link": point["gpus_per_host_link"]})
    return system.model_copy(update=update) if update else system


def out_of_sample_records(path: Path = NCCL_OUT_OF_SAMPLE_YAML) -> list[dict[str, Any]]:
    """Price every prose reference point of ``nccl_out_of_sample.yaml`` on a system composed from the
    catalogue: one all-reduce each, predicted vs published busbw, and whether it is within tolerance."""
    from commmodel.collectives import collective_cost
    from commmodel.io.profiles import compose_from_names
    from commmodel.units import parse_size_bytes

    points = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for point_id, p in points.items():
        system = compose_from_names(p["gpu"], p["gpus_per_node"], p["scale_up"], p.get("scale_out"),
                                    p.get("nics_per_node"))
        system = _with_host(system, p)
        size = parse_size_bytes(p["size"])
        cost = collective_cost("all_reduce", size, system, p["ranks"], algorithm=p.get("algorithm", "auto"),
                               selection="nccl")  # what NCCL runs by default
        pred = float(cost.busbw_bytes_per_s) / 1e9
        err = pred / p["busbw_GBps"] - 1.0
        out.append({"id": point_id, "system": system.name, "num_ranks": p["ranks"], "size_bytes": size,
                    "algorithm_asked": p.get("algorithm", "auto"), "algorithm": str(cost.algorithm),
                    "protocol": str(cost.protocol), "measured_busbw_GBps": p["busbw_GBps"],
                    "predicted_busbw_GBps": pred, "busbw_error": err, "tolerance": p["tolerance"],
                    "within": abs(err) <= p["tolerance"], "status": p.get("status", "expected"),
                    "source": p["source"]})
    return out


register_validator(Validator("collectives", "Collectives vs published nccl-tests rows (commmodel/data/nccl_tests.csv)",
                             run_collectives))


def run_training() -> dict[str, Any]:
    """The training-step section: Megatron-LM published rows vs the step model (DESIGN §9 targets)."""
    from commmodel.io.validation_training import summarize, validate_training

    records = validate_training()
    summary = summarize(records)
    lines = [f"{'row':>3}  {'model':<22} {'gpus':>5}  {'metric':<32} {'published':>10} {'predicted':>10} {'error':>8}"]
    for r in records:
        lines.append(f"{r['row']:>3}  {r['model'][:22]:<22} {r['num_gpus']:>5}  {r['metric']:<32} "
                     f"{r['published']:>10.4g} {r['predicted']:>10.4g} {r['error_pct']:>+7.1f}%")
    for key, target in (("throughput", "MAE <= 10%, worst <= 20%"), ("iteration_time", "within 15%"),
                        ("full_recompute", "reported")):
        s = summary[key]
        if s["count"]:
            lines.append(f"{key}: {s['count']} rows, MAE {s['mae_pct']:.1f}%, worst {s['worst_pct']:+.1f}% "
                         f"({s['worst_row']}); target {target}")
    return {"records": records, "summary": summary, "text": "\n".join(lines)}


register_validator(Validator("training", "Training steps vs published Megatron-LM rows (commmodel/data/training_throughput.csv)",
                             run_training))
