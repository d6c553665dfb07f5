"""``json.dumps(document, indent=2)``, byte for byte, in time linear in a large table's rows.

With ``indent`` the standard library encodes in pure Python (the C encoder serves compact output only):
100k ranked layouts of 14 keys take about a second. :func:`dumps_indented` finds the lists of flat
records (dicts whose values are all str, int, float, bool or None) in the document, encodes each with
the C encoder using a NUL item separator and re-indents that text with two ``str.replace`` passes; the
rest of the document goes through ``json.dumps(indent=2)`` around a placeholder. A
:class:`~commmodel.io.json_columns.ColumnTable` (records held as columns) is written from its columns
without building the records. ensure_ascii escapes
every control character inside strings, so a raw NUL in the encoder's output can only be a separator,
and one right after ``}`` (no flat value ends in ``}``) can only end a record.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from commmodel.io.json_columns import ColumnTable

COLUMN_TABLE_MODULE = "commmodel.io.json_columns"
"""Where :class:`ColumnTable` lives: imported only by the commands that build one (plan), not by every document."""


def column_table_type() -> type | None:
    """:class:`ColumnTable`, or None while its module is not loaded: then no value can be one (a table is built
    only after its module is imported), so a document without one does not pay for the import (issue 17:
    ~0.6 ms of a query or collective)."""
    module = sys.modules.get(COLUMN_TABLE_MODULE)
    return None if module is None else module.ColumnTable

FAST_MIN_ROWS = 64
"""Lists of records shorter than this go through ``json.dumps`` unchanged (nothing to gain)."""

_SEP = "\x00"
_COMPACT = json.JSONEncoder(separators=(_SEP, ": "), allow_nan=False)
_NESTED = (": {", ": [", "{}")
"""Text that a nested container value or an empty record leaves in the compact encoding (a string holding
it only sends the table down the general path)."""


def is_record_table(value: Any) -> bool:
    """Whether ``value`` may take the fast path: a list of at least :data:`FAST_MIN_ROWS` dicts whose keys
    are all str (values are checked while encoding)."""
    if type(value) is not list or len(value) < FAST_MIN_ROWS or not all(type(row) is dict for row in value):
        return False
    return all(type(key) is str for key in set().union(*value))


def _indented_records(rows: list[dict[str, Any]], level: int) -> str | None:
    """``json.dumps(rows, indent=2)`` text of flat records at nesting ``level``; None when the rows are not
    flat records of JSON scalars with finite floats (the caller's general path handles them)."""
    try:
        compact = _COMPACT.encode(rows)
    except (ValueError, TypeError):
        return None
    if any(mark in compact for mark in _NESTED):
        return None
    outer, row_pad, item_pad = "  " * level, "  " * (level + 1), "  " * (level + 2)
    body = compact[2:-2].replace("}" + _SEP + "{", f"\n{row_pad}}},\n{row_pad}{{\n{item_pad}")
    body = body.replace(_SEP, f",\n{item_pad}")
    return f"[\n{row_pad}{{\n{item_pad}{body}\n{row_pad}}}\n{outer}]"


def _column_text(table: ColumnTable, level: int, clean: Callable[[Any], Any] | None) -> list[str]:
    """A column table's text at nesting ``level`` as pieces (after ``clean``, which may turn it into any value)."""
    from commmodel.io.json_columns import ColumnTable, table_pieces  # loaded: ``table`` is one

    cleaned = clean(table) if clean else table
    if type(cleaned) is ColumnTable:
        return table_pieces(cleaned, level)
    return [_reindent(json.dumps(cleaned, indent=2), level)]


def _reindent(text: str, level: int) -> str:
    """``text`` with every line but the first indented ``level`` more."""
    lines = text.split("\n")
    return "\n".join([lines[0], *("  " * level + line for line in lines[1:])])


def dumps_indented(document: Any, clean: Callable[[Any], Any] | None = None) -> str:
    """Exactly ``json.dumps(document, indent=2)`` (default ensure_ascii, allow_nan), or with ``clean``
    exactly ``json.dumps(clean(document), indent=2)`` for a ``clean`` that maps values one by one and
    leaves record tables whose values are JSON scalars with finite floats as they are (it is applied
    to the other tables here). A :class:`ColumnTable` stands for its ``records()``; ``clean`` is called once
    on it and returns a ColumnTable (e.g. :meth:`ColumnTable.json_safe`) or any value to write."""
    tables: dict[str, Any] = {}
    column_table = column_table_type()

    def swap(value: Any) -> Any:
        if is_record_table(value) or (column_table is not None and type(value) is column_table):
            token = f"\x01commmodel-table-{len(tables)}\x01"
            tables[token] = value
            return token
        if type(value) is dict:
            return {k: swap(v) for k, v in value.items()}
        if type(value) in (list, tuple):  # json writes a tuple as a list
            return [swap(v) for v in value]
        return value

    swapped = swap(document)
    text = json.dumps(clean(swapped) if clean else swapped, indent=2)
    parts: list[str] = []
    done = 0
    for token, rows in tables.items():  # json.dumps wrote the tokens in insertion order
        quoted = json.dumps(token)
        at = text.index(quoted, done)
        line_start = text.rfind("\n", 0, at) + 1
        level = (at - line_start - len(text[line_start:at].lstrip(" "))) // 2
        parts.append(text[done:at])
        if column_table is not None and type(rows) is column_table:
            parts += _column_text(rows, level, clean)
        else:
            table = _indented_records(rows, level)
            parts.append(table if table is not None else
                         _reindent(json.dumps([clean(row) for row in rows] if clean else rows, indent=2), level))
        done = at + len(quoted)
    parts.append(text[done:])
    return "".join(parts)


__all__ = ["FAST_MIN_ROWS", "column_table_type", "dumps_indented", "is_record_table"]
