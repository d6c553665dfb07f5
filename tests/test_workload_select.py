"""workload.select.select gives np.select's answer (it replaces np.select in the step model's hot path)."""

from __future__ import annotations

import numpy as np

from commmodel.workload.select import select


def test_select_equals_numpy_select():
    rng = np.random.default_rng(3)
    for size in (1, 2, 17, 1000):
        codes = rng.integers(0, 5, size)
        choices = [rng.random(size), 2.5, rng.random(size) * 1e9, np.full(size, -1.0)]
        conditions = [codes == 4, codes == 3, (codes == 2) | (codes == 4), codes == 1]
        for default in (0.0, rng.random(size)):
            expected = np.select(conditions, choices, default)
            got = select(conditions, choices, default)
            assert got.dtype == expected.dtype and np.array_equal(got, expected)
