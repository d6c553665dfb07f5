"""The per-step split read from merged intervals (evidence/timeline.py ``split_windows``) equals the split computed
window by window from the raw intervals (the definition in the module's docstring), on random kernels and steps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.evidence.timeline import split_windows, total_s, union

INTERVAL = st.tuples(st.floats(0, 100), st.floats(0, 10)).map(lambda p: (p[0], p[0] + p[1]))
WINDOW = st.tuples(st.floats(0, 100), st.floats(0.01, 30)).map(lambda p: (p[0], p[0] + p[1]))


def _reference(compute, comm, start_s, end_s) -> dict[str, float]:
    busy_compute = union(compute, start_s, end_s)
    busy_any = union(busy_compute + union(comm, start_s, end_s), start_s, end_s)
    compute_s, any_s = total_s(busy_compute), total_s(busy_any)
    return {"time_s": end_s - start_s, "compute_s": compute_s, "exposed_comm_s": any_s - compute_s,
            "idle_s": end_s - start_s - any_s}


@settings(max_examples=300, deadline=None)
@given(st.lists(INTERVAL, max_size=40), st.lists(INTERVAL, max_size=40), st.lists(WINDOW, min_size=1, max_size=8))
def test_merged_windows_equal_the_window_by_window_definition(compute, comm, windows) -> None:
    for got, (start_s, end_s) in zip(split_windows(compute, comm, windows), windows):
        want = _reference(compute, comm, start_s, end_s)
        assert all(abs(got[k] - want[k]) <= 1e-9 * max(1.0, end_s) for k in want), (got, want)
        assert abs(got["compute_s"] + got["exposed_comm_s"] + got["idle_s"] - got["time_s"]) <= 1e-9 * max(1, end_s)
