"""``commmodel calibrate run|import|fit|compute``: measure, import, fit, and write profiles back.

Wiring only: torch, numpy-heavy fitting and YAML writing are imported inside the commands, so
``commmodel --help`` never loads them. ``run`` is meant to be launched by torchrun or srun; every
rank executes it and only rank 0 prints.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from commmodel.cli.common import (FactorOpt, JsonOpt, MaxSizeOpt, MinSizeOpt, QuietOpt, check_batch, check_gpu_count,
                                  check_iters, check_seq_len, check_warmup, degree_option, echo, emit_json)
from commmodel.io.text_table import format_table
from commmodel.errors import CalibrationError
from commmodel.limits import MAX_BENCH_ITERS
from commmodel.io.outpath import check_csv_out, check_out_format, check_yaml_out

app = typer.Typer(
    help="Calibrate the model: benchmark collectives (torchrun/srun), import nccl-tests, fit α-β, write a profile.",
    no_args_is_help=True,
)

OutOpt = Annotated[Path, typer.Option("--out", "-o", help="CSV file to write (appended row by row); its folder must exist.",
                                      callback=check_csv_out)]
# calibrate run: every rank parses the options but only rank 0 writes (other nodes may not see the folder).
RunOutOpt = Annotated[Path, typer.Option("--out", "-o", help="CSV file rank 0 appends to, row by row; its folder must "
                                         "exist.", callback=lambda v: check_out_format(v, (".csv",), "a CSV"))]
def _known_system(name: str | None) -> str | None:
    """--system checked before anything is measured or written: a profile name or YAML that loads (the same
    one-line error as every other command), not a name that fails only later in `fit`."""
    if name is None:
        return None
    if not name.strip():
        raise CalibrationError("--system is empty; give the profile to record, e.g. --system dgx-h100, or leave it out")
    from commmodel.io.profiles import load_system

    load_system(name)
    return name


SystemRecordOpt = Annotated[
    str | None, typer.Option("--system", help="Profile name to record in the CSV (the default --base of `fit`).",
                             callback=_known_system)
]
GroupsOpt = Annotated[
    str, typer.Option(help="Comma-separated: all, intra (ranks of each node), inter (one rank per node).")
]
AlgoOpt = Annotated[str | None, typer.Option("--algo", help="Force NCCL_ALGO (ring, tree, nvls, ...); nccl only.")]
ProtoOpt = Annotated[str | None, typer.Option("--proto", help="Force NCCL_PROTO (ll, ll128, simple); nccl only.")]
TimeoutOpt = Annotated[str, typer.Option(help="A collective slower than this ends the run (e.g. 120, 30s, 2min).")]
def _positive_timeout_s(text: str) -> float:
    """--timeout in seconds, above zero (0 would end every collective at once), in one line naming the flag."""
    from commmodel.units import parse_time_s

    seconds = parse_time_s(text, allow_bare=True)
    if not seconds > 0:
        raise CalibrationError(f"--timeout {text!r} must be above zero: how long one collective may take before the "
                               f"run ends (e.g. 120s, 5min)")
    return seconds


ResumeOpt = Annotated[bool, typer.Option("--resume", help="Continue an existing --out file, skipping measured points.")]


def _parse_ops(text: str, allowed: list[str]) -> tuple[str, ...]:
    from commmodel.collectives import get_primitive

    if text.strip().lower() == "all":
        return tuple(allowed)
    out = []
    for part in text.split(","):
        if not part.strip():
            continue
        name = get_primitive(part).name
        if name not in allowed:
            raise CalibrationError(f"--ops {part.strip()!r}: not benchmarked; choose from {', '.join(allowed)} or all")
        if name not in out:
            out.append(name)
    if not out:
        raise CalibrationError(f"--ops {text!r} names no primitive; choose from {', '.join(allowed)} or all")
    return tuple(out)


def _forced(value: str | None, flag: str) -> str | None:
    """``--algo``/``--proto`` lower-cased, when commmodel models it (an unknown algorithm would be fitted with
    ring's latency steps without a word); a one-line error naming the known values otherwise."""
    if value is None:
        return None
    from commmodel.calibrate.forms import NCCL_ALGO_SPELLINGS
    from commmodel.collectives.algorithms import ALGORITHMS
    from commmodel.collectives.protocols import PROTOCOLS

    key = value.strip().lower().replace("-", "_")
    known = (sorted({*ALGORITHMS, *NCCL_ALGO_SPELLINGS}) if flag == "--algo" else [p.lower() for p in PROTOCOLS])
    if key not in known:
        raise CalibrationError(f"{flag} {value!r} is not one commmodel models; use one of {', '.join(known)}, "
                               f"or leave {flag} out")
    return key


def _size(text: str, flag: str) -> int:
    from commmodel.units import parse_size_bytes

    value = parse_size_bytes(text, allow_bare=True)
    if value < 1 or value != int(value):
        raise CalibrationError(f"{flag} {text!r} must be a whole number of bytes ≥ 1, e.g. 8, 4KiB, 64MiB")
    return int(value)


BUFFERS_PER_RANK = 3
"""Buffers of the largest size one rank holds while it measures (input, output, and the copy an all-gather or
reduce keeps), the bound :func:`_check_host_memory` prices."""


def _check_host_memory(max_bytes: int, backend: str) -> None:
    """Refuse a --max-size whose buffers cannot fit: the 10^18-byte cap of every size flag, and on the host
    backends (gloo, MPI: CPU tensors) the node's local ranks × :data:`BUFFERS_PER_RANK` buffers against the free host
    memory, before anything is allocated (an unchecked 1e30 ran the machine out of memory)."""
    import os

    from commmodel.calibrate.compute import host_free_bytes
    from commmodel.limits import MAX_SIZE_BYTES

    if max_bytes > MAX_SIZE_BYTES:
        raise CalibrationError(f"--max-size {max_bytes:.3g} B is too large, at most {MAX_SIZE_BYTES:.0e} (1 EB)")
    if backend not in {"gloo", "mpi"}:
        return  # NCCL's buffers live on the GPU: its allocator reports what does not fit
    local = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or 1)
    need, free = local * BUFFERS_PER_RANK * max_bytes, host_free_bytes()
    if need > free:
        raise CalibrationError(f"--max-size {max_bytes:,} B: {local} local rank(s) × {BUFFERS_PER_RANK} buffers need "
                               f"{need / 1e9:.3g} GB and this host has {free / 1e9:.3g} GB free; lower --max-size")


def _check_before_torch(out: Path, resume: bool, backend: str, algo: str | None, proto: str | None) -> None:
    """What `calibrate run` can refuse before torch loads (about a second): an --out that exists without --resume
    (rank 0 only: the other nodes may not see its folder), and --algo/--proto with a backend that runs its own."""
    import os

    if os.environ.get("RANK", "0") == "0":
        from commmodel.io.measurements import check_new_out

        check_new_out(out, resume)
    forced = [flag for flag, value in (("--algo", algo), ("--proto", proto)) if value]
    if forced and backend in {"gloo", "mpi"}:
        raise CalibrationError(f"{' and '.join(forced)} set NCCL_ALGO/NCCL_PROTO and apply to the nccl backend only; "
                               f"{backend} runs its own algorithm (drop {' and '.join(forced)})")
    from commmodel.calibrate.launch import check_nccl_names

    check_nccl_names(algo, proto)


@app.command("run")
def run_cmd(
    out: RunOutOpt,
    backend: Annotated[str, typer.Option(
        help="auto (mpi under mpirun, else nccl with CUDA, else gloo), nccl, gloo or mpi (mpi4py, under mpirun).")] = "auto",
    ops: Annotated[str, typer.Option(help="Comma-separated primitives or 'all'.")] = "all",
    min_size: MinSizeOpt = "8B",
    max_size: MaxSizeOpt = "64MiB",
    factor: FactorOpt = 2.0,
    warmup: Annotated[int, typer.Option(help=f"Untimed iterations per point (at most {MAX_BENCH_ITERS:,}).", min=0,
                                        callback=check_warmup)] = 5,
    iters: Annotated[int, typer.Option(help=f"Timed iterations per point (at most {MAX_BENCH_ITERS:,}).", min=1,
                                       callback=check_iters)] = 20,
    groups: GroupsOpt = "all",
    algo: AlgoOpt = None,
    proto: ProtoOpt = None,
    dtype: Annotated[str, typer.Option(help="float32, float16 or bfloat16.")] = "float32",
    timeout: TimeoutOpt = "120s",
    resume: ResumeOpt = False,
    system: SystemRecordOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Benchmark collectives on every rank of a torchrun/srun/mpirun job; rank 0 appends each point to --out."""
    from commmodel.calibrate.bench import BenchConfig, run_benchmark
    from commmodel.calibrate.bench_ops import BENCH_OPS
    from commmodel.calibrate.dtypes import BENCH_DTYPES

    kinds = tuple(dict.fromkeys(g.strip().lower() for g in groups.split(",") if g.strip()))
    bad = [k for k in kinds if k not in {"all", "intra", "inter"}]
    if bad or not kinds:
        raise CalibrationError(f"--groups {groups!r}: use all, intra, inter (comma-separated)")
    low, high = _size(min_size, "--min-size"), _size(max_size, "--max-size")
    if low > high:
        raise CalibrationError(f"--min-size {min_size} exceeds --max-size {max_size}; swap them")
    if not 1 < factor < float("inf"):
        raise CalibrationError(f"--factor {factor:g} must be > 1 and finite (2 doubles the size at each step)")
    from commmodel.sweep_sizes import sweep_count

    sweep_count(low, high, factor, CalibrationError)  # refused before any rank starts
    _check_host_memory(high, backend)
    if backend not in {"auto", "nccl", "gloo", "mpi"}:
        raise CalibrationError(f"--backend {backend!r}: use auto, nccl, gloo or mpi")
    if dtype not in BENCH_DTYPES:
        raise CalibrationError(f"--dtype {dtype!r}: use {', '.join(BENCH_DTYPES)}")
    _check_before_torch(out, resume, backend, algo, proto)
    config = BenchConfig(
        out_path=out, backend=backend, ops=_parse_ops(ops, list(BENCH_OPS)), min_size_bytes=low, max_size_bytes=high,
        factor=factor, warmup=warmup, iters=iters, groups=kinds, algorithm=algo, protocol=proto, dtype=dtype,
        timeout_s=_positive_timeout_s(timeout), resume=resume, system=system, quiet=quiet or json_out,
    )
    from commmodel.calibrate.launch import check_launched

    check_launched(backend)  # every flag checked: no torchrun/srun variables is one line before torch's ~1 s import
    summary = run_benchmark(config)
    if summary is None:
        return
    if json_out:
        emit_json(summary)
        return
    echo(f"{summary['rows_written']} point(s) written to {summary['out']} ({summary['backend']}, "
         f"{summary['world_size']} ranks on {summary['num_nodes']} node(s))")
    for reason in summary["skipped"]:
        echo(f"skipped: {reason}")


@app.command("import")
def import_cmd(
    paths: Annotated[list[Path], typer.Argument(help="nccl-tests stdout saved to a file, or a -J JSON report.")],
    out: OutOpt,
    op: Annotated[str | None, typer.Option(help="Collective, when the output does not say (e.g. all_reduce).")] = None,
    ranks: Annotated[int | None, typer.Option(help="Ranks, when there are no '# Rank' lines.", min=1,
                                              callback=check_gpu_count)] = None,
    nodes: Annotated[int | None, typer.Option(help="Nodes, when no '# Rank ... on HOST' lines say.", min=1,
                                              callback=check_gpu_count)] = None,
    algo: Annotated[str | None, typer.Option("--algo", help="Algorithm the run forced (NCCL_ALGO), e.g. ring.")] = None,
    proto: Annotated[str | None, typer.Option("--proto", help="Protocol the run forced (NCCL_PROTO).")] = None,
    in_place: Annotated[bool, typer.Option("--in-place", help="Use the in-place columns, not out-of-place.")] = False,
    append: Annotated[bool, typer.Option("--append", help="Add to an existing --out file.")] = False,
    system: SystemRecordOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Convert nccl-tests output (text table or -J JSON) into a measurements CSV."""
    import datetime

    from commmodel.collectives import get_primitive
    from commmodel.io.measurements import write_measurements
    from commmodel.io.nccl_tests import read_nccl_tests

    options = {"op": get_primitive(op).name if op else None, "ranks": ranks, "nodes": nodes,
               "algorithm": _forced(algo, "--algo"), "protocol": _forced(proto, "--proto"),
               "in_place": in_place}
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    env: dict[str, Any] = {"created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "tool": "commmodel calibrate import", "imported_from": ", ".join(p.name for p in paths),
                           "backend": "nccl-tests"}  # the job kind: --append refuses a gloo/MPI `calibrate run` file
    for path in paths:
        imported = read_nccl_tests(path, **options)
        rows.extend(imported.rows)
        notes.extend(imported.notes)
        for key, value in imported.env.items():
            env.setdefault(key, value)
    env["system"] = system or ""
    written = write_measurements(out, "collectives", env, rows, notes=notes, append=append, append_flag="--append",
                                 warn=lambda text: typer.echo(f"warning: {text}", err=True))
    summary: dict[tuple, list[int]] = {}
    for row in rows:
        summary.setdefault((row["op"], row["num_ranks"], row["num_nodes"]), []).append(row["size_bytes"])
    tables = [{"op": k[0], "num_ranks": k[1], "num_nodes": k[2], "num_rows": len(v),
               "min_size_bytes": min(v), "max_size_bytes": max(v)} for k, v in summary.items()]
    if json_out:
        emit_json({"out": str(out), "rows_written": written, "tables": tables, "notes": notes})
        return
    from commmodel.units import format_size

    echo(format_table([[t["op"], t["num_ranks"], t["num_nodes"], t["num_rows"], format_size(t["min_size_bytes"]),
                        format_size(t["max_size_bytes"])] for t in tables],
                      ["op", "ranks", "nodes", "rows", "from", "to"], align="lrrrrr"))
    echo(f"{written} row(s) written to {out}")
    for note in notes:
        echo(f"note: {note}")


@app.command("fit")
def fit_cmd(
    file: Annotated[Path, typer.Argument(help="Measurements CSV from `calibrate run` or `calibrate import`.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the calibrated profile YAML here; its folder must exist.",
                                                      callback=check_yaml_out)] = None,
    base: Annotated[str | None, typer.Option("--base", help="System to calibrate (name or YAML).")] = None,
    ops: Annotated[str | None, typer.Option(help="Fit only these primitives (comma-separated).")] = None,
    compute: Annotated[Path | None, typer.Option(help="`calibrate compute` CSV: sets gpu.matmul_efficiency.")] = None,
    name: Annotated[str | None, typer.Option(help="Name of the written profile (default: BASE-calibrated).")] = None,
    max_segments: Annotated[int, typer.Option("--max-segments", help="Most size regimes per group.", min=1, max=5)] = 3,
    json_out: JsonOpt = False,
) -> None:
    """Fit α and B per (op, algorithm, ranks, nodes) and, with a base system, write a calibrated profile."""
    from commmodel.calibrate.report import fit_report
    from commmodel.io.outpath import refuse_measurements

    refuse_measurements(out, "a profile YAML")
    if name is not None:  # blank, untypable or a shipped profile's: one line
        from commmodel.io.profiles import check_new_profile_name

        check_new_profile_name(name, CalibrationError, f"--name {name!r}")
    doc, lines = fit_report(file, out=out, base=base, ops=[o for o in (ops or "").split(",") if o.strip()] or None,
                            compute=compute, name=name, max_segments=max_segments)
    if json_out:
        emit_json(doc)
        return
    for line in lines:
        echo(line)


def _measure_row_by_row(out: Path, resume: bool, run: Callable[[Any], tuple[list[dict[str, Any]], dict[str, Any]]]
                        ) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    """``run(start)``'s rows, environment and the count of rows written, each row written to ``out`` the moment it is measured (rows already in a resumed file are
    not added twice); an interrupt (Ctrl-C, SIGTERM) keeps every row written and says so in one line."""
    from commmodel.io.measurements import MeasurementWriter, point_key

    state: dict[str, Any] = {}

    def start(env: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        writer = state["writer"] = MeasurementWriter(out, "compute", env, resume=resume)
        for text in writer.warnings:
            typer.echo(f"warning: {text}", err=True)
        return lambda row: None if point_key(row) in writer.points_in_file else writer.write_row(row)

    try:
        rows, env = run(start)
        return rows, env, state["writer"].rows_written
    except KeyboardInterrupt:
        kept = state["writer"].rows_written if "writer" in state else 0
        raise CalibrationError(f"interrupted: {kept} row(s) kept in {out}; rerun with --resume to measure the rest")
    finally:
        if "writer" in state:
            state["writer"].close()


def _not_yet_measured(out: Path, resume: bool, shapes: list[tuple[str, int, int, int]],
                      dtype: str) -> list[tuple[str, int, int, int]]:
    """The GEMMs (kind, m, k, n) a resumed ``--out`` does not hold yet in ``dtype`` (all of them without --resume)."""
    if not (resume and out.exists() and out.stat().st_size > 0):
        return shapes
    from commmodel.io.measurements import read_measurements

    done = {(r["kind"], r["m"], r["k"], r["n"], r["dtype"]) for r in read_measurements(out).rows if "kind" in r}
    return [s for s in shapes if (*s, dtype) not in done]


@app.command("compute")
def compute_cmd(
    out: OutOpt,
    hidden: Annotated[int, typer.Option(help="Model hidden size h.", min=1)] = 4096,
    tp: Annotated[int, degree_option("--tp", help="Tensor-parallel degree (splits h and ffn).")] = 1,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Sequence length.", min=1, callback=check_seq_len)] = 2048,
    micro_batch: Annotated[int, typer.Option("--micro-batch", help="Micro-batch size.", min=1,
                                             callback=check_batch)] = 1,
    ffn: Annotated[int | None, typer.Option(help="MLP size (default 4h).", min=1)] = None,
    dtype: Annotated[str | None, typer.Option(
        help="bf16, fp16, fp32 or fp8 (torch._scaled_mm, sm_89 and later; fits matmul_efficiency_fp8). "
             "Default: bf16 on GPU, fp32 on CPU.")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    warmup: Annotated[int, typer.Option(min=0, help=f"Untimed runs per GEMM (at most {MAX_BENCH_ITERS:,}).",
                                        callback=check_warmup)] = 3,
    iters: Annotated[int, typer.Option(min=1, help=f"Timed runs per GEMM (at most {MAX_BENCH_ITERS:,}).",
                                       callback=check_iters)] = 10,
    resume: Annotated[bool, typer.Option("--resume", help="Append to an existing --out file.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Time the GEMMs of one tensor-parallel transformer layer (TFLOP/s) for `fit --compute`."""
    from commmodel.calibrate.compute import (check_fits_memory, check_fp8_device, check_gpu_present, host_free_bytes,
                                             layout_shapes, run_matmuls)
    from commmodel.io.measurements import check_new_out

    check_new_out(out, resume)  # before the minutes of timing, not after
    if device not in {"auto", "cpu", "cuda"}:
        raise CalibrationError(f"--device {device!r}: use auto, cpu or cuda")
    check_gpu_present(device)
    if dtype is None and device == "cpu":
        dtype = "fp32"
    elif dtype is None:
        import torch

        on_gpu = device == "cuda" or (device == "auto" and torch.cuda.is_available())
        dtype = "bf16" if on_gpu else "fp32"
    shapes = _not_yet_measured(out, resume, layout_shapes(hidden, tp, seq_len, micro_batch, ffn), dtype)
    if not shapes:
        echo(f"every GEMM of this layer is already in {out}; nothing to measure")
        return
    if device == "cpu":  # before torch loads (~1 s); run_matmuls checks a GPU's own free memory and capability
        check_fp8_device(dtype, "cpu", shapes)
        check_fits_memory(shapes, dtype, "cpu", host_free_bytes())
    rows, env, written = _measure_row_by_row(out, resume,
                                             lambda start: run_matmuls(shapes, dtype, device, warmup, iters, start))
    if json_out:
        emit_json({"out": str(out), "rows": rows})
        return
    echo(format_table([[r["kind"], r["m"], r["k"], r["n"], r["dtype"], f"{r['time_s_median'] * 1e6:.1f}",
                        f"{r['tflops_median']:.4g}"] for r in rows],
                      ["gemm", "m", "k", "n", "dtype", "time us", "TFLOP/s"], align="lrrrlrr"))
    echo(f"{written} row(s) written to {out} on {env['device']}"
         + (f" ({len(rows) - written} already there)" if written < len(rows) else ""))

