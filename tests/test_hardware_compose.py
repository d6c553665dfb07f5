"""Composing systems from the catalogue without YAML, and the tier arithmetic the rest of the model uses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commmodel.errors import ProfileError
from commmodel.hardware.catalogue import LinkSpec, compose_system, scale_up_from_link, with_network
from commmodel.hardware.models import GPU
from commmodel.hardware.cluster import Cluster
from commmodel.io.profiles import compose_from_names, load_gpus, load_links, load_system

GB = 1e9


def test_64_h100_over_400gbe():
    # "64 H100 over 400GbE": 8 nodes of 8x H100 on NVLink 4, one 400 GbE NIC per node.
    system = compose_from_names("h100-sxm-80gb", 8, "nvlink4", "eth-400g", 1)
    cluster = Cluster.for_gpus(system, 64)
    assert cluster.num_nodes == 8
    out = system.scale_out
    links = load_links()
    assert out.kind == "ethernet" and out.nics_per_node == 1
    # node bandwidth = NICs x line rate x efficiency: 1 x 50 GB/s x eff(eth) (DESIGN §3)
    assert out.node_bw_bytes_per_s == pytest.approx(50 * GB * links["eth-400g"].efficiency.value)
    assert system.scale_up.domain_size == 8 and system.scale_up.bw_bytes_per_s.value == 450 * GB
    assert system.gpu == GPU.model_validate(load_gpus()["h100-sxm-80gb"])
    assert "eth-400g" in system.sources[0]


def test_composed_system_equals_the_shipped_profile_it_describes():
    shipped = load_system("dgx-h100")
    composed = compose_from_names("h100-sxm-80gb", 8, "nvlink4", "ib-ndr", 8, name="dgx-h100")
    assert composed.gpu == shipped.gpu
    assert composed.scale_up == shipped.scale_up
    assert composed.scale_out == shipped.scale_out


def test_nics_default_to_one_per_gpu_and_domains_can_span_nodes():
    rack = compose_from_names("gb200", 4, "nvlink5", "ib-ndr", domain_size=72)
    assert rack.scale_out.nics_per_node == 4 and rack.scale_up.domain_size == 72
    assert rack.scale_up.in_network_reduction is not None  # NVLS comes with the nvlink5 link


def test_single_box_without_network():
    box = compose_system("two-4090", load_gpus()["rtx-4090"], 2, load_links()["pcie4-host"])
    assert box.scale_out is None and box.scale_up.kind == "pcie_host"
    with pytest.raises(ProfileError, match="cannot span 2 nodes"):
        Cluster.for_gpus(box, 4, gpus_per_node=2)


@pytest.mark.parametrize(("args", "kwargs", "fragment"), [
    (("h100", 8, "nvlink4", "ib-ndr"), {}, "gpu 'h100' is not in the GPU catalogue (did you mean"),
    (("h100-sxm-80gb", 8, "nvlink-4", "ib-ndr"), {}, "scale-up link 'nvlink-4' is not in the link catalogue"),
    (("h100-sxm-80gb", 8, "nvlink4", "400gbe"), {}, "scale-out link '400gbe' is not in the link catalogue"),
    (("h100-sxm-80gb", 8, "ib-ndr", "ib-ndr"), {}, "'ib-ndr' is a network link"),
    (("h100-sxm-80gb", 8, "nvlink4", "nvlink4"), {}, "'nvlink4' joins GPUs inside a node"),
    (("h100-sxm-80gb", 0, "nvlink4", "ib-ndr"), {}, "gpus_per_node 0 must be a whole number ≥ 1"),
    (("h100-sxm-80gb", 8, "nvlink4", "ib-ndr", 0), {}, "nics_per_node 0 must be a whole number ≥ 1"),
    (("h100-sxm-80gb", 8, "nvlink4", None, 4), {}, "nics_per_node 4 given without a scale-out link"),
    (("h100-sxm-80gb", 8, "nvlink4", "ib-ndr"), {"domain_size": 12}, "spans nodes but is not a multiple"),
])
def test_compose_errors_say_what_to_do(args, kwargs, fragment):
    with pytest.raises(ProfileError) as err:
        compose_from_names(*args, **kwargs)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_compose_system_validates_an_inline_gpu_mapping():
    with pytest.raises(ProfileError, match=r"gpu: hbm_bytes: required field is missing"):
        compose_system("x", {"name": "g", "peak_flops_per_s": {"bf16": {"value": "1 TFLOP/s", "source": "abc"}}},
                       1, load_links()["pcie4"])


def test_with_network_keeps_gpu_and_scale_up_and_names_the_change():
    base = load_system("dgx-a100")
    swapped = with_network(base, load_links()["ib-ndr"], 4)
    assert swapped.name == "dgx-a100+ib-ndr:4"
    assert (swapped.gpu, swapped.scale_up) == (base.gpu, base.scale_up)
    assert swapped.scale_out.nics_per_node * swapped.scale_out.nic_bw_bytes_per_s.value == 200 * GB
    with pytest.raises(ProfileError, match="scale-up link"):
        with_network(base, load_links()["nvlink4"])


def test_link_spec_rejects_a_kind_from_the_other_tier():
    spec = load_links()["ib-ndr"].model_dump(mode="json")
    spec["kind"] = "nvswitch"
    with pytest.raises(ValueError, match="kind 'nvswitch' is not a scale_out kind"):
        LinkSpec.model_validate(spec)


def test_scale_up_from_link_rejects_network_links():
    with pytest.raises(ProfileError, match="network link"):
        scale_up_from_link(load_links()["eth-100g"], 8)


@given(
    nics=st.integers(1, 64),
    gbit=st.sampled_from([10, 25, 100, 200, 400, 800]),
    eff=st.floats(0.05, 1.0),
    oversub=st.floats(1.0, 8.0),
)
def test_node_bandwidth_is_nics_times_rate_times_efficiency_over_oversubscription(nics, gbit, eff, oversub):
    tier = load_system("dgx-h100").scale_out.model_copy(update={"nics_per_node": nics, "oversubscription": oversub})
    tier = tier.model_copy(update={
        "nic_bw_bytes_per_s": tier.nic_bw_bytes_per_s.model_copy(update={"value": gbit * 1e9 / 8}),
        "efficiency": tier.efficiency.model_copy(update={"value": eff}),
    })
    assert tier.node_bw_bytes_per_s == pytest.approx(nics * gbit * 1e9 / 8 * eff / oversub, rel=1e-12)


@given(gpus_per_node=st.sampled_from([1, 2, 4, 8]), num_nodes=st.integers(1, 128))
def test_for_gpus_uses_a_share_of_the_nics(gpus_per_node, num_nodes):
    # Fewer GPUs per node keep the NICs next to them: p5 has 32 EFA adapters for 8 GPUs (4 per GPU).
    system = load_system("aws-p5")
    cluster = Cluster.for_gpus(system, gpus_per_node * num_nodes, gpus_per_node=gpus_per_node)
    assert cluster.num_nodes == num_nodes
    assert cluster.system.scale_out.nics_per_node == 4 * gpus_per_node
    assert cluster.system.scale_up.domain_size == gpus_per_node


@given(gpus_per_node=st.sampled_from([1, 2, 4, 8]), num_nodes=st.integers(1, 16))
def test_node_for_gpus_is_the_clusters_node_built_once(gpus_per_node, num_nodes):
    """The step model's node view (no Cluster built) equals the cluster's, and a repeated call returns the view
    already built (frozen models: no copy per evaluation)."""
    system = load_system("aws-p5")
    n = gpus_per_node * num_nodes
    node = Cluster.node_for_gpus(system, n, gpus_per_node)
    assert node == Cluster.for_gpus(system, n, gpus_per_node=gpus_per_node).system
    assert node.scale_out.nics_per_node == 4 * gpus_per_node and node.gpus_per_node == gpus_per_node
    assert Cluster.node_for_gpus(system, n, gpus_per_node) is node
    assert (node is system) == (gpus_per_node == 8)
