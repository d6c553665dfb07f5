"""nccl-tests' bus-bandwidth factor per collective: busbw = algbw × factor(n) on n ranks (NVIDIA/nccl-tests
doc/PERFORMANCE.md, "Bus bandwidth"). One owner: the collective primitives (``collectives.primitives``) and the
nccl-tests reader (``io.nccl_tests``, a low layer that may not import the collectives) both read this table.

The factor is the fraction of the message each rank must move at least, so that busbw compares with the link's
rate whatever the rank count: all-reduce 2(n−1)/n; all-gather, reduce-scatter, all-to-all, gather and scatter
(n−1)/n; broadcast, reduce and send/recv 1; a barrier moves no payload."""

from collections.abc import Callable

import numpy as np


def _all_reduce(n: np.ndarray) -> np.ndarray:
    return 2.0 * (n - 1.0) / n


def _n_minus_1_over_n(n: np.ndarray) -> np.ndarray:
    return (n - 1.0) / n


def _one(n: np.ndarray) -> np.ndarray:
    return np.ones_like(n, dtype=float)


def _zero(n: np.ndarray) -> np.ndarray:
    return np.zeros_like(n, dtype=float)


BUS_FACTORS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "all_reduce": _all_reduce, "all_gather": _n_minus_1_over_n, "reduce_scatter": _n_minus_1_over_n,
    "all_to_all": _n_minus_1_over_n, "gather": _n_minus_1_over_n, "scatter": _n_minus_1_over_n,
    "broadcast": _one, "reduce": _one, "send_recv": _one, "barrier": _zero}
"""busbw/algbw per canonical collective name, as a function of the rank count (arrays or floats)."""

__all__ = ["BUS_FACTORS"]
