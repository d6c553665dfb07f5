"""``commmodel plot breakdown|whatif|timeline``: figures of the step model and the planner.

Registered under ``commmodel plot`` by :mod:`commmodel.cli.app`; heavy imports stay inside the commands.
"""

from typing import Annotated, Any

import typer

from commmodel.cli.common import (GlobalBatchOpt, GpusPerNodeOpt, JobGpusOpt, JsonOpt, LibraryOpt, ModelOpt,
                                  NetworkOpt, SeqLenOpt, SystemOpt, check_batch, checked_layout, degree_option,
                                  load_job, load_model, lower_case, resolve_library, stack_json, stack_layout_defaults,
                                  step_setup)
from commmodel.cli.stack_flags import StackOpt, TrainDtypeOpt, stack_flags, with_stack_flags

from commmodel.cli.plot_common import DpiOpt, OutOpt, report_figure, save_figure


def breakdown_cmd(
    model: ModelOpt,
    gpus: JobGpusOpt,
    system: SystemOpt,
    out: OutOpt,
    network: NetworkOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None,
    top: Annotated[int, typer.Option("--top", "-k", min=1, max=40, help="Layouts to draw, best first.")] = 8,
    stack: StackOpt = None,
    dtype: TrainDtypeOpt = None,
    library: LibraryOpt = None,
    dpi: DpiOpt = 120,
    json_out: JsonOpt = False,
) -> None:
    """Stacked step-time breakdown (compute, exposed TP/PP/DP comm, bubble) of the planner's top layouts."""
    from commmodel.collectives.libraries import rank_noun
    from commmodel.planner.search import plan
    from commmodel.plots.planner import breakdown_terms, plot_breakdown
    from commmodel.step.layout import RECORD_FIELDS

    from commmodel.planner.space import for_stack

    resolved, target = load_job(model, seq_len, system, network)
    the_stack, options, resolved = step_setup(stack, resolved, target, dtype,
                                              library=resolve_library(target, library)[0])
    result = plan(resolved, target, gpus, global_batch=global_batch, gpus_per_node=gpus_per_node, options=options,
                  space=for_stack(the_stack)).require_feasible()
    frame = result.to_frame(top).reset_index()
    fig = plot_breakdown(frame, top=top, title=f"{resolved.name} on {gpus} {rank_noun(target, gpus)} of "
                                                 f"{result.system_name}: "
                                                 f"step-time breakdown of the top {min(top, len(frame))} layouts")
    save_figure(fig, out, dpi)
    terms = [t for t in breakdown_terms(list(frame.columns)) if frame[f"{t}/exposed_s"].abs().sum() > 0]
    table = frame[["rank", *RECORD_FIELDS, "step_time_s",
                   *[f"{t}/exposed_s" for t in terms]]]
    if not json_out:
        table = table.round(4)
    lib, why = resolve_library(target, library)  # the flag as given: its own default says why, as estimate does
    report_figure(json_out, "breakdown", out, fig, table=table, model=resolved.name, system=result.system_name,
                  num_gpus=gpus, global_batch=result.global_batch, global_batch_assumed=global_batch is None,
                  library=lib, library_why=why, **stack_json(the_stack, options, resolved, target))


def whatif_cmd(
    model: ModelOpt,
    gpus: JobGpusOpt,
    systems: Annotated[list[str], typer.Option("--system", "-s", help="A system (profile name or YAML path), "
                                               "optionally NAME+LINK[:N]; repeat for each target, the first is the "
                                               "baseline (as compare).")],
    out: OutOpt,
    networks: Annotated[list[str] | None, typer.Option(
        "--network", help="Network LINK[:N] (or 'native') applied to every --system; repeat to compare networks (as "
                          "compare).")] = None,
    global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None,
    stack: Annotated[list[str] | None, typer.Option("--stack", help="Training stack (default megatron-core); repeat "
                                                    "to compare stacks, as compare does.")] = None,
    dtype: Annotated[list[str] | None, typer.Option("--dtype", help="Training dtype; repeat to compare dtypes, as "
                                                    "compare does.", callback=lower_case)] = None,
    library: Annotated[list[str] | None, typer.Option("--library", help="Communication library; repeat to compare "
                                                      "libraries, as compare does.")] = None,
    dpi: DpiOpt = 120,
    json_out: JsonOpt = False,
) -> None:
    """Best step time and tokens/s of the same model and GPU count across systems, networks, stacks, dtypes and
    libraries: the entries of `compare` (the same grid, the same best layouts), drawn."""
    from commmodel.cli.grid import parse_targets, run_grid
    from commmodel.io.profiles import load_system_with_network
    from commmodel.plots.planner import plot_whatif

    targets = [(label, load_system_with_network(name, net)) for label, name, net in parse_targets(systems, networks)]
    grid = run_grid(load_model(model, seq_len), targets, gpus, stack, dtype, library, {}, global_batch, None)
    rows = grid.rows
    _check_some_fit(grid)
    fig = plot_whatif(rows, title=f"what-if: {grid.model.name} on {gpus} GPUs, global batch "
                                  f"{grid.comparison.global_batch} (first = baseline)")
    save_figure(fig, out, dpi)
    import pandas as pd

    keys = ["label", "step_time_s", "tokens_per_s", "speedup_vs_baseline", "best_label"]
    table = pd.DataFrame([{k: r.get(k) for k in keys} for r in rows], columns=keys)
    shown = table if json_out else table.round(3).astype(object).where(table.notna(), "-")  # '-': no fit, as compare
    report_figure(json_out, "whatif", out, fig, table=shown, model=grid.model.name,
                  num_gpus=gpus, global_batch=grid.comparison.global_batch, global_batch_assumed=global_batch is None,
                  libraries=list(dict.fromkeys(r["library"] for r in rows)), **grid.doc)


def _check_some_fit(grid: Any) -> None:
    """One line when no target of ``plot whatif`` has a layout that fits (the figure would be empty): every target
    named, then the first one's reason as plan gives it
    (:meth:`~commmodel.planner.search.PlanResult.require_feasible`)."""
    from commmodel.errors import LayoutError

    if any(row["fits"] for row in grid.rows):
        return
    labels = ", ".join(dict.fromkeys(row["label"] for row in grid.rows))
    try:
        grid.comparison.entries[0].result.require_feasible()
    except LayoutError as why:
        raise LayoutError(f"nothing to draw: no target ({labels}) has a layout that fits; {why}") from None


@with_stack_flags
def timeline_cmd(
    model: ModelOpt,
    gpus: JobGpusOpt,
    system: SystemOpt,
    out: OutOpt,
    tp: Annotated[int, degree_option("--tp", help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, degree_option("--pp", help="Pipeline-parallel degree.")] = 1,
    cp: Annotated[int, degree_option("--cp", help="Context-parallel degree (as estimate).")] = 1,
    ep: Annotated[int, degree_option("--ep", help="Expert-parallel degree (MoE; as estimate).")] = 1,
    etp: Annotated[int, degree_option("--etp", help="Expert tensor-parallel degree (MoE).")] = 1,
    micro_batch: Annotated[int, typer.Option("--micro-batch", min=1, help="Sequences per micro-batch.",
                                             callback=check_batch)] = 1,
    global_batch: GlobalBatchOpt = None,
    zero: Annotated[int | None, typer.Option("--zero", min=0, max=3, help="ZeRO stage (≥ 1: reduce-scatter buckets; "
                                             "default: the stack's, as estimate takes it).")] = None,
    recompute: Annotated[str, typer.Option("--recompute", help="none, selective, full, op (torchtitan op-level SAC) "
                                                                       "or moe (MoE-layer recompute).")] = "none",
    sequence_parallel: Annotated[bool | None, typer.Option("--sequence-parallel/--no-sequence-parallel", help=(
        "Megatron sequence parallelism (default: the stack's, tp ≥ 2, as estimate takes it)."))] = None,
    compression: Annotated[str, typer.Option("--compression", help="none, bf16, fp16, int8 or topk (lossy).")] = "none",
    stack: StackOpt = None,
    dtype: TrainDtypeOpt = None,
    library: LibraryOpt = None,
    network: NetworkOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    seq_len: SeqLenOpt = None,
    dpi: DpiOpt = 120,
    json_out: JsonOpt = False,
    **knobs: Any,
) -> None:
    """Gantt of one micro-batch's forward/backward per layer and the bucketed gradient reduction (the layout and
    stack flags as estimate takes them; no --vpp: the drawing is one model chunk's)."""
    flags = stack_flags(knobs)
    resolved, target = load_job(model, seq_len, system, network)
    if gpus_per_node:  # fewer GPUs per node than the system has, as estimate takes it
        from commmodel.hardware.cluster import Cluster

        target = Cluster.for_gpus(target, gpus, gpus_per_node).system
    the_stack, options, resolved = step_setup(stack, resolved, target, dtype, **flags, compression=compression,
                                              library=resolve_library(target, library)[0])
    dp = max(1, gpus // (tp * cp * pp))
    layout = checked_layout(resolved, gpus, target, dict(
        tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, micro_batch=micro_batch, vpp=1, recompute=recompute,
        global_batch=global_batch, **stack_layout_defaults(the_stack, tp, dp, cp, zero, sequence_parallel)),
        options, flags, vpp_flag=False)
    fig, summary = _draw_timeline(resolved, target, gpus, layout, options)
    if not json_out:
        summary.pop("rows")  # every bar: for --json only
    save_figure(fig, out, dpi)
    report_figure(json_out, "timeline", out, fig, title=fig.axes[0].get_title(), **summary,
                  global_batch_assumed=global_batch is None,
                  library=" ".join(resolve_library(target, options.library)[:1]),
                  **stack_json(the_stack, options, resolved, target))


def _draw_timeline(model: Any, system: Any, gpus: int, layout: Any, options: Any) -> tuple[Any, dict[str, Any]]:
    """The timeline figure of ``layout`` and its --json fields (the layout, the timeline's figures, the notes of what
    the drawing leaves out, the bars)."""
    from commmodel.collectives.libraries import rank_noun
    from commmodel.plots._style import format_time_tick
    from commmodel.plots.timeline import plot_timeline, timeline_summary
    from commmodel.step.gradients import step_timeline

    timeline = step_timeline(model, system, gpus, layout, options)
    op = "all-reduce" if layout.zero == 0 else "reduce-scatter"
    degrees = " ".join(f"{name}{getattr(layout, name)}" for name in ("tp", "cp", "pp", "dp", "ep")
                       if name in ("tp", "pp", "dp") or getattr(layout, name) > 1)
    fig = plot_timeline(timeline, title=(
        f"{model.name}, {degrees} on {gpus} {rank_noun(system, gpus)} of {system.name}: last micro-batch, "
        f"gradient {op} {format_time_tick(timeline.comm_link_s)}, exposed {format_time_tick(timeline.exposed_comm_s)}"))
    notes = _left_out(model, system, gpus, layout, options, timeline.comm_link_s)
    if notes:  # on the figure too, above the axes (the layout engine keeps room for it): a slide has no stdout
        fig.suptitle("\n".join(f"note: {n}" for n in notes), fontsize=6.5, color="#444444", x=0.01, ha="left")
    fields = ("tp", "cp", "pp", "dp", "ep", "etp", "micro_batch", "global_batch", "zero", "sequence_parallel")
    return fig, {"layout": {name: getattr(layout, name) for name in fields}, **timeline_summary(timeline),
                 **({"notes": notes} if notes else {}), "rows": [dict(bar) for bar in timeline.intervals]}


def _left_out(model: Any, system: Any, gpus: int, layout: Any, options: Any, drawn_link_s: float) -> list[str]:
    """Lines for what the drawing leaves out, from the step model's own row (without estimate's advice): ZeRO-3's
    per-layer gathers and the step's figures for both (the bars are its reduce-scatters alone, without the gathers
    that share the link), a layout that does not fit in device memory, and a mixture of experts' expert-gradient
    reduction over its expert data-parallel group (the timeline draws the dense buckets only)."""
    from commmodel.plots._style import format_time_tick
    from commmodel.step.estimate import evaluate_single
    from commmodel.units import format_size_si

    row = evaluate_single(model, system, gpus, layout, options)
    notes = [f"ZeRO-3: the weight all-gathers are not drawn; the step prices the per-layer gathers and reduce-scatters "
             f"of all {row['num_micro_batches']:.0f} micro-batches together: dp/all_gather "
             f"{format_time_tick(row['dp/all_gather/exposed_s'])} and dp/reduce_scatter "
             f"{format_time_tick(row['dp/reduce_scatter/exposed_s'])} exposed (`commmodel estimate`)"] \
        if layout.zero == 3 else []
    op = "all_reduce" if layout.zero == 0 else "reduce_scatter"
    if layout.zero != 3 and row[f"dp/{op}/link_s"] > 1.01 * drawn_link_s and row["num_micro_batches"] > 1:
        link, exposed = (format_time_tick(row[f"dp/{op}/{part}_s"]) for part in ("link", "exposed"))
        notes.append(f"the bars are the last micro-batch's; this stack reduces the gradients every micro-batch and the "
                     f"step prices all {row['num_micro_batches']:.0f}: dp/{op} {link} link, {exposed} exposed "
                     f"(`commmodel estimate`)")
    notes += [] if row["fits"] else [f"does not fit: {format_size_si(row['memory_bytes_per_gpu'])} per GPU (see "
                                    f"`commmodel estimate` for the terms); drawn anyway"]
    expert_link_s = float(row.get("ep/grad_reduce/link_s", 0.0))
    if expert_link_s > 0:
        notes.append(f"not drawn: the expert gradients' reduction over the expert data-parallel group, "
                     f"{format_time_tick(expert_link_s)} link, {format_time_tick(row['ep/grad_reduce/exposed_s'])} "
                     f"exposed (ep/grad_reduce in `commmodel estimate`); the bars are the dense parameters' buckets")
    return notes

