"""The results CSV: header block, row round trip, append-as-measured, resume keys, malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from commmodel.errors import CalibrationError
from commmodel.io.measurements import (
    COLLECTIVE_COLUMNS,
    MeasurementWriter,
    point_key,
    read_measurements,
    write_measurements,
)

ROW = {"op": "all_reduce", "size_bytes": 1024, "num_ranks": 2, "num_nodes": 1, "group": "all", "algorithm": "auto",
       "protocol": "", "dtype": "float32", "time_s_median": 1.25e-5, "time_s_p10": 1.2e-5, "time_s_p90": 1.5e-5,
       "algbw_GBps": 0.08192, "busbw_GBps": 0.08192, "iters": 20, "time_stat": "median", "source": "test"}


def test_round_trip_and_flush(tmp_path):
    path = tmp_path / "m.csv"
    writer = MeasurementWriter(path, "collectives", {"backend": "gloo", "world_size": 2})
    writer.write_row(ROW)
    # Flushed at once: a reader sees the row before the writer is closed (a killed run keeps it).
    data = read_measurements(path)
    assert data.env == {"backend": "gloo", "world_size": "2"}
    assert data.rows[0] == ROW
    writer.note("skipped: op=reduce_scatter reason=test")
    writer.close()
    assert read_measurements(path).notes == ["skipped: op=reduce_scatter reason=test"]
    header = path.read_text().splitlines()
    assert header[0] == "# commmodel measurements v1 (collectives)"
    assert header[3] == ",".join(COLLECTIVE_COLUMNS)


def test_existing_file_needs_resume(tmp_path):
    path = tmp_path / "m.csv"
    write_measurements(path, "collectives", {}, [ROW])
    with pytest.raises(CalibrationError, match="already exists; pass --resume"):
        MeasurementWriter(path, "collectives", {})
    with MeasurementWriter(path, "collectives", {"created": "now"}, resume=True) as writer:
        writer.write_row({**ROW, "size_bytes": 2048})
    data = read_measurements(path)
    assert [r["size_bytes"] for r in data.rows] == [1024, 2048]
    assert "resumed: now" in data.notes
    with pytest.raises(CalibrationError, match="holds collectives measurements, not compute"):
        MeasurementWriter(path, "compute", {}, resume=True)


def test_point_key_ignores_timings():
    assert point_key(ROW) == point_key({**ROW, "time_s_median": 9.0, "iters": 3})
    assert point_key(ROW) != point_key({**ROW, "algorithm": "ring"})
    assert point_key(ROW) != point_key({**ROW, "group": "intra"})


def test_unknown_column_is_rejected(tmp_path):
    with MeasurementWriter(tmp_path / "m.csv", "collectives", {}) as writer:
        with pytest.raises(CalibrationError, match="unknown columns"):
            writer.write_row({**ROW, "colour": "red"})


@pytest.mark.parametrize("content, message", [
    (b"", "not a commmodel measurements file"),
    (b"op,size_bytes\nall_reduce,8\n", "not a commmodel measurements file"),
    (b"\x00\x01\x02garbage", "binary data"),
    (b"# commmodel measurements v1 (collectives)\n# backend: gloo\n", "no header row"),
    (b"# commmodel measurements v1 (collectives)\nop,size_bytes\n", "header row lacks columns"),
    (b"# commmodel measurements v1 (weather)\n", "unknown schema"),
])
def test_malformed_files(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(CalibrationError, match=message):
        read_measurements(path)


def test_truncated_and_non_numeric_rows(tmp_path):
    path = tmp_path / "m.csv"
    write_measurements(path, "collectives", {}, [ROW])
    text = path.read_text()
    path.write_text(text + "all_reduce,2048,2\n")
    with pytest.raises(CalibrationError, match=r"m.csv:4: 3 cells but the header has 16 columns"):
        read_measurements(path)
    path.write_text(text.replace("1024", "big"))
    with pytest.raises(CalibrationError, match="size_bytes = 'big' is not a number"):
        read_measurements(path)


@pytest.mark.parametrize("cell", ["-0.001", "0", "nan", "inf"])
def test_a_damaged_time_is_refused_not_dropped(tmp_path, cell):
    """``calibrate fit`` read a time of 0, a negative one, nan or inf, and went on (nan and inf as missing, the others
    into the fit); each is now one line naming the file, the row and the column."""
    from typer.testing import CliRunner

    from commmodel.cli.app import app

    csv = tmp_path / "m.csv"
    runner = CliRunner()
    source = Path(__file__).parent / "fixtures" / "nccl_tests" / "aws-p5-1n_all_reduce_perf.txt"
    result = runner.invoke(app, ["calibrate", "import", str(source), "--out", str(csv), "--nodes", "1", "--ranks", "8"])
    assert result.exit_code == 0, result.output
    lines = csv.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("op,"))
    columns = lines[header].split(",")
    row = lines[header + 3].split(",")
    row[columns.index("time_s_median")] = cell
    lines[header + 3] = ",".join(row)
    csv.write_text("\n".join(lines) + "\n")
    with pytest.raises(CalibrationError, match=rf"m.csv:{header + 4}: column time_s_median = '{cell}' must be a"):
        read_measurements(csv)
    result = runner.invoke(app, ["calibrate", "fit", str(csv), "--base", "aws-p5", "--out", str(tmp_path / "o.yaml")])
    assert result.exit_code != 0 and "time_s_median" in result.output and "Traceback" not in result.output


def test_a_resumed_file_must_hold_the_same_job(tmp_path):
    """--resume matched points only: a 2-rank gloo file resumed under MPI (or with 4 ranks, or another --system)
    reported '0 point(s) written' or appended another job's rows under the gloo header, which fit then read as
    gloo points. Each differing job line is now named and the file left as it was."""
    path = tmp_path / "g2.csv"
    env = {"backend": "gloo", "world_size": 2, "num_nodes": 1, "system": "cpu-host"}
    with MeasurementWriter(path, "collectives", env) as writer:
        writer.write_row({"op": "all_reduce", "size_bytes": 1024, "num_ranks": 2, "num_nodes": 1, "group": "all",
                          "time_s_median": 1e-4})
    before = path.read_text()
    for change, words in (({"backend": "mpi"}, "backend gloo there, mpi now"),
                          ({"world_size": 4}, "world_size 2 there, 4 now"),
                          ({"system": "dgx-h100"}, "system cpu-host there, dgx-h100 now")):
        with pytest.raises(CalibrationError, match=f"holds another job's measurements.*{words}"):
            MeasurementWriter(path, "collectives", {**env, **change}, resume=True)
        assert path.read_text() == before
    MeasurementWriter(path, "collectives", {**env, "system": ""}, resume=True).close()  # unstated: no conflict


def test_an_appended_import_does_not_repeat_points(tmp_path):
    """`calibrate import --append` of the same table doubled its rows; now the points already there are kept once
    and the warning says how many."""
    path = tmp_path / "imp.csv"
    rows = [{"op": "all_reduce", "size_bytes": s, "num_ranks": 8, "num_nodes": 1, "group": "all",
             "time_s_median": 1e-5 * s} for s in (1024, 2048)]
    env = {"system": "aws-p5"}
    assert write_measurements(path, "collectives", env, rows) == 2
    warnings: list[str] = []
    assert write_measurements(path, "collectives", env, rows + [{**rows[0], "size_bytes": 4096}], append=True,
                              append_flag="--append", warn=warnings.append) == 1
    assert len(read_measurements(path).rows) == 3 and "2 point(s) already in" in warnings[0]
