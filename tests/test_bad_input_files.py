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
    check_bad_input(result, 1, ["the draft from", "would not load", "nothing written", "!.tmp"], tmp_path)
    assert out.read_text() == before  # and the line names mysys.yaml, not the temporary file the check read


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


# The audit of 2026-11-29 (ENAMETOOLONG, symlink loops, 5000-digit numbers, silent pipes, --measured devices).
H100 = ["-n", "8", "-s", "dgx-h100"]
LONG = "a" * 300
SYSTEM_YAML = Path(__file__).parents[1] / "hardware_profiles" / "systems" / "dgx-h100.yaml"
NT_JSON = FIXTURES / "nccl_tests" / "mle-a100-1n_all_reduce_perf.json"


def test_measured_goes_through_the_shared_reader(tmp_path: Path) -> None:
    """Before: `plot collective --measured /dev/zero` read forever and ate GBs (path.read_text)."""
    plot = ["plot", "collective", "all_reduce", *H100, "-o", "{tmp}/z.png", "--measured"]
    check_bad_input(invoke([*plot, "/dev/zero"], tmp_path), 1, ["--measured /dev/zero: is a device, not a file"],
                    tmp_path)
    fifo = tmp_path / "m.csv"
    os.mkfifo(fifo)
    check_bad_input(invoke([*plot, str(fifo)], tmp_path), 1, [f"--measured {fifo}: a pipe with no writer"], tmp_path)
    assert not (tmp_path / "z.png").exists()


@pytest.mark.parametrize("argv", [
    ["plot", "collective", "all_reduce", *H100, "-o", "{long}.png"],
    ["plot", "calibration", "{tmp}/good.csv", "-o", "{long}.png"],
    ["calibrate", "import", str(P4DE), "-o", "{long}.csv"],
    ["calibrate", "fit", "{tmp}/good.csv", "--base", "dgx-a100", "-o", "{long}.yaml"],
    ["calibrate", "compute", "-o", "{long}.csv"],
    ["profiles", "from-nccl", str(TOPO), "-o", "{long}.yaml"],
], ids=["plot-collective", "plot-calibration", "import", "fit", "compute", "from-nccl"])
def test_an_output_name_too_long_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    """Before: OSError 'File name too long' traceback from the --out check; now that check says it, the path
    shortened to its ends and length."""
    invoke(["calibrate", "import", str(P4DE), "-o", str(tmp_path / "good.csv")], tmp_path)
    long = tmp_path / LONG
    result = invoke([a.replace("{long}", str(long)) for a in argv], tmp_path)
    check_bad_input(result, 1, ["--out ", "characters): cannot write there (File name too long", "255 bytes",
                                "choose another path", f"!{LONG}"], tmp_path)


@pytest.mark.parametrize("argv", [
    ["estimate", "-m", "{long}.yaml", *H100],
    ["estimate", "-m", "{long}.json", *H100],
    ["diagnose", "{long}.json", "-s", "dgx-h100"],
    ["profiles", "validate", "{long}.yaml"],
], ids=["model-yaml", "model-hf", "diagnose", "validate"])
def test_an_input_name_too_long_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    """Before: OSError tracebacks from io/hf_config.is_hf_config, diagnose's trace_files and profiles validate."""
    result = invoke([a.replace("{long}", str(tmp_path / LONG)) for a in argv], tmp_path)
    check_bad_input(result, 1, ["characters): cannot read (File name too long", "255 bytes", f"!{LONG}"], tmp_path)


def test_a_model_size_too_long_to_be_a_path_is_not_read_as_one(tmp_path: Path) -> None:
    """Before: `-m 999…B` (5000 digits) was an OSError traceback from is_hf_config's is_dir()."""
    check_bad_input(invoke(["estimate", "-m", "9" * 5000 + "B", *H100], tmp_path), 1, ["!File name too long"],
                    tmp_path)


@pytest.mark.parametrize("argv", [
    ["diagnose", "{loop}", "-s", "dgx-h100"],
    ["profiles", "from-nccl", "{loop}", "-o", "{tmp}/x.yaml"],
    ["estimate", "-m", "{loop}", *H100],
], ids=["diagnose", "from-nccl", "estimate"])
def test_a_symlink_loop_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    """Before: `RuntimeError: Symlink loop` from Path.resolve() in diagnose and from-nccl."""
    (tmp_path / "loop1.yaml").symlink_to("loop2.yaml")
    (tmp_path / "loop2.yaml").symlink_to("loop1.yaml")
    result = invoke([a.replace("{loop}", str(tmp_path / "loop1.yaml")) for a in argv], tmp_path)
    check_bad_input(result, 1, ["loop1.yaml: cannot read (Too many levels of symbolic links"], tmp_path)
    assert not (tmp_path / "x.yaml").exists()


def _bignum_files(tmp_path: Path) -> dict[str, Path]:
    """A system YAML, a model YAML, a config.json and an nccl-tests -J report, each with one 5000-digit integer."""
    big = "9" * 5000
    files = {"system.yaml": SYSTEM_YAML.read_text().replace("gpus_per_node: 8", f"gpus_per_node: {big}"),
             "model.yaml": f"preset: llama2-13b\nnum_layers: {big}\n",
             "config.json": json.dumps({"hidden_size": 4096, "num_hidden_layers": 1, "num_attention_heads": 32,
                                        "vocab_size": 32000}).replace(": 1,", f": {big},"),
             "nt.json": NT_JSON.read_text().replace('"nthreads": 1', f'"nthreads": {big}', 1)}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {name: tmp_path / name for name in files}


@pytest.mark.parametrize(("name", "argv"), [
    ("system.yaml", ["estimate", "-m", "7B", "-n", "8", "-s", "{file}"]),
    ("system.yaml", ["profiles", "validate", "{file}"]),
    ("model.yaml", ["estimate", "-m", "{file}", *H100]),
    ("config.json", ["estimate", "-m", "{file}", *H100]),
    ("nt.json", ["calibrate", "import", "{file}", "-o", "{tmp}/x.csv"]),
], ids=["system", "validate", "model", "hf-config", "nccl-tests-json"])
def test_a_5000_digit_number_in_a_file_is_one_line(tmp_path: Path, name: str, argv: list[str]) -> None:
    """Before: ValueError 'Exceeds the limit (4300 digits) for integer string conversion' tracebacks."""
    file = _bignum_files(tmp_path)[name]
    result = invoke([a.replace("{file}", str(file)) for a in argv], tmp_path)
    check_bad_input(result, 1, [f"{file}: line ", "a number of 5000 digits, more than the 4300", "fix the value",
                                "!set_int_max_str_digits"], tmp_path)
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("argv", [
    ["estimate", "-m", "7B", "-n", "8", "-s", "/dev/stdin"],
    ["plot", "collective", "all_reduce", *H100, "-o", "{tmp}/z.png", "--measured", "/dev/stdin"],
], ids=["system", "measured"])
def test_a_pipe_whose_writer_never_writes_is_refused(tmp_path: Path, argv: list[str]) -> None:
    """Before: `sleep 30 | commmodel estimate -s /dev/stdin` waited for the writer to exit. The pipe's write end
    stays open here (as `sleep 30 |` holds it); the timeout is only a safety net."""
    read_end, write_end = os.pipe()
    try:
        result = subprocess.run([sys.executable, "-m", "commmodel", *[a.replace("{tmp}", str(tmp_path)) for a in argv]],
                                stdin=read_end, capture_output=True, text=True, timeout=60)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.returncode == 1 and "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert "/dev/stdin: nothing arrived on this pipe in 5 s; pipe a file that is being written" in result.stderr


@pytest.mark.parametrize("argv", [
    ["estimate", "-m", "{fifo}", *H100],
    ["calibrate", "import", "{fifo}", "-o", "{tmp}/x.csv"],
    ["calibrate", "fit", "{fifo}"],
    ["profiles", "validate", "{fifo}"],
    ["plot", "calibration", "{fifo}", "-o", "{tmp}/c.png"],
], ids=["model", "import", "fit", "validate", "plot-calibration"])
def test_a_named_pipe_held_open_but_silent_is_refused(tmp_path: Path, monkeypatch, argv: list[str]) -> None:
    """A writer that opened the FIFO and sends nothing: refused after the read deadline (shortened here), where
    before the command blocked until the writer exited."""
    from commmodel.io import yaml_read

    monkeypatch.setattr(yaml_read, "PIPE_FIRST_BYTE_S", 0.6)
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # Linux: a FIFO opened read-write holds a writer without blocking
    try:
        result = invoke([a.replace("{fifo}", str(fifo)) for a in argv], tmp_path)
    finally:
        os.close(writer)
    check_bad_input(result, 1, [f"{fifo}: nothing arrived on this pipe in 0.6 s", "pass the file itself"], tmp_path)


def test_a_pipe_that_pauses_after_its_first_bytes_is_read_to_the_end(tmp_path: Path, monkeypatch) -> None:
    """The deadline is for the first byte only: once data flows, a pause longer than it does not cut the file."""
    import threading

    from commmodel.io import yaml_read

    monkeypatch.setattr(yaml_read, "PIPE_FIRST_BYTE_S", 0.3)
    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    text = SYSTEM_YAML.read_bytes()

    def write() -> None:
        with open(fifo, "wb", buffering=0) as pipe:
            pipe.write(text[:100])
            threading.Event().wait(0.8)  # longer than the deadline, after the first bytes
            pipe.write(text[100:])

    thread = threading.Thread(target=write)
    thread.start()
    try:
        assert yaml_read.read_user_bytes(fifo, CalibrationError, "x") == text
    finally:
        thread.join(timeout=10)


def test_a_named_pipe_without_writer_is_not_called_empty(tmp_path: Path) -> None:
    """Before: a FIFO nobody opened for writing was 'the file is empty'."""
    fifo = tmp_path / "nt.txt"
    os.mkfifo(fifo)
    check_bad_input(invoke(["calibrate", "import", str(fifo), "-o", str(tmp_path / "x.csv")], tmp_path), 1,
                    [f"{fifo}: a pipe with no writer", "start the command that writes it first", "!empty"], tmp_path)


@pytest.mark.parametrize("argv", [
    ["plot", "collective", "all_reduce", *H100, "-o", ""],
    ["calibrate", "import", str(P4DE), "-o", ""],
], ids=["plot", "import"])
def test_an_empty_out_says_it_is_empty(tmp_path: Path, argv: list[str]) -> None:
    """Before: `-o ''` was '--out .: is a folder' (typer reads '' as Path('.'))."""
    check_bad_input(invoke(argv, tmp_path), 1, ["--out: the path is empty", "give a file name", "!is a folder"],
                    tmp_path)


def test_an_output_name_just_under_the_limit_is_written(tmp_path: Path) -> None:
    """Before: a 253-byte --out passed the check, then its temporary `.NAME.tmp.yaml` (over 255 bytes) was an OSError
    traceback; the temporary name is now cut to fit."""
    out = tmp_path / ("b" * 248 + ".yaml")
    assert invoke(["profiles", "from-nccl", str(TOPO), "-o", str(out)], tmp_path).exit_code == 0
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_a_file_that_is_no_profile_is_named_so_without_printing_its_lines(tmp_path: Path) -> None:
    """`-s /etc/shadow` listed every line of the file (a password hash among them) as an unknown key."""
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$saltsalt$" + "x" * 80 + ":19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    result = invoke(["estimate", "--model", "1B", "--gpus", "8", "--system", str(secret)], tmp_path)
    check_bad_input(result, 1, ["not a system profile", "none of its 2 keys", "!saltsalt"], tmp_path)


def test_a_file_that_is_no_model_is_named_so_without_printing_its_lines(tmp_path: Path) -> None:
    secret = tmp_path / "shadow.yaml"
    secret.write_text("root:$6$saltsalt$" + "x" * 80 + ":19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    result = invoke(["estimate", "--model", str(secret), "--gpus", "8", "--system", "dgx-h100"], tmp_path)
    check_bad_input(result, 1, ["not a model", "none of its 2 keys", "!saltsalt"], tmp_path)
