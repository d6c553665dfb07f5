"""``plan``'s refusals name what to change (issue: the CLI audit): a pinned --cp that breaks the rules is offered
only values that keep them, a pinned tp × pp that cannot divide the GPUs says so, and a space the pins leave empty
names the pinned flags as well as --gpus and --global-batch."""

from __future__ import annotations

from typer.testing import CliRunner

from commmodel.cli.app import app

RUNNER = CliRunner()


def _error(*args: str) -> str:
    result = RUNNER.invoke(app, ["plan", "-m", "7B", "-n", "8", "-s", "dgx-h100", *args])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_a_pinned_cp_is_offered_only_values_that_keep_the_rules() -> None:
    """"--cp 16" on 8 GPUs was told "pick cp from 1, 2, 4, 8, 16", the rejected value among them."""
    assert _error("--cp", "16").endswith("pick cp from 1, 2, 4, 8")


def test_pinned_tp_and_pp_that_cannot_divide_the_gpus_say_so() -> None:
    """"--tp 8 --pp 8" on 8 GPUs said "passes the divisibility rules (none); change --gpus or --global-batch"."""
    assert "no --tp × --pp (8 × 8) divides 8 GPUs" in _error("--tp", "8", "--pp", "8")


def test_an_empty_space_names_the_pinned_flags() -> None:
    """"--micro-batch 3 --global-batch 8" named --gpus and --global-batch only."""
    assert "--micro-batch" in _error("--micro-batch", "3", "--global-batch", "8")
