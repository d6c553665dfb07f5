"""Where the calibrated model changes algorithm × protocol inside one measured regime, and misses there.

A fitted regime is one straight line t = a + b·S over consecutive sizes (:mod:`fit`): the library ran one
algorithm × protocol there (a protocol or algorithm change bends the line and buys a split). When the
calibrated collective model switches algorithm × protocol inside such a regime and misses its rows by more
than :data:`SWITCH_MISS`, the miss is the model's selection, not a profile number: no efficiency or latency
of one tier moves a switch point without moving the rows on both sides. Such a regime is reported, never
fitted around (2 x a3-megagpu-8g: one line 32 KiB-8 MiB, 150 us + S / 20.4 GB/s algbw; the calibrated model
priced it tree/LL up to 4 MiB, +37% to +71% off from 1 MiB, then ring/LL, until TCPXO was priced Simple-only;
8 x A100 NDv4: one line 1 KiB-16 MiB that the model splits ring/LL -> ring/LL128, +37% at 16 MiB).

Pure: a fit and the model's per-row choice in, a note out.
"""

from __future__ import annotations

import numpy as np

from commmodel.calibrate.fit import SMALL_MAX_BYTES, FitResult
from commmodel.units import format_size

SWITCH_MISS = 0.30
"""Largest |busbw error| of a row inside a switching regime before it is reported: issue 11's bound on a setup's
median mid-size (64 KiB-64 MiB) busbw error, 30%."""


def switch_note(fit: FitResult, times_s: np.ndarray, choices: np.ndarray) -> str | None:
    """A note on the first regime where the model's choice (``choices``, "algorithm/protocol" per row of the fit)
    changes and some row above 64 KiB misses by |measured/model − 1| > :data:`SWITCH_MISS`; None when there is none.

    ``times_s`` are the calibrated model's times for ``fit.sizes_bytes``, in the same order.
    """
    errors = fit.times_s / np.asarray(times_s, dtype=float) - 1.0
    for segment in fit.segments:
        rows = (fit.sizes_bytes >= segment.size_min_bytes) & (fit.sizes_bytes <= segment.size_max_bytes)
        picked = list(dict.fromkeys(str(c) for c in np.asarray(choices)[rows]))
        worst = int(np.argmax(np.where(rows & (fit.sizes_bytes > SMALL_MAX_BYTES), np.abs(errors), -1.0)))
        if len(picked) > 1 and abs(errors[worst]) > SWITCH_MISS:
            where = f"{format_size(segment.size_min_bytes)}-{format_size(segment.size_max_bytes)}"
            return (f"{fit.label}: rows {where} fit one line (no algorithm or protocol change the regime search can "
                    f"see) but the calibrated model switches {' -> '.join(picked)} there and misses "
                    f"{format_size(fit.sizes_bytes[worst])} by {errors[worst]:+.0%} busbw: the model's selection "
                    f"there, not a tier number")
    return None
