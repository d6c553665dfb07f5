"""The message-size bands every accuracy figure, fit summary and plot uses (DESIGN §9): latency-bound small messages
(≤ 64 KiB), the mid band where training's buckets and TP messages live, and bandwidth-bound large messages
(≥ 64 MiB). One owner: validation, calibration, diagnose and the plots import these edges."""

import numpy as np
from numpy.typing import ArrayLike

from commmodel.units import format_size

SMALL_MAX_BYTES = 64 * 2**10
"""Upper edge of the latency-bound band, inclusive (≤ 64 KiB; DESIGN §9)."""
LARGE_MIN_BYTES = 64 * 2**20
"""Lower edge of the bandwidth-bound band, inclusive (≥ 64 MiB; DESIGN §9)."""
BAND_NAMES: tuple[str, ...] = ("small", "mid", "large")
"""The size bands, smallest first: :func:`band_codes` indexes this tuple."""


_SMALL, _LARGE = format_size(SMALL_MAX_BYTES), format_size(LARGE_MIN_BYTES)  # "64 KiB", "64 MiB"
BAND_DISPLAY: tuple[str, ...] = (f"≤ {_SMALL}", f"{_SMALL} – {_LARGE}", f"≥ {_LARGE}")
"""The bands as figures' legends say them ("≤ 64 KiB", "64 KiB – 64 MiB", "≥ 64 MiB"), from the edges."""
_S, _L = _SMALL.replace(" ", ""), _LARGE.replace(" ", "")
BAND_LABELS: tuple[str, ...] = (f"<={_S}", f"{_S}-{_L}", f">={_L}")
"""The same as residual summaries and reports label them ("<=64KiB", "64KiB-64MiB", ">=64MiB")."""


def band_codes(sizes_bytes: ArrayLike) -> np.ndarray:
    """0 (small), 1 (mid) or 2 (large) per size."""
    s = np.asarray(sizes_bytes, dtype=float)
    return np.where(s <= SMALL_MAX_BYTES, 0, np.where(s >= LARGE_MIN_BYTES, 2, 1))


def band_of(size_bytes: float) -> str:
    """small (≤ 64 KiB), mid, or large (≥ 64 MiB)."""
    return BAND_NAMES[int(band_codes(size_bytes))]


__all__ = ["BAND_DISPLAY", "BAND_LABELS", "BAND_NAMES", "LARGE_MIN_BYTES", "SMALL_MAX_BYTES", "band_codes", "band_of"]
