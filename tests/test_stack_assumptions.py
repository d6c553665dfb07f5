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
