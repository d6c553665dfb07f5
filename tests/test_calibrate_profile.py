"""Fit -> profile: the model as its own oracle, published tables, the written YAML, the fit CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from commmodel.calibrate.apply import calibrate_system
from commmodel.calibrate.knobs import get_knob, set_knob
from commmodel.calibrate.measured import pricing_selection
from commmodel.calibrate.check import check_group
from commmodel.calibrate.groups import fit_measurements
from commmodel.cli.app import app
from commmodel.collectives import busbw_factor, collective_cost
from commmodel.hardware.cluster import Cluster
from commmodel.io.measurements import write_measurements
from commmodel.io.nccl_tests import read_nccl_tests
from commmodel.io.profiles import load_system

FIX = Path(__file__).parent / "fixtures" / "nccl_tests"
SIZES = 2.0 ** np.arange(3, 31)


def model_rows(system, op, num_ranks, ranks_per_node, algorithm):
    """Rows measured on a 'cluster' that behaves exactly like commmodel's model of ``system``."""
    view = Cluster.for_gpus(system, num_ranks, ranks_per_node).system
    times = collective_cost(op, SIZES, view, num_ranks, ranks_per_node=ranks_per_node, algorithm=algorithm,
                            selection=pricing_selection(view)).time_s
    return [{"op": op, "size_bytes": int(s), "num_ranks": num_ranks, "num_nodes": num_ranks // ranks_per_node,
             "group": "all", "algorithm": algorithm, "protocol": "", "time_s_median": float(t)}
            for s, t in zip(SIZES, times)]


def test_round_trip_scale_up_recovers_the_hidden_numbers():
    shipped = load_system("dgx-h100")
    hidden = set_knob(set_knob(shipped, ("scale_up", "efficiency"), 0.6), ("scale_up", "latency_s"), 3e-6)
    groups = fit_measurements(model_rows(hidden, "all_reduce", 8, 8, "ring"))
    calibrated, calibration = calibrate_system(shipped, groups)
    assert get_knob(calibrated, ("scale_up", "efficiency")) == pytest.approx(0.6, rel=0.01)
    assert get_knob(calibrated, ("scale_up", "latency_s")) == pytest.approx(3e-6, rel=0.02)
    assert [t.tier for t in calibration.tiers] == ["scale_up"]


def test_round_trip_scale_out_recovers_the_hidden_numbers():
    shipped = load_system("dgx-h100")
    hidden = set_knob(set_knob(shipped, ("scale_out", "efficiency"), 0.5), ("scale_out", "latency_s"), 8e-6)
    groups = fit_measurements(model_rows(hidden, "all_reduce", 16, 8, "ring"))
    calibrated, calibration = calibrate_system(shipped, groups)
    assert [t.tier for t in calibration.tiers] == ["scale_out"]
    assert get_knob(calibrated, ("scale_out", "efficiency")) == pytest.approx(0.5, rel=0.01)
    assert get_knob(calibrated, ("scale_out", "latency_s")) == pytest.approx(8e-6, rel=0.02)


# Published tables (validation/nccl_tests.csv, rebuilt in tests/fixtures/nccl_tests, see README there), each fitted
# on the profile of the same hardware. Target (issue 6): the calibrated profile predicts the table's
# large-message (>= 64 MiB) busbw within 5%, median over the rows.
PUBLISHED = [
    # Anthony-Hoo AutoDL post: 2x RTX 2080 Ti, PCIe without P2P, all_reduce 8 B-1 GiB.
    ("autodl-2080ti_5_collectives.txt", {"op": "all_reduce"}, "pcie-2x-rtx2080ti", 0.05),
    # stas00/ml-engineering@744d01e: 8x A100 NVSwitch, all_reduce 32 KiB-16 GiB (-J report).
    ("mle-a100-1n_all_reduce_perf.json", {}, "dgx-a100", 0.05),
    # aws-samples/awsome-distributed-training@7217859: 2x p4de (16 A100) over EFA, 8 B-2 GiB. Within 1% once the
    # collective model prices 2-node trees (NCCL's choice there, busbw above the NIC rate); ~6% with rings alone.
    ("aws-p4de-2n-efa_all_reduce.txt", {}, "aws-p4de", 0.10),
    # aws-samples/awsome-distributed-training@7217859 aws-batch: p5 (8 H100), 8 B-16 GiB. The busbw keeps rising
    # from 360 GB/s at 64 MiB to 483 GB/s at 16 GiB, which one α-β curve follows to ~7% only: DESIGN §9's 10%.
    ("aws-p5-1n_all_reduce_perf.txt", {"nodes": 1}, "aws-p5", 0.10),
]


@pytest.mark.parametrize("name, options, base, tolerance", PUBLISHED)
def test_published_table_large_message_busbw(name, options, base, tolerance):
    rows = [r for r in read_nccl_tests(FIX / name, **{k: v for k, v in options.items() if k != "op"}).rows
            if r["op"] == options.get("op", r["op"])]
    groups = fit_measurements(rows)
    calibrated, _ = calibrate_system(load_system(base), groups)
    check = check_group(calibrated, groups[0])
    median, worst = check.busbw_rel_err
    assert median <= tolerance, (median, worst)
    # The check is what the model says: recompute the 1 GiB busbw independently.
    big = next(r for r in rows if r["size_bytes"] == 2**30)
    n, per_node = groups[0].fit.num_ranks, groups[0].ranks_per_node
    view = Cluster.for_gpus(calibrated, n, per_node).system
    time_s = float(collective_cost("all_reduce", 2.0**30, view, n, ranks_per_node=per_node, selection="nccl").time_s)
    busbw_GBps = 2.0**30 / time_s * float(busbw_factor("all_reduce", n)) / 1e9
    assert busbw_GBps == pytest.approx(big["busbw_GBps"], rel=2 * tolerance)


def _import(tmp_path, name, *extra) -> Path:
    out = tmp_path / "m.csv"
    result = CliRunner().invoke(app, ["calibrate", "import", str(FIX / name), "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return out


def test_fit_cli_writes_a_loadable_profile_that_changes_answers(tmp_path):
    csv = _import(tmp_path, "autodl-2080ti_5_collectives.txt", "--system", "pcie-2x-rtx2080ti")
    out = tmp_path / "calibrated.yaml"
    result = CliRunner().invoke(app, ["calibrate", "fit", str(csv), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert set(doc) == {"file", "groups", "profile", "checks", "notes"}
    assert doc["profile"]["written"] and doc["profile"]["base"] == "pcie-2x-rtx2080ti"
    assert {g["op"] for g in doc["groups"]} == {"all_reduce", "all_gather", "broadcast", "reduce", "all_to_all"}
    seg = doc["groups"][0]["segments"][-1]
    assert seg["alpha_ci_s"][0] <= seg["alpha_s"] <= seg["alpha_ci_s"][1]
    raw = yaml.safe_load(out.read_text())
    assert raw["name"] == "pcie-2x-rtx2080ti-calibrated" and raw["scale_up"]["link"]  # terse form kept
    calibrated, shipped = load_system(str(out)), load_system("pcie-2x-rtx2080ti")
    for field in ("efficiency", "latency_s"):
        sourced = getattr(calibrated.scale_up, field)
        assert sourced.source.startswith("calibrated: m.csv, ")
    assert calibrated.gpu.matmul_efficiency.source == shipped.gpu.matmul_efficiency.source  # untouched
    assert "calibrated" not in calibrated.scale_up.bw_bytes_per_s.source
    # The 2080 Ti table: 1 GiB all_reduce 268588 us; the calibrated profile says so within 1%.
    time_s = float(collective_cost("all_reduce", 2.0**30, calibrated, 2).time_s)
    assert time_s == pytest.approx(268588e-6, rel=0.01)
    assert time_s != pytest.approx(float(collective_cost("all_reduce", 2.0**30, shipped, 2).time_s), rel=1e-4) or \
        calibrated.scale_up.efficiency.value != shipped.scale_up.efficiency.value


def test_collective_cli_answers_with_the_calibrated_profile(tmp_path):
    csv = _import(tmp_path, "aws-p4de-2n-efa_all_reduce.txt", "--system", "aws-p4de")
    out = tmp_path / "p4de.yaml"
    assert CliRunner().invoke(app, ["calibrate", "fit", str(csv), "--out", str(out)]).exit_code == 0
    answers = []
    for system in ("aws-p4de", str(out)):
        result = CliRunner().invoke(app, ["collective", "all_reduce", "--size", "2GiB", "--gpus", "16",
                                          "--system", system, "--json"])
        assert result.exit_code == 0, result.output
        answers.append(json.loads(result.output)["best"]["busbw_GBps"])
    assert answers[1] == pytest.approx(78.33, rel=0.05)  # the table's 2 GiB busbw
    assert answers[0] != pytest.approx(answers[1], rel=0.01)


def test_fit_without_base_prints_fits_and_needs_base_to_write(tmp_path):
    csv = _import(tmp_path, "aws-p5-1n_all_reduce_perf.txt", "--nodes", "1")
    runner = CliRunner()
    shown = runner.invoke(app, ["calibrate", "fit", str(csv)])
    assert shown.exit_code == 0 and "all_reduce on 8 ranks (1 node, auto)" in shown.output
    refused = runner.invoke(app, ["calibrate", "fit", str(csv), "--out", str(tmp_path / "p.yaml")])
    assert refused.exit_code == 1 and "pass --base SYSTEM" in refused.output
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("sizes, times, message", [
    ([1024, 1024, 1024], [1e-5, 1.1e-5, 0.9e-5], "only 1 distinct message size"),
    ([8, 64, 512, 4096], [2e-5, 2e-5, 2e-5, 2e-5], "all 4 times equal"),
    ([8, 64, 512, 4096, 32768], [5e-4, 4e-4, 3e-4, 2e-4, 1e-4], "time falls as size grows"),
])
def test_fit_cli_degenerate_input_is_one_line(tmp_path, sizes, times, message):
    rows = [{"op": "all_reduce", "size_bytes": s, "num_ranks": 2, "num_nodes": 1, "group": "all", "algorithm": "auto",
             "time_s_median": t} for s, t in zip(sizes, times)]
    csv = tmp_path / "d.csv"
    write_measurements(csv, "collectives", {}, rows)
    result = CliRunner().invoke(app, ["calibrate", "fit", str(csv), "--base", "dgx-h100"])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("error: all_reduce on 2 ranks")


def test_groups_the_base_cannot_hold_are_noted(tmp_path):
    rows = read_nccl_tests(FIX / "aws-p4de-2n-efa_all_reduce.txt").rows  # 8 ranks per node
    groups = fit_measurements(rows)
    _, calibration = calibrate_system(load_system("pcie-2x-rtx2080ti"), groups)  # 2 GPUs per node
    assert not calibration.tiers
    assert any("exceed the 2 GPUs per node" in note for note in calibration.notes)


def test_profiles_show_prints_what_a_calibration_fitted(tmp_path):
    """`profiles show` (the human table, "every number with its source") left out a fitted Simple fixed cost, the
    calibrated sizes and a host library's transport, which only --json held."""
    from typer.testing import CliRunner

    import yaml

    from commmodel.cli.app import app
    from commmodel.io.profiles import load_system

    system = load_system("cpu-host")
    fitted = {key: {"value": value, "source": "calibrated: test.csv"} for key, value in (
        ("call_s", "90 us"), ("message_s", "50 us"), ("bw_bytes_per_s", "4.4 GB/s"),
        ("reduce_bw_bytes_per_s", "7.6 GB/s"))}
    up = {**system.scale_up.model_dump(mode="json"), "simple_fixed_s": {"value": "99.6 us", "source": "calibrated: t"},
          "calibrated_sizes": {"min_bytes": "1 KiB", "max_bytes": "4 MiB", "source": "calibrated: test.csv"}}
    doc = {**system.model_dump(mode="json"), "scale_up": up, "host_libraries": {"gloo": fitted}}
    path = tmp_path / "fitted.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(app, ["profiles", "show", str(path)])
    assert result.exit_code == 0, result.output
    for text in ("simple fix", "99.6 us", "calibrated", "1 KiB-4 MiB", "Host library gloo", "reduce bw", "7.6 GB/s"):
        assert text in result.output, text
