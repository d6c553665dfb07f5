"""``commmodel collective`` and ``commmodel sweep``: one collective priced like an nccl-tests line.

Wiring only: parse sizes and counts, resolve the system (``--network``, ``--gpus-per-node``),
call :func:`commmodel.collectives.collective_cost`, format. No pandas/matplotlib imports.
"""

from typing import Annotated, Any

import typer

from commmodel.cli.common import (FactorOpt, GpusPerNodeOpt, JsonOpt, LibraryOpt, MaxSizeOpt, MinSizeOpt, NetworkOpt,
                                  QuietOpt, SelectionOpt, SystemOpt, check_gpus, check_selection, echo, emit_json,
                                  parse_size_option, progress, resolve_library)
from commmodel.io.text_table import format_table
from commmodel.errors import CollectiveError

OpArg = Annotated[str, typer.Argument(help="Collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                                           "gather, scatter, all_to_all (alltoall), send_recv, barrier.")]
GpusOpt = Annotated[int, typer.Option("--gpus", "-n", help="Ranks in the communicator (one per GPU), 1 to 16,777,216.",
                                      callback=check_gpus)]
AlgoOpt = Annotated[str, typer.Option("--algo", help="auto (what NCCL would pick), all (every applicable algorithm), "
                                                     "or a name: ring, tree, nvls, sharp, pairwise, p2p, binomial_tree, "
                                                     "recursive_doubling, recursive_halving, rabenseifner, bruck, "
                                                     "hierarchical, hierarchical_tree, parameter_server, dissemination.")]

def resolve_cluster(system_name: str, gpus: int, gpus_per_node: int | None, network: str | None):
    """(system view for ``gpus`` GPUs, number of nodes) from the CLI options; errors are one-line CommModelErrors."""
    from commmodel.hardware.cluster import Cluster
    from commmodel.io.profiles import load_system_with_network

    if gpus < 1:
        raise CollectiveError(f"--gpus {gpus}: a communicator needs at least 1 rank; use e.g. --gpus 8")
    cluster = Cluster.for_gpus(load_system_with_network(system_name, network), gpus, gpus_per_node)
    return cluster.system, cluster.num_nodes


def _record(cost: Any, index: Any = ()) -> dict[str, Any]:
    """One priced algorithm as the DESIGN §8 JSON record (plus the protocol)."""
    time_s = float(cost.time_s[index])
    return {
        "algorithm": str(cost.algorithm[index]),
        "protocol": str(cost.protocol[index]),
        "time_s": time_s,
        "algbw_GBps": float(cost.algbw_bytes_per_s[index]) / 1e9,
        "busbw_GBps": float(cost.busbw_bytes_per_s[index]) / 1e9,
        "latency_s": float(cost.latency_s[index]),
        "bandwidth_s": float(cost.bandwidth_s[index]),
    }


def _price(op: str, sizes: Any, system: Any, gpus: int, algo: str, selection: str, library: str) -> dict[str, Any]:
    """{algorithm name: CollectiveCost} for --algo auto (one entry, the winner), all, or NAME."""
    from commmodel.collectives import collective_cost
    from commmodel.collectives.api import library_algorithm_costs

    if algo == "all":
        return library_algorithm_costs(op, sizes, system, gpus, library, selection=selection)
    return {algo: collective_cost(op, sizes, system, gpus, algorithm=algo, selection=selection, library=library)}


def _provenance(system: Any, sizes: Any, gpus: int, library: str) -> list[Any]:
    from commmodel.collectives.provenance import prediction_provenance

    return prediction_provenance(system, sizes, gpus, library=library)


def _extrapolated_line(prov: Any, size_bytes: float) -> str:
    from commmodel.units import format_size

    sizes = prov.calibrated_sizes
    return (f"! extrapolated: {format_size(size_bytes)} is outside the sizes {prov.tier} was calibrated at "
            f"({format_size(sizes.min_bytes)} to {format_size(sizes.max_bytes)}; {sizes.source})")


def _selection_words(lib_name: str, selection: str) -> str:
    """How the priced algorithm × protocol was picked, in the words ``collective`` and ``sweep`` both print."""
    if selection == "library":
        return f"{lib_name}'s own choice (--selection {'nccl' if lib_name == 'nccl' else 'library'})"
    return f"the fastest of {lib_name}'s algorithms × protocols (--selection fastest)"


def _check_request(op: str, gpus: int, algo: str, selection: str, sweep: bool = False) -> None:
    """One line for what would be priced but mean nothing: a named algorithm with ``--selection fastest`` (it
    chooses among algorithms, the name forces one), point-to-point on one rank, a barrier swept over sizes."""
    if algo not in ("auto", "all") and selection == "fastest":
        raise CollectiveError(f"--selection fastest chooses among algorithms, and --algo {algo} forces one; drop "
                              "--selection or use --algo auto (or all)")
    if op == "send_recv" and gpus < 2:
        raise CollectiveError(f"send_recv on --gpus {gpus}: point-to-point needs a sender and a receiver; give "
                              "--gpus 2 or more")
    if op == "barrier" and sweep:
        raise CollectiveError("sweep barrier: a barrier carries no message, so its time does not vary with size; use "
                              "`commmodel collective barrier --size 0` for its time")


def _memory_note(size_bytes: float, system: Any) -> str | None:
    """A line where the buffer is larger than one GPU's memory (nccl-tests could not allocate it; the time is the
    formula's), else None."""
    from commmodel.units import format_size

    hbm = system.gpu.hbm_bytes.value
    if size_bytes <= hbm:
        return None
    return (f"note: a {format_size(size_bytes)} buffer is larger than one {system.gpu.name}'s {format_size(hbm)} of "
            "memory: no run could allocate it, so this time is the α-β formula's, not a measurable one")


def _textbook_marks(records: list[dict[str, Any]], library: str) -> set[str]:
    """The algorithms of ``records`` that the device library does not run (``--algo all`` prices the registry's
    textbook ones too, as what-ifs); none for a host library, whose rows are its own forms."""
    from commmodel.collectives.libraries import get_library

    lib = get_library(library)
    if lib.is_host:
        return set()
    return {r["algorithm"] for r in records if r["algorithm"] not in lib.device_algorithms and r["algorithm"] != "none"}


def collective_cmd(
    op: OpArg,
    size: Annotated[str, typer.Option("--size", help="Message size S as nccl-tests counts it (whole buffer): 1GiB, 64MB, 4096.")],
    gpus: GpusOpt,
    system: SystemOpt,
    gpus_per_node: GpusPerNodeOpt = None,
    network: NetworkOpt = None,
    algo: AlgoOpt = "auto",
    selection: SelectionOpt = "nccl",
    library: LibraryOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Time, algbw and busbw of one collective (nccl-tests vocabulary), and which algorithm wins."""
    from commmodel.collectives import collective_cost, get_primitive
    from commmodel.collectives.libraries import buffer_path, rank_noun
    from commmodel.units import format_size

    prim = get_primitive(op)
    size_bytes = parse_size_option(size, "--size")
    sys_view, num_nodes = resolve_cluster(system, gpus, gpus_per_node, network)
    selection = check_selection(selection)
    _check_request(prim.name, gpus, algo, selection)
    lib_name, lib_why = resolve_library(sys_view, library)
    best = collective_cost(prim.name, size_bytes, sys_view, gpus, algorithm="auto" if algo == "all" else algo,
                           selection=selection, library=lib_name)
    priced = _price(prim.name, size_bytes, sys_view, gpus, algo, selection, lib_name)
    records = sorted((_record(c) for c in priced.values()), key=lambda r: r["time_s"])
    records = records[:1] if gpus == 1 else records  # one rank moves nothing: one "none" row, not one per algorithm
    textbook = _textbook_marks(records, lib_name)
    best_record = _record(best)
    prov = _provenance(sys_view, size_bytes, gpus, lib_name)[0]
    path = buffer_path(lib_name, sys_view, prim.name)
    if json_out:
        emit_json({
            "op": prim.name, "size_bytes": size_bytes, "num_ranks": gpus, "rank_noun": rank_noun(sys_view),
            "num_nodes": num_nodes,
            "system": sys_view.name, "library": lib_name, "library_why": lib_why, "buffer_path": path,
            "selection": selection,
            "best": {**{k: best_record[k] for k in ("algorithm", "protocol", "time_s", "algbw_GBps", "busbw_GBps")},
                     "provenance": prov.record()},
            "algorithms": [{**r, "in_library": r["algorithm"] not in textbook, "provenance": prov.record()}
                           for r in records],
        })
        return
    nodes_text = f"{num_nodes} node{'s' if num_nodes > 1 else ''}"
    barrier = prim.name == "barrier"
    what = "barrier (no message: --size unused)" if barrier else f"{prim.name} of {format_size(size_bytes)}"
    echo(f"{what} on {gpus} {rank_noun(sys_view, gpus)} ({nodes_text}) of {sys_view.name}")
    echo(f"library: {lib_name} ({lib_why})" + (f"\nbuffers: {path}" if path else ""))
    rows = [[r["algorithm"] + (" *" if r["algorithm"] == best_record["algorithm"] else "")
             + (" †" if r["algorithm"] in textbook else ""), r["protocol"],
             f"{r['time_s'] * 1e6:.2f}", f"{r['algbw_GBps']:.2f}", f"{r['busbw_GBps']:.2f}",
             f"{r['latency_s'] * 1e6:.2f}", f"{r['bandwidth_s'] * 1e6:.2f}"] for r in records]
    echo(format_table(rows, ["algorithm", "protocol", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "latency (us)",
                             "bandwidth (us)"], align="llrrrrr"))
    if algo in ("auto", "all"):
        echo(f"* {_selection_words(lib_name, selection)}: {best_record['algorithm']}/{best_record['protocol']}")
    if textbook:
        echo(f"† not one of {lib_name}'s algorithms: the textbook algorithm priced on this hardware, for comparison")
    if gpus == 1:
        echo("one rank: nothing to communicate")
    if prov.kind == "extrapolated":
        echo(_extrapolated_line(prov, size_bytes))
    if (note := _memory_note(size_bytes, sys_view)) and not barrier:
        echo(note)


def sweep_cmd(
    op: OpArg,
    gpus: GpusOpt,
    system: SystemOpt,
    gpus_per_node: GpusPerNodeOpt = None,
    network: NetworkOpt = None,
    min_size: MinSizeOpt = "8B",
    max_size: MaxSizeOpt = "16GiB",
    factor: FactorOpt = 2.0,
    algo: AlgoOpt = "auto",
    selection: SelectionOpt = "nccl",
    library: LibraryOpt = None,
    json_out: JsonOpt = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print the rows as CSV on stdout.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """A size sweep like nccl-tests ``-b MIN -e MAX -f FACTOR``: time, algbw, busbw per size."""
    from commmodel.collectives import get_primitive
    from commmodel.collectives.libraries import buffer_path, rank_noun
    from commmodel.sweep_sizes import sweep_sizes_bytes

    if json_out and csv_out:
        raise typer.BadParameter("give one of --json and --csv, not both", param_hint="--json/--csv")
    selection = check_selection(selection)
    prim = get_primitive(op)
    _check_request(prim.name, gpus, algo, selection, sweep=True)
    lo, hi = parse_size_option(min_size, "--min-size"), parse_size_option(max_size, "--max-size")
    if lo > hi:
        raise CollectiveError(f"--min-size {min_size} exceeds --max-size {max_size} (need min ≤ max); swap them")
    sizes = sweep_sizes_bytes(lo, hi, factor, CollectiveError)
    count = len(sizes)
    sys_view, _ = resolve_cluster(system, gpus, gpus_per_node, network)
    progress(f"pricing {prim.name} at {count} sizes on {gpus} {rank_noun(sys_view, gpus)} of {sys_view.name}",
             quiet or json_out or csv_out)
    lib_name, lib_why = resolve_library(sys_view, library)
    priced = _price(prim.name, sizes, sys_view, gpus, algo, selection, lib_name)
    rows = [
        {"size_bytes": int(sizes[i]), **{k: v for k, v in _record(cost, i).items() if k not in ("latency_s", "bandwidth_s")}}
        for name, cost in priced.items() for i in range(count)
    ]
    provs = dict(zip((int(x) for x in sizes), _provenance(sys_view, sizes, gpus, lib_name)))
    for r in rows:
        r["provenance"] = provs[r["size_bytes"]].kind
    rows.sort(key=lambda r: (r["size_bytes"], r["time_s"]))
    path = buffer_path(lib_name, sys_view, prim.name)
    if json_out:
        emit_json({"op": prim.name, "num_ranks": gpus, "system": sys_view.name, "library": lib_name,
                   "library_why": lib_why, "buffer_path": path, "selection": selection, "rows": rows})
        return
    keys = ["size_bytes", "algorithm", "protocol", "time_s", "algbw_GBps", "busbw_GBps"]
    if csv_out:
        echo(",".join(keys))
        for r in rows:
            echo(",".join(f"{r[k]:.10g}" if isinstance(r[k], float) else str(r[k]) for k in keys))
        return
    echo(f"{prim.name} on {gpus} {rank_noun(sys_view, gpus)} of {sys_view.name} (nccl-tests columns; GB/s = 1e9 B/s); "
         f"library {lib_name} ({lib_why})" + (f"; buffers: {path}" if path else "")
         + (f"; each size at {_selection_words(lib_name, selection)}" if algo in ("auto", "all") else ""))
    table = [[int(r["size_bytes"]), f"{r['time_s'] * 1e6:.2f}", f"{r['algbw_GBps']:.2f}", f"{r['busbw_GBps']:.2f}",
              r["algorithm"], r["protocol"] + (" (extrapolated)" if r["provenance"] == "extrapolated" else "")]
             for r in rows]
    echo(format_table(table, ["size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algorithm", "protocol"],
                      align="rrrrll"))
