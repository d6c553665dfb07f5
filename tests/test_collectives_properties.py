"""Invariants of the collective model (hypothesis), over shipped systems and synthetic ones.

* time never decreases with size; never decreases when a link gets slower;
* never below the Chan et al. (2007) lower bound unless switches reduce (NVLS/SHARP); the one-port
  ⌈log₂n⌉·α term is not required of patterns that talk to all peers at once (pairwise, parameter server);
* ring busbw tends to the link's bandwidth × efficiency for large S;
* auto is never slower than any NCCL algorithm it could have picked.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from toys import make_system

from commmodel.collectives import PRIMITIVES, collective_cost, lower_bound_s
from commmodel.collectives.algorithms import ALGORITHMS
from commmodel.collectives.api import all_algorithm_costs, collective_times
from commmodel.collectives.topology import group_topology, host_staged_bw_bytes_per_s
from commmodel.hardware.cluster import Cluster
from commmodel.io.profiles import load_system

SYSTEMS = ["dgx-a100", "dgx-h100", "aws-p4de", "aws-p5", "gb200-nvl72", "pcie-2x-rtx2080ti", "azure-ndm-a100-v4",
           "roce-8x-h100-400g", "eth-8x-a100-100g"]
OPS = [op for op in PRIMITIVES if op != "barrier"]
MULTI_PORT = {"pairwise", "parameter_server"}

sizes = st.floats(min_value=1.0, max_value=3e10, allow_nan=False)


@st.composite
def groups(draw):
    name = draw(st.sampled_from(SYSTEMS))
    system = load_system(name)
    if system.scale_out is None:
        n = draw(st.integers(1, system.scale_up.domain_size))
    else:
        n = system.gpus_per_node * draw(st.sampled_from([1, 2, 3, 4, 8, 32]))
        if draw(st.booleans()):
            n = draw(st.integers(1, system.gpus_per_node))
    cluster = Cluster.for_gpus(system, n)
    return cluster.system, n


@settings(max_examples=60, deadline=None)
@given(groups(), st.sampled_from(OPS), sizes, sizes)
def test_time_never_decreases_with_size(group, op, s1, s2):
    system, n = group
    lo, hi = sorted((s1, s2))
    c = collective_cost(op, np.array([lo, hi]), system, n, selection="fastest")
    assert c.time_s[0] <= c.time_s[1] * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(OPS), st.sampled_from([2, 4, 8, 16, 32]), sizes,
       st.floats(0.1, 1.0), st.floats(0.1, 1.0))
def test_slower_links_are_never_faster(op, n, size, up_scale, out_scale):
    fast = make_system(gpus_per_node=4, domain=4, nics=4, up_eff=1.0, out_eff=1.0)
    slow = make_system(gpus_per_node=4, domain=4, nics=4, up_eff=up_scale, out_eff=out_scale)
    t_fast = collective_cost(op, size, fast, n, candidates="all", selection="fastest").time_s
    t_slow = collective_cost(op, size, slow, n, candidates="all", selection="fastest").time_s
    assert t_slow >= t_fast * (1 - 1e-12)


@settings(max_examples=80, deadline=None)
@given(groups(), st.sampled_from(OPS), sizes)
def test_never_below_the_chan_lower_bound(group, op, size):
    system, n = group
    if n < 2:
        return
    topo = group_topology(system, n)
    alpha_min = min(topo.intra_latency_s, topo.inter_latency_s)
    # a rank cannot stream faster than its scale-up line plus the group's NICs in its domain
    bw_max = topo.intra_line_bw_bytes_per_s + float(np.nan_to_num(topo.inter_bw_per_domain_bytes_per_s, posinf=0))
    beta_bound = float(lower_bound_s(op, size, n, 0.0, bw_max))
    full_bound = float(lower_bound_s(op, size, n, alpha_min, bw_max))
    for name, cost in all_algorithm_costs(op, size, system, n).items():
        algo = ALGORITHMS[name]
        if algo.in_network:
            continue
        bound = beta_bound + alpha_min if name in MULTI_PORT else full_bound
        assert float(cost.time_s) >= bound * (1 - 1e-9), (name, float(cost.time_s), bound)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72", "pcie-2x-rtx2080ti"]),
       st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]))
def test_ring_busbw_tends_to_link_bandwidth_times_efficiency(name, op):
    system = load_system(name)
    n = min(system.scale_up.domain_size, 8)
    c = collective_cost(op, 1e13, system, n, algorithm="ring", protocol="Simple")
    per_gpu = (host_staged_bw_bytes_per_s(system) if system.scale_up.kind == "pcie_host"
               else system.scale_up.effective_bw_bytes_per_s)  # host-staged: GPUs share their uplink
    assert np.isclose(float(c.busbw_bytes_per_s), per_gpu, rtol=1e-4)


@settings(max_examples=60, deadline=None)
@given(groups(), st.sampled_from(OPS), sizes)
def test_auto_is_the_fastest_nccl_choice(group, op, size):
    system, n = group
    auto = float(collective_cost(op, size, system, n, selection="fastest").time_s)
    for name, cost in all_algorithm_costs(op, size, system, n, selection="fastest").items():
        if ALGORITHMS[name].nccl:
            assert auto <= float(cost.time_s) * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(groups(), st.sampled_from(OPS), st.lists(sizes, min_size=1, max_size=4), st.sampled_from(["fastest", "nccl"]))
def test_a_batch_prices_each_element_as_alone(group, op, batch, selection):
    """Element-wise: one call on a size sweep (a scalar group: the candidates' latencies stay 0-d and are
    broadcast) and on arrays of groups gives, bit for bit, the single-element answers (price_collectives
    batches every request of an op on this)."""
    system, n = group
    sizes_bytes = np.array(batch)
    sweep = collective_cost(op, sizes_bytes, system, n, selection=selection)
    ranks = np.array([n, max(n // 2, 1), 1, n][:sizes_bytes.size], dtype=float)
    grouped = collective_cost(op, sizes_bytes, system, ranks, selection=selection)
    for i, size in enumerate(batch):
        alone = collective_cost(op, size, system, n, selection=selection)
        assert sweep.time_s[i] == alone.time_s and sweep.algorithm[i] == alone.algorithm
        assert sweep.protocol[i] == alone.protocol and sweep.bytes_per_rank[i] == alone.bytes_per_rank
        alone = collective_cost(op, size, system, ranks[i], selection=selection)
        assert grouped.time_s[i] == alone.time_s and grouped.algorithm[i] == alone.algorithm


@settings(max_examples=40, deadline=None)
@given(groups(), st.lists(st.tuples(st.sampled_from(["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]),
                                    sizes, st.sampled_from([1.0, 0.5, 0.25])), min_size=1, max_size=6),
       st.sampled_from([None, "nccl", "rccl", "gloo"]))
def test_one_pass_over_several_ops_prices_each_element_as_alone(group, batch, library):
    """collective_times (the step model's one pricing pass: one topology for every op's groups, each op on its
    own elements) gives, bit for bit, collective_cost's time of each element alone."""
    system, n = group
    if library == "rccl" and system.scale_up.kind != "xgmi":
        library = None  # RCCL runs on AMD Instinct only (refused on other GPUs: test_api_defaults)
    ops = list(dict.fromkeys(op for op, _, _ in batch))
    ranks = np.array([max(float(n) * share // 1, 2.0) if n > 1 else 2.0 for _, _, share in batch])
    ranks = np.minimum(ranks, max(float(n), 2.0))
    if system.scale_out is None:
        ranks = np.minimum(ranks, system.scale_up.domain_size)
    per_node = np.minimum(ranks, system.gpus_per_node)
    sizes_bytes = np.array([size for _, size, _ in batch])
    code = np.array([ops.index(op) for op, _, _ in batch])
    times = collective_times(ops, code, sizes_bytes, system, ranks, per_node, library=library)
    for i, (op, size, _) in enumerate(batch):
        rule = "library" if library == "gloo" else "fastest"  # a host library runs its own rule
        alone = collective_cost(op, size, system, ranks[i], per_node[i], library=library, selection=rule).time_s
        assert times[i] == alone, (op, size, ranks[i])
