"""The fast indented JSON writer equals json.dumps(indent=2) byte for byte (issue 17: linear --json output)."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.cli.common import _clean
from commmodel.io.json_text import FAST_MIN_ROWS, dumps_indented, is_record_table

_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=8), st.sampled_from(["}\x00{", ": {", "{}", '"', "\\", "é\n"]))
_ROW = st.dictionaries(st.text(max_size=4), _SCALAR, max_size=5)
_TABLE = st.lists(_ROW, min_size=FAST_MIN_ROWS, max_size=FAST_MIN_ROWS + 3)


def _reference_clean(value):
    """commmodel's JSON cleaning before tables were left to the writer."""
    if isinstance(value, dict):
        return {str(k): _reference_clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_reference_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@settings(max_examples=60, deadline=None)
@given(table=_TABLE, small=st.lists(_SCALAR, max_size=3))
def test_tables_anywhere_in_a_document_are_written_as_json_dumps_writes_them(table, small):
    document = {"meta": small, "layouts": table, "nested": [{"deep": (table[:FAST_MIN_ROWS], 3)}], "last": 1.5}
    assert dumps_indented(document) == json.dumps(document, indent=2)
    assert dumps_indented(document, clean=_clean) == json.dumps(_reference_clean(document), indent=2)


def test_a_table_the_fast_path_cannot_write_goes_the_general_way():
    rows = [{"a": {"b": 1}, "n": float("nan"), "x": np.float32(1.5), 2: "two"} for _ in range(FAST_MIN_ROWS)]
    assert is_record_table([{"a": 1}] * FAST_MIN_ROWS) and not is_record_table(rows)
    assert dumps_indented({"r": rows}, clean=_clean) == json.dumps(_reference_clean({"r": rows}), indent=2)
    flat = [{"a": 1, "n": float("inf"), "v": np.float64(0.1)} for _ in range(FAST_MIN_ROWS)]
    text = dumps_indented({"r": flat}, clean=_clean)
    assert text == json.dumps(_reference_clean({"r": flat}), indent=2)
    assert json.loads(text)["r"][0] == {"a": 1, "n": None, "v": 0.1}
