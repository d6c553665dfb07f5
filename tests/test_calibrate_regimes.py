"""The note on a measured regime the calibrated model splits between algorithm × protocol pairs (calibrate/regimes.py)."""

from __future__ import annotations

import numpy as np

from commmodel.calibrate.fit import fit_alpha_beta
from commmodel.calibrate.regimes import switch_note

SIZES = 2.0 ** np.arange(15, 24)  # 32 KiB .. 8 MiB
MEASURED = 150e-6 + SIZES / 20.4e9  # one line: the 2 x a3-megagpu-8g mid range


def _fit():
    return fit_alpha_beta(SIZES, MEASURED, "all_reduce", 16, label="ar")


def test_a_switch_inside_one_line_with_a_row_off_by_more_than_30_percent_is_reported():
    model = MEASURED.copy()
    model[SIZES == 2**22] /= 1.71  # 4 MiB priced 71% fast
    choices = np.where(SIZES <= 2**22, "tree/LL", "ring/LL")
    note = switch_note(_fit(), model, choices)
    assert note is not None
    assert "32 KiB-8 MiB" in note and "tree/LL -> ring/LL" in note and "4 MiB by +71%" in note


def test_a_switch_that_the_model_prices_within_30_percent_is_not_reported():
    choices = np.where(SIZES <= 2**22, "tree/LL", "ring/LL")
    assert switch_note(_fit(), MEASURED * 1.2, choices) is None  # every row 17% off, under the bound


def test_one_choice_is_not_reported_however_far_off():
    assert switch_note(_fit(), MEASURED / 3, np.full(SIZES.shape, "ring/LL")) is None
