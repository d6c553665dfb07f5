"""A library's selection rule as data: (ranks, bytes) -> algorithm, read from its source's decision table.

Open MPI's ``coll/tuned`` fixed decisions, MPICH's size thresholds and torch's gloo choice are all
step functions of the communicator size and the message size; each is written here as rows
``(ranks_below, ((bytes_below, algorithm), ...))`` exactly as the source's if-chain reads, so a test
can compare any (ranks, size) cell with the cited table.
"""

from math import inf
from typing import NamedTuple

import numpy as np

SizeSteps = tuple[tuple[float, str], ...]
"""((bytes_below, algorithm), ...): the first row whose bound exceeds the size wins; the last bound is inf."""


class DecisionTable(NamedTuple):
    """One primitive's decision table (rows by communicator size, then by message size)."""

    rows: tuple[tuple[float, SizeSteps], ...]
    """((ranks_below, size steps), ...): the first row whose bound exceeds the rank count applies."""
    source: str
    """The file and commit (or documentation) the table is read from."""
    size_is_per_rank: bool = False
    """True where the source compares the per-rank count × element size (Open MPI all-gather: ``scount``),
    False where it compares the whole buffer."""

    def choose(self, num_ranks: float, size_bytes: float) -> str:
        """The algorithm the table names for ``num_ranks`` ranks and a buffer of ``size_bytes`` (nccl-tests S)."""
        key = size_bytes / num_ranks if self.size_is_per_rank else size_bytes
        for ranks_below, steps in self.rows:
            if num_ranks < ranks_below:
                for bytes_below, algorithm in steps:
                    if key < bytes_below:
                        return algorithm
        raise AssertionError(f"decision table {self.source} has no row for {num_ranks} ranks, {size_bytes} B")

    def choose_all(self, num_ranks: np.ndarray, size_bytes: np.ndarray) -> np.ndarray:
        """:meth:`choose` element-wise over broadcast arrays (object array of names)."""
        n, s = np.broadcast_arrays(np.asarray(num_ranks, dtype=float), np.asarray(size_bytes, dtype=float))
        out = np.empty(n.shape, dtype=object)
        for idx in np.ndindex(n.shape):
            out[idx] = self.choose(float(n[idx]), float(s[idx]))
        return out


def always(algorithm: str, source: str) -> DecisionTable:
    """A table with one answer everywhere (gloo: torch.distributed always runs gloo's ring all-reduce)."""
    return DecisionTable(((inf, ((inf, algorithm),)),), source)


__all__ = ["DecisionTable", "SizeSteps", "always", "inf"]
