"""The assumption lines of a stack: what every step command prints (human and ``--json`` ``"assumptions"``) about
the stack it priced, its sourced behaviours, the FLOP-counting rule, the knobs that differ from the stack, and the
lines that depend on the system or the model (offload copies, the attention rate, a recipe's GEMM rate, MoE)."""

from typing import Any

from commmodel.collectives.api import STEP_SELECTION_LINE
from commmodel.step.attention import rate_line
from commmodel.step.experts import moe_assumption
from commmodel.step.host_offload import offload_line
from commmodel.step.options import StepOptions
from commmodel.step.precision_lines import recipe_line, recipe_rate_line
from commmodel.step.stack_precision import stack_recipe
from commmodel.step.stacks import Stack, get_stack
from commmodel.step.tp_wire import tp_wire_line
from commmodel.workload.flops import model_flops_line
from commmodel.workload.stages import block_recompute_line


UNSTATED_KNOBS = frozenset({"stack", "library", "memory_headroom_bytes", "attention_flops", "recompute_layers"})
"""StepOptions fields :func:`assumptions` never lists as overrides: the stack, the library and the FLOP-counting rule
have lines of their own in every step command's output; the memory headroom is a planner constraint."""


def assumptions(stack: Stack | str | None, options: StepOptions, system: Any = None, model: Any = None) -> list[str]:
    """Human lines: the stack, every behaviour it implies (with its source), how its model FLOPs count attention
    (:func:`~commmodel.workload.flops.model_flops_line`) and the knobs that differ from it; with
    ``offload_modules``, how the copies are priced on ``system`` (:func:`~commmodel.step.host_offload.offload_line`);
    where the fused attention rate prices the attention core, the rate the system's GPU takes
    (:func:`~commmodel.step.attention.rate_line`);
    for a mixture-of-experts ``model``, its dispatcher, overlap and imbalance
    (:func:`~commmodel.step.experts.moe_assumption`); under an FP8 recipe whose TP all-gathers move FP8, that rule
    (:func:`~commmodel.step.tp_wire.tp_wire_line`)."""
    stack = stack if isinstance(stack, Stack) else get_stack(stack)
    lines = [f"stack {stack.name}: {stack.description}"]
    base = StepOptions(**stack.options)
    kept = [b for b in stack.behaviours if b.knob is None or getattr(options, b.knob) == getattr(base, b.knob)]
    lines += [f"{b.text} ({b.source})" for b in kept] + [model_flops_line(options.attention_flops), STEP_SELECTION_LINE]
    for key in StepOptions.model_fields:
        actual, value = getattr(options, key), getattr(base, key)
        if key not in UNSTATED_KNOBS and actual != value:
            lines.append(f"override: {key} = {actual} (stack {stack.name}: {value})")
    lines += [block_recompute_line(options.recompute_layers)] if options.recompute_layers else []
    if options.offload_modules:
        lines.append(offload_line(system))
    priced = system is not None and options.flash_attention_rate
    lines += [rate_line(system, options.attention_kernel)] if priced else []
    lines += recipe_rate_line(getattr(system, "gpu", None), model.dtype) if model is not None else []
    lines += recipe_line(stack_recipe(model, options.elementwise), _sm(system)) if model is not None else []
    lines += tp_wire_line(stack_recipe(model, options.elementwise)) if model is not None else []
    return lines + ([moe_assumption(options)] if model is not None and model.is_moe else [])


def _sm(system: Any) -> int | None:
    """The system GPU's compute capability, or None without a system or without a stated one."""
    gpu = getattr(system, "gpu", None)
    return None if gpu is None or gpu.compute_capability is None else gpu.sm_version()


__all__ = ["UNSTATED_KNOBS", "assumptions"]
