"""A column table is written as json.dumps writes its records (issue 17: ``plan --json`` from the columns)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from commmodel.cli.common import _clean
from commmodel.cli.plan import layout_records
from commmodel.io.json_columns import ColumnTable, table_text
from commmodel.io.json_text import dumps_indented
from commmodel.io.profiles import load_system
from commmodel.planner.search import plan
from commmodel.workload.presets import get_model

_NAMES = ("none", "selective", "full", "op")


@pytest.fixture(autouse=True)
def _column_path_for_every_size(monkeypatch):
    """These tests are about the column writer: small tables take it too (not json on their records)."""
    import commmodel.io.json_columns as json_columns

    monkeypatch.setattr(json_columns, "SMALL_TABLE_ROWS", 0)


def _parsed(text: str):
    """The document ``text`` holds, with NaN/Infinity kept as comparable markers."""
    return json.loads(text, parse_constant=lambda name: f"<<{name}>>")


def _marked(value):
    """What :func:`_parsed` gives for a value json.dumps writes: non-finite floats as markers."""
    if isinstance(value, dict):
        return {k: _marked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_marked(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "<<NaN>>" if math.isnan(value) else ("<<Infinity>>" if value > 0 else "<<-Infinity>>")
    return value


def _null_nonfinite(value):
    """The CLI's JSON-safe rule written out: non-finite floats become null."""
    if isinstance(value, dict):
        return {k: _null_nonfinite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_null_nonfinite(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


@st.composite
def tables(draw):
    """Column tables of every column kind: floats (any, NaN and infinities included), ints, bools, a
    decoded code column, a sequence of mixed JSON scalars."""
    rows = draw(st.integers(0, 70))
    kinds = draw(st.lists(st.sampled_from(["f8", "f4", "i8", "i1", "u4", "u8", "b", "code", "mixed"]), min_size=0, max_size=6))
    columns, decoders = {}, {}
    for index, kind in enumerate(kinds):
        key = draw(st.sampled_from(["k", "é", 'q"', "step_time_s"])) + str(index)
        if kind == "code":
            columns[key] = draw(hnp.arrays(np.int64, rows, elements=st.integers(0, 3)))
            decoders[key] = lambda codes: [_NAMES[c] for c in codes.tolist()]
        elif kind == "mixed":
            columns[key] = draw(st.lists(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3)),
                                         min_size=rows, max_size=rows))
        else:
            columns[key] = draw(hnp.arrays(np.dtype(kind), rows))
    return ColumnTable(columns, decoders)


@settings(max_examples=150, deadline=None)
@given(table=tables(), level=st.integers(0, 3))
def test_a_column_table_reads_back_as_its_records(table, level):
    document = table
    for _ in range(level):
        document = {"meta": [1, 2.5], "deeper": [document]}
    records = table.records()
    expected = records
    for _ in range(level):
        expected = {"meta": [1, 2.5], "deeper": [expected]}
    text = dumps_indented({"layouts": document, "n": 1})
    assert _parsed(text) == _marked({"layouts": expected, "n": 1})
    assert text == json.dumps({"layouts": expected, "n": 1}, indent=2)
    safe = dumps_indented({"layouts": document}, clean=_clean)
    assert _parsed(safe) == _null_nonfinite({"layouts": expected})


def test_float_cells_are_json_floats_with_every_special_value():
    values = np.array([0.0, -0.0, 0.1, 1e16, 1e-5, 123456789.0, 5e-324, 1.7976931348623157e308,
                       math.nan, math.inf, -math.inf, 2.0**53 + 2, 1 / 3])
    table = ColumnTable({"x": values, "b": values > 1, "i": np.arange(values.size) - 5})
    assert _parsed(dumps_indented(table)) == _marked(json.loads(json.dumps(table.records())))
    assert dumps_indented(table) == json.dumps(table.records(), indent=2)
    parsed = json.loads(dumps_indented(table, clean=_clean))
    assert [row["x"] for row in parsed[8:11]] == [None, None, None]
    assert parsed[0]["b"] is False and parsed[3]["b"] is True and parsed[0]["i"] == -5


@pytest.mark.parametrize("top", [1, 7, 10_000])
def test_plan_layouts_from_the_columns_equal_the_records(top):
    result = plan(get_model("gpt3-1.3b"), load_system("dgx-a100"), 64, global_batch=512)
    new = dumps_indented({"layouts": layout_records(result, top)}, clean=_clean)
    old = json.dumps({"layouts": result.records(top)}, indent=2)
    assert json.loads(new) == json.loads(old)
    assert new == old
    assert len(json.loads(new)["layouts"]) == min(top, result.num_feasible) > 0


@pytest.mark.parametrize("block_rows", [1, 7, 4096])
def test_records_laid_out_block_by_block_equal_the_records(block_rows, monkeypatch):
    """Blocks of 1 and 7 rows (record boundaries inside and across blocks) give the bytes of one block."""
    import commmodel.io.json_columns as json_columns

    monkeypatch.setattr(json_columns, "BLOCK_ROWS", block_rows)
    rng = np.random.default_rng(7)
    count = 50
    table = ColumnTable({"rank": np.arange(1, count + 1), "x": rng.normal(size=count) * 10.0 ** rng.integers(-6, 18, count),
                         "code": rng.integers(0, 4, count), "flag": rng.random(count) < 0.5},
                        {"code": lambda codes: [_NAMES[c] for c in codes.tolist()]})
    for level in (0, 1, 3):
        assert table_text(table, level) == _reindent(json.dumps(table.records(), indent=2), level)
    assert dumps_indented({"layouts": table}, clean=_clean) == json.dumps({"layouts": table.records()}, indent=2)


def _reindent(text: str, level: int) -> str:
    return text.replace("\n", "\n" + "  " * level)


@pytest.mark.parametrize("dtype", ["i8", "i4", "u8", "i2"])
def test_mostly_distinct_ints_are_written_as_int_repr(dtype):
    """Integers of 1 to 20 digits, negative ones, the dtype's extremes (17+ digits go through int.__repr__)."""
    info = np.iinfo(dtype)
    magnitudes = [0, 1, 9, 10, 99, 100, 12345, 10**9, 10**16 - 1, 10**16, 10**17 - 1, 10**17, 10**18, 2**63 - 1, 2**64 - 1]
    values = sorted({v for m in magnitudes for v in (m, -m) if info.min <= v <= info.max} | {info.min, info.max})
    for column in (np.array(values, dtype=dtype), np.array([v for v in values if abs(v) < 10**17], dtype=dtype)):
        assert json.loads(table_text(ColumnTable({"i": column}))) == [{"i": v} for v in column.tolist()]
        assert table_text(ColumnTable({"i": column})) == json.dumps(ColumnTable({"i": column}).records(), indent=2)


def test_a_small_table_is_written_from_its_records_with_the_same_bytes(monkeypatch):
    """Up to SMALL_TABLE_ROWS records json writes the table (issue 17); the text is the column writer's, and a
    numpy integer in a sequence column (which json refuses) falls back to the column writer."""
    import commmodel.io.json_columns as json_columns

    rng = np.random.default_rng(3)
    count = 12
    table = ColumnTable({"rank": np.arange(1, count + 1), "x": rng.normal(size=count) * 10.0 ** rng.integers(-6, 18, count),
                         "nan": np.array([math.nan, math.inf, 1.5] * 4), "code": rng.integers(0, 4, count),
                         "flag": rng.random(count) < 0.5, "seq": [np.int64(7), 3, None, "a"] * 3},
                        {"code": lambda codes: [_NAMES[c] for c in codes.tolist()]})
    column_written = {level: table_text(table, level) for level in (0, 2)}
    column_safe = dumps_indented({"layouts": table}, clean=_clean)
    monkeypatch.setattr(json_columns, "SMALL_TABLE_ROWS", 64)
    assert {level: table_text(table, level) for level in (0, 2)} == column_written
    assert dumps_indented({"layouts": table}, clean=_clean) == column_safe
    plain = ColumnTable({k: v for k, v in table.columns.items() if k != "seq"}, table.decoders)
    monkeypatch.setattr(json_columns, "SMALL_TABLE_ROWS", 0)
    plain_columns = table_text(plain, 1)
    monkeypatch.setattr(json_columns, "SMALL_TABLE_ROWS", 64)
    assert table_text(plain, 1) == plain_columns == _reindent(json.dumps(plain.records(), indent=2), 1)
