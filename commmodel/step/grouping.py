"""Evaluate a per-layout function once per distinct key, then spread the answers back.

Most terms of the step model depend on a few layout fields (compute on micro-batch, tp, pp, recompute
and SP; the TP collectives on the same; DP traffic on tp, pp, dp, ZeRO and micro-batch count). A
planner's million layouts hold only hundreds of distinct combinations of those fields, so pricing
each combination once and gathering with an inverse index is exact and much faster than pricing
every layout. Keys are small non-negative integers; they are packed into one int64 by mixed radix
and made unique in O(n) with a presence table (a sort only when the packed range is huge).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

_TABLE_MIN = 1 << 16
"""Value ranges up to this many slots always use the presence table (64 KiB of flags)."""
_TABLE_PER_ROW = 8
"""Beyond :data:`_TABLE_MIN`, the presence table is used only while it has at most this many slots per row,
so that its memory (a flag and an int64 per slot) stays proportional to the rows, never to the values
(a dp column of a 2^26-GPU search spans 2^26 values in a few thousand rows)."""


def _table_fits(span: int, size: int) -> bool:
    """Whether a presence table of ``span`` slots is cheap for ``size`` rows."""
    return span <= max(_TABLE_MIN, _TABLE_PER_ROW * size)


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a 1-d array (``np.unique`` without its first-call import of ``numpy.ma``)."""
    ordered = np.sort(np.asarray(values).reshape(-1))
    if ordered.size == 0:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def _sorted_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(dense code of each row, index of one row per code, number of codes) by a stable sort."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    codes = np.empty(values.size, dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    return codes, order[new], int(new.sum())


class Coded(NamedTuple):
    """A key column already mapped to dense codes 0..radix−1 (see :func:`coded`), reusable across groupings."""

    codes: np.ndarray
    """Dense code of each row."""
    radix: int
    """Number of distinct values."""


def coded(values: np.ndarray) -> Coded:
    """Dense codes of an integer (or integral float / bool) column, computed once and reused as a key."""
    flat = np.asarray(values).reshape(-1)
    if flat.size == 1:  # one layout (estimate): nothing to group
        return Coded(np.zeros(1, dtype=np.int64), 1)
    codes, radix = _dense_codes(flat.astype(np.int64))
    return Coded(codes, radix)


def _dense_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Map integer values to 0..k−1 (k distinct values) in O(n) when their range is small."""
    if values.size == 0:
        return values.astype(np.int64), 0
    low, high = int(values.min()), int(values.max())
    if _table_fits(high - low + 1, values.size):
        present = np.zeros(high - low + 1, dtype=bool)
        present[values - low] = True
        slot = np.cumsum(present) - 1
        return slot[values - low], int(slot[-1]) + 1
    codes, _, count = _sorted_codes(values)
    return codes, count


def unique_inverse(*fields: np.ndarray | Coded) -> tuple[np.ndarray, np.ndarray]:
    """(index of one representative per distinct key, inverse index) for integer key columns."""
    size = int(np.size(fields[0].codes if isinstance(fields[0], Coded) else fields[0]))
    if size <= 1:
        return np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
    key = np.zeros(size, dtype=np.int64)
    span = 1
    for field in fields:
        codes, radix = field if isinstance(field, Coded) else coded(field)
        key = key * radix + codes
        span *= radix
    if _table_fits(span, size):
        codes, count = _dense_codes(key)
        first = np.empty(count, dtype=np.int64)
        first[codes] = np.arange(size)  # any row of a group represents it: they are equal
        return first, codes
    codes, first, _ = _sorted_codes(key)
    return first, codes


def grouped(fn: Callable[..., Any], keys: tuple[np.ndarray, ...], args: tuple[np.ndarray, ...]) -> Any:
    """``fn(*args)`` evaluated on one representative per distinct ``keys`` row and spread back.

    ``fn`` returns an array, a tuple (or NamedTuple) of arrays or a frozen dataclass of arrays (all per input row);
    the answer has the same structure with full-length arrays. One row (a single-layout estimate) is its
    own representative: ``fn`` runs on it directly.
    """
    if all(np.size(a) <= 1 for a in args):
        return fn(*args)
    first, inverse = unique_inverse(*keys)
    result = fn(*(np.asarray(a).take(first, axis=0) for a in args))
    return spread(result, inverse)


def spread(result: Any, inverse: np.ndarray) -> Any:
    """Each array of ``result`` (array, tuple, NamedTuple or frozen dataclass of arrays) indexed by ``inverse``."""
    if isinstance(result, np.ndarray):
        return result.take(inverse, axis=0)  # = result[inverse]; take's gather is the faster path
    if isinstance(result, tuple):  # a NamedTuple of arrays keeps its type
        items = [spread(r, inverse) for r in result]
        return result._make(items) if hasattr(result, "_make") else tuple(items)
    if hasattr(result, "__dataclass_fields__"):
        return type(result)(**{name: spread(getattr(result, name), inverse) for name in result.__dataclass_fields__})
    raise TypeError(f"cannot spread a {type(result).__name__}")
