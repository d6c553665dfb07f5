"""The closed forms against a step-by-step schedule simulator (commmodel.collectives.simulate).

The simulator knows nothing of the formulas: it plays each round's messages with the per-pair
latency and bandwidth of the tier they cross. Where the model's schedule is synchronous rounds
(ring inside a domain, recursive doubling/halving, binomial trees), model − base latency must equal
the simulated time exactly; a pipelined chain must approach S/B + (n−1)·α as the chunks shrink.
"""

from __future__ import annotations

import pytest
from toys import SIMPLE_IN, SIMPLE_OUT, A, B, make_system

from commmodel.collectives import collective_cost
from commmodel.collectives.simulate import (
    binomial_schedule,
    chain_schedule,
    recursive_doubling_schedule,
    recursive_halving_schedule,
    ring_schedule,
    simulate,
    two_tier,
)

BASE_SIMPLE = 8.4e-6
S = 3e8


def model_s(op, system, n, algorithm):
    c = collective_cost(op, S, system, n, algorithm=algorithm, protocol="Simple", candidates="all")
    return float(c.time_s) - BASE_SIMPLE


def flat(alpha, bw):
    return (lambda a, b: alpha), (lambda a, b: bw)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_ring_inside_one_domain(op, n):
    alpha, bw = flat(SIMPLE_IN, 100e9)
    assert model_s(op, A, n, "ring") == pytest.approx(simulate(ring_schedule(op, n, S), n, alpha, bw), rel=1e-12)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_recursive_doubling_and_halving_inside_one_domain(n):
    alpha, bw = flat(SIMPLE_IN, 100e9)
    for op in ("all_reduce", "all_gather"):
        sim = simulate(recursive_doubling_schedule(op, n, S), n, alpha, bw)
        assert model_s(op, A, n, "recursive_doubling") == pytest.approx(sim, rel=1e-12)
    sim = simulate(recursive_halving_schedule(n, S), n, alpha, bw)
    assert model_s("reduce_scatter", A, n, "recursive_halving") == pytest.approx(sim, rel=1e-12)


# System B: 4 GPUs per node; inside 100 GB/s and a 3.8 us Simple hop, across one 10 GB/s NIC per GPU
ALPHA_B = two_tier(4, SIMPLE_IN, SIMPLE_OUT)
BW_B = two_tier(4, 100e9, 10e9)


@pytest.mark.parametrize("n", [8, 16])
def test_recursive_algorithms_across_domains(n):
    for op in ("all_reduce", "all_gather"):
        sim = simulate(recursive_doubling_schedule(op, n, S), n, ALPHA_B, BW_B)
        assert model_s(op, B, n, "recursive_doubling") == pytest.approx(sim, rel=1e-12)
    sim = simulate(recursive_halving_schedule(n, S), n, ALPHA_B, BW_B)
    assert model_s("reduce_scatter", B, n, "recursive_halving") == pytest.approx(sim, rel=1e-12)


@pytest.mark.parametrize("n", [4, 8, 16])
@pytest.mark.parametrize("op", ["broadcast", "scatter"])
def test_binomial_tree_across_domains(op, n):
    sim = simulate(binomial_schedule(op, n, S), n, ALPHA_B, BW_B)
    assert model_s(op, B, n, "binomial_tree") == pytest.approx(sim, rel=1e-12)


def test_binomial_tree_inside_one_domain_any_n():
    alpha, bw = flat(SIMPLE_IN, 100e9)
    for n in (3, 5, 6, 8):
        sim = simulate(binomial_schedule("broadcast", n, S), n, alpha, bw)
        assert model_s("broadcast", A, n, "binomial_tree") == pytest.approx(sim, rel=1e-12)


def test_pipelined_chain_approaches_the_ring_broadcast_closed_form():
    # chain with c chunks: (n − 1 + c − 1)(α + S/(cB)) → (n−1)α + S/B as chunks shrink (α ≈ 0 per chunk)
    n, bw = 8, 100e9
    alpha, rate = flat(0.0, bw)
    exact = S / bw
    for chunks, tol in ((8, 0.8), (64, 0.1), (1024, 0.007)):
        assert simulate(chain_schedule(n, S, chunks), n, alpha, rate) == pytest.approx(exact, rel=tol)
    # with latency: the model's (n−1) hops are the pipeline fill of a one-chunk-latency chain
    box = make_system()
    model = collective_cost("broadcast", S, box, n, algorithm="ring", protocol="Simple")
    assert float(model.latency_s) == pytest.approx(BASE_SIMPLE + (n - 1) * SIMPLE_IN)
    assert float(model.bandwidth_s) == pytest.approx(exact)
