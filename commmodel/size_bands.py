"""The message-size bands every accuracy figure, fit summary and plot uses (DESIGN §9): latency-bound small messages
(≤ 64 KiB), the mid band where training's buckets and TP messages live, and bandwidth-bound large messages
(≥ 64 MiB). One owner: validation, calibration, diagnose and the plots import these edges."""

import numpy as np
from numpy.typing import ArrayLike

SMALL_MAX_BYTES = 64 * 2**10
"""Upper edge of the latency-bound band, inclusive (≤ 64 KiB; DESIGN §9)."""
LARGE_MIN_BYTES = 64 * 2**20
"""Lower edge of the bandwidth-bound band, inclusive (≥ 64 MiB; DESIGN §9)."""
BAND_NAMES: tuple[str, ...] = ("small", "mid", "large")
"""The size bands, smallest first: :func:`band_codes` indexes this tuple."""


def _binary(size_bytes: int, space: str = "") -> str:
    """``65536`` -> ``"64KiB"`` (``"64 KiB"`` with ``space=" "``): an edge in its largest whole binary unit."""
    for power, prefix in ((30, "Gi"), (20, "Mi"), (10, "Ki")):
        if size_bytes % 2**power == 0:
            return f"{size_bytes // 2**power}{space}{prefix}B"
    return f"{size_bytes}{space}B"


BAND_LABELS: tuple[str, ...] = (f"<={_binary(SMALL_MAX_BYTES)}",
                                f"{_binary(SMALL_MAX_BYTES)}-{_binary(LARGE_MIN_BYTES)}",
                                f">={_binary(LARGE_MIN_BYTES)}")
"""The bands as residual summaries and reports label them ("<=64KiB", "64KiB-64MiB", ">=64MiB"), from the edges."""
BAND_DISPLAY: tuple[str, ...] = (f"≤ {_binary(SMALL_MAX_BYTES, ' ')}",
                                 f"{_binary(SMALL_MAX_BYTES, ' ')} – {_binary(LARGE_MIN_BYTES, ' ')}",
                                 f"≥ {_binary(LARGE_MIN_BYTES, ' ')}")
"""The same for figures' legends ("≤ 64 KiB", "64 KiB – 64 MiB", "≥ 64 MiB")."""


def band_codes(sizes_bytes: ArrayLike) -> np.ndarray:
    """0 (small), 1 (mid) or 2 (large) per size."""
    s = np.asarray(sizes_bytes, dtype=float)
    return np.where(s <= SMALL_MAX_BYTES, 0, np.where(s >= LARGE_MIN_BYTES, 2, 1))


def band_of(size_bytes: float) -> str:
    """small (≤ 64 KiB), mid, or large (≥ 64 MiB)."""
    return BAND_NAMES[int(band_codes(size_bytes))]


__all__ = ["BAND_DISPLAY", "BAND_LABELS", "BAND_NAMES", "LARGE_MIN_BYTES", "SMALL_MAX_BYTES", "band_codes", "band_of"]
