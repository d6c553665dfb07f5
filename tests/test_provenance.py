"""Provenance of collective predictions: calibrated (inside the sizes a calibration measured), sourced
(profile facts), extrapolated (a calibrated tier used outside its measured sizes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.collectives.provenance import prediction_provenance
from commmodel.hardware.models import MeasuredSizes
from commmodel.io.profiles import load_system, load_system_file

FIX = Path(__file__).parent / "fixtures" / "nccl_tests"
runner = CliRunner()
GiB = 2**30


def _ok(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory) -> Path:
    """`calibrate fit` on a published 8x H100 all_reduce sweep (8 B to 16 GiB, aws-p5 single node)."""
    folder = tmp_path_factory.mktemp("prov")
    _ok(["calibrate", "import", str(FIX / "aws-p5-1n_all_reduce_perf.txt"), "--out", str(folder / "node.csv"),
         "--system", "dgx-h100", "--nodes", "1"])
    _ok(["calibrate", "fit", str(folder / "node.csv"), "--out", str(folder / "node.yaml")])
    return folder / "node.yaml"


def test_calibrate_fit_records_the_measured_sizes(calibrated):
    sizes = load_system_file(calibrated).scale_up.calibrated_sizes
    assert (sizes.min_bytes, sizes.max_bytes) == (8, 16 * GiB)  # the table's first and last rows
    assert sizes.source.startswith("calibrated: node.csv")


def test_collective_json_says_calibrated_inside_and_extrapolated_beyond(calibrated):
    inside = json.loads(_ok(["collective", "all_reduce", "--size", "1GiB", "--gpus", "8", "--system", str(calibrated),
                             "--json"]))
    assert inside["best"]["provenance"]["kind"] == "calibrated"
    assert {a["provenance"]["kind"] for a in inside["algorithms"]} == {"calibrated"}
    beyond = json.loads(_ok(["collective", "all_reduce", "--size", "160GiB", "--gpus", "8", "--system",
                             str(calibrated), "--json"]))
    assert beyond["best"]["provenance"] == {"kind": "extrapolated", "tier": "scale_up", "calibrated_min_bytes": 8.0,
                                            "calibrated_max_bytes": 16.0 * GiB,
                                            "source": beyond["best"]["provenance"]["source"]}
    across = json.loads(_ok(["collective", "all_reduce", "--size", "1GiB", "--gpus", "16", "--system",
                             str(calibrated), "--json"]))
    assert across["best"]["provenance"]["kind"] == "sourced"  # the network tier was not calibrated
    assert across["best"]["provenance"]["tier"] == "scale_out"


def test_human_output_marks_only_extrapolated_numbers(calibrated):
    beyond = _ok(["collective", "all_reduce", "--size", "160GiB", "--gpus", "8", "--system", str(calibrated)])
    assert "! extrapolated: 160 GiB is outside the sizes scale_up was calibrated at (8 B to 16 GiB" in beyond
    inside = _ok(["collective", "all_reduce", "--size", "1GiB", "--gpus", "8", "--system", str(calibrated)])
    assert "extrapolated" not in inside
    shipped = _ok(["collective", "all_reduce", "--size", "160GiB", "--gpus", "8", "--system", "dgx-h100"])
    assert "extrapolated" not in shipped
    sweep = _ok(["sweep", "all_reduce", "--gpus", "8", "--system", str(calibrated), "--min-size", "8GiB",
                 "--max-size", "64GiB"]).splitlines()
    marked = [line.split()[0] for line in sweep if line.endswith("(extrapolated)")]
    assert marked == [str(32 * GiB), str(64 * GiB)]


def test_the_measured_range_is_inclusive_and_sourced_without_one():
    system = load_system("dgx-h100")
    assert {p.kind for p in prediction_provenance(system, [8, 1e9, 1e12], 8)} == {"sourced"}
    sizes = MeasuredSizes(min_bytes="1 KiB", max_bytes="1 GiB", source="calibrated: t.csv, 2025-01-01")
    calibrated = system.model_copy(update={"scale_up": system.scale_up.model_copy(update={"calibrated_sizes": sizes})})
    kinds = [p.kind for p in prediction_provenance(calibrated, [512, 1024, GiB, 10 * GiB], 8)]
    assert kinds == ["extrapolated", "calibrated", "calibrated", "extrapolated"]
    with pytest.raises(ValueError, match="below min_bytes"):  # pydantic wraps the ProfileError
        MeasuredSizes(min_bytes="1 GiB", max_bytes="1 KiB", source="calibrated: t.csv, 2025-01-01")


def test_estimate_json_says_where_each_collective_of_the_step_comes_from(calibrated):
    # One 8-GPU node calibrated from 8 B to 16 GiB: a TP group inside it is calibrated; a 64-GPU job's DP
    # groups cross nodes (the network tier was not calibrated: sourced); nothing is beyond the measured sizes.
    doc = json.loads(_ok(["estimate", "--model", "llama3-8b", "--gpus", "64", "--system", str(calibrated), "--tp", "8",
                          "--pp", "1", "--global-batch", "64", "--json"]))
    kinds = {p["collective"]: (p["kind"], p["tier"]) for p in doc["provenance"]}
    assert kinds["tp/all_gather"] == ("calibrated", "scale_up") and kinds["tp/reduce_scatter"] == ("calibrated", "scale_up")
    assert {v for k, v in kinds.items() if k.startswith("dp/")} == {("sourced", "scale_out")}
    for p in doc["provenance"]:
        assert p["num_ranks"] >= 2 and p["size_bytes"] > 0


def test_estimate_marks_a_collective_beyond_the_calibrated_sizes(tmp_path):
    # The same node calibrated only up to 8 MiB (a trimmed sweep): the 64 MiB TP messages are extrapolated.
    rows = (FIX / "aws-p5-1n_all_reduce_perf.txt").read_text().splitlines()
    keep = [r for r in rows if not r.strip() or r.lstrip().startswith("#") or not r.split()[0].isdigit()
            or int(r.split()[0]) <= 8 * 2**20]
    (tmp_path / "small_all_reduce_perf.txt").write_text("\n".join(keep) + "\n")
    _ok(["calibrate", "import", str(tmp_path / "small_all_reduce_perf.txt"), "--out", str(tmp_path / "n.csv"), "--system", "dgx-h100",
         "--nodes", "1"])
    _ok(["calibrate", "fit", str(tmp_path / "n.csv"), "--out", str(tmp_path / "n.yaml")])
    args = ["estimate", "--model", "llama3-8b", "--gpus", "8", "--system", str(tmp_path / "n.yaml"), "--tp", "8",
            "--pp", "1", "--global-batch", "8"]
    doc = json.loads(_ok([*args, "--json"]))
    tp = [p for p in doc["provenance"] if p["collective"].startswith("tp/")]
    assert tp and {p["kind"] for p in tp} == {"extrapolated"} and all(p["calibrated_max_bytes"] <= 8 * 2**20 for p in tp)
    assert "! extrapolated: tp/" in _ok(args)


def test_plan_json_gives_the_best_layouts_provenance(calibrated):
    doc = json.loads(_ok(["plan", "--model", "llama3-8b", "--gpus", "8", "--system", str(calibrated), "--json"]))
    best = doc["layouts"][0]
    kinds = {p["kind"] for p in doc["best_provenance"]}
    assert kinds <= {"calibrated", "extrapolated"}  # one node: every group stays on the calibrated NVLink tier
    groups = {best["tp"], best["dp"] * best["cp"]} - {1}  # the TP and the gradient groups of the best layout
    assert doc["best_provenance"] and {p["num_ranks"] for p in doc["best_provenance"]} <= groups
