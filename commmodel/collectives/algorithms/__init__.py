"""The algorithm registry (one small uniform entry per algorithm, like nccl-tests' table).

Adding an algorithm NCCL runs is one entry: its cost, protocols, where it applies, and optionally its
NCCL tuner estimate (``nccl_estimate``, :mod:`..tuner`) and its calibration step form (``step_form``).
``nccl=True`` marks what NCCL runs (ring, double binary tree, NVLS, CollNet/SHARP, point-to-point
patterns); ``auto`` picks among those by default. The textbook algorithms are priced the same way so
``--algo all`` can compare them.
"""

from __future__ import annotations

from commmodel.collectives.algorithms.alltoall import p2p_cost, pairwise_cost
from commmodel.collectives.algorithms.base import Algorithm, AlgoCost, is_pow2
from commmodel.collectives.algorithms.bruck import bruck_cost
from commmodel.collectives.algorithms.centralised import dissemination_cost, parameter_server_cost
from commmodel.collectives.algorithms.hierarchical import (
    hierarchical_ring_cost,
    hierarchical_tree_cost,
    spans_with_several_per_domain,
)
from commmodel.collectives.algorithms.innetwork import (
    nvls_applies,
    nvls_cost,
    nvls_tree_applies,
    nvls_tree_cost,
    sharp_applies,
    sharp_cost,
)
from commmodel.collectives.algorithms.recursive import (
    rabenseifner_cost,
    recursive_doubling_cost,
    recursive_halving_cost,
)
from commmodel.collectives.algorithms.ring import ring_cost
from commmodel.collectives.algorithms.steps import in_network_steps, ring_steps, tree_steps
from commmodel.collectives.algorithms.tree import binomial_tree_cost, double_binary_tree_cost
from commmodel.collectives.protocols import PROTOCOLS
from commmodel.collectives.tuner import nvls_estimate_s, nvls_tree_estimate_s, ring_estimate_s, tree_estimate_s
from commmodel.errors import CollectiveError



def _two_or_more(op, topo):
    return topo.num_ranks >= 2


def _pow2_for_gather(op, topo):
    return is_pow2(topo.num_ranks) if op == "all_gather" else True


def _pow2(op, topo):
    return is_pow2(topo.num_ranks)


_TWO_LEVELS = {"applies": spans_with_several_per_domain,
               "applies_when": "a group spanning domains with > 1 rank in each"}
"""Where the two-level (hierarchical) all-reduces apply."""

ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("ring", frozenset({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "barrier"}),
                  ring_cost, PROTOCOLS, nccl=True, nccl_estimate=ring_estimate_s, step_form=ring_steps,
                  summary="NCCL ring (pipelined chain for broadcast/reduce); bandwidth-optimal"),
        Algorithm("tree", frozenset({"all_reduce", "barrier"}), double_binary_tree_cost, PROTOCOLS,
                  _two_or_more, "n ≥ 2", nccl=True, nccl_estimate=tree_estimate_s, step_form=tree_steps,
                  summary="NCCL double binary tree across nodes, chain inside: log latency"),
        Algorithm("nvls", frozenset({"all_reduce"}), nvls_cost, ("Simple",), nvls_applies,
                  "an NVSwitch with NVLS (scale_up.in_network_reduction), n ≥ its min_ranks, one node",
                  nccl=True, in_network=True, nccl_estimate=nvls_estimate_s, step_form=in_network_steps,
                  summary="NVLink SHARP: the NVSwitch adds"),
        Algorithm("nvls_tree", frozenset({"all_reduce"}), nvls_tree_cost, ("Simple",), nvls_tree_applies,
                  "NVLS in every node (≥ min_ranks ranks per node) and a group spanning nodes",
                  nccl=True, in_network=True, nccl_estimate=nvls_tree_estimate_s, step_form=in_network_steps,
                  summary="NVLS inside nodes + double binary tree across"),
        Algorithm("sharp", frozenset({"all_reduce"}), sharp_cost, ("Simple",), sharp_applies,
                  "switches with SHARP (scale_out.in_network_reduction) and a group spanning nodes",
                  nccl=True, in_network=True, step_form=in_network_steps,
                  summary="InfiniBand SHARP / CollNet: the switches add"),
        Algorithm("pairwise", frozenset({"all_to_all", "gather", "scatter"}), pairwise_cost, PROTOCOLS,
                  nccl=True, summary="direct grouped send/recv to every peer (NCCL, nccl-tests)"),
        Algorithm("p2p", frozenset({"send_recv"}), p2p_cost, PROTOCOLS, nccl=True,
                  summary="one point-to-point transfer"),
        Algorithm("binomial_tree", frozenset({"broadcast", "reduce", "gather", "scatter"}), binomial_tree_cost,
                  summary="textbook binomial tree: ⌈log₂n⌉ rounds"),
        Algorithm("recursive_doubling", frozenset({"all_reduce", "all_gather", "barrier"}), recursive_doubling_cost,
                  applies=_pow2_for_gather, applies_when="all-gather needs a power-of-two n",
                  summary="exchange with rank XOR 2^k: log₂n rounds"),
        Algorithm("recursive_halving", frozenset({"reduce_scatter"}), recursive_halving_cost,
                  applies=_pow2, applies_when="a power-of-two number of ranks",
                  summary="halve the vector each round: log₂n rounds, (n−1)/n·S"),
        Algorithm("rabenseifner", frozenset({"all_reduce"}), rabenseifner_cost,
                  summary="recursive-halving reduce-scatter + recursive-doubling all-gather"),
        Algorithm("bruck", frozenset({"all_gather", "all_to_all"}), bruck_cost,
                  summary="⌈log₂n⌉ rounds for any n (short messages)"),
        Algorithm("hierarchical", frozenset({"all_reduce"}), hierarchical_ring_cost, **_TWO_LEVELS,
                  summary="intra reduce-scatter → inter ring all-reduce of S/r per rail → intra all-gather"),
        Algorithm("hierarchical_tree", frozenset({"all_reduce"}), hierarchical_tree_cost, **_TWO_LEVELS,
                  summary="intra reduce-scatter → inter tree all-reduce per rail → intra all-gather"),
        Algorithm("parameter_server", frozenset({"all_reduce"}), parameter_server_cost,
                  summary="central server on one worker: (n−1)·S through its link"),
        Algorithm("dissemination", frozenset({"barrier"}), dissemination_cost,
                  summary="⌈log₂n⌉ signalling rounds"),
    )
}

NET_SIMPLE_ONLY = frozenset({"pairwise", "p2p"})
"""Point-to-point patterns: NCCL's network send/recv path runs the Simple protocol only."""


def get_algorithm(name: str) -> Algorithm:
    """The registry entry called ``name``."""
    key = name.strip().lower().replace("-", "_")
    if key not in ALGORITHMS:
        raise CollectiveError(f"unknown algorithm {name!r}; known: auto, all, {', '.join(ALGORITHMS)}")
    return ALGORITHMS[key]


__all__ = ["ALGORITHMS", "AlgoCost", "Algorithm", "NET_SIMPLE_ONLY", "get_algorithm"]
