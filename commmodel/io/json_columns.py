"""A table of flat JSON records held as columns, written as ``json.dumps(records, indent=2)`` text without
building the records (issue 17: ``plan --json`` for 100k ranked layouts in ≤ 0.2 s).

Building 100k dicts of 16 keys and encoding them costs about a second, most of it per value. A
:class:`ColumnTable` keeps each column as one numpy array and writes no Python object per cell: a float
column's text comes from :func:`commmodel.io.float_text.repr_matrix` (``float.__repr__``, what :mod:`json`
writes for a float) as rows of ASCII in a uint8 matrix, a mostly distinct integer column from
:func:`~commmodel.io.float_text.int_matrix`, an integer, bool or decoded column (``decoders``: e.g. a
recompute code to its name) formats each distinct value once and gathers rows. The records are laid out
block by block in one character matrix (the fixed key text written once per block), its NUL padding
dropped and the bytes decoded. :func:`commmodel.io.json_text.dumps_indented` writes a table found
anywhere in a document this way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np




@dataclass(frozen=True, eq=False)  # holds arrays: a generated == or hash could not compare them
class ColumnTable:
    """``len`` records with one key per column, in column order; value ``i`` of key ``k`` is element ``i`` of
    ``columns[k]`` as ``.tolist()`` gives it, or ``decoders[k]`` of it."""

    columns: Mapping[str, Any]
    """Key -> a 1-D numpy array (bool, integer or float; other dtypes and sequences go value by value)."""
    decoders: Mapping[str, Callable[[np.ndarray], list[Any]]] = field(default_factory=dict)
    """Key -> a function from an array of that column's distinct values to their JSON scalars (str, int,
    bool, float or None), applied once per distinct value."""
    null_nonfinite: bool = False
    """Write NaN and infinities as null (the CLI's JSON-safe rule) rather than as ``json.dumps`` does."""

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def json_safe(self) -> ColumnTable:
        """The same table with non-finite floats written as null."""
        return replace(self, null_nonfinite=True)

    def records(self) -> list[dict[str, Any]]:
        """The records as dicts (the slow path the text stands for; tests compare the two)."""
        values = {}
        for key, column in self.columns.items():
            items = column.tolist() if isinstance(column, np.ndarray) else list(column)
            if key in self.decoders:
                items = self.decoders[key](np.asarray(column))
            if self.null_nonfinite:
                items = [None if isinstance(v, float) and not math.isfinite(v) else v for v in items]
            values[key] = items
        return [dict(zip(values, row)) for row in zip(*values.values())]


def _scalar_text(value: Any, null_nonfinite: bool) -> str:
    if null_nonfinite and isinstance(value, float) and not math.isfinite(value):
        return "null"
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    return json.dumps(value)


def _text_chars(texts: list[str]) -> np.ndarray:
    """JSON texts (ASCII: json escapes the rest) as NUL-padded rows of a uint8 matrix."""
    encoded = [text.encode("ascii") for text in texts]
    width = max(map(len, encoded))
    return np.array(encoded, dtype=f"S{width}").view(np.uint8).reshape(len(encoded), width)


def _trimmed(chars: np.ndarray) -> np.ndarray:
    """``chars`` without the leading and trailing columns that are NUL in every row."""
    used = np.flatnonzero(chars.any(axis=0))
    return chars[:, used[0]:used[-1] + 1]


def _float_chars(column: np.ndarray, null_nonfinite: bool) -> np.ndarray:
    from commmodel.io.float_text import put_rows, repr_matrix  # only where a float column is written

    words = ["null"] * 3 if null_nonfinite else ["NaN", "Infinity", "-Infinity"]  # json.dumps's words
    chars, rest = repr_matrix(column, *words)
    put_rows(chars, rest, list(map(float.__repr__, column[rest].tolist())))
    return _trimmed(chars)


def _int_chars(column: np.ndarray) -> np.ndarray:
    from commmodel.io.float_text import int_matrix

    chars = int_matrix(column)
    return _text_chars(list(map(int.__repr__, column.tolist()))) if chars is None else _trimmed(chars)


def distinct_values(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct values, index of each value among them)``; by counting for compact integer ranges."""
    if column.dtype.kind in "iu" and column.size:
        low, high = int(column.min()), int(column.max())
        if high - low <= 4 * column.size + 1024 and high < 2**63:
            offsets = (column.astype(np.int64) - low).astype(np.intp)
            present = np.flatnonzero(np.bincount(offsets, minlength=high - low + 1))
            lookup = np.zeros(high - low + 1, np.intp)
            lookup[present] = np.arange(present.size)
            return (present + low).astype(column.dtype), lookup[offsets]
    distinct, inverse = np.unique(column, return_inverse=True)
    return distinct, inverse.reshape(-1)


def _cell_chars(table: ColumnTable, key: str) -> np.ndarray:
    """The JSON text of every value of column ``key`` as rows of ASCII in a uint8 matrix, NUL where a row is
    shorter than the widest (NULs anywhere in a row are dropped when the rows are written)."""
    column = table.columns[key]
    decode = table.decoders.get(key)
    if isinstance(column, np.ndarray) and column.ndim == 1 and column.dtype.kind in "biuf":
        if decode is None and column.dtype.kind == "f":
            return _float_chars(column, table.null_nonfinite)
        distinct, inverse = distinct_values(column)
        if decode is not None:
            texts = [_scalar_text(v, table.null_nonfinite) for v in decode(distinct)]
        elif column.dtype.kind == "b":
            texts = ["true" if v else "false" for v in distinct.tolist()]
        elif distinct.size > column.size // 4:  # mostly distinct ints: nothing to share
            return _int_chars(column)
        else:
            texts = list(map(int.__repr__, distinct.tolist()))  # what json writes for an int
        return _text_chars(texts)[inverse]
    values = decode(np.asarray(column)) if decode is not None else column
    return _text_chars([_scalar_text(v, table.null_nonfinite) for v in values])


BLOCK_ROWS = 4096
"""Records laid out per block of the character matrix (about 2 MB for plan's 16 keys): compressing out
the NULs of a block that stays in cache is ~3× faster per byte than of the whole 100k-row matrix."""


def _records_text(cells: list[np.ndarray], openings: list[str]) -> list[str]:
    """Record after record, each the ``openings[k]`` + the row of ``cells[k]`` of every key k, as text pieces.

    The records are laid out in a block of rows of one uint8 matrix (the fixed key text is written into the
    block once), then every NUL is dropped and the bytes decoded: no Python object per cell."""
    count = len(cells[0])
    widths = [len(opening) + cell.shape[1] for opening, cell in zip(openings, cells)]
    block = np.zeros((min(BLOCK_ROWS, count), sum(widths)), np.uint8)
    spans, at = [], 0
    for opening, cell in zip(openings, cells):
        block[:, at:at + len(opening)] = np.frombuffer(opening.encode("ascii"), np.uint8)
        spans.append(slice(at + len(opening), at + len(opening) + cell.shape[1]))
        at += len(opening) + cell.shape[1]
    pieces = []
    for start in range(0, count, BLOCK_ROWS):
        rows = block[:min(BLOCK_ROWS, count - start)]
        for span, cell in zip(spans, cells):
            rows[:, span] = cell[start:start + len(rows)]
        pieces.append(str(rows[rows != 0], "ascii"))
    return pieces


SMALL_TABLE_ROWS = 64
"""Up to this many records a table is written from :meth:`ColumnTable.records` by :mod:`json` (~20 µs a
record of 16 keys): the column path's fixed cost, a few numpy passes per column, is ~2 ms even for the 10
rows ``plan --json`` shows (issue 17), so it pays only for larger tables."""


def table_pieces(table: ColumnTable, level: int = 0) -> list[str]:
    """:func:`table_text` as pieces to join (a caller splicing the table into a document joins once)."""
    count, keys = len(table), list(table.columns)
    if count == 0:
        return ["[]"]
    outer, row_pad, item_pad = "  " * level, "  " * (level + 1), "  " * (level + 2)
    if count <= SMALL_TABLE_ROWS:
        try:
            return [json.dumps(table.records(), indent=2).replace("\n", "\n" + outer)]
        except TypeError:  # a numpy integer in a column given as a sequence: the column path writes it
            pass
    if not keys:
        return [f"[\n{row_pad}" + f",\n{row_pad}".join(["{}"] * count) + f"\n{outer}]"]
    between = f"\n{row_pad}}},\n{row_pad}{{\n{item_pad}"  # "}," closing a record, "{" opening the next
    openings = [(between if position == 0 else f",\n{item_pad}") + json.dumps(key) + ": "
                for position, key in enumerate(keys)]
    pieces = _records_text([_cell_chars(table, key) for key in keys], openings)
    pieces[0] = f"[\n{row_pad}{{\n{item_pad}" + pieces[0][len(between):]  # the first record opens the list
    pieces.append(f"\n{row_pad}}}\n{outer}]")
    return pieces


def table_text(table: ColumnTable, level: int = 0) -> str:
    """``json.dumps(table.records(), indent=2)`` for a table whose first line sits at nesting ``level``
    (continuation lines carry ``level`` more indentation)."""
    return "".join(table_pieces(table, level))


__all__ = ["ColumnTable", "distinct_values", "table_pieces", "table_text"]
