"""A layout written as a training framework's launch arguments (``plan --emit``, ``estimate --emit``).

Every name was checked against the framework's own argument definitions:

- **Megatron-LM** @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22): ``megatron/training/arguments.py``
  builds most flags from dataclass fields with ``ArgumentGroupFactory`` ("--" + name with "_" -> "-",
  ``megatron/training/argument_utils.py``): ``tensor_model_parallel_size``, ``pipeline_model_parallel_size``,
  ``sequence_parallel``, ``context_parallel_size`` (``megatron/core/model_parallel_config.py``),
  ``recompute_granularity`` (full|selective), ``recompute_method`` (uniform|block), ``recompute_num_layers``
  (``megatron/core/transformer/transformer_config.py``), ``micro_batch_size``, ``global_batch_size``
  (``megatron/training/config/training_config.py``); ``--num-virtual-stages-per-pipeline-rank`` and
  ``--use-distributed-optimizer`` are ``add_argument`` calls in arguments.py (``virtual_pipeline_model_parallel_size``
  is excluded from the factory). The distributed optimizer shards optimizer states only (ZeRO-1).
- **torchtitan** @ b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (2026-08-21): since 9810191 (2026-02-23, "Config
  System Refactor: TOML to Python Dataclass Registry") a run is a Python ``Trainer.Config``; the
  ``--section.option`` flags still override it (``torchtitan/config/README.md``; tyro, underscores kept,
  ``--section.no_flag`` for a false bool). ``torchtitan/config/configs.py``: ``ParallelismConfig``
  (``data_parallel_replicate_degree``, ``data_parallel_shard_degree``, ``fsdp_reshard_after_forward``,
  ``tensor_parallel_degree``, ``enable_sequence_parallel``, ``pipeline_parallel_degree``,
  ``pipeline_parallel_schedule``, ``pipeline_parallel_layers_per_stage``, ``num_pp_microbatches``,
  ``context_parallel_degree``) and ``TrainingConfig`` (``num_tokens_per_microbatch_per_dp_rank``,
  ``num_tokens_per_train_step``, ``max_context_length``: batches are counted in tokens). Activation
  checkpointing is a typed sub-config (``torchtitan/distributed/activation_checkpoint.py``:
  ``SelectiveAC`` (default), ``FullAC``, ``MemoryBudgetAC`` or ``None``), set in Python.
- **DeepSpeed** @ edaa7221267243c7be7fb49c5d5f5c4fb97b4641 (2026-08-22): ``deepspeed/runtime/constants.py``
  (``train_batch_size``, ``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``),
  ``deepspeed/runtime/zero/config.py`` (``zero_optimization.stage``), ``deepspeed/runtime/tensor_parallel/
  config.py`` (``tensor_parallel.autotp_size``, AutoTP training); pipeline stages are code
  (``PipelineModule``) and ``deepspeed/runtime/pipe/engine.py`` refuses ZeRO-2/3 with pipelining.

A layout a framework cannot express is said in ``notes``, never dropped silently.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from commmodel.errors import LayoutError
from commmodel.step.layout import Layout
from commmodel.planner.megatron_args import (megatron_config_notes, megatron_knobs, megatron_overlap_args,
                                             precision_args)
from commmodel.workload.recompute_modules import is_default

FRAMEWORKS = ("megatron", "torchtitan", "deepspeed")
"""Values of ``--emit``."""


@dataclass(frozen=True)
class Emitted:
    """A layout as one framework's arguments: the text to paste, its structured form and what it cannot say."""

    framework: str
    format: str
    text: str
    args: Any
    notes: list[str] = field(default_factory=list)

    def record(self) -> dict:
        """The ``"emit"`` value of ``--json``."""
        return {"framework": self.framework, "format": self.format, "text": self.text, "args": self.args,
                "notes": self.notes}


def layout_of(row: Any) -> Layout:
    """A plan row, an estimate's ``layout`` record or a :class:`Layout` as a Layout (the schema's fields;
    a row without one of them is refused by :meth:`Layout.from_record`, never defaulted)."""
    return row if isinstance(row, Layout) else Layout.from_record(row)


def _megatron(layout: Layout, seq_len: int | None, num_layers: int | None, recompute_layers: int | None = None
              ) -> Emitted:
    args: list[tuple[str, str | None]] = [
        ("--tensor-model-parallel-size", str(layout.tp)), ("--pipeline-model-parallel-size", str(layout.pp)),
        ("--context-parallel-size", str(layout.cp))]
    notes = [f"data-parallel size {layout.dp} is what is left: launch {layout.num_gpus} ranks "
             f"(tp {layout.tp} × cp {layout.cp} × pp {layout.pp} × dp {layout.dp})"]
    if layout.vpp > 1:
        args.append(("--num-virtual-stages-per-pipeline-rank", str(layout.vpp)))
    chunks = layout.pp * layout.vpp
    if num_layers and layout.pp > 1 and num_layers % chunks:
        notes.append(f"{num_layers} layers do not split evenly over pp {layout.pp} × vpp {layout.vpp} = {chunks} "
                     f"chunks: Megatron-LM asserts an even split unless told where the extra layers go "
                     f"(--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers, or "
                     f"--pipeline-model-parallel-layout); the estimate priced ⌈{num_layers}/{chunks}⌉ layers on the "
                     f"busiest chunk")
    if layout.ep > 1 or layout.etp > 1:
        args += [("--expert-model-parallel-size", str(layout.ep)), ("--expert-tensor-parallel-size", str(layout.etp))]
    if layout.sequence_parallel:
        args.append(("--sequence-parallel", None))
    args += [("--micro-batch-size", str(layout.micro_batch)), ("--global-batch-size", str(layout.global_batch))]
    if seq_len:
        args.append(("--seq-length", str(seq_len)))
    if layout.recompute in ("selective", "moe"):
        args.append(("--recompute-granularity", "selective"))
        if layout.recompute == "moe":
            args.append(("--recompute-modules", "moe"))
    elif layout.recompute == "full":
        method, count = ("uniform", 1) if recompute_layers is None else ("block", recompute_layers)
        args += [("--recompute-granularity", "full"), ("--recompute-method", method),
                 ("--recompute-num-layers", str(count))]
    elif layout.recompute == "op":
        notes.append("recompute op is torchtitan's op-level SAC; Megatron-LM has no such policy: no recompute flag emitted")
    if layout.zero == 1:
        args.append(("--use-distributed-optimizer", None))
    elif layout.zero >= 2:
        notes.append(f"ZeRO-{layout.zero} is not expressible with Megatron-LM's distributed optimizer (it shards "
                     f"optimizer states only, ZeRO-1); no sharding flag emitted — Megatron-FSDP is the route for "
                     f"sharded gradients{' and weights' if layout.zero == 3 else ''}")
    return Emitted("megatron", "argv", _argv_text(args), _argv_words(args), notes)


def _argv_text(args: list[tuple[str, str | None]]) -> str:
    """Arguments one per line, shell-continued; a flag without a value alone."""
    return " \\\n  ".join(name if value is None else f"{name} {value}" for name, value in args)


def _argv_words(args: list[tuple[str, str | None]]) -> list[str]:
    """The argv words (a list-valued argument's values as separate words, as argparse's nargs='+' takes them)."""
    return [word for name, value in args for word in ([name] if value is None else [name, *value.split()])]


MEGATRON_ONLY_KNOBS = ("offload_modules", "precision_aware_optimizer", "activation_fp8_input_store", "recompute_layers")
"""StepOptions fields that only Megatron-Core's arguments can express (said in a note for the other frameworks)."""


def _knob_notes(framework: str, layout: Layout, options: Any) -> list[str]:
    """What of ``options`` a framework other than Megatron-LM cannot express."""
    if options is None or framework == "megatron":
        return []
    set_knobs = [k for k in MEGATRON_ONLY_KNOBS if getattr(options, k)]
    if layout.recompute == "selective" and not is_default(options.recompute_modules):
        set_knobs.append(f"recompute_modules {','.join(options.recompute_modules)}")
    return [f"{k}: Megatron-Core only; {framework} has no argument for it, so the layout's time and memory were priced "
            f"with something this launch does not do" for k in set_knobs]


def _titan_dp(layout: Layout, notes: list[str]) -> list[tuple[str, Any]]:
    """ZeRO-3 = FSDP (shard); ZeRO-0 = replicate; ZeRO-2 ≈ FSDP that keeps weights gathered after forward."""
    if layout.zero == 0:
        return [("parallelism.data_parallel_replicate_degree", layout.dp), ("parallelism.data_parallel_shard_degree", 1)]
    out = [("parallelism.data_parallel_replicate_degree", 1), ("parallelism.data_parallel_shard_degree", layout.dp)]
    if layout.zero in (1, 2) and layout.dp > 1:
        out.append(("parallelism.fsdp_reshard_after_forward", "never"))
        if layout.zero == 1:
            notes.append("ZeRO-1 (optimizer states only) is not expressible in torchtitan (FSDP2 shards weights, "
                         "gradients and optimizer states); emitted FSDP with fsdp_reshard_after_forward never, the "
                         "ZeRO-2-like form")
    return out


def _titan_pp(layout: Layout, num_layers: int | None, notes: list[str]) -> list[tuple[str, Any]]:
    if layout.pp == 1:
        return [("parallelism.pipeline_parallel_degree", 1)]
    out: list[tuple[str, Any]] = [("parallelism.pipeline_parallel_degree", layout.pp),
                                  ("parallelism.num_pp_microbatches", layout.num_micro_batches)]
    if layout.vpp == 1:
        return out + [("parallelism.pipeline_parallel_schedule", "1F1B")]
    out.append(("parallelism.pipeline_parallel_schedule", "Interleaved1F1B"))
    stages = layout.pp * layout.vpp
    if num_layers and num_layers % stages == 0:
        out.append(("parallelism.pipeline_parallel_layers_per_stage", num_layers // stages))
    else:
        notes.append(f"vpp {layout.vpp}: torchtitan infers stages per rank from pipeline_parallel_layers_per_stage; "
                     f"set it to layers / {stages} (the model's layer count is not known here or does not divide)")
    return out


def _torchtitan(layout: Layout, seq_len: int | None, num_layers: int | None) -> Emitted:
    notes: list[str] = []
    pairs = _titan_dp(layout, notes) + [("parallelism.tensor_parallel_degree", layout.tp)]
    if layout.tp > 1:
        pairs.append(("parallelism.enable_sequence_parallel", layout.sequence_parallel))
    pairs += _titan_pp(layout, num_layers, notes) + [("parallelism.context_parallel_degree", layout.cp)]
    if seq_len:
        pairs += [("training.num_tokens_per_microbatch_per_dp_rank", layout.micro_batch * seq_len),
                  ("training.num_tokens_per_train_step", layout.global_batch * seq_len),
                  ("training.max_context_length", seq_len)]
    else:
        notes.append("torchtitan counts batches in tokens: give the sequence length to emit the training batch")
    ac = {"none": "None", "selective": "SelectiveAC.Config()", "full": "FullAC.Config()",
          "op": "SelectiveAC.Config()"}.get(layout.recompute)
    if ac is None:  # moe: Megatron-Core's --recompute-modules moe
        notes.append(f"recompute {layout.recompute}: torchtitan has no such activation checkpointing "
                     f"(torchtitan/distributed/activation_checkpoint.py: None, SelectiveAC, FullAC); the layout was "
                     f"priced with it, so its time and memory differ under any of the three")
    else:
        notes.append(f"recompute {layout.recompute}: set config.activation_checkpoint = {ac} in the Trainer.Config "
                     f"(torchtitan/distributed/activation_checkpoint.py; SelectiveAC is the default)")
    words = []
    for key, value in pairs:
        section, name = key.split(".")
        words.append(f"--{section}.{'' if value is not False else 'no_'}{name}" if isinstance(value, bool)
                     else f"--{key} {value}")
    return Emitted("torchtitan", "argv", " \\\n  ".join(words), dict(pairs), notes)


def _deepspeed(layout: Layout, seq_len: int | None, num_layers: int | None) -> Emitted:
    config: dict[str, Any] = {
        "train_batch_size": layout.global_batch, "train_micro_batch_size_per_gpu": layout.micro_batch,
        "gradient_accumulation_steps": layout.num_micro_batches, "zero_optimization": {"stage": layout.zero}}
    notes: list[str] = []
    if layout.tp > 1:
        config["tensor_parallel"] = {"autotp_size": layout.tp}
    if layout.pp > 1:
        notes.append(f"pp {layout.pp}: DeepSpeed pipeline stages are set in code (PipelineModule(num_stages={layout.pp}))"
                     + (f"; its pipeline engine refuses ZeRO-{layout.zero} (ZeRO-2/3 are incompatible with pipeline "
                        f"parallelism)" if layout.zero >= 2 else ""))
    if layout.vpp > 1:
        notes.append(f"vpp {layout.vpp}: DeepSpeed's pipeline has no interleaved (virtual-stage) schedule")
    if layout.cp > 1:
        notes.append(f"cp {layout.cp}: DeepSpeed's sequence parallelism (Ulysses) is set up in code through its mpu, "
                     f"not in the JSON config")
    if layout.sequence_parallel:
        notes.append("Megatron-style sequence parallelism has no DeepSpeed config key")
    if layout.recompute != "none":
        notes.append(f"recompute {layout.recompute}: the model code calls deepspeed.checkpointing.checkpoint; the "
                     f"\"activation_checkpointing\" section only tunes it")
    return Emitted("deepspeed", "json", json.dumps(config, indent=2), config, notes)


def _deepspeed_knobs(emitted: Emitted, layout: Layout, options: Any, dtype: str | None) -> tuple[Emitted, list[str]]:
    """The training dtype (``"bf16": {"enabled": true}`` / ``"fp16"``: DeepSpeed trains in fp32 without them,
    deepspeed/runtime/constants.py BFLOAT16 / FP16) and ``zero_optimization.overlap_comm`` where the estimate's overlap
    differs from DeepSpeed's default (on for ZeRO-3 only, deepspeed/runtime/zero/config.py); a note for an FP8/MX
    dtype, which DeepSpeed's config cannot ask for."""
    config = copy.deepcopy(emitted.args)
    notes = []
    if dtype in ("bf16", "fp16"):
        config[dtype] = {"enabled": True}
    elif dtype and dtype != "fp32":
        config["bf16"] = {"enabled": True}
        notes.append(f"dtype {dtype}: DeepSpeed's config has no low-precision GEMM recipe (Transformer Engine is wired "
                     f"in the model code); the estimate priced {dtype} linears")
    if options is not None and bool(options.overlap) != (layout.zero == 3):
        config["zero_optimization"]["overlap_comm"] = bool(options.overlap)
    return replace(emitted, text=json.dumps(config, indent=2), args=config), notes


_EMITTERS = {"megatron": _megatron, "torchtitan": _torchtitan, "deepspeed": _deepspeed}


def check_framework(name: str) -> str:
    """``name`` when it is one of :data:`FRAMEWORKS`; a one-line :class:`LayoutError` otherwise."""
    if name not in _EMITTERS:
        raise LayoutError(f"--emit {name!r} is not a framework; use one of {', '.join(FRAMEWORKS)}")
    return name


SCHEDULE_FLAGS = {("torchtitan", "gpipe"): "set parallelism.pipeline_parallel_schedule GPipe"}
"""Schedules other than 1F1B a framework's launch arguments can name (torchtitan passes the name to
torch.distributed.pipelining's schedule classes, which include ScheduleGPipe); every other pair gets a note."""


def _schedule_note(framework: str, layout: Layout, schedule: str) -> str | None:
    """What to say when the modelled pipeline ``schedule`` is not the 1F1B the emitted arguments run."""
    if schedule == "1f1b" or layout.pp == 1:
        return None
    how = SCHEDULE_FLAGS.get((framework, schedule), f"{framework} has no {schedule} schedule to name here")
    return f"schedule {schedule}: the arguments above run 1F1B{' (interleaved)' if layout.vpp > 1 else ''}; {how}"


def emit_layout(framework: str, row: Mapping[str, Any] | Any, *, seq_len: int | None = None,
                num_layers: int | None = None, schedule: str = "1f1b", options: Any = None,
                dtype: str | None = None) -> Emitted:
    """``row`` (a ``Layout``, a plan row or an estimate's layout record) as ``framework``'s launch arguments;
    a pipeline ``schedule`` other than 1F1B is named where the framework can take it, else said in a note.
    ``options`` (the StepOptions the layout was priced with) adds what Megatron-LM can say of them
    (:func:`megatron_knobs`) and notes what the other frameworks cannot; ``dtype`` (the model's training dtype) adds
    Megatron-LM's FP8 arguments (:func:`precision_args`)."""
    check_framework(framework)
    layout = layout_of(row)
    if framework == "megatron" and options is not None:
        emitted = _megatron(layout, seq_len, num_layers, options.recompute_layers)
    else:
        emitted = _EMITTERS[framework](layout, seq_len, num_layers)
    if framework == "megatron" and options is not None:
        knobs = megatron_knobs(layout, options) + megatron_overlap_args(layout, options, dtype) + \
            precision_args(dtype)
        emitted = replace(emitted, text=emitted.text + " \\\n  " + _argv_text(knobs),
                          args=[*emitted.args, *_argv_words(knobs)])
    notes = [*_knob_notes(framework, layout, options), *filter(None, [_schedule_note(framework, layout, schedule)])]
    if framework == "megatron" and options is not None:
        notes += megatron_config_notes(options, layout, dtype)
    if framework == "torchtitan" and options is not None:
        emitted, titan_notes = _titan_knobs(emitted, options, dtype)
        notes += titan_notes
    if framework == "deepspeed" and (options is not None or dtype is not None):
        emitted, ds_notes = _deepspeed_knobs(emitted, layout, options, dtype)
        notes += ds_notes
    return replace(emitted, notes=[*emitted.notes, *notes]) if notes else emitted


def _titan_knobs(emitted: Emitted, options: Any, dtype: str | None) -> tuple[Emitted, list[str]]:
    """torch.compile where the estimate priced compiled elementwise work (``--compile.enable``: torchtitan @b5bcd76
    torchtitan/config/configs.py ``CompileConfig.enable``, off by default), and a note for a low-precision dtype,
    which torchtitan sets as a model converter in the Trainer.Config (torchtitan/components/quantization)."""
    notes = []
    if options.elementwise == "compiled":
        emitted = replace(emitted, text=emitted.text + " \\\n  --compile.enable",
                          args={**emitted.args, "compile.enable": True})
    if dtype and dtype not in ("bf16", "fp16", "fp32"):
        notes.append(f"dtype {dtype}: torchtitan's float8 / MX training is a model converter set in the "
                     f"Trainer.Config (torchtitan/components/quantization), not a flag; the estimate priced torchao's "
                     f"recipe for it")
    return emitted, notes


def emit_for(framework: str | None, layout: Any, model: Any, schedule: str = "1f1b", options: Any = None) -> Any:
    """``--emit``'s :class:`Emitted` for ``layout`` (a Layout or plan row) of ``model`` priced with ``options``, or
    None without a framework."""
    if not framework:
        return None
    return emit_layout(framework, layout, seq_len=model.seq_len, num_layers=model.num_layers, schedule=schedule,
                       options=options, dtype=model.dtype)


def emitted_lines(emitted: Emitted) -> list[str]:
    """The human block of ``--emit``: a title, the arguments and one ``note:`` line per thing left out."""
    return ["", f"{emitted.framework} ({emitted.format}):", emitted.text] + [f"note: {n}" for n in emitted.notes]
