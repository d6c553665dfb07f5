"""The column-wise float formatter writes exactly ``repr(float)`` (what json.dumps writes), value by value."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from commmodel.io.float_text import float_reprs


def _reprs(values: np.ndarray) -> list[str]:
    return [repr(v) for v in values.tolist()]


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.float64, st.integers(0, 40), elements=st.floats(allow_nan=True, allow_infinity=True)))
def test_any_float_column_is_written_as_repr_writes_it(values):
    assert float_reprs(values) == _reprs(values)


@settings(max_examples=100, deadline=None)
@given(digits=st.integers(1, 10**17 - 1), exp10=st.integers(-8, 18), negative=st.booleans())
def test_decimal_literals_and_their_neighbours_read_back_as_repr(digits, exp10, negative):
    """Short decimals (0.3, 1524.99...), exact ties and the doubles next to them: the hard cases of shortest digits."""
    value = float(f"{'-' if negative else ''}{digits}e{exp10 - 16}")
    values = np.array([value, np.nextafter(value, np.inf), np.nextafter(value, -np.inf), value * 3, value / 7])
    assert float_reprs(values) == _reprs(values)


def test_a_million_random_doubles_of_every_kind():
    rng = np.random.default_rng(17)
    columns = [
        rng.integers(0, 2**64, 200_000, dtype=np.uint64).view(np.float64),  # every bit pattern
        rng.lognormal(0, 10, 200_000) * rng.choice([-1, 1], 200_000),  # computed values over 10^±20
        np.round(rng.uniform(0, 1e4, 200_000), rng.integers(0, 9)),  # short decimals
        rng.integers(-10**16, 10**16, 200_000).astype(float),  # integers, some above 2^53
        np.arange(200_000) * 0.1,
        np.array([10.0**k for k in range(-10, 25)] + [2.0**k for k in range(-30, 60)]
                 + [9.999999999999999e15, 1e16 - 2, 9.9999e-5, 0.30000000000000004, 5e-324, 1.7976931348623157e308]),
    ]
    for values in columns:
        assert float_reprs(values) == _reprs(values)
    assert json.loads("[" + ", ".join(float_reprs(columns[1])) + "]") == columns[1].tolist()
