"""Host-staged PCIe (pcie_host): PCIe uplink share and host-memory bound, by hand.

rate per GPU = min(line × efficiency / GPUs sharing one host link, host memory / (2 × GPUs of the node))
(collectives/topology.py ``host_staged_bw_bytes_per_s``; sjeaugey, NVIDIA/nccl#1639).
"""

from __future__ import annotations

import pytest

from commmodel.collectives import collective_cost
from commmodel.collectives.topology import host_staged_bw_bytes_per_s
from commmodel.errors import ProfileError
from commmodel.hardware.models import Sourced, System
from commmodel.io.profiles import compose_from_names, load_system

GB = 1e9


def _box(num_gpus: int, link: str, host_memory_gb_per_s: float | None = None, sharing: int = 1) -> System:
    system = compose_from_names("rtx-4090", num_gpus, link)
    update: dict = {"scale_up": system.scale_up.model_copy(update={"gpus_per_host_link": sharing})}
    if host_memory_gb_per_s is not None:
        update["host_memory_bw_bytes_per_s"] = Sourced[float](value=host_memory_gb_per_s * GB,
                                                              source="test: stated by hand")
    return system.model_copy(update=update)


def test_2080ti_box_shares_one_uplink_and_reproduces_its_4_gb_per_s():
    system = load_system("pcie-2x-rtx2080ti")
    assert system.scale_up.gpus_per_host_link == 2
    # 15.75 GB/s × 0.508 / 2 GPUs = 4.0005 GB/s (measured all-reduce busbw 4.00, autodl-2080ti-pcie3-noP2P)
    assert host_staged_bw_bytes_per_s(system) == pytest.approx(15.75 * 0.508 / 2 * GB, rel=1e-9)
    cost = collective_cost("all_reduce", 2**40, system, 2, algorithm="ring", protocol="Simple")
    assert float(cost.busbw_bytes_per_s) == pytest.approx(4.0005 * GB, rel=1e-3)


def test_own_root_port_gets_the_whole_link_share():
    # 8x Gen5, one root port each, no host-memory figure: 63 × 0.508 = 32.004 GB/s
    assert host_staged_bw_bytes_per_s(_box(8, "pcie5-host")) == pytest.approx(32.004 * GB, rel=1e-9)


def test_server_memory_does_not_bind_8x_gen5_on_two_sapphire_rapids_sockets():
    # 2 × 8 ch × DDR5-4800 = 614.4 GB/s; / (2 × 8 GPUs) = 38.4 > 32.004, so the link share binds
    assert host_staged_bw_bytes_per_s(_box(8, "pcie5-host", 614.4)) == pytest.approx(32.004 * GB, rel=1e-9)


def test_weak_host_memory_binds():
    # 100 GB/s of host memory for 8 GPUs: each staged byte is written and read once: 100 / 16 = 6.25 GB/s
    system = _box(8, "pcie5-host", 100.0)
    assert host_staged_bw_bytes_per_s(system) == pytest.approx(6.25 * GB, rel=1e-9)
    cost = collective_cost("all_reduce", 2**42, system, 8, algorithm="ring", protocol="Simple")
    assert float(cost.busbw_bytes_per_s) == pytest.approx(6.25 * GB, rel=1e-3)


def test_uplink_sharing_is_capped_by_the_gpus_in_the_node():
    # 4 GPUs said to share a link in a 2-GPU node: only 2 can: 31.5 × 0.508 / 2 = 8.001 GB/s
    assert host_staged_bw_bytes_per_s(_box(2, "pcie4-host", sharing=4)) == pytest.approx(8.001 * GB, rel=1e-9)


def test_more_host_memory_never_slows_a_collective():
    slow = collective_cost("all_reduce", 2**30, _box(8, "pcie5-host", 200.0), 8)
    fast = collective_cost("all_reduce", 2**30, _box(8, "pcie5-host", 400.0), 8)
    assert float(fast.time_s) <= float(slow.time_s)


def test_non_positive_host_memory_is_a_profile_error():
    system = _box(2, "pcie4-host")
    data = system.model_dump(mode="python")
    data["host_memory_bw_bytes_per_s"] = {"value": "0 GB/s", "source": "a typo in a profile"}
    with pytest.raises((ProfileError, ValueError), match="host_memory_bw_bytes_per_s"):
        System.model_validate(data)
