"""Issue 16: one output speaks one language — decimal GB next to a decimal HBM size, words instead of codes,
plurals that agree, NCCL's pick marked, integer byte counts, every plot axis labelled."""

from __future__ import annotations

import csv
import io
import re

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app

runner = CliRunner()
H100 = ["--system", "dgx-h100"]


def _ok(args: list[str]) -> str:
    result = runner.invoke(app, args, env={"COMMMODEL_DEBUG": ""})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_estimate_memory_is_all_decimal_and_matches_the_flag() -> None:
    """Was "activations 356 GiB" on the memory line, then "activations (382.3 GB)" in the flag below it."""
    out = _ok(["estimate", "-m", "llama3-8b", "-n", "8", *H100])
    memory = next(line for line in out.splitlines() if line.startswith("memory"))
    assert "GiB" not in memory
    sizes = dict(re.findall(r"(\w+) ([\d.]+) GB", memory))
    flag = re.search(r"largest term: activations \(([\d.]+) GB\)", out)
    assert flag and sizes["activations"] == flag.group(1)
    assert "(1 node)" in out and "(1 nodes)" not in out and "global batch 256 (assumed), 32 micro-batches," in out
    assert "bound       does not fit (memory)" in out


def test_plan_csv_bound_is_a_word() -> None:
    rows = list(csv.DictReader(io.StringIO(_ok(["plan", "-m", "1B", "-n", "8", *H100, "--csv", "--top", "3"]))))
    assert rows and {r["bound"] for r in rows} <= {"compute", "communication", "bubble", "memory"}


def test_sweep_sizes_are_integers() -> None:
    rows = list(csv.DictReader(io.StringIO(_ok(["sweep", "all_reduce", "-n", "8", *H100, "--csv", "--max-size", "1KiB"]))))
    assert all(re.fullmatch(r"\d+", r["size_bytes"]) for r in rows)


def test_query_collective_table_marks_nccls_choice() -> None:
    out = _ok(["query", "all-reduce 1GB on 16 H100"])
    chosen = re.search(r"with (\w+), algbw", out).group(1)
    marked = [line for line in out.splitlines() if line.endswith("NCCL's choice")]
    assert len(marked) == 1 and marked[0].split()[0] == chosen
    assert "(2 nodes of" in out


@pytest.mark.parametrize("extra", [["all_reduce", "--size", "1GiB"], ["--model", "1B", "--metric", "tokens_per_s"],
                                   ["--model", "1B", "--metric", "mfu"], ["--model", "1B", "--metric", "step_time_s"]])
def test_scaling_plots_label_every_axis(tmp_path, monkeypatch, extra: list[str]) -> None:
    import commmodel.cli.plot as plot_cli

    figures = []
    original = plot_cli.save_figure
    monkeypatch.setattr(plot_cli, "save_figure", lambda fig, out, dpi: (figures.append(fig), original(fig, out, dpi))[1])
    _ok(["plot", "scaling", *extra, *H100, "--max-gpus", "32", "--out", str(tmp_path / "s.png")])
    axes = [ax for fig in figures for ax in fig.axes]
    assert axes and all(ax.get_xlabel() and ax.get_ylabel() for ax in axes)


@pytest.mark.parametrize("command", [["plan", "-m", "13B", "-n", "64", "-s", "dgx-a100"],
                                     ["compare", "-m", "7B", "-n", "16", "-s", "dgx-a100", "-s", "dgx-h100"]])
def test_an_assumed_global_batch_is_said_by_plan_and_compare(command: list[str]) -> None:
    """estimate said "(assumed)" and ``global_batch_assumed``; plan and compare printed the same header whether the
    batch was given or not."""
    import json

    assumed = runner.invoke(app, command)
    given = runner.invoke(app, [*command, "--global-batch", "1024"])
    assert assumed.exit_code == given.exit_code == 0, assumed.output + given.output
    assert "(assumed)" in assumed.output.splitlines()[0] and "(assumed)" not in given.output.splitlines()[0]
    assert json.loads(runner.invoke(app, [*command, "--json"]).stdout)["global_batch_assumed"] is True
    assert json.loads(runner.invoke(app, [*command, "--global-batch", "1024", "--json"]).stdout)[
        "global_batch_assumed"] is False


def test_compare_says_each_targets_library() -> None:
    """An MI300X node against a DGX H100: the JSON said rccl and nccl per target, the human output neither."""
    result = runner.invoke(app, ["compare", "-m", "7B", "-n", "16", "-s", "amd-mi300x", "-s", "dgx-h100"])
    assert result.exit_code == 0, result.output
    assert "libraries: amd-mi300x rccl, dgx-h100 nccl" in result.output


def test_one_change_is_advised_once() -> None:
    """tp 16 on 8-GPU nodes: "move TP inside the node: tp 16 → 8, dp 4 → 8" and "tp 16 → 8, dp 4 → 8" were two rows
    of one change (the same layout, 3.92 s each)."""
    result = runner.invoke(app, ["estimate", "-m", "llama3-8b", "-n", "64", "-s", "dgx-h100", "--tp", "16", "--json"])
    changes = [a["change"] for a in __import__("json").loads(result.stdout)["advice"]]
    assert "move TP inside the node: tp 16 → 8, dp 4 → 8" in changes and "tp 16 → 8, dp 4 → 8" not in changes


def test_ddp_plans_data_parallel_layouts_alone() -> None:
    """A DDP job is data parallel: plan searched tp and pp under --stack ddp (gloo vs nccl "for DDP" ranked tp 1 pp 16);
    an explicit --tp still pins it (a DTensor job)."""
    import json

    plain = json.loads(runner.invoke(app, ["plan", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--stack", "ddp",
                                           "--top", "50", "--json"]).stdout)
    assert plain["layouts"] and {(r["tp"], r["pp"], r["cp"]) for r in plain["layouts"]} == {(1, 1, 1)}
    pinned = json.loads(runner.invoke(app, ["plan", "-m", "1.3B", "-n", "16", "-s", "dgx-h100", "--stack", "ddp",
                                            "--tp", "2", "--json"]).stdout)
    assert {r["tp"] for r in pinned["layouts"]} == {2}
