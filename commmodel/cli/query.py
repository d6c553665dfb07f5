"""``commmodel query "TEXT"``: answer a free-text question, listing every assumption it made."""

from typing import Annotated, Any

import typer

from commmodel.cli.common import (GpusPerNodeOpt, JsonOpt, NetworkOpt, check_batch, check_gpus, check_seq_len, echo,
                                  emit_json, lower_case, one_rank)
from commmodel.cli.stack_flags import StackOpt
from commmodel.io.text_table import format_table


_LIBRARY_NAMES = {"nccl": "NCCL", "rccl": "RCCL", "gloo": "gloo", "mpi": "Open MPI", "mpich": "MPICH"}
"""How the table names the library whose choice it marks."""


def query_cmd(
    text: Annotated[str, typer.Argument(help='The question, e.g. "64 H100 over 400GbE, llama3-70b, batch 1024".')],
    system: Annotated[str | None, typer.Option("--system", "-s", help="Use this system (profile name or YAML path) instead of the one the text implies.")] = None,
    network: NetworkOpt = None,
    gpus: Annotated[int | None, typer.Option("--gpus", "-n", min=1, callback=check_gpus,
                                                    help="GPU count (overrides the text), 1 to 16,777,216.")] = None,
    gpus_per_node: GpusPerNodeOpt = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model preset, parameter count or YAML path (overrides the text).")] = None,
    global_batch: Annotated[int | None, typer.Option("--global-batch", min=1, help="Sequences per step (overrides the text).",
                                                     callback=check_batch)] = None,
    seq_len: Annotated[int | None, typer.Option("--seq-len", min=1, help="Tokens per sequence (overrides the text).",
                                                callback=check_seq_len)] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help=(
        "Training dtype: bf16, fp16, fp32, fp8, fp8-current, fp8-rowwise, fp8-blockwise, mxfp8, nvfp4 (overrides the "
        "text)."), callback=lower_case)] = None,
    stack: StackOpt = None,
    top: Annotated[int, typer.Option("--top", "-k", min=1, help="Layouts to list.")] = 3,
    json_out: JsonOpt = False,
) -> None:
    """Answer "8 GPUs, 1B params, IB NDR"-style questions: layouts, collective costs, what-ifs."""
    from commmodel.io.profiles import ShippedSystems, load_gpus, load_links, load_system_with_network
    from commmodel.query.answer import QueryOverrides, answer_query
    from commmodel.query.parse import parse_query

    shipped = ShippedSystems()  # the shipped names (file stems, sorted), each system read on first use
    parsed = parse_query(text, tuple(shipped))
    chosen = load_system_with_network(system, network) if system else None
    if chosen is None and network:
        from commmodel.errors import QueryError

        raise QueryError("--network needs --system (or name the network in the text, e.g. 'over 100GbE')")
    catalogues = {"systems": shipped, "links": load_links(), "gpus": load_gpus()}
    overrides = QueryOverrides(system=chosen, gpus=gpus, gpus_per_node=gpus_per_node, model=model,
                               global_batch=global_batch, seq_len=seq_len, dtype=dtype, stack=stack, top=top)
    document = answer_query(parsed, catalogues, overrides)
    if json_out:
        emit_json(document)
        return
    echo("\n".join(render(document)))


def _collective_lines(answer: dict[str, Any]) -> list[str]:
    from commmodel.units import format_rate, format_size, format_time

    lines = [f"{answer['op']} of {format_size(answer['size_bytes'])} on {answer['num_ranks']} {answer['rank_noun']} "
             f"({answer['num_nodes']} node{'s' if answer['num_nodes'] != 1 else ''} of {answer['system']}): "
             f"{format_time(answer['time_s'])} with "
             f"{answer['algorithm']}{' (asked)' if answer.get('algorithm_asked') else ''}"
             f"{'' if answer['library'] == 'nccl' else ' (' + answer['library'] + ')'}, "
             f"algbw {format_rate(answer['algbw_GBps'] * 1e9)}, busbw {format_rate(answer['busbw_GBps'] * 1e9)}"]
    picked = ("asked" if answer.get("algorithm_asked") else
              f"{_LIBRARY_NAMES.get(answer['library'], answer['library'])}'s choice")
    rows = [[a["algorithm"], format_time(a["time_s"]), format_rate(a["busbw_GBps"] * 1e9),
             picked if a["algorithm"] == answer["algorithm"] else ""] for a in answer["algorithms"]]
    if len(rows) > 1:
        lines += ["", format_table(rows, ["algorithm", "time", "busbw", "picked"], align="lrrl")]
    return lines


def _collective_compare_lines(answer: dict[str, Any]) -> list[str]:
    from commmodel.units import format_rate, format_size, format_time

    rows = [[t["label"], t["algorithm"], format_time(t["time_s"]), format_rate(t["busbw_GBps"] * 1e9),
             "-" if t["speedup_vs_baseline"] is None else f"{t['speedup_vs_baseline']:.2f}x"]  # a 0 s target
            for t in answer["targets"]]
    first = answer["targets"][0]
    return [f"{first['op']} of {format_size(first['size_bytes'])} on {first['num_ranks']} {first['rank_noun']}", "",
            format_table(rows, ["target", "algorithm", "time", "busbw", "vs baseline"], align="llrrr")]


def _plan_lines(answer: dict[str, Any]) -> list[str]:
    from commmodel.step.layout import RECORD_SCHEMA
    from commmodel.units import format_count, format_duration, format_rate, format_size, format_size_si, format_time

    best = answer["best"]
    per = one_rank(answer)
    lines = [f"{answer['model']}", f"on {answer['num_gpus']} {answer['rank_noun']} of {answer['system']}, global batch "
             f"{answer['global_batch']} × seq {answer['seq_len']} ({answer['search']['feasible']} feasible layouts "
             f"of {answer['search']['evaluated']} evaluated in {format_time(answer['search']['search_s'])}; "
             f"{format_size_si(answer['memory_headroom_bytes'])} of memory kept free per {per}; MFU against "
             f"{answer['mfu_peak']})", ""]
    rows = [[r["rank"], *(f.cell(r[f.name]) for f in RECORD_SCHEMA), format_time(r["step_time_s"]),
             f"{r['mfu']:.1%}", format_size(r["memory_bytes_per_gpu"])] for r in answer["best_layouts"]]
    headers = ["rank", *(f.header for f in RECORD_SCHEMA), "step", "MFU", "memory/GPU"]
    lines += [format_table(rows, headers, align="r" + "".join(f.align for f in RECORD_SCHEMA) + "rrr"), ""]
    if best.get("time_to_train_s"):
        lines.append(f"{format_count(answer['train_tokens'])} tokens take {format_duration(best['time_to_train_s'])} "
                     f"at the best layout's {best['tokens_per_s']:,.0f} tokens/s (no restarts or evaluation counted)")
    sync = answer["gradient_sync"]
    lines.append(f"best: {best['layout']}: step {format_time(best['step_time_s'])}, {best['tokens_per_s']:,.0f} "
                 f"tokens/s, MFU {best['mfu']:.1%}; {best['bound']}-bound, exposed communication "
                 f"{best['exposed_comm_fraction']:.1%}" + (" (a bottleneck)" if best["comm_bottleneck"] else ""))
    experts = " and expert (edp) gradients" if "ep/grad_reduce" in sync["terms"] else ""
    lines.append(f"gradient sync (data parallel{experts}): {format_time(sync['link_s'])} on the links, "
                 f"{format_time(sync['exposed_s'])} exposed" if sync["terms"] else "gradient sync: none (dp = 1)")
    ar = sync.get("all_reduce")
    if ar:
        command = (f"commmodel collective all_reduce --size {round(ar['size_bytes'])}B --gpus {ar['num_ranks']} "
                   f"-s {answer['system']} --gpus-per-node {ar['ranks_per_node']}")
        lines.append(f"one plain all-reduce of the dense gradients ({format_size(ar['size_bytes'])} over dp "
                     f"{ar['num_ranks']}, {ar['ranks_per_node']} per node), as `{command}` prices it (the library's "
                     f"own choice): {format_time(ar['time_s'])} with {ar['algorithm']}, busbw "
                     f"{format_rate(ar['busbw_GBps'] * 1e9)}")
    for item in answer["advice"]:
        if isinstance(item, dict):
            note = f" ({item['note']})" if item.get("note") else ""
            lines.append(f"advice: {item['change']}: {item['gain_pct']:+.1f}% tokens/s, step "
                         f"{format_time(item['step_time_s'])}{note}")
        else:
            lines.append(f"advice: {item}")
    return lines + [f"why: {text}" for text in answer["explanation"]]


def _compare_lines(answer: dict[str, Any]) -> list[str]:
    from commmodel.units import format_count, format_duration, format_time

    rows = []
    for t in answer["targets"]:
        rows.append([t["label"], t.get("best_label", "no layout fits"),
                     format_time(t["step_time_s"]) if t["fits"] else "-",
                     f"{t['tokens_per_s']:,.0f}" if t["fits"] else "-",
                     f"{t['exposed_comm_fraction']:.1%}" if t["fits"] else "-",
                     "baseline" if t is answer["targets"][0] else
                     (f"{t['speedup_vs_baseline']:.2f}x" if t.get("speedup_vs_baseline") else "-")])
    lines = [answer["model"], "", format_table(rows, ["target", "best layout", "step", "tokens/s", "exposed comm",
                                                      "vs baseline"], align="llrrrr"), ""]
    lines += answer["summary"]
    return lines + [f"{t['label']}: {format_count(answer['train_tokens'])} tokens take "
                    f"{format_duration(t['time_to_train_s'])}" for t in answer["targets"] if t.get("time_to_train_s")]


_RENDERERS = {"collective": _collective_lines, "collective_compare": _collective_compare_lines, "plan": _plan_lines,
              "compare": _compare_lines}
"""One renderer per answer kind (``answer["kind"]``)."""


def render(document: dict[str, Any]) -> list[str]:
    """Human output: the answer (its kind's renderer), then the assumptions with their overrides."""
    lines = _RENDERERS[document["answer"]["kind"]](document["answer"])
    if document["assumptions"]:
        lines += ["", "assumptions:"]
        for a in document["assumptions"]:
            lines.append(f"  {a['field']} = {a['value']}: {a['reason']} (override: {a['override']})")
    read_as = document.get("parsed", {}).get("notes") or []
    if read_as:  # how words were read ("llama 70b" as llama3-70b, "16k" as 16,384): said, never silent
        lines += ["", "read:"] + [f"  {note}" for note in read_as]
    return lines
