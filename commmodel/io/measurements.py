"""The calibration results CSV: one measured point per row, an environment block on top.

Layout (plain CSV with ``#`` comment lines, readable by ``pandas.read_csv(path, comment="#")``)::

    # commmodel measurements v1 (collectives)
    # backend: gloo
    # torch: 2.13.0
    # world_size: 2
    # ...                                   <- environment block, ``# key: value``
    op,size_bytes,num_ranks,...             <- the header row (COLLECTIVE_COLUMNS)
    all_reduce,8,2,1,auto,,...              <- one row per measured point, appended as measured
    # skipped: op=reduce_scatter group=all reason=...   <- notes may follow anywhere

Column vocabulary follows nccl-tests (DESIGN §2): ``size_bytes`` is the whole buffer S, algbw = S/t,
busbw = algbw × factor(op, n), GB/s = 1e9 B/s. ``time_stat`` says what the time columns hold:
``median`` for commmodel's own benchmark (p10/p90 filled), ``mean`` for imported nccl-tests rows
(nccl-tests reports the average over its iterations; p10/p90 empty).

The compute micro-benchmark uses the same framing with COMPUTE_COLUMNS and ``(compute)`` in the
first line. Rank 0 appends and flushes each row the moment it is measured, so a run that dies keeps
every finished point, and ``--resume`` skips the points already present (:func:`point_key`).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from commmodel.errors import CalibrationError
from commmodel.io.yaml_read import open_user_file, read_user_bytes

MAGIC = "# commmodel measurements v1"

COLLECTIVE_COLUMNS: tuple[str, ...] = (
    "op", "size_bytes", "num_ranks", "num_nodes", "group", "algorithm", "protocol", "dtype",
    "time_s_median", "time_s_p10", "time_s_p90", "algbw_GBps", "busbw_GBps", "iters", "time_stat", "source",
)
"""Columns of a collective measurements file, in order."""

COMPUTE_COLUMNS: tuple[str, ...] = (
    "kind", "m", "n", "k", "dtype", "device", "time_s_median", "time_s_p10", "time_s_p90",
    "tflops_median", "iters", "source",
)
"""Columns of a compute (matmul) measurements file, in order."""

SCHEMAS = {"collectives": COLLECTIVE_COLUMNS, "compute": COMPUTE_COLUMNS}

_INT_COLUMNS = {"size_bytes", "num_ranks", "num_nodes", "iters", "m", "n", "k"}
_FLOAT_COLUMNS = {"time_s_median", "time_s_p10", "time_s_p90", "algbw_GBps", "busbw_GBps", "tflops_median"}
_POSITIVE_COLUMNS = {"time_s_median", "time_s_p10", "time_s_p90", "tflops_median"}
"""Measured times and rates: a zero, negative, nan or inf one is damage, refused with its line (never dropped)."""
_REQUIRED = {"collectives": ("op", "size_bytes", "num_ranks", "num_nodes"), "compute": ("kind", "m", "n", "k")}
"""Cells every row must fill: what identifies a measured point (a fit groups and prices by them)."""
_GIVE = "give a CSV written by `commmodel calibrate run` or `import`"
_KEY_COLUMNS = ("op", "size_bytes", "num_ranks", "num_nodes", "group", "algorithm", "protocol", "dtype")


@dataclass
class Measurements:
    """A measurements file read back: its schema, environment block, rows and notes."""

    schema: str
    """"collectives" or "compute"."""
    env: dict[str, str] = field(default_factory=dict)
    """The ``# key: value`` environment lines above the header row."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    """Data rows with ints/floats converted (missing numbers are None)."""
    notes: list[str] = field(default_factory=list)
    """Other comment lines (``skipped: ...``, ``resumed: ...``), without the leading ``#``."""


_COMPUTE_KEY_COLUMNS = ("kind", "m", "n", "k", "dtype", "device")
"""What makes a ``calibrate compute`` row unique: the GEMM, its dtype and device."""


def point_key(row: dict[str, Any]) -> tuple:
    """What makes a point unique for ``--resume``: op, size, ranks, nodes, group, algorithm, protocol, dtype; for a
    ``calibrate compute`` row (it has a ``kind``), the GEMM's kind, shape, dtype and device."""
    columns = _COMPUTE_KEY_COLUMNS if "kind" in row else _KEY_COLUMNS
    return tuple(str(row.get(col, "") if row.get(col) is not None else "") for col in columns)


def _format_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return f"{value:.6g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.6e}"
    return str(value)


def _env_lines(schema: str, env: dict[str, Any]) -> list[str]:
    lines = [f"{MAGIC} ({schema})"]
    for key, value in env.items():
        text = " ".join(str(value).split())
        lines.append(f"# {key}: {text}")
    return lines


class MeasurementWriter:
    """Appends rows to a measurements file, flushing after each one (rank 0 only)."""

    def __init__(self, path: Path, schema: str, env: dict[str, Any], resume: bool = False,
                 resume_flag: str = "--resume") -> None:
        if schema not in SCHEMAS:
            raise CalibrationError(f"unknown measurements schema {schema!r}; known: {', '.join(SCHEMAS)}")
        self.path = Path(path)
        self.columns = SCHEMAS[schema]
        self.rows_written = 0
        self.points_in_file: set[tuple] = set()
        """:func:`point_key` of each row the file held when opened: what a resumed or appended write must not repeat."""
        check_new_out(self.path, resume, resume_flag)
        exists = self.path.exists() and self.path.stat().st_size > 0
        self.warnings: list[str] = []
        """What was repaired on the way in (a torn last row dropped), for the caller to show."""
        if exists:
            _read_text(self.path)  # a file that is not ours (binary, another format) is refused before any repair
            torn = drop_torn_last_row(self.path)
            if torn:
                self.warnings.append(torn)
            previous = read_measurements(self.path)
            if previous.schema != schema:
                raise CalibrationError(
                    f"--out {self.path} holds {previous.schema} measurements, not {schema}; choose another file"
                )
            check_same_job(self.path, previous.env, env)
            self.points_in_file = {point_key(r) for r in previous.rows}
        try:
            self._handle: TextIO = open(self.path, "a", encoding="utf-8", newline="")
        except OSError as err:
            raise CalibrationError(f"cannot write --out {self.path}: {err.strerror}; check the directory") from None
        if not exists:
            self._write("\n".join(_env_lines(schema, env)) + "\n" + ",".join(self.columns) + "\n")
        elif env.get("created"):
            self._write(f"# resumed: {env['created']}\n")

    def _write(self, text: str) -> None:
        """Append ``text`` and flush it; a full disk or a lost mount is one line (the rows before it stay)."""
        try:
            self._handle.write(text)
            self._handle.flush()
        except OSError as err:
            raise CalibrationError(f"cannot write --out {self.path}: {err.strerror or err}; the {self.rows_written} "
                                   "rows written before are kept (free space and run again: --resume or --append "
                                   "continues the file)") from None

    def write_row(self, row: dict[str, Any]) -> None:
        """Append one row and flush it to the OS at once (it survives the process being killed)."""
        unknown = set(row) - set(self.columns)
        if unknown:
            raise CalibrationError(f"measurement row has unknown columns {sorted(unknown)}; known: {self.columns}")
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow([_format_cell(row.get(col)) for col in self.columns])
        self._write(buffer.getvalue())
        self.rows_written += 1

    def note(self, text: str) -> None:
        """Append a ``# text`` comment line (skipped ops, resume marks)."""
        self._write("# " + " ".join(text.split()) + "\n")

    def close(self) -> None:
        """Close the file."""
        self._handle.close()

    def __enter__(self) -> "MeasurementWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


JOB_KEYS = ("backend", "world_size", "num_nodes", "system")
"""Environment lines that say which job a measurements file holds: a resumed or appended run must match each one
the file states (a gloo file resumed under MPI, or 4 ranks added to a 2-rank file, would be fitted as one job)."""


def check_same_job(path: Path, previous: dict[str, Any], env: dict[str, Any]) -> None:
    """A :class:`CalibrationError` naming every :data:`JOB_KEYS` line on which ``env`` (this run) differs from the
    file's ``previous`` block, both stated; nothing when they agree."""
    differ = [f"{key} {previous[key]} there, {env[key]} now" for key in JOB_KEYS
              if str(previous.get(key, "")).strip() and str(env.get(key, "")).strip()
              and str(previous[key]).strip() != str(env[key]).strip()]
    if differ:
        raise CalibrationError(f"--out {path} holds another job's measurements ({'; '.join(differ)}); one file holds "
                               f"one job: choose another --out")


def drop_torn_last_row(path: Path) -> str | None:
    """Cut a torn last data row (fewer cells than the header) off ``path``; end a whole last row that lacks only its
    newline (an editor saved the file so) with one, keeping it.

    A crash or a kill mid-write leaves a short row; resuming drops it so the point is measured again.
    Only the last row: a short row anywhere else is damage :func:`read_measurements` reports. Returns the
    warning (file, line, cells) or None when the file ends cleanly.
    """
    raw = Path(path).read_bytes()
    text = raw.decode("utf-8", errors="replace")
    lines = text.split("\n")
    ends_clean = text.endswith("\n")
    body = lines[:-1] if ends_clean else lines
    header = next((line for line in body if line and not line.startswith("#")), None)
    if not body or header is None or body[-1] == header or body[-1].startswith("#") or not body[-1].strip():
        return None
    try:
        width = len(next(csv.reader([header])))
        cells = len(next(csv.reader([body[-1]])))
    except csv.Error as err:  # a stray carriage return or NUL: damage to report, not a torn row to cut
        raise CalibrationError(f"{path}:{len(body)}: unreadable CSV ({err}); {_GIVE}") from None
    if cells == width:
        if not ends_clean:  # every cell there: a measured point, not a torn write
            with open(path, "ab") as handle:
                handle.write(b"\n")
            return f"{path}:{len(body)}: the last row had no newline at its end; added one and kept the row"
        return None
    start = len("\n".join(body[:-1]).encode("utf-8")) + 1
    with open(path, "r+b") as handle:
        handle.truncate(start)
    return (f"{path}:{len(body)}: dropped the torn last row ({cells} of {width} cells: what a crash mid-write "
            f"leaves); its point is measured again")


def write_measurements(path: Path, schema: str, env: dict[str, Any], rows: list[dict[str, Any]],
                       notes: list[str] = (), append: bool = False, append_flag: str = "--resume",
                       warn: Callable[[str], None] | None = None) -> int:
    """Write (or with ``append`` extend) a whole measurements file at once; returns the rows written.
    ``append_flag`` is the command's option that allows extending a file (named in the error); ``warn``
    receives what was repaired on the way in (a torn last row dropped)."""
    with MeasurementWriter(path, schema, env, resume=append, resume_flag=append_flag) as writer:
        for warning in writer.warnings:
            if warn is not None:
                warn(warning)
        kept = [row for row in rows if point_key(row) not in writer.points_in_file]
        if len(kept) < len(rows) and warn is not None:
            warn(f"{len(rows) - len(kept)} point(s) already in {path} left as they were (not added twice)")
        for row in kept:
            writer.write_row(row)
        for text in notes:
            writer.note(text)
        return writer.rows_written


def _convert(value: str, column: str, where: str) -> Any:
    """A cell as int (whole-number columns), float or text; empty numbers are None; a measured time or rate that is
    zero, negative, nan or inf is a CalibrationError naming the line (:data:`_POSITIVE_COLUMNS`)."""
    text = value.strip()
    if column not in _INT_COLUMNS and column not in _FLOAT_COLUMNS:
        return text
    if text == "":
        return None
    try:
        number = float(text)
    except ValueError:
        raise CalibrationError(f"{where}: column {column} = {text!r} is not a number") from None
    if column in _FLOAT_COLUMNS:
        if not math.isfinite(number) or number < 0 or (number == 0 and column in _POSITIVE_COLUMNS):
            need = "a positive" if column in _POSITIVE_COLUMNS else "a finite, non-negative"
            raise CalibrationError(f"{where}: column {column} = {text!r} must be {need} number (a damaged or edited "
                                   f"row?); fix the row or delete it")
        return number
    if not math.isfinite(number) or number != int(number):
        raise CalibrationError(f"{where}: column {column} = {text!r} must be a whole number")
    return int(number)


def _read_text(path: Path) -> str:
    """The text of a measurements file whose first line starts with :data:`MAGIC`; one-line errors for anything
    else (missing, binary, not UTF-8, another format)."""
    raw = read_user_bytes(path, CalibrationError, _GIVE)
    if b"\x00" in raw[:4096]:
        raise CalibrationError(f"{path}: binary data, not a measurements CSV; {_GIVE}")
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark (a spreadsheet saved the file) is not text
    except UnicodeDecodeError:
        raise CalibrationError(f"{path}: not UTF-8 text; {_GIVE}") from None
    if not text.startswith(MAGIC):
        raise CalibrationError(
            f"{path}: line 1 is not '{MAGIC} (...)'; this is not a commmodel measurements file "
            f"(convert nccl-tests output with `commmodel calibrate import`)"
        )
    return text


def is_measurements_file(path: Path) -> bool:
    """Whether ``path`` is an existing file that starts with :data:`MAGIC` (measured data not to overwrite)."""
    try:
        with open_user_file(path) as handle:
            return handle.read(len(MAGIC)) == MAGIC.encode()
    except OSError:
        return False


def check_new_out(path: Path, resume: bool, resume_flag: str = "--resume") -> None:
    """Refuse, before anything is measured, an ``--out`` that already holds data unless ``resume`` (the check
    :class:`MeasurementWriter` makes again when it opens the file)."""
    path = Path(path)
    if path.is_dir():
        raise CalibrationError(f"--out {path} is a folder; give a file name in it, e.g. --out {path / 'measured.csv'}")
    if path.exists() and path.stat().st_size > 0 and not resume:
        raise CalibrationError(f"--out {path} already exists; pass {resume_flag} to add to it (points already "
                               f"there are kept) or choose another file")


def read_measurements(path: Path) -> Measurements:
    """Read a measurements file written by ``calibrate run``, ``import`` or ``compute``.

    Errors name the file, the line and what was wrong (binary data, missing header, wrong columns).
    """
    path = Path(path)
    lines = _read_text(path).splitlines()
    schema = lines[0][len(MAGIC):].strip().strip("()") or "collectives"
    if schema not in SCHEMAS:
        raise CalibrationError(f"{path}: line 1: unknown schema {schema!r}; known: {', '.join(SCHEMAS)}")
    result = Measurements(schema=schema)
    columns: list[str] | None = None
    for number, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            body = stripped[1:].strip()
            key, sep, value = body.partition(":")
            if columns is None and sep and " " not in key.strip():
                result.env[key.strip()] = value.strip()
            else:
                result.notes.append(body)
            continue
        cells = next(csv.reader([line]))
        where = f"{path}:{number}"
        if columns is None:
            expected = SCHEMAS[schema]
            missing = [c for c in expected if c not in cells]
            if missing:
                raise CalibrationError(f"{where}: header row lacks columns {missing}; expected {','.join(expected)}")
            columns = cells
            continue
        if len(cells) != len(columns):
            raise CalibrationError(
                f"{where}: {len(cells)} cells but the header has {len(columns)} columns (truncated or edited row?)"
            )
        row = {col: _convert(cell, col, where) for col, cell in zip(columns, cells)}
        empty = [col for col in _REQUIRED[schema] if row.get(col) in (None, "")]
        if empty:
            raise CalibrationError(f"{where}: {', '.join(empty)} empty; every row needs {', '.join(_REQUIRED[schema])} "
                                   f"(an edited or damaged row?)")
        result.rows.append(row)
    if columns is None:
        raise CalibrationError(f"{path}: no header row ({','.join(SCHEMAS[schema])}); the file is truncated")
    return result
