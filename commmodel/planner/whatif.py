"""What-if: the same model, GPU count and global batch planned on several systems or networks.

Each target gets a full search; the answer puts their best layouts side by side with the change
in step time and tokens/s against the first target (the baseline) and what changed in the best
layout, explained by the step terms that moved most (DESIGN §6 "what-if").
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from commmodel.errors import LayoutError
from commmodel.hardware.models import System

from commmodel.hardware.cluster import Cluster
from commmodel.planner.explain import changed_fields, explain_pair, layout_label
from commmodel.planner.search import PlanResult, default_global_batch, plan
from commmodel.planner.space import SearchSpace, StackVariant
from commmodel.step.layout import RECORD_FIELDS


@dataclass(frozen=True)
class ComparisonEntry:
    """One target of a comparison: its search and its best layout."""

    label: str
    """What the user called the target (``dgx-a100``, ``dgx-h100+eth-100g:1``)."""
    result: PlanResult
    """The full search on this target."""

    @property
    def best(self) -> dict[str, Any] | None:
        """Every column of the best layout, or None when nothing fits."""
        return self.result.row(0) if self.result.num_feasible else None


@dataclass(frozen=True)
class Comparison:
    """Several targets, the first being the baseline."""

    model_name: str
    """Model compared."""
    num_gpus: int
    """GPUs on every target."""
    global_batch: int
    """Global batch used on every target (so step times compare like for like)."""
    entries: tuple[ComparisonEntry, ...]
    """Targets in the order given."""

    def rows(self) -> list[dict[str, Any]]:
        """One record per target: best layout, step time, tokens/s, exposed comm, delta vs the baseline."""
        base = self.entries[0].best
        out = []
        for entry in self.entries:
            best = entry.best
            record: dict[str, Any] = {
                "label": entry.label, "system": entry.result.system_name,
                "evaluated": entry.result.num_evaluated, "feasible": entry.result.num_feasible,
            }
            if best is None:
                record.update(fits=False, best_layout=None, step_time_s=None, tokens_per_s=None,
                              exposed_comm_fraction=None, speedup_vs_baseline=None, delta_step_time_s=None,
                              changed_vs_baseline=None, explanation=None)
                out.append(record)
                continue
            record.update(
                fits=True,
                best_layout={k: best[k] for k in RECORD_FIELDS},
                best_label=layout_label(best),
                step_time_s=best["step_time_s"], tokens_per_s=best.get("tokens_per_s"),
                model_tflops_per_gpu=best.get("model_tflops_per_gpu"), mfu=best.get("mfu"),
                exposed_comm_fraction=best.get("exposed_comm_fraction"),
                memory_bytes_per_gpu=best.get("memory_bytes_per_gpu"),
            )
            if base is None:
                record.update(speedup_vs_baseline=None, delta_step_time_s=None, changed_vs_baseline=None,
                              explanation=None)
            else:
                record["speedup_vs_baseline"] = base["step_time_s"] / best["step_time_s"]
                record["delta_step_time_s"] = best["step_time_s"] - base["step_time_s"]
                record["changed_vs_baseline"] = changed_fields(base, best)
                record["explanation"] = None if entry is self.entries[0] else explain_pair(
                    best, base, label_a=entry.label, label_b=self.entries[0].label)["text"]
            out.append(record)
        return out


def compare(model: Any, targets: list[tuple[str, System]], num_gpus: int, *, global_batch: int | None = None,
            gpus_per_node: int | None = None, space: SearchSpace | None = None, options: Any = None,
            evaluator: Any = None) -> Comparison:
    """Plan ``model`` on ``num_gpus`` GPUs of each ``(label, system)`` target with one shared global batch (without
    ``options``, each target under every default of the CLI: :func:`commmodel.planner.search.plan`)."""
    if not targets:
        raise LayoutError("compare needs at least one (label, system) target, e.g. [('dgx-h100', load_system("
                          "'dgx-h100'))]")
    if global_batch is None:
        first = Cluster.for_gpus(targets[0][1], num_gpus, gpus_per_node).system
        global_batch = default_global_batch(model.num_params, model.seq_len, num_gpus, first.gpus_per_node)
    entries = tuple(
        ComparisonEntry(label=label, result=plan(model, system, num_gpus, global_batch=global_batch,
                                                 gpus_per_node=gpus_per_node, space=space, options=options,
                                                 evaluator=evaluator))
        for label, system in targets
    )
    return Comparison(model_name=model.name, num_gpus=num_gpus, global_batch=global_batch, entries=entries)


def in_dtype(model: Any, dtype: str, systems: list[System]) -> Any:
    """``model`` trained in ``dtype``, checked against every system's GPU (one-line error when one has no peak for it:
    :func:`~commmodel.step.precision.check_precision`)."""
    from commmodel.step.precision import check_precision
    from commmodel.workload.model import TransformerModel

    for system in systems:
        check_precision(system.gpu, dtype)
    return model if dtype == model.dtype else TransformerModel.model_validate({**model.model_dump(), "dtype": dtype})


def compare_grid(model: Any, targets: list[tuple[str, System]], num_gpus: int, *, libraries: list[str] | None = None,
                 dtypes: list[str] | None = None, stacks: list[StackVariant] | None = None,
                 global_batch: int | None = None, gpus_per_node: int | None = None, space: SearchSpace | None = None,
                 options: Any, flag: str = "--library ") -> tuple[Comparison, list[dict[str, str]]]:
    """One comparison over every target × stack × dtype × library, the first the baseline, and each entry's
    ``stack``, ``library`` and ``dtype``. Without ``stacks`` one stack (``options`` and ``space``); without
    ``libraries`` each target runs its own default (:func:`~commmodel.collectives.libraries.resolve_library`, which
    also refuses a device library on the other vendor's GPUs); without ``dtypes`` each target's default for the
    model's (:func:`~commmodel.step.precision.default_dtype`: fp16 where the GPU has no bf16, as ``plan`` picks it).
    Each label adds what varies: ``"<target> fsdp2 fp8 with gloo"``. One global batch for all (the first entry's
    default when none is given), so step times compare like for like."""
    from commmodel.collectives.libraries import resolve_library
    from commmodel.step.precision import default_dtype

    given = {d: in_dtype(model, d, [s for _, s in targets]) for d in dtypes or []}
    variants = stacks or [StackVariant(options.stack, options, space)]
    entries, keys, batch = [], [], global_batch
    for label, system in targets:
        own = default_dtype(system.gpu, model.dtype)
        models = given or {own: in_dtype(model, own, [system])}
        for stack, (dtype, one_model), lib in itertools.product(variants, models.items(), libraries or [None]):
            name = resolve_library(system, lib, flag)[0]
            one = compare(one_model, [(label, system)], num_gpus, global_batch=batch, gpus_per_node=gpus_per_node,
                          space=stack.space,
                          options=stack.options.model_copy(update={"library": name}).for_training_dtype(dtype))
            batch = one.global_batch
            tag = (label + (f" {stack.name}" if stacks else "") + (f" {dtype}" if dtypes else "")
                   + (f" with {name}" if libraries else ""))
            entries.append(ComparisonEntry(label=tag, result=one.entries[0].result))
            keys.append({"stack": stack.name, "library": name, "dtype": dtype})
    return Comparison(model_name=model.name, num_gpus=num_gpus, global_batch=batch, entries=tuple(entries)), keys


def library_notes(rows: list[dict[str, Any]]) -> list[str]:
    """For rows of :meth:`Comparison.rows` carrying a ``library``: each one's step-time ratio to the baseline and where
    it comes from (exposed communication, the libraries' own cost lines)."""
    from commmodel.collectives.libraries import get_library

    base = rows[0]
    out = []
    for r in rows[1:]:
        if not (r["fits"] and base["fits"]):
            continue
        ratio = r["step_time_s"] / base["step_time_s"]
        mine, theirs = get_library(r["library"]), get_library(base["library"])
        said = r["explanation"]
        terms = said.split("largest exposed terms: ")[-1] if "largest exposed terms" in said else ""
        comm = [t.split(" ")[0] for t in terms.split("; ") if "/" in t.split(" ")[0]]
        which = f" (largest: {', '.join(comm[:2])})" if comm else ""
        out.append(
            f"{r['label']} takes {ratio:.2f}x the step time of {base['label']}: exposed communication "
            f"{r['exposed_comm_fraction']:.1%} of its step vs {base['exposed_comm_fraction']:.1%}{which}, because "
            f"{mine.cost_why}, where {theirs.cost_why}")
    return out
