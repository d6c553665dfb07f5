"""``plan --csv`` written from the columns equals pandas' ``to_csv`` of the ranked frame, byte for byte."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from commmodel.cli.csv_words import csv_frame, plan_csv
from commmodel.io.csv_columns import csv_text
from commmodel.io.json_columns import ColumnTable
from commmodel.io.profiles import load_system
from commmodel.planner.search import plan
from commmodel.workload.presets import get_model


@pytest.mark.parametrize("top", [1, 9, None])
def test_plan_csv_from_the_columns_is_pandas_to_csv(top):
    result = plan(get_model("gpt3-1.3b"), load_system("dgx-a100"), 64, global_batch=512)
    assert plan_csv(result, top) == csv_frame(result.to_frame(top)).to_csv()


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 30), data=st.data())
def test_a_column_table_as_csv_is_pandas_to_csv(rows, data):
    columns = {"rank": np.arange(1, rows + 1)}
    for index, dtype in enumerate(data.draw(st.lists(st.sampled_from(["f8", "i8", "b"]), max_size=5))):
        columns[f"c{index}/x"] = data.draw(hnp.arrays(np.dtype(dtype), rows))
    columns["word"] = data.draw(hnp.arrays(np.int64, rows, elements=st.integers(0, 2)))
    names = ["plain", "with,comma", 'with"quote']
    table = ColumnTable(columns, {"word": lambda codes: [names[c] for c in codes.tolist()]})
    frame = pd.DataFrame({**columns, "word": np.asarray(names, dtype=object)[columns["word"]]}).set_index("rank")
    assert csv_text(table) == frame.to_csv()
