"""The message sizes of an nccl-tests style sweep (``-b MIN -e MAX -f FACTOR``): MIN, MIN·FACTOR, … up to MAX
inclusive. One rule for every command that sweeps — ``sweep``, ``plot collective`` and ``calibrate run`` — and its
bound (:data:`commmodel.limits.MAX_SWEEP_POINTS`), checked before a size is listed or a rank started."""

from __future__ import annotations

import math

import numpy as np

from commmodel.errors import CommModelError
from commmodel.limits import MAX_SWEEP_POINTS
from commmodel.units import format_size

_RATIO_SLACK = 1e-9
"""Relative slack on log(MAX/MIN)/log(FACTOR), so that MAX itself is kept when rounding puts it a hair past the last
step (1 KiB … 1 GiB by 2 is 21 sizes, not 20)."""


def _size(size_bytes: float) -> str:
    return format_size(size_bytes) if 0 < size_bytes < math.inf else f"{size_bytes:g} B"


def factor_text(factor: float) -> str:
    """``--factor`` as the user gave it: the short form (2, 1.5, inf) where it reads back exactly, else every digit
    (1.000000000001, not the 1 that ``:g`` rounds it to)."""
    short = f"{factor:g}"
    return short if float(short) == factor else repr(factor)


def sweep_count(min_bytes: float, max_bytes: float, factor: float, error: type[CommModelError] = CommModelError) -> int:
    """How many sizes MIN·FACTOR^k ≤ MAX there are; ``error`` (the caller's error class) where the range is empty or
    holds more than :data:`MAX_SWEEP_POINTS` sizes (a factor of 1.0001 is a typo, and listing 10^11 sizes would not
    end)."""
    if not (0 < min_bytes <= max_bytes and 1 < factor < math.inf):
        raise error(f"size range --min-size {_size(min_bytes)} .. --max-size {_size(max_bytes)} with --factor "
                    f"{factor_text(factor)} is empty; need 0 < min ≤ max and a finite factor > 1")
    count = math.floor(math.log(max_bytes / min_bytes) / math.log(factor) + _RATIO_SLACK) + 1
    if count > MAX_SWEEP_POINTS:
        raise error(f"--factor {factor_text(factor)} gives {count} sizes between {_size(min_bytes)} and "
                    f"{_size(max_bytes)} (at most {MAX_SWEEP_POINTS:,}); use a larger factor, e.g. 2")
    return count


def sweep_sizes_bytes(min_bytes: float, max_bytes: float, factor: float = 2.0,
                      error: type[CommModelError] = CommModelError) -> np.ndarray:
    """MIN, MIN·FACTOR, … ≤ MAX (float bytes; powers of two by default; :func:`sweep_count` says how many and
    refuses a bad range)."""
    return min_bytes * factor ** np.arange(sweep_count(min_bytes, max_bytes, factor, error))


def whole_sweep_sizes_bytes(min_bytes: int, max_bytes: int, factor: float,
                            error: type[CommModelError] = CommModelError) -> list[int]:
    """The sweep in whole bytes, a size that rounds onto the one before it dropped (a benchmark times each once)."""
    return list(dict.fromkeys(int(round(float(size))) for size in sweep_sizes_bytes(min_bytes, max_bytes, factor,
                                                                                      error)))
