"""DualPipe (DeepSeek-V3, arXiv:2412.19437 §3.2.1, Table 2) as a pipeline schedule: its bubble, its memory
(two stages' weights and gradients per rank, PP + 1 micro-batches of activations) and its layout rule."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.errors import LayoutError
from commmodel.io.profiles import load_system
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions
from commmodel.workload.memory import in_flight_layers
from commmodel.workload.presets import get_model

MODEL = get_model("llama3-70b")  # 80 layers: 5 per stage on pp 16
SYSTEM = load_system("dgx-h100")
LAYOUT = Layout(tp=8, pp=16, dp=2, micro_batch=1, global_batch=64)


def _row(schedule: str, layout: Layout = LAYOUT) -> dict:
    return evaluate_single(MODEL, SYSTEM, 256, layout, StepOptions(schedule=schedule))


def test_bubble_is_table_2_against_1f1b():
    # 1F1B: (p − 1)(F + B) = 15 micro-batch times; DualPipe: (p/2 − 1)(F&B + B − 3W) with F&B = F + B,
    # B = 2F, W = F: (8 − 1) × 2F = 7 × 2/3 micro-batch times. Same micro-batch time in both.
    one_f_one_b, dual = _row("1f1b"), _row("dualpipe")
    t_mb = one_f_one_b["pp/bubble/link_s"] / 15.0
    assert dual["pp/bubble/link_s"] == pytest.approx(7 * 2 / 3 * t_mb, rel=1e-9)
    assert dual["step_time_s"] < one_f_one_b["step_time_s"]


def test_memory_two_stages_of_weights_and_pp_plus_one_activations():
    one_f_one_b, dual = _row("1f1b"), _row("dualpipe")
    for term in ("weights", "gradients"):
        assert dual[f"memory/{term}_bytes"] == pytest.approx(2 * one_f_one_b[f"memory/{term}_bytes"], rel=1e-12)
    assert dual["memory/optimizer_bytes"] == pytest.approx(one_f_one_b["memory/optimizer_bytes"], rel=1e-12)
    # 32 micro-batches per pipeline: 1F1B holds p = 16 of the stage's 5 layers, DualPipe p + 1 = 17
    got = in_flight_layers(MODEL, np.array([16, 16]), np.array([1, 1]), np.array([32, 32]), False, True)
    assert got.tolist() == [17 * 5, 17 * 5]
    assert dual["memory/activations_bytes"] == pytest.approx(17 / 16 * one_f_one_b["memory/activations_bytes"],
                                                            rel=1e-12)


@pytest.mark.parametrize(("layout", "words"), [
    (Layout(tp=8, pp=8, dp=4, micro_batch=1, global_batch=64, vpp=2), "vpp 2"),
    (Layout(tp=8, pp=1, dp=32, micro_batch=1, global_batch=64), "pp 1 is odd"),
])
def test_dualpipe_needs_even_pp_and_no_interleaving(layout, words):
    with pytest.raises(LayoutError, match=words):
        _row("dualpipe", layout)


def test_the_cli_states_the_schedule():
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    args = ["estimate", "-m", "llama3-70b", "-n", "256", "-s", "dgx-h100", "--tp", "8", "--pp", "16",
            "--global-batch", "64", "--schedule", "dualpipe"]
    human = CliRunner().invoke(app, args)
    assert human.exit_code == 0 and "schedule dualpipe" in human.stdout
    doc = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert doc["schedule"] == "dualpipe"
    bad = CliRunner().invoke(app, [*args[:-2], "--pp", "16", "--vpp", "2", "--schedule", "dualpipe"])
    assert bad.exit_code == 1 and "dualpipe schedule needs" in bad.output and len(bad.output.strip().splitlines()) == 1
