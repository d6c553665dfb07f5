"""torchtitan's eager and compiled elementwise work (commmodel.workload.eager, issue 12).

Bytes by hand for one layer of Llama-3 8B (h = q = 4096, kv = 1024, f = 14336, bf16 e = 2, tp = 1), from
torchtitan @9dec370 (norms.py RMSNorm, llama/model.py apply_rotary_emb / repeat_kv / FeedForward / TransformerBlock),
op for op as benchmarks/eager_elementwise.py counts them."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.io.profiles import load_system
from commmodel.step.compute import HBM_EFFICIENCY, KERNEL_OVERHEAD_S, KERNELS_PER_LAYER_FORWARD, stage_compute
from commmodel.step.options import StepOptions
from commmodel.validation.modern import run_options
from commmodel.workload.eager import eager_elementwise_bytes, gqa_copy_bytes
from commmodel.workload.flops import layer_elementwise_bytes
from commmodel.workload.presets import get_model

L8B = get_model("llama3-8b")
ONE = np.ones(1)
TOKENS = 8192.0  # one sequence


def test_fused_estimate_of_one_llama3_8b_layer() -> None:
    # norms 2·2e·h = 32,768; residuals 2·(3e + 1)·h = 57,344; SwiGLU 3e·f = 86,016; RoPE 2e·(q + kv) = 20,480
    total, core = layer_elementwise_bytes(L8B, ONE, ONE, np.zeros(1, bool), True)
    assert total[0] / TOKENS == 32_768 + 57_344 + 86_016 + 20_480 == 196_608
    assert core[0] == 0.0


def test_eager_bytes_of_one_llama3_8b_layer_by_hand() -> None:
    h, q, kv, f = 4096, 4096, 1024, 14336
    # forward: 2 RMSNorms (6 + 8 + 4 + 8 + 6 + 4 = 36 per element), 2 residual adds (6), RoPE on q, k (6 + 8 + 6),
    # repeat_kv copies of K and V (read kv, write q, 2 bytes each), silu (4) and mul (6) per element of f
    forward = 2 * 36 * h + 2 * 6 * h + 20 * (q + kv) + 2 * 2 * (kv + q) + 10 * f
    # backward: RMSNorm 92 per element (6 + 4 + 2 + 6 + 12 + 8 + 4 + 4 + 8 + 8 + 12 + 12 + 6), the two residual
    # branch sums and three linear-input sums (wq/wk/wv, w1/w3) of 6, RoPE 20, repeat_kv sums, SwiGLU 18 per f
    backward = 2 * 92 * h + 2 * 6 * h + 3 * 6 * h + 20 * (q + kv) + 2 * 2 * (kv + q) + 18 * f
    assert (forward, backward) == (610_304, 1_257_472)
    fwd, bwd = eager_elementwise_bytes(L8B, ONE, ONE, np.zeros(1, bool))
    assert (fwd[0] / TOKENS, bwd[0] / TOKENS) == (forward, backward)
    assert gqa_copy_bytes(L8B, ONE, ONE)[0] / TOKENS == 20_480


def test_tensor_parallel_splits_the_head_and_mlp_terms() -> None:
    tp = np.array([8.0])
    fwd, _ = eager_elementwise_bytes(L8B, ONE, tp, np.array([True]))
    assert fwd[0] / TOKENS == (2 * 36 + 2 * 6) * 4096 / 8 + (20 + 4) * 5120 / 8 + 10 * 14336 / 8


def test_eager_stage_time_adds_the_bytes_and_kernels_over_fused() -> None:
    system = load_system("dgx-h100")
    args = (L8B, system, ONE, ONE, ONE, np.array([0]), np.zeros(1, bool), True)
    fused, eager, compiled = (stage_compute(*args, elementwise=k) for k in ("fused", "eager", "compiled"))
    hbm = system.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY
    fused_fwd, fused_bwd = 196_608 * TOKENS, 2 * 196_608 * TOKENS
    extra_s = ((610_304 + 1_257_472) * TOKENS - fused_fwd - fused_bwd) / hbm
    extra_s += (36 + 65 - 3 * KERNELS_PER_LAYER_FORWARD) * KERNEL_OVERHEAD_S
    assert float(eager.total_s[0] - fused.total_s[0]) == pytest.approx(32 * extra_s, rel=1e-9)
    assert float(eager.forward_s[0] - fused.forward_s[0]) == pytest.approx(
        32 * ((610_304 * TOKENS - fused_fwd) / hbm + (36 - KERNELS_PER_LAYER_FORWARD) * KERNEL_OVERHEAD_S), rel=1e-9)
    # compiled: the GQA copy once forward, once backward
    assert float(compiled.total_s[0] - fused.total_s[0]) == pytest.approx(32 * 2 * 20_480 * TOKENS / hbm, rel=1e-9)
    assert float(eager.matmul_s[0]) == float(fused.matmul_s[0])


def test_unknown_elementwise_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="elementwise"):
        stage_compute(L8B, load_system("dgx-h100"), ONE, ONE, ONE, np.array([0]), np.zeros(1, bool), True,
                      elementwise="triton")


def test_torch_compile_reaches_elementwise() -> None:
    """A run's documented torch_compile sets StepOptions.elementwise (true -> compiled, false -> eager); fsdp2's own
    default is eager (torchtitan train_configs/llama3_8b.toml @9dec370: compile = false); other stacks stay fused."""
    run = {"stack": "fsdp2", "options": {"flash_attention": True, "torch_compile": False}}
    assert run_options(run).elementwise == "eager"
    run["options"]["torch_compile"] = True
    assert run_options(run).elementwise == "compiled"
    assert run_options(run, compile_elementwise=False).elementwise == "eager"  # the stack's own default
    assert run_options({"stack": "fsdp2", "options": {}}).elementwise == "eager"
    assert StepOptions().elementwise == "fused" and run_options({"stack": "megatron-core"}).elementwise == "fused"


def _block_ms(line: str) -> tuple[float, float]:
    words = line.split()
    return float(words[words.index("eager") + 1]), float(words[words.index("compiled") + 1])


def test_one_block_against_the_h100_measurement() -> None:
    """tests/fixtures/device/eager_elementwise_h100.txt: one torchtitan Llama-3 8B block (8,192 tokens, fwd + bwd) on
    a 700 W H100 SXM took 24.6 ms eager and 20.5 ms under torch.compile. That run's torch 2.11 (cu130) lets SDPA pick
    its kernel, and recent PyTorch puts cuDNN attention first on compute capability 9.0/10.0 when the runtime cuDNN is
    newer than 9.15 (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp ``check_prefer_cudnn_attention``,
    pytorch/pytorch#169849), so the block is priced with cuDNN at its published rate (attention_rates.py): 25.1 / 21.1
    ms, within 5% of each, with torchtitan's eager bytes and the compiled bytes. fsdp2's own kernel on sm_90 (auto:
    FlashAttention-2, what torchtitan's Dec 2024 tables ran) prices the same block at 28.0 / 24.0 ms; the GEMM-priced
    attention core fsdp2 had before at 1.5x the measurement."""
    from pathlib import Path

    from commmodel.step.stacks import stack_options

    text = (Path(__file__).parent / "fixtures" / "device" / "eager_elementwise_h100.txt").read_text()
    eager_ms, compiled_ms = _block_ms(next(line for line in text.splitlines() if line.startswith("block")))
    system = load_system("dgx-h100")
    one, no = np.array([1.0]), np.array([0])
    fsdp2 = stack_options("fsdp2")
    assert (fsdp2.flash_attention_rate, fsdp2.attention_kernel, fsdp2.elementwise) == (True, "auto", "eager")

    def per_layer_ms(rate: bool, elementwise: str, kernel: str = "cudnn") -> float:
        totals = []
        for layers in (1, 2):  # the difference drops the logits and the loss
            model = get_model("llama3-8b").model_copy(update={"seq_len": 8192, "num_layers": layers})
            comp = stage_compute(model, system, one, np.array([1]), np.array([1]), no, np.array([False]), True, rate,
                                 elementwise=elementwise, attention_kernel=kernel)
            totals.append(float(comp.total_s[0]))
        return (totals[1] - totals[0]) * 1e3

    assert per_layer_ms(True, fsdp2.elementwise) == pytest.approx(25.09, abs=0.05)
    assert per_layer_ms(True, "compiled") == pytest.approx(21.08, abs=0.05)
    assert per_layer_ms(True, fsdp2.elementwise) == pytest.approx(eager_ms, rel=0.05)
    assert per_layer_ms(True, "compiled") == pytest.approx(compiled_ms, rel=0.05)
    assert per_layer_ms(True, fsdp2.elementwise, fsdp2.attention_kernel) == pytest.approx(27.97, abs=0.05)
    assert per_layer_ms(False, "eager") / eager_ms > 1.4  # the GEMM-priced core (fsdp2 before): over-priced, measured


def test_fused_rmsnorm_swaps_the_two_norms_bytes_and_kernels() -> None:
    """torchtitan norm_type = "fused_rmsnorm" (train_configs/llama3_8b.toml @0413364, the A100 table's commit): the
    Triton RMSNorm reads x and writes y forward (2e), reads x and dy and writes dx backward (3e), 1 and 2 kernels, where
    eager moves 36 and 92 bytes per element in 8 and 13 kernels. Llama-3 8B, per token: 610,304 - 2·32·4096 = 348,160
    forward, 1,257,472 - 2·86·4096 = 552,960 backward; kernels 36 - 14 = 22 and 65 - 22 = 43."""
    from commmodel.workload.eager import eager_kernels

    fwd, bwd = eager_elementwise_bytes(L8B, ONE, ONE, np.zeros(1, bool), fused_rmsnorm=True)
    assert (fwd[0] / TOKENS, bwd[0] / TOKENS) == (348_160, 552_960)
    assert eager_kernels(True) == (22, 43) and eager_kernels() == (36, 65)
    system = load_system("dgx-a100")
    args = (L8B, system, ONE, ONE, ONE, np.array([0]), np.zeros(1, bool), True)
    eager, fused_norm = (stage_compute(*args, elementwise=k) for k in ("eager", "eager-fused-rmsnorm"))
    hbm = system.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY
    saved_s = ((610_304 - 348_160) + (1_257_472 - 552_960)) * TOKENS / hbm + (14 + 22) * KERNEL_OVERHEAD_S
    assert float(eager.total_s[0] - fused_norm.total_s[0]) == pytest.approx(32 * saved_s, rel=1e-9)
