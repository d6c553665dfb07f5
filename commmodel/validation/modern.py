"""The step model vs published runs of today's training stacks (``commmodel/data/training_modern.yaml``, issue 12).

Each run is priced with the stack it ran (``--stack``), its dtype, and the knobs the source documented; the
records are scored per stack and per GPU generation (MAE and worst). Mapping of the file's fields:

- ``dtype``: ``fp8-rowwise`` (torchao rowwise scales) is its own quantisation recipe
  (:func:`commmodel.step.precision.quantisation_bytes`: the 16-bit transposed copy its column-wise scales need).
- ``options``: ``flash_attention``, ``tp_comm_overlap``, ``fp8_param_allgather`` map to StepOptions;
  ``async_tp`` is PyTorch's TP comm overlap (``tp_comm_overlap``); ``distributed_optimizer`` is the layout's
  ZeRO 1 already; ``torch_compile`` sets ``elementwise``: true → ``compiled`` (fused regions plus torchtitan's GQA
  K/V copy), false → ``eager`` (torchtitan's Llama op by op, :mod:`commmodel.workload.eager`); a run that states
  ``elementwise`` itself (the MPT rows: llm-foundry's own fused kernels) keeps it. ``compile_elementwise=False``
  ignores the flag (the stack's own default), a sensitivity the benchmark prints. ``optimizer`` names the optimizer
  step's implementation (:data:`OPTIMIZER_BYTES`) and sets ``optimizer_bytes_per_param``.
"""

from __future__ import annotations

from typing import Any

from commmodel.io.profiles import load_system_with_network
from commmodel.io.validation_data import read_training_modern
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.stacks import stack_options
from commmodel.step.terms import FOREACH_ADAMW_BYTES_PER_PARAM, FSDP2_FUSED_ADAMW_BYTES_PER_PARAM
from commmodel.validation.training import _oos_metric, _oos_model

_OPTION_MAP = {"flash_attention": "flash_attention", "tp_comm_overlap": "tp_comm_overlap",
               "async_tp": "tp_comm_overlap", "fp8_param_allgather": "fp8_param_allgather"}
_NOT_MODELLED = ("torch_compile", "distributed_optimizer")
OPTIMIZER_BYTES = {"foreach-adamw": FOREACH_ADAMW_BYTES_PER_PARAM, "fused-adamw": FSDP2_FUSED_ADAMW_BYTES_PER_PARAM}
"""``optimizer_bytes_per_param`` of a run's ``optimizer`` option (commmodel.step.terms)."""
_COMPILE_ELEMENTWISE = {True: "compiled", False: "eager"}
"""``elementwise`` of a run that documents ``torch_compile``."""

GENERATIONS = {80: "A100 (sm_80)", 90: "H100/H200 (sm_90)", 100: "B200/GB200 (sm_100)", 103: "B300/GB300 (sm_103)"}
"""GPU generation label per compute capability."""


def run_options(run: dict[str, Any], stack: str | None = None, compile_elementwise: bool = True) -> Any:
    """StepOptions of one run: its stack (or ``stack``) with the knobs the source documented, ``torch_compile`` as
    ``elementwise`` (unless ``compile_elementwise`` is off: then the stack's own ``elementwise``)."""
    knobs: dict[str, Any] = {}
    for key, value in (run.get("options") or {}).items():
        if key == "torch_compile" and compile_elementwise:
            knobs.setdefault("elementwise", _COMPILE_ELEMENTWISE[bool(value)])
        elif key == "optimizer":
            knobs["optimizer_bytes_per_param"] = OPTIMIZER_BYTES[value]
        elif key in _OPTION_MAP:
            knobs[_OPTION_MAP[key]] = bool(value) or knobs.get(_OPTION_MAP[key], False)
        elif key not in _NOT_MODELLED:
            knobs[key] = value
    return stack_options(stack or run["stack"], **knobs)


def validate_modern(runs: list[dict[str, Any]] | None = None, stack: str | None = None,
                    compile_elementwise: bool = True,
                    overrides: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One record per run: id, stack, dtype, gpu generation, metric, published, predicted, error_pct, fits.
    ``overrides``: StepOptions fields set on every run of a stack ({stack: {field: value}}), for sensitivities."""
    out = []
    for run in runs if runs is not None else read_training_modern():
        model = _oos_model({**run["model"], "dtype": run["dtype"]})
        system = load_system_with_network(run["system"], run.get("network"))
        num_gpus = int(run["num_gpus"])
        layout = Layout(**run["layout"])
        options = run_options(run, stack, compile_elementwise)
        options = options.model_copy(update=(overrides or {}).get(options.stack, {}))
        result = evaluate_single(model, system, num_gpus, layout, options)
        predicted = _oos_metric(run, result, system, num_gpus)
        published = float(run["published"])
        out.append({"id": run["id"], "stack": options.stack, "dtype": run["dtype"], "gpu": system.gpu.name,
                    "generation": GENERATIONS.get(system.gpu.sm_version(), f"sm_{system.gpu.sm_version()}"),
                    "num_gpus": num_gpus, "layout": layout.model_dump(), "metric": run["metric"],
                    "published": published, "predicted": predicted,
                    "error_pct": 100.0 * (predicted - published) / published,
                    "tolerance_pct": float(run["tolerance_pct"]), "fits": bool(result["fits"])})
    return out


def score(records: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """{group: {count, mae_pct, worst_pct, worst_id}} of the records grouped by ``key`` ("stack", "generation")."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(str(r[key]), []).append(r)
    out = {}
    for name, rows in sorted(groups.items()):
        worst = max(rows, key=lambda r: abs(r["error_pct"]))
        out[name] = {"count": len(rows), "mae_pct": sum(abs(r["error_pct"]) for r in rows) / len(rows),
                     "worst_pct": worst["error_pct"], "worst_id": worst["id"]}
    return out


def run_modern() -> dict[str, Any]:
    """The ``commmodel validate`` section of today's stacks: records, and MAE / worst per stack and per generation."""
    from commmodel.validation.report import render_modern

    records = validate_modern()
    scores = {key: score(records, key) for key in ("stack", "generation")}
    return {"records": records, "summary": scores, "text": render_modern(records, scores)}


__all__ = ["GENERATIONS", "run_modern", "run_options", "score", "validate_modern"]
