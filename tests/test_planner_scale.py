"""Search memory does not grow with the GPU count, and plan rows are built once (issue 17; not timed)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from commmodel.io.profiles import load_system
from commmodel.limits import MAX_GPUS
from commmodel.planner import search as search_module
from commmodel.planner.search import LAYOUT_RECORD_KEYS, plan
from commmodel.step.grouping import distinct, unique_inverse
from commmodel.workload.presets import get_model


def test_search_at_the_gpu_cap_allocates_nothing_sized_by_the_gpu_count():
    """At 2^24 GPUs the dp column spans ~2^24 values in a few thousand rows: no table of 2^24 slots
    (128 MiB as int64) may appear; the peak stays far below it (measured: ~4 MB)."""
    model, system = get_model("gpt3-175b"), load_system("dgx-a100")
    plan(model, system, 1024)
    tracemalloc.start()
    try:
        result = plan(model, system, MAX_GPUS)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.num_evaluated > 0
    assert peak_bytes < 32e6, f"search peak {peak_bytes / 1e6:.1f} MB"


@pytest.mark.parametrize("values", [[5, 1, 5, 2**40, 3, 1], [0], [2**26, 7, 2**26 - 1]])
def test_grouping_codes_match_numpy_unique_for_wide_ranges(values):
    column = np.asarray(values, dtype=np.int64)
    first, inverse = unique_inverse(column)
    uniq, ref_inverse = np.unique(column, return_inverse=True)
    assert np.array_equal(distinct(column), uniq)
    assert np.array_equal(column[first][inverse], column)  # each row's representative is equal to it
    assert np.array_equal(np.argsort(np.argsort(column[first]))[inverse], ref_inverse)


def test_json_records_build_each_row_once(monkeypatch):
    """``records`` converts column by column: no per-row ``row()`` call, and the same values as ``row``."""
    result = plan(get_model("gpt3-175b"), load_system("dgx-a100"), 1024)
    expected = [{k: result.row(i)[k] for k in LAYOUT_RECORD_KEYS} for i in range(5)]
    calls = []
    original = search_module.PlanResult.row
    monkeypatch.setattr(search_module.PlanResult, "row", lambda self, i: calls.append(i) or original(self, i))
    records = result.records(5)
    assert calls == []
    assert records == expected
    assert [type(v) for v in records[0].values()] == [type(v) for v in expected[0].values()]
