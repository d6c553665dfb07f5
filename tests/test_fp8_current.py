"""Per-tensor FP8 with current scaling as a training dtype (``fp8-current``: Transformer Engine
``Float8CurrentScaling``, Megatron ``--fp8-recipe tensorwise``, Megatron-LM @d98e8a6 megatron/core/fp8_utils.py
L777-778; NeMo's "FP8-CS"), beside ``fp8`` (TE ``DelayedScaling``, Megatron's default recipe).

Closed forms (TE @d0067d0 fp8_current_scaling.rst "Performance analysis": an amax pass, then the cast):
  activation element, Hopper: read 2 for the amax, read 2, write the FP8 copy and its transpose: 2 + 2 + 2·1 = 6
  (delayed: 2 + 2 = 4); Blackwell, one copy serving both layouts: 5 (delayed: 3)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.io.profiles import load_system
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.precision import RECIPES, quantisation_bytes, quantisation_recipe
from commmodel.step.precision_lines import RECIPE_WORDS
from commmodel.step.stacks import stack_options
from commmodel.workload.presets import get_model

runner = CliRunner()
LAYOUT = Layout(tp=1, pp=1, dp=4, cp=2, micro_batch=1, global_batch=128, zero=1)


def _estimate(dtype: str, system: str = "dgx-h100", stack: str = "megatron-core") -> dict:
    model = get_model("llama3-8b").model_copy(update={"dtype": dtype})
    return evaluate_single(model, load_system(system), 8, LAYOUT, stack_options(stack))


def test_current_scaling_is_transformer_engines_float8_current_recipe_and_torchaos_tensorwise() -> None:
    assert quantisation_recipe("fp8-current", "te") == "te-fp8-current"
    assert quantisation_recipe("fp8", "te") == "te-fp8-delayed"
    assert quantisation_recipe("fp8-current", "torchao") == quantisation_recipe("fp8", "torchao") \
        == "torchao-fp8-tensorwise"  # torchao's float8 is dynamic scaling either way
    assert quantisation_bytes("te-fp8-current", 90).activation_forward == 6.0
    assert quantisation_bytes("te-fp8-delayed", 90).activation_forward == 4.0
    assert quantisation_bytes("te-fp8-current", 100).activation_forward == 5.0
    assert set(RECIPE_WORDS) == set(RECIPES)  # every recipe is named where a user sets it


def test_a_current_scaling_step_pays_its_amax_passes_and_nothing_else_changes_under_torchao() -> None:
    """Megatron-Core: the same GEMMs, more cast traffic (the amax read of every cast tensor), so a slower step; the
    torchtitan stack (torchao) runs one dynamic recipe for both dtypes, so the same step."""
    delayed, current = _estimate("fp8"), _estimate("fp8-current")
    assert delayed["step_time_s"] < current["step_time_s"] < 1.05 * delayed["step_time_s"]
    assert _estimate("fp8", stack="fsdp2")["step_time_s"] == pytest.approx(
        _estimate("fp8-current", stack="fsdp2")["step_time_s"], rel=1e-12)


def test_every_command_states_the_recipe_and_emit_writes_megatrons_flag() -> None:
    args = ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--cp", "2", "--global-batch", "128"]
    current = json.loads(runner.invoke(app, [*args, "--dtype", "fp8-current", "--json", "--emit", "megatron"])
                         .stdout)
    delayed = json.loads(runner.invoke(app, [*args, "--dtype", "fp8", "--json"]).stdout)
    line = next(a for a in current["assumptions"] if a.startswith("low precision:"))
    assert "te-fp8-current" in line and "--fp8-recipe tensorwise" in line and "6 bytes" in line
    assert any(a.startswith("low precision: te-fp8-delayed") for a in delayed["assumptions"])
    argv = current["emit"]["args"]
    assert argv[argv.index("--fp8-recipe") + 1] == "tensorwise"
    query = json.loads(runner.invoke(app, ["query", "llama3-8b on 8 H100, fp8-cs", "--json"]).stdout)
    assert query["answer"]["dtype"] == "fp8-current"
