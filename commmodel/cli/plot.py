"""``commmodel plot KIND ... --out FILE.png``: draw a figure from the model and write it to a file.

Wiring only: parse, call the core and :mod:`commmodel.plots`, save. matplotlib and pandas are
imported inside the commands so ``commmodel --help`` and the other commands stay fast.
"""

from pathlib import Path
from typing import Annotated, Any

import typer

from commmodel.cli.common import (FactorOpt, GpusPerNodeOpt, JsonOpt, MaxSizeOpt, MinSizeOpt, NetworkOpt, SystemOpt,
                                  check_batch, check_gpu_count, check_gpus, check_selection, parse_size_option,
                                  LibraryOpt, SelectionOpt, load_model, resolve_library, stack_json, step_setup)
from commmodel.cli.stack_flags import StackOpt

from commmodel.cli.plot_common import DpiOpt, OutOpt, report_figure, save_figure
from commmodel.errors import CalibrationError, CommModelError
from commmodel.limits import MAX_GPUS, check_range

OpArg = Annotated[str, typer.Argument(help="Collective: all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, ...")]


def _check_plottable(op: str, gpus: int) -> None:
    """Refuse what has no busbw to draw on the figure's log axes (before: matplotlib's "Data cannot be
    log-scaled" traceback): one GPU moves nothing, and a barrier carries no message."""
    from commmodel.collectives import get_primitive

    if get_primitive(op).name == "barrier":
        raise CommModelError("plot collective barrier: a barrier carries no message, so time and busbw do not vary "
                             "with size; use `commmodel collective barrier --size 0` for its time")
    if gpus < 2:
        raise CommModelError(f"plot collective --gpus {gpus}: one GPU moves no data (time 0, busbw 0), nothing to "
                             f"draw on log axes; use --gpus 2 or more")


def _size(text: str, flag: str) -> float:
    from commmodel.errors import UnitError

    try:
        return parse_size_option(text, flag)
    except UnitError as err:
        raise CommModelError(f"{flag}: {err}") from None


def read_measurements(path: Path, setup: str | None) -> Any:
    """A CSV of measured points (size_bytes plus time_s/time_s_median/time_us and/or busbw_GBps), optionally
    one setup_id: the shipped nccl-tests table or a ``commmodel calibrate`` results file."""
    import pandas as pd

    import io

    from commmodel.io.yaml_read import read_user_bytes

    try:  # the shared reader: a device, a silent pipe or a file over 256 MiB is one line, not a hang
        raw = read_user_bytes(path, CommModelError, "give a CSV of measured points")
    except CommModelError as err:
        raise CommModelError(f"--measured {err}") from None
    try:
        # '#' lines are commmodel's environment block; '#' inside a field (URLs) is data, so no comment=.
        text = "".join(line for line in raw.decode("utf-8").splitlines(keepends=True) if not line.startswith("#"))
        frame = pd.read_csv(io.StringIO(text))
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise CommModelError(f"--measured {path}: not a readable CSV ({err})") from None
    if "size_bytes" not in frame.columns:
        raise CommModelError(f"--measured {path}: needs a size_bytes column; it has {', '.join(frame.columns)}")
    if setup is not None:
        if "setup_id" not in frame.columns:
            raise CommModelError(f"--setup {setup}: {path} has no setup_id column")
        known = sorted(frame["setup_id"].dropna().unique())
        frame = frame[frame["setup_id"] == setup]
        if frame.empty:
            raise CommModelError(f"--setup {setup!r} is not in {path}; known: {', '.join(known)}")
    return frame


def _canonical_op(name: str) -> str | None:
    """nccl-tests collective names such as "alltoall (in-place)" -> all_to_all (None if unknown)."""
    from commmodel.collectives import get_primitive

    try:
        return get_primitive(name.split(" ")[0]).name
    except CommModelError:
        return None


def _matching_points(points: Any, op: str, num_ranks: int, path: Path) -> Any:
    """Rows of the same collective (``collective`` or ``op`` column) and group size (``n_gpus``/``num_ranks``)."""
    for column in ("collective", "op"):
        if column in points.columns:
            ops = [_canonical_op(str(name)) for name in points[column]]
            kept = points[[o == op for o in ops]]
            if kept.empty:
                have = sorted({o for o in ops if o})
                raise CommModelError(f"--measured {path}: no {op} rows to overlay; it has {', '.join(have) or 'none'}")
            points = kept
    for column in ("n_gpus", "num_ranks"):
        if column in points.columns:
            sizes = sorted({int(v) for v in points[column].dropna()})
            points = points[points[column] == num_ranks]
            if points.empty:
                raise CommModelError(f"--measured {path}: no {op} rows on {num_ranks} ranks; "
                                     f"it has {', '.join(map(str, sizes)) or 'none'}; set --gpus to one of those")
    if points.empty:
        raise CommModelError(f"--measured {path}: no {op} rows to overlay; check --setup and the collective")
    return points


def collective_cmd(
    op: OpArg,
    gpus: Annotated[int, typer.Option("--gpus", "-n", help="Ranks in the communicator, 1 to 16,777,216.", min=1,
                                           callback=check_gpus)],
    system: SystemOpt,
    out: OutOpt,
    network: NetworkOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    min_size: MinSizeOpt = "8B",
    max_size: MaxSizeOpt = "16GiB",
    factor: FactorOpt = 2.0,
    measured: Annotated[Path | None, typer.Option("--measured", help="CSV of measured points to overlay "
                                                    "(size_bytes with time_us/time_s/time_s_median and/or busbw_GBps).")] = None,
    setup: Annotated[str | None, typer.Option("--setup", help="Only rows of this setup_id from --measured; alone, a "
                                              "setup of the shipped nccl-tests table (commmodel/data/nccl_tests.csv).")] = None,
    algo: Annotated[str, typer.Option("--algo", help="nccl (what NCCL runs), all (textbook ones too) or "
                                      "comma-separated names, e.g. ring,tree.")] = "nccl",
    library: LibraryOpt = None,
    selection: SelectionOpt = "nccl",
    dpi: DpiOpt = 120,
    json_out: JsonOpt = False,
) -> None:
    """Time and busbw vs message size per algorithm, with latency/bandwidth-bound regions and crossovers, in the
    communication library the system runs (``--library``), each algorithm with the protocol ``--selection`` picks and
    the library's own choice marked (as `collective` and `sweep` price it; ``--selection fastest``: the physically
    fastest protocol, the fastest curve marked)."""
    from commmodel.hardware.cluster import Cluster
    from commmodel.io.profiles import load_system_with_network
    from commmodel.plots.collectives import describe_crossovers, plot_collective_sweep
    from commmodel.plots.sweep_data import collective_sweep
    from commmodel.sweep_sizes import sweep_sizes_bytes

    _check_plottable(op, gpus)
    base = load_system_with_network(system, network)
    view = Cluster.for_gpus(base, gpus, gpus_per_node).system
    sizes = sweep_sizes_bytes(_size(min_size, "--min-size"), _size(max_size, "--max-size"), factor)
    algorithms = algo if algo in ("nccl", "all") else [a.strip() for a in algo.split(",") if a.strip()]
    lib, lib_why = resolve_library(view, library)
    how = check_selection(selection)
    sweep = collective_sweep(op, view, gpus, sizes, algorithms=algorithms, library=lib, selection=how)
    if measured is None and setup is not None:
        from commmodel.io.validation_data import NCCL_TESTS_CSV

        measured = NCCL_TESTS_CSV
    points = read_measurements(measured, setup) if measured is not None else None
    if points is not None:
        points = _matching_points(points, sweep.op, gpus, measured)
    per_node = min(gpus, view.gpus_per_node)
    fig = plot_collective_sweep(sweep, points, measured_label=setup or "measured",
                                choice_label=f"{lib}'s choice" if how == "library" else "the fastest",
                                title=f"{sweep.op} on {gpus} ranks ({-(-gpus // per_node)} node(s) × {per_node}) of "
                                      f"{view.name}, {lib}, "
                                      + ("the library's choice marked" if how == "library" else "the fastest marked"))
    save_figure(fig, out, dpi)
    if json_out:
        report_figure(True, "collective", out, fig, op=sweep.op, num_ranks=gpus, system=view.name, library=lib,
                      library_reason=lib_why, selection="nccl" if how == "library" else how,
                algorithms=sorted(sweep.rows["algorithm"].unique()),
                crossovers=[{"size_bytes": c.size_bytes, "below": c.below, "above": c.above}
                            for c in sweep.crossovers.itertuples()],
                balance_size_bytes=sweep.best_balance_bytes,
                measured_points=0 if points is None else int(len(points)),
                rows=[{"size_bytes": float(r.size_bytes), "algorithm": str(r.algorithm), "protocol": str(r.protocol),
                       "time_s": float(r.time_s), "busbw_GBps": float(r.busbw_GBps), "best": bool(r.best)}
                      for r in sweep.rows.itertuples()])
    else:
        report_figure(False, "collective", out, fig, library=f"{lib} ({lib_why})",
                      marked=(f"{lib}'s own choice (--selection {selection})" if how == "library"
                              else "the fastest algorithm × protocol (--selection fastest)"),
                      algorithms=", ".join(sorted(sweep.rows["algorithm"].unique())),
                marks=describe_crossovers(sweep))


def scaling_cmd(
    systems: Annotated[list[str], typer.Option("--system", "-s", help="Profile name or YAML path; repeat to compare.")],
    out: OutOpt,
    op: Annotated[str | None, typer.Argument(help="Collective to scale (with --size); omit with --model.")] = None,
    size: Annotated[str | None, typer.Option("--size", help="Message size S of the collective, e.g. 1GiB.")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Instead of a collective: the planner's best "
                                                "layout of this model at each GPU count.")] = None,
    metric: Annotated[str, typer.Option("--metric", help="With --model: tokens_per_s, step_time_s or mfu.")] = "tokens_per_s",
    global_batch: Annotated[int | None, typer.Option("--global-batch", min=1, help="With --model: sequences per "
                                                     "step at every count (default: the planner's for the largest).",
                                                     callback=check_batch)] = None,
    min_gpus: Annotated[int, typer.Option("--min-gpus", help="Smallest GPU count.", min=1,
                                          callback=check_gpu_count)] = 8,
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="Largest GPU count (powers of two in between).", min=1)] = 1024,
    stack: StackOpt = None,
    dpi: DpiOpt = 120,
    json_out: JsonOpt = False,
) -> None:
    """Collective time, or the best layout's throughput/step time, vs GPU count (powers of two) for several systems."""
    from commmodel.io.profiles import load_system
    from commmodel.plots.collectives import plot_scaling
    from commmodel.units import format_size

    if max_gpus < min_gpus:
        raise CommModelError(f"--max-gpus {max_gpus} is below --min-gpus {min_gpus}; swap them")
    check_range("--max-gpus", max_gpus, 1, MAX_GPUS)
    if (model is None) == (op is None):
        raise CommModelError("plot scaling needs either a collective with --size (e.g. all_reduce --size 1GiB) "
                             "or --model MODEL, not both and not neither")
    _check_scaling_flags(model, size, metric, global_batch, stack)
    counts = [c for c in (2**k for k in range(MAX_GPUS.bit_length())) if min_gpus <= c <= max_gpus]  # to 2^24
    named = {name: load_system(name) for name in systems}
    if model is not None:
        from commmodel.plots.plan_data import step_scaling

        if metric not in ("tokens_per_s", "step_time_s", "mfu"):
            raise CommModelError(f"--metric {metric!r} is not one of tokens_per_s, step_time_s, mfu")
        from commmodel.planner.space import for_stack

        resolved = load_model(model)
        the_stack, options, resolved = step_setup(stack, resolved, next(iter(named.values())))
        records = step_scaling(resolved, named, counts, global_batch=global_batch, options=options,
                               space=for_stack(the_stack))
        facts = {"model": resolved.name, "global_batch_assumed": global_batch is None,  # one batch at every count
                 **stack_json(the_stack, options, resolved, next(iter(named.values())))}
        libraries = sorted({str(x) for x in records["library"]})
        y, title = metric, (f"{resolved.name}: best layout at each GPU count ({the_stack.name}, {resolved.dtype}, "
                            f"{'/'.join(libraries) or options.library})")
        shown = records.assign(step_time_s=records["step_time_s"].map(lambda t: f"{t:.4g}"),
                               tokens_per_s=records["tokens_per_s"].map(lambda t: f"{t:,.0f}"),
                               mfu=records["mfu"].map(lambda m: f"{m:.1%}"))
    else:
        facts = {}
        if size is None:
            raise CommModelError(f"plot scaling {op} needs --size, e.g. --size 1GiB")
        size_bytes = _size(size, "--size")
        records = collective_scaling_records(op, size_bytes, named, counts)
        y, title = "time_s", f"{op} of {format_size(size_bytes)} vs GPU count"
        shown = records.assign(time_s=records["time_s"].map(lambda t: f"{t:.4g}"),
                               busbw_GBps=records["busbw_GBps"].map(lambda b: f"{b:.1f}"))
    if records.empty:
        raise CommModelError(f"none of {', '.join(systems)} gives a result for {min_gpus}..{max_gpus} GPUs; "
                             "widen --min-gpus/--max-gpus")
    fig = plot_scaling(records, y=y, title=title)
    save_figure(fig, out, dpi)
    skipped = [name for name in named if name not in set(records["system"])]
    report_figure(json_out, "scaling", out, fig, table=records if json_out else shown, **facts,
                  **({"left_out": [f"{name} (no result for {min_gpus}..{max_gpus} GPUs in whole nodes)"
                                   for name in skipped]} if skipped else {}))


def collective_scaling_records(op: str, size_bytes: float, named: dict[str, Any], counts: list[int]) -> Any:
    """:func:`commmodel.plots.sweep_data.collective_scaling` (imported lazily)."""
    from commmodel.plots.sweep_data import collective_scaling

    return collective_scaling(op, size_bytes, named, counts)


def calibration_cmd(
    file: Annotated[Path, typer.Argument(help="Measurements CSV from `commmodel calibrate run` or `calibrate import`.")],
    out: OutOpt,
    op: Annotated[str | None, typer.Option("--op", help="Collective to draw (default: the first group in the file).")] = None,
    ranks: Annotated[int | None, typer.Option("--ranks", min=2, help="Group size to draw when the file holds several.",
                                              callback=check_gpu_count)] = None,
    base: Annotated[str | None, typer.Option("--base", help="Profile to compare with, before and after calibration "
                                                "(default: the file's recorded system, if any).")] = None,
    dpi: DpiOpt = 120,
    json_out: JsonOpt = False,
) -> None:
    """Measured points, fitted α-β regimes, residuals per size band; with a base profile, its prediction
    before and after calibration."""
    from commmodel.calibrate.groups import fit_measurements
    from commmodel.io.measurements import read_measurements as read_points
    from commmodel.plots.calibration import plot_calibration, residual_table

    data = read_points(file)
    if data.schema != "collectives":
        raise CommModelError(f"{file} holds {data.schema} measurements; `plot calibration` draws collective sweeps")
    try:
        groups = fit_measurements(data.rows, ops=[op] if op else None)
    except CalibrationError as err:  # the points are still worth seeing: drawn alone, the reason said
        _measured_only(data.rows, op, ranks, out, dpi, json_out, str(err))
        return
    chosen = [g for g in groups if ranks is None or g.fit.num_ranks == ranks]
    if not chosen:
        raise CommModelError(f"{file}: no group with {ranks} ranks; it has {', '.join(g.fit.label for g in groups)}")
    group = chosen[0]
    fit = group.fit
    if fit.r2 is not None and fit.r2 <= MIN_DRAWN_FIT_R2:  # explains no more than the mean: not a fit to draw or use
        _measured_only(data.rows, fit.op, fit.num_ranks, out, dpi, json_out,
                       f"{fit.label}: no α-β form fits these points (weighted R² {fit.r2:.3g} ≤ {MIN_DRAWN_FIT_R2:g}): "
                       f"too noisy to fit; measure again with more --iters")
        return
    curves: dict[str, Any] = {}
    base = base or data.env.get("system") or None
    if base:
        curves = _profile_curves(data, file, base, groups, group)
    fig = plot_calibration(fit, curves or None)
    save_figure(fig, out, dpi)
    others = [g.fit.label for g in groups if g is not group]
    from commmodel.plots._style import format_size_tick, format_time_tick

    segments: list[Any] = [{"size_min_bytes": s.size_min_bytes, "size_max_bytes": s.size_max_bytes,
                            "alpha_s": s.alpha_s, "bw_bytes_per_s": s.bw_bytes_per_s} for s in fit.segments]
    if not json_out:
        segments = [f"{format_size_tick(s['size_min_bytes'])}-{format_size_tick(s['size_max_bytes'])}: "
                    f"alpha {format_time_tick(s['alpha_s'])}, busbw {s['bw_bytes_per_s'] / 1e9:.4g} GB/s" for s in segments]
    facts: dict[str, Any] = {"group": fit.label, "r2": fit.r2, "segments": segments}
    if others:
        facts["other_groups"] = others
    import pandas as pd

    table = pd.DataFrame(residual_table(fit))
    report_figure(json_out, "calibration", out, fig, table=table if json_out else table.round(4), **facts)


MIN_DRAWN_FIT_R2 = 0.0
"""A fit whose weighted R² is not above this explains the points no better than their mean: `plot calibration`
draws the points alone with the reason (docs/plots.md), not a fitted line or a profile calibrated from it."""


def _check_scaling_flags(model: str | None, size: str | None, metric: str, global_batch: int | None,
                         stack: str | None) -> None:
    """A one-line error for a flag of the other kind of scaling plot (it would be ignored without a word)."""
    if model is not None and size is not None:
        raise CommModelError("--size is the collective's message; with --model the plot is the best layout's step "
                             "(drop --size, or drop --model and name a collective)")
    if model is None:
        said = [flag for flag, given in (("--metric", metric != "tokens_per_s"), ("--global-batch", global_batch),
                                         ("--stack", stack)) if given]
        if said:
            raise CommModelError(f"{said[0]} applies to a model's scaling (--model); a collective's plot is its time")


def _profile_curves(data: Any, file: Path, base: str, groups: list[Any], group: Any) -> dict[str, Any]:
    """The base profile's times for ``group``'s sizes before and after calibrating it with the file, each priced as
    ``calibrate fit`` checks it: a gloo/MPI file in that library with its host costs solved
    (:func:`commmodel.calibrate.host_report.host_calibrated`), a device file through the fitted tiers."""
    from commmodel.calibrate.host_fit import host_library
    from commmodel.io.profiles import load_system

    system = load_system(base)
    fit = group.fit
    library = host_library(data.env, system)
    backend = str(data.env.get("backend") or "unknown")
    if library is None and system.ranks_are_cpus:  # a GPU library's sweep against CPU ranks
        raise CommModelError(f"{file} was measured with {backend} (system {data.env.get('system') or 'not recorded'}), "
                             f"and --base {base} is a CPU host running gloo/MPI; pass the system the sweep ran on")
    if library is not None:
        from commmodel.calibrate.host_report import host_calibrated, host_model_times_s

        calibrated = host_calibrated(data, system, library, Path(file), [fit.op]).system
        price = lambda one: host_model_times_s(one, library, fit.op, fit.num_ranks, fit.sizes_bytes)  # noqa: E731
    else:
        from commmodel.calibrate.apply import calibrate_system
        from commmodel.calibrate.measured import model_algorithm, model_times_s

        calibrated = calibrate_system(system, groups)[0]
        price = lambda one: model_times_s(one, group, fit.sizes_bytes, model_algorithm(one, group))  # noqa: E731
    return {f"{system.name} profile": price(system), f"{system.name} calibrated with this file": price(calibrated)}


def _measured_only(rows: list[dict[str, Any]], op: str | None, ranks: int | None, out: Path, dpi: int,
                   json_out: bool, reason: str) -> None:
    """`plot calibration` of a file no α-β form fits: the chosen group's measured points alone and why no fit."""
    import pandas as pd

    from commmodel.collectives import get_primitive
    from commmodel.plots.calibration import plot_measured

    kept = [r for r in rows if r.get("time_s_median") is not None and r.get("size_bytes") is not None
            and (op is None or get_primitive(str(r["op"])).name == get_primitive(op).name)]
    first = kept[0] if kept else None
    kept = [r for r in kept if first is not None and r["op"] == first["op"]
            and int(r["num_ranks"]) == (ranks or int(first["num_ranks"]))]
    if not kept:
        raise CommModelError(f"no measured points to draw ({reason})")
    label = f"{kept[0]['op']} on {kept[0]['num_ranks']} ranks"
    table = pd.DataFrame({"size_bytes": [float(r["size_bytes"]) for r in kept],
                          "time_s": [float(r["time_s_median"]) for r in kept]}).sort_values("size_bytes")
    fig = plot_measured(table["size_bytes"], table["time_s"], f"{label}: measured (no α-β fit)")
    save_figure(fig, out, dpi)
    report_figure(json_out, "calibration", out, fig, table=table, group=label, r2=None, segments=[],
                  note=f"no α-β fit: {reason}")


# The step-model figures (breakdown, whatif, timeline) live next door; importing registers them.
