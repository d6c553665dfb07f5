"""Toy hardware and model builders shared by the step-model tests (round numbers, hand-checkable)."""

from __future__ import annotations

from commmodel.hardware.models import GPU, ScaleOutTier, ScaleUpTier, Sourced, System
from commmodel.io.profiles import load_gpus
from commmodel.workload import TransformerModel

TOY = TransformerModel(name="toy", num_layers=2, hidden_size=64, num_heads=4, vocab_size=128, seq_len=16)


def sourced(value):
    """A `Sourced` profile field for a test fixture."""
    return {"value": value, "source": "test fixture"}


def toy_system(gpus_per_node: int = 1, nic: str = "8 Gb/s", up: str = "100 GB/s") -> System:
    """100 TFLOP/s GPUs with perfect matmuls, 1 TB/s HBM, ideal (zero-latency) links."""
    return System.model_validate({
        "name": "toy", "gpus_per_node": gpus_per_node,
        "gpu": {"name": "toy-gpu", "peak_flops_per_s": {"bf16": sourced("100 TFLOP/s")},
                "hbm_bytes": sourced("80 GB"), "hbm_bw_bytes_per_s": sourced("1 TB/s"),
                "matmul_efficiency": sourced(1.0), "compute_capability": sourced("sm_80")},
        "scale_up": {"kind": "nvswitch", "link": "toy", "bw_bytes_per_s": sourced(up), "efficiency": sourced(1.0),
                     "latency_s": sourced("0 s"), "domain_size": gpus_per_node},
        "scale_out": {"kind": "ethernet", "link": "toy", "nics_per_node": 1, "nic_bw_bytes_per_s": sourced(nic),
                      "efficiency": sourced(1.0), "latency_s": sourced("0 s")},
    })


def make_system(*, gpus_per_node=8, domain=8, up_bw="100 GB/s", up_eff=1.0, up_lat="1 us", up_kind="nvswitch",
                nics=None, nic_bw="10 GB/s", out_eff=1.0, out_lat="10 us", out_kind="infiniband",
                nvls=None, name="synthetic") -> System:
    """A System with round numbers (efficiencies 1 unless asked)."""
    src = "synthetic test value"
    up = ScaleUpTier(kind=up_kind, link="test", bw_bytes_per_s=Sourced(value=up_bw, source=src),
                     efficiency=Sourced(value=up_eff, source=src), latency_s=Sourced(value=up_lat, source=src),
                     domain_size=domain, in_network_reduction=nvls)
    out = None if nics is None else ScaleOutTier(
        kind=out_kind, link="test", nics_per_node=nics, nic_bw_bytes_per_s=Sourced(value=nic_bw, source=src),
        efficiency=Sourced(value=out_eff, source=src), latency_s=Sourced(value=out_lat, source=src))
    return System(name=name, gpu=GPU.model_validate(load_gpus()["h100-sxm-80gb"]), gpus_per_node=gpus_per_node,
                  scale_up=up, scale_out=out)


A = make_system()
"""System A: one 8-GPU NVSwitch domain, B = 100 GB/s per GPU (efficiency 1), LL hop α = 1 us."""
B = make_system(gpus_per_node=4, domain=4, nics=4)
"""System B: 4 GPUs per node, the same NVSwitch inside, one 10 GB/s NIC per GPU, network LL hop 10 us."""
SIMPLE_IN = (1 + 2.8) * 1e-6         # NVLink Simple hop on A/B
SIMPLE_OUT = (10 + 11.3 + 7.3) * 1e-6  # network Simple hop on B
