"""The knob searches of commmodel/calibrate/knobs.py on objectives with a known answer."""

from __future__ import annotations

import math

from commmodel.calibrate.knobs import get_knob, solve
from commmodel.io.profiles import load_system

PATH = ("scale_out", "efficiency")


def test_solve_finds_a_root_next_to_the_base_that_the_coarse_grid_steps_over():
    """A model whose choice flips inside one coarse grid step: below 0.85 a 'tree' whose time falls through
    zero at 0.51, above it a 'ring' whose time jumps up and falls through zero at 0.945 (the mscclpp 2 x 8
    all-reduce shape). Both are roots; the loss prefers the ring's, and the local grid around the base
    value (0.96) must see it although the coarse grid's points 0.80 and 1.0 are both negative."""
    system = load_system("azure-ndm-a100-v4")
    assert get_knob(system, PATH) == 0.96

    def objective(s):
        eff = get_knob(s, PATH)
        return math.log(0.51 / eff) if eff < 0.85 else math.log(0.945 / eff) + (0.05 if eff < 0.9 else 0.0)

    def loss(s):
        return abs(get_knob(s, PATH) - 0.945)

    value, clamped = solve(system, PATH, objective, increasing=False, loss=loss)
    assert not clamped
    assert math.isclose(value, 0.945, rel_tol=1e-6)


def test_solve_without_a_loss_takes_the_root_nearest_the_base():
    system = load_system("azure-ndm-a100-v4")
    value, clamped = solve(system, PATH, lambda s: math.log(0.5 / get_knob(s, PATH)), increasing=False)
    assert not clamped and math.isclose(value, 0.5, rel_tol=1e-6)
