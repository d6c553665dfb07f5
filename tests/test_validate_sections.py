"""`commmodel validate` reports both sections against DESIGN §9 targets (sources in commmodel/data)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commmodel.cli.app import app

runner = CliRunner()


def test_validate_json_has_collective_and_training_sections():
    result = runner.invoke(app, ["validate", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert set(document) >= {"collectives", "training"}
    training = document["training"]
    # Narayanan 2021 Table 1 (10 rows) + Korthikanti 2022 (5 rows): TFLOP/s per GPU or MFU.
    throughput = [r for r in training["records"] if r["metric"] in ("tflops_per_gpu", "mfu")]
    assert len(throughput) == 15
    # DESIGN §9: throughput within 10% mean absolute error, no row worse than 20%.
    assert training["summary"]["throughput"]["mae_pct"] <= 10.0
    assert max(abs(r["error_pct"]) for r in throughput) <= 20.0
    # issue 4: Korthikanti iteration times within 15%.
    times = [r for r in training["records"] if r["metric"] == "iteration_time_s"]
    assert len(times) == 4 and all(abs(r["error_pct"]) <= 15.0 for r in times)


def test_validate_human_output_names_targets():
    result = runner.invoke(app, ["validate"])
    assert result.exit_code == 0
    assert "Megatron-LM" in result.output and "nccl-tests" in result.output
    assert "MAE" in result.output
