"""The shipped profile library parsed ahead of time: ``hardware_profiles/parsed.json`` (issue 17).

PyYAML builds its Python objects in Python even with libyaml: ~3 ms for ``links.yaml`` alone, ~8 ms for the
three files a ``collective`` or ``plan`` reads and ~12 ms for the ~35 a ``query`` looks at, of a ~0.2 s
command. ``json`` reads the same values in a fraction of a millisecond. The snapshot holds, for each
shipped YAML file, the SHA-256 of its bytes and its parsed value as JSON text.

A file is taken from the snapshot only while its bytes still have the recorded digest; anything else (a
user's profile or catalogue folder, a shipped file edited or added since, a value JSON cannot carry
exactly, a missing or unreadable snapshot) is parsed from YAML as before. So the snapshot changes how
fast a file is read, never what is read. Each read parses its own JSON text, so callers get fresh objects
as from YAML. ``tests/test_profile_snapshot.py`` fails when the snapshot is stale and rewrites it when
run as a script.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

SNAPSHOT_NAME = "parsed.json"
"""File name of the snapshot inside the profile folder (next to ``links.yaml``)."""

SNAPSHOT_FORMAT = 1
"""Version of the snapshot's layout; a snapshot of another version is ignored (everything read from YAML)."""


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _exact_json(data: Any) -> str | None:
    """``data`` as compact JSON text, or None when JSON would not give back an equal value (a date, a
    non-string key, NaN: such a file is left to YAML). Key order is kept: catalogues list in file order."""
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    return text if json.loads(text) == data else None


def snapshot_text(directory: Path, parse: Callable[[Path], Any]) -> str:
    """The snapshot of every ``*.yaml`` under ``directory``, each parsed by ``parse`` (the strict YAML
    reader: a malformed file raises here, at build time, as it would at run time)."""
    files = {}
    for path in sorted(Path(directory).rglob("*.yaml")):
        text = _exact_json(parse(path))
        if text is not None:
            files[path.relative_to(directory).as_posix()] = {"sha256": _digest(path.read_bytes()), "json": text}
    return json.dumps({"format": SNAPSHOT_FORMAT, "files": files}, ensure_ascii=False, indent=1) + "\n"


@functools.lru_cache(maxsize=8)
def _entries(directory: Path) -> dict[Path, tuple[str, str]]:
    """{file path: (SHA-256, JSON text)} of ``directory``'s snapshot; empty without a usable one."""
    try:
        document = json.loads((directory / SNAPSHOT_NAME).read_text(encoding="utf-8"))
        if document.get("format") != SNAPSHOT_FORMAT:
            return {}
        return {directory / name: (entry["sha256"], entry["json"]) for name, entry in document["files"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def snapshot_value(path: Path, directory: Path) -> Any | None:
    """The parsed value of ``path`` from ``directory``'s snapshot, or None when the snapshot does not hold
    this file as its bytes are now (then read the YAML). Shipped files are never empty, so None is free."""
    entry = _entries(directory).get(path)
    if entry is None:
        return None
    try:
        raw = path.read_bytes()
    except OSError:
        return None  # the YAML reader reports it in its own words
    return json.loads(entry[1]) if _digest(raw) == entry[0] else None
