"""Bad input FILES (the file-reader audit of 2026-11-28: ~320 invocations of diagnose, calibrate import/fit,
profiles validate/from-nccl and -m/-s YAML paths): each case here was a traceback, a hang, a silently wrong answer or
a file replaced before its fix. The contract is tests/test_bad_input_cli.py's: exit 1, one stderr line naming what
was wrong and the fix, nothing on stdout, nothing measured lost."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commmodel.errors import CalibrationError
from commmodel.io.measurements import MeasurementWriter, read_measurements
from tests.test_bad_input_cli import check_bad_input, invoke
from tests.test_diagnose import TWO, needs_evidence

FIXTURES = Path(__file__).parent / "fixtures"
P4DE = FIXTURES / "nccl_tests" / "aws-p4de-2n-efa_all_reduce.txt"
TOPO = FIXTURES / "nccl" / "h100-ndr-topo-dump.xml"


def _edited_trace(tmp_path: Path, edit) -> Path:
    """The real 2-rank trace with ``edit(document)`` applied, gzipped again."""
    doc = json.loads(gzip.open(TWO).read())
    edit(doc)
    out = tmp_path / "edited.json.gz"
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def _nccl_kernels(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl")]


@needs_evidence
@pytest.mark.parametrize(("case", "edit", "fragments"), [
    # before: 0 µs collectives and 0.00 ms steps, exit 0
    ("no-dur", lambda d: [e.pop("dur", None) for e in d["traceEvents"]], ["without dur", "export it again"]),
    # before: "2 collective calls" of 21, each with plausible figures
    ("no-ts", lambda d: [e.pop("ts", None) for e in d["traceEvents"]], ["without ts"]),
    # before: a 300-digit duration flagged SLOW
    ("absurd-dur", lambda d: [e.update(dur=1e300) for e in _nccl_kernels(d)], ["1e+300", "a week"]),
    # before: "rank 0 of 1000000000000"
    ("world-size", lambda d: d["distributedInfo"].update(world_size=10**12), ["rank 0 of 1000000000000",
                                                                              "16,777,216"]),
])
def test_a_trace_with_impossible_times_or_ranks_is_refused(tmp_path: Path, case: str, edit, fragments) -> None:
    path = _edited_trace(tmp_path, edit)
    check_bad_input(invoke(["diagnose", "-s", "dgx-a100", str(path)], tmp_path), 1, fragments, tmp_path)


@pytest.mark.parametrize("argv", [
    ["profiles", "validate", "{fifo}"],
    ["calibrate", "import", "{fifo}", "-o", "{tmp}/x.csv"],
    ["calibrate", "fit", "{fifo}"],
    ["profiles", "from-nccl", "{fifo}", "-o", "{tmp}/d.yaml"],
    ["estimate", "-m", "{fifo}", "-n", "8", "-s", "dgx-h100"],
])
def test_a_named_pipe_nobody_writes_to_is_one_line_not_a_hang(tmp_path: Path, argv: list[str]) -> None:
    """Before: each waited forever in open() (the audit's 20 s timeouts)."""
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "commmodel", *[a.replace("{fifo}", str(fifo))
                                                                 .replace("{tmp}", str(tmp_path)) for a in argv]],
                            capture_output=True, text=True, timeout=30)
    assert time.perf_counter() - start < 10
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: ")


def test_a_pipe_with_a_writer_is_still_read(tmp_path: Path) -> None:
    """`profiles validate <(cat x.yaml)`-style input keeps working: a writer that connects at once is read."""
    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    profile = Path(__file__).parents[1] / "hardware_profiles" / "systems" / "dgx-h100.yaml"
    writer = subprocess.Popen(["sh", "-c", f"cat {profile} > {fifo}"])
    result = invoke(["profiles", "validate", str(fifo)], tmp_path)
    writer.wait(timeout=10)
    assert result.exit_code == 0 and "dgx-h100" in result.stdout


@pytest.mark.parametrize("argv", [
    ["calibrate", "import", str(P4DE), "-o", "{out}"],
    ["profiles", "from-nccl", str(TOPO), "-o", "{out}"],
    ["calibrate", "fit", "{tmp}/good.csv", "--base", "dgx-a100", "-o", "{out}"],
])
def test_an_output_that_is_a_device_or_pipe_is_refused_not_replaced(tmp_path: Path, argv: list[str]) -> None:
    """Before: `calibrate fit -o /dev/full` replaced the device node with a file and said it wrote the profile;
    `calibrate import -o /dev/full` and `from-nccl -o /dev/full` ended in an OSError traceback."""
    invoke(["calibrate", "import", str(P4DE), "-o", str(tmp_path / "good.csv")], tmp_path)
    fifo = tmp_path / "out.pipe"
    os.mkfifo(fifo)
    result = invoke([a.replace("{out}", str(fifo)) for a in argv], tmp_path)
    check_bad_input(result, 1, ["is a device or pipe, not a file"], tmp_path)
    assert fifo.is_fifo()


def test_a_full_disk_mid_run_is_one_line_and_keeps_the_rows_written(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "m.csv"
    writer = MeasurementWriter(path, "collectives", {"backend": "gloo"})
    row = {"op": "all_reduce", "size_bytes": 8, "num_ranks": 2, "num_nodes": 1, "group": "all", "algorithm": "ring",
           "dtype": "float32", "time_s_median": 1e-5, "iters": 5, "time_stat": "median", "source": "x"}
    writer.write_row(row)

    def full(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer._handle, "write", full)
    with pytest.raises(CalibrationError, match="No space left on device; the 1 rows written before are kept"):
        writer.write_row({**row, "size_bytes": 16})
    monkeypatch.undo()
    writer.close()
    assert [r["size_bytes"] for r in read_measurements(path).rows] == [8]


def test_a_profile_output_replaces_only_a_profile_commmodel_wrote(tmp_path: Path) -> None:
    """Before: `calibrate fit -o p.yaml` replaced any YAML without a word (a hand-written profile, or the --base
    profile itself); now only one whose header says commmodel wrote it."""
    invoke(["calibrate", "import", str(P4DE), "-o", str(tmp_path / "good.csv")], tmp_path)
    mine = tmp_path / "p.yaml"
    mine.write_text("precious: data\n")
    fit = ["calibrate", "fit", str(tmp_path / "good.csv"), "--base", "dgx-a100", "-o"]
    check_bad_input(invoke([*fit, str(mine)], tmp_path), 1, ["was not written by commmodel", "delete"], tmp_path)
    assert mine.read_text() == "precious: data\n"
    ours = tmp_path / "fitted.yaml"
    assert invoke([*fit, str(ours)], tmp_path).exit_code == 0
    assert invoke([*fit, str(ours)], tmp_path).exit_code == 0  # its own output: replaced, as a rerun wants


def test_a_draft_that_would_not_load_leaves_the_old_file(tmp_path: Path) -> None:
    """Before: `profiles from-nccl many.xml -o mysys.yaml` wrote the invalid 5000-GPU draft over the file, then
    failed naming the output file."""
    many = tmp_path / "many.xml"
    gpus = "".join(f'<pci busid="0000:{i // 256:02x}:{i % 256:02x}.0" class="0x030200"><gpu dev="{i}" sm="90" '
                   f'rank="{i}" gdr="1"/></pci>' for i in range(5000))
    many.write_text(f'<system version="1"><cpu numaid="0" arch="x86_64">{gpus}</cpu></system>')
    out = tmp_path / "mysys.yaml"
    assert invoke(["profiles", "from-nccl", str(TOPO), "-o", str(out)], tmp_path).exit_code == 0
    before = out.read_text()
    result = invoke(["profiles", "from-nccl", str(many), "-o", str(out)], tmp_path)
    check_bad_input(result, 1, ["the draft from", "would not load", "nothing written"], tmp_path)
    assert out.read_text() == before


def _nccl_log(tmp_path: Path, edit) -> Path:
    lines = P4DE.read_text().splitlines()
    out = tmp_path / "edited.txt"
    out.write_text("\n".join(edit(lines)) + "\n")
    return out


def _scale_rows(column: int, factor: float):
    def edit(lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            tokens = line.split()
            if tokens and tokens[0].isdigit() and int(tokens[0]) > 0 and len(tokens) > column:
                value = float(tokens[column]) * factor
                tokens[column] = f"{value:.6g}" if column else str(int(value))
                line = "  ".join(tokens)
            out.append(line)
        return out
    return edit


@pytest.mark.parametrize(("case", "edit", "fragments"), [
    # before: imported, then `calibrate fit` wrote a profile of 78.58 TB/s
    ("time-in-ms", _scale_rows(5, 1e-3), ["is not size / time", "other units"]),
    # before: "8e+15 PB - 2.147e+24 PB" imported, a 9.8e23 PB/s fit written
    ("size-1e30", _scale_rows(0, 1e30), ["past 1e+18", "fix or drop the line"]),
    # before: 29 rows imported from a run whose results failed nccl-tests' check
    ("out-of-bounds", lambda lines: [*lines, "# Out of bounds values : 12 FAILED"], ["results were wrong"]),
])
def test_an_nccl_tests_log_that_is_not_a_measurement_is_refused(tmp_path: Path, case: str, edit, fragments) -> None:
    path = _nccl_log(tmp_path, edit)
    check_bad_input(invoke(["calibrate", "import", str(path), "-o", str(tmp_path / "x.csv")], tmp_path), 1, fragments,
                    tmp_path)
    assert not (tmp_path / "x.csv").exists()


def test_a_run_that_stopped_on_an_error_keeps_its_rows_and_says_so(tmp_path: Path) -> None:
    lines = P4DE.read_text().splitlines()
    first_rows = [i for i, line in enumerate(lines) if line.split() and line.split()[0].isdigit()][:10]
    cut = lines[:first_rows[-1] + 1] + ["host-1: Test NCCL failure common.cu:958 'unhandled system error'"]
    path = tmp_path / "aborted.txt"
    path.write_text("\n".join(cut) + "\n")
    result = invoke(["calibrate", "import", str(path), "-o", str(tmp_path / "x.csv")], tmp_path)
    assert result.exit_code == 0 and "the run stopped on an error" in result.output
    assert len(read_measurements(tmp_path / "x.csv").rows) == 10  # every row before the failure


def test_a_json_report_that_says_its_run_failed_or_is_edited_is_refused(tmp_path: Path) -> None:
    report = json.loads((FIXTURES / "nccl_tests" / "mle-a100-1n_all_reduce_perf.json").read_text())
    for key, value, fragment in (("out_of_bounds", {"count": 5, "okay": "false"}, "failed its check"),
                                 ("errors", ["NCCL WARN Call to ibv_reg_mr failed"], "lists errors"),
                                 ("config", "x", "'config' is a str, not a dict")):
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps({**report, key: value}))
        check_bad_input(invoke(["calibrate", "import", str(path), "-o", str(tmp_path / "x.csv")], tmp_path), 1,
                        [fragment], tmp_path)


@pytest.mark.parametrize(("text", "command"), [
    ("preset: llama2-13b\nnum_layers: true\n", ["estimate", "-m", "{path}", "-n", "8", "-s", "dgx-h100"]),
    (None, ["profiles", "validate", "{path}"]),
])
def test_yes_no_is_not_a_whole_number(tmp_path: Path, text: str | None, command: list[str]) -> None:
    """Before: YAML `true` was read as 1: `gpus_per_node: true` validated and priced 16 GPUs as 16 nodes; a model
    with `num_layers: true` had 1 layer."""
    path = tmp_path / "x.yaml"
    if text is None:
        profile = (Path(__file__).parents[1] / "hardware_profiles" / "systems" / "dgx-h100.yaml").read_text()
        text = profile.replace("gpus_per_node: 8", "gpus_per_node: true")
    path.write_text(text)
    check_bad_input(invoke([a.replace("{path}", str(path)) for a in command], tmp_path), 1,
                    ["valid integer (got True)"], tmp_path)


def test_a_byte_order_mark_is_not_a_different_file(tmp_path: Path) -> None:
    """Before: a measurements CSV a spreadsheet saved with a UTF-8 BOM was 'not a commmodel measurements file', and
    a topology XML with one was read as an NCCL log ('no NCCL lines')."""
    invoke(["calibrate", "import", str(P4DE), "-o", str(tmp_path / "good.csv")], tmp_path)
    csv_bom = tmp_path / "bom.csv"
    csv_bom.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "good.csv").read_bytes())
    assert len(read_measurements(csv_bom).rows) == len(read_measurements(tmp_path / "good.csv").rows) > 0
    xml_bom = tmp_path / "bom.xml"
    xml_bom.write_bytes(b"\xef\xbb\xbf" + TOPO.read_bytes())
    assert invoke(["profiles", "from-nccl", str(xml_bom), "-o", str(tmp_path / "d.yaml")], tmp_path).exit_code == 0


def test_diagnose_says_what_a_path_that_is_not_a_trace_file_is(tmp_path: Path) -> None:
    """Before: /dev/null, an existing device, was 'no such trace file'."""
    check_bad_input(invoke(["diagnose", "-s", "dgx-a100", "/dev/null"], tmp_path), 1,
                    ["/dev/null: is not a file", "torch.profiler trace"], tmp_path)


def test_a_topology_without_a_gpu_drafts_nothing(tmp_path: Path) -> None:
    """Before: a topology of NICs only drafted an 8-GPU H100 profile and said 'no topology XML given'."""
    xml = tmp_path / "nogpu.xml"
    xml.write_text('<system version="1"><cpu numaid="0" arch="x86_64"><pci busid="0000:01:00.0" class="0x020700">'
                   '<nic><net name="mlx5_0" dev="0" speed="400000"/></nic></pci></cpu></system>\n')
    check_bad_input(invoke(["profiles", "from-nccl", str(xml), "-o", str(tmp_path / "d.yaml")], tmp_path), 1,
                    ["no <gpu> in the topology", "NCCL_TOPO_DUMP_FILE"], tmp_path)
    assert not (tmp_path / "d.yaml").exists()


@needs_evidence
def test_collectives_the_trace_does_not_time_are_marked_not_compared(tmp_path: Path) -> None:
    """Before: NCCL kernels with dur 0 printed 0.0 µs and no word; now each such group is UNTIMED, with one line."""
    def zero(doc: dict) -> None:
        for event in _nccl_kernels(doc):
            event["dur"] = 0

    path = _edited_trace(tmp_path, zero)
    out = invoke(["diagnose", "-s", "dgx-a100", str(path)], tmp_path)
    assert out.exit_code == 0 and "UNTIMED: their kernels last 0 µs" in out.stdout
    doc = json.loads(invoke(["diagnose", "-s", "dgx-a100", str(path), "--json"], tmp_path).stdout)
    assert all(r["untimed"] and r["flag"] is None for r in doc["collectives"])
