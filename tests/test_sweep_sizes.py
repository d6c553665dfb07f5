"""One sweep rule (commmodel/sweep_sizes.py) for ``sweep``, ``plot collective`` and ``calibrate run``: nccl-tests'
``-b MIN -e MAX -f FACTOR`` sizes, MAX kept where it lies on the grid, and one bound on how many."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from commmodel.errors import CalibrationError, CommModelError
from commmodel.limits import MAX_SWEEP_POINTS
from commmodel.sweep_sizes import sweep_count, sweep_sizes_bytes, whole_sweep_sizes_bytes


def test_the_nccl_tests_grid_keeps_both_ends():
    assert sweep_sizes_bytes(1024, 2**30, 2).tolist() == [2.0**k for k in range(10, 31)]  # 21 sizes, 1 GiB kept
    assert whole_sweep_sizes_bytes(8, 64, 2) == [8, 16, 32, 64]
    assert whole_sweep_sizes_bytes(1000, 10_000, 3.5) == [1000, 3500]  # 12,250 > 10,000
    assert whole_sweep_sizes_bytes(1, 3, 1.2) == [1, 2, 3]  # 1.2, 1.44 round onto 1; 1.728, 2.07 onto 2
    assert sweep_count(1e9, 1e9, 2) == 1


@given(st.floats(1.0, 1e12), st.floats(1.0, 1e6), st.floats(1.05, 16.0))
def test_every_size_lies_in_range_and_the_next_would_not(min_bytes: float, span: float, factor: float):
    sizes = sweep_sizes_bytes(min_bytes, min_bytes * span, factor)
    assert sizes[0] == min_bytes and np.all(np.diff(sizes) > 0)
    assert sizes[-1] <= min_bytes * span * (1 + 1e-8) < sizes[-1] * factor * (1 - 1e-12)


@pytest.mark.parametrize("low, high, factor", [(0, 8, 2), (64, 8, 2), (8, 64, 1.0), (8, 64, math.inf),
                                               (8, 64, float("nan"))])
def test_an_empty_range_is_one_line_in_the_callers_error_class(low, high, factor):
    with pytest.raises(CalibrationError, match="is empty; need 0 < min ≤ max"):
        sweep_count(low, high, factor, CalibrationError)


def test_too_many_sizes_are_refused_before_any_is_listed():
    with pytest.raises(CommModelError, match="use a larger factor"):
        sweep_sizes_bytes(8, 1e18, 1.0000000001)
    assert sweep_count(1, 1.01 ** (MAX_SWEEP_POINTS - 1), 1.01) == MAX_SWEEP_POINTS
