"""Reading user files with one-line errors: the safe YAML reader and the raw-bytes reader.

Every reader takes the :class:`~commmodel.errors.CommModelError` subclass to raise (ProfileError for
profiles, WorkloadError for model files, CalibrationError for measurements) and a hint that says what to
give instead, so each error names the file, what was wrong and the fix. YAML is parsed with a safe
loader only (libyaml's ``CSafeLoader`` when PyYAML was built with it, ~10× faster; never ``yaml.Loader``).
PyYAML is imported on the first parse, not with this module: a command whose profiles all come from the
snapshot (:mod:`commmodel.io.profile_snapshot`) never pays its ~7 ms import (issue 17).
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from commmodel.errors import CommModelError

MAX_USER_FILE_BYTES = 256 * 2**20
"""Largest input file read (256 MiB). Profiles and model files are KBs; nccl-tests logs and measurement
CSVs of a full sweep are at most a few MB; the bound turns ``/dev/zero`` or a wrong multi-GB file into
one line instead of a MemoryError."""

_CHUNK_BYTES = 2**20


FIFO_WRITER_WAIT_S = 0.5
"""How long a named pipe given as input may wait for a process to open it for writing (a writer started beside the
command connects in milliseconds); past it the pipe reads as empty."""


def open_user_file(path: Path | str) -> BinaryIO:
    """``open(path, "rb")`` that never hangs: a named pipe (FIFO) is opened without waiting for a writer, given
    :data:`FIFO_WRITER_WAIT_S` for one to connect, then read as a blocking pipe, so one nobody writes to reads as
    empty (POSIX read(): end of file when no process has the pipe open for writing) instead of hanging the
    command; ``<(...)`` pipes (already connected) and regular files read as usual."""
    if not stat.S_ISFIFO(os.stat(path).st_mode) or not hasattr(os, "O_NONBLOCK"):
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    import fcntl
    import select

    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    poller = select.poll()
    poller.register(descriptor, select.POLLIN | select.POLLHUP)
    poller.poll(FIFO_WRITER_WAIT_S * 1000)  # a writer's data or hang-up; Linux reports neither before one connects
    fcntl.fcntl(descriptor, fcntl.F_SETFL, fcntl.fcntl(descriptor, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return os.fdopen(descriptor, "rb")


@functools.lru_cache(maxsize=1)
def safe_loader() -> type:
    """libyaml's safe loader where PyYAML was built with it (the pure-Python one otherwise), refusing a
    mapping that repeats a key (YAML 1.2 §3.2.1.1 requires unique keys; PyYAML keeps the last silently, so a
    duplicated ``gpu:`` would drop the first value unseen). Built once, on first use."""
    import yaml

    class _StrictSafeLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                lines: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # "<<: *base" then an override is the point of a merge key
                    key = self.construct_object(key_node, deep=True)
                    line = key_node.start_mark.line + 1
                    if isinstance(key, (str, int, float, bool)) and key in lines:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key} on lines {lines[key]} and {line}; keep one",
                            key_node.start_mark)
                    if isinstance(key, (str, int, float, bool)):
                        lines[key] = line
            return super().construct_mapping(node, deep=deep)

    return _StrictSafeLoader


def __getattr__(name: str) -> Any:
    """``SAFE_LOADER``: :func:`safe_loader`'s class, built (and PyYAML imported) on first access."""
    if name == "SAFE_LOADER":
        return safe_loader()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


MAX_YAML_FILE_BYTES = 2**20
"""Largest YAML file read (1 MiB): profiles, model files and the validation runs are KBs (the largest shipped, the
modern training runs, is 63 kB); parsing a 33 MB YAML of 2M keys took two minutes and 3.4 GB before this."""


def read_user_bytes(path: Path, error: type[CommModelError], give: str, limit: int = MAX_USER_FILE_BYTES) -> bytes:
    """The bytes of ``path``; a missing or unreadable file is ``error("PATH: no such file; GIVE")``.

    Devices (``/dev/zero``) are refused; regular files and pipes are read in 1 MiB chunks up to ``limit`` bytes
    (:data:`MAX_USER_FILE_BYTES`), so no input can exhaust memory or read forever.
    """
    too_big = f"{path}: larger than {limit // 2**20} MiB, the most such an input file may hold; {give}"
    try:
        info = Path(path).stat()
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{path}: is a folder, not a file; {give}")
        if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) or stat.S_ISSOCK(info.st_mode):
            raise error(f"{path}: is a device, not a file; {give}")
        if info.st_size > limit:
            raise error(too_big)
        chunks: list[bytes] = []
        total = 0
        with open_user_file(path) as handle:
            while chunk := handle.read(_CHUNK_BYTES):
                total += len(chunk)
                if total > limit:
                    raise error(too_big)
                chunks.append(chunk)
        return b"".join(chunks)
    except FileNotFoundError:
        raise error(f"{path}: no such file; {give}") from None
    except IsADirectoryError:
        raise error(f"{path}: is a folder, not a file; {give}") from None
    except OSError as err:
        raise error(f"{path}: cannot read ({err.strerror or err})") from None


def read_yaml_file(path: Path, error: type[CommModelError], give: str) -> Any:
    """Parse the YAML file at ``path`` safely (``None`` for an empty file).

    Errors: no such file (``give`` says what to pass instead), not UTF-8, and malformed YAML with its
    line, column and problem ("PATH: line 2, column 1: malformed YAML (found a tab ...); fix the syntax").
    """
    raw = read_user_bytes(path, error, give, MAX_YAML_FILE_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: cannot read (not UTF-8 text); {give}") from None
    import yaml

    try:
        return yaml.load(text, Loader=safe_loader())  # noqa: S506 - a safe loader, never yaml.Loader
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise error(f"{path}:{where}: malformed YAML ({problem}); fix the syntax") from None
