"""Issue 16: inputs that used to hang, crash or answer silently end in one line, fast (subprocess + timeout).

Each case runs the real ``python -m commmodel`` in a subprocess with a wall-clock ``timeout`` so a
regression to the old hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from commmodel.cli.stdout import SIGPIPE_EXIT, OutputError, write_stdout
from commmodel.io.outpath import OutputPathError, check_out_path

ROOT = Path(__file__).resolve().parents[1]
P5 = ROOT / "tests" / "fixtures" / "nccl_tests" / "aws-p5-1n_all_reduce_perf.txt"


def run_cli(*args: str, timeout: float = 30, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COMMMODEL_DEBUG": ""}
    return subprocess.run([sys.executable, "-m", "commmodel", *args], capture_output=kwargs.pop("capture", True),
                          text=True, timeout=timeout, env=env, **kwargs)


@pytest.mark.parametrize("count", ["1e30", "1e300"])
def test_huge_parameter_count_is_refused_fast(count: str) -> None:
    """Was 4.5 min (1e30) and endless (1e300) in shape_for_params; now one line naming the range."""
    result = run_cli("plan", "--model", count, "--gpus", "8", "--system", "dgx-h100", timeout=20)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "too large" in result.stderr and "1e+15" in result.stderr


@pytest.mark.parametrize("args", [["plan", "--model", "7B", "--gpus", "1000000000"],
                                  ["plan", "--model", "7B", "--gpus", "67108864"],
                                  ["estimate", "--model", "7B", "--gpus", "9223372036854775808"],
                                  ["collective", "all_reduce", "--size", "1GiB", "--gpus", "9223372036854775808"]])
def test_huge_gpu_counts_are_refused_fast(args: list[str]) -> None:
    """Were a MemoryError, a 1.16 GB allocation, an OverflowError and a silent exit 0 with 2^60 nodes."""
    result = run_cli(*args, "--system", "dgx-h100", timeout=20)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "accepted range 1 to 16,777,216" in result.stderr and result.stdout == ""


def test_largest_accepted_count_still_answers() -> None:
    """The bound refuses nothing real: 1e15 parameters still get a shape (and a memory verdict)."""
    from commmodel.limits import MAX_NUM_PARAMS
    from commmodel.workload.presets import shape_for_params

    model = shape_for_params(MAX_NUM_PARAMS)
    assert abs(model.num_params / MAX_NUM_PARAMS - 1) < 0.03


def test_dev_zero_import_ends_in_one_line() -> None:
    """Was a MemoryError after 9 s: a device is refused before any read."""
    result = run_cli("calibrate", "import", "/dev/zero", "--out", "/tmp/never-written.csv", timeout=20)
    assert result.returncode == 1 and "device" in result.stderr and result.stderr.count("\n") == 1


def test_a_pipe_larger_than_the_bound_is_cut_off(tmp_path: Path) -> None:
    """A FIFO (no size known ahead) is read in chunks and refused past 256 MiB, not read to the end."""
    from commmodel.errors import CalibrationError
    from commmodel.io import yaml_read

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"head -c {yaml_read.MAX_USER_FILE_BYTES + 2**20} /dev/zero > {fifo}"])
    try:
        with pytest.raises(CalibrationError, match="larger than 256 MiB"):
            yaml_read.read_user_bytes(fifo, CalibrationError, "give a file")
    finally:
        writer.kill()
        writer.wait(timeout=10)


def test_json_to_a_full_device_is_one_line() -> None:
    """``> /dev/full`` was an OSError traceback."""
    with open("/dev/full", "w") as full:
        result = run_cli("plan", "--model", "7B", "--gpus", "64", "--system", "dgx-h100", "--json",
                         capture=False, stdout=full, stderr=subprocess.PIPE, timeout=60)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "No space left on device" in result.stderr, result.stderr


def test_closed_stdout_is_an_error_not_a_silent_success() -> None:
    """``>&-`` used to exit 0 having written nothing."""
    code = ("import sys, os; os.close(1); sys.stdout = None; sys.argv = ['commmodel', 'collective', 'all_reduce', "
            "'--size', '1GiB', '--gpus', '8', '--system', 'dgx-h100']; from commmodel.cli.app import main; main()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=False, stderr=subprocess.PIPE, text=True,
                            timeout=30, env={**os.environ, "PYTHONPATH": str(ROOT), "COMMMODEL_DEBUG": ""})
    assert result.returncode == 1 and "stdout is closed" in result.stderr


def test_broken_pipe_exits_141_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader went away (``| head``): exit 128 + SIGPIPE, nothing on stderr."""

    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    with pytest.raises(typer.Exit) as exit_info:
        write_stdout("x\n")
    assert exit_info.value.exit_code == SIGPIPE_EXIT == 141


def test_an_ascii_stdout_gets_plain_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    """PYTHONIOENCODING=ascii: a successful estimate ended in a UnicodeEncodeError traceback at its first '×'."""
    raw = io.BytesIO()
    ascii_out = io.TextIOWrapper(raw, encoding="ascii")
    monkeypatch.setattr(sys, "stdout", ascii_out)
    write_stdout("tp 1 × pp 1 · 5 µs ≤ 2 ⌀\n")
    assert raw.getvalue().decode("ascii") == "tp 1 x pp 1 . 5 us <= 2 ?\n"


def test_a_whole_answer_prints_on_an_ascii_stdout() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COMMMODEL_DEBUG": "", "PYTHONIOENCODING": "ascii"}
    result = subprocess.run([sys.executable, "-m", "commmodel", "estimate", "-m", "7B", "-n", "8", "-s", "dgx-h100"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert "tp 1 x pp 1 x dp 8" in result.stdout


def test_enospc_is_an_output_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Full(io.StringIO):
        def flush(self) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sys, "stdout", Full())
    with pytest.raises(OutputError, match="No space left on device"):
        write_stdout("x\n")


def test_out_in_a_missing_folder_creates_nothing(tmp_path: Path) -> None:
    """``--out /nonexistent/x.yaml`` used to create the folder silently."""
    missing = tmp_path / "typo-folder"
    result = run_cli("calibrate", "import", str(P5), "--nodes", "1", "--out", str(missing / "x.csv"), timeout=30)
    assert result.returncode == 1 and "does not exist" in result.stderr
    assert not missing.exists()


@pytest.mark.parametrize(("name", "fragment"), [("", "is a folder"), ("nope/x.yaml", "does not exist")])
def test_check_out_path_rules(tmp_path: Path, name: str, fragment: str) -> None:
    with pytest.raises(OutputPathError, match=fragment):
        check_out_path(tmp_path / name if name else tmp_path)
    assert check_out_path(tmp_path / "fine.yaml") == tmp_path / "fine.yaml"
    assert list(tmp_path.glob(".commmodel-probe-*")) == []  # the write probe leaves nothing behind


def test_duplicate_yaml_key_names_both_lines(tmp_path: Path) -> None:
    from commmodel.errors import ProfileError
    from commmodel.io.yaml_read import read_yaml_file

    path = tmp_path / "d.yaml"
    path.write_text("a: 1\nb:\n  c: 2\n  c: 3\n")
    with pytest.raises(ProfileError, match="duplicate key c on lines 3 and 4"):
        read_yaml_file(path, ProfileError, "fix it")
    path.write_text("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  x: 5\n")  # a merge then an override is fine
    assert read_yaml_file(path, ProfileError, "fix it")["other"] == {"x": 5, "y": 2}


def _measurements(tmp_path: Path) -> Path:
    from commmodel.io.measurements import write_measurements

    path = tmp_path / "m.csv"
    row = {"op": "all_reduce", "size_bytes": 8, "num_ranks": 2, "num_nodes": 1, "group": "all", "algorithm": "ring",
           "dtype": "float32", "time_s_median": 1e-5, "iters": 5, "time_stat": "median", "source": "x"}
    write_measurements(path, "collectives", {"backend": "gloo"}, [row, {**row, "size_bytes": 16}])
    return path


def test_resume_drops_a_torn_last_row(tmp_path: Path) -> None:
    """A row cut short at the end is dropped with a warning naming the line."""
    from commmodel.io.measurements import MeasurementWriter, read_measurements

    path = _measurements(tmp_path)
    clean = path.read_text()
    path.write_text(clean + "all_reduce,32,2")
    writer = MeasurementWriter(path, "collectives", {}, resume=True)
    writer.close()
    assert len(writer.warnings) == 1 and f"m.csv:{clean.count(chr(10)) + 1}: dropped the torn last row" in writer.warnings[0]
    assert [r["size_bytes"] for r in read_measurements(path).rows] == [8, 16]


def test_a_whole_last_row_without_its_newline_is_kept(tmp_path: Path) -> None:
    """The bad-input audit of 2026-11-28: a last row with every cell but no newline (an editor saved the file so)
    was cut as torn, losing a measured point that the next run did not measure again. Now it gets its newline."""
    from commmodel.io.measurements import MeasurementWriter, read_measurements

    path = _measurements(tmp_path)
    path.write_text(path.read_text() + "all_reduce,32,2,1,all,ring,,float32,1e-05,,,,,5,median,x")
    writer = MeasurementWriter(path, "collectives", {}, resume=True)
    writer.close()
    assert len(writer.warnings) == 1 and "added one and kept the row" in writer.warnings[0]
    assert [r["size_bytes"] for r in read_measurements(path).rows] == [8, 16, 32]


def test_a_torn_row_in_the_middle_is_still_an_error(tmp_path: Path) -> None:
    from commmodel.errors import CalibrationError
    from commmodel.io.measurements import MeasurementWriter

    path = _measurements(tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-2]) + "all_reduce,8,2\n" + lines[-1])
    with pytest.raises(CalibrationError, match="cells"):
        MeasurementWriter(path, "collectives", {}, resume=True)


def test_import_append_warns_about_a_torn_last_row(tmp_path: Path) -> None:
    """calibrate import --append repairs the same way calibrate run --resume does, and says so on stderr."""
    out = tmp_path / "o.csv"
    first = run_cli("calibrate", "import", str(P5), "--nodes", "1", "--out", str(out), timeout=30)
    assert first.returncode == 0, first.stderr
    lines = out.read_text().count("\n")
    out.write_text(out.read_text() + "all_reduce,8,8")
    again = run_cli("calibrate", "import", str(P5), "--nodes", "1", "--out", str(out), "--append", timeout=30)
    assert again.returncode == 0, again.stderr
    assert f"warning: {out}:{lines + 1}: dropped the torn last row" in again.stderr
