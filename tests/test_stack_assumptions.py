"""A stack's printed behaviour is not told to a run that overrides the knob it describes (the bad-input audit of
2026-11-28: ``estimate --no-flash-attention`` priced unfused attention and still said "fused attention through
Transformer Engine"); the override line says what runs instead."""

from __future__ import annotations

import pytest

from commmodel.step.stack_assumptions import assumptions
from commmodel.step.stacks import STACKS, stack_options


@pytest.mark.parametrize("name", sorted(STACKS))
def test_the_attention_line_follows_the_flash_attention_knob(name):
    stack = STACKS[name]
    described = [b.text for b in stack.behaviours if b.knob == "flash_attention"]
    assert len(described) == 1, "every stack states how it runs attention, once"
    default = stack_options(name)
    flipped = default.model_copy(update={"flash_attention": not default.flash_attention})
    assert any(line.startswith(described[0]) for line in assumptions(stack, default))
    lines = assumptions(stack, flipped)
    assert not any(line.startswith(described[0]) for line in lines)
    assert f"override: flash_attention = {flipped.flash_attention} (stack {name}: {default.flash_attention})" in lines


def test_fp32_training_is_not_told_its_gradients_are_reduced_in_bf16():
    """cpu-host trains in fp32 (no 16-bit peak), so Megatron-Core keeps fp32 main grads there: the stack's bf16
    gradient line gives way to the override, and the ranks are called CPU ranks."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    out = CliRunner().invoke(app, ["estimate", "-m", "gpt3-125m", "-n", "8", "-s", "cpu-host", "--json"])
    doc = json.loads(out.output)
    assert doc["dtype"] == "fp32" and doc["rank_noun"] == "CPU ranks"
    assert not any(line.startswith("gradients kept and reduced in bf16") for line in doc["assumptions"])
    assert "override: grad_reduce_dtype = fp32 (stack megatron-core: bf16)" in doc["assumptions"]


def test_every_behaviour_knob_is_a_step_option():
    """A behaviour's knob is read with getattr on the options: a misspelt one would fail only when printed."""
    from commmodel.step.options import StepOptions

    knobs = {b.knob for stack in STACKS.values() for b in stack.behaviours if b.knob is not None}
    assert knobs == {"flash_attention", "grad_reduce_dtype", "dp_mode", "cross_entropy"}
    assert knobs <= set(StepOptions.model_fields)
