"""A question's stack, dtype and library turned into the step model's inputs: one rule for every command and the
Python API.

``commmodel estimate/plan/compare/query`` and the plots, and :func:`commmodel.step.estimate.estimate`,
:func:`commmodel.planner.plan`, :func:`commmodel.planner.compare` and :func:`commmodel.plots.plan_data.step_scaling`
called from a notebook without options, all take their defaults here, so one question gets one answer:

* the stack: :data:`commmodel.step.stacks.DEFAULT_STACK` unless named, each explicit knob winning;
* the dtype: the model's, or the GPU's default where it has no 16-bit peak for it (fp16 before Ampere, fp32 on CPU
  ranks: :func:`commmodel.step.precision.default_dtype`), checked against the GPU;
* the gradient wire dtype: the stack's, unless the training dtype needs another
  (:meth:`StepOptions.for_training_dtype`);
* the library: the system's own (nccl on NVIDIA GPUs, rccl on AMD Instinct, gloo on CPU ranks);
* a layout's ZeRO stage and sequence parallelism where it does not say them: the stack's (:func:`layout_defaults`).
"""

from typing import Any

from commmodel.errors import LayoutError
from commmodel.hardware.models import System
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions
from commmodel.step.stacks import Stack, get_stack, stack_options
from commmodel.workload.model import TransformerModel


def job_setup(model: TransformerModel, system: System, stack: str | None = None, dtype: str | None = None,
              **knobs: Any) -> tuple[Stack, StepOptions, TransformerModel]:
    """(stack, StepOptions, model) of one question: the stack's knobs with every explicit knob winning, the system's
    library unless ``library`` is given, and the model in ``dtype`` (the GPU's default when None; a
    :class:`commmodel.errors.WorkloadError` when the GPU has no peak for it)."""
    from commmodel.collectives.libraries import resolve_library
    from commmodel.step.knob_rules import check_inert_knobs
    from commmodel.step.options import check_moe_flags
    from commmodel.step.precision import check_precision, default_dtype

    the_stack = get_stack(stack)
    check_moe_flags(model, knobs)
    knobs["library"] = resolve_library(system, knobs.get("library"), flag="library ")[0]
    dtype = dtype or default_dtype(system.gpu, model.dtype)  # no bf16 before Ampere: fp16 there, stated as the dtype
    if dtype != model.dtype:
        model = TransformerModel.model_validate({**model.model_dump(), "dtype": dtype})
    check_precision(system.gpu, model.dtype)
    options = stack_options(the_stack.name, **knobs)
    check_inert_knobs(knobs, options, model, system)
    return the_stack, options if knobs.get("grad_reduce_dtype") else options.for_training_dtype(model.dtype), model


def checked_model(model: TransformerModel) -> TransformerModel:
    """``model`` validated again (9 µs): pydantic's ``model_copy(update=...)``, the natural way to tweak a preset in
    a notebook, skips validation, and a ``seq_len`` of -5 or 0 heads then priced a negative throughput or divided by
    zero; a bad value is a one-line :class:`commmodel.errors.WorkloadError` here."""
    from pydantic import ValidationError

    from commmodel.errors import WorkloadError
    from commmodel.hardware.messages import describe_validation_error

    try:
        return TransformerModel.model_validate(model.model_dump())
    except ValidationError as err:
        raise WorkloadError(describe_validation_error(err, f"model {model.name}", TransformerModel)) from None


def default_options(model: TransformerModel, system: System) -> tuple[StepOptions, TransformerModel]:
    """(options, model) a caller that names nothing gets: :func:`job_setup` with every default, as every command."""
    _, options, model = job_setup(model, system)
    return options, model


def check_zero_stage(stack: Stack, zero: int | None) -> None:
    """One line for a ZeRO stage the stack does not run (``Stack.zero_stages``, what plan searches for it): above 0 on
    a stack that shards nothing (``ddp``), ZeRO 1 under fsdp2 (no FSDP2 form: ``--emit torchtitan`` wrote ZeRO 2's).
    The one rule for a layout's --zero (:func:`layout_defaults`) and each stage plan is told to search."""
    if zero and max(stack.zero_stages) == 0:
        raise LayoutError(f"--zero {zero}: the {stack.name} stack shards nothing (every rank holds the whole model, "
                          "gradients and optimizer); use --stack fsdp2 (ZeRO 3) or --stack deepspeed (ZeRO 1-3)")
    if zero is not None and zero not in stack.zero_stages:
        stages = ", ".join(map(str, stack.zero_stages))
        raise LayoutError(f"--zero {zero}: the {stack.name} stack runs ZeRO {stages} (what plan searches for it); use "
                          f"one of those, --stack ddp (ZeRO 0) or --stack deepspeed (ZeRO 0-3)")


def check_recompute_policy(stack: Stack, recompute: str | None) -> None:
    """One line for ``--recompute selective`` on a stack whose selective checkpointing is op-level SAC (fsdp2, whose
    policies are none, op and full: torchtitan's ``selective`` AC is per-op), priced otherwise as Megatron's."""
    if recompute == "selective" and "selective" not in stack.recompute_policies and "op" in stack.recompute_policies:
        raise LayoutError(f"--recompute selective: under {stack.name} selective activation checkpointing is op-level "
                          f"SAC; use --recompute op (the {stack.name} policies: "
                          f"{', '.join(stack.recompute_policies)})")


def layout_defaults(stack: Stack, tp: int, dp: int, cp: int, zero: int | None,
                    sequence_parallel: bool | None) -> dict[str, Any]:
    """The ZeRO stage and sequence parallelism of a layout that does not say them: the stack's, ZeRO only where
    dp·cp ≥ 2 ranks share the states and sequence parallelism only where tp ≥ 2. One rule for every command that
    takes a layout (estimate, plot timeline, diagnose) and for :func:`with_layout_defaults`; the planner searches
    instead. A ZeRO stage on a stack that shards nothing is refused (:func:`check_zero_stage`)."""
    check_zero_stage(stack, zero)
    return {"zero": zero if zero is not None else (stack.zero if dp * cp >= 2 else 0),
            "sequence_parallel": (sequence_parallel if sequence_parallel is not None
                                  else stack.sequence_parallel and tp >= 2)}


def with_layout_defaults(layout: Layout, options: StepOptions) -> Layout:
    """``layout`` with the stack's ZeRO stage and sequence parallelism (:func:`layout_defaults`) where it was built
    without them (``Layout(tp=8, dp=8)`` from Python); fields set explicitly, and options without a stack, keep the
    layout as given."""
    unset = {"zero", "sequence_parallel"} - layout.model_fields_set
    if not unset or options.stack is None:
        return layout
    said = {name: (None if name in unset else getattr(layout, name)) for name in ("zero", "sequence_parallel")}
    fills = layout_defaults(get_stack(options.stack), layout.tp, layout.dp, layout.cp, **said)
    return layout.model_copy(update={name: fills[name] for name in unset})
