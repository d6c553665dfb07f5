"""Training-step model vs the published Megatron-LM measurements shipped in ``commmodel/data``.

Each row of ``training_throughput.csv`` (Narayanan et al. 2021 Table 1; Korthikanti et al. 2022
Tables 3 and 5) becomes a model shape, a layout and a system (``dgx-a100``: Selene's DGX A100 80GB
nodes with 8× HDR InfiniBand), goes through :func:`commmodel.step.estimate.evaluate_single`, and is
compared in the paper's own FLOPs definition:

- Narayanan 2021: TFLOP/s per GPU counted with Megatron's 96·B·s·l·h²(…) formula (full recompute),
  i.e. the model's hardware FLOP/s with ``recompute="full"``.
- Korthikanti 2022: MFU (72·B·s·l·h²(…) model FLOPs over 312 TFLOP/s) and the iteration time, with
  selective recompute + sequence parallelism; the same rows with full recompute (iteration times
  printed in the notes) are checked as well.

Settings the papers do not print are filled by fixed rules, the same for every row (no per-row
tuning): micro-batch 1 where blank; vocabulary 51200 (GPT-2's, padded by Megatron); interleaving v
as stated in the notes, else (Narayanan's "interleaved 1F1B") the largest divisor of layers/pp that
is ≤ 3 and keeps m divisible by pp; a blank global batch scales the same model's dp = 1 row by dp.
"""

from __future__ import annotations

import re
from typing import Any

from commmodel.hardware.models import System
from commmodel.io.profiles import load_system, load_system_with_network
from commmodel.io.validation_data import read_training_out_of_sample, read_training_rows
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions
from commmodel.step.stacks import stack_options
from commmodel.validation.report import render_training
from commmodel.workload.model import TransformerModel
from commmodel.workload.presets import PRESETS

SYSTEM_NAME = "dgx-a100"
VOCAB_SIZE = 51200
A100_PEAK_FLOPS = 312e12  # the peak both papers divide by (A100 bf16/fp16 dense)


def _int(text: str) -> int | None:
    return int(float(text)) if text.strip() else None


def _source_key(row: dict[str, str]) -> str:
    return "narayanan2021" if row["source"].startswith("Narayanan") else "korthikanti2022"


def _vpp(row: dict[str, str], layers: int, pp: int, num_micro_batches: int) -> int:
    notes = row["notes"]
    stated = re.search(r"(\d+(?:B|T))/(\d+(?:B|T)) use interleaving \((\d+) stages per device\)", notes)
    if stated:
        sizes = {stated.group(1), stated.group(2)}
        return int(stated.group(3)) if any(s in row["model"] for s in sizes) else 1
    if "interleaved" in notes and pp > 1:
        for v in (3, 2):
            if (layers // pp) % v == 0 and num_micro_batches % pp == 0:
                return v
    return 1


PAPER_STACK = "megatron-lm-2021"
"""The stack the published tables ran (commmodel.step.stacks)."""
PAPER_OVERRIDES: dict[str, dict[str, Any]] = {
    # Megatron-LM of 2021-2022 reduced gradients after the last backward (no overlap: overlap_grad_reduce
    # came with Megatron-Core in 2023); the 2021 runs trained in fp16 with fp16 gradient buffers.
    "narayanan2021": {"grad_reduce_dtype": "fp16"},
    "korthikanti2022": {},
}
PAPER_DTYPE = {"narayanan2021": "fp16", "korthikanti2022": "bf16"}


def row_setup(row: dict[str, str], rows: list[dict[str, str]]) -> tuple[TransformerModel, Layout, str]:
    """Model, layout and metric kind ("tflops" or "mfu") for one published row."""
    layers, hidden, heads = int(row["layers"]), int(row["hidden"]), int(row["heads"])
    model = TransformerModel(name=row["model"], num_layers=layers, hidden_size=hidden, num_heads=heads,
                             vocab_size=VOCAB_SIZE, seq_len=int(row["seq_len"]),
                             dtype=PAPER_DTYPE[_source_key(row)])  # type: ignore[arg-type]
    tp, pp, n = int(row["tp"]), int(row["pp"]), int(row["n_gpus"])
    dp = _int(row["dp"]) or n // (tp * pp)
    micro = _int(row["micro_batch"]) or 1
    batch = _int(row["global_batch"])
    if batch is None:
        same = [r for r in rows if r["model"] == row["model"] and _int(r["dp"]) == 1 and _int(r["global_batch"])]
        batch = int(same[0]["global_batch"]) * dp if same else micro * dp * pp
    notes = row["notes"].lower()
    if "as in table 3" in notes:  # inherit the unprinted settings of the same model's Table 3 row
        table = [r for r in rows if r["model"] == row["model"] and r is not row and "selective" in r["notes"]]
        if table:
            notes = table[0]["notes"].lower()
            micro = _int(row["micro_batch"]) or _int(table[0]["micro_batch"]) or micro
            row = {**row, "notes": table[0]["notes"]}
    selective = "selective" in notes
    recompute = "selective" if selective else ("full" if "recompute" in notes else "none")
    sp = "sequence parallel" in notes and tp > 1
    vpp = _vpp(row, layers, pp, batch // (micro * dp))
    layout = Layout(tp=tp, pp=pp, dp=dp, micro_batch=micro, global_batch=batch, recompute=recompute,
                    sequence_parallel=sp, vpp=vpp)
    return model, layout, "tflops" if _source_key(row) == "narayanan2021" else "mfu"


def _iteration_times(notes: str) -> tuple[float | None, float | None]:
    found = re.search(r"iteration time ([\d.]+) s vs ([\d.]+) s with full recompute", notes)
    return (float(found.group(1)), float(found.group(2))) if found else (None, None)


def _full_mfu(notes: str) -> float | None:
    found = re.search(r"([\d.]+)% MFU with full activation recomputation", notes)
    return float(found.group(1)) / 100 if found else None


def validate_training(system: System | None = None, options: StepOptions | None = None,
                      stack: str = PAPER_STACK) -> list[dict[str, Any]]:
    """One record per comparison: row, source, metric, published, predicted, error_pct (signed), layout.

    Each row runs under ``stack`` (default: megatron-lm-2021, what the tables ran) with the paper's own
    settings (:data:`PAPER_OVERRIDES`), unless ``options`` is given.

    Metrics: ``tflops_per_gpu`` (Narayanan), ``mfu`` and ``iteration_time_s`` (Korthikanti, selective
    recompute), and ``mfu_full_recompute`` / ``iteration_time_full_recompute_s`` where the notes give them.
    """
    if system is None:
        system = load_system(SYSTEM_NAME)
    rows = read_training_rows()
    out: list[dict[str, Any]] = []
    for index, row in enumerate(rows, start=1):
        model, layout, kind = row_setup(row, rows)
        n = int(row["n_gpus"])
        opts = options or stack_options(stack, **PAPER_OVERRIDES[_source_key(row)])
        result = evaluate_single(model, system, n, layout, opts)
        base = {"row": index, "source": _source_key(row), "model": row["model"], "num_gpus": n,
                "layout": layout.model_dump(), "fits": bool(result["fits"])}

        def record(metric: str, published: float, predicted: float) -> None:
            out.append({**base, "metric": metric, "published": published, "predicted": predicted,
                        "error_pct": 100.0 * (predicted - published) / published})

        if kind == "tflops":
            record("tflops_per_gpu", float(row["tflops_per_gpu"]), result["hardware_tflops_per_gpu"])
            continue
        mfu_published = float(row["pct_peak"].rstrip("%")) / 100
        mfu = result["model_flops_per_step"] / (result["step_time_s"] * n * A100_PEAK_FLOPS)
        record("mfu", mfu_published, mfu)
        selective_s, full_s = _iteration_times(row["notes"])
        if selective_s is not None:
            record("iteration_time_s", selective_s, result["step_time_s"])
        full_layout = layout.model_copy(update={"recompute": "full"})
        full = evaluate_single(model, system, n, full_layout, opts)
        if full_s is not None:
            record("iteration_time_full_recompute_s", full_s, full["step_time_s"])
        full_mfu = _full_mfu(row["notes"])
        if full_mfu is not None:
            record("mfu_full_recompute", full_mfu,
                   full["model_flops_per_step"] / (full["step_time_s"] * n * A100_PEAK_FLOPS))
    return out


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """MAE and worst row of the throughput metrics (TFLOP/s, MFU) and of the iteration times."""
    def stats(metrics: tuple[str, ...]) -> dict[str, Any]:
        chosen = [r for r in records if r["metric"] in metrics]
        if not chosen:
            return {"count": 0, "mae_pct": None, "worst_pct": None, "worst_row": None}
        worst = max(chosen, key=lambda r: abs(r["error_pct"]))
        return {"count": len(chosen), "mae_pct": sum(abs(r["error_pct"]) for r in chosen) / len(chosen),
                "worst_pct": worst["error_pct"], "worst_row": f"{worst['row']} {worst['model']} ({worst['metric']})"}

    return {
        "throughput": stats(("tflops_per_gpu", "mfu")),
        "iteration_time": stats(("iteration_time_s",)),
        "full_recompute": stats(("iteration_time_full_recompute_s", "mfu_full_recompute")),
    }


# ---------------------------------------------------------------------------------------------------
# Out of sample: published runs that are not in training_throughput.csv (newer GPUs and software).

def _oos_model(spec: dict[str, Any]) -> TransformerModel:
    spec = dict(spec)
    preset = spec.pop("preset", None)
    if preset is None:
        return TransformerModel(**spec)
    return TransformerModel(**{**PRESETS[preset].model_dump(), **spec})


def _oos_metric(run: dict[str, Any], row: dict[str, Any], system: System, num_gpus: int) -> float:
    metric = run["metric"]
    if metric == "mfu":  # MPT and Llama 3 divide model FLOP/s by the dense bf16 peak
        return row["model_flops_per_step"] / (row["step_time_s"] * num_gpus * system.gpu.peak_for("bf16"))
    if metric == "tokens_per_s_per_gpu":
        return row["tokens_per_s"] / num_gpus
    return float(row[metric])


def validate_out_of_sample(runs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One record per out-of-sample run: id, metric, published, predicted, error_pct (signed),
    tolerance_pct, within (|error| <= tolerance), known_miss (the file's reason, or None), fits, layout."""
    out: list[dict[str, Any]] = []
    for run in runs if runs is not None else read_training_out_of_sample():
        model = _oos_model(run["model"])
        system = load_system_with_network(run["system"], run.get("network"))
        num_gpus = int(run["num_gpus"])
        layout = Layout(**run["layout"])
        result = evaluate_single(model, system, num_gpus, layout, StepOptions(**run.get("options", {})))
        predicted = _oos_metric(run, result, system, num_gpus)
        published = float(run["published"])
        error_pct = 100.0 * (predicted - published) / published
        tolerance = float(run["tolerance_pct"])
        out.append({"id": run["id"], "model": model.name, "system": run["system"], "num_gpus": num_gpus,
                    "gpu": system.gpu.name, "dtype": model.dtype, "layout": layout.model_dump(),
                    "metric": run["metric"], "published": published, "predicted": predicted,
                    "error_pct": error_pct, "tolerance_pct": tolerance, "within": abs(error_pct) <= tolerance,
                    "known_miss": run.get("known_miss"), "fits": bool(result["fits"]),
                    "step_time_s": result["step_time_s"]})
    return out


def run_training() -> dict[str, Any]:
    """The training-step section: Megatron-LM published rows vs the step model (DESIGN §9 targets)."""
    records = validate_training()
    summary = summarize(records)
    return {"records": records, "summary": summary, "text": render_training(records, summary)}
