"""Reading user files with one-line errors: the safe YAML reader and the raw-bytes reader.

Every reader takes the :class:`~commmodel.errors.CommModelError` subclass to raise (ProfileError for
profiles, WorkloadError for model files, CalibrationError for measurements) and a hint that says what to
give instead, so each error names the file, what was wrong and the fix. YAML is parsed with a safe
loader only (libyaml's ``CSafeLoader`` when PyYAML was built with it, ~10× faster; never ``yaml.Loader``).
PyYAML is imported on the first parse, not with this module: a command whose profiles all come from the
snapshot (:mod:`commmodel.io.profile_snapshot`) never pays its ~7 ms import (issue 17).
The wording every reader shares lives here too: :func:`read_failure` for an ``OSError`` (a name too long, a
symbolic-link loop, a silent pipe), :func:`too_many_digits` for a number Python will not convert, and
:func:`shown_path` for a path too long to print whole.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import stat
import time
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
command connects in milliseconds); past it a pipe nobody opened is refused as one with no writer."""

PIPE_FIRST_BYTE_S = 5.0
"""How long a pipe or named pipe given as input may stay silent before its first byte (``sleep 30 | commmodel
estimate -s /dev/stdin`` waited for the writer to exit): ``cat``, a decompressor or a download sends its first bytes
well within it. Once bytes arrive the rest is read to end of file, up to the reader's size cap."""


class PipeWithoutWriterError(OSError):
    """A named pipe that no process opened for writing within :data:`FIFO_WRITER_WAIT_S`."""


class PipeSilentError(TimeoutError):
    """A pipe whose writer sent nothing within :data:`PIPE_FIRST_BYTE_S`."""


class _PipeReader(io.RawIOBase):
    """A pipe's descriptor read blocking, after the first bytes :func:`_first_bytes` took from it."""

    def __init__(self, descriptor: int, first: bytes) -> None:
        """Read ``first``, then the rest of ``descriptor`` (closed with this reader)."""
        super().__init__()
        self._descriptor = descriptor
        self._first = first

    def readable(self) -> bool:
        """A pipe opened for reading."""
        return True

    def readinto(self, buffer: Any) -> int:
        """The first bytes while any are left, then what one blocking read() of the pipe returns."""
        data = self._first[:len(buffer)] if self._first else os.read(self._descriptor, len(buffer))
        self._first = self._first[len(data):]
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        """Close the descriptor once."""
        if not self.closed:
            try:
                os.close(self._descriptor)
            finally:
                super().close()


def _first_bytes(descriptor: int) -> bytes:
    """The first chunk from a pipe opened non-blocking (``b""`` when its writer closed it without writing).

    Linux reports neither data nor hang-up on a named pipe before a writer connects, so after
    :data:`FIFO_WRITER_WAIT_S` a non-blocking read() tells the cases apart: end of file is no writer
    (:class:`PipeWithoutWriterError`), EAGAIN a writer that has sent nothing yet, given up to
    :data:`PIPE_FIRST_BYTE_S` in all (then :class:`PipeSilentError`).
    """
    import select

    poller = select.poll()
    poller.register(descriptor, select.POLLIN | select.POLLHUP)
    started = time.monotonic()
    events = poller.poll(FIFO_WRITER_WAIT_S * 1000)
    while True:
        try:
            first = os.read(descriptor, _CHUNK_BYTES)
        except BlockingIOError:  # a writer holds the pipe open and has sent nothing yet
            left = PIPE_FIRST_BYTE_S - (time.monotonic() - started)
            events = poller.poll(left * 1000) if left > 0 else []
            if not events:
                raise PipeSilentError(errno.ETIMEDOUT, f"nothing arrived in {PIPE_FIRST_BYTE_S:g} s") from None
            continue
        if first or any(event & select.POLLHUP for _, event in events):
            return first  # data, or a writer that connected and closed without writing (an empty input)
        raise PipeWithoutWriterError(errno.EPIPE, "a pipe with no writer")


def open_user_file(path: Path | str) -> BinaryIO:
    """``open(path, "rb")`` that never hangs: a pipe or named pipe (FIFO) is opened without waiting for a writer and
    read blocking only once its first bytes arrived (:func:`_first_bytes`): one nobody writes to is
    :class:`PipeWithoutWriterError`, one whose writer stays silent :class:`PipeSilentError` (both ``OSError``, worded
    by :func:`read_failure`); ``<(...)`` pipes and regular files read as usual."""
    if not stat.S_ISFIFO(os.stat(path).st_mode) or not hasattr(os, "O_NONBLOCK"):
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    import fcntl

    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        first = _first_bytes(descriptor)
        fcntl.fcntl(descriptor, fcntl.F_SETFL, fcntl.fcntl(descriptor, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(descriptor)
        raise
    return io.BufferedReader(_PipeReader(descriptor, first))


SHOWN_PATH_CHARS = 120
"""Longest path an error line shows whole; a longer one (a 300-character name) is shown by its start and end."""


def shown_path(path: Path | str) -> str:
    """``path`` as an error line names it: whole up to :data:`SHOWN_PATH_CHARS`, else its first 60 and last 40
    characters around "..." and its length, so the line stays readable and still says which path it was."""
    text = str(path)
    if len(text) <= SHOWN_PATH_CHARS:
        return text
    return f"{text[:60]}...{text[-40:]} ({len(text)} characters)"


def os_reason(err: OSError) -> str:
    """Why an ``OSError`` happened, in words, with the rule broken where its text alone does not say it."""
    if err.errno == errno.ENAMETOOLONG:
        return "File name too long: a file or folder name may have at most 255 bytes"
    if err.errno == errno.ELOOP:
        return "Too many levels of symbolic links: the links point at each other"
    return err.strerror or str(err)


def read_failure(path: Path | str, err: OSError, error: type[CommModelError], give: str) -> CommModelError:
    """The one line for an ``OSError`` met reading the user file ``path`` (``give``: what to pass instead)."""
    shown = shown_path(path)
    if isinstance(err, PipeSilentError):
        return error(f"{shown}: nothing arrived on this pipe in {PIPE_FIRST_BYTE_S:g} s; pipe a file that is being "
                     f"written, or pass the file itself")
    if isinstance(err, PipeWithoutWriterError):
        return error(f"{shown}: a pipe with no writer (nothing opened it for writing within {FIFO_WRITER_WAIT_S:g} s); "
                     f"start the command that writes it first, or pass the file itself")
    if isinstance(err, FileNotFoundError):
        return error(f"{shown}: no such file; {give}")
    return error(f"{shown}: cannot read ({os_reason(err)}); {give}")


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
    (:data:`MAX_USER_FILE_BYTES`), a pipe only once its first bytes arrive (:func:`open_user_file`), so no input can
    exhaust memory or read forever. Errors name the path as :func:`shown_path` does.
    """
    shown = shown_path(path)
    too_big = f"{shown}: larger than {limit // 2**20} MiB, the most such an input file may hold; {give}"
    try:
        info = Path(path).stat()
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{shown}: is a folder, not a file; {give}")
        if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) or stat.S_ISSOCK(info.st_mode):
            raise error(f"{shown}: is a device, not a file; {give}")
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
    except IsADirectoryError:
        raise error(f"{shown}: is a folder, not a file; {give}") from None
    except OSError as err:
        raise read_failure(path, err, error, give) from None


def too_many_digits(path: Path | str, text: str, error: type[CommModelError]) -> CommModelError | None:
    """The one line for a file holding an integer longer than Python converts (``sys.get_int_max_str_digits()``,
    4300 digits; its ValueError says to raise the limit, which is no fix for an input), naming its line; ``None``
    where ``text`` holds no such number (the ValueError had another cause)."""
    import re
    import sys

    limit = sys.get_int_max_str_digits()
    found = re.search(rf"\d{{{limit + 1},}}", text) if limit else None
    if found is None:
        return None
    line = text.count("\n", 0, found.start()) + 1
    return error(f"{shown_path(path)}: line {line}: a number of {len(found.group())} digits, more than the {limit} "
                 f"a number may have; no field needs one: fix the value")


def read_yaml_file(path: Path, error: type[CommModelError], give: str) -> Any:
    """Parse the YAML file at ``path`` safely (``None`` for an empty file).

    Errors: no such file (``give`` says what to pass instead), not UTF-8, a number too long to convert
    (:func:`too_many_digits`), and malformed YAML with its line, column and problem
    ("PATH: line 2, column 1: malformed YAML (found a tab ...); fix the syntax").
    """
    raw = read_user_bytes(path, error, give, MAX_YAML_FILE_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{shown_path(path)}: cannot read (not UTF-8 text); {give}") from None
    import yaml

    try:
        return yaml.load(text, Loader=safe_loader())  # noqa: S506 - a safe loader, never yaml.Loader
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise error(f"{shown_path(path)}:{where}: malformed YAML ({problem}); fix the syntax") from None
    except ValueError as err:  # int() of a 5000-digit scalar (the constructor's only ValueError seen)
        raise too_many_digits(path, text, error) or error(f"{shown_path(path)}: malformed YAML ({err}); "
                                                         f"fix the value") from None
