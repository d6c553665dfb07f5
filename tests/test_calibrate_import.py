"""nccl-tests importer: published tables rebuilt in the nccl-tests layouts, variants, broken files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import CalibrationError
from commmodel.io.measurements import read_measurements
from commmodel.io.nccl_tests import op_from_program, read_nccl_tests

FIX = Path(__file__).parent / "fixtures" / "nccl_tests"


def rows_by_size(rows, op=None):
    return {r["size_bytes"]: r for r in rows if op is None or r["op"] == op}


def test_p4de_two_nodes_text():
    # aws-samples/awsome-distributed-training@7217859 nccl-tests/README.md: 2x p4de (16 A100), EFA; 2 GiB row.
    imported = read_nccl_tests(FIX / "aws-p4de-2n-efa_all_reduce.txt")
    assert len(imported.rows) == 29
    row = rows_by_size(imported.rows)[2147483648]
    assert (row["op"], row["num_ranks"], row["num_nodes"]) == ("all_reduce", 16, 2)
    assert row["time_s_median"] == pytest.approx(51406e-6)
    assert (row["algbw_GBps"], row["busbw_GBps"]) == (41.78, 78.33)
    assert row["time_stat"] == "mean" and row["time_s_p10"] is None
    assert imported.env["hostnames"] == "2" and "16x NVIDIA A100-SXM4-80GB" in imported.env["devices"]
    assert imported.rows[0]["iters"] == 20


def test_p5_without_rank_lines_infers_ranks_and_needs_nodes():
    path = FIX / "aws-p5-1n_all_reduce_perf.txt"
    with pytest.raises(CalibrationError, match="pass --nodes N"):
        read_nccl_tests(path)
    imported = read_nccl_tests(path, nodes=1)
    # busbw/algbw = 483.05/276.03 = 1.750 = 2(n-1)/n -> n = 8 (aws-batch README, 16 GiB row).
    assert {r["num_ranks"] for r in imported.rows} == {8}
    assert any("inferred" in n for n in imported.notes)
    assert rows_by_size(imported.rows)[17179869184]["time_s_median"] == pytest.approx(62239e-6)
    assert len(imported.rows) == 32


def test_json_report():
    # stas00/ml-engineering@744d01e network/README.md: 8x A100 all_reduce, 16 GiB: 127997 us, 234.89 GB/s busbw.
    imported = read_nccl_tests(FIX / "mle-a100-1n_all_reduce_perf.json")
    assert len(imported.rows) == 20
    row = rows_by_size(imported.rows)[17179869184]
    assert (row["num_ranks"], row["num_nodes"], row["iters"]) == (8, 1, 50)
    assert row["time_s_median"] == pytest.approx(127997e-6)
    assert row["busbw_GBps"] == 234.89
    assert imported.env["nccl_version"] == "2.18.5"


@pytest.mark.parametrize("field, value, says", [("nwrong", 12.0, "counted 12.0 wrong results at 17179869184 bytes"),
                                                ("time", 0.0, "time 0 for 17179869184 bytes"),
                                                ("time", float("nan"), "nan or inf")])
def test_json_report_rows_are_checked_as_the_text_tables(tmp_path, field, value, says):
    """The -J report of a run is refused where its text table is: a corrupted, zero or nan result, named."""
    doc = json.loads((FIX / "mle-a100-1n_all_reduce_perf.json").read_text())
    doc["results"][-1]["out_of_place"][field] = value
    damaged = tmp_path / "all_reduce_perf.json"
    damaged.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match=f"results\\[19\\]: .*{re.escape(says)}"):
        read_nccl_tests(damaged)


def test_five_tests_in_one_log():
    # Anthony-Hoo AutoDL post: 2x RTX 2080 Ti without P2P; broadcast 1 GiB = 96800 us, alltoall 1 GiB busbw 4.61.
    imported = read_nccl_tests(FIX / "autodl-2080ti_5_collectives.txt")
    counts = {}
    for r in imported.rows:
        counts[r["op"]] = counts.get(r["op"], 0) + 1
    assert counts == {"all_reduce": 28, "all_gather": 26, "broadcast": 28, "reduce": 28, "all_to_all": 26}
    assert rows_by_size(imported.rows, "broadcast")[1073741824]["time_s_median"] == pytest.approx(96800e-6)
    assert rows_by_size(imported.rows, "all_to_all")[1073741824]["busbw_GBps"] == 4.61
    assert {(r["num_ranks"], r["num_nodes"]) for r in imported.rows} == {(2, 1)}


def test_per_iteration_columns_and_timestamps():
    imported = read_nccl_tests(FIX / "synthetic_per_iter_I.txt")
    assert [r["size_bytes"] for r in imported.rows] == [1024, 2048, 4096]
    assert imported.rows[0]["op"] == "reduce_scatter"
    assert (imported.rows[0]["num_ranks"], imported.rows[0]["num_nodes"]) == (4, 2)
    assert imported.rows[2]["time_s_median"] == pytest.approx(21.0e-6)
    in_place = read_nccl_tests(FIX / "synthetic_per_iter_I.txt", in_place=True)
    assert in_place.rows[2]["time_s_median"] == pytest.approx(22.0e-6)
    assert in_place.rows[2]["algbw_GBps"] == 0.19


def test_old_layout_without_redop_root():
    imported = read_nccl_tests(FIX / "synthetic_old_layout_all_gather_perf.txt")
    assert [r["size_bytes"] for r in imported.rows] == [32, 64, 128]  # the size-0 row is dropped
    assert {r["op"] for r in imported.rows} == {"all_gather"}
    assert imported.rows[0]["num_ranks"] == 4


def test_options_override_and_algorithm():
    imported = read_nccl_tests(FIX / "aws-p5-1n_all_reduce_perf.txt", nodes=1, ranks=8, algorithm="ring",
                               protocol="simple")
    assert {(r["algorithm"], r["protocol"]) for r in imported.rows} == {("ring", "simple")}
    assert not imported.notes or all("inferred" not in n for n in imported.notes)


@pytest.mark.parametrize("name, op", [
    ("all_reduce_perf", "all_reduce"), ("./build/alltoall_perf_mpi", "all_to_all"), ("sendrecv_perf.log", "send_recv"),
    ("p5_reduce_scatter_perf.txt", "reduce_scatter"), ("reduce_perf", "reduce"), ("results.txt", None),
])
def test_op_from_program(name, op):
    assert op_from_program(name) == op


@pytest.mark.parametrize("name, message", [
    ("broken_empty.txt", "the file is empty"),
    ("broken_garbage.bin", "binary data"),
    ("broken_truncated.txt", r"broken_truncated.txt:20: row has 3 of 13 columns \(truncated table\?\)"),
    ("broken_wrong_columns.txt", r"column time = 'float' is not a number"),
    ("broken_no_busbw.txt", "no nccl-tests table found"),
    ("broken_header_only.txt", "header but no rows"),
    ("broken_truncated.json", r"malformed JSON at line \d+"),
    ("does_not_exist.txt", "no such file"),
])
def test_broken_files_give_one_clear_line(name, message):
    with pytest.raises(CalibrationError, match=message) as info:
        read_nccl_tests(FIX / name, nodes=1)
    assert "\n" not in str(info.value)


def test_unknown_collective_needs_op(tmp_path):
    text = (FIX / "aws-p4de-2n-efa_all_reduce.txt").read_text()
    text = text.replace("# Collective test starting: all_reduce_perf\n", "")
    path = tmp_path / "log.txt"
    path.write_text(text)
    with pytest.raises(CalibrationError, match="pass --op"):
        read_nccl_tests(path)
    assert read_nccl_tests(path, op="all_reduce").rows[0]["op"] == "all_reduce"


def test_cli_import_writes_measurements(tmp_path):
    out = tmp_path / "p4de.csv"
    runner = CliRunner()
    result = runner.invoke(app, ["calibrate", "import", str(FIX / "aws-p4de-2n-efa_all_reduce.txt"), "--out", str(out),
                                 "--system", "aws-p4de", "--json"])
    assert result.exit_code == 0, result.output
    data = read_measurements(out)
    assert len(data.rows) == 29 and data.env["system"] == "aws-p4de"
    assert data.rows[-1]["busbw_GBps"] == pytest.approx(78.33)
    again = runner.invoke(app, ["calibrate", "import", str(FIX / "aws-p4de-2n-efa_all_reduce.txt"), "--out", str(out)])
    assert again.exit_code == 1 and "already exists" in again.output
    appended = runner.invoke(app, ["calibrate", "import", str(FIX / "mle-a100-1n_all_reduce_perf.json"),
                                   "--out", str(out), "--append"])
    assert appended.exit_code == 0, appended.output
    assert len(read_measurements(out).rows) == 29 + 20


def test_cli_import_broken_file_exit_1(tmp_path):
    result = CliRunner().invoke(app, ["calibrate", "import", str(FIX / "broken_garbage.bin"),
                                      "--out", str(tmp_path / "x.csv")])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "binary data" in lines[0]
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize(("old", "new", "message"), [
    ("    28.56   36.71   64.24     N/A    28.56", "     0.00   36.71   64.24     N/A    28.56", "time 0 for 1048576"),
    ("    28.56   36.71   64.24     N/A    28.56", "    28.56   36.71   64.24       3    28.56", "counted 3 wrong"),
    ("     1048576        262144", "    -1048576        262144", "negative or fractional"),
])
def test_damaged_rows_are_refused_with_their_line(tmp_path, old, new, message):
    """A row nccl-tests could not have printed (no time, wrong results, a negative size) stops the import with its
    line: before, a zero time was imported, a wrong-results row kept and a negative size silently dropped."""
    text = (FIX / "aws-p5-1n_all_reduce_perf.txt").read_text()
    assert text.count(old) == 1
    damaged = tmp_path / "all_reduce_perf.txt"
    damaged.write_text(text.replace(old, new))
    with pytest.raises(CalibrationError, match=rf"all_reduce_perf.txt:24: .*{message}"):
        read_nccl_tests(damaged, nodes=1, ranks=8)


def test_op_cannot_relabel_a_table_that_says_its_collective(tmp_path):
    """--op all_gather on an all_reduce_perf table wrote all_gather rows with all-reduce bandwidths; --op is for
    files that do not say their collective (and may still override a file name)."""
    source = FIX / "aws-p4de-2n-efa_all_reduce.txt"
    with pytest.raises(CalibrationError, match="the table is all_reduce output .* not --op all_gather"):
        read_nccl_tests(source, op="all_gather")
    renamed = tmp_path / "all_gather_perf.txt"
    renamed.write_text("\n".join(line for line in source.read_text().splitlines()
                                 if "Collective test starting" not in line))
    assert {r["op"] for r in read_nccl_tests(renamed, op="all_reduce").rows} == {"all_reduce"}


def test_a_concatenated_log_without_test_lines_is_not_relabelled_as_one_collective(tmp_path):
    """The AutoDL 2x RTX 2080 Ti log (five tests) with its '# Collective test starting' lines removed, as older
    nccl-tests print and `cat *_perf.log` makes: every table would take the file name's op (all_reduce) and the fit
    would average five collectives. The second table's busbw/algbw (all-gather on 2 ranks: 0.5, not all-reduce's
    1.0) says it is another collective's: one line naming the fix (before: imported, rc 0)."""
    text = (FIX / "autodl-2080ti_5_collectives.txt").read_text()
    old = tmp_path / "all_reduce_perf.log"
    old.write_text("\n".join(line for line in text.splitlines() if "Collective test starting" not in line))
    with pytest.raises(CalibrationError, match="a table labelled all_reduce has busbw/algbw 0.500, but all_reduce on 2 "
                                               "ranks gives 1.000: it is another collective's table"):
        read_nccl_tests(old)


@pytest.mark.parametrize(("op", "ranks", "factor"), [("all_reduce", 2, 1.0), ("all_reduce", 8, 1.75),
                                                     ("all_gather", 8, 0.875), ("reduce_scatter", 16, 0.9375),
                                                     ("all_to_all", 4, 0.75), ("broadcast", 8, 1.0),
                                                     ("send_recv", 2, 1.0), ("barrier", 8, 0.0)])
def test_bus_factors_are_nccl_tests_own_and_shared(op: str, ranks: int, factor: float):
    """nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n, broadcast
    1. One table (commmodel/bus_factors.py) serves the collectives core and the importer (io/ may not import the
    core): both read the same numbers."""
    from commmodel.bus_factors import BUS_FACTORS
    from commmodel.collectives import busbw_factor
    from commmodel.io import nccl_tests

    assert float(BUS_FACTORS[op](float(ranks))) == pytest.approx(factor, abs=1e-12)
    assert float(busbw_factor(op, ranks)) == pytest.approx(factor, abs=1e-12)
    assert nccl_tests.BUS_FACTORS is BUS_FACTORS
