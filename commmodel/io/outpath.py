"""The one check every ``--out`` goes through before any work is done.

An output path is usable when it is not a folder, its parent folder exists (nothing is created
silently: a typo in a folder name should not leave a new tree behind) and a file can be created in
that folder. Writability is probed by creating and removing a temporary file, because
``os.access`` answers "yes" for root even on read-only places such as ``/proc``.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from commmodel.errors import CommModelError
from commmodel.io.yaml_read import os_reason, shown_path


class OutputPathError(CommModelError):
    """An ``--out`` path that cannot be written."""


def check_out_path(path: Path | str | None, option: str = "--out") -> Path | None:
    """``path`` as a :class:`Path` when a file can be written there; a one-line error otherwise."""
    if path is None:
        return None
    if str(path) in ("", "."):  # typer reads --out '' as Path("."), so the two cannot be told apart
        raise OutputPathError(f"{option}: the path is empty (or '.', the current folder); give a file name")
    out = Path(path)
    try:
        _check_place(out, option)
    except OSError as err:  # a name too long, a symbolic-link loop: os_reason says which and the fix
        raise OutputPathError(f"{option} {shown_path(out)}: cannot write there ({os_reason(err)}); "
                              f"choose another path") from None
    parent = out.parent
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".commmodel-probe-"):
            pass
    except OSError as err:
        raise OutputPathError(f"{option} {out}: cannot write in {parent} ({err.strerror or err}); "
                              f"choose a writable folder") from None
    return out


def _check_place(out: Path, option: str) -> None:
    """A one-line error where ``out`` is a folder, a device or pipe, or in a folder that does not exist; an
    ``OSError`` where the path cannot be looked up at all."""
    shown = shown_path(out)
    try:
        info: os.stat_result | None = out.stat()
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputPathError(f"{option} {shown}: is a folder; cannot write a file there, give a file name inside it")
    if info is not None and not stat.S_ISREG(info.st_mode):  # /dev/full, a FIFO: never replaced by a file
        raise OutputPathError(f"{option} {shown}: is a device or pipe, not a file; give a file name")
    parent = out.parent
    if not parent.exists():
        raise OutputPathError(f"{option} {shown}: cannot write, folder {parent} does not exist; create it first "
                              f"(mkdir -p {parent})")
    if not parent.is_dir():
        raise OutputPathError(f"{option} {shown}: {parent} is not a folder; cannot write there")


def check_out_option(value: Path | None) -> Path | None:
    """:func:`check_out_path` for ``--out`` with one parameter, the shape a typer option callback takes."""
    return check_out_path(value)


FORMAT_SUFFIXES = {".png": "a PNG image", ".pdf": "a PDF", ".svg": "an SVG image", ".jpg": "a JPEG image",
                   ".jpeg": "a JPEG image", ".json": "a JSON file", ".xml": "an XML file", ".yaml": "a YAML file",
                   ".yml": "a YAML file", ".csv": "a CSV file"}
"""File name endings that say another format than a command writes (``calibrate import -o x.png`` wrote a CSV into a
.png); a name without one of these endings (``bench``, ``run.out``) is taken as given."""


def check_out_format(path: Path | None, suffixes: tuple[str, ...], writes: str, option: str = "--out") -> Path | None:
    """``path``, or one line when its ending names another format (:data:`FORMAT_SUFFIXES`) than ``suffixes``."""
    suffix = "" if path is None else Path(path).suffix.lower()
    if suffix in FORMAT_SUFFIXES and suffix not in suffixes:
        name = Path(path).name
        instead = Path(name).with_suffix(suffixes[0])
        raise OutputPathError(f"{option} {name} names {FORMAT_SUFFIXES[suffix]}, and this command writes {writes}; "
                              f"give a name ending in {suffixes[0]}, e.g. {option} {instead}")
    return path


def check_yaml_out(value: Path | None) -> Path | None:
    """The ``--out`` callback of a command writing a profile YAML: :func:`check_out_path`, measured data it would
    replace (:func:`refuse_measurements`, the line that says so), then its ending."""
    refuse_measurements(check_out_path(value), "a profile YAML")
    return check_out_format(value, YAML_SUFFIXES, "a profile YAML")


def check_csv_out(value: Path | None) -> Path | None:
    """The ``--out`` callback of a command writing a measurements CSV: :func:`check_out_path`, then its ending."""
    return check_out_format(check_out_path(value), (".csv",), "a measurements CSV")


def refuse_measurements(path: Path | None, writes: str, option: str = "--out") -> None:
    """A one-line error when ``path`` is an existing measurements file (``# commmodel measurements v1`` on
    line 1) or another existing file that is not YAML (a raw nccl-tests log): a command that writes ``writes`` (a
    profile YAML) there would replace measured data."""
    from commmodel.io.measurements import MAGIC, is_measurements_file

    if path is None:
        return
    path = Path(path)
    if is_measurements_file(path):
        raise OutputPathError(f"{option} {path} holds measurements (its line 1 is '{MAGIC}'); this command writes "
                              f"{writes} and would replace them: choose another file, e.g. "
                              f"{option} {path.with_suffix('.yaml')}")
    if path.is_file() and path.stat().st_size and path.suffix.lower() not in YAML_SUFFIXES:
        # a raw nccl-tests log or JSON report is often the only copy of a measurement: only a YAML is replaced
        raise OutputPathError(f"{option} {path} exists and is not a YAML file (a measurement log?); this command "
                              f"writes {writes}: choose a .yaml path, e.g. {option} {path.with_suffix('.yaml')}")
    if path.is_file() and path.stat().st_size and not _written_by_commmodel(path):
        # a hand-written or shipped profile is the user's own: only a profile commmodel wrote is replaced
        raise OutputPathError(f"{option} {path} exists and was not written by commmodel (its header does not say "
                              f"'{WRITTEN_BY}'); this command writes {writes} and would replace it: choose another "
                              f"file, or delete {path} first")


YAML_SUFFIXES = (".yaml", ".yml")
"""The names a written profile may replace: what a command writes profiles as."""

WRITTEN_BY = "written by `commmodel"
"""What the first comment lines of every profile commmodel writes say (``calibrate fit``, ``profiles from-nccl``):
the mark that lets a later run replace it."""


def _written_by_commmodel(path: Path) -> bool:
    """Whether the first 4 KiB of ``path`` carry :data:`WRITTEN_BY`."""
    try:
        with open(path, "rb") as handle:
            return WRITTEN_BY.encode() in handle.read(4096)
    except OSError:
        return False


FIGURE_MARK = "commmodel"
"""What every figure commmodel writes carries in its metadata (PNG ``Software``, PDF and SVG ``Creator``, a JPEG
comment: ``cli/plot_common.save_figure``), so a later run may replace it and a user's own file is never replaced."""

MARK_SCAN_BYTES = 64 * 2**20
"""How much of an existing figure is searched for :data:`FIGURE_MARK` (a PDF keeps its ``Creator`` near the end; the
figures commmodel writes are well under this)."""


def carries_figure_mark(path: Path) -> bool:
    """Whether ``path`` holds :data:`FIGURE_MARK` within its first :data:`MARK_SCAN_BYTES` (read in 1 MiB pieces that
    overlap by the mark's length, so a mark across two pieces is found)."""
    mark, tail = FIGURE_MARK.encode(), b""
    try:
        with open(path, "rb") as handle:
            for _ in range(MARK_SCAN_BYTES // 2**20):
                piece = handle.read(2**20)
                if not piece:
                    return False
                if mark in tail + piece:
                    return True
                tail = piece[-len(mark):]
    except OSError:
        return False
    return False


def check_figure_replace(out: Path, option: str = "--out") -> None:
    """One line when ``out`` is an existing, non-empty regular file commmodel did not draw (no :data:`FIGURE_MARK`):
    a figure replaces only a figure of its own (``-o thesis.pdf`` replaced the user's thesis)."""
    if os.path.isfile(out) and os.path.getsize(out) and not carries_figure_mark(out):
        raise OutputPathError(f"{option} {out} exists and was not drawn by commmodel (no '{FIGURE_MARK}' mark in its "
                              f"metadata); choose another name, or delete {out} first to replace it")


def replace_checked(out: Path, text: str, check: Callable[[Path], object], error: type[CommModelError],
                    what: str, option: str = "--out") -> Path:
    """Write ``text`` to a temporary file beside ``out``, run ``check`` on it (a loader that raises a
    :class:`~commmodel.errors.CommModelError`), then move it over ``out``: a file that would not load, or a full
    disk, never replaces what ``out`` held. Errors are one ``error`` line naming ``what`` was being written."""
    out = Path(out)
    head = out.name.encode()[:200].decode(errors="ignore")  # a 250-byte --out must not give a temp name over 255
    tmp = out.with_name(f".{head}.tmp{out.suffix[:16]}")
    try:  # the folder is not created: a typo in it must not leave a new tree behind
        tmp.write_text(text, encoding="utf-8")
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise error(f"{option} {out}: cannot write ({err.strerror or err}); the folder must exist, be writable and "
                    f"have room") from None
    try:
        check(tmp)
    except CommModelError as err:
        tmp.unlink(missing_ok=True)
        why = str(err).replace(str(tmp), str(out))  # the check read the temporary file: name the one the user gave
        raise error(f"{what} would not load ({why}); nothing written to {out}") from None
    try:
        os.replace(tmp, out)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise error(f"{option} {out}: cannot write ({err.strerror or err})") from None
    return out
