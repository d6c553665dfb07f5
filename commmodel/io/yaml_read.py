"""Reading user files with one-line errors: the safe YAML reader and the raw-bytes reader.

Every reader takes the :class:`~commmodel.errors.CommModelError` subclass to raise (ProfileError for
profiles, WorkloadError for model files, CalibrationError for measurements) and a hint that says what to
give instead, so each error names the file, what was wrong and the fix. YAML is parsed with a safe
loader only (libyaml's ``CSafeLoader`` when PyYAML was built with it, ~10× faster; never ``yaml.Loader``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from commmodel.errors import CommModelError

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it; the pure-Python safe loader otherwise."""


def read_user_bytes(path: Path, error: type[CommModelError], give: str) -> bytes:
    """The bytes of ``path``; a missing or unreadable file is ``error("PATH: no such file; GIVE")``."""
    try:
        return Path(path).read_bytes()
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
    raw = read_user_bytes(path, error, give)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: cannot read (not UTF-8 text); {give}") from None
    try:
        return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader, never yaml.Loader
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise error(f"{path}:{where}: malformed YAML ({problem}); fix the syntax") from None
