"""The collective primitives, in nccl-tests' vocabulary (DESIGN §2, §4).

Each primitive is one uniform entry: its name, aliases, the busbw factor nccl-tests uses, and
the Chan et al. (2007) lower bound. **Message size S** is always the whole buffer in bytes, as
nccl-tests counts it (for all-gather, reduce-scatter and all-to-all: per-rank count × ranks ×
element size).
"""

from typing import NamedTuple

import numpy as np

from commmodel.bus_factors import BUS_FACTORS
from commmodel.errors import CollectiveError

ArrayLike = float | int | np.ndarray

REDUCTION_BYTES_PER_BYTE = 3.0
"""Memory traffic of reducing one byte: two operands read and one result written (the γ term of every library, on
GPU memory or a CPU's); the one owner (collectives.choice, libraries.gloo and libraries.host read it)."""
COPY_BYTES_PER_BYTE = 2.0
"""Memory traffic of copying one byte: one read and one write."""


def _ceil_log2(num_ranks: ArrayLike) -> np.ndarray:
    return np.ceil(np.log2(np.maximum(np.asarray(num_ranks, dtype=float), 1.0)))


class Primitive(NamedTuple):
    """One collective primitive as nccl-tests defines it."""

    name: str
    """Canonical nccl-tests name: all_reduce, all_gather, ..."""
    aliases: tuple[str, ...]
    """Other spellings accepted on the command line."""
    needs_reduction: bool
    """Whether the primitive combines data (reduce, all-reduce, reduce-scatter)."""
    description: str
    """One line for help texts."""

    def busbw_factor(self, num_ranks: ArrayLike) -> np.ndarray:
        """busbw = algbw × factor(n) (nccl-tests doc/PERFORMANCE.md; one table: :data:`.bus_factors.BUS_FACTORS`)."""
        return BUS_FACTORS[self.name](np.asarray(num_ranks, dtype=float))

    def wire_fraction(self, num_ranks: ArrayLike) -> np.ndarray:
        """Bytes each rank must move at least, as a fraction of S (the β part of the lower bound): the busbw factor,
        which nccl-tests defines as exactly that fraction."""
        return self.busbw_factor(num_ranks)


PRIMITIVES: dict[str, Primitive] = {
    p.name: p
    for p in (
        Primitive("all_reduce", ("allreduce",), True,
                  "every rank ends with the sum of all ranks' S-byte buffers"),
        Primitive("all_gather", ("allgather",), False,
                  "every rank ends with all ranks' S/n-byte pieces (S total)"),
        Primitive("reduce_scatter", ("reducescatter",), True,
                  "every rank ends with its S/n-byte piece of the sum"),
        Primitive("all_to_all", ("alltoall", "all2all"), False,
                  "every rank sends a distinct S/n-byte piece to every rank"),
        Primitive("broadcast", ("bcast",), False,
                  "the root's S-byte buffer reaches every rank"),
        Primitive("reduce", (), True,
                  "the root ends with the sum of all S-byte buffers"),
        Primitive("gather", (), False,
                  "the root ends with every rank's S/n-byte piece"),
        Primitive("scatter", (), False,
                  "the root sends each rank its S/n-byte piece"),
        Primitive("send_recv", ("sendrecv", "p2p", "send", "recv"), False,
                  "one rank sends S bytes to another (point to point)"),
        Primitive("barrier", (), False,
                  "every rank waits for every other (no payload)"),
    )
}

_ALIASES = {alias: name for name, p in PRIMITIVES.items() for alias in (name, *p.aliases)}


def get_primitive(op: str) -> Primitive:
    """The primitive named ``op`` (aliases such as ``alltoall`` accepted, case-insensitive)."""
    if op in PRIMITIVES:  # already canonical (every internal call)
        return PRIMITIVES[op]
    key = op.strip().lower().replace("-", "_")
    if key not in _ALIASES:
        raise CollectiveError(f"unknown collective {op!r}; known: {', '.join(PRIMITIVES)}")
    return PRIMITIVES[_ALIASES[key]]


def busbw_factor(op: str, num_ranks: ArrayLike) -> np.ndarray:
    """nccl-tests' busbw/algbw factor for ``op`` on ``num_ranks`` ranks."""
    return get_primitive(op).busbw_factor(np.asarray(num_ranks, dtype=float))


def lower_bound_s(op: str, size_bytes: ArrayLike, num_ranks: ArrayLike,
                  latency_s: ArrayLike, bw_bytes_per_s: ArrayLike) -> np.ndarray:
    """Chan et al. 2007 lower bound: ⌈log₂n⌉·α + wire_fraction(n)·S/B (no in-network reduction).

    all-reduce ≥ ⌈log₂n⌉α + 2(n−1)/n·S·β; all-gather/reduce-scatter ≥ ⌈log₂n⌉α + (n−1)/n·S·β;
    broadcast/reduce ≥ ⌈log₂n⌉α + S·β; send/recv ≥ α + S·β.
    """
    prim = get_primitive(op)
    n = np.asarray(num_ranks, dtype=float)
    hops = np.maximum(_ceil_log2(n), 1.0) if prim.name == "send_recv" else _ceil_log2(n)
    return hops * np.asarray(latency_s) + prim.wire_fraction(n) * np.asarray(size_bytes) / np.asarray(bw_bytes_per_s)
