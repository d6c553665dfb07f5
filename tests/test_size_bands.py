"""The message-size bands have one owner (commmodel.size_bands); fits, validation, diagnose and plots read it."""

import numpy as np

from commmodel import size_bands
from commmodel.calibrate.fit import BANDS, band_masks
from commmodel.plots.calibration import BAND_EDGES_BYTES, band_index
from commmodel.validation import collectives as validation

SIZES = np.array([1.0, 64 * 1024, 64 * 1024 + 1, 64 * 2**20 - 1, 64 * 2**20, 2**34])


def test_edges_are_inclusive_at_64_kib_and_64_mib() -> None:
    assert size_bands.band_codes(SIZES).tolist() == [0, 0, 1, 1, 2, 2]
    assert [size_bands.band_of(s) for s in SIZES] == ["small", "small", "mid", "mid", "large", "large"]


def test_every_reader_uses_the_owner() -> None:
    assert validation.band_of is size_bands.band_of and validation.BANDS == size_bands.BAND_NAMES
    assert band_index is size_bands.band_codes
    assert BAND_EDGES_BYTES == (size_bands.SMALL_MAX_BYTES, size_bands.LARGE_MIN_BYTES)
    masks = band_masks(SIZES)
    assert [int(np.argmax([masks[label][i] for label in BANDS])) for i in range(SIZES.size)] == [0, 0, 1, 1, 2, 2]


def test_band_labels_are_written_from_the_edges() -> None:
    """The calibration reports' and figures' band labels follow the edges (they were three literal copies)."""
    from commmodel.plots.calibration import BAND_LABELS as LEGEND

    assert size_bands.BAND_LABELS == ("<=64KiB", "64KiB-64MiB", ">=64MiB") and BANDS is size_bands.BAND_LABELS
    assert LEGEND == size_bands.BAND_DISPLAY == ("≤ 64 KiB", "64 KiB – 64 MiB", "≥ 64 MiB")
