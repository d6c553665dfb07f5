"""The step model against whole training steps measured on one lent H100 (benchmarks/one_gpu_step.py, 2026-11-27).

Fixtures (tests/fixtures/device/): ``one_gpu_step_h100.json``, seven configs of a torchtitan-style Llama (Llama-3 8B
widths with 2 or 4 blocks, a 2,048-wide one with 12) under FSDP2 or DDP on a one-rank process group, each in a fresh
process: median phase times of 10 steps and the allocator's memory; ``one_gpu_loss_h100.json``, torchtitan's loss
alone by kernel. NVIDIA H100 80GB HBM3, 700 W, driver 580.159.04, torch 2.11.0+cu130, cuDNN 9.19, NCCL 2.28.9.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from commmodel.io.profiles import load_system
from commmodel.step.compute import HBM_EFFICIENCY
from commmodel.workload.flops import cross_entropy_bytes
from commmodel.workload.presets import get_model

DEVICE = Path(__file__).parent / "fixtures" / "device"
H100 = load_system("dgx-h100")


def _kernel_ms(kernels: list, needle: str) -> float:
    """Device ms of the kernels whose name holds ``needle`` (the profiler's table also lists the autograd nodes and
    the profiler's own buffer requests with their kernels' time: left out)."""
    return sum(ms for name, _, ms in kernels if needle in name and name.startswith(("void ", "nvjet")))


def test_eager_loss_bytes_against_the_h100_kernels() -> None:
    """torchtitan's loss (``F.cross_entropy(pred.flatten(0, 1).float(), labels)``) on 2 × 4,096 × 128,256 bf16 logits:
    20.06 ms forward + backward on the lent H100, 2.05 ms of it the harness's gradient accumulation into its leaf.
    The ``eager`` kind's 2e + 44 = 48 bytes per logit at 0.8 × 3.35 TB/s give 18.8 ms (+4.5% of the 18.0 ms the loss
    itself took); the ``fused`` kind's 30 bytes, what fsdp2 priced before, 11.8 ms (-34%)."""
    data = json.loads((DEVICE / "one_gpu_loss_h100.json").read_text())
    leaf = data["variants"]["leaf"]
    accumulate_ms = _kernel_ms(leaf["kernels"], "CUDAFunctor_add")
    assert accumulate_ms == pytest.approx(2.05, abs=0.01)
    measured_ms = leaf["median_ms"] - accumulate_ms
    assert measured_ms == pytest.approx(18.0, abs=0.05)
    assert _kernel_ms(leaf["kernels"], "cunn_SoftMaxForward") == pytest.approx(5.56, abs=0.01)

    model = get_model("llama3-8b").model_copy(update={"seq_len": 4096})
    assert data["logits"] == 2 * 4096 * model.vocab_size
    rate = H100.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY

    def loss_ms(kind: str) -> float:
        forward, backward = cross_entropy_bytes(model, np.array([2.0]), np.array([1.0]), kind)
        return float(forward[0] + backward[0]) / rate * 1e3

    assert loss_ms("eager") == pytest.approx(data["logits"] * 48 / rate * 1e3, rel=1e-9)
    assert loss_ms("eager") == pytest.approx(measured_ms, rel=0.06)
    assert loss_ms("fused") / measured_ms == pytest.approx(0.66, abs=0.01)
    linear = data["variants"]["linear"]  # behind the output projection: its three GEMMs left out
    gemm_ms = _kernel_ms(linear["kernels"], "nvjet")
    assert loss_ms("eager") == pytest.approx(linear["median_ms"] - gemm_ms, rel=0.06)


def test_fsdp2_and_ddp_run_the_eager_loss_and_mpt_rows_keep_the_fused_one() -> None:
    from commmodel.io.validation_data import read_training_modern
    from commmodel.step.stacks import stack_options

    assert stack_options("fsdp2").cross_entropy == stack_options("ddp").cross_entropy == "eager"
    assert stack_options("megatron-core").cross_entropy == "fused"
    mpt = [r for r in read_training_modern() if r["id"].startswith("mpt-")]
    assert len(mpt) == 7 and all(r["options"]["cross_entropy"] == "fused" for r in mpt)
