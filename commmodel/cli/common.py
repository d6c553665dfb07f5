"""Shared CLI pieces: option types, the job loaders, JSON output, progress on stderr."""

from __future__ import annotations

import json
import math
import sys
from typing import Annotated, Any

import typer

from commmodel.cli.stdout import write_stdout
from commmodel.limits import MAX_GPUS, MAX_GPUS_PER_NODE, check_range


def check_gpus(value: int | None) -> int | None:
    """--gpus callback: 1 ≤ N ≤ 2^24 (:mod:`commmodel.limits` says why), one line otherwise."""
    return None if value is None else check_range("--gpus", value, 1, MAX_GPUS)


def check_gpus_per_node(value: int | None) -> int | None:
    """--gpus-per-node callback: 1 ≤ N ≤ 1024."""
    return None if value is None else check_range("--gpus-per-node", value, 1, MAX_GPUS_PER_NODE)


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
    """(library name, why) for ``--library`` (the system's default when not given)."""
    from commmodel.collectives.libraries import default_library, get_library

    if library is None:
        name, why = default_library(system)
        return name, f"default: {why}"
    return get_library(library).name, "--library"


# A size sweep like nccl-tests -b MIN -e MAX -f FACTOR (sweep, plot collective).
MinSizeOpt = Annotated[str, typer.Option("--min-size", help="Smallest message S (nccl-tests -b).")]
MaxSizeOpt = Annotated[str, typer.Option("--max-size", help="Largest message S (nccl-tests -e).")]
FactorOpt = Annotated[float, typer.Option("--factor", help="Size multiplier between points (nccl-tests -f).")]

# A training job (estimate, plan, compare, plot breakdown/whatif/timeline).
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Preset name (gpt3-175b, llama3-70b ...), a parameter "
                                                               "count (1B, 7e9) or a model YAML path.")]
JobGpusOpt = Annotated[int, typer.Option("--gpus", "-n", min=1, help=f"GPUs in the job, 1 to {MAX_GPUS:,}.",
                                         callback=check_gpus)]
GlobalBatchOpt = Annotated[int | None, typer.Option("--global-batch", min=1, help="Sequences per optimizer step "
                                                    "(default: ~1-4M tokens by model size, a multiple of the node count).")]
SeqLenOpt = Annotated[int | None, typer.Option("--seq-len", min=1, help="Tokens per sequence (default: the model's).")]


def _clean(value: Any) -> Any:
    """Make numpy scalars, NaN and infinities JSON-safe (NaN/inf become null)."""
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
    write_stdout(json.dumps(_clean(document), indent=2) + "\n")


def echo(text: str = "") -> None:
    """Human output on stdout (write errors: :func:`commmodel.cli.stdout.write_stdout`)."""
    write_stdout(text + "\n")


def progress(message: str, quiet: bool = False) -> None:
    """A progress line on stderr, only when stderr is a terminal and not quiet."""
    if not quiet and sys.stderr.isatty():
        typer.echo(message, err=True)

def _check_emit(value: str | None) -> str | None:
    from commmodel.planner.emit import check_framework

    return None if value is None else check_framework(value)


EmitOpt = Annotated[str | None, typer.Option("--emit", callback=_check_emit, help=(
    "Also print the layout as launch arguments: megatron (Megatron-LM flags), torchtitan (--section.option "
    "overrides) or deepspeed (JSON config); what the framework cannot express is said in a note."))]


def emit_for(framework: str | None, layout: Any, model: Any) -> Any:
    """``--emit``'s :class:`~commmodel.planner.emit.Emitted` for ``layout`` (a Layout or plan row) of ``model``, or None."""
    if not framework:
        return None
    from commmodel.planner.emit import emit_layout

    return emit_layout(framework, layout, seq_len=model.seq_len, num_layers=model.num_layers)


def emitted_lines(emitted: Any) -> list[str]:
    """The human block of ``--emit``: a title, the arguments and one ``note:`` line per thing left out."""
    return ["", f"{emitted.framework} ({emitted.format}):", emitted.text] + [f"note: {n}" for n in emitted.notes]


FlashAttentionOpt = Annotated[
    bool, typer.Option("--flash-attention", help="Fused attention (FlashAttention): no s×s scores in memory or over HBM.")
]


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
