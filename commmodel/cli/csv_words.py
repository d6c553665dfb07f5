"""CSV output speaks words, not codes: the planner's integer ``bound`` column becomes its name."""

from __future__ import annotations

from typing import Any


def csv_frame(frame: Any) -> Any:
    """``frame`` with ``bound`` as a word (compute, communication, bubble, memory) instead of 0-3."""
    from commmodel.step.evaluate import BOUND_NAMES

    if "bound" in frame.columns and frame["bound"].dtype.kind in "iuf":
        frame = frame.assign(bound=[BOUND_NAMES[int(code)] for code in frame["bound"]])
    return frame
