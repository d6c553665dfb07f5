"""Toy hardware and model builders shared by the step-model tests (round numbers, hand-checkable)."""

from __future__ import annotations

from commmodel.hardware.models import System
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
