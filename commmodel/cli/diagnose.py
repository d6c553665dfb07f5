"""``commmodel diagnose TRACE...``: profiler traces against the model (wiring only)."""

import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer

from commmodel.cli.common import (GpusPerNodeOpt, JsonOpt, NetworkOpt, QuietOpt, SeqLenOpt, SystemOpt, check_batch,
                                  checked_layout, degree_option, echo, emit_json, load_model, stack_json,
                                  stack_layout_defaults, stack_lines, step_setup)
from commmodel.cli.stack_flags import STACK_FLAGS, StackOpt, TrainDtypeOpt, stack_flags, with_stack_flags

from commmodel.io.text_table import format_table
from commmodel.errors import CommModelError

TracesArg = Annotated[list[Path], typer.Argument(help="Kineto trace files (.json or .json.gz, one per rank) or folders.")]
ThresholdOpt = Annotated[float, typer.Option("--threshold", help="Flag a collective whose busbw is below this "
                                                                 "fraction of the model's.")]
LayoutModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Compare the measured steps with `estimate` "
                                                                    "of this model (preset, size or YAML/config.json) ...")]
DegreeOpt = Annotated[int, typer.Option(min=1, help="... with this degree (tp, pp, cp; dp follows from the trace's ranks).")]
MicroBatchOpt = Annotated[int, typer.Option("--micro-batch", min=1, help="... and this micro-batch.", callback=check_batch)]
TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
PROFILER_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
"""What torch.profiler's ``tensorboard_trace_handler`` names its files: in a folder holding some, only those are
read (a run folder also holds hparams.json, metrics.json ...)."""


def trace_files(paths: list[Path]) -> list[Path]:
    """Files given, and the trace files inside folders given (sorted: the profiler's ``*.pt.trace.json(.gz)`` where
    the folder has any, else every ``*.json(.gz)``); a file named twice (a folder and a file in it, an overlapping
    glob) is read once."""
    out: list[Path] = []
    for path in paths:
        if os.path.isdir(path):  # False, not OSError, for a name too long: the reader says why in one line
            found = sorted(p for p in path.iterdir() if p.name.endswith(TRACE_SUFFIXES))
            found = [p for p in found if p.name.endswith(PROFILER_SUFFIXES)] or found
            if not found:
                raise CommModelError(f"{path}: folder holds no trace file (*.json, *.json.gz)")
            out.extend(found)
        else:
            out.append(path)
    return list({os.path.realpath(p): p for p in reversed(out)}.values())[::-1]  # a symlink loop: itself, no error


def _read_all(files: list[Path], show: bool) -> list[Any]:
    from commmodel.io.kineto import read_trace

    traces = []
    with ExitStack() as stack:
        for path in files:
            if not show:
                traces.append(read_trace(path))
                continue
            size = os.path.getsize(path) if os.path.isfile(path) else 0  # os.path: no OSError
            bar = stack.enter_context(typer.progressbar(length=size, label=path.name, file=sys.stderr))
            done = [0]

            def advance(pos: int, bar: Any = bar, done: list[int] = done) -> None:
                bar.update(pos - done[0])
                done[0] = pos

            traces.append(read_trace(path, on_progress=advance))
    return traces


def _check_layout_needs_model(model: str | None, said: dict[str, bool]) -> None:
    """A usage error when a flag of the traced job's layout is given without --model: it would be ignored."""
    given = [flag for flag, is_said in said.items() if is_said]
    if model is None and given:
        raise typer.BadParameter("describes the traced job's layout for the step comparison and needs --model "
                                 "(e.g. --model llama3-8b); without it only the collectives are compared",
                                 param_hint=given[0])


def _num(value: float | None, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value * scale)


def _trace_info(trace: Any) -> dict[str, Any]:
    """What one trace says of itself (the human output's per-trace line and notes, the same in --json)."""
    return {"path": str(trace.path), "backend": trace.backend, "rank": trace.rank, "world_size": trace.world_size,
            "collective_calls": len(trace.collectives), "steps": len(trace.steps),
            "unattributed_kernels": trace.unattributed_kernels, "calls_without_kernel": trace.calls_without_kernel,
            "notes": list(trace.notes)}


def _print_human(traces: list[Any], doc: dict, system: str) -> None:
    for info in doc["trace_info"]:
        who = (f"backend {info['backend']}, rank {info['rank']} of {info['world_size']}"
               if info["world_size"] is not None else "no distributedInfo (ranks taken from its groups)")
        echo(f"{info['path']}: {who}, {info['collective_calls']} collective calls, {info['steps']} steps"
             + (f"; {info['unattributed_kernels']} NCCL kernel(s) matched to no call"
                if info["unattributed_kernels"] else "")
             + (f"; {info['calls_without_kernel']} call(s) without a kernel" if info["calls_without_kernel"] else ""))
        for note in info["notes"]:
            echo(f"  note: {note}")
    if doc["devices"]:
        echo(f"note: {doc['devices']}")
    rows = [[r["op"], _num(r["size_bytes"], 1, "{:.0f}"), r["group_size"], r["count"],
             f"{r['algorithm'] or '-'}/{r['protocol'] or '-'}", _num(r["measured_time_s"], 1e6),
             _num(r["measured_busbw_GBps"], 1, "{:.2f}"), _num(r["model_time_s"], 1e6),
             _num(r["model_busbw_GBps"], 1, "{:.2f}"), _num(r["ratio"], 1, "{:.2f}"),
             "SLOW" if r["flag"] else "UNTIMED" if r.get("untimed") else ""]
            for r in doc["collectives"]]
    echo(f"\ncollectives vs the model on {system}, priced in {doc['library']} ({doc['library_why']}; median per "
         f"group, largest total time first)")
    echo(format_table(rows, ["op", "size_B", "ranks", "count", "algo/proto", "meas_us", "meas_busbw_GB/s",
                             "model_us", "model_busbw_GB/s", "ratio", "flag"], align="lrrrlrrrrrl"))
    flagged = [r for r in doc["collectives"] if r["flag"]]
    if flagged:
        echo(f"\n{len(flagged)} group(s) below the threshold; {flagged[0]['flag']}")
    untimed = sum(1 for r in doc["collectives"] if r.get("untimed"))
    if untimed:
        echo(f"\n{untimed} group(s) UNTIMED: their kernels last 0 µs in the trace (no duration recorded), so they are "
             "not compared; export the trace again from torch.profiler")
    if doc["steps"]:
        steps = [[s["step"], _num(s["time_s"], 1e3, "{:.2f}"), _num(s["compute_s"], 1e3, "{:.2f}"),
                  _num(s["exposed_comm_s"], 1e3, "{:.2f}"), _num(s["idle_s"], 1e3, "{:.2f}")] for s in doc["steps"]]
        echo("\nsteps (slowest rank): compute, exposed communication, idle")
        echo(format_table(steps, ["step", "time_ms", "compute_ms", "exposed_comm_ms", "idle_ms"]))


def _estimate_doc(model: str, seq_len: int | None, system: Any, world_size: int, degrees: dict[str, int],
                  global_batch: int | None, stack: str | None, library: str, dtype: str | None = None,
                  flags: dict[str, Any] | None = None) -> dict[str, Any]:
    """``estimate --json`` of the named layout on the trace's world size (dp = ranks / (tp·cp·pp)), with the
    stack's defaults and the dtype and knob flags exactly as ``estimate`` takes them (ZeRO stage, sequence
    parallelism, the layout's checks: :func:`~commmodel.cli.common.checked_layout`), in the traces' ``library``."""
    from commmodel.step.estimate import estimate

    flags = flags or {}
    the_stack, options, the_model = step_setup(stack, load_model(model, seq_len), system, dtype, **flags,
                                               library=library)
    per_replica = degrees["tp"] * degrees["cp"] * degrees["pp"]
    if world_size % per_replica:
        raise CommModelError(f"the trace has {world_size} ranks, not a multiple of tp × cp × pp = {per_replica}; "
                             f"fix --tp/--cp/--pp")
    dp = world_size // per_replica
    layout = checked_layout(the_model, world_size, system, dict(
        **degrees, dp=dp, vpp=1, recompute="none", global_batch=global_batch or degrees["micro_batch"] * dp,
        **stack_layout_defaults(the_stack, degrees["tp"], dp, degrees["cp"], None, None)), options, flags,
        vpp_flag=False)
    doc = estimate(the_model, system, world_size, layout, options, with_advice=False).to_json()
    return {**doc, **stack_json(the_stack, options, the_model, system)}


def _print_vs_estimate(vs: dict[str, Any]) -> None:
    lay = vs["layout"]
    assumed = " (assumed: one micro-batch per rank; --global-batch)" if vs.get("global_batch_assumed") else ""
    echo(f"\nsteps vs estimate ({vs['system']}, tp {lay['tp']} cp {lay['cp']} pp {lay['pp']} dp {lay['dp']}, "
         f"micro-batch {lay['micro_batch']}, global batch {lay['global_batch']}{assumed}, stack {vs.get('stack')}): "
         f"median measured / predicted")
    if "dtype" in vs:  # the estimate's stack, dtype and every assumption, as estimate states them
        for line in stack_lines(vs):
            echo(f"  {line}")
    for key in ("time_s", "compute_s", "exposed_comm_s"):
        got = vs["measured"][key] if vs["measured"] else None
        ratio = vs["ratio"][key] if vs["ratio"] else None
        echo(f"  {key[:-2]:<15} {_num(got, 1e3, '{:.2f}'):>10} ms  vs {vs['model'][key] * 1e3:10.2f} ms  "
             f"ratio {_num(ratio, 1, '{:.2f}')}")


@with_stack_flags
def diagnose_cmd(
    traces: TracesArg,
    system: SystemOpt,
    gpus_per_node: GpusPerNodeOpt = None,
    network: NetworkOpt = None,
    threshold: ThresholdOpt = 0.7,
    model: LayoutModelOpt = None,
    tp: Annotated[int, degree_option("--tp", help="Tensor-parallel degree of the traced job.")] = 1,
    pp: Annotated[int, degree_option("--pp", help="Pipeline-parallel degree of the traced job.")] = 1,
    cp: Annotated[int, degree_option("--cp", help="Context-parallel degree of the traced job.")] = 1,
    ep: Annotated[int, degree_option("--ep", help="Expert-parallel degree of the traced job (MoE).")] = 1,
    etp: Annotated[int, degree_option("--etp", help="Expert tensor-parallel degree of the traced job.")] = 1,
    micro_batch: MicroBatchOpt = 1,
    global_batch: Annotated[int | None, typer.Option(
        "--global-batch", min=1, help="Sequences per optimizer step of the traced job (default: one micro-batch per "
                                      "data-parallel rank, --micro-batch × dp, no gradient accumulation; say the "
                                      "job's own).", callback=check_batch)] = None,
    seq_len: SeqLenOpt = None,
    stack: StackOpt = None,
    dtype: TrainDtypeOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    **knobs: Any,
) -> None:
    """Read PyTorch profiler traces and set each collective against the model on --system; with --model and the
    layout (--tp/--pp/--cp/--micro-batch), also the measured steps against `estimate`."""
    from commmodel.evidence.diagnose import diagnose, job_world_size, steps_vs_estimate
    from commmodel.io.profiles import load_system_with_network

    _check_layout_needs_model(model, {"--tp": tp != 1, "--pp": pp != 1, "--cp": cp != 1, "--ep": ep != 1,
                                      "--etp": etp != 1, "--micro-batch": micro_batch != 1,
                                      "--global-batch": global_batch is not None, "--seq-len": seq_len is not None,
                                      "--stack": stack is not None, "--dtype": dtype is not None,
                                      **{f"--{name.replace('_', '-')}": knobs[name] is not None
                                         for name in STACK_FLAGS}})
    system_obj = load_system_with_network(system, network)
    if gpus_per_node is not None and gpus_per_node > system_obj.gpus_per_node:
        from commmodel.errors import ProfileError

        raise ProfileError(f"--gpus-per-node {gpus_per_node} exceeds the {system_obj.gpus_per_node} GPUs of a "
                           f"{system_obj.name} node")
    files = trace_files(traces)
    read = _read_all(files, show=not json_out and not quiet and sys.stderr.isatty())
    result = diagnose(read, system_obj, gpus_per_node, threshold)
    doc = {"traces": [str(p) for p in files], "system": system_obj.name, "gpus_per_node": gpus_per_node,
           "threshold": threshold, "devices": result.devices, "library": result.library,
           "library_why": result.library_why, "trace_info": [_trace_info(t) for t in read],
           "collectives": result.collectives, "steps": result.steps}
    if model is not None:
        degrees = {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "etp": etp, "micro_batch": micro_batch}
        predicted = _estimate_doc(model, seq_len, system_obj, job_world_size(read, result.collectives), degrees,
                                  global_batch, stack, result.library, dtype, stack_flags(knobs))
        vs = steps_vs_estimate(result.steps, predicted)
        doc["vs_estimate"] = {**vs, "global_batch_assumed": global_batch is None}
    if json_out:
        emit_json(doc)
        return
    _print_human(read, doc, system)
    if "vs_estimate" in doc:
        _print_vs_estimate(doc["vs_estimate"])
