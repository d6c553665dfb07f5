"""Stream a large Chrome-trace JSON document (plain or gzip) without loading it whole.

A Kineto trace is one object whose ``"traceEvents"`` array can hold millions of events (1 GB of
text). :func:`iter_trace` walks the top-level object with :meth:`json.JSONDecoder.raw_decode` over
a 1 MiB text buffer: the small top-level values (``distributedInfo``, ``deviceProperties``) are
returned whole, the ``traceEvents`` array is yielded one event at a time, so memory stays at the
buffer plus what the caller keeps.
"""

from __future__ import annotations

import gzip
import io
import json
import stat
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from commmodel.errors import CommModelError

CHUNK_CHARS = 1 << 20
"""Characters read per refill (1 Mi): large enough that refills are rare, small next to any trace."""

_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


class TraceFileError(CommModelError):
    """A trace file that cannot be read: truncated, not JSON, or without what a reader needs."""


TRACE_GIVE = "give a torch.profiler trace (.json or .json.gz, export_chrome_trace)"
"""What every unreadable-trace line says to give instead."""


MAX_VALUE_CHARS = 4 * CHUNK_CHARS
"""Longest JSON value (one trace event, a top-level block) the reader waits for more text to complete: a decode
error further than this before the window's end is a malformed file, not a value the next chunk completes."""


class _Buffer:
    """A text window over a stream with the position of the next unread character."""

    def __init__(self, text: io.TextIOBase, raw: BinaryIO, path: Path,
                 on_progress: Callable[[int], None] | None) -> None:
        self.text, self.raw, self.path, self.on_progress = text, raw, path, on_progress
        self.buf, self.pos, self.eof = "", 0, False
        self.base = 0  # characters of the file before buf[0]: an error's position in the file is base + its index

    def more(self) -> bool:
        try:
            chunk = self.text.read(CHUNK_CHARS)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as err:
            raise TraceFileError(f"{self.path}: truncated or corrupt gzip stream ({err}); "
                                 "copy the trace again or decompress it to check") from err
        except UnicodeDecodeError as err:
            hint = _compressed_hint(self.raw) or "; give a torch.profiler trace (export_chrome_trace: .json, .json.gz)"
            raise TraceFileError(f"{self.path}: not UTF-8 JSON text ({err.reason}){hint}") from err
        if self.on_progress is not None:
            self.on_progress(self.raw.tell())
        if not chunk:
            self.eof = True
            return False
        self.base += self.pos
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def peek(self) -> str:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, chars: str, what: str) -> str:
        char = self.peek()
        if not char or char not in chars:
            found = "end of file" if not char else repr(char)
            nccl = "an NCCL topology XML" if char == "<" else "an NCCL_DEBUG=INFO log" if "NCCL INFO" in self.buf else ""
            if nccl and what.endswith("at the start"):  # the wrong one of a job's files given to diagnose
                raise TraceFileError(f"{self.path}: {nccl}, not a Kineto trace; give it to `commmodel profiles "
                                     "from-nccl`, diagnose reads torch.profiler traces (*.json, *.json.gz)")
            why = "the file may be truncated" if not char else "give a torch.profiler trace (export_chrome_trace)"
            raise TraceFileError(f"{self.path}: not a Chrome/Kineto trace JSON object: expected {what}, found {found} "
                                 f"({why})")
        self.pos += 1
        return char

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                # a value cut by the window's end is read on; one broken well before it is damage (reading on to
                # the end of a large file, recopying the window each time, took minutes)
                if err.pos >= len(self.buf) - MAX_VALUE_CHARS and self.more():
                    continue
                raise TraceFileError(f"{self.path}: JSON ends early or is malformed at character {self.base + err.pos} "
                                     f"({err.msg}; or one value there is longer than {MAX_VALUE_CHARS // 2**20}M "
                                     f"characters); the file may be truncated or damaged") from err
            except RecursionError:  # json's decoder recurses once per nesting level
                raise TraceFileError(f"{self.path}: JSON nested too deep at character {self.pos}; not a Kineto "
                                     "trace (its events are flat objects)") from None
            if end == len(self.buf) and not self.eof and self.more():
                continue  # a number at the buffer's end may go on in the next chunk
            self.pos = end
            return obj


COMPRESSED_MAGIC = {b"BZh": "bzip2", b"\xfd7zXZ": "xz", b"\x28\xb5\x2f\xfd": "zstd", b"PK\x03\x04": "zip"}
"""Leading bytes of the archives a trace is often shipped in (bzip2, xz, zstd, zip): diagnose reads plain or gzip
JSON, so such a file is named for what it is."""


def _compressed_hint(raw: BinaryIO) -> str:
    """"; it is a bzip2 archive: decompress it first" where the file starts as an archive does, else ""."""
    try:
        position = raw.tell()
        raw.seek(0)
        head = raw.read(6)
        raw.seek(position)
    except (OSError, ValueError):
        return ""
    kind = next((name for magic, name in COMPRESSED_MAGIC.items() if head.startswith(magic)), None)
    return f"; it is a {kind} archive: decompress it first (diagnose reads plain or gzip JSON)" if kind else ""


def _open(path: Path) -> tuple[io.TextIOBase, BinaryIO]:
    raw = open(path, "rb")  # noqa: SIM115 - closed by iter_trace
    magic = raw.read(2)
    raw.seek(0)
    stream: BinaryIO = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw  # type: ignore[assignment]
    return io.TextIOWrapper(stream, encoding="utf-8-sig"), raw  # a byte-order mark (some editors write one) is text


def iter_trace(path: Path, on_progress: Callable[[int], None] | None = None) -> Iterator[tuple[str, Any]]:
    """Yield ``("meta", (key, value))`` for each top-level field and ``("event", dict)`` for each trace
    event, in file order (then ``("meta", ("traceEvents", True))``). ``on_progress`` gets the compressed bytes read so far."""
    try:
        mode: int | None = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as err:  # a symbolic-link loop, a name too long
        from commmodel.io.yaml_read import read_failure

        raise read_failure(path, err, TraceFileError, TRACE_GIVE) from None
    if mode is None or not stat.S_ISREG(mode):
        what = "no such trace file" if mode is None else "is a folder" if stat.S_ISDIR(mode) else "is not a file"
        raise TraceFileError(f"{path}: {what}; {TRACE_GIVE}")
    text, raw = _open(path)
    try:
        buf = _Buffer(text, raw, path, on_progress)
        if buf.peek() == "":
            raise TraceFileError(f"{path}: empty file (0 bytes of JSON); the profiler may not have finished writing it")
        if buf.peek() == "[":
            raise TraceFileError(f"{path}: a JSON array, not a Kineto trace (an object with 'traceEvents', "
                                 "'distributedInfo'); give the .pt.trace.json that torch.profiler wrote")
        buf.expect("{", "'{' at the start")
        if buf.peek() == "}":
            return
        while True:
            key = buf.value()
            buf.expect(":", "':' after a key")
            if key == "traceEvents":
                yield from _events(buf)
                yield "meta", ("traceEvents", True)
            else:
                yield "meta", (key, buf.value())
            if buf.expect(",}", "',' or '}' between fields") == "}":
                return
    finally:
        text.close()
        raw.close()


def _events(buf: _Buffer) -> Iterator[tuple[str, Any]]:
    buf.expect("[", "'[' opening traceEvents")
    if buf.peek() == "]":
        buf.pos += 1
        return
    while True:
        event = buf.value()
        if isinstance(event, dict):
            yield "event", event
        if buf.expect(",]", "',' or ']' between events") == "]":
            return
