"""``commmodel plot``: files written, JSON facts equal the model's, one-line errors, lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.collectives.topology import group_topology

runner = CliRunner()


def _png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plot_collective_json_and_png(tmp_path, dgx_h100):
    out = tmp_path / "ar.png"
    result = runner.invoke(app, ["plot", "collective", "all_reduce", "--gpus", "8", "--system", "dgx-h100",
                                 "--out", str(out), "--dpi", "50", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "collective" and doc["out"] == str(out) and doc["num_ranks"] == 8
    assert "ring" in doc["algorithms"]
    # ring-only: latency part = bandwidth part at S = α·n·B
    topo = group_topology(dgx_h100, 8)
    if doc["algorithms"] == ["ring"]:
        assert doc["balance_size_bytes"] == pytest.approx(topo.intra_latency_s * 8 * topo.intra_bw_bytes_per_s, rel=1e-6)
    assert _png_size(out) == (600, 240)  # 12 x 4.8 in at 50 dpi


def test_plot_collective_overlays_a_measured_setup(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("setup_id,collective,size_bytes,time_us,busbw_GBps\n"
                   "a,all_reduce,1048576,30,61\n"
                   "a,all_gather,1048576,20,40\n"
                   "b,all_reduce,1048576,99,9\n")
    out = tmp_path / "ar.svg"
    result = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "8", "-s", "dgx-h100", "--max-size", "1GiB",
                                 "--measured", str(csv), "--setup", "a", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"wrote {out}: all_reduce on 8 ranks of dgx-h100")
    assert out.read_text().count("<svg") == 1
    bad = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "8", "-s", "dgx-h100",
                              "--measured", str(csv), "--setup", "zzz", "--out", str(out)])
    assert bad.exit_code == 1 and "known: a, b" in bad.stderr


def test_plot_scaling_rows_match_records(tmp_path):
    out = tmp_path / "scaling.png"
    result = runner.invoke(app, ["plot", "scaling", "all_reduce", "--size", "1GiB", "-s", "dgx-h100",
                                 "-s", "pcie-2x-rtx2080ti", "--min-gpus", "8", "--max-gpus", "64",
                                 "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [r["num_gpus"] for r in doc["rows"]] == [8, 16, 32, 64]
    assert {r["system"] for r in doc["rows"]} == {"dgx-h100"}
    assert doc["left_out"] == ["pcie-2x-rtx2080ti (cannot hold 8..64 GPUs in whole nodes)"]
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "{tmp}/x.txt"], "unknown extension '.txt'"),
        (["--out", "{tmp}/missing/x.png"], "does not exist"),
        (["--out", "{tmp}/x.png", "--min-size", "4 parsecs"], "--min-size"),
        (["--out", "{tmp}/x.png", "--measured", "{tmp}/none.csv"], "no such file"),
    ],
)
def test_plot_errors_are_one_line_exit_1(tmp_path, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    result = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "8", "-s", "dgx-h100", *args])
    assert result.exit_code == 1
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_cli_start_up_does_not_import_matplotlib_or_pandas():
    code = ("import sys, commmodel.cli.app; "
            "print(sorted(m for m in ('matplotlib', 'pandas', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_measured_rows_must_match_the_group_size(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("# commmodel measurements v1 (collectives)\n# backend: gloo\n"
                   "op,size_bytes,num_ranks,time_s_median,busbw_GBps\n"
                   "all_reduce,1048576,2,0.001,1.0\n")
    ok = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "2", "-s", "dgx-h100", "--measured", str(csv),
                             "--out", str(tmp_path / "ok.png"), "--json"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["plot", "collective", "all_reduce", "-n", "8", "-s", "dgx-h100", "--measured", str(csv),
                              "--out", str(tmp_path / "bad.png")])
    assert bad.exit_code == 1 and "no all_reduce rows on 8 ranks; it has 2" in bad.stderr
