"""``commmodel collective``, ``sweep`` and ``validate`` through the CLI (typer CliRunner)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.io.validation_data import read_nccl_rows

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def run_json(*args):
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_collective_json_keys_and_numbers():
    doc = run_json("collective", "all_reduce", "--size", "1GiB", "--gpus", "16", "--system", "dgx-h100")
    assert {"op", "size_bytes", "num_ranks", "num_nodes", "system", "best", "algorithms"} <= doc.keys()
    assert (doc["op"], doc["size_bytes"], doc["num_ranks"], doc["num_nodes"]) == ("all_reduce", 2**30, 16, 2)
    assert {"algorithm", "time_s", "algbw_GBps", "busbw_GBps"} <= doc["best"].keys()
    for rec in doc["algorithms"]:
        assert {"algorithm", "time_s", "algbw_GBps", "busbw_GBps", "latency_s", "bandwidth_s"} <= rec.keys()
        assert rec["time_s"] == pytest.approx(rec["latency_s"] + rec["bandwidth_s"])
        assert rec["busbw_GBps"] == pytest.approx(rec["algbw_GBps"] * 2 * 15 / 16)
        assert rec["algbw_GBps"] == pytest.approx(2**30 / rec["time_s"] / 1e9)


def test_algo_all_lists_every_applicable_algorithm_and_best_is_fastest_nccl():
    doc = run_json("collective", "all_reduce", "--size", "64MiB", "--gpus", "16", "--system", "dgx-h100",
                   "--algo", "all")
    names = [r["algorithm"] for r in doc["algorithms"]]
    assert {"ring", "tree", "recursive_doubling", "rabenseifner", "hierarchical", "parameter_server"} <= set(names)
    times = {r["algorithm"]: r["time_s"] for r in doc["algorithms"]}
    assert doc["best"]["time_s"] == pytest.approx(min(times["ring"], times["tree"], times["nvls_tree"]))
    assert [r["time_s"] for r in doc["algorithms"]] == sorted(times.values())


def test_named_algorithm_network_and_gpus_per_node():
    one_nic = run_json("collective", "all_reduce", "--size", "1GiB", "--gpus", "16", "--system", "dgx-h100",
                       "--network", "eth-100g:1", "--algo", "ring")
    ndr = run_json("collective", "all_reduce", "--size", "1GiB", "--gpus", "16", "--system", "dgx-h100", "--algo", "ring")
    assert one_nic["system"] == "dgx-h100+eth-100g:1"
    assert one_nic["best"]["busbw_GBps"] < ndr["best"]["busbw_GBps"] / 10
    strided = run_json("collective", "all_reduce", "--size", "1GiB", "--gpus", "8", "--gpus-per-node", "1",
                       "--system", "dgx-h100", "--algo", "ring")
    assert strided["num_nodes"] == 8 and strided["best"]["busbw_GBps"] < 50  # one 400G NIC per rank


def test_human_table_mirrors_nccl_tests_columns():
    result = run("collective", "all_gather", "--size", "4096", "--gpus", "8", "--system", "aws-p5")
    assert result.exit_code == 0
    assert "time (us)" in result.stdout and "algbw (GB/s)" in result.stdout and "busbw (GB/s)" in result.stdout
    assert "all_gather of 4 KiB on 8 GPUs" in result.stdout


def test_sweep_json_csv_and_sizes():
    doc = run_json("sweep", "all_reduce", "--gpus", "8", "--system", "aws-p5", "--min-size", "1KiB",
                   "--max-size", "1GiB", "--factor", "32")
    assert doc["op"] == "all_reduce" and doc["num_ranks"] == 8
    assert [r["size_bytes"] for r in doc["rows"]] == [2**10, 2**15, 2**20, 2**25, 2**30]
    assert {"size_bytes", "algorithm", "time_s", "algbw_GBps", "busbw_GBps"} <= doc["rows"][0].keys()
    times = [r["time_s"] for r in doc["rows"]]
    assert times == sorted(times)
    csv_out = run("sweep", "broadcast", "--gpus", "2", "--system", "pcie-2x-rtx2080ti", "--max-size", "64KiB",
                  "--factor", "16", "--csv")
    lines = csv_out.stdout.strip().splitlines()
    assert csv_out.exit_code == 0 and lines[0].startswith("size_bytes,algorithm")
    assert len(lines) == 1 + 4  # 8 B, 128 B, 2 KiB, 32 KiB
    every = run_json("sweep", "all_to_all", "--gpus", "16", "--system", "azure-ndm-a100-v4", "--min-size", "1MiB",
                     "--max-size", "1MiB", "--algo", "all")
    assert {r["algorithm"] for r in every["rows"]} == {"pairwise", "bruck"}


def test_sweep_takes_nccl_tests_short_flags():
    """-b/-e/-f mean what they mean to nccl-tests (--min-size/--max-size/--factor): the same sweep either way."""
    short = run_json("sweep", "all_reduce", "-n", "16", "-s", "dgx-h100", "-b", "64KiB", "-e", "1GiB", "-f", "4")
    long = run_json("sweep", "all_reduce", "--gpus", "16", "--system", "dgx-h100", "--min-size", "64KiB",
                    "--max-size", "1GiB", "--factor", "4")
    assert short == long
    assert [r["size_bytes"] for r in short["rows"]] == [2**16 * 4**i for i in range(8)]


@pytest.mark.parametrize(("args", "message"), [
    (["collective", "all_reduce", "--size", "1GiB", "--gpus", "0", "--system", "dgx-h100"], "at least 1"),
    (["collective", "all_reduce", "--size", "-5", "--gpus", "8", "--system", "dgx-h100"], "size"),
    (["collective", "all_reduce", "--size", "5 parsecs", "--gpus", "8", "--system", "dgx-h100"], "size"),
    (["collective", "allsum", "--size", "1GiB", "--gpus", "8", "--system", "dgx-h100"], "unknown collective 'allsum'"),
    (["collective", "all_reduce", "--size", "1GiB", "--gpus", "8", "--system", "dgx-h100", "--algo", "magic"],
     "unknown algorithm 'magic'"),
    (["collective", "broadcast", "--size", "1GiB", "--gpus", "8", "--system", "dgx-h100", "--algo", "recursive_halving"],
     "does not implement broadcast"),
    (["collective", "reduce_scatter", "--size", "1GiB", "--gpus", "6", "--system", "dgx-h100", "--algo",
      "recursive_halving"], "power-of-two"),
    (["collective", "all_reduce", "--size", "1GiB", "--gpus", "16", "--system", "pcie-2x-rtx2080ti"], "no scale_out tier"),
    (["collective", "all_reduce", "--size", "1GiB", "--gpus", "12", "--system", "dgx-h100"], "whole nodes"),
    (["sweep", "all_reduce", "--gpus", "8", "--system", "dgx-h100", "--factor", "1"], "must be > 1"),
    (["collective", "all_reduce", "--size", "1GiB", "--gpus", "8", "--system", "no-such-box"], "no-such-box"),
])
def test_bad_input_is_one_line_and_exit_1(args, message):
    result = run(*args)
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_validate_reports_every_setup_and_band():
    doc = run_json("validate")
    section = doc["collectives"]
    assert len(section["records"]) == len(read_nccl_rows()) == 364  # every published row, each priced
    setups = {s["setup_id"] for s in section["summary"]}
    assert "aws-p4de-2n-efa" in setups and "coreweave-gb200-nvl72-1rack" in setups and "amdsat-mi300x-1n" in setups
    libraries = {(b["library"], b["band"]): b for b in section["libraries"]}
    assert libraries["rccl", "large"]["target"] == "median <= 10%" and libraries["rccl", "mid"]["target"] == "median <= 20%"
    large = [s for s in section["summary"] if s["band"] == "large"]
    assert sum(s["passed"] for s in large) >= len(large) - 2
    human = run("validate")
    assert human.exit_code == 0 and "PASS" in human.stdout and "median" in human.stdout
    assert "rccl    large" in human.stdout  # the per-library table


def test_algo_all_marks_what_the_library_does_not_run_and_one_rank_prints_one_row() -> None:
    """`--algo all` under NCCL also prices the registry's textbook algorithms (Rabenseifner, recursive doubling, ...):
    each is marked † (and ``in_library: false`` in --json), so no row NCCL cannot run reads as NCCL's; one rank printed
    one identical "none" row per algorithm (collectives audit)."""
    result = runner.invoke(app, ["collective", "all_reduce", "--size", "1GiB", "-n", "16", "-s", "dgx-h100",
                                 "--algo", "all", "--json"])
    rows = {r["algorithm"]: r["in_library"] for r in json.loads(result.stdout)["algorithms"]}
    assert rows["ring"] and rows["tree"] and not rows["rabenseifner"] and not rows["parameter_server"]
    human = runner.invoke(app, ["collective", "all_reduce", "--size", "1GiB", "-n", "16", "-s", "dgx-h100",
                                "--algo", "all"]).output
    assert "rabenseifner †" in human and "ring †" not in human and "† not one of nccl's algorithms" in human
    one = runner.invoke(app, ["collective", "all_reduce", "--size", "1GiB", "-n", "1", "-s", "dgx-h100", "--algo", "all"])
    assert one.output.count("none *") == 1 and "one rank: nothing to communicate" in one.output
