"""The lower bound one leg of a two-leg group proves (commmodel/calibrate/legs.py), on a closed-form two-leg model.

Model: t = S / min(η·eff_up·B_up/2, eff_out·B_out) (a two-node double binary tree without latency), with
B_up = 450 GB/s (NVLink 4), B_out = 200 GB/s (8 x 200 Gb/s), η = 0.92 (NCCL tuning.cc's tree factor).
"""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.calibrate.knobs import get_knob, set_knob
from commmodel.calibrate.legs import least_binding_value
from commmodel.io.profiles import load_system

UP, OUT = ("scale_up", "efficiency"), ("scale_out", "efficiency")
SIZES = np.array([2.0**30, 2.0**32, 2.0**33])


def _times(system):
    rate = min(0.92 * get_knob(system, UP) * 450e9 / 2, get_knob(system, OUT) * 200e9)
    return SIZES / rate


def _measured(rate_bytes_per_s: float) -> np.ndarray:
    return SIZES / rate_bytes_per_s


def test_a_rate_above_the_chain_bound_gives_the_least_scale_up_efficiency_that_carries_it():
    system = set_knob(set_knob(load_system("gcp-a3-mega"), UP, 0.805), OUT, 0.84)
    value = least_binding_value(system, UP, [OUT], _times, _measured(180.7e9))
    assert value == pytest.approx(180.7e9 * 2 / (0.92 * 450e9), rel=1e-6)  # 0.8729


def test_a_rate_the_base_chain_already_carries_leaves_the_scale_up_number_alone():
    system = set_knob(load_system("gcp-a3-mega"), UP, 0.805)
    assert least_binding_value(system, UP, [OUT], _times, _measured(160e9)) is None  # chain bound 166.7 GB/s


def test_a_rate_the_fastest_network_cannot_carry_is_not_blamed_on_the_scale_up_leg():
    """Above B_out (200 GB/s) no scale-up value helps: the scale-up leg does not bind, the network does."""
    system = set_knob(load_system("gcp-a3-mega"), UP, 0.805)
    assert least_binding_value(system, UP, [OUT], _times, _measured(210e9)) is None
