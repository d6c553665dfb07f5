"""Evaluate a per-layout function once per distinct key, then spread the answers back.

Most terms of the step model depend on a few layout fields (compute on micro-batch, tp, pp, recompute
and SP; the TP collectives on the same; DP traffic on tp, pp, dp, ZeRO and micro-batch count). A
planner's million layouts hold only hundreds of distinct combinations of those fields, so pricing
each combination once and gathering with an inverse index is exact and much faster than pricing
every layout. Keys are small non-negative integers; they are packed into one int64 by mixed radix
and made unique in O(n) with a presence table (a sort only when the packed range is huge).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

_TABLE_LIMIT = 1 << 24


class Coded(NamedTuple):
    """A key column already mapped to dense codes 0..radix−1 (see :func:`coded`), reusable across groupings."""

    codes: np.ndarray
    """Dense code of each row."""
    radix: int
    """Number of distinct values."""


def coded(values: np.ndarray) -> Coded:
    """Dense codes of an integer (or integral float / bool) column, computed once and reused as a key."""
    codes, radix = _dense_codes(np.asarray(values).astype(np.int64).reshape(-1))
    return Coded(codes, radix)


def _dense_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Map integer values to 0..k−1 (k distinct values) in O(n) when their range is small."""
    low, high = int(values.min()), int(values.max())
    if high - low < _TABLE_LIMIT:
        present = np.zeros(high - low + 1, dtype=bool)
        present[values - low] = True
        slot = np.cumsum(present) - 1
        return slot[values - low], int(slot[-1]) + 1
    uniq, inverse = np.unique(values, return_inverse=True)
    return inverse.reshape(-1), int(uniq.size)


def unique_inverse(*fields: np.ndarray | Coded) -> tuple[np.ndarray, np.ndarray]:
    """(index of one representative per distinct key, inverse index) for integer key columns."""
    size = int(np.size(fields[0].codes if isinstance(fields[0], Coded) else fields[0]))
    if size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    key = np.zeros(size, dtype=np.int64)
    span = 1
    for field in fields:
        codes, radix = field if isinstance(field, Coded) else coded(field)
        key = key * radix + codes
        span *= radix
    if span <= _TABLE_LIMIT:
        codes, count = _dense_codes(key)
        first = np.empty(count, dtype=np.int64)
        first[codes] = np.arange(size)  # any row of a group represents it: they are equal
        return first, codes
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def grouped(fn: Callable[..., Any], keys: tuple[np.ndarray, ...], args: tuple[np.ndarray, ...]) -> Any:
    """``fn(*args)`` evaluated on one representative per distinct ``keys`` row and spread back.

    ``fn`` returns an array, a tuple of arrays or a frozen dataclass of arrays (all per input row);
    the answer has the same structure with full-length arrays.
    """
    first, inverse = unique_inverse(*keys)
    result = fn(*(np.asarray(a)[first] for a in args))
    return spread(result, inverse)


def spread(result: Any, inverse: np.ndarray) -> Any:
    """Each array of ``result`` (array, tuple or frozen dataclass of arrays) indexed by ``inverse``."""
    if isinstance(result, np.ndarray):
        return result[inverse]
    if isinstance(result, tuple):
        return tuple(spread(r, inverse) for r in result)
    if hasattr(result, "__dataclass_fields__"):
        return type(result)(**{name: spread(getattr(result, name), inverse) for name in result.__dataclass_fields__})
    raise TypeError(f"cannot spread a {type(result).__name__}")
