"""CSV output speaks words, not codes: the planner's integer ``bound`` column becomes its name."""

from __future__ import annotations

from typing import Any


def csv_frame(frame: Any) -> Any:
    """``frame`` with ``bound`` as a word (compute, communication, bubble, memory) instead of 0-3."""
    from commmodel.step.evaluate import BOUND_NAMES

    if "bound" in frame.columns and frame["bound"].dtype.kind in "iuf":
        frame = frame.assign(bound=[BOUND_NAMES[int(code)] for code in frame["bound"]])
    return frame


def plan_csv(result: Any, top: int | None = None) -> str:
    """``csv_frame(result.to_frame(top)).to_csv()`` byte for byte, written from the result's columns without
    pandas (issue 17: 100k ranked layouts of ~70 columns)."""
    import numpy as np

    from commmodel.io.csv_columns import csv_text
    from commmodel.io.json_columns import ColumnTable
    from commmodel.step.evaluate import BOUND_NAMES
    from commmodel.step.layout import RECOMPUTE_NAMES

    count = result.num_feasible if top is None else min(top, result.num_feasible)
    columns = {"rank": np.arange(1, count + 1), **{key: np.asarray(column[:count]) for key, column in result.columns.items()}}
    decoders = {"recompute": lambda codes: [RECOMPUTE_NAMES[code] for code in codes.astype(int).tolist()]}
    if "bound" in columns and columns["bound"].dtype.kind in "iuf":
        decoders["bound"] = lambda codes: [BOUND_NAMES[int(code)] for code in codes.tolist()]
    return csv_text(ColumnTable(columns, decoders))
