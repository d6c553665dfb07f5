"""Knobs a job was given that would change nothing in it: refused with one line naming the knob and what it needs,
instead of printed as an override and silently ignored (the bad-input audit of 2026-11-28 found each of these).

Only knobs the caller set are judged (``knobs`` as the CLI or the Python API passed them; None means "not said"), and
only against the finished options, model, system and layout, so a stack's own settings are never refused.
"""

from __future__ import annotations

from typing import Any

from commmodel.errors import LayoutError, WorkloadError
from commmodel.step.options import StepOptions
from commmodel.step.precision import is_low_precision
from commmodel.workload.recompute_modules import is_default

NVIDIA_ONLY_KERNELS = frozenset({"cudnn", "te"})
"""Attention kernels that run only on CUDA GPUs: cuDNN fused attention, and Transformer Engine's rule that picks it
(step/attention.py ``resolve_kernel``); FlashAttention-2 and Triton kernels have ROCm builds."""


def check_inert_knobs(knobs: dict[str, Any], options: StepOptions, model: Any, system: Any) -> None:
    """A :class:`WorkloadError` for the first given knob that cannot act in this job:

    * ``attention_kernel`` with unfused attention (it picks the fused kernel), or cuDNN/TE on a GPU without a CUDA
      compute capability (AMD Instinct);
    * ``topk_fraction`` other than its default without top-k compression (only top-k keeps a fraction);
    * ``fp8_param_allgather`` on a model trained in 16 bits or more (only FP8 weights gather in FP8);
    * ``recompute_layers`` above the model's layers (no model chunk holds more blocks, whatever the layout: plan
      would rank and emit ``--recompute-num-layers`` of any size).
    """
    kernel = knobs.get("attention_kernel")
    if kernel is not None and not options.flash_attention:
        raise WorkloadError(f"--attention-kernel {kernel} picks the fused attention kernel, and this run's attention "
                            "is unfused (--no-flash-attention or the stack's); add --flash-attention or drop "
                            "--attention-kernel")
    if kernel in NVIDIA_ONLY_KERNELS and system.gpu.compute_capability is None:
        raise WorkloadError(f"--attention-kernel {kernel}: cuDNN fused attention runs on NVIDIA GPUs, and "
                            f"{system.gpu.name} states no CUDA compute capability; use flash2 or triton, or auto")
    fraction = knobs.get("topk_fraction")
    default_fraction = StepOptions.model_fields["topk_fraction"].default
    if fraction is not None and fraction != default_fraction and options.compression != "topk":
        raise WorkloadError(f"--topk-fraction {fraction:g} is the share top-k compression keeps, and this run's "
                            f"gradients are compressed {options.compression!r}; add --compression topk or drop "
                            "--topk-fraction")
    layers = knobs.get("recompute_layers")
    if layers is not None and layers > model.num_layers:
        raise LayoutError(f"--recompute-layers {layers}: {model.name} has {model.num_layers} layers, so no model chunk "
                          f"holds more blocks; give 1 to {model.num_layers}")
    if knobs.get("fp8_param_allgather") and not is_low_precision(model.dtype):
        raise WorkloadError(f"--fp8-param-gather all-gathers FP8 weights, and {model.name} trains in {model.dtype}; "
                            "add --dtype fp8 (or mxfp8) or drop --fp8-param-gather")


def check_layout_knobs(knobs: dict[str, Any], options: StepOptions, model: Any, layout: Any) -> None:
    """:func:`check_recompute_knobs`, the layout's recompute policy under its stack
    (:func:`~commmodel.step.job.check_recompute_policy`), and ``tp_overlap_kind`` given (``knobs``) for a layout with
    no TP group."""
    from commmodel.step.job import check_recompute_policy
    from commmodel.step.stacks import get_stack

    check_recompute_policy(get_stack(options.stack), layout.recompute)
    kind = knobs.get("tp_overlap_kind")
    if kind is not None and layout.tp == 1:
        raise LayoutError(f"--tp-overlap-kind {kind} picks how tensor-parallel traffic overlaps the GEMMs, and this "
                          "layout has tp 1 (no TP traffic); add --tp 2 or more or drop --tp-overlap-kind")
    check_recompute_knobs(options, model, layout)


def check_recompute_knobs(options: StepOptions, model: Any, layout: Any) -> None:
    """A :class:`LayoutError` where the recompute knobs do not fit the layout's policy: ``recompute_modules`` choose
    what a selective recompute redoes (Megatron-Core ``--recompute-modules`` with ``--recompute-granularity
    selective``), ``recompute_layers`` count the blocks of each model chunk a full recompute checkpoints
    (``--recompute-num-layers`` with ``--recompute-method block``), at most the chunk's ⌈l / (pp·vpp)⌉ blocks."""
    _check_recompute_policies(options, (layout.recompute,), f"this layout recomputes {layout.recompute}")
    chunk_blocks = -(-model.num_layers // (layout.pp * layout.vpp))
    if options.recompute_layers is not None and options.recompute_layers > chunk_blocks:
        raise LayoutError(f"--recompute-layers {options.recompute_layers}: each model chunk of {model.name} holds "
                          f"{chunk_blocks} blocks ({model.num_layers} layers over pp {layout.pp} × vpp {layout.vpp}); "
                          f"give 1 to {chunk_blocks}")


def check_searched_recompute(options: StepOptions, policies: tuple[str, ...]) -> None:
    """The planner's :func:`check_recompute_knobs`: the recompute knobs need their policy among the ``policies``
    searched (``--recompute`` pins, or the stack's), or they act in no layout ranked."""
    _check_recompute_policies(options, policies, f"the search covers recompute {', '.join(policies)}")


def _check_recompute_policies(options: StepOptions, policies: tuple[str, ...], said: str) -> None:
    """``recompute_layers`` need full recompute among ``policies``, non-default ``recompute_modules`` selective;
    ``said`` words the policies in the error."""
    if options.recompute_layers is not None and "full" not in policies:
        raise LayoutError(f"--recompute-layers {options.recompute_layers} counts the blocks a full recompute "
                          f"checkpoints, and {said}: add --recompute full or drop --recompute-layers")
    if not is_default(options.recompute_modules) and "selective" not in policies:
        raise LayoutError(f"--recompute-modules {','.join(options.recompute_modules)} choose what a selective "
                          f"recompute redoes, and {said}: add --recompute selective or drop --recompute-modules")
