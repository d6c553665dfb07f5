"""One-line error messages for hardware profiles: ``FILE: field.path: problem (got X); fix``.

Pydantic reports every problem of a document at once; :func:`describe_validation_error` folds
them into one line (the CLI prints one line per error) and adds a fix for the common error
types. :func:`did_you_mean` suggests the closest known names for a misspelt one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

_SCHEMA_HINT = "see `commmodel profiles schema`"

# pydantic error type -> the fix we print after the problem
_FIXES: dict[str, str] = {
    "missing": f"add it ({_SCHEMA_HINT})",
    "int_parsing": "write a whole number, e.g. 8",
    "int_type": "write a whole number, e.g. 8",
    "int_from_float": "write a whole number, e.g. 8",
    "float_parsing": "write a number, e.g. 0.9",
    "float_type": "write a number, e.g. 0.9",
    "string_type": "write text in quotes",
    "bool_type": "write true or false",
    "dict_type": "write a mapping (key: value lines)",
    "model_type": "write a mapping (key: value lines)",
    "list_type": "write a list (- item lines)",
    "greater_than_equal": "raise it to the minimum",
    "greater_than": "raise it above the minimum",
    "less_than_equal": "lower it to the maximum",
    "literal_error": "use one of the listed values",
    "enum": "use one of the listed values",
}


def did_you_mean(name: str, known: Iterable[str], limit: int = 3) -> str:
    """`` (did you mean a, b?)`` for the closest names in ``known``, or ``""`` when nothing is close."""
    candidates = list(known)
    close = difflib.get_close_matches(str(name).lower(), candidates, n=limit, cutoff=0.6)
    if not close:
        needle = str(name).lower().replace("_", "-")
        close = [c for c in candidates if needle and (needle in c or c in needle)][:limit]
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _field_names(model: Any, loc: tuple) -> list[str]:
    """Field names a model accepts at ``loc`` (for spelling suggestions), best effort."""
    fields = getattr(model, "model_fields", None)
    for part in loc[:-1]:
        if not fields or not isinstance(part, str) or part not in fields:
            return []
        annotation = fields[part].annotation
        inner = [a for a in getattr(annotation, "__args__", (annotation,)) if hasattr(a, "model_fields")]
        fields = inner[0].model_fields if inner else None
    return sorted(fields) if fields else []


MAX_ERRORS_DESCRIBED = 10
"""Problems one error line describes; the rest are counted (a file of 20,000 unknown keys made a 1.9 MB line)."""


SHOWN_KEY_CHARS = 48
"""Longest key or value an error line quotes whole: a file that is no profile (``-s /etc/passwd``) has whole lines
for keys, and the line should name the problem, not print the file."""


def _short(text: str) -> str:
    """``text`` whole up to :data:`SHOWN_KEY_CHARS`, else its start and its length."""
    return text if len(text) <= SHOWN_KEY_CHARS else f"{text[:SHOWN_KEY_CHARS - 8]}…({len(text)} characters)"


def describe_validation_error(err: ValidationError, where: str, model: Any = None) -> str:
    """Every pydantic error as ``field.path: problem (got X); fix`` joined into one line after ``where: ``.

    ``model`` (the pydantic class validated) lets an unknown key suggest the field it resembles.
    """
    parts = []
    errors = err.errors()
    for item in errors[:MAX_ERRORS_DESCRIBED]:
        loc = tuple(item["loc"])
        path = _short(".".join(str(p) for p in loc))  # a whole line of a file that is no profile, read as a key
        kind = item["type"]
        msg = item["msg"].removeprefix("Value error, ")
        got = item.get("input")
        shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {_short(repr(got))})"
        fix = _FIXES.get(kind, "")
        ctx = item.get("ctx") or {}
        for key, word in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if key in ctx:
                fix = f"use a value {word} {ctx[key]}"
        if isinstance(got, float) and got != got:  # NaN passes no bound, and pydantic names only the first one
            msg, fix = "must be a number", "NaN is not one"
        elif kind == "extra_forbidden":
            msg = "unknown key"
            known = _field_names(model, loc) if model is not None else []
            hint = did_you_mean(str(loc[-1]), known) if known else ""
            fix = f"remove it or fix its spelling{hint}; {_SCHEMA_HINT}"
        elif kind == "missing":
            msg = "required field is missing"
            if loc and loc[-1] == "source":
                fix = 'every number needs a source: add source: "<spec sheet, paper or issue>"'
        elif kind == "string_too_short" and loc and loc[-1] == "source":
            fix = "say where the number comes from (spec sheet, paper, issue, or calibrated: FILE, DATE)"
        elif kind == "value_error":
            # Our own validators already say what to do; units errors list the accepted forms.
            fix = ""
        # Our validators name the full field path themselves ("scale_up.efficiency = 1.2 ...").
        prefix = f"{path}: " if path and not msg.startswith(f"{path}.") else ""
        text = f"{prefix}{msg}{shown}"
        parts.append(f"{text}; {fix}" if fix else text)
    more = f"; and {len(errors) - MAX_ERRORS_DESCRIBED:,} more problems" if len(errors) > MAX_ERRORS_DESCRIBED else ""
    return f"{where}: " + "; ".join(parts) + more


class ReadableInit:
    """Mixin for the pydantic input models a notebook builds by hand (``Layout``, ``StepOptions``, ``SearchSpace``):
    bad values raise the class's :class:`~commmodel.errors.CommModelError` (``_error_class``) with every problem on
    one line (:func:`describe_validation_error`), not pydantic's multi-line report. ``model_validate`` and
    ``model_copy`` are pydantic's own."""

    _error_class: Any = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)  # type: ignore[call-arg]
        except ValidationError as err:
            from commmodel.errors import CommModelError

            raise (self._error_class or CommModelError)(
                describe_validation_error(err, type(self).__name__, type(self))) from None
