"""Host-side libraries (gloo, MPI): α-β-γ forms per algorithm and the transport that sets α and β.

A host library moves CPU buffers with one message per peer per step, so one algorithm's time is

    T = messages · α + bytes · β + reduced · γ (+ host staging for GPU tensors)

with, per rank on the critical path, ``messages`` sent, ``bytes`` received and ``reduced`` bytes combined
on the CPU (Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 2005, Table 1 and §4; Chan et al. 2007 for the lower bounds). γ = 3 bytes of memory
traffic per reduced byte (two reads, one write) over the rank's share of the host's memory bandwidth.
GPU tensors are staged through host memory (a device→host copy before, host→device after).
The NCCL protocol constants (:mod:`..protocols`) play no part here.

Who copies: over TCP each byte is copied by the sending core (``send``) and by the receiving core (``recv``);
over single-copy shared memory (Open MPI vader with CMA: the receiver reads the sender's pages with
``process_vm_readv``) only the receiver copies. So where the sender copies, a rank of an exchange
(:data:`EXCHANGES`: it sends and receives at once) copies twice what one end of a one-way stream does (× 2 on
its byte term); where it does not, a fan-out (:data:`RECEIVER_COPY_FORMS`: the root posts to every peer) costs
one copy per peer, all in parallel, instead of n − 1 copies on the root.

Cache-resident copies: a library whose transport is a memory copy (MPI's single-copy shared memory) copies at
the cache's rate what stays resident between calls and at the memory stream rate what does not. The node's ranks
hold a buffer of S bytes each, so their footprint is ranks × S against the node's last-level cache C
(``System.host_llc_bytes``); the fraction h = min(1, C / (ranks × S)) of each buffer is taken as resident (the
fraction of the footprint the cache can hold) and a copied byte costs h / β_cache + (1 − h) / β_stream: the cache
rate while the footprint fits, the stream rate as it outgrows the cache, continuous in S (:func:`copy_s_per_byte`).
TCP (gloo) is not priced so: its stream rate is the socket path's, not memory's (``benchmarks/host_microbench.py
--sweep``: gloo's one-stream rate is flat from 1 to 64 MiB where MPI's halves).

Cores per rank: every term above is CPU work of the rank (the kernel's socket or shared-memory copies, the
library's progress loop, the reduction). Where a node runs more ranks than it has cores (``System.host_cores``),
the ranks of a collective are all runnable at once and time-share the cores: with f = ranks per core, a copy or
reduction gets 1/f of a core (rates ÷ f, α × f), and a message finds its receiver off the core with probability
1 − 1/f, when it waits the transport's ``wait_s`` for it to be scheduled (:func:`time_shared`). A profile
without ``host_cores`` (GPU servers, one rank per GPU on dozens of cores) has f = 1.
"""

from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np

from commmodel.collectives.algorithms.base import ceil_log2, floor_pow2, is_pow2
from commmodel.collectives.primitives import COPY_BYTES_PER_BYTE, REDUCTION_BYTES_PER_BYTE
from commmodel.hardware.host_copy import PCIE5_PINNED_COPY_BW_BYTES_PER_S, pinned_copy_bw
from commmodel.hardware.models import System

Form = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""(n, S) -> (messages, bytes received, bytes reduced) on the busiest rank."""


def _ring_reduce(n, s):
    return 2.0 * (n - 1), 2.0 * (n - 1) / n * s, (n - 1) / n * s


def _ring_gather(n, s):
    return n - 1.0, (n - 1) / n * s, 0.0 * s


def _ring_reduce_scatter(n, s):
    return n - 1.0, (n - 1) / n * s, (n - 1) / n * s


def _chain(n, s):  # pipelined chain broadcast: latency of n−1 hops, S through each link once
    return n - 1.0, s, 0.0 * s


def _recursive_doubling(n, s):
    p = floor_pow2(n)
    extra = np.where(is_pow2(n), 0.0, 2.0)
    rounds = np.log2(p) + extra
    return rounds, rounds * s, (np.log2(p) + extra / 2) * s


def _recursive_doubling_gather(n, s):
    return ceil_log2(n), (n - 1) / n * s, 0.0 * s


def _rabenseifner(n, s):
    p = floor_pow2(n)
    odd = ~is_pow2(n)
    msgs = 2.0 * np.log2(p) + np.where(odd, 2.0, 0.0)
    wire = 2.0 * (p - 1) / p * s + np.where(odd, 1.5 * s, 0.0)
    return msgs, wire, (p - 1) / p * s + np.where(odd, 0.5 * s, 0.0)


def _binomial(n, s):
    return ceil_log2(n), ceil_log2(n) * s, 0.0 * s


def _binomial_reduce(n, s):
    return ceil_log2(n), ceil_log2(n) * s, ceil_log2(n) * s


def _reduce_bcast(n, s):  # binomial reduce then binomial broadcast (Open MPI "nonoverlapping")
    return 2.0 * ceil_log2(n), 2.0 * ceil_log2(n) * s, ceil_log2(n) * s


def _linear_allreduce(n, s):  # every rank sends to the root, the root sends back (Open MPI "basic_linear")
    return 2.0 * (n - 1), 2.0 * (n - 1) * s, (n - 1) * s


def _linear_bcast(n, s):  # the root sends S to each peer in turn
    return n - 1.0, (n - 1) * s, 0.0 * s


def _scatter_allgather(n, s):  # van de Geijn: binomial scatter + ring all-gather (MPICH long broadcast)
    return ceil_log2(n) + n - 1.0, 2.0 * (n - 1) / n * s, 0.0 * s


def _neighbor_exchange(n, s):  # Chen et al. 2005: n/2 exchanges of two blocks (Open MPI "neighbor")
    return np.ceil(n / 2.0), (n - 1) / n * s, 0.0 * s


def _bcube(n, s):  # gloo bcube with base n: one direct reduce-scatter + one direct all-gather
    return 2.0 * (n - 1), 2.0 * (n - 1) / n * s, (n - 1) / n * s


def _pairwise(n, s):
    return n - 1.0, (n - 1) / n * s, 0.0 * s


def _p2p(n, s):
    return np.ones_like(n), s, 0.0 * s


def _dissemination(n, s):
    return ceil_log2(n), 0.0 * s, 0.0 * s


FORMS: dict[tuple[str, str], Form] = {
    ("ring", "all_reduce"): _ring_reduce, ("ring_chunked", "all_reduce"): _ring_reduce,
    ("ring", "all_gather"): _ring_gather, ("ring", "reduce_scatter"): _ring_reduce_scatter,
    ("ring", "broadcast"): _chain, ("ring", "reduce"): _chain,
    ("recursive_doubling", "all_reduce"): _recursive_doubling,
    ("recursive_doubling", "all_gather"): _recursive_doubling_gather,
    ("recursive_doubling", "barrier"): _dissemination,
    ("recursive_halving", "reduce_scatter"): _ring_reduce_scatter,
    ("rabenseifner", "all_reduce"): _rabenseifner, ("halving_doubling", "all_reduce"): _rabenseifner,
    ("bruck", "all_gather"): _recursive_doubling_gather, ("bruck", "all_to_all"): _binomial,
    ("binomial_tree", "broadcast"): _binomial, ("binomial_tree", "reduce"): _binomial_reduce,
    ("binomial_tree", "gather"): _pairwise, ("binomial_tree", "scatter"): _pairwise,
    ("reduce_bcast", "all_reduce"): _reduce_bcast, ("parameter_server", "all_reduce"): _linear_allreduce,
    ("linear", "broadcast"): _linear_bcast, ("scatter_allgather", "broadcast"): _scatter_allgather,
    ("bcube", "all_reduce"): _bcube, ("neighbor_exchange", "all_gather"): _neighbor_exchange,
    ("pairwise", "all_to_all"): _pairwise, ("pairwise", "gather"): _pairwise, ("pairwise", "scatter"): _pairwise,
    ("p2p", "send_recv"): _p2p, ("dissemination", "barrier"): _dissemination,
}
"""(algorithm, primitive) -> its host form. Names are the registry's where it has the algorithm; ring_chunked,
halving_doubling, bcube (gloo), reduce_bcast, linear, scatter_allgather (MPI) are host-library forms."""

EXCHANGES: frozenset[tuple[str, str]] = frozenset({
    ("ring", "all_reduce"), ("ring_chunked", "all_reduce"), ("ring", "all_gather"), ("ring", "reduce_scatter"),
    ("ring", "broadcast"), ("ring", "reduce"),  # a pipelined chain: the middle ranks forward while they receive
    ("recursive_doubling", "all_reduce"), ("recursive_doubling", "all_gather"),
    ("recursive_halving", "reduce_scatter"), ("rabenseifner", "all_reduce"), ("halving_doubling", "all_reduce"),
    ("bruck", "all_gather"), ("bruck", "all_to_all"), ("bcube", "all_reduce"), ("neighbor_exchange", "all_gather"),
    ("pairwise", "all_to_all"), ("scatter_allgather", "broadcast"),
})
"""Forms in which each rank sends and receives at once (pairwise exchanges, rings); trees, linear fan-in/out and
point-to-point move one direction per rank at a time."""

RECEIVER_COPY_FORMS: dict[tuple[str, str], Form] = {
    ("linear", "broadcast"): lambda n, s: (n - 1.0, s, 0.0 * s),  # each peer copies S from the root at once
    ("parameter_server", "all_reduce"): lambda n, s: (2.0 * (n - 1), n * s, (n - 1) * s),  # in: (n−1)·S; out: S
}
"""Fan-out forms priced where only the receiver copies (single-copy shared memory): (messages, bytes, reduced)."""


PCIE5_STAGING_BW_BYTES_PER_S = PCIE5_PINNED_COPY_BW_BYTES_PER_S
"""The staging rate of a system whose GPU states no host link: a pinned copy on PCIe Gen5 x16
(:mod:`commmodel.hardware.host_copy`)."""


def staging_bw_bytes_per_s(system: System) -> float:
    """Host↔device copy rate of one GPU's tensors staged through host memory (gloo; Open MPI's reductions): the pinned
    copy rate on its host link (:func:`commmodel.hardware.host_copy.pinned_copy_bw`, the rate activation offload uses
    too), else :data:`PCIE5_STAGING_BW_BYTES_PER_S`."""
    rate = pinned_copy_bw(system)
    return PCIE5_STAGING_BW_BYTES_PER_S if rate is None else rate.value


class Transport(NamedTuple):
    """α, β and γ of a host library on one group (floats or arrays over groups)."""

    message_s: np.ndarray
    """α: one message's latency on the slowest tier the group uses (s)."""
    bw_bytes_per_s: np.ndarray
    """β⁻¹: one rank's streaming rate on that tier."""
    reduce_bw_bytes_per_s: float
    """Bytes per second one rank reduces: its share of host memory bandwidth / 3 (two reads, one write)."""
    staging_bw_bytes_per_s: float
    """Host↔device copy rate for GPU tensors (inf for CPU tensors: nothing to stage)."""
    call_s: float = 0.0
    """Fixed cost of one collective call (dispatch, setup)."""
    copies: str = "none"
    """Who copies each byte: "both" (TCP: send and recv), "receiver" (single-copy shared memory) or "none"
    (one-sided DMA: RDMA, GPU copy engines; the link prices the bytes)."""
    wait_s: float = 0.0
    """Time-shared ranks: the wait for a receiver that is off its core (see :func:`time_shared`)."""
    cached_bw_bytes_per_s: np.ndarray | None = None
    """One rank's copy rate for bytes resident in the last-level cache; None where the transport's rate is not a
    memory copy's (TCP) or is calibrated (one fitted rate for every size)."""
    cache_bytes: np.ndarray | float = 0.0
    """Each rank's share of the node's last-level cache, C / ranks per node (0: nothing stays resident)."""
    rendezvous_s: np.ndarray | None = None
    """α of a message above ``eager_limit_bytes``, sent by rendezvous (a header, the receiver's get, a completion
    message); None where every message costs ``message_s``."""
    eager_limit_bytes: float = np.inf
    """Largest message sent eagerly (copied through the library's own buffers at once)."""
    sleeping_waits: bool = False
    """Whether a rank waiting for a message sleeps (gloo: a condition variable and ``epoll_wait``) rather than
    polling (Open MPI's progress loop): a sleeping rank uses no core, so where a form's rounds involve only some of
    its ranks only those share the cores (:func:`rank_sharing`)."""


def message_alpha_s(tr: Transport, message_bytes: np.ndarray) -> np.ndarray:
    """α of one message of ``message_bytes``: ``rendezvous_s`` above the eager limit, ``message_s`` up to it."""
    if tr.rendezvous_s is None:
        return tr.message_s * np.ones_like(np.asarray(message_bytes, dtype=float))
    return np.where(np.asarray(message_bytes) > tr.eager_limit_bytes, tr.rendezvous_s, tr.message_s)


def resident_fraction(cache_bytes: np.ndarray | float, size: np.ndarray) -> np.ndarray:
    """h = min(1, c / S): the fraction of a rank's S-byte buffer its share c of the last-level cache holds (1 for an
    empty buffer)."""
    size = np.asarray(size, dtype=float)
    return np.clip(np.divide(cache_bytes, size, out=np.ones_like(size * cache_bytes), where=size > 0), 0.0, 1.0)


def copy_s_per_byte(tr: Transport, size: np.ndarray) -> np.ndarray:
    """β of one streamed byte of a collective on S-byte buffers: h / β_cache + (1 − h) / β_stream with h the
    :func:`resident_fraction` (1 / β_stream where the transport has no cache-resident rate)."""
    stream = 1.0 / np.asarray(tr.bw_bytes_per_s, dtype=float)
    if tr.cached_bw_bytes_per_s is None:
        return stream * np.ones_like(np.asarray(size, dtype=float))
    h = resident_fraction(tr.cache_bytes, size)
    return h / tr.cached_bw_bytes_per_s + (1.0 - h) * stream


COPY_PER_REDUCED_BYTE = COPY_BYTES_PER_BYTE / REDUCTION_BYTES_PER_BYTE
"""A memory copy moves 2 bytes of traffic per byte (one read, one write) where a reduction moves 3: a copied byte
costs 2/3 of a reduced one at the same memory bandwidth (the γ term; :mod:`.primitives` owns both counts)."""


def host_terms(form_name: str, op: str, n: np.ndarray, size: np.ndarray, copies: str,
               copied_bytes: np.ndarray | float = 0.0,
               forms: Mapping[tuple[str, str], Form] | None = None) -> tuple[np.ndarray, ...]:
    """(messages, streamed bytes, γ bytes, received bytes) of one host form on the busiest rank: the time is
    call + messages·α + streamed·β + γ-bytes·γ. ``forms`` are the library's own forms, read before :data:`FORMS`
    (gloo's ring differs from the textbook one). Where both ends copy, an exchange's bytes are streamed twice;
    where only the receiver does, a fan-out takes its receiver-copy form; the γ bytes are the reduced ones plus the
    library's own buffer copies (``copied_bytes``) at 2/3 the weight."""
    key = (form_name, op)
    form = RECEIVER_COPY_FORMS[key] if copies == "receiver" and key in RECEIVER_COPY_FORMS else None
    form = form or (forms or {}).get(key) or FORMS[key]
    msgs, wire, reduced = form(n, size)
    both_ends = 2.0 if copies == "both" and key in EXCHANGES else 1.0
    return msgs, both_ends * wire, reduced + COPY_PER_REDUCED_BYTE * copied_bytes, wire


def host_time_s(form_name: str, op: str, n: np.ndarray, size: np.ndarray, tr: Transport,
                copied_bytes: np.ndarray | float = 0.0,
                forms: Mapping[tuple[str, str], Form] | None = None) -> tuple[np.ndarray, ...]:
    """(latency_s, bandwidth_s, bytes received) of one host algorithm; staging copies S in and out (2·S). A message's
    α is the eager or the rendezvous one by the form's mean message, received bytes / messages."""
    msgs, streamed, reduced, received = host_terms(form_name, op, n, size, tr.copies, copied_bytes, forms)
    mean_message = np.divide(received, msgs, out=np.zeros_like(received * msgs), where=msgs > 0)
    latency = tr.call_s + msgs * message_alpha_s(tr, mean_message)
    staged = 0.0 if op in ("barrier",) else 2.0 * size / tr.staging_bw_bytes_per_s
    bandwidth = streamed * copy_s_per_byte(tr, size) + reduced / tr.reduce_bw_bytes_per_s + staged
    return latency, bandwidth, received


def oversubscription(system: System, ranks_per_node: np.ndarray) -> np.ndarray:
    """f = ranks per core of a node, at least 1 (1 where the profile does not say how many cores it has)."""
    per_node = np.asarray(ranks_per_node, dtype=float)
    if system.host_cores is None:
        return np.ones_like(per_node)
    return np.maximum(1.0, per_node / system.host_cores.value)


TREE_ROUND_FORMS: frozenset[tuple[str, str]] = frozenset({("binomial_tree", "broadcast"), ("binomial_tree", "reduce")})
"""Forms whose critical path is one message per round, round k involving 2^(k+1) ranks (a binomial tree doubles the
ranks holding the data each round; gloo/broadcast.cc's rounds): where waiting ranks sleep, the others do not share
the cores."""


class RankSharing(NamedTuple):
    """How the ranks of one algorithm share a node's cores (:func:`rank_sharing`)."""

    call_f: np.ndarray
    """Ranks per core while every rank enters the call (the call cost × it)."""
    path_f: np.ndarray
    """Ranks per core along the critical path, averaged over its rounds (α, streaming and reduction × it)."""
    wait_share: np.ndarray
    """Mean over the rounds of 1 − 1/f: the chance a message finds its receiver off its core (× the wait)."""


def rank_sharing(system: System, form_name: str, op: str, n: np.ndarray, per_node: np.ndarray,
                 sleeping_waits: bool) -> RankSharing:
    """f = ranks per core for the call and along the critical path. Every rank is runnable throughout a ring or an
    exchange, and throughout any form when waiting ranks poll: f = ranks per node / cores. In a
    :data:`TREE_ROUND_FORMS` form with sleeping waits, round k of ⌈log2 n⌉ has min(ranks per node, 2^(k+1))
    runnable ranks per node, so its f_k is theirs per core and the path's α and rates take the mean f_k."""
    f = oversubscription(system, per_node)
    if not sleeping_waits or (form_name, op) not in TREE_ROUND_FORMS or system.host_cores is None:
        return RankSharing(f, f, 1.0 - 1.0 / f)
    rounds = np.maximum(ceil_log2(np.asarray(n, dtype=float)), 1.0)
    path, wait = np.zeros_like(rounds * f), np.zeros_like(rounds * f)
    for k in range(int(np.max(rounds))):
        f_k = oversubscription(system, np.minimum(np.asarray(per_node, dtype=float), 2.0 ** (k + 1)))
        path, wait = path + np.where(k < rounds, f_k, 0.0), wait + np.where(k < rounds, 1.0 - 1.0 / f_k, 0.0)
    return RankSharing(f, path / rounds, wait / rounds)


def time_shared(tr: Transport, sharing: RankSharing) -> Transport:
    """The transport of ranks that get 1/f of a core each (:func:`rank_sharing`): α' = f·α + (1 − 1/f)·wait for eager
    and rendezvous α alike (the receiver is off its core with probability 1 − 1/f: the ``wait_share``), stream,
    cache-resident and reduction rates ÷ f (f the critical path's ``path_f``), the call × its ``call_f``."""
    call_f, path_f, share = sharing
    cached = None if tr.cached_bw_bytes_per_s is None else tr.cached_bw_bytes_per_s / path_f
    rendezvous = None if tr.rendezvous_s is None else tr.rendezvous_s * path_f + share * tr.wait_s
    return tr._replace(message_s=tr.message_s * path_f + share * tr.wait_s, bw_bytes_per_s=tr.bw_bytes_per_s / path_f,
                       reduce_bw_bytes_per_s=tr.reduce_bw_bytes_per_s / path_f, call_s=tr.call_s * call_f,
                       cached_bw_bytes_per_s=cached, rendezvous_s=rendezvous)
