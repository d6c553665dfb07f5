"""``commmodel compare``: the same model and GPU count on several systems or networks, side by side.

Targets: every ``--system`` value, each optionally ``NAME+LINK[:N]`` to swap its network
(``--system dgx-a100 --system dgx-a100+eth-100g:1``). ``--network`` may be repeated too: each system
is then compared under each network (the word ``native`` keeps the system's own), so
``--system dgx-h100 --network native --network eth-100g:1`` puts NDR and 100 GbE side by side.
The first target is the baseline.
"""

from typing import Annotated, Any

import typer

from commmodel.cli.common import (GlobalBatchOpt, GpusPerNodeOpt, JobGpusOpt, JsonOpt, ModelOpt, QuietOpt, SeqLenOpt,
                                  echo, emit_json, load_model, lower_case, progress, stack_lines)
from commmodel.cli.stack_flags import stack_flags, with_stack_flags

from commmodel.cli.grid import parse_targets
from commmodel.io.text_table import format_table

@with_stack_flags
def compare_cmd(
    model: ModelOpt,
    gpus: JobGpusOpt,
    system: Annotated[list[str], typer.Option("--system", "-s", help="A system (profile name or YAML path), optionally NAME+LINK[:N]; repeat for each target, the first is the baseline.")],
    network: Annotated[list[str] | None, typer.Option("--network", help="Network LINK[:N] (or 'native') applied to every --system; repeat to compare networks.")] = None,
    gpus_per_node: GpusPerNodeOpt = None,
    global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None,
    stack: Annotated[list[str] | None, typer.Option(
        "--stack", help="Training stack: megatron-core (default), megatron-lm-2021, fsdp2, deepspeed, ddp; sets "
                        "overlap, sharding, attention and reduction defaults (each flag still overrides); repeat to "
                        "compare stacks on every target.")] = None,
    dtype: Annotated[list[str] | None, typer.Option(
        "--dtype", help="Training dtype: bf16, fp16, fp32, fp8 (per-tensor, Hopper+), fp8-current (current "
                        "scaling), fp8-rowwise, fp8-blockwise, mxfp8 or nvfp4 (Blackwell); repeat to compare dtypes on "
                        "every target (MFU always against the 16-bit peak).", callback=lower_case)] = None,
    library: Annotated[list[str] | None, typer.Option(
        "--library", help="Communication library (nccl, rccl, gloo, mpi, mpich); repeat to compare libraries on every "
                          "target (default: each system's own).")] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    **knobs: Any,
) -> None:
    """Best layout, step time, tokens/s and exposed communication on each system/network, with deltas."""
    flags = stack_flags(knobs)
    from commmodel.cli.grid import run_grid
    from commmodel.collectives.libraries import rank_noun
    from commmodel.io.profiles import load_system_with_network

    targets = parse_targets(system, network)
    resolved_model = load_model(model, seq_len)
    resolved = [(label, load_system_with_network(name, net)) for label, name, net in targets]
    progress(f"planning {resolved_model.name} on {gpus} GPUs of {len(resolved)} targets ...", quiet or json_out)
    grid = run_grid(resolved_model, resolved, gpus, stack, dtype, library, flags, global_batch, gpus_per_node)
    nouns = {rank_noun(s) for _, s in resolved}  # the targets' ranks, named as estimate names them
    noun = nouns.pop() if len(nouns) == 1 else "GPUs"
    if json_out:
        emit_json({"model": grid.model.name, "num_gpus": gpus, "rank_noun": noun,
                   "global_batch": grid.comparison.global_batch,
                   "global_batch_assumed": global_batch is None, "baseline": grid.rows[0]["label"],
                   "targets": grid.rows, "library_notes": grid.notes, **grid.doc})
        return
    lines = render(grid.rows, grid.model, gpus, grid.comparison.global_batch, global_batch is None, noun)
    echo("\n".join(lines[:1] + [library_line(grid.rows)] + stack_lines({**grid.doc, "rank_noun": noun}) + lines[1:]
                   + [f"why: {n}" for n in grid.notes]))


def library_line(rows: list[dict[str, Any]]) -> str:
    """"library: nccl" when every target uses one, else each target's ("amd-mi300x rccl, dgx-h100 nccl")."""
    libraries = dict.fromkeys(r["library"] for r in rows)
    if len(libraries) == 1:
        return f"library: {next(iter(libraries))} (each system's own unless --library)"
    return "libraries: " + ", ".join(f"{r['label']} {r['library']}" for r in rows)


def render(rows: list[dict[str, Any]], model: Any, gpus: int, global_batch: int,
           batch_assumed: bool = False, noun: str = "GPUs") -> list[str]:
    """Human output: one table row per target, then what changed against the baseline (``noun``: what the ranks
    are, "GPUs" or "CPU ranks")."""
    from commmodel.units import format_count, format_size, format_time

    table = []
    for r in rows:
        if not r["fits"]:
            table.append([r["label"], "no layout fits", "-", "-", "-", "-", "-", "-"])
            continue
        speed = "baseline" if r is rows[0] else (f"{r['speedup_vs_baseline']:.2f}x" if r["speedup_vs_baseline"] else "-")
        table.append([r["label"], r["best_label"], format_time(r["step_time_s"]), f"{r['tokens_per_s']:,.0f}",
                      f"{r['mfu']:.1%}", f"{r['exposed_comm_fraction']:.1%}", format_size(r["memory_bytes_per_gpu"]), speed])
    lines = [f"{model.name} ({format_count(model.num_params)} params) on {gpus} {noun}, global batch {global_batch}"
             f"{' (assumed)' if batch_assumed else ''} × seq {model.seq_len}", "",
             format_table(table, ["target", "best layout", "step", "tokens/s", "MFU", "exposed comm", "memory/GPU",
                                  "vs baseline"], align="llrrrrrr")]
    notes = [r["explanation"] for r in rows[1:] if r.get("explanation")]
    if notes:
        lines.append("")
        lines += [f"why: {text}" for text in notes]
    return lines
