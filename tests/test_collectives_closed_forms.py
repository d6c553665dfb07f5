"""Every algorithm against its closed form at hand-computed points (synthetic systems, round numbers).

System A: one 8-GPU NVSwitch domain, B = 100 GB/s per GPU (efficiency 1), LL hop α = 1 us.
System B: 4 nodes x 4 GPUs, the same NVSwitch inside, one 10 GB/s NIC per GPU, network LL hop 10 us.
NCCL constants used below (tuning.cc b6475625): base ring LL/LL128/Simple 6.6/14/8.4 us, tree 6.8/14/0;
NVLink hop LL/LL128/Simple 0.6/1.9/3.4 (so Simple adds 2.8 us, LL128 1.3 us to the LL hop), tree/Simple
28 (adds 27.4); network ring LL/LL128/Simple 2.7/4.0/14.0 (Simple adds 11.3 and the fabric latency once
more: 10 − 2.7 = 7.3), network tree Simple 28 (adds 25.3 + 7.3, a 42.6 us hop). Tree/Simple takes NCCL ≥ 2.23.4's
row (tuning.cc@68b54236): base 8.4, NVLink hop 4.0 (adds 3.4: a 4.4 us hop), network 14 (adds 11.3 + 7.3: 28.6 us),
plus the pipeline fill of 512 KiB chunks (NCCL_BUFFSIZE 4 MiB / 8) at 38.7 GB/s per NVLink channel (the toys are sm_90: perChMaxTreeBws Hopper) and, on B,
the domain's 40 GB/s over 2 x 4 NIC channels = 5 GB/s per network channel, less the slowest stage; B's 8 channels
fill at once, so each NVLink stage runs at its share 100 / 8 = 12.5 GB/s of the link, below 38.7.
"""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives import bytes_moved_per_rank, collective_cost
from commmodel.hardware.models import InNetworkReduction, Sourced
from toys import SIMPLE_IN, SIMPLE_OUT, A, B, make_system

US = 1e-6
S = 1e9
CHUNK = 4 * 2**20 / 8  # tree/Simple chunk: NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8


def priced(op, system, n, algorithm, protocol="Simple", size=S, **kw):
    c = collective_cost(op, size, system, n, algorithm=algorithm, protocol=protocol, candidates="all", **kw)
    return float(c.latency_s), float(c.bandwidth_s)


@pytest.mark.parametrize(("op", "algo", "protocol", "n", "latency_us", "bandwidth_s"), [
    # ring all-reduce: base + 2(n−1)α + 2(n−1)/n·S/(B·f)
    ("all_reduce", "ring", "Simple", 8, 8.4 + 14 * 3.8, 1.75 * S / 100e9),
    ("all_reduce", "ring", "LL", 8, 6.6 + 14 * 1.0, 1.75 * S / 25e9),
    ("all_reduce", "ring", "LL128", 8, 14 + 14 * 2.3, 1.75 * S / 92e9),
    ("all_gather", "ring", "LL", 8, 6.6 + 7 * 1.0, 0.875 * S / (100e9 / 3)),
    ("reduce_scatter", "ring", "Simple", 8, 8.4 + 7 * 3.8, 0.875 * S / 100e9),
    # pipelined chain broadcast/reduce: base + (n−1)α + S/B
    ("broadcast", "ring", "Simple", 8, 8.4 + 7 * 3.8, S / 100e9),
    # double binary tree in one node = a chain: 2(n−1) tree hops, rate 0.92·B/2
    ("all_reduce", "tree", "Simple", 8, 8.4 + 2 * 7 * 4.4 + 13 * CHUNK / 38.7e9 / US, S / 46e9),
    ("all_reduce", "tree", "LL", 8, 6.8 + 2 * 7 * 1.0, S / (46e9 / 3.8)),
    # textbook algorithms (Simple steps of 3.8 us)
    ("broadcast", "binomial_tree", "Simple", 8, 8.4 + 3 * 3.8, 3 * S / 100e9),
    ("scatter", "binomial_tree", "Simple", 8, 8.4 + 3 * 3.8, 0.875 * S / 100e9),
    ("all_reduce", "recursive_doubling", "Simple", 8, 8.4 + 3 * 3.8, 3 * S / 100e9),
    ("all_reduce", "recursive_doubling", "Simple", 6, 8.4 + 4 * 3.8, 4 * S / 100e9),   # p = 4, + 2 steps
    ("all_gather", "recursive_doubling", "Simple", 8, 8.4 + 3 * 3.8, 0.875 * S / 100e9),
    ("reduce_scatter", "recursive_halving", "Simple", 8, 8.4 + 3 * 3.8, 0.875 * S / 100e9),
    ("all_reduce", "rabenseifner", "Simple", 8, 8.4 + 6 * 3.8, 1.75 * S / 100e9),
    ("all_reduce", "rabenseifner", "Simple", 6, 8.4 + 6 * 3.8, (1.5 + 1.5) * S / 100e9),  # p = 4 + pre/post
    ("all_gather", "bruck", "Simple", 6, 8.4 + 3 * 3.8, 5 / 6 * S / 100e9),
    ("all_to_all", "bruck", "Simple", 8, 8.4 + 3 * 3.8, 3 * 0.5 * S / 100e9),
    ("all_to_all", "pairwise", "Simple", 8, 8.4 + 3.8, 0.875 * S / 100e9),
    ("send_recv", "p2p", "Simple", 2, 8.4 + 3.8, S / 100e9),
    ("all_reduce", "parameter_server", "Simple", 8, 8.4 + 2 * 3.8, 7 * S / 100e9),
    ("barrier", "dissemination", "Simple", 8, 8.4 + 3 * 3.8, 0.0),
])
def test_one_domain_closed_forms(op, algo, protocol, n, latency_us, bandwidth_s):
    latency, bandwidth = priced(op, A, n, algo, protocol)
    assert latency == pytest.approx(latency_us * US, rel=1e-9)
    assert bandwidth == pytest.approx(bandwidth_s, rel=1e-9)


@pytest.mark.parametrize(("op", "algo", "protocol", "latency_s", "bandwidth_s"), [
    # ring over 16 ranks in 4 domains: 30 hops, 30·4/16 = 7.5 cross the network; B = min(100, 4 x 10)
    ("all_reduce", "ring", "Simple", 8.4 * US + 22.5 * SIMPLE_IN + 7.5 * SIMPLE_OUT, 30 / 16 * S / 40e9),
    # LL hops inside slow down x1.8 once the group spans nodes (tuning.cc)
    ("all_reduce", "ring", "LL", (6.6 + 22.5 * 1.8 + 7.5 * 10) * US, 30 / 16 * S / 10e9),
    # double binary tree: 8.4 + 2((r−1)·4.4 + log2(m)·28.6) + fill; rate min(0.92·100/2, 40/2): 2·S per node on m ≥ 3
    ("all_reduce", "tree", "Simple", (8.4 + 2 * (3 * 4.4 + 2 * 28.6)) * US
     + CHUNK * (2 * 3 / 12.5e9 + 2 * 2 / 5e9 - 1 / 5e9), S / 20e9),
    # hierarchical: intra RS + AG (2(r−1) hops, 2(r−1)/r·S/B) then a ring of S/r per rail over 4 domains
    ("all_reduce", "hierarchical", "Simple", 8.4 * US + 6 * SIMPLE_IN + 6 * SIMPLE_OUT,
     1.5 * S / 100e9 + 1.5 * (S / 4) / 10e9),
    ("all_reduce", "hierarchical_tree", "Simple", 8.4 * US + 6 * SIMPLE_IN + 2 * 2 * 42.6 * US,
     1.5 * S / 100e9 + 2 * (S / 4) / 10e9),
    # recursive doubling: 2 rounds inside (distance 1, 2), 2 across (4, 8) at one NIC each
    ("all_reduce", "recursive_doubling", "Simple", 8.4 * US + 2 * SIMPLE_IN + 2 * SIMPLE_OUT, 2 * S / 100e9 + 2 * S / 10e9),
    ("all_gather", "recursive_doubling", "Simple", 8.4 * US + 2 * SIMPLE_IN + 2 * SIMPLE_OUT,
     3 / 16 * S / 100e9 + 12 / 16 * S / 10e9),
    ("reduce_scatter", "recursive_halving", "Simple", 8.4 * US + 2 * SIMPLE_IN + 2 * SIMPLE_OUT,
     (1 / 4 - 1 / 16) * S / 100e9 + 3 / 4 * S / 10e9),
    # pairwise all-to-all: one hop on the slowest tier + 3 us per extra remote peer; max of the two parts
    ("all_to_all", "pairwise", "Simple", 8.4 * US + SIMPLE_OUT + 11 * 3 * US, 12 / 16 * S / 10e9),
    ("broadcast", "binomial_tree", "Simple", 8.4 * US + 2 * SIMPLE_OUT + 2 * SIMPLE_IN, 2 * S / 10e9 + 2 * S / 100e9),
    ("all_reduce", "parameter_server", "Simple", 8.4 * US + 2 * SIMPLE_OUT, 15 * S / 10e9),
])
def test_two_tier_closed_forms(op, algo, protocol, latency_s, bandwidth_s):
    latency, bandwidth = priced(op, B, 16, algo, protocol)
    assert latency == pytest.approx(latency_s, rel=1e-9)
    assert bandwidth == pytest.approx(bandwidth_s, rel=1e-9)


def test_nvls_closed_form_and_growth_with_ranks():
    nvls = InNetworkReduction(name="nvls", busbw_efficiency=Sourced(value=1.0, source="synthetic"), min_ranks=4,
                              latency_s=Sourced(value="20 us", source="synthetic"))
    box = make_system(nvls=nvls)
    # T = 8.4 us (NCCL's Simple kernel base, tuning.cc) + 3 stages × τ (1 us) + (S + 2L)(1 + 1/n)/(B·η_wire), η_wire = busbw_eff·9/14
    # (quoted at 8 ranks), at NCCL's 128 KiB chunk: S ≥ 64 × (16 channels × 8 heads) × 128 KiB = 1 GiB (enqueue.cc);
    # L = 16 × 8 × 128 KiB = 16 MiB, one loop: the 3-stage scatter/reduce/gather pipeline fills over 2 loops.
    big = 2.0**31
    latency, bandwidth = priced("all_reduce", box, 8, "nvls", size=big)
    assert latency == pytest.approx((8.4 + 3 * 1.0) * US)
    assert bandwidth == pytest.approx((big + 2 * 2.0**24) * 1.125 / (100e9 * 9 / 14))
    # Smaller messages run smaller chunks, each waiting one NVLink hop (τ = 1 us here) on a channel
    # streaming B·η_wire/16: slowdown (1 + τr/c)/(1 + τr/128 KiB) with c = 64 KiB below 1 GiB (L = 8 MiB);
    # 1 MiB < 2 MiB runs 16 KiB chunks and fits in one loop (L = 2 MiB): the three stages in series, 3 × S.
    tau_rate = 1e-6 * 100e9 * 9 / 14 / 16
    for size, chunk, fill in ((1e9, 65536, 2 * 2.0**23), (2.0**20, 16384, 2 * 2.0**20)):
        _, bandwidth = priced("all_reduce", box, 8, "nvls", size=size)
        slowdown = (1 + tau_rate / chunk) / (1 + tau_rate / 131072)
        assert bandwidth == pytest.approx((size + fill) * 1.125 / (100e9 * 9 / 14) * slowdown)
    # Across NCCL's chunk switches (2, 8 MiB and 1 GiB at 16 x 8 concurrent ops) the time never falls.
    sizes = np.geomspace(2.0**20, 2.0**32, 4001)
    times = collective_cost("all_reduce", sizes, box, 8, algorithm="nvls").time_s
    assert np.all(np.diff(times) >= -1e-12 * times[:-1])
    # at 8 ranks busbw equals busbw_efficiency × line rate; it grows as 2(n−1)/(n+1)
    c = collective_cost("all_reduce", 1e13, box, [4, 8], algorithm="nvls")
    assert c.busbw_bytes_per_s[1] == pytest.approx(100e9, rel=1e-4)
    assert c.busbw_bytes_per_s[0] / c.busbw_bytes_per_s[1] == pytest.approx((6 / 5) / (14 / 9), rel=1e-4)
    # below min_ranks, or across nodes, NVLS does not apply
    assert "nvls" not in set(collective_cost("all_reduce", S, box, 3).algorithm.ravel())


def test_auto_picks_the_fastest_algorithm_and_protocol():
    sizes = np.array([8.0, 1e9])
    auto = collective_cost("all_reduce", sizes, B, 16)
    every = [collective_cost("all_reduce", sizes, B, 16, algorithm=a, protocol=p)
             for a in ("ring", "tree") for p in ("LL", "LL128", "Simple")]
    fastest = np.min([c.time_s for c in every], axis=0)
    assert np.allclose(auto.time_s, fastest, rtol=1e-12)
    assert list(auto.protocol) == ["LL", "Simple"]
    # small messages: tree's log latency wins across nodes; large: ring's bandwidth (B_dom = 40 GB/s)
    assert list(auto.algorithm) == ["tree", "ring"]


def test_seed_examples_are_exact():
    # 1B fp32 parameters = 4 GB; ring all-reduce on 8 GPUs moves 2·7/8·4 GB = 7 GB per GPU (DESIGN §4)
    assert bytes_moved_per_rank("all_reduce", "ring", 4e9, 8) == 7e9
    # all-gather of 1 GB per GPU on 8 GPUs: S = 8 GB, each GPU receives 7 GB, 56 GB in total
    per_gpu = bytes_moved_per_rank("all_gather", "ring", 8e9, 8)
    assert per_gpu == 7e9 and 8 * per_gpu == 56e9
    assert float(collective_cost("all_reduce", 4e9, A, 8, algorithm="ring").bytes_per_rank) == 7e9
    # parameter server on a worker, 1.2 GB over 1 GB/s links: +1.2 s with 2 workers, +10.8 s with 10
    slow = make_system(gpus_per_node=1, domain=1, nics=1, nic_bw="1 GB/s")
    ps = collective_cost("all_reduce", 1.2e9, slow, [2, 10], algorithm="parameter_server")
    assert list(ps.bandwidth_s) == pytest.approx([1.2, 10.8], rel=1e-12)
    ring = collective_cost("all_reduce", 1.2e9, slow, [2, 10], algorithm="ring")
    assert ring.bandwidth_s[1] < 2 * ring.bandwidth_s[0]  # ring does not grow linearly with workers


def test_gamma_term_adds_reduction_traffic():
    base = collective_cost("all_reduce", S, A, 8, algorithm="ring", protocol="Simple")
    with_gamma = collective_cost("all_reduce", S, A, 8, algorithm="ring", protocol="Simple", include_reduction=True)
    hbm = A.gpu.hbm_bw_bytes_per_s.value
    assert float(with_gamma.bandwidth_s - base.bandwidth_s) == pytest.approx(7 / 8 * S * 3 / hbm)


def test_single_rank_and_launch_mode():
    one = collective_cost("all_reduce", S, A, 1)
    assert float(one.time_s) == 0.0 and str(one.algorithm) == "none"
    g1 = collective_cost("all_reduce", 8.0, A, 8)
    g8 = collective_cost("all_reduce", 8.0, A, 8, gpus_per_process=8)
    assert float(g8.time_s - g1.time_s) == pytest.approx(7 * 2.5 * US)  # nccl-tests -g 8 (nccl-tests#123)


def test_host_staged_pcie_is_faster_one_way():
    box = make_system(gpus_per_node=2, domain=2, up_kind="pcie_host", up_bw="15.75 GB/s", up_eff=0.254)
    bcast = collective_cost("broadcast", 1e10, box, 2, algorithm="ring", protocol="Simple")
    ar = collective_cost("all_reduce", 1e10, box, 2, algorithm="ring", protocol="Simple")
    assert float(ar.busbw_bytes_per_s) == pytest.approx(15.75e9 * 0.254, rel=1e-3)
    assert float(bcast.busbw_bytes_per_s) == pytest.approx(15.75e9 * 0.254 * 2.77, rel=1e-3)


def test_nvls_tree_wins_on_two_nodes_only():
    nvls = InNetworkReduction(name="nvls", busbw_efficiency=Sourced(value=1.0, source="synthetic"), min_ranks=4,
                              latency_s=Sourced(value="20 us", source="synthetic"))
    box = make_system(nvls=nvls, nics=8, nic_bw="50 GB/s")
    # T = α_NVLS + 2⌈log₂m⌉(10 − 2.7 + 14) us + max((S + 2L)/(100·9/14·8/9), k·S/400), k = 1 on 2 nodes, 2 beyond;
    # inside the node the single-node NVLS pipeline: L = 16 channels × 8 heads × 128 KiB fills and drains
    # (≥ 64 loops: the 128 KiB chunk, no slowdown, so 2 GiB here)
    loop, big = 16 * 8 * 128 * 1024, 2.0**31
    two = collective_cost("all_reduce", big, box, 16, algorithm="nvls_tree")
    assert float(two.latency_s) == pytest.approx((20 + 2 * 21.3) * US)
    assert float(two.bandwidth_s) == pytest.approx((big + 2 * loop) / (100e9 * 9 / 14 * 8 / 9))
    assert str(collective_cost("all_reduce", S, box, 16).algorithm) == "nvls_tree"
    four = collective_cost("all_reduce", 1e11, box, 64, algorithm="nvls_tree")
    assert float(four.bandwidth_s) == pytest.approx(max((1e11 + 2 * loop) / (100e9 * 9 / 14 * 8 / 9), 2 * 1e11 / 400e9))


def test_two_nodes_of_nvls_tree_never_beat_one_node_of_nvls():
    """The NVLS-tree does the node's NVLS reduce and multicast and adds the network, so at every size it is no faster
    than one node's NVLS (audit: 64 MiB on 16 H100 at 304 us against 352 us on 8: the tree skipped NVLS's chunk ramp
    and pipeline fill)."""
    from commmodel.io.profiles import load_system

    sizes = 2.0 ** np.arange(16, 35)
    for name in ("dgx-h100", "aws-p5", "hgx-b300"):
        system = load_system(name)
        one = collective_cost("all_reduce", sizes, system, 8, algorithm="nvls")
        two = collective_cost("all_reduce", sizes, system, 16, algorithm="nvls_tree")
        assert np.all(two.time_s >= one.time_s * (1 - 1e-9)), name


def test_nvls_pipeline_fill_by_hand_on_8x_h100():
    """all_reduce.h@5067397c: scatter → reduce → gather, one loop = 16 channels × 8 heads × chunk (enqueue.cc)."""
    from commmodel.hardware.cluster import Cluster
    from commmodel.io.profiles import load_system

    p5 = Cluster.for_gpus(load_system("aws-p5"), 8).system
    bw = 450e9 * 1.067 * 9 / 14                        # NVLink4 line × η_wire (busbw_efficiency 1.067 at 8 ranks)
    tau_rate = 0.6e-6 * bw / 16                        # τ = 0.6 us, a channel streams B/16

    def slowdown(chunk):
        return (1 + tau_rate / chunk) / (1 + tau_rate / 131072)

    def nvls_us(size):
        return float(collective_cost("all_reduce", size, p5, 8, algorithm="nvls").time_s) / US

    # 2 MiB = one loop of 16 KiB chunks (2 × 128 × 16 KiB ≤ 8 MiB): the three stages in series, 3 × S
    assert nvls_us(2**21) == pytest.approx(8.4 + 3 * 0.6 + 3 * 2**21 * 1.125 / bw * slowdown(16384) / US)
    # 32 MiB: 32 KiB chunks, L = 4 MiB, 8 loops + 2 of fill
    assert nvls_us(2**25) == pytest.approx(8.4 + 1.8 + (2**25 + 2 * 2**22) * 1.125 / bw * slowdown(32768) / US)
    # 4 GiB: 128 KiB chunks, L = 16 MiB: the fill is 0.8% of the streaming; the large-message rate is unchanged
    big = collective_cost("all_reduce", 2.0**32, p5, 8, algorithm="nvls")
    assert float(big.bandwidth_s) == pytest.approx((2**32 + 2 * 2**24) * 1.125 / bw)
    # continuous and monotone across the chunk switches (8 MiB, 64 MiB, 1 GiB)
    sizes = np.geomspace(2.0**19, 2.0**33, 6001)
    times = collective_cost("all_reduce", sizes, p5, 8, algorithm="nvls").time_s
    assert np.all(np.diff(times) >= -1e-12 * times[:-1])
    assert np.max(np.diff(times) / times[:-1]) < 0.01


@pytest.mark.parametrize("n", [3, 5, 6, 7])
@pytest.mark.parametrize("algo", ["rabenseifner", "recursive_doubling"])
def test_fold_step_of_a_non_power_of_two_crosses_the_network_with_one_rank_per_node(algo, n):
    """With one rank per node (system B, 10 GB/s NIC each) the fold/unfold pair 2i, 2i + 1 sits on two nodes: its
    bytes go over the NIC, so neither algorithm beats the all-reduce lower bound 2(n−1)/n·S/B_nic (audit: n = 3
    priced the fold at NVLink speed, busbw 57 GB/s over a 47.5 GB/s NIC). Closed forms with p = ⌊n⌋₂:
    Rabenseifner 2(p−1)/p·S/B + 1.5·S/B, recursive doubling log₂p·S/B + 2·S/B."""
    latency, bandwidth = priced("all_reduce", B, n, algo, ranks_per_node=1)
    p = 2 ** int(np.floor(np.log2(n)))
    expected = ((2 * (p - 1) / p + 1.5) if algo == "rabenseifner" else (np.log2(p) + 2.0)) * S / 10e9
    assert bandwidth == pytest.approx(expected, rel=1e-9)
    assert bandwidth >= 2 * (n - 1) / n * S / 10e9


def test_all_to_all_of_a_partial_last_domain_goes_at_its_ranks_pace():
    """12 ranks on 8-GPU domains of two 4-GPU nodes, packed: 8 + 4. Each of the 4 lone ranks sends 8/12 of S over its
    own 10 GB/s NIC, which sets the time (audit: 76 GPUs on NVL72 priced the 72-rank rack's 4/76 and reported busbw
    889 GB/s over 50 GB/s NICs). Equal domains keep (n − r)/n."""
    partial = make_system(gpus_per_node=4, domain=8, nics=4)
    _, uneven = priced("all_to_all", partial, 12, "pairwise")
    _, even = priced("all_to_all", partial, 16, "pairwise")
    assert uneven == pytest.approx(8 / 12 * S / 10e9, rel=1e-9)
    assert even == pytest.approx(8 / 16 * S / 10e9, rel=1e-9)
