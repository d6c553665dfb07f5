"""Megatron's block recompute (``--recompute-layers N`` = ``--recompute-method block --recompute-num-layers N``): with
``recompute: full`` only the first N blocks of each model chunk are checkpointed (megatron/core/recompute.py
@d98e8a6); the rest store their activations and are not redone."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.io.profiles import load_system
from commmodel.planner.search import plan
from commmodel.planner.space import SearchSpace
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.stacks import stack_options
from commmodel.workload.presets import get_model
from commmodel.workload.stages import full_recompute_fraction

MODEL = get_model("llama3-8b")  # 32 blocks
H100 = load_system("dgx-h100")


def test_share_of_each_chunk() -> None:
    """min(N, c)/c with c = ⌈l/(p·v)⌉ blocks in the busiest chunk; None (uniform) is every block."""
    pp, vpp = np.array([1, 1, 4, 4, 3]), np.array([1, 1, 1, 2, 1])
    assert full_recompute_fraction(MODEL, pp, vpp, 5).tolist() == [5 / 32, 5 / 32, 5 / 8, 1.0, 5 / 11]
    assert full_recompute_fraction(MODEL, pp, vpp, None).tolist() == [1.0] * 5
    assert full_recompute_fraction(MODEL, np.array([4]), np.array([2]), 1).tolist() == [0.25]


def _row(recompute: str, layers: int | None, pp: int = 1, vpp: int = 1) -> dict:
    layout = Layout(tp=1, pp=pp, dp=8 // pp, micro_batch=1, global_batch=16, zero=1, recompute=recompute, vpp=vpp)
    return evaluate_single(MODEL, H100, 8, layout, stack_options("megatron-core", recompute_layers=layers))


def test_time_redoes_only_the_checkpointed_share() -> None:
    """The recompute is the full recompute's, times the share: compute(N) − compute(none) = N/32 of full's extra;
    hardware FLOPs likewise, model FLOPs unchanged."""
    none, full = _row("none", None), _row("full", None)
    for n in (1, 5, 16):
        part = _row("full", n)
        assert part["compute/link_s"] - none["compute/link_s"] == pytest.approx(
            n / 32 * (full["compute/link_s"] - none["compute/link_s"]), rel=1e-9)
        extra = full["hardware_flops_per_step"] - full["model_flops_per_step"]
        assert part["hardware_flops_per_step"] - part["model_flops_per_step"] == pytest.approx(n / 32 * extra)
        assert part["model_flops_per_step"] == full["model_flops_per_step"]
    assert _row("full", 32)["step_time_s"] == full["step_time_s"]  # N ≥ the chunk: every block, as uniform


def test_memory_is_linear_in_the_share() -> None:
    """Stored bytes are share × the checkpointed block's + (1 − share) × the unchecked block's, the one rebuilt
    block's working bytes on top: linear in N, so two shares fix the line and a third lies on it."""
    act = {n: _row("full", n)["memory/activations_bytes"] for n in (1, 2, 5)}
    slope = act[2] - act[1]
    assert slope < 0  # each checkpointed block stores less
    assert act[5] == pytest.approx(act[1] + 4 * slope, rel=1e-9)
    assert _row("full", 32)["memory/activations_bytes"] == pytest.approx(_row("full", None)["memory/activations_bytes"])


def test_interleaved_chunks_take_their_own_share() -> None:
    """pp 4 × vpp 2: chunks of 4 blocks, so N = 2 checkpoints half of every chunk; the planner, which prices layouts
    in groups, gives every row what the layout gives alone (the compute is keyed on vpp when N is set)."""
    options = stack_options("megatron-core", recompute_layers=2)
    space = SearchSpace(tp=(1,), pp=(4,), recompute=("full",), zero_stages=(1,), micro_batches=(1,))
    result = plan(MODEL, H100, 32, global_batch=64, space=space, options=options).require_feasible()
    rows = [result.row(i) for i in range(len(result.columns["step_time_s"]))]
    assert {r["vpp"] for r in rows} >= {1, 2}
    for row in rows:
        alone = evaluate_single(MODEL, H100, 32, Layout.from_record(row), options)
        assert row["step_time_s"] == pytest.approx(alone["step_time_s"], rel=1e-9)
        assert row["memory_bytes_per_gpu"] == pytest.approx(alone["memory_bytes_per_gpu"], rel=1e-9)


def test_cli_states_it_and_emits_the_block_method() -> None:
    argv = ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--tp", "1", "--global-batch", "16",
            "--recompute", "full", "--recompute-layers", "5"]
    doc = json.loads(CliRunner().invoke(app, argv + ["--json", "--emit", "megatron"]).stdout)
    assert any(a.startswith("where a layout recomputes full, only the first 5 blocks") for a in doc["assumptions"])
    words = doc["emit"]["args"]
    assert words[words.index("--recompute-method") + 1] == "block"
    assert words[words.index("--recompute-num-layers") + 1] == "5"
    bad = CliRunner().invoke(app, argv[:-1] + ["0"])
    assert bad.exit_code == 2 and "--recompute-layers" in bad.output


def test_estimate_refuses_block_recompute_without_full_recompute() -> None:
    """--recompute-layers counts the blocks a full recompute checkpoints: with another policy it is refused in one
    line naming the fix (plan applies it to the full-recompute layouts it searches)."""
    result = CliRunner().invoke(app, ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100",
                                      "--recompute", "selective", "--recompute-layers", "4"])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0
    assert "--recompute-layers 4" in result.output and "add --recompute full" in result.output
