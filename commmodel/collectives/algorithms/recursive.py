"""Recursive doubling, recursive halving and Rabenseifner's algorithm (textbook, MPI-style).

Ranks are ordered node-major; round k pairs ranks 2^k apart, so with r ranks per domain the first
⌊log₂ r⌋ rounds of recursive doubling stay inside the domain and the rest cross the network (at
one rank's own NIC rate); recursive halving runs the same rounds in the opposite order.

* recursive doubling all-reduce: log₂p rounds of α + S/B (p = 2^⌊log₂n⌋); for n ≠ p the n − p extra
  ranks first hand their vector to a partner and get the result back: + 2(α + S/B).
* recursive doubling all-gather (n a power of two): log₂n·α + (n−1)/n·S/B.
* recursive halving reduce-scatter (n a power of two): log₂n·α + (n−1)/n·S/B (+ γ on the same bytes).
* Rabenseifner all-reduce = halving reduce-scatter + doubling all-gather: 2·log₂p·α + 2(p−1)/p·S/B;
  for n ≠ p a pre-step exchanging halves (α + S/2B) and a post-step returning the result (α + S/B).

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in MPICH",
IJHPCA 2005 (§4.4 for non-powers of two); Rabenseifner, "Optimization of collective reduction
operations", ICCS 2004.
"""

import math
from typing import NamedTuple

import numpy as np

from commmodel.collectives.algorithms.base import AlgoCost, cost, floor_pow2, is_pow2
from commmodel.collectives.protocols import BASE_LATENCY_S
from commmodel.collectives.topology import GroupTopology


class _Schedule(NamedTuple):
    """Rounds, step latencies and rates of a distance-doubling schedule over node-major ranks."""

    intra: np.ndarray
    """Rounds inside a domain (partners 2^k apart with 2^k < r)."""
    inter: np.ndarray
    """Rounds across domains (the rest of log₂p)."""
    a_in: np.ndarray
    """α of a round inside a domain."""
    a_out: np.ndarray
    """α of a round across domains (0 without a network)."""
    b_in: float
    """Per-rank rate inside a domain."""
    b_out: np.ndarray
    """One rank's own NIC rate (inf inside one domain)."""


def _schedule(topo: GroupTopology, protocol: str, p: np.ndarray) -> _Schedule:
    """log₂p rounds: the first ⌊log₂r⌋ stay inside the domain, the others cross the network."""
    total = np.log2(p)
    intra = np.minimum(np.floor(np.log2(np.maximum(topo.ranks_per_domain, 1.0))), total)
    inter_step = topo.inter_step_s("ring", protocol) if math.isfinite(topo.inter_latency_s) else 0.0
    return _Schedule(intra, total - intra, topo.intra_step_s("ring", protocol), np.asarray(inter_step),
                     topo.intra_bw(), topo.inter_rank_bw())


def _fold_step(topo: GroupTopology, sched: _Schedule) -> tuple[np.ndarray, np.ndarray]:
    """(α, rate) of the fold/unfold step a non-power-of-two n adds: ranks 2i and 2i + 1 pair up (Thakur et al.
    §4.4), neighbours in node-major order, so inside a domain where it holds two or more of the group's ranks,
    across the network (the rank's own NIC) where it holds one."""
    inside = np.asarray(topo.ranks_per_domain) >= 2
    return np.where(inside, sched.a_in, sched.a_out), np.where(inside, sched.b_in, sched.b_out)


def recursive_doubling_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """All-reduce: log₂p(α + S/B) (+ 2(α + S/B) when n is not a power of two); all-gather: log₂n·α + (n−1)/n·S/B."""
    n = topo.num_ranks
    p = floor_pow2(n)
    sched = _schedule(topo, protocol, p)
    intra, inter, a_in, a_out, b_in, b_out = sched
    base = BASE_LATENCY_S["ring"][protocol]
    if op in ("all_reduce", "barrier"):
        extra = np.where(is_pow2(n), 0.0, 2.0)
        a_fold, b_fold = _fold_step(topo, sched)
        latency = base + intra * a_in + inter * a_out + extra * a_fold
        bandwidth = (intra * size_bytes / b_in + extra * size_bytes / b_fold
                     + np.where(inter > 0, inter * size_bytes / b_out, 0.0))
        rounds = intra + inter + extra
        return cost(latency, bandwidth, rounds * size_bytes, (intra + inter + extra / 2) * size_bytes)
    r_pow = 2.0 ** intra
    intra_bytes = (r_pow - 1) / n * size_bytes
    inter_bytes = (n - r_pow) / n * size_bytes
    latency = base + intra * a_in + inter * a_out
    bandwidth = intra_bytes / b_in + np.where(inter > 0, inter_bytes / b_out, 0.0)
    return cost(latency, bandwidth, (n - 1) / n * size_bytes)


def recursive_halving_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """Reduce-scatter: log₂n·α + (n−1)/n·S/B, the far (network) rounds first with the larger halves."""
    n = topo.num_ranks
    intra, inter, a_in, a_out, b_in, b_out = _schedule(topo, protocol, n)
    m_eff = 2.0 ** inter
    inter_bytes = size_bytes * (1.0 - 1.0 / m_eff)
    intra_bytes = size_bytes * (1.0 / m_eff - 1.0 / n)
    latency = BASE_LATENCY_S["ring"][protocol] + intra * a_in + inter * a_out
    bandwidth = intra_bytes / b_in + np.where(inter > 0, inter_bytes / b_out, 0.0)
    wire = (n - 1) / n * size_bytes
    return cost(latency, bandwidth, wire, wire)


def rabenseifner_cost(op: str, size_bytes: np.ndarray, topo: GroupTopology, protocol: str) -> AlgoCost:
    """All-reduce: 2·log₂p·α + 2(p−1)/p·S/B; n ≠ p adds α + S/(2B) before and α + S/B after."""
    n = topo.num_ranks
    p = floor_pow2(n)
    sched = _schedule(topo, protocol, p)
    intra, inter, a_in, a_out, b_in, b_out = sched
    m_eff = 2.0 ** inter
    inter_bytes = size_bytes * (1.0 - 1.0 / m_eff)
    intra_bytes = size_bytes * (1.0 / m_eff - 1.0 / p)
    odd = ~is_pow2(n)
    a_fold, b_fold = _fold_step(topo, sched)
    latency = BASE_LATENCY_S["ring"][protocol] + 2.0 * (intra * a_in + inter * a_out) + np.where(odd, 2.0 * a_fold, 0.0)
    bandwidth = (2.0 * intra_bytes / b_in + np.where(inter > 0, 2.0 * inter_bytes / b_out, 0.0)
                 + np.where(odd, 1.5 * size_bytes / b_fold, 0.0))
    wire = 2.0 * (p - 1) / p * size_bytes + np.where(odd, 1.5 * size_bytes, 0.0)
    return cost(latency, bandwidth, wire, (p - 1) / p * size_bytes + np.where(odd, 0.5 * size_bytes, 0.0))
