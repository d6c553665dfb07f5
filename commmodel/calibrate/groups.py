"""Split measurement rows into fit groups: one per (op, algorithm, protocol, ranks, nodes, group kind)."""

from __future__ import annotations

from typing import Any

import numpy as np

from commmodel.calibrate.dtypes import DTYPE_NAMES
from commmodel.calibrate.measured import MeasuredGroup
from commmodel.calibrate.fit import fit_alpha_beta
from commmodel.collectives import get_primitive
from commmodel.errors import CalibrationError


def group_label(op: str, num_ranks: int, num_nodes: int, algorithm: str, protocol: str, group: str) -> str:
    """"all_reduce on 16 ranks (2 nodes, auto)" with the protocol and sub-group kind when set."""
    extras = [f"{num_nodes} node{'s' if num_nodes != 1 else ''}", algorithm or "auto"]
    if protocol:
        extras.append(protocol)
    if group and group != "all":
        extras.append(f"{group} groups")
    return f"{op} on {num_ranks} ranks ({', '.join(extras)})"


def _check_one_dtype(label: str, members: list[dict[str, Any]]) -> None:
    """A one-line error when one group's rows were measured in several element types (``--resume --dtype`` into the
    same file): one α-β line cannot fit both (a CPU reduces fp16 several times slower than fp32)."""
    counts: dict[str, int] = {}
    for member in members:
        name = str(member.get("dtype") or "").strip().lower()
        if name:
            counts[DTYPE_NAMES.get(name, name)] = counts.get(DTYPE_NAMES.get(name, name), 0) + 1
    if len(counts) > 1:
        said = ", ".join(f"{name} {count}" for name, count in sorted(counts.items(), key=lambda kv: -kv[1]))
        raise CalibrationError(f"{label}: rows measured in {len(counts)} dtypes ({said} rows); one α-β line fits one "
                               f"element type: measure each dtype into its own file (calibrate run --dtype D --out "
                               f"FILE-D.csv) and fit them apart")


def fit_measurements(rows: list[dict[str, Any]], ops: list[str] | None = None,
                     max_segments: int = 3) -> list[MeasuredGroup]:
    """Fit every group found in ``rows`` (measurement CSV rows); ``ops`` keeps only those primitives."""
    wanted = {get_primitive(op).name for op in ops} if ops else None
    buckets: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("time_s_median") is None or row.get("size_bytes") is None:
            continue
        op = get_primitive(str(row["op"])).name
        if wanted is not None and op not in wanted:
            continue
        key = (op, str(row.get("algorithm") or "auto"), str(row.get("protocol") or ""), int(row["num_ranks"]),
               int(row.get("num_nodes") or 1), str(row.get("group") or "all"))
        buckets.setdefault(key, []).append(row)
    if not buckets:
        which = f" for --ops {','.join(sorted(wanted))}" if wanted else ""
        raise CalibrationError(f"no measured rows{which}; run `commmodel calibrate run` or `import` first")
    groups = []
    for (op, algorithm, protocol, num_ranks, num_nodes, kind), members in sorted(buckets.items()):
        if num_ranks < 2:
            continue
        if num_ranks % num_nodes:
            raise CalibrationError(
                f"{op} rows with {num_ranks} ranks on {num_nodes} nodes: ranks must fill nodes evenly; fix num_nodes"
            )
        label = group_label(op, num_ranks, num_nodes, algorithm, protocol, kind)
        _check_one_dtype(label, members)
        sizes = np.array([m["size_bytes"] for m in members], dtype=float)
        times = np.array([m["time_s_median"] for m in members], dtype=float)
        fit = fit_alpha_beta(sizes, times, op, num_ranks, algorithm=algorithm, max_segments=max_segments, label=label)
        groups.append(MeasuredGroup(fit=fit, num_nodes=num_nodes, ranks_per_node=num_ranks // num_nodes))
    if not groups:
        raise CalibrationError("every measured group has a single rank; collectives need at least 2 ranks to fit")
    return groups
