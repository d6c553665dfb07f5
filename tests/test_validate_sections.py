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


def test_validate_reports_todays_stacks_and_moe_per_stack_with_verdicts():
    """Issue 12/13: `validate` scores training_modern.yaml per stack and generation and training_moe.yaml, each
    line with its target and verdict; the JSON carries the same figures (the human table prints them)."""
    result = runner.invoke(app, ["validate", "--json"])
    document = json.loads(result.stdout)
    modern, moe = document["modern"], document["moe"]
    stacks = modern["summary"]["stack"]
    assert {"fsdp2", "megatron-core"} <= set(stacks)
    for name, s in stacks.items():
        rows = [r for r in modern["records"] if r["stack"] == name]
        assert s["count"] == len(rows)
        assert abs(s["mae_pct"] - sum(abs(r["error_pct"]) for r in rows) / len(rows)) < 1e-9
    priced = [r for r in moe["records"] if "error" not in r]
    assert moe["summary"]["count"] == len(priced) >= 10
    assert abs(moe["summary"]["mae_pct"] - sum(abs(r["error_pct"]) for r in priced) / len(priced)) < 1e-9
    assert moe["summary"]["pass"] == (moe["summary"]["mae_pct"] <= 15.0 and abs(moe["summary"]["worst_pct"]) <= 30.0)
    human = runner.invoke(app, ["validate"]).output
    assert "stack megatron-core" in human and "MoE n=" in human and "target MAE <= 15%" in human


def test_moe_runs_are_priced_under_the_megatron_core_stack():
    from commmodel.step.stacks import get_stack
    from commmodel.validation.moe import moe_run_options

    options = moe_run_options({"dispatcher": "hybridep", "routing": "forced_balance"})  # its own dispatcher now
    assert options.stack == "megatron-core" and options.moe_dispatcher == "hybridep" and options.moe_imbalance == 1.0
    assert options.flash_attention_rate is get_stack("megatron-core").options["flash_attention_rate"]
