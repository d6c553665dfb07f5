"""Multi-rack NVLink domains: traffic leaving an NVL72 rack goes through the channels crossing its boundary
and through the spine, so a 20-rack job is not priced as 20 independent racks."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.collectives.protocols import RING_GRAPH_MAX_CHANNELS
from commmodel.collectives.topology import group_topology
from commmodel.hardware.cluster import Cluster
from commmodel.io.profiles import load_system

RACK = 72
SIZE = 4.0 * 2**30


def nvl72(oversubscription: float = 1.0):
    system = load_system("gb200-nvl72")
    if oversubscription == 1.0:
        return system
    out = system.scale_out.model_copy(update={
        "oversubscription": oversubscription,
        "oversubscription_source": "hypothetical spine for this test (no shipped system states one)"})
    return system.model_copy(update={"scale_out": out})


def per_nic_bw(system) -> float:
    out = system.scale_out
    return out.nic_bw_bytes_per_s.value * out.efficiency.value / out.oversubscription


def test_a_rack_leaves_through_its_channels_not_all_its_nics():
    system = nvl72()
    topo = group_topology(Cluster.for_gpus(system, 20 * RACK, 4).system, 20 * RACK, 4)
    assert float(topo.num_domains) == 20 and float(topo.ranks_per_domain) == RACK
    # 72 NICs in the rack, but NCCL's ring graph has at most MAXCHANNELS/2 = 32 paths across the boundary.
    assert float(topo.inter_domain_bw()) == pytest.approx(RING_GRAPH_MAX_CHANNELS * per_nic_bw(system))
    # An 8-GPU node with 8 NICs is below the cap: all its NICs count.
    h100 = load_system("dgx-h100")
    small = group_topology(Cluster.for_gpus(h100, 16, 8).system, 16, 8)
    assert float(small.inter_domain_bw()) == pytest.approx(h100.scale_out.node_bw_bytes_per_s)


@pytest.mark.parametrize("oversubscription", [1.0, 4.0])
@pytest.mark.parametrize("selection", ["nccl", "fastest"])
def test_twenty_racks_are_bound_by_the_rack_boundary_and_the_spine(oversubscription, selection):
    system = nvl72(oversubscription)
    racks = 20
    n = racks * RACK
    many = collective_cost("all_reduce", SIZE, Cluster.for_gpus(system, n, 4).system, n, selection=selection)
    one = collective_cost("all_reduce", SIZE, Cluster.for_gpus(system, RACK, 4).system, RACK, selection=selection)
    # Any all-reduce without in-network reduction between racks moves 2(m-1)/m·S out of every rack.
    exit_bw = RING_GRAPH_MAX_CHANNELS * per_nic_bw(system)
    bound_s = 2.0 * (racks - 1) / racks * SIZE / exit_bw
    assert float(many.time_s) >= bound_s
    assert float(many.time_s) > float(one.time_s)


def test_a_spine_oversubscription_slows_multi_rack_jobs_in_proportion():
    n = 20 * RACK
    times = [float(collective_cost("all_reduce", SIZE, Cluster.for_gpus(nvl72(o), n, 4).system, n,
                                   selection="fastest").time_s)
             for o in (1.0, 4.0, 8.0)]
    assert times[0] < times[1] < times[2]
    # Bandwidth-bound across the spine at 4:1 and 8:1: doubling the ratio nearly doubles the time.
    assert times[2] / times[1] == pytest.approx(2.0, rel=0.1)
    # Inside one rack the spine is never crossed.
    one = [float(collective_cost("all_reduce", SIZE, Cluster.for_gpus(nvl72(o), RACK, 4).system, RACK).time_s)
           for o in (1.0, 8.0)]
    assert one[0] == one[1]


def test_more_racks_never_make_an_all_reduce_faster():
    system = nvl72(4.0)
    times = [float(collective_cost("all_reduce", SIZE, Cluster.for_gpus(system, r * RACK, 4).system,
                                   r * RACK).time_s) for r in (1, 2, 4, 8, 20)]
    assert all(np.diff(times) >= 0.0)


@pytest.mark.parametrize(("full", "partial"), [(72, 76), (144, 148)])
def test_a_partly_filled_rack_leaves_through_its_own_few_nics(full: int, partial: int):
    """76 ranks packed on NVL72 racks are 72 + 4: every byte between the racks crosses the 4 GPUs' NICs of the second,
    and that rack must at least receive the reduced result (SIZE bytes) through them. Before, both racks were priced
    as full (76 ranks 3.05 ms against 72's 2.99 for 1 GiB, faster than 4 NICs can carry)."""
    from commmodel.collectives.topology import domain_exit_bw_bytes_per_s

    system = nvl72()
    topo = group_topology(system, partial)
    assert float(topo.ranks_per_domain) == RACK and float(topo.num_domains) == np.ceil(partial / RACK)
    four_nics_s = SIZE / domain_exit_bw_bytes_per_s(system, np.array(4.0))
    t_partial = float(collective_cost("all_reduce", SIZE, system, partial).time_s)
    t_full = float(collective_cost("all_reduce", SIZE, system, full).time_s)
    assert t_partial >= float(four_nics_s) and t_partial > 2 * t_full
