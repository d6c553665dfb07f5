"""Shared CLI pieces: option types, the job loaders, JSON output, progress on stderr."""

import math
import sys
from typing import Annotated, Any

import typer

from commmodel.cli.stdout import write_stdout
from commmodel.limits import MAX_BATCH, MAX_GPUS, MAX_GPUS_PER_NODE, MAX_SEQ_LEN, MAX_SIZE_BYTES, check_range


def check_gpus(value: int | None) -> int | None:
    """--gpus callback: 1 ≤ N ≤ 2^24 (:mod:`commmodel.limits` says why), one line otherwise."""
    return None if value is None else check_range("--gpus", value, 1, MAX_GPUS)


def check_gpus_per_node(value: int | None) -> int | None:
    """--gpus-per-node callback: 1 ≤ N ≤ 1024."""
    return None if value is None else check_range("--gpus-per-node", value, 1, MAX_GPUS_PER_NODE)


def check_seq_len(value: int | None) -> int | None:
    """--seq-len callback: 1 ≤ N ≤ 10^8 tokens."""
    return None if value is None else check_range("--seq-len", value, 1, MAX_SEQ_LEN)


def check_batch(param: typer.CallbackParam, value: int | None) -> int | None:
    """--global-batch / --micro-batch callback: 1 ≤ N ≤ 10^8 sequences (the option named as typed)."""
    return None if value is None else check_range(f"--{param.name.replace('_', '-')}", value, 1, MAX_BATCH)


def parse_size_option(text: str, option: str) -> float:
    """A message size flag (``--size 1GiB``, a bare byte count allowed) up to 10^18 bytes; one line otherwise."""
    from commmodel.errors import CollectiveError
    from commmodel.units import parse_size_bytes

    value = parse_size_bytes(text, allow_bare=True)
    if value != int(value):
        raise CollectiveError(f"{option} {text}: {value:g} bytes is not a whole number of bytes; e.g. 4096, 1KiB, 1GiB")
    if value > MAX_SIZE_BYTES:
        raise CollectiveError(f"{option} {text}: {value:.3g} bytes is too large, at most {MAX_SIZE_BYTES:.0e} (1 EB); "
                              f"check the number and unit, e.g. 1GiB")
    return value


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout and nothing else.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress output on stderr.")]
SystemOpt = Annotated[
    str, typer.Option("--system", "-s", help="Profile name (see `commmodel profiles list`) or a path to a YAML file.")
]
NetworkOpt = Annotated[
    str | None,
    typer.Option("--network", help="Replace the scale-out tier: catalogue LINK[:NICS], e.g. ib-ndr:8 or eth-100g:1 "
                              "(NICS 1 to 1024 per node)."),
]
GpusPerNodeOpt = Annotated[
    int | None, typer.Option("--gpus-per-node", help=f"GPUs used per node, 1 to {MAX_GPUS_PER_NODE} (default: all of "
                             "the system's).", min=1, callback=check_gpus_per_node)
]

LibraryOpt = Annotated[str | None, typer.Option(
    "--library", help="Communication library: nccl, rccl, gloo, mpi (Open MPI), mpich (default: nccl on NVIDIA GPUs, "
                      "rccl on AMD Instinct, gloo on CPU hosts).")]


def resolve_library(system: Any, library: str | None) -> tuple[str, str]:
    """(library name, why) for ``--library`` (:func:`commmodel.collectives.libraries.resolve_library`, imported
    when a command asks: the CLI's start-up does not load the collectives)."""
    from commmodel.collectives.libraries import resolve_library as resolve

    return resolve(system, library)


# A size sweep like nccl-tests -b MIN -e MAX -f FACTOR (sweep, plot collective).
MinSizeOpt = Annotated[str, typer.Option("--min-size", "-b", help="Smallest message S (as nccl-tests -b; its binary "
                                                                 "1K/1M/1G are written 1KiB/1MiB/1GiB here).")]
MaxSizeOpt = Annotated[str, typer.Option("--max-size", "-e", help="Largest message S (as nccl-tests -e).")]
def check_factor(value: float) -> float:
    """--factor above 1 and finite (inf made a one-point sweep without a word, 1 or less never ends)."""
    import math

    from commmodel.errors import CollectiveError

    if not (math.isfinite(value) and value > 1):
        raise CollectiveError(f"--factor {value:g} must be > 1 and finite (2 doubles the size at each step)")
    return value


FactorOpt = Annotated[float, typer.Option("--factor", "-f", help="Size multiplier between points (as nccl-tests -f).",
                                          callback=check_factor)]

# A training job (estimate, plan, compare, plot breakdown/whatif/timeline).
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Preset name (gpt3-175b, llama3-70b ...), a parameter "
                                                               "count (1B, 7e9) or a model YAML path.")]
JobGpusOpt = Annotated[int, typer.Option("--gpus", "-n", min=1, help=f"GPUs in the job, 1 to {MAX_GPUS:,}.",
                                         callback=check_gpus)]
GlobalBatchOpt = Annotated[int | None, typer.Option("--global-batch", min=1, help="Sequences per optimizer step "
                                                    "(default: ~1-4M tokens by model size, a multiple of the node count).",
                                                    callback=check_batch)]
SeqLenOpt = Annotated[int | None, typer.Option("--seq-len", min=1, help="Tokens per sequence (default: the model's).",
                                               callback=check_seq_len)]


def _clean(value: Any) -> Any:
    """Make numpy scalars, NaN and infinities JSON-safe (NaN/inf become null); record tables are left to
    :func:`commmodel.io.json_text.dumps_indented`, which cleans them only when they need it; a column table
    writes its non-finite floats as null."""
    from commmodel.io.json_text import column_table_type, is_record_table

    column_table = column_table_type()  # None where no table was built (its module is not even loaded)
    if column_table is not None and type(value) is column_table:
        return value.json_safe()
    if is_record_table(value):
        return value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def emit_json(document: Any) -> None:
    """Write one JSON document to stdout (the only thing ``--json`` prints there)."""
    from commmodel.io.json_text import dumps_indented

    write_stdout(dumps_indented(document, clean=_clean) + "\n")


def echo(text: str = "") -> None:
    """Human output on stdout (write errors: :func:`commmodel.cli.stdout.write_stdout`)."""
    write_stdout(text + "\n")


def progress(message: str, quiet: bool = False) -> None:
    """A progress line on stderr, only when stderr is a terminal and not quiet."""
    if not quiet and sys.stderr.isatty():
        typer.echo(message, err=True)

def _check_emit(value: str | None) -> str | None:
    if value is None:
        return None
    from commmodel.planner.emit import check_framework  # only when --emit is given (issue 17)

    return check_framework(value)


EmitOpt = Annotated[str | None, typer.Option("--emit", callback=_check_emit, help=(
    "Also print the layout as launch arguments: megatron (Megatron-LM flags), torchtitan (--section.option "
    "overrides) or deepspeed (JSON config); what the framework cannot express is said in a note."))]


FlashAttentionOpt = Annotated[
    bool | None, typer.Option("--flash-attention/--no-flash-attention",
                              help="Fused attention (FlashAttention): no s×s scores in memory or over HBM (default: the stack's).")
]
AttentionRateOpt = Annotated[
    bool | None, typer.Option("--flash-attention-rate/--no-flash-attention-rate",
                              help="Price the fused attention core at the published rate of the kernel that runs, "
                                   "causal blocks skipped; off prices its two matmuls as GEMMs over the full square "
                                   "(default: the stack's: on for megatron-core, fsdp2 and ddp; needs "
                                   "--flash-attention).")
]
AttentionKernelOpt = Annotated[str | None, typer.Option(
    "--attention-kernel", help="Fused attention kernel whose published rate prices the core: te (cuDNN attention on "
                               "sm_90+, FlashAttention-2 below: what Transformer Engine picks; megatron-core), auto "
                               "(cuDNN on sm_100+, FlashAttention-2 below: what torchtitan's SDPA picks; fsdp2), flash2 "
                               "or cudnn (default: the stack's; used where the attention is priced at a kernel rate).")]
DropoutOpt = Annotated[float | None, typer.Option(
    "--dropout", help="Hidden and attention dropout probability in [0, 1): above 0 each block stores their masks "
                      "(default: the stack's: 0 for megatron-core, fsdp2 and ddp; 0.1 for megatron-lm-2021 and "
                      "deepspeed).")]
CrossEntropyOpt = Annotated[str | None, typer.Option(
    "--cross-entropy", help="How the loss runs: fused (one fused vocabulary-parallel kernel, as Megatron-Core's "
                            "--cross-entropy-loss-fusion), unfused (op by op in fp32, Megatron-LM's argument "
                            "default, which Megatron-Core runs without that flag) or eager (PyTorch's "
                            "F.cross_entropy on an fp32 copy) (default: the stack's; eager for fsdp2 and ddp).")]
RecomputeLayersOpt = Annotated[int | None, typer.Option(
    "--recompute-layers", min=1, help="With --recompute full, checkpoint only the first N blocks of each model chunk "
                                      "and store the rest (Megatron-LM --recompute-method block --recompute-num-layers "
                                      "N; default: every block, --recompute-method uniform).")]
AttentionFlopsOpt = Annotated[str | None, typer.Option(
    "--attention-flops", help="How model FLOPs (TFLOP/s, MFU, HFU) count attention: causal (its causal half, as "
                              "Megatron-LM since 2026-01 and NeMo log them) or square (the full s×s square: Narayanan "
                              "et al. 2021, torchtitan, llm-foundry); the step time does not change (default: the "
                              "stack's: causal for megatron-core, square otherwise).")]
ElementwiseOpt = Annotated[str | None, typer.Option(
    "--elementwise", help="How norms, RoPE, activations and residual adds run: fused (Megatron's kernels), eager "
                          "(PyTorch op by op), compiled (torch.compile) or eager-fused-rmsnorm (default: the stack's: "
                          "fused for megatron-core, eager for fsdp2).")]
OffloadModulesOpt = Annotated[str | None, typer.Option(
    "--offload-modules", help="Megatron-Core fine-grained activation offloading: modules whose saved input goes to "
                              "host memory, comma-separated, from attn_norm, qkv_linear, core_attn, attn_proj, "
                              "mlp_norm, expert_fc1, moe_act (default: none).")]
RecomputeModulesOpt = Annotated[str | None, typer.Option(
    "--recompute-modules", help="Megatron-Core --recompute-modules: what --recompute selective checkpoints, "
                                "comma-separated, from core_attn, layernorm, mlp, moe_act, shared_experts, moe, "
                                "mla_up_proj (default: core_attn, Megatron's).")]
PrecisionAwareOpt = Annotated[str | None, typer.Option(
    "--precision-aware-optimizer", help="Megatron-Core --use-precision-aware-optimizer: the exp_avg,exp_avg_sq"
                                        "[,main_params] dtypes, e.g. bf16,bf16 (default: off, fp32 Adam states).")]
ActivationStoreOpt = Annotated[bool | None, typer.Option(
    "--activation-fp8-input-store", help="Megatron-Core's TransformerConfig.activation_func_fp8_input_store (no "
                                         "Megatron-LM flag: set in code): SwiGLU keeps its input in FP8 for the "
                                         "backward (default: off in every stack).")]
StackOpt = Annotated[str | None, typer.Option(
    "--stack", help="Training stack: megatron-core (default), megatron-lm-2021, fsdp2, deepspeed, ddp; "
                    "sets overlap, sharding, attention and reduction defaults (each flag still overrides).")]
TrainDtypeOpt = Annotated[str | None, typer.Option(
    "--dtype", help="Training dtype: bf16, fp16, fp32, fp8 (per-tensor, Hopper+), fp8-rowwise (torchao), "
                    "fp8-blockwise (1x128/128x128 scales, Hopper), mxfp8 or nvfp4 (Blackwell).")]
TpCommOverlapOpt = Annotated[bool | None, typer.Option(
    "--tp-comm-overlap/--no-tp-comm-overlap", help="Overlap TP collectives with the GEMMs (default: the stack's).")]
PpP2pOverlapOpt = Annotated[bool | None, typer.Option(
    "--pp-p2p-overlap/--no-pp-p2p-overlap", help="With interleaving (--vpp ≥ 2), overlap pipeline send/recv with the "
                                                 "next chunk's compute (default: the stack's).")]
TpOverlapKindOpt = Annotated[str | None, typer.Option(
    "--tp-overlap-kind", help="What --tp-comm-overlap runs: userbuffers (Transformer Engine) or async-tp (PyTorch's "
                              "torch.compile micro-pipeline TP) (default: the stack's).")]
CpCommOverlapOpt = Annotated[bool | None, typer.Option(
    "--cp-comm-overlap/--no-cp-comm-overlap", help="Hide context parallelism's K/V exchange behind attention as the "
                                                   "stack schedules it; off: all exposed (torch.compile before "
                                                   "PyTorch 2.8) (default: on).")]
MoeDispatcherOpt = Annotated[str | None, typer.Option(
    "--moe-dispatcher", help="Mixture of experts: the token dispatcher, alltoall (Megatron-Core's), deepep or hybridep "
                             "(flex backends: one copy per remote NVLink domain) (default: alltoall).")]
MoeImbalanceOpt = Annotated[float | None, typer.Option(
    "--moe-imbalance", help="Mixture of experts: tokens on the busiest expert ÷ mean, 1 (balanced) to experts ÷ top-k "
                            "(default: a published aux-loss router's, stated in the output).", min=1.0)]
MoeA2AOverlapOpt = Annotated[bool | None, typer.Option(
    "--moe-a2a-overlap/--no-moe-a2a-overlap", help="Mixture of experts: overlap dispatch and combine with the other "
    "micro-batch's compute (Megatron-Core --overlap-moe-expert-parallel-comm) (default: off).")]
Fp8ParamGatherOpt = Annotated[bool | None, typer.Option(
    "--fp8-param-gather/--no-fp8-param-gather", help="With an FP8 dtype, gather and keep FP8 weights (Megatron-Core "
    "--fp8-param-gather, torchao's FP8 all-gather): no per-micro-batch weight cast, half the parameter all-gather "
    "(default: the stack's: on for megatron-core, off otherwise).")]
OverlapOpt = Annotated[bool | None, typer.Option(
    "--overlap/--no-overlap", help="Overlap DP reduction with backward (default: the stack's).")]
BucketSizeOpt = Annotated[str | None, typer.Option(
    "--bucket-size", help="Gradient bucket size (default: the stack's; megatron-core grows it as max(40M, 1M·dp) "
                          "parameters unless this is given).")]
GradReduceDtypeOpt = Annotated[str | None, typer.Option(
    "--grad-reduce-dtype", help="fp32, bf16 or fp16 gradients on the DP wire (default: the stack's).")]
MemoryHeadroomOpt = Annotated[str, typer.Option(
    "--memory-headroom", help="Memory kept free per GPU, bytes ('4GB') or percent ('10%') (default 4GB: CUDA context, "
                              "NCCL buffers, allocator fragmentation).")]


SelectionOpt = Annotated[str, typer.Option(
    "--selection", help="How auto chooses: nccl, or its synonym library (the library's own choice: NCCL's tuner "
                        "estimate for nccl, priced by the hardware: what nccl-tests measures; RCCL's, gloo's, MPI's "
                        "rule for those) or fastest (the physically fastest of the library's algorithms × "
                        "protocols).")]


def check_selection(selection: str) -> str:
    """--selection nccl / library (the library's own choice) or fastest, as collective_cost's selection."""
    from commmodel.errors import CollectiveError

    if selection not in ("nccl", "library", "fastest"):
        raise CollectiveError(f"--selection {selection!r} must be nccl (or library, the same) or fastest")
    return "library" if selection in ("nccl", "library") else selection


STACK_FLAGS: dict[str, tuple[str, ...]] = {
    "flash_attention": ("flash_attention",), "flash_attention_rate": ("flash_attention_rate",),
    "tp_comm_overlap": ("tp_comm_overlap",), "pp_p2p_overlap": ("pp_p2p_overlap",),
    "cp_comm_overlap": ("cp_comm_overlap",), "tp_overlap_kind": ("tp_overlap_kind",),
    "attention_kernel": ("attention_kernel",), "elementwise": ("elementwise",),
    "dropout": ("hidden_dropout", "attention_dropout"), "cross_entropy": ("cross_entropy",),
    "attention_flops": ("attention_flops",), "fp8_param_gather": ("fp8_param_allgather",),
    "moe_dispatcher": ("moe_dispatcher",), "moe_a2a_overlap": ("moe_a2a_overlap",),
    "moe_imbalance": ("moe_imbalance",),
    "offload_modules": ("offload_modules",), "recompute_modules": ("recompute_modules",),
    "precision_aware_optimizer": ("precision_aware_optimizer",),
    "activation_fp8_input_store": ("activation_fp8_input_store",), "overlap": ("overlap",),
    "bucket_size": ("bucket_size_bytes",), "grad_reduce_dtype": ("grad_reduce_dtype",),
    "recompute_layers": ("recompute_layers",),
}
"""The stack flags ``estimate``, ``plan`` and ``compare`` share: each command parameter and the StepOptions fields it
sets (``--dropout`` sets both dropouts). One owner of the mapping; unset flags (None) keep the stack's values."""


def stack_flags(params: dict[str, Any]) -> dict[str, Any]:
    """The StepOptions keywords of a step command's stack flags; ``params`` holds its parameters (``locals()`` at its
    top), of which only the :data:`STACK_FLAGS` names are read."""
    return {field: params[name] for name, fields in STACK_FLAGS.items() if name in params for field in fields}


def step_setup(stack: str | None, model: Any, system: Any, dtype: str | None = None, **knobs: Any) -> tuple[Any, Any, Any]:
    """(stack, StepOptions, model) of a command: the flags' module lists and optimizer words read, then the one rule
    every command and the Python API share (:func:`commmodel.step.job.job_setup`)."""
    from commmodel.step.job import job_setup

    for knob in ("offload_modules", "recompute_modules"):
        if isinstance(knobs.get(knob), str):
            knobs[knob] = module_list(knob, knobs[knob], model)
    if isinstance(knobs.get("precision_aware_optimizer"), str):
        from commmodel.workload.optimizer_states import PrecisionAwareOptimizer

        knobs["precision_aware_optimizer"] = PrecisionAwareOptimizer.parse(knobs["precision_aware_optimizer"])
    return job_setup(model, system, stack, dtype, **knobs)


def stack_layout_defaults(stack: Any, tp: int, dp: int, cp: int, zero: int | None,
                          sequence_parallel: bool | None) -> dict[str, Any]:
    """The stack's ZeRO stage and sequence parallelism where the flags do not say them
    (:func:`commmodel.step.job.layout_defaults`)."""
    from commmodel.step.job import layout_defaults

    return layout_defaults(stack, tp, dp, cp, zero, sequence_parallel)


def module_list(knob: str, text: str, model: Any = None) -> tuple[str, ...]:
    """``--offload-modules a,b`` / ``--recompute-modules a,b``: the names (commas or spaces), checked by the module
    that owns them (one-line error on a bad name)."""
    from commmodel.workload.offload import check_offload_modules
    from commmodel.workload.recompute_modules import check_recompute_modules

    names = tuple(text.replace(",", " ").split())
    {"offload_modules": check_offload_modules, "recompute_modules": check_recompute_modules}[knob](names, model)
    return names


def headroom_bytes(text: str, hbm_bytes: float) -> float:
    """``--memory-headroom``: '10%' of the GPU's HBM or a size ('4GB'); one-line error otherwise."""
    from commmodel.errors import WorkloadError
    from commmodel.units import parse_size_bytes

    value = text.strip()
    if value.endswith("%"):
        try:
            pct = float(value[:-1])
        except ValueError:
            pct = -1.0
        if not 0.0 <= pct < 100.0:
            raise WorkloadError(f"--memory-headroom {text!r}: a percentage must be in [0, 100); e.g. 10%")
        return hbm_bytes * pct / 100.0
    return parse_size_bytes(value)


def stack_json(stack: Any, options: Any, model: Any, system: Any = None) -> dict[str, Any]:
    """The ``"stack"``, ``"assumptions"``, ``"dtype"`` and ``"offload_modules"`` keys every step command's --json
    carries (``system``: where the offload copies are priced, :func:`commmodel.step.host_offload.offload_line`)."""
    from commmodel.step.precision import mfu_peak_words
    from commmodel.step.stack_assumptions import assumptions

    return {"stack": stack.name, "assumptions": assumptions(stack, options, system, model), "dtype": model.dtype,
            "flash_attention": bool(options.flash_attention), "mfu_peak": mfu_peak_words([system]),
            "offload_modules": list(options.offload_modules)}


def targets_stack_json(stack: Any, options: Any, model: Any, targets: list[tuple[str, Any]]) -> dict[str, Any]:
    """:func:`stack_json` for several targets (compare): the stack's own lines once, then each line that depends on
    the system (the GPU's attention rate, the offload copies) once, prefixed by the targets it holds for."""
    from commmodel.step.stack_assumptions import assumptions

    from commmodel.step.precision import mfu_peak_words

    doc = stack_json(stack, options, model)
    doc["mfu_peak"] = mfu_peak_words([system for _, system in targets])
    labels_by_line: dict[str, list[str]] = {}
    for label, system in targets:
        for line in assumptions(stack, options, system, model):
            if line not in doc["assumptions"]:
                labels_by_line.setdefault(line, []).append(label)
    doc["assumptions"] += [f"{', '.join(labels)}: {line}" for line, labels in labels_by_line.items()]
    return doc


def stack_lines(doc: dict[str, Any]) -> list[str]:
    """Human lines stating the stack, the dtype and every assumption."""
    stack, dtype = (" vs ".join(v) if isinstance(v, list) else v for v in (doc["stack"], doc["dtype"]))
    return [f"stack       {stack} (dtype {dtype}; MFU against {doc.get('mfu_peak', 'the dense 16-bit peak')})"] + [
        f"  assumes   {a}" for a in doc["assumptions"][1:]]


def load_model(spec: str, seq_len: int | None = None) -> Any:
    """The model named by ``spec``, with its sequence length replaced when ``seq_len`` is given."""
    from commmodel.workload.model import TransformerModel
    from commmodel.io.models import resolve_model

    model = resolve_model(spec)
    if seq_len is not None and seq_len != model.seq_len:
        model = TransformerModel.model_validate({**model.model_dump(), "seq_len": seq_len})
    return model


def load_job(model_spec: str, seq_len: int | None, system_spec: str, network: str | None) -> tuple[Any, Any]:
    """(model, system) from the job options ``--model``/``--seq-len`` and ``--system``/``--network``."""
    from commmodel.io.profiles import load_system_with_network

    return load_model(model_spec, seq_len), load_system_with_network(system_spec, network)
