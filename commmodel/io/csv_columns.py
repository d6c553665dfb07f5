"""A column table as pandas' ``DataFrame.to_csv()`` writes it (issue 17: ``plan --csv`` of 100k layouts).

``plan --csv`` printed ``frame.to_csv()`` of a 70-column frame: ~6 s for 100k rows. The same bytes come from
the columns here: floats by :func:`commmodel.io.float_text.repr_matrix` (pandas writes a float64 as its
shortest repr, NaN as the empty string, infinities as ``inf``/``-inf``), ints and codes once per
distinct value, bools as ``True``/``False``, strings with the csv module's minimal quoting; the rows are
interleaved with list slice assignment and joined once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commmodel.io.float_text import put_rows, repr_matrix, text_rows
from commmodel.io.json_columns import ColumnTable, distinct_values

_SPECIAL = (",", '"', "\n", "\r")
"""Characters that make the csv module (QUOTE_MINIMAL) quote a field."""


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if any(mark in text for mark in _SPECIAL) else text


def _field(value: Any) -> str:
    """One non-float value as pandas writes it (str of the value, minimal quoting)."""
    return _quoted(str(value))


def _float_fields(column: np.ndarray) -> list[str]:
    chars, rest = repr_matrix(column, nan="")
    put_rows(chars, rest, list(map(float.__repr__, column[rest].tolist())))
    return text_rows(chars)


def _fields(table: ColumnTable, key: str) -> list[str]:
    column = table.columns[key]
    decode = table.decoders.get(key)
    if isinstance(column, np.ndarray) and column.ndim == 1 and column.dtype.kind in "biuf":
        if decode is None and column.dtype.kind == "f":
            return _float_fields(column)
        distinct, inverse = distinct_values(column)
        values = decode(distinct) if decode is not None else distinct.tolist()
        return np.array([_field(v) for v in values], dtype=object)[inverse].tolist()
    values = decode(np.asarray(column)) if decode is not None else column
    return [_field(v) for v in values]


def csv_text(table: ColumnTable) -> str:
    """``pandas.DataFrame(table.columns).set_index(first column).to_csv()`` (decoders applied), byte for byte."""
    keys, count = list(table.columns), len(table)
    header = ",".join(_quoted(key) for key in keys) + "\n"
    if not keys or count == 0:
        return header
    stride = 2 * len(keys)
    pieces: list[str] = [","] * (stride * count)
    pieces[stride - 1::stride] = ["\n"] * count
    for position, key in enumerate(keys):
        pieces[2 * position::stride] = _fields(table, key)
    return header + "".join(pieces)


__all__ = ["csv_text"]
