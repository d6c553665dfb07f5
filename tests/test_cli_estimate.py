"""``commmodel estimate``: the DESIGN §8 JSON contract, human output and one-line errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commmodel.cli.app import app

runner = CliRunner()

BASE = ["estimate", "--model", "gpt3-175b", "--gpus", "1024", "--system", "dgx-h100", "--tp", "8", "--pp", "8",
        "--global-batch", "1536", "--recompute", "selective", "--sequence-parallel", "--vpp", "2"]


def test_json_contract() -> None:
    result = runner.invoke(app, [*BASE, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    required = {"layout", "step_time_s", "tokens_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu",
                "hfu", "memory_bytes_per_gpu", "fits", "bound", "exposed_comm_fraction", "breakdown", "advice"}
    assert required <= set(doc)
    assert set(doc["layout"]) == {"tp", "pp", "dp", "micro_batch", "global_batch", "zero", "recompute",
                                  "sequence_parallel", "vpp", "cp", "ep", "etp"}
    assert doc["layout"]["dp"] == 16 and doc["layout"]["vpp"] == 2
    # the default stack (megatron-core) runs the distributed optimizer: DP reduce-scatter + all-gather
    assert {"compute", "tp/reduce_scatter", "tp/all_gather", "pp/p2p", "pp/bubble", "dp/reduce_scatter",
            "dp/all_gather"} <= set(doc["breakdown"])
    assert doc["stack"] == "megatron-core" and doc["dtype"] == "bf16" and len(doc["assumptions"]) > 3
    assert all(set(v) == {"link_s", "exposed_s"} for v in doc["breakdown"].values())
    assert doc["bound"] in ("compute", "communication", "bubble", "memory")
    total = sum(v["exposed_s"] for v in doc["breakdown"].values())
    assert abs(total - doc["step_time_s"]) <= 1e-9 * doc["step_time_s"]
    assert doc["tokens_per_s"] * doc["step_time_s"] == __import__("pytest").approx(1536 * 2048)
    for advice in doc["advice"]:
        assert advice["step_time_s"] > 0 and advice["change"]


def test_without_sp_and_with_zero_keys() -> None:
    doc = json.loads(runner.invoke(app, ["estimate", "-m", "llama3-8b", "-n", "16", "-s", "dgx-h100", "--tp", "2",
                                         "--zero", "1", "--no-sequence-parallel", "--global-batch", "64", "--json"]).stdout)
    assert "tp/all_reduce" in doc["breakdown"] and "tp/reduce_scatter" not in doc["breakdown"]
    assert {"dp/reduce_scatter", "dp/all_gather"} <= set(doc["breakdown"]) and "dp/all_reduce" not in doc["breakdown"]


def test_human_output_has_breakdown_table() -> None:
    result = runner.invoke(app, BASE)
    assert result.exit_code == 0, result.output
    assert "step time" in result.stdout and "MFU" in result.stdout
    assert "term" in result.stdout and "tp/reduce_scatter" in result.stdout and "pp/bubble" in result.stdout


def test_network_flag_changes_dp_time() -> None:
    args = ["estimate", "-m", "gpt3-13b", "-n", "64", "-s", "dgx-h100", "--global-batch", "512", "--no-overlap", "--zero", "0",
            "--json"]
    fast = json.loads(runner.invoke(app, args).stdout)
    slow = json.loads(runner.invoke(app, [*args, "--network", "eth-100g:1"]).stdout)
    assert slow["breakdown"]["dp/all_reduce"]["link_s"] > 10 * fast["breakdown"]["dp/all_reduce"]["link_s"]
    assert slow["step_time_s"] > fast["step_time_s"]


def test_parameter_count_model_and_overrides() -> None:
    doc = json.loads(runner.invoke(app, ["estimate", "-m", "1B", "-n", "8", "-s", "dgx-h100", "--seq-len", "4096",
                                         "--global-batch", "32", "--json"]).stdout)
    assert doc["model"]["seq_len"] == 4096 and 0.8e9 < doc["model"]["num_params"] < 1.2e9


def test_bad_layout_names_every_factor() -> None:
    result = runner.invoke(app, ["estimate", "-m", "llama3-70b", "-n", "64", "-s", "dgx-h100", "--tp", "3", "--pp",
                                 "3", "--vpp", "30", "--micro-batch", "3", "--global-batch", "10"])
    assert result.exit_code == 1
    err = result.stderr
    assert err.startswith("error: ") and err.count("\n") == 1
    for part in ("tp 3 × pp 3 = 9 does not divide 64 GPUs", "pp 3 × vpp 30 = 90 virtual stages exceed layers 80 + 2",
                 "heads 64 are not divisible by tp 3", "global batch 10 is not divisible by micro-batch 3 × dp 7 = 21"):
        assert part in err


def test_bad_values_exit_1() -> None:
    for extra in (["--recompute", "sometimes"], ["--compression", "zip"], ["--model", "nonexistent-model"]):
        result = runner.invoke(app, ["estimate", "-m", "gpt3-1.3b", "-n", "8", "-s", "dgx-h100", *extra])
        assert result.exit_code == 1, (extra, result.output)
        assert result.stderr.startswith("error: ")


def test_small_boxes_without_a_network() -> None:
    """A 2-GPU PCIe box has no scale-out tier: one GPU, or tp 2 inside it, must still be priced."""
    for extra in (["-n", "1"], ["-n", "2", "--tp", "2"], ["-n", "2", "--pp", "2", "--global-batch", "4"]):
        result = runner.invoke(app, ["estimate", "-m", "gpt3-350m", "-s", "pcie-2x-rtx2080ti", *extra, "--json"])
        assert result.exit_code == 0, (extra, result.output)
        assert json.loads(result.stdout)["step_time_s"] > 0
