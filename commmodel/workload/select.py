"""``np.select`` without its per-call overhead, for the step model's small arrays.

``np.select`` broadcasts every condition and choice, stacks them and copies (about 6 µs a call even on one
element); the step model calls it a few times per evaluation, which a single-layout ``estimate`` feels.
:func:`select` answers the same by nested ``np.where``: the choice of the first true condition, else the
default, element by element (the values are chosen, never recomputed, so they are identical).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def select(conditions: Sequence[Any], choices: Sequence[Any], default: Any = 0.0) -> np.ndarray:
    """``np.select(conditions, choices, default)``: per element, the choice of the first true condition."""
    out = default
    for condition, choice in zip(reversed(conditions), reversed(choices)):
        out = np.where(condition, choice, out)
    return np.asarray(out)
