"""``commmodel plan``: search every layout of a model on N GPUs and rank them (DESIGN §6, §8)."""

from typing import Annotated, Any

import typer

from commmodel.cli.common import (EmitOpt, GlobalBatchOpt, GpusPerNodeOpt, JobGpusOpt, JsonOpt, LibraryOpt, ModelOpt,
                                  NetworkOpt, QuietOpt, SeqLenOpt, SystemOpt, check_batch, degree_option, echo,
                                  emit_json, emitted_block, emitted_for, load_job, one_rank, progress, resolve_library,
                                  stack_json, stack_lines, step_setup)
from commmodel.cli.stack_flags import StackOpt, TrainDtypeOpt, stack_flags, with_stack_flags

from commmodel.io.text_table import format_table

TpOpt = Annotated[list[int] | None, degree_option("--tp", help="Only these tensor-parallel degrees (repeatable).")]
PpOpt = Annotated[list[int] | None, degree_option("--pp", help="Only these pipeline-parallel degrees (repeatable).")]
CpOpt = Annotated[list[int] | None, degree_option("--cp", help="Only these context-parallel degrees (repeatable; "
                                                  "default: 1 below 32K tokens, else powers of two up to 16).")]
EpOpt = Annotated[list[int] | None, degree_option("--ep", help="Only these expert-parallel degrees (MoE, repeatable; "
                                                  "default: powers of two dividing the experts, up to 64).")]
MaxTpOpt = Annotated[int | None, degree_option("--max-tp", help="Largest tensor-parallel degree (default: GPUs per "
                                                                "node).")]
ZeroOpt = Annotated[list[int] | None, typer.Option("--zero", min=0, max=3, help="Only these ZeRO stages (repeatable; default: the stack's, e.g. 0-1 for megatron-core).")]
MicroBatchOpt = Annotated[list[int] | None, typer.Option("--micro-batch", min=1, callback=check_batch,
                                                        help="Only these micro-batch sizes (repeatable).")]
RecomputeOpt = Annotated[list[str] | None, typer.Option("--recompute", help="Only these recompute policies: none, selective "
                                                       "(Korthikanti: attention core), full, op (torchtitan op-level SAC), moe "
                                                       "(Megatron-Core MoE-layer recompute) "
                                                       "(repeatable; default: the stack's).")]


def search_space(tp: list[int] | None = None, pp: list[int] | None = None, max_tp: int | None = None,
                 zero: list[int] | None = None, recompute: list[str] | None = None,
                 cp: list[int] | None = None, micro_batch: list[int] | None = None, ep: list[int] | None = None) -> Any:
    """A :class:`SearchSpace` narrowed by the CLI flags."""
    from commmodel.errors import LayoutError
    from commmodel.planner.space import SearchSpace

    update: dict[str, Any] = {}
    if max_tp and tp and max(tp) > max_tp:
        raise LayoutError(f"--tp {max(tp)} exceeds --max-tp {max_tp}: the pin and the cap disagree; drop one")
    if tp:
        update["tp"] = tuple(tp)
    if pp:
        update["pp"] = tuple(pp)
    if cp:
        update["cp"] = tuple(cp)
    if ep:
        update["ep"] = tuple(ep)
    if max_tp:
        update["max_tp"] = max_tp
    if micro_batch:
        update["micro_batches"] = tuple(micro_batch)
    if zero:
        update["zero_stages"] = tuple(zero)
    if recompute:
        from commmodel.step.layout import RECOMPUTE_NAMES

        bad = [r for r in recompute if r not in RECOMPUTE_NAMES]
        if bad:
            raise LayoutError(f"--recompute {bad[0]!r} is not a policy; use one of {', '.join(RECOMPUTE_NAMES)}")
        update["recompute"] = tuple(recompute)
    return SearchSpace(**update)


def stack_space(stack: Any, tp: list[int] | None, pp: list[int] | None, max_tp: int | None, zero: list[int] | None,
                recompute: list[str] | None, cp: list[int] | None, micro_batch: list[int] | None,
                ep: list[int] | None) -> Any:
    """The flags' :func:`search_space` with the stack's ZeRO stages, recompute policies and parallel pins where the
    flags name none (``Stack.search_pins``: ddp searches dp alone); a --zero stage the stack cannot run is refused as
    estimate refuses it (:func:`~commmodel.step.job.check_zero_stage`)."""
    from commmodel.planner.space import for_stack
    from commmodel.step.job import check_recompute_policy, check_zero_stage

    for stage in zero or ():
        check_zero_stage(stack, stage)
    for policy in recompute or ():
        check_recompute_policy(stack, policy)

    return for_stack(stack, search_space(tp, pp, max_tp, zero, recompute, cp, micro_batch, ep))


def summary_lines(result: Any, model: Any, batch_assumed: bool = False, noun: str = "GPUs") -> list[str]:
    """The two header lines: what was searched and what happened to the layouts (``result.hbm_bytes`` is the limit,
    the GPU's capacity less the ``--memory-headroom`` kept free); ``batch_assumed``: no --global-batch was given, the
    planner's default was taken (said "(assumed)", as estimate says it); ``noun``: what the ranks are ("GPUs", or
    "CPU ranks" on a CPU host: the step JSON's ``rank_noun``)."""
    from commmodel.units import format_count, format_size_si, format_time

    pruned = ", ".join(f"{reason} {count}" for reason, count in result.pruned.items() if count and reason != "memory")
    return [
        f"{model.name} ({format_count(model.num_params)} params) on {result.num_gpus} {noun} of {result.system_name}, "
        f"global batch {result.global_batch}{' (assumed)' if batch_assumed else ''} × seq {result.seq_len}",
        f"{result.num_enumerated} layouts enumerated, {result.num_enumerated - result.num_evaluated} pruned by divisibility"
        f"{f' ({pruned})' if pruned else ''}, {result.num_evaluated} evaluated, {result.pruned.get('memory', 0)} do not fit "
        f"in {format_size_si(result.hbm_bytes)} "
        f"({format_size_si(result.hbm_bytes + result.memory_headroom_bytes)} less the headroom), "
        f"{result.num_feasible} feasible; search {format_time(result.search_s)}",
    ]


def layout_table(rows: list[dict[str, Any]], rank: str = "GPU") -> str:
    """The ranked layouts as a text table; ``rank``: what one rank is in the per-rank headers ("CPU rank")."""
    from commmodel.step.layout import RECORD_SCHEMA
    from commmodel.units import format_size, format_time

    table = [
        [r["rank"], *(f.cell(r[f.name]) for f in RECORD_SCHEMA), format_time(r["step_time_s"]),
         f"{r['tokens_per_s']:,.0f}", f"{r['model_tflops_per_gpu']:.1f}", f"{r['mfu']:.1%}",
         format_size(r["memory_bytes_per_gpu"]), f"{r['exposed_comm_fraction']:.1%}"]
        for r in rows
    ]
    headers = ["rank", *(f.header for f in RECORD_SCHEMA), "step", "tokens/s", f"TFLOP/s/{rank}", "MFU",
               f"memory/{rank}", "exposed comm"]
    return format_table(table, headers, align="r" + "".join(f.align for f in RECORD_SCHEMA) + "rrrrrr")


def layout_records(result: Any, top: int) -> Any:
    """``result.records(top)`` (the ``plan --json`` "layouts") as a column table, written without building
    the records (issue 17: 100k rows in ≤ 0.2 s)."""
    import numpy as np

    from commmodel.io.json_columns import ColumnTable
    from commmodel.planner.search import LAYOUT_RECORD_KEYS
    from commmodel.step.layout import LAYOUT_SCHEMA

    count = min(top, result.num_feasible)
    fields = {field.name: field for field in LAYOUT_SCHEMA}
    columns = {key: np.arange(1, count + 1) if key == "rank" else np.asarray(result.columns[key][:count])
               for key in LAYOUT_RECORD_KEYS}
    return ColumnTable(columns, {key: fields[key].decode_column for key in LAYOUT_RECORD_KEYS if key in fields})


def _best_provenance(model: Any, system: Any, gpus: int, row: dict, options: Any) -> list[dict[str, Any]]:
    """Where the best layout's collective prices come from (calibrated / sourced / extrapolated)."""
    from commmodel.step.layout import Layout
    from commmodel.step.provenance import step_provenance

    return step_provenance(model, system, gpus, Layout.from_record(row), options)


@with_stack_flags
def plan_cmd(
    model: ModelOpt,
    gpus: JobGpusOpt,
    system: SystemOpt,
    network: NetworkOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None,
    top: Annotated[int | None, typer.Option("--top", "-k", min=1, help="Layouts to show (default 10; --csv: all).")] = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    cp: CpOpt = None,
    ep: EpOpt = None,
    max_tp: MaxTpOpt = None,
    zero: ZeroOpt = None,
    recompute: RecomputeOpt = None,
    micro_batch: MicroBatchOpt = None,
    stack: StackOpt = None,
    dtype: TrainDtypeOpt = None,
    library: LibraryOpt = None,
    emit: EmitOpt = None,
    json_out: JsonOpt = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print the ranked layouts with every breakdown column as CSV.")] = False,
    quiet: QuietOpt = False,
    **knobs: Any,
) -> None:
    """Rank every tp × pp × cp × dp layout (micro-batch, ZeRO, recompute, SP, interleaving) by step time."""
    flags = stack_flags(knobs)
    from commmodel.planner.explain import explain_plan
    from commmodel.planner.search import plan

    if csv_out and (emit or json_out):
        raise typer.BadParameter("--csv prints the ranked table alone; drop --csv to use --emit or --json",
                                 param_hint="--csv")
    resolved_model, resolved_system = load_job(model, seq_len, system, network)
    lib_name, lib_why = resolve_library(resolved_system, library)
    the_stack, options, resolved_model = step_setup(
        stack, resolved_model, resolved_system, dtype, **flags,
        library=lib_name)
    progress(f"searching layouts of {resolved_model.name} on {gpus} GPUs of {resolved_system.name} ...",
             quiet or json_out or csv_out)
    result = plan(resolved_model, resolved_system, gpus, global_batch=global_batch, gpus_per_node=gpus_per_node,
                  space=stack_space(the_stack, tp, pp, max_tp, zero, recompute, cp, micro_batch, ep),
                  options=options).require_feasible()
    if csv_out:
        from commmodel.cli.csv_words import plan_csv
        from commmodel.cli.stdout import write_stdout

        write_stdout(plan_csv(result, top))
        return
    shown = top or 10
    explanation = explain_plan(result)
    emitted = emitted_for(emit, result.row(0), resolved_model, options)
    if json_out:
        doc = _plan_json(result, resolved_model, resolved_system, gpus, options, shown, explanation, emitted,
                         library=(lib_name, lib_why), stack_doc=stack_json(the_stack, options, resolved_model,
                                                                           resolved_system))
        emit_json({**doc, "global_batch_assumed": global_batch is None})
        return
    rows = result.rows(shown)
    doc = stack_json(the_stack, options, resolved_model, resolved_system)
    lines = summary_lines(result, resolved_model, global_batch is None, doc["rank_noun"]) + [
        f"library: {lib_name} ({lib_why})", *stack_lines(doc), "", layout_table(rows, one_rank(doc))]
    if explanation:
        lines.append("")
        lines += [f"why: {e['text']}" for e in explanation]
    echo("\n".join(lines + emitted_block(emitted)))


def _plan_json(result: Any, model: Any, system: Any, gpus: int, options: Any, shown: int, explanation: list,
               emitted: Any, library: tuple[str, str], stack_doc: dict) -> dict:
    """The ``plan --json`` document: counts, ranked layouts, stack, explanation and the best layout's provenance."""
    return {
        "evaluated": result.num_evaluated, "feasible": result.num_feasible, "search_s": result.search_s,
        "layouts": layout_records(result, shown),
        "model": model.name, "system": result.system_name, "num_gpus": gpus,
        "library": library[0], "library_why": library[1], **stack_doc,
        "memory_headroom_bytes": options.memory_headroom_bytes,
        "global_batch": result.global_batch, "seq_len": result.seq_len,
        "enumerated": result.num_enumerated, "pruned": result.pruned,
        "explanation": [e["text"] for e in explanation],
        "best_provenance": _best_provenance(model, system, gpus, result.row(0), options),
        **({"emit": emitted.record()} if emitted else {}),
    }

