"""Single-layout estimate: the vectorised evaluator on arrays of length 1, plus diagnosis and advice.

:func:`estimate` checks the layout, evaluates it with :func:`commmodel.step.evaluate.evaluate_layouts`
(arrays of length 1: the same code path as the planner), names the bound and the memory term that
broke the limit, and asks :mod:`commmodel.step.advice` for concrete changes, each re-evaluated.
:meth:`StepEstimate.to_json` is the DESIGN §8 ``estimate --json`` document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from commmodel.hardware.models import System

from commmodel.hardware.cluster import Cluster
from commmodel.step.advice import Advice, advise, moe_flags, straddle_flags
from commmodel.step.job import checked_model, default_options, with_layout_defaults
from commmodel.step.evaluate import BOUND_NAMES, EXPOSED_COMM_FLAG, MEMORY_TERMS, evaluate_layouts
from commmodel.step.layout import Layout, LayoutArrays
from commmodel.step.layout_rules import check_a2a_overlap, check_layout, check_recompute_offload, check_schedule
from commmodel.step.options import StepOptions
from commmodel.step.terms import applicable_terms
from commmodel.workload.model import TransformerModel



def check_single_layout(model: TransformerModel, num_gpus: int, layout: Layout, options: StepOptions) -> None:
    """The rules one explicit layout must meet before it is priced (a :class:`LayoutError`, one line): divisibility
    (:func:`check_layout`), the schedule's needs (:func:`check_schedule`), recompute against offloading
    (:func:`check_recompute_offload`) and what the EP all-to-all overlap needs (:func:`check_a2a_overlap`). The planner applies the same rules as masks over its whole space."""
    check_layout(model, num_gpus, layout)
    check_schedule(layout, options.schedule)
    check_recompute_offload((layout.recompute,), options.offload_modules)
    check_a2a_overlap(layout, options.moe_a2a_overlap and model.is_moe, options.schedule)


def evaluate_single(model: TransformerModel, system: System, num_gpus: int, layout: Layout,
                    options: StepOptions | None = None) -> dict[str, Any]:
    """Every column of :func:`evaluate_layouts` for one checked layout, as Python scalars."""
    check_single_layout(model, num_gpus, layout, options or StepOptions())
    return evaluate_layouts(model, system, num_gpus, LayoutArrays.from_layouts([layout]), options).row(0)


@dataclass(frozen=True)
class StepEstimate:
    """One layout's predicted step: the evaluator's row, its diagnosis and ranked advice."""

    model: TransformerModel
    """The workload."""
    system: System
    """The node type, as used (fewer GPUs per node already applied)."""
    num_gpus: int
    """GPUs in the job."""
    layout: Layout
    """The layout evaluated."""
    options: StepOptions
    """Step options used."""
    row: dict[str, Any]
    """Every evaluator column for this layout (seconds, bytes, FLOPs)."""
    advice: list[Advice] = field(default_factory=list)
    """Concrete changes ranked by predicted throughput gain, each with its new step time."""

    @property
    def bound(self) -> str:
        """compute, communication, bubble or memory (does not fit)."""
        return BOUND_NAMES[int(self.row["bound"])]

    @property
    def memory_terms(self) -> dict[str, float]:
        """Bytes per GPU by term."""
        return {t: self.row[f"memory/{t}_bytes"] for t in MEMORY_TERMS}

    @property
    def memory_broken_by(self) -> str | None:
        """The largest memory term when the layout does not fit, else None."""
        if self.row["fits"]:
            return None
        terms = self.memory_terms
        return max(terms, key=terms.__getitem__)

    def _memory_flag(self) -> str | None:
        """Why the layout does not fit: over the driver's total, or only inside the headroom every command keeps free
        (``StepOptions.memory_headroom_bytes``), which ``--memory-headroom 0`` would accept; None where it fits."""
        from commmodel.units import format_size_si

        if self.row["fits"]:
            return None
        hbm, used = self.system.gpu.hbm_bytes.value, self.row["memory_bytes_per_gpu"]
        headroom = self.options.memory_headroom_bytes
        if used <= hbm:
            return (f"does not fit: {format_size_si(used)} per GPU leaves {format_size_si(hbm - used)} of the "
                    f"{format_size_si(hbm)} free, less than the {format_size_si(headroom)} kept for the CUDA "
                    "context, NCCL buffers and fragmentation (--memory-headroom; 0 judges against the total)")
        largest = self.memory_terms[self.memory_broken_by or "weights"]
        return (f"does not fit: {format_size_si(used)} per GPU > {format_size_si(hbm)} of device memory; largest "
                f"term: {self.memory_broken_by} ({format_size_si(largest)})")

    @property
    def flags(self) -> list[str]:
        """Warnings worth a user's attention (bottlenecks, lossy compression, memory)."""
        out = []
        fraction = self.row["exposed_comm_fraction"]
        if fraction > EXPOSED_COMM_FLAG:
            out.append(f"exposed communication is {fraction:.0%} of the step (> {EXPOSED_COMM_FLAG:.0%}): "
                       "communication is a bottleneck")
        if memory := self._memory_flag():
            out.append(memory)
        if self.options.lossy and self.layout.dp > 1:
            out.append(f"gradient compression '{self.options.compression}' is lossy: check convergence")
        if not self.options.synchronous:
            out.append("asynchronous updates apply stale gradients: check convergence")
        out += moe_flags(self.system, self.layout, self.row)
        out += straddle_flags(self.system, self.layout)
        return out

    def breakdown(self) -> dict[str, dict[str, float]]:
        """Term -> {"link_s", "exposed_s"} for the terms that exist in this layout."""
        return {t: {"link_s": self.row[f"{t}/link_s"], "exposed_s": self.row[f"{t}/exposed_s"]}
                for t in applicable_terms(self.model, self.layout, self.options, self.row)}

    def to_json(self) -> dict[str, Any]:
        """The DESIGN §8 ``estimate --json`` document (plus model, system and memory details)."""
        r = self.row
        cluster_nodes = self.num_gpus // self.system.gpus_per_node
        return {
            "model": {"name": self.model.name, "num_params": self.model.num_params,
                      "num_layers": self.model.num_layers, "hidden_size": self.model.hidden_size,
                      "num_heads": self.model.num_heads, "num_kv_heads": self.model.num_kv_heads,
                      "ffn_hidden_size": self.model.ffn_hidden_size, "vocab_size": self.model.vocab_size,
                      "seq_len": self.model.seq_len, "num_experts": self.model.num_experts},
            "system": self.system.name,
            "num_gpus": self.num_gpus,
            "num_nodes": cluster_nodes,
            "layout": self.layout.model_dump(),
            "schedule": self.options.schedule,
            "num_micro_batches": int(r["num_micro_batches"]),
            "step_time_s": r["step_time_s"],
            "tokens_per_s": r["tokens_per_s"],
            "model_tflops_per_gpu": r["model_tflops_per_gpu"],
            "hardware_tflops_per_gpu": r["hardware_tflops_per_gpu"],
            "mfu": r["mfu"],
            "hfu": r["hfu"],
            "mfu_low_precision_peak": r["mfu_low_precision_peak"],
            "memory_bytes_per_gpu": r["memory_bytes_per_gpu"],
            "memory_limit_bytes": self.system.gpu.hbm_bytes.value,
            "memory_headroom_bytes": self.options.memory_headroom_bytes,
            "memory": {f"{t}_bytes": v for t, v in self.memory_terms.items()},
            "fits": bool(r["fits"]),
            "memory_broken_by": self.memory_broken_by,
            "bound": self.bound,
            "exposed_comm_fraction": r["exposed_comm_fraction"],
            "bubble_fraction": r["bubble_fraction"],
            "breakdown": self.breakdown(),
            "flags": self.flags,
            "advice": [a.to_json() for a in self.advice],
        }


def estimate(model: TransformerModel, system: System, num_gpus: int, layout: Layout,
             options: StepOptions | None = None, other_systems: dict[str, System] | None = None,
             with_advice: bool = True) -> StepEstimate:
    """Predict one training step of ``model`` on ``num_gpus`` GPUs of ``system`` with ``layout``.

    ``other_systems`` (label -> system, e.g. a faster network) are offered as advice when they help. Without
    ``options`` every default is the CLI's (:func:`commmodel.step.job.default_options`: the default stack, the GPU's
    dtype, the system's library); under a stack, a layout built without a ZeRO stage or sequence parallelism takes
    the stack's (:func:`commmodel.step.job.with_layout_defaults`), as ``commmodel estimate`` does.
    """
    model = checked_model(model)
    if options is None:
        options, model = default_options(model, system)
    layout = with_layout_defaults(layout, options)
    check_single_layout(model, num_gpus, layout, options)
    used = Cluster.for_gpus(system, num_gpus).system
    row = evaluate_layouts(model, system, num_gpus, LayoutArrays.from_layouts([layout]), options).row(0)
    advice = advise(model, system, num_gpus, layout, options, row, other_systems or {}) if with_advice else []
    return StepEstimate(model=model, system=used, num_gpus=num_gpus, layout=layout, options=options,
                        row=row, advice=advice)
