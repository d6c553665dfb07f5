"""Grouped evaluation equals row-by-row evaluation (the planner's fast path is exact)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.step.grouping import coded, grouped, unique_inverse


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-3, 3), st.integers(0, 10**9)), min_size=1, max_size=200))
def test_unique_inverse_matches_numpy(rows) -> None:
    cols = [np.array(c) for c in zip(*rows)]
    first, inverse = unique_inverse(*cols)
    keys = np.stack(cols, axis=1)
    assert np.array_equal(keys[first][inverse], keys)  # every row maps to a representative equal to it
    assert len(first) == len(np.unique(keys, axis=0))
    again_first, again_inverse = unique_inverse(*(coded(c) for c in cols))
    assert np.array_equal(keys[again_first][again_inverse], keys)


def test_grouped_spreads_tuples_and_arrays() -> None:
    a = np.array([1, 2, 1, 3, 2, 1])
    b = np.array([0.5, 1.5, 0.5, 2.5, 1.5, 0.5])
    calls = []

    def fn(x, y):
        calls.append(len(x))
        return x * 10.0, y + x

    out = grouped(fn, (a,), (a, b))
    assert calls == [3]
    assert np.array_equal(out[0], a * 10.0) and np.array_equal(out[1], b + a)
