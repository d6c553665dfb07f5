"""Shared CLI pieces: option types, the job loaders, JSON output, progress on stderr."""

import math
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from commmodel.cli.stdout import write_stdout
from commmodel.limits import (MAX_BATCH, MAX_BENCH_ITERS, MAX_GPUS, MAX_GPUS_PER_NODE, MAX_SEQ_LEN, MAX_SIZE_BYTES,
                              check_range)


def check_gpus(value: int | None) -> int | None:
    """--gpus callback: 1 ≤ N ≤ 2^24 (:mod:`commmodel.limits` says why), one line otherwise."""
    return None if value is None else check_range("--gpus", value, 1, MAX_GPUS)


def check_gpus_per_node(value: int | None) -> int | None:
    """--gpus-per-node callback: 1 ≤ N ≤ 1024."""
    return None if value is None else check_range("--gpus-per-node", value, 1, MAX_GPUS_PER_NODE)


def check_seq_len(value: int | None) -> int | None:
    """--seq-len callback: 1 ≤ N ≤ 10^8 tokens."""
    return None if value is None else check_range("--seq-len", value, 1, MAX_SEQ_LEN)


def bounded(high: int, low: int = 1) -> Callable[[typer.CallbackParam, Any], Any]:
    """An option callback keeping its value, or each value of a repeatable option, from ``low`` to ``high``
    (:func:`~commmodel.limits.check_range`: one line naming the option's long form); None passes."""
    def check(param: typer.CallbackParam, value: Any) -> Any:
        name = next((o for o in param.opts if o.startswith("--")), f"--{param.name.replace('_', '-')}")
        for one in value if isinstance(value, (list, tuple)) else [] if value is None else [value]:
            check_range(name, one, low, high)
        return value

    return check


check_batch = bounded(MAX_BATCH)
"""--global-batch / --micro-batch callback: 1 ≤ N ≤ 10^8 sequences, each of a repeatable option (plan's)."""

check_gpu_count = bounded(MAX_GPUS)
"""Callback of a count no job exceeds its GPUs in: a parallel degree (:func:`degree_option`), ranks, nodes, a GPU
count of a range (``plot scaling --min-gpus``): 1 to 2^24 (:mod:`commmodel.limits` says why)."""


check_iters, check_warmup = bounded(MAX_BENCH_ITERS), bounded(MAX_BENCH_ITERS, low=0)
"""--iters (≥ 1) and --warmup (≥ 0) callbacks of run and compute: at most 10^4
(:data:`~commmodel.limits.MAX_BENCH_ITERS` says why), so a typo ends in one line, not a benchmark that never ends."""


def lower_case(value: Any) -> Any:
    """Option callback: a name, or each of a repeatable option's, in lower case (``--dtype FP8``, ``--dtype BF16``:
    every catalogue name is lower case, and ``--stack MEGATRON-CORE`` was already taken)."""
    if isinstance(value, (list, tuple)):
        return [v.lower() for v in value]
    return value.lower() if isinstance(value, str) else value


def degree_option(*names: str, help: str) -> Any:
    """A parallel-degree option (--tp, --pp, --cp, --ep, --etp, --vpp, --max-tp; plan's repeatable pins): 1 to 2^24
    (:data:`check_gpu_count`), so a typo (2^70) is one line, not an int64 overflow in the layout arrays."""
    return typer.Option(*names, min=1, callback=check_gpu_count, help=help)


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
    from commmodel.sweep_sizes import factor_text

    if not (math.isfinite(value) and value > 1):
        raise CollectiveError(f"--factor {factor_text(value)} must be > 1 and finite (2 doubles the size at each step)")
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




SelectionOpt = Annotated[str, typer.Option(
    "--selection", help="How auto chooses: nccl, or its synonym library (the library's own choice: NCCL's tuner "
                        "estimate for nccl, priced by the hardware: what nccl-tests measures; RCCL's, gloo's, MPI's "
                        "rule for those) or fastest (the physically fastest of the library's algorithms × "
                        "protocols).")]


def emitted_for(emit: str | None, layout: Any, model: Any, options: Any, schedule: str = "1f1b") -> Any:
    """``--emit``'s arguments for ``layout`` (a Layout or plan row), or None without --emit (planner.emit loads only
    when asked: start-up, issue 17)."""
    if not emit:
        return None
    from commmodel.planner.emit import emit_for

    return emit_for(emit, layout, model, schedule, options)


def emitted_block(emitted: Any) -> list[str]:
    """The human ``--emit`` block (none without --emit)."""
    if not emitted:
        return []
    from commmodel.planner.emit import emitted_lines

    return emitted_lines(emitted)


def check_selection(selection: str) -> str:
    """--selection nccl / library (the library's own choice) or fastest, as collective_cost's selection."""
    from commmodel.errors import CollectiveError

    if selection not in ("nccl", "library", "fastest"):
        raise CollectiveError(f"--selection {selection!r} must be nccl (or library, the same) or fastest")
    return "library" if selection in ("nccl", "library") else selection


def step_setup(stack: str | None, model: Any, system: Any, dtype: str | None = None, **knobs: Any) -> tuple[Any, Any, Any]:
    """(stack, StepOptions, model) of a command: the flags' module lists and optimizer words read, then the one rule
    every command and the Python API share (:func:`commmodel.step.job.job_setup`)."""
    from commmodel.step.job import job_setup

    for knob in ("offload_modules", "recompute_modules"):
        if isinstance(knobs.get(knob), str):
            knobs[knob] = module_list(knob, knobs[knob], model)
    if isinstance(headroom := knobs.get("memory_headroom_bytes"), str):  # '10%' of this GPU's memory, or a size
        knobs["memory_headroom_bytes"] = headroom_bytes(headroom, system.gpu.hbm_bytes.value)
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


def checked_layout(model: Any, gpus: int, system: Any, fields: dict[str, Any], options: Any,
                   knobs: dict[str, Any], vpp_flag: bool = True) -> Any:
    """A step command's layout (estimate, plot timeline), its global batch the planner's default for the model
    where none is said (:func:`~commmodel.planner.search.layout_global_batch`), or one error naming every broken rule
    (the recompute knobs only with the policy they refine, TP overlap only with a TP group: ``knobs``, the flags given,
    :func:`~commmodel.step.knob_rules.check_layout_knobs`); ``vpp_flag``: the command takes --vpp."""
    from commmodel.errors import LayoutError
    from commmodel.planner.search import layout_global_batch
    from commmodel.step.knob_rules import check_layout_knobs
    from commmodel.step.layout import Layout
    from commmodel.step.layout_rules import check_dense_experts, layout_problems

    if fields["global_batch"] is None:
        per_step = fields["micro_batch"] * fields["dp"] * (fields["pp"] if fields["vpp"] > 1 else 1)
        fields = {**fields, "global_batch": layout_global_batch(model.num_params, model.seq_len, gpus,
                                                                system.gpus_per_node, per_step)}
    layout = Layout(**fields)
    check_layout_knobs(knobs, options, model, layout)
    tp, cp, pp = layout.tp, layout.cp, layout.pp
    check_dense_experts(model, layout)
    problems = layout_problems(model, gpus, layout)
    if gpus % (tp * cp * pp):  # dp is derived: say which product fails, then every other broken rule
        cp_text, cp_dp = (f" × cp {cp}", " × cp") if cp > 1 else ("", "")
        problems = [f"tp {tp}{cp_text} × pp {pp} = {tp * cp * pp} does not divide {gpus} GPUs "
                    f"(dp = GPUs / (tp{cp_dp} × pp))"] + [
            p for p in problems if "GPUs" not in p]
    if problems:
        raise LayoutError(f"invalid layout for {model.name} on {gpus} GPUs: " + "; ".join(problems)
                          + f"; change --tp/--cp/--pp/{'--vpp/' if vpp_flag else ''}"
                          f"{'--ep/--etp/' if model.is_moe else ''}--micro-batch/--global-batch so the factors divide")
    return layout


def module_list(knob: str, text: str, model: Any = None) -> tuple[str, ...]:
    """``--offload-modules a,b`` / ``--recompute-modules a,b``: the names (commas or spaces), checked by the module
    that owns them (one-line error on a bad name)."""
    from commmodel.workload.offload import check_offload_modules
    from commmodel.workload.recompute_modules import check_recompute_modules

    names = tuple(dict.fromkeys(text.replace(",", " ").split()))  # each once: 'attn_norm,attn_norm' is one
    if not names:  # '' or ',,,' named nothing: not "offload nothing" said by accident
        from commmodel.errors import WorkloadError

        raise WorkloadError(f"--{knob.replace('_', '-')} {text!r} names no module; name at least one "
                            f"(--help lists them), or drop the flag")
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
    try:
        size = parse_size_bytes(value, allow_bare=True)  # a bare number is bytes: 0 keeps nothing free
    except ValueError as bad:
        raise WorkloadError(f"--memory-headroom {text!r}: {bad}; e.g. 10% or 4GB") from None
    if size >= hbm_bytes:
        raise WorkloadError(f"--memory-headroom {text!r} is at least the GPU's {hbm_bytes / 1e9:.1f} GB; leave room "
                            "for the job, e.g. 10% or 4GB")
    return size


def stack_json(stack: Any, options: Any, model: Any, system: Any = None) -> dict[str, Any]:
    """The ``"stack"``, ``"assumptions"``, ``"dtype"``, ``"offload_modules"``, ``"memory_headroom_bytes"`` and (given
    ``system``) ``"rank_noun"`` ("GPUs", or "CPU ranks" on a CPU host) keys every step command's --json carries
    (``system``: where the offload copies are priced, :func:`commmodel.step.host_offload.offload_line`)."""
    from commmodel.collectives.libraries import rank_noun
    from commmodel.step.precision import mfu_peak_words
    from commmodel.step.stack_assumptions import assumptions

    return {"stack": stack.name, "assumptions": assumptions(stack, options, system, model), "dtype": model.dtype,
            "flash_attention": bool(options.flash_attention), "mfu_peak": mfu_peak_words([system]),
            "offload_modules": list(options.offload_modules), "memory_headroom_bytes": options.memory_headroom_bytes,
            **({"rank_noun": rank_noun(system)} if system is not None else {})}


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


def one_rank(doc: dict[str, Any]) -> str:
    """One of a step document's ranks, for "per ..." labels: "GPU", or "CPU rank" on a CPU host (its ``rank_noun``,
    :func:`commmodel.collectives.libraries.rank_noun`, made singular)."""
    return doc.get("rank_noun", "GPUs").removesuffix("s")


def stack_lines(doc: dict[str, Any]) -> list[str]:
    """Human lines stating the stack, the dtype, the memory kept free (the one headroom every step command judges
    "fits" by) and every assumption."""
    from commmodel.units import format_size_si

    stack, dtype = (" vs ".join(v) if isinstance(v, list) else v for v in (doc["stack"], doc["dtype"]))
    kept = doc.get("memory_headroom_bytes")
    per = one_rank(doc)
    headroom = f"; {format_size_si(kept)} of memory kept free per {per}" if kept is not None else ""
    return [f"stack       {stack} (dtype {dtype}; MFU against {doc.get('mfu_peak', 'the dense 16-bit peak')}"
            f"{headroom})"] + [f"  assumes   {a}" for a in doc["assumptions"][1:]]


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
