"""Read nccl-tests output into measurement rows: the text table here, the ``-J`` JSON report in
:mod:`.nccl_tests_json`.

Text layout (NVIDIA/nccl-tests ``src/util.cu`` / ``common.cu``; older releases differ in columns,
which is why columns are found by their header names, not by position)::

    # nThread 1 nGpus 8 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 ...
    #  Rank  0 Group  0 Pid  4242 on    node-01 device  0 [0000:07:00] NVIDIA H100 80GB HBM3
    #                                                      out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
               8             2     float     sum      -1    12.90    0.00    0.00      0    12.35    0.00    0.00      0
    # Avg bus bandwidth    : 123.4

Variants handled: with or without ``redop``/``root`` (old all_gather), ``error`` instead of ``#wrong``,
``N/A`` when checking is off (``-c 0``), the per-iteration columns ``i_min i_max i_p99 i_cv%`` (``-I``),
``cputime`` (``-C``), a trailing timestamp, NCCL INFO lines interleaved, several tables in one file.

Which collective: ``# Collective test starting: all_reduce_perf`` (newer releases), else the file
name (``all_reduce_perf.txt``), else ``op=`` from the caller. Ranks: the ``# Rank`` lines, else the
busbw/algbw ratio (2(n−1)/n for all-reduce, (n−1)/n for gather-like ops), else the caller. Nodes:
distinct host names in the ``# Rank`` lines, else the caller. Nothing is guessed silently: a
missing fact is an error that names the option to pass.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commmodel.bus_factors import BUS_FACTORS
from commmodel.errors import CalibrationError
from commmodel.io.yaml_read import read_user_bytes
from commmodel.limits import MAX_SIZE_BYTES

_RANK_RE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)$")
_TEST_RE = re.compile(r"Collective test starting:\s*(\S+)")
_ITERS_RE = re.compile(r"warmup iters:\s*\d+\s+iters:\s*(\d+)")
_NGPUS_RE = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_NCCL_VERSION_RE = re.compile(r"NCCL version\s+(\S+)")
_FAILED_RE = re.compile(r"Out of bounds values\s*:\s*(\d+)\s+FAILED")
"""nccl-tests' verdict on a run whose results were wrong: the footer's ``# Out of bounds values : N FAILED`` (N
results outside the check's bounds): its timings are refused."""
_ABORTED_RE = re.compile(r"Test (?:NCCL |CUDA )?failure")
"""The line of a run that stopped on an error (nccl-tests src/common.h ``NCCLCHECK``/``CUDACHECK``): the rows before
it were measured and are kept, with a note."""

ALGBW_TOLERANCE = (0.05, 0.011)
"""A row's algbw must be size/time within 5% plus 0.011 GB/s: nccl-tests computes it from the same two numbers
(src/common.cu ``algBw = (double)(count * typesize) / 1.0E9 / sec``) and prints each to two decimals; a row off by
more had its time column in other units, or was edited."""
_TESTS_VERSION_RE = re.compile(r"nccl-tests version\s+(\S+)")
_ERROR_COLUMNS = {"#wrong", "error", "wrong"}
_GIVE = "give the saved stdout (or -J JSON report) of an nccl-tests run"
_LEADING = ("size", "count", "type", "redop", "root")


@dataclass
class Imported:
    """Rows and facts read from one nccl-tests output."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    """Measurement rows in the COLLECTIVE_COLUMNS vocabulary."""
    env: dict[str, str] = field(default_factory=dict)
    """Facts for the environment block (nccl version, devices, hosts, command)."""
    notes: list[str] = field(default_factory=list)
    """Things the reader noticed (no footer, inferred ranks)."""


NCCL_TESTS_OPS: dict[str, str] = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all", "broadcast": "broadcast", "reduce": "reduce", "gather": "gather",
    "scatter": "scatter", "sendrecv": "send_recv",
}
"""nccl-tests' collective names (its binaries ``<name>_perf``, NVIDIA/nccl-tests ``src/*.cu``, and the
labels of commmodel/data/nccl_tests.csv) -> commmodel's canonical primitive name."""

_PROGRAM_SPELLINGS = sorted(NCCL_TESTS_OPS.items(), key=lambda item: -len(item[0]))
"""Longest name first, so ``reduce_scatter_perf`` is not read as ``scatter_perf``."""


def op_from_program(name: str) -> str | None:
    """``all_reduce_perf`` / ``./build/alltoall_perf_mpi`` / ``p5_sendrecv_perf.log`` -> canonical primitive name."""
    stem = Path(name).name.lower()
    for alias, canonical in _PROGRAM_SPELLINGS:
        if re.search(rf"(?:^|[^a-z]){re.escape(alias)}_perf", stem):
            return canonical
    return None


def _infer_ranks(op: str, rows: list[dict[str, Any]]) -> int | None:
    """n from busbw/algbw of the row with the largest algbw (most printed digits)."""
    best = max((r for r in rows if (r["algbw_GBps"] or 0) > 0), key=lambda r: r["algbw_GBps"], default=None)
    if best is None or best["algbw_GBps"] < 1.0:
        return None
    ratio = best["busbw_GBps"] / best["algbw_GBps"]
    if op == "all_reduce" and ratio < 2.0:
        n = 2.0 / (2.0 - ratio)
    elif op in {"all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"} and ratio < 1.0:
        n = 1.0 / (1.0 - ratio)
    else:
        return None
    rounded = round(n)
    return rounded if rounded >= 2 and abs(n - rounded) <= 0.05 * rounded else None


def _check_table_op(path: Path, op: str, num_ranks: int, rows: list[dict[str, Any]]) -> None:
    """A one-line error when the table's busbw/algbw (rows with algbw ≥ 1 GB/s: enough printed digits) is not
    ``op``'s factor on ``num_ranks`` ranks: a table labelled by the file name or --op that is another collective's
    (old nccl-tests logs and concatenated files have no '# Collective test starting' line per table)."""
    factor = BUS_FACTORS.get(op)
    ratios = [r["busbw_GBps"] / r["algbw_GBps"] for r in rows if (r.get("algbw_GBps") or 0) >= 1.0]
    if factor is None or num_ranks < 2 or not ratios:
        return
    ratio = sorted(ratios)[len(ratios) // 2]
    if abs(ratio / factor(float(num_ranks)) - 1.0) > 0.05:
        raise CalibrationError(f"{path}: a table labelled {op} has busbw/algbw {ratio:.3f}, but {op} on {num_ranks} "
                               f"ranks gives {factor(float(num_ranks)):.3f}: it is another collective's table (a log "
                               f"of several tests without their '# Collective test starting' lines?); split the file "
                               f"per test and import each with its own --op")


def _finish(out: Imported, path: Path, op: str | None, ranks_seen: dict[int, str], options: dict[str, Any],
            table_rows: list[dict[str, Any]], iters: int | None) -> None:
    """Fill op/ranks/nodes into the rows of one table and append them to ``out``."""
    if not table_rows:
        return
    said = options.get("op")
    if said and op and said != op:  # the file names its own test: --op would relabel its rows
        raise CalibrationError(f"{path}: the table is {op} output (its '# Collective test starting' line), not "
                               f"--op {said}; drop --op (it is for files that do not say their collective)")
    op = said or op or op_from_program(path.name)
    if op is None:
        raise CalibrationError(
            f"{path}: cannot tell which collective this is (no '# Collective test starting' line and the file name "
            f"is not like all_reduce_perf.txt); pass --op, e.g. --op all_reduce"
        )
    num_ranks = options.get("ranks") or (len(ranks_seen) or None)
    if num_ranks is None:
        num_ranks = _infer_ranks(op, table_rows)
        if num_ranks is None:
            raise CalibrationError(
                f"{path}: cannot tell the number of ranks (no '# Rank' device lines, and {op}'s busbw/algbw does not "
                f"reveal it); pass --ranks N"
            )
        out.notes.append(f"num_ranks {num_ranks} inferred from busbw/algbw of {op} ({path.name})")
    num_nodes = options.get("nodes") or (len(set(ranks_seen.values())) or None)
    if num_nodes is None:
        if num_ranks == 1:
            num_nodes = 1
        else:
            raise CalibrationError(
                f"{path}: cannot tell how many nodes the {num_ranks} ranks span (no '# Rank ... on HOST' lines); "
                f"pass --nodes N"
            )
    if num_nodes > num_ranks:
        raise CalibrationError(f"{path}: --nodes {num_nodes} exceeds the {num_ranks} ranks; check --nodes/--ranks")
    if options.get("nodes") and num_ranks % num_nodes:
        raise CalibrationError(f"{path}: --nodes {num_nodes} does not divide the {num_ranks} ranks (the model needs the "
                               f"same GPUs on every node); check --nodes/--ranks")
    _check_table_op(path, op, num_ranks, table_rows)
    for row in table_rows:
        row.update(op=op, num_ranks=num_ranks, num_nodes=num_nodes, iters=iters)
        out.rows.append(row)


def _header_columns(tokens: list[str]) -> tuple[list[str], dict[str, int]] | None:
    """Map 'size count type redop root time algbw busbw #wrong time ...' to column name -> token index."""
    if "size" not in tokens or "algbw" not in tokens or "busbw" not in tokens:
        return None
    names = [t for t in tokens if t not in {"timestamp"}]
    index: dict[str, int] = {}
    seen_time = 0
    for position, name in enumerate(names):
        if name in {"time", "cputime"}:
            seen_time += 1
            name = "time"
        prefix = "oop_" if seen_time <= 1 else "ip_"
        if name in _LEADING:
            index[name] = position
        else:  # time, algbw, busbw, #wrong/error, i_* statistics, and columns of future releases
            index[prefix + ("wrong" if name in _ERROR_COLUMNS else name)] = position
    if "oop_time" not in index or "size" not in index:
        return None
    return names, index


def _number(text: str, column: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise CalibrationError(
            f"{where}: column {column} = {text!r} is not a number (wrong columns for this header?)") from None


def _nonzero(cell: str) -> bool:
    """Whether a ``#wrong`` / ``error`` cell reports errors: a count or a maximum error above zero ("N/A" where
    validation was off: none)."""
    try:
        return float(cell) != 0.0
    except ValueError:
        return False


def measured_row_ok(where: str, size: float, time_us: float, algbw: float, busbw: float,
                    wrong_text: str | None) -> bool:
    """Whether one nccl-tests result is a measurement to keep (False: a 0-byte row, skipped), or a one-line
    :class:`CalibrationError` naming ``where``: nan/inf, negative or fractional numbers, a zero time, or results
    nccl-tests counted wrong. The text table and the ``-J`` JSON report are checked alike."""
    if not all(math.isfinite(v) for v in (size, time_us, algbw, busbw)):
        raise CalibrationError(f"{where}: size/time/bandwidth is nan or inf (a damaged or edited line?)")
    if size != int(size) or size < 0 or time_us < 0 or algbw < 0 or busbw < 0:
        raise CalibrationError(f"{where}: negative or fractional size/time/bandwidth (wrong columns?)")
    if size > MAX_SIZE_BYTES:
        raise CalibrationError(f"{where}: size {size:.3g} bytes is past {MAX_SIZE_BYTES:.0e} (1 EB): not a message "
                               f"nccl-tests sent (a damaged or edited line?); fix or drop the line")
    if size == 0:
        return False
    if time_us == 0:
        raise CalibrationError(f"{where}: time 0 for {int(size)} bytes: no collective takes no time (a damaged or "
                               f"edited line?); fix or drop the line")
    expected = size / (time_us * 1e3)  # GB/s: bytes / µs / 1e3
    relative, absolute = ALGBW_TOLERANCE
    if abs(algbw - expected) > relative * expected + absolute:
        raise CalibrationError(f"{where}: algbw {algbw:g} GB/s is not size / time = {int(size)} B / {time_us:g} µs = "
                               f"{expected:.4g} GB/s, as nccl-tests computes it: a time column in other units, or an "
                               f"edited line; import the unedited output")
    if wrong_text is not None and _nonzero(wrong_text):
        raise CalibrationError(f"{where}: nccl-tests counted {wrong_text} wrong results at {int(size)} bytes: the "
                               f"run's data was corrupted, so its timings are not a measurement to fit; fix the run "
                               f"(or drop the line)")
    return True


def _data_row(tokens: list[str], columns: dict[str, int], num_header_columns: int, where: str, path: Path,
              options: dict[str, Any]) -> dict[str, Any] | None:
    """One table line as a measurement row (None for the size-0 row); errors name the line and the column."""
    if len(tokens) < num_header_columns:
        raise CalibrationError(
            f"{where}: row has {len(tokens)} of {num_header_columns} columns (truncated table?); "
            f"remove the partial line or re-run nccl-tests"
        )
    prefix = "ip_" if options.get("in_place") else "oop_"
    size = _number(tokens[columns["size"]], "size", where)
    if prefix + "time" not in columns:
        raise CalibrationError(f"{where}: the table has no in-place columns; drop --in-place")
    lacking = [name for name in ("algbw", "busbw") if prefix + name not in columns]
    if lacking:
        raise CalibrationError(f"{where}: the table header has no {' or '.join(lacking)} column after 'time'; "
                               f"the header line is damaged (compare it with nccl-tests' own)")
    time_us = _number(tokens[columns[prefix + "time"]], "time", where)
    algbw = _number(tokens[columns[prefix + "algbw"]], "algbw", where)
    busbw = _number(tokens[columns[prefix + "busbw"]], "busbw", where)
    wrong = columns.get(prefix + "wrong")
    wrong_text = tokens[wrong] if wrong is not None and wrong < len(tokens) else None
    if not measured_row_ok(where, size, time_us, algbw, busbw, wrong_text):
        return None
    return {
        "size_bytes": int(size), "group": "all",
        "algorithm": options.get("algorithm") or "auto", "protocol": options.get("protocol") or "",
        "dtype": tokens[columns["type"]] if "type" in columns else "",
        "time_s_median": time_us * 1e-6, "time_s_p10": None, "time_s_p90": None,
        "algbw_GBps": algbw, "busbw_GBps": busbw, "time_stat": "mean",
        "source": f"nccl-tests: {path.name}" + (" (in-place)" if options.get("in_place") else ""),
    }


def parse_text(text: str, path: Path, options: dict[str, Any]) -> Imported:
    """Parse nccl-tests stdout. ``options``: op, ranks, nodes, algorithm, protocol, in_place."""
    out = Imported()
    op: str | None = None  # what the table's own '# Collective test starting' line says (the file name: _finish)
    ranks_seen: dict[int, str] = {}
    devices: dict[int, str] = {}
    columns: dict[str, int] | None = None
    num_header_columns = 0
    table_rows: list[dict[str, Any]] = []
    iters: int | None = None
    footer = False
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{path}:{number}"
        stripped = line.strip()
        if not stripped:
            continue
        if match := _NCCL_VERSION_RE.search(stripped):
            out.env.setdefault("nccl_version", match.group(1))
        if (failed := _FAILED_RE.search(stripped)) and int(failed.group(1)) > 0:
            raise CalibrationError(f"{where}: nccl-tests says the run's results were wrong ({stripped[:60]!r}): its "
                                   f"timings are not a measurement to fit; fix the run and import the new log")
        if _ABORTED_RE.search(stripped):
            out.notes.append(f"{where}: the run stopped on an error ({stripped[:80]!r}); the rows before it are kept, "
                             "the sizes after it were never measured")
        if not stripped.startswith("#"):
            if columns is None or not (stripped[0].isdigit() or re.match(r"[-+.]\d", stripped)):
                continue  # NCCL INFO lines, shell prompts, anything outside a table ("-128 ..." is a damaged row)
            row = _data_row(stripped.split(), columns, num_header_columns, where, path, options)
            if row is not None:
                table_rows.append(row)
            continue
        body = stripped.lstrip("#").strip()
        if match := _TEST_RE.search(body):
            _finish(out, path, op, ranks_seen, options, table_rows, iters)
            table_rows, columns, ranks_seen = [], None, {}
            op = op_from_program(match.group(1)) or op
            out.env.setdefault("command", match.group(1))
        elif match := _RANK_RE.match(stripped):
            ranks_seen[int(match.group(1))] = match.group(2)
            devices[int(match.group(1))] = match.group(3).strip()
        elif match := _NGPUS_RE.match(stripped):
            if iters_match := _ITERS_RE.search(stripped):
                iters = int(iters_match.group(1))
            out.env.setdefault("nthread_ngpus", f"{match.group(1)} x {match.group(2)}")
        elif match := _TESTS_VERSION_RE.search(body):
            out.env.setdefault("nccl_tests_version", match.group(1))
        elif body.startswith("Avg bus bandwidth"):
            footer = True
        else:
            header = _header_columns(body.split())
            if header is not None:
                if table_rows:
                    _finish(out, path, op, ranks_seen, options, table_rows, iters)
                    table_rows = []
                names, columns = header
                num_header_columns = len(names)
    _finish(out, path, op, ranks_seen, options, table_rows, iters)
    if not out.rows:
        if columns is None:
            raise CalibrationError(
                f"{path}: no nccl-tests table found (expected a '#  size  count  type ... time  algbw  busbw' header); "
                f"give the stdout of an nccl-tests binary such as all_reduce_perf"
            )
        raise CalibrationError(f"{path}: the nccl-tests table has a header but no rows (the run stopped early?)")
    if not footer:
        out.notes.append(f"{path.name}: no '# Avg bus bandwidth' footer; the run may have been cut short")
    if devices:
        out.env["devices"] = _summarise(list(devices.values()))
    hosts = {h for h in ranks_seen.values()}
    if hosts:
        out.env["hostnames"] = str(len(hosts))
    return out


def _summarise(devices: list[str]) -> str:
    """'8x NVIDIA H100 80GB HBM3' for the report's devices, in first-seen order."""
    return ", ".join(f"{count}x {name}" for name, count in Counter(devices).items())


def read_nccl_tests(path: Path, **options: Any) -> Imported:
    """Read one nccl-tests output file (text or ``-J`` JSON, detected from the content)."""
    path = Path(path)
    raw = read_user_bytes(path, CalibrationError, _GIVE)
    if not raw.strip():
        raise CalibrationError(f"{path}: the file is empty; {_GIVE}")
    if b"\x00" in raw[:65536]:
        raise CalibrationError(f"{path}: binary data, not nccl-tests output; {_GIVE}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        try:
            text = raw.decode("latin-1")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
            raise CalibrationError(f"{path}: not text") from None
        if sum(not (c.isprintable() or c.isspace()) for c in text[:4096]) > 8:
            raise CalibrationError(f"{path}: binary data, not nccl-tests output; {_GIVE}")
    if text.lstrip().startswith("{"):
        from commmodel.io.nccl_tests_json import parse_json  # the -J report reader builds on this module's rows

        return parse_json(text, path, options)
    return parse_text(text, path, options)
