"""A step-by-step schedule simulator: the oracle the closed forms are tested against.

A schedule is a list of rounds; a round is a list of messages ``(src, dst, bytes)``. Each rank keeps
a clock. A message starts when both its sender and its receiver have finished their previous round
(the sender has the data, the receiver has a free buffer), takes ``α(src, dst) + bytes / B(src, dst)``,
and links are full duplex (a rank sends and receives in the same round at once). The collective ends
when the last rank's clock stops. This is the textbook synchronous-round model (Thakur et al. 2005),
with no pipelining inside a round, so it checks the step counts, message sizes and tier of every
hop of the closed forms in :mod:`commmodel.collectives.algorithms`.

Pure Python on small n: a test oracle, not a model to run in the planner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Message = tuple[int, int, float]
Schedule = list[list[Message]]


def simulate(schedule: Sequence[Sequence[Message]], num_ranks: int,
             alpha_s: Callable[[int, int], float], bw_bytes_per_s: Callable[[int, int], float]) -> float:
    """Completion time of ``schedule`` on ``num_ranks`` ranks with per-pair latency and bandwidth."""
    clock = [0.0] * num_ranks
    for messages in schedule:
        finish = list(clock)
        for src, dst, size in messages:
            start = max(clock[src], clock[dst])
            done = start + alpha_s(src, dst) + size / bw_bytes_per_s(src, dst)
            finish[src] = max(finish[src], done)
            finish[dst] = max(finish[dst], done)
        clock = finish
    return max(clock)


def ring_schedule(op: str, num_ranks: int, size_bytes: float) -> Schedule:
    """Ring: every rank sends S/n to its right neighbour, 2(n−1) rounds (all-reduce) or n−1."""
    n = num_ranks
    rounds = 2 * (n - 1) if op == "all_reduce" else n - 1
    return [[(i, (i + 1) % n, size_bytes / n) for i in range(n)] for _ in range(rounds)]


def chain_schedule(num_ranks: int, size_bytes: float, chunks: int) -> Schedule:
    """Pipelined chain broadcast from rank 0: S in ``chunks`` pieces, rank i forwards piece c in round i + c."""
    n = num_ranks
    return [[(i, i + 1, size_bytes / chunks) for i in range(n - 1) if 0 <= r - i < chunks]
            for r in range(n - 1 + chunks - 1)]


def recursive_doubling_schedule(op: str, num_ranks: int, size_bytes: float) -> Schedule:
    """Exchange with rank XOR 2^k (n a power of two): all-reduce moves S, all-gather 2^k·S/n in round k."""
    n = num_ranks
    rounds = []
    k = 0
    while (1 << k) < n:
        size = size_bytes if op == "all_reduce" else (1 << k) * size_bytes / n
        rounds.append([(i, i ^ (1 << k), size) for i in range(n)])
        k += 1
    return rounds


def recursive_halving_schedule(num_ranks: int, size_bytes: float) -> Schedule:
    """Reduce-scatter by halving (n a power of two): distance n/2 first with S/2, then n/4 with S/4, ..."""
    n = num_ranks
    rounds = []
    distance, size = n // 2, size_bytes / 2
    while distance >= 1:
        rounds.append([(i, i ^ distance, size) for i in range(n)])
        distance //= 2
        size /= 2
    return rounds


def binomial_schedule(op: str, num_ranks: int, size_bytes: float) -> Schedule:
    """Binomial tree from rank 0, farthest rank first: broadcast sends S each round; scatter sends the
    destination's whole subtree (d/n·S for distance d)."""
    n = num_ranks
    top = 1
    while top < n:
        top <<= 1
    rounds = []
    distance = top // 2
    while distance >= 1:
        msgs = []
        for i in range(0, n, 2 * distance):
            if i + distance < n:
                subtree = min(distance, n - i - distance)
                size = size_bytes if op == "broadcast" else subtree * size_bytes / n
                msgs.append((i, i + distance, size))
        rounds.append(msgs)
        distance //= 2
    return rounds


def two_tier(ranks_per_domain: int, intra: float, inter: float) -> Callable[[int, int], float]:
    """A per-pair function that is ``intra`` inside a domain of ``ranks_per_domain`` consecutive ranks, else ``inter``."""
    return lambda a, b: intra if a // ranks_per_domain == b // ranks_per_domain else inter
