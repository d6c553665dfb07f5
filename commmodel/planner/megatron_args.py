"""The Megatron-LM arguments of what a step was priced with beyond its layout (``--emit megatron``): the training
dtype's precision flags, the step options Megatron-LM can say (dropout, recompute modules, offloading, the
precision-aware optimizer, the MoE dispatcher), the overlaps and fusions it runs only when asked, and notes for what
it cannot run. Every name checked against Megatron-LM @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (see
:mod:`commmodel.planner.emit` for how flags are built from its config dataclasses)."""

from __future__ import annotations

from typing import Any

from commmodel.step.layout import Layout
from commmodel.step.precision import FP8_PARAM_GATHER_DTYPES
from commmodel.workload.recompute_modules import is_default

Args = list[tuple[str, str | None]]
"""Megatron-LM arguments as (flag, value) pairs, None for a flag without a value."""


MEGATRON_PRECISION_FLAGS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "bf16": (("--bf16", None),), "fp16": (("--fp16", None),), "fp32": (),
    "fp8": (("--bf16", None), ("--fp8-format", "hybrid"), ("--fp8-recipe", "delayed")),
    "fp8-current": (("--bf16", None), ("--fp8-format", "hybrid"), ("--fp8-recipe", "tensorwise")),
    "fp8-blockwise": (("--bf16", None), ("--fp8-format", "e4m3"), ("--fp8-recipe", "blockwise")),
    "mxfp8": (("--bf16", None), ("--fp8-format", "e4m3"), ("--fp8-recipe", "mxfp8")),
    "nvfp4": (("--bf16", None), ("--fp4-format", "e2m1"), ("--fp4-recipe", "nvfp4")),
    "fp8-rowwise": (("--bf16", None),),
}
"""Megatron-LM arguments of each low-precision dtype the step model prices with Transformer Engine
(``--bf16`` / ``--fp16``: ModelParallelConfig bools, off by default, so a launch without them trains in fp32; the
low-precision recipes run on a bf16 model; TransformerConfig ``fp8`` is ``--fp8-format`` e4m3|hybrid and
``fp8_recipe`` ``--fp8-recipe``
tensorwise|delayed|mxfp8|blockwise|custom, Megatron-LM @d98e8a6 transformer_config.py; ``fp8_utils.get_fp8_recipe``
builds ``Float8BlockScaling`` for blockwise, ``Float8CurrentScaling`` for tensorwise, L777-778). fp8 is TE delayed
scaling (step/precision.py
``quantisation_recipe``) with the hybrid format of Megatron's examples/llama/train_llama3_8b_h100_fp8.sh; blockwise
and MXFP8 use E4M3 throughout (TE fp8_blockwise_scaling.rst "FP8 format", mxfp8.rst); NVFP4 is TransformerConfig
``fp4`` (``--fp4-format e2m1``) with ``fp4_recipe`` nvfp4 (transformer_config.py L673-679). fp8-rowwise, torchao's
recipe, has no Megatron-LM counterpart (said in a note)."""


def precision_args(dtype: str | None) -> list[tuple[str, str | None]]:
    """The training dtype's Megatron-LM arguments (:data:`MEGATRON_PRECISION_FLAGS`)."""
    return list(MEGATRON_PRECISION_FLAGS.get(dtype or "", ()))


MEGATRON_CONFIG_ONLY = {"activation_fp8_input_store": "activation_func_fp8_input_store"}
"""StepOptions fields whose TransformerConfig field Megatron-LM @d98e8a6 gives no command-line argument: its
``_add_network_size_args`` passes them to ``ArgumentGroupFactory(TransformerConfig, exclude=...)`` under "no CLI
argument exists for these" (megatron/training/arguments.py). Said in a note: set them on the config in code."""


MEGATRON_FP8_GATHER = tuple(d for d in FP8_PARAM_GATHER_DTYPES if d != "fp8-rowwise")
"""The dtypes whose FP8 weights Megatron-LM's ``--fp8-param-gather`` keeps (its own FP8 recipes)."""


def megatron_config_notes(options: Any, layout: Layout | None = None, dtype: str | None = None) -> list[str]:
    """Notes for the :data:`MEGATRON_CONFIG_ONLY` knobs ``options`` sets, and for what the estimate priced that
    Megatron-LM cannot run: torchao's row-wise FP8, PyTorch's async TP, gradient compression, a parameter server, FP8
    weights without the distributed optimizer."""
    notes = [f"{knob}: Megatron-LM has no command-line argument for TransformerConfig.{field} (arguments.py excludes "
             f"it: 'no CLI argument exists'); set {field}=True on the config in code"
             for knob, field in MEGATRON_CONFIG_ONLY.items() if getattr(options, knob, False)]
    if dtype == "fp8-rowwise":
        notes.append("fp8-rowwise is torchao's row-wise recipe; Megatron-LM has none (its --fp8-recipe: delayed, "
                     "tensorwise, blockwise, mxfp8): no FP8 flag emitted")
    if layout is not None and layout.tp > 1 and options.tp_comm_overlap and options.tp_overlap_kind == "async-tp":
        notes.append("tp_overlap_kind async-tp is PyTorch's micro-pipeline TP (torch.compile); Megatron-LM's TP "
                     "overlap is --tp-comm-overlap (userbuffers), priced differently: not emitted")
    if options.compression != "none" or options.dp_mode != "all_reduce":
        notes.append(f"compression {options.compression}, dp_mode {options.dp_mode}: Megatron-LM has neither; the "
                     f"estimate priced gradients this launch will not compress or send to a server")
    if layout is not None and options.fp8_param_allgather and dtype in MEGATRON_FP8_GATHER and layout.zero != 1:
        notes.append("the estimate kept FP8 weights (--fp8-param-gather), which Megatron-LM runs only with the "
                     "distributed optimizer (arguments.py L1095-1097); price this launch with --no-fp8-param-gather")
    return notes


def megatron_knobs(layout: Layout, options: Any) -> list[tuple[str, str | None]]:
    """The step options the estimate assumed, as Megatron-LM arguments (TransformerConfig fields through
    ``ArgumentGroupFactory``: ``hidden_dropout``, ``attention_dropout``, ``recompute_modules`` and ``offload_modules``
    (lists: ``nargs='+'``), ``fine_grained_activation_offloading`` (a False-default bool: ``store_true``);
    ``--use-precision-aware-optimizer`` and the ``--exp-avg-dtype`` family are ``add_argument`` calls; Megatron-LM
    @d98e8a6 ``megatron/training/argument_utils.py``, ``arguments.py``). Dropout is always written: Megatron's default
    is 0.1 where the megatron-core stack assumes 0."""
    args: list[tuple[str, str | None]] = [("--hidden-dropout", f"{options.hidden_dropout:g}"),
                                          ("--attention-dropout", f"{options.attention_dropout:g}")]
    if layout.recompute == "selective" and not is_default(options.recompute_modules):
        args.append(("--recompute-modules", " ".join(options.recompute_modules)))
    if options.offload_modules:
        args += [("--fine-grained-activation-offloading", None),
                 ("--offload-modules", " ".join(options.offload_modules))]
    if layout.ep > 1:
        args += megatron_moe_args(options)
    opt = options.precision_aware_optimizer
    if opt is not None:
        args += [("--use-precision-aware-optimizer", None), ("--exp-avg-dtype", opt.exp_avg_dtype),
                 ("--exp-avg-sq-dtype", opt.exp_avg_sq_dtype), ("--main-params-dtype", opt.main_params_dtype)]
    return args


def megatron_overlap_args(layout: Layout, options: Any, dtype: str | None) -> list[tuple[str, str | None]]:
    """The overlaps, fusions and gradient dtype the estimate priced that Megatron-LM runs only when asked (each off by
    default, Megatron-LM @d98e8a6 megatron/training/arguments.py ``--overlap-grad-reduce``, ``--overlap-param-gather``
    (distributed optimizer only), ``--grad-reduce-in-bf16``, ``--fp8-param-gather`` (store_true),
    ``--no-overlap-p2p-communication`` (store_false: on unless said); TransformerConfig fields through
    ``ArgumentGroupFactory``: ``tp_comm_overlap``, ``cross_entropy_loss_fusion`` (False-default bools) and
    ``attention_backend`` (auto: fused attention; ``unfused`` where the estimate priced unfused attention)), so the
    launch runs what was priced."""
    args: list[tuple[str, str | None]] = []
    if options.overlap and layout.dp * layout.cp > 1:
        args.append(("--overlap-grad-reduce", None))
        args += [("--overlap-param-gather", None)] if layout.zero == 1 else []
    userbuffers = options.tp_comm_overlap and options.tp_overlap_kind == "userbuffers"
    if userbuffers and layout.tp > 1 and layout.sequence_parallel:
        args.append(("--tp-comm-overlap", None))
    if layout.vpp > 1 and not options.pp_p2p_overlap:
        args.append(("--no-overlap-p2p-communication", None))
    if options.grad_reduce_dtype == "bf16":
        args.append(("--grad-reduce-in-bf16", None))
    if options.cross_entropy == "fused":
        args.append(("--cross-entropy-loss-fusion", None))
    if options.fp8_param_allgather and dtype in MEGATRON_FP8_GATHER and layout.zero == 1:
        args.append(("--fp8-param-gather", None))  # arguments.py L1095: the distributed optimizer's only
    if not options.flash_attention:
        args.append(("--attention-backend", "unfused"))
    return args


MEGATRON_DISPATCHER_ARGS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "alltoall": (("--moe-token-dispatcher-type", "alltoall"),),
    "deepep": (("--moe-token-dispatcher-type", "flex"), ("--moe-flex-dispatcher-backend", "deepep")),
    "hybridep": (("--moe-token-dispatcher-type", "flex"), ("--moe-flex-dispatcher-backend", "hybridep")),
}
"""Megatron-LM arguments of each token dispatcher the step model prices (``--moe-dispatcher``): the all-to-all one,
or the flex dispatcher with its DeepEP or HybridEP backend (Megatron-LM's ``--moe-token-dispatcher-type flex
--moe-flex-dispatcher-backend deepep|hybridep``, as the Megatron-MoE-ModelZoo @e865051 launches pass them)."""


def megatron_moe_args(options: Any) -> list[tuple[str, str | None]]:
    """The dispatcher and the EP all-to-all overlap the estimate priced, as Megatron-LM arguments."""
    args = list(MEGATRON_DISPATCHER_ARGS.get(options.moe_dispatcher, ()))
    if options.moe_a2a_overlap:
        args.append(("--overlap-moe-expert-parallel-comm", None))
    return args
