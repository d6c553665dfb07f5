"""The one place the CLI writes to stdout, and what happens when stdout cannot take it.

- stdout closed (``commmodel plan ... >&-``): Python has no ``sys.stdout``; the answer would vanish, so
  this is an error line on stderr and exit 1.
- a full disk or device (``> /dev/full``, ENOSPC, EIO ...): an error line naming the cause, exit 1.
- the reader went away (``| head -1``, EPIPE): exit 141 (128 + SIGPIPE, what a shell reports for a
  program killed by SIGPIPE) with nothing on stderr — the reader chose to stop, so it is not an error
  worth a message, but the exit status still says the output was not all delivered.

Each write is flushed at once so a failure surfaces here, not in the interpreter's shutdown flush
(where it would print "Exception ignored ..." and a traceback).
"""

from __future__ import annotations

import errno
import os
import sys

import typer

from commmodel.errors import CommModelError

SIGPIPE_EXIT = 141
"""Exit status after a broken pipe: 128 + SIGPIPE (13), as POSIX shells report it."""


class OutputError(CommModelError):
    """stdout could not take the output."""


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the shutdown flush cannot fail again (Python docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):
        pass


PLAIN_SPELLINGS = {"×": "x", "·": ".", "≤": "<=", "≥": ">=", "µ": "u", "–": "-", "—": "-", "→": "->", "←": "<-",
                   "…": "...", "≈": "~", "±": "+/-", "²": "^2", "Σ": "sum", "′": "'", "’": "'", "“": '"', "”": '"'}
"""ASCII spellings of the non-ASCII characters the CLI prints, for a stdout that cannot encode them."""


def in_encoding(text: str, encoding: str) -> str:
    """``text`` with each character ``encoding`` cannot encode spelt as :data:`PLAIN_SPELLINGS` says (else '?')."""
    plain = "".join(PLAIN_SPELLINGS.get(c, c) if ord(c) > 127 else c for c in text)
    return plain.encode(encoding, errors="replace").decode(encoding)


def write_stdout(text: str) -> None:
    """Write ``text`` to stdout and flush; one-line error (exit 1) or a quiet exit 141 on a broken pipe."""
    stream = sys.stdout
    if stream is None:
        raise OutputError("stdout is closed; nothing could be printed (drop the >&- or redirect to a file)")
    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:  # an ASCII-only stdout (PYTHONIOENCODING=ascii, an old terminal): nothing written
            stream.write(in_encoding(text, stream.encoding or "ascii"))
        stream.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise typer.Exit(SIGPIPE_EXIT) from None
    except OSError as err:
        _silence_stdout()
        reason = err.strerror or errno.errorcode.get(err.errno or 0, str(err))
        raise OutputError(f"cannot write the output to stdout ({reason}); free space or redirect elsewhere") from None
