"""Fused-attention cost (StepOptions.flash_attention_rate): causal block skip and the published
FlashAttention rate per GPU family, checked against hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.errors import CommModelError
from commmodel.io.profiles import load_system
from commmodel.step.attention import (
    attention_efficiency,
    causal_fraction,
    flash_attention_forward_s,
    resolve_kernel,
)
from commmodel.step.compute import gemm_efficiency, stage_compute
from commmodel.step.options import StepOptions
from commmodel.workload import TransformerModel
from commmodel.workload.flops import layer_gemms
from commmodel.workload.presets import get_model

# l = 2, h = 1024, a = 8 (d = 128), s = 2048: core forward FLOPs 4·b·s²·h = 4 · 2048² · 1024.
MODEL = TransformerModel(name="attn-toy", num_layers=2, hidden_size=1024, num_heads=8, vocab_size=1024,
                         seq_len=2048)
ONE = np.array([1])
A100 = load_system("dgx-a100")
H100 = load_system("dgx-h100")


def test_causal_fraction_counts_diagonal_tiles() -> None:
    assert causal_fraction(2048) == pytest.approx((1 + 1 / 16) / 2)      # 16 tiles of 128: 136 of 256
    assert causal_fraction(2048) == pytest.approx(136 / 256)
    assert causal_fraction(131072) == pytest.approx((1 + 1 / 1024) / 2)  # 0.50049
    assert causal_fraction(100) == 1.0                                   # one tile: nothing to skip


def test_attention_efficiency_by_compute_capability() -> None:
    # A100 (sm_80): Dao 2023's ~0.56, flat (no sweep); H100-class (sm_90): FlashAttention-2 0.3384 × s/(s + 1,250)
    assert A100.gpu.sm_version() == 80 and attention_efficiency(A100) == 0.56
    assert attention_efficiency(A100, "auto", 131072) == 0.56
    assert H100.gpu.sm_version() == 90 and attention_efficiency(H100) == 0.3384
    assert attention_efficiency(H100, "auto", 8192) == pytest.approx(0.3384 * 8192 / 9442)
    gh200 = load_system("alps-gh200")
    assert gh200.gpu.sm_version() == 90 and attention_efficiency(gh200, "auto", 4096) == pytest.approx(
        0.3384 * 4096 / 5346)
    b200 = load_system("hgx-b200")  # sm_100: cuDNN attention (auto), cudnn-frontend @f937055 B200 sweep
    assert b200.gpu.sm_version() == 100 and attention_efficiency(b200) == 0.544
    b300 = load_system("hgx-b300")  # sm_103: cuDNN from the GB300 sweep; FlashAttention-2 has no figure -> matmul rule
    assert attention_efficiency(b300, "auto", 8192) == pytest.approx(0.6706 * 8192 / 9122)
    assert attention_efficiency(b300, "flash2", 8192) == pytest.approx(0.56 / 0.869 * b300.gpu.matmul_efficiency.value)


def test_attention_kernel_per_architecture() -> None:
    """auto = torchtitan's SDPA priority (@6fc499f): cuDNN first from compute capability 10.0; te = Transformer
    Engine's (@d0067d0 get_attention_backend): FusedAttention (cuDNN) preferred from 9.0; FlashAttention-2 below."""
    assert [resolve_kernel("auto", sm) for sm in (80, 90, 100, 103)] == ["flash2", "flash2", "cudnn", "cudnn"]
    assert [resolve_kernel("te", sm) for sm in (80, 90, 100, 103)] == ["flash2", "cudnn", "cudnn", "cudnn"]
    assert resolve_kernel("auto", None) == resolve_kernel("te", None) == "flash2"
    assert resolve_kernel("flash2", 100) == "flash2" and resolve_kernel("cudnn", 80) == "cudnn"
    b200 = load_system("hgx-b200")
    assert attention_efficiency(b200, "flash2") == 0.1648
    assert attention_efficiency(b200, "cudnn") == attention_efficiency(b200, "auto") == attention_efficiency(b200, "te")
    assert attention_efficiency(H100, "flash2") == attention_efficiency(H100, "auto") == 0.3384
    assert attention_efficiency(H100, "cudnn") == attention_efficiency(H100, "te") == 0.5490
    # cuDNN on sm_80 has no figure: the matmul-relative rule
    assert attention_efficiency(A100, "cudnn") == pytest.approx(0.56 / 0.869 * A100.gpu.matmul_efficiency.value)
    with pytest.raises(ValueError, match="attention kernel"):
        resolve_kernel("flash3", 90)


# cudnn-frontend benchmark/benchmark_results.csv @91b7532 (H200, causal, head dim 128): fwd + bwd TFLOP/s per s
H200_SWEEP = {"flash2": {4096: 257.94, 8192: 287.26, 16384: 311.17, 32768: 324.62, 65536: 328.09},
              "cudnn": {4096: 477.36, 8192: 502.82, 16384: 525.88, 32768: 535.90, 65536: 538.06}}


def _b200_point(forward_ms: float, backward_ms: float, seq: int) -> float:
    """fwd + bwd TFLOP/s of one row of the B200 table (b = 1, 128 query heads of 128): 3.5 × 4·s²·a·d/2 over the
    measured forward + backward milliseconds."""
    return 3.5 * (4 * seq**2 * 128 * 128 / 2) / ((forward_ms + backward_ms) * 1e-3) / 1e12


# cudnn-frontend sdpa_benchmark_bf16_training @f937055 B200 rows (forward ms, backward ms) at 4K, 8K, 32K, 128K
B200_ROWS = {"cudnn": {4096: (0.613, 1.938), 8192: (1.816, 5.815), 32768: (24.518, 77.677),
                       131072: (417.410, 1355.987)},
             "flash2": {4096: (1.678, 5.159), 8192: (5.848, 17.781), 32768: (86.581, 257.176),
                        131072: (1366.320, 4051.869)}}


@pytest.mark.parametrize("kernel", ["flash2", "cudnn"])
def test_sm90_rates_reproduce_the_published_sweep(kernel: str) -> None:
    """Every published point of the H200 sweep within 1.2% of the entry's asymptote × s/(s + s½) × 989.4."""
    for seq, tflops in H200_SWEEP[kernel].items():
        model_tflops = attention_efficiency(H100, kernel, seq) * 989.4
        assert model_tflops == pytest.approx(tflops, rel=0.012), seq


def test_gb300_cudnn_rate_reproduces_the_published_sweep() -> None:
    """cudnn-frontend results/llama3.1/gb300 @3929da2 (cuDNN 9.22, b = 2, 64/8 heads of 128, causal): fwd + bwd
    TFLOP/s from the per-pass times and rates, 3.5·F/(t_fwd + t_bwd) with F = rate_fwd·t_fwd, within 2% at 4K-32K."""
    gb300 = load_system("gb300-nvl72")
    published = {4096: 1352, 8192: 1534, 16384: 1605, 32768: 1598}
    for seq, tflops in published.items():
        assert attention_efficiency(gb300, "te", seq) * 2500 == pytest.approx(tflops, rel=0.021), seq


@pytest.mark.parametrize("kernel", ["flash2", "cudnn"])
def test_b200_rates_reproduce_the_published_sweep(kernel: str) -> None:
    """The B200 rows from their raw times: FlashAttention-2 within 1.3%, cuDNN within 8.4% (its sweep falls past 32K,
    which the rising form cannot follow); the 8K cuDNN point is the 1,008.6 TFLOP/s docs/stacks-sources.md quotes as 1,008."""
    b200 = load_system("hgx-b200")
    assert _b200_point(*B200_ROWS["cudnn"][8192], 8192) == pytest.approx(1008.6, abs=0.1)
    for seq, times in B200_ROWS[kernel].items():
        model_tflops = attention_efficiency(b200, kernel, seq) * 2250
        assert model_tflops == pytest.approx(_b200_point(*times, seq), rel=0.013 if kernel == "flash2" else 0.084), seq


def test_b200_forward_time_by_hand() -> None:
    """Llama-3 8B block at 8,192 tokens on one B200 under the auto kernel (cuDNN): forward = 7/6 · F_causal /
    (eff · 2,250 TFLOP/s), F_causal = 4·b·s²·q·(1 + 128/s)/2, eff = 0.544 × 8192/(8192 + 2220); under context
    parallelism cp = 4 each kernel call sees 2,048 tokens, so the same FLOPs run at 0.544 × 2048/4268."""
    model = get_model("llama3-8b")
    b200 = load_system("hgx-b200")
    causal = 4 * 8192**2 * 4096 * (1 + 1 / 64) / 2
    one = np.array([1.0])
    cudnn_eff, fa2_eff = 0.544 * 8192 / 10412, 0.1648 * 8192 / 9442
    expected = 7 / 6 * causal / (cudnn_eff * 2250e12)                     # 0.673 ms
    assert float(flash_attention_forward_s(model, b200, one, one)[0]) == pytest.approx(expected, rel=1e-12)
    fa2 = float(flash_attention_forward_s(model, b200, one, one, kernel="flash2")[0])
    assert fa2 == pytest.approx(expected * cudnn_eff / fa2_eff, rel=1e-12)
    cp4 = float(flash_attention_forward_s(model, b200, one, one, cp=4)[0])
    assert cp4 == pytest.approx(7 / 6 * causal / (0.544 * 2048 / 4268 * 2250e12), rel=1e-12)


def test_dropout_slows_each_kernel_by_its_own_measured_factor() -> None:
    """FlashAttention-2 × 1.14, cuDNN × 1.30 (attention_rates.DROPOUT_SLOWDOWN, measured on one H100)."""
    model = get_model("llama3-8b")
    one = np.array([1.0])
    for kernel, factor in (("flash2", 1.14), ("te", 1.30)):
        plain = float(flash_attention_forward_s(model, H100, one, one, kernel=kernel)[0])
        dropped = float(flash_attention_forward_s(model, H100, one, one, dropout=True, kernel=kernel)[0])
        assert dropped == pytest.approx(factor * plain, rel=1e-12)


def test_gpu_without_compute_capability_takes_the_fallback_rate() -> None:
    """No CUDA compute capability (the AMD Instinct parts state none): the documented fallback, A100's FlashAttention
    to large-GEMM ratio times the GPU's own matmul efficiency; the NCCL tuner still refuses such a GPU."""
    from commmodel.errors import ProfileError
    from commmodel.step.attention import FALLBACK_FRACTION_OF_MATMUL

    bare = A100.model_copy(update={"gpu": A100.gpu.model_copy(update={"compute_capability": None})})
    assert attention_efficiency(bare) == pytest.approx(FALLBACK_FRACTION_OF_MATMUL * 0.869)
    assert FALLBACK_FRACTION_OF_MATMUL * 0.869 == pytest.approx(0.56)  # = A100's own published rate
    with pytest.raises(ProfileError, match="has no compute_capability"):
        bare.gpu.sm_version()


def test_forward_time_a100_by_hand() -> None:
    causal_flops = 4 * 2048**2 * 1024 * (136 / 256)          # 9.126e9
    expected_s = 3.5 / 3 * causal_flops / (0.56 * 312e12)     # 6.094e-5 s
    assert expected_s == pytest.approx(6.0937e-5, rel=1e-4)
    assert float(flash_attention_forward_s(MODEL, A100, ONE, ONE)[0]) == pytest.approx(expected_s, rel=1e-9)
    # tp 2 halves the heads per GPU and so the time
    assert float(flash_attention_forward_s(MODEL, A100, ONE, np.array([2]))[0]) == pytest.approx(expected_s / 2)


def test_triton_flashattention_is_fa2_slowed_by_its_measured_pass_factors() -> None:
    """Dao 2023 (arXiv:2307.08691) §4.1: FlashAttention-2 is ~1.3-1.5x faster than FlashAttention in Triton forward
    and ~2x backward; the backward does 2.5x the forward's FLOPs at 63/73 of its rate (§1, §4.1). Fwd + bwd:
    (1.4 + 2.5/(63/73) x 2) / (1 + 2.5/(63/73)) = 1.846; the A100 time is FA2's (6.094e-5 s above) x 1.846."""
    from commmodel.step.attention_rates import triton_fa2_slowdown

    bwd = 2.5 * 73 / 63
    assert triton_fa2_slowdown() == pytest.approx((1.4 + 2.0 * bwd) / (1.0 + bwd), rel=1e-12)
    assert triton_fa2_slowdown() == pytest.approx(1.846, abs=5e-4)
    assert resolve_kernel("triton", 90) == "triton"
    fa2 = float(flash_attention_forward_s(MODEL, A100, ONE, ONE, kernel="flash2")[0])
    triton = float(flash_attention_forward_s(MODEL, A100, ONE, ONE, kernel="triton")[0])
    assert triton == pytest.approx(6.0937e-5 * 1.846, rel=1e-3)
    assert triton / fa2 == pytest.approx(triton_fa2_slowdown(), rel=1e-12)
    # the same sequence form as FA2 on H100 (s = 2,048 of s/(s + 1,250)), at 0.3384 / 1.846 of the peak
    assert float(attention_efficiency(H100, "triton", 2048.0)) == pytest.approx(0.3384 / 1.846 * 2048 / 3298,
                                                                                rel=1e-3)


def test_triton_where_no_rate_is_published_is_the_fallback_over_its_slowdown() -> None:
    """B300 (sm_103) and MI300X have no FlashAttention-2 entry: the fallback (0.64 x matmul efficiency) stands for FA2,
    and the Triton kernel runs 1.846x slower than that, as where FA2's rate is published."""
    from commmodel.step.attention import FALLBACK_FRACTION_OF_MATMUL
    from commmodel.step.attention_rates import triton_fa2_slowdown

    for name in ("hgx-b300", "amd-mi300x"):
        system = load_system(name)
        fa2 = FALLBACK_FRACTION_OF_MATMUL * system.gpu.matmul_efficiency.value
        assert float(attention_efficiency(system, "flash2")) == pytest.approx(fa2, rel=1e-12)
        assert float(attention_efficiency(system, "triton")) == pytest.approx(fa2 / triton_fa2_slowdown(), rel=1e-12)


def test_forward_time_h100_and_fp8_uses_bf16_peak() -> None:
    causal_flops = 4 * 2048**2 * 1024 * (136 / 256)
    expected_s = 3.5 / 3 * causal_flops / (0.3384 * 2048 / 3298 * 989e12)  # 5.08e-5 s at s = 2,048
    assert float(flash_attention_forward_s(MODEL, H100, ONE, ONE)[0]) == pytest.approx(expected_s, rel=1e-9)
    fp8 = MODEL.model_copy(update={"dtype": "fp8"})
    assert float(flash_attention_forward_s(fp8, H100, ONE, ONE)[0]) == pytest.approx(expected_s, rel=1e-9)


def test_stage_compute_swaps_only_the_attention_core() -> None:
    args = (MODEL, A100, ONE, ONE, ONE, np.array([0]), np.array([False]), True)
    gemm = stage_compute(*args)
    fused = stage_compute(*args, flash_attention_rate=True)
    old_core_s = sum(g.flops[0] / (312e12 * gemm_efficiency(A100, g)[0])
                     for g in layer_gemms(MODEL, ONE, ONE) if g.attention_core)
    # d = 128 against d½ = 256: 0.869 · 128/384 = 29% of peak, over the full square
    assert old_core_s == pytest.approx(2 * 4 * 2048**2 * 1024 / 2 / (312e12 * 0.869 / 3))
    new_core_s = float(flash_attention_forward_s(MODEL, A100, ONE, ONE)[0])
    assert float(gemm.forward_s[0] - fused.forward_s[0]) == pytest.approx(2 * (old_core_s - new_core_s))
    assert float(fused.attention_core_s[0]) == pytest.approx(new_core_s)  # no softmax bytes with flash
    # the rate needs flash attention: without it the GEMM pricing stays
    off = (MODEL, A100, ONE, ONE, ONE, np.array([0]), np.array([False]), False)
    assert float(stage_compute(*off, flash_attention_rate=True).forward_s[0]) == float(stage_compute(*off).forward_s[0])


def test_rate_needs_flash_attention() -> None:
    with pytest.raises((CommModelError, ValueError), match="needs flash_attention true"):
        StepOptions(flash_attention_rate=True)
    assert StepOptions(flash_attention=True, flash_attention_rate=True).flash_attention_rate


def test_llama3_405b_128k_needs_the_fused_rate() -> None:
    """Llama Team 2024 (arXiv:2407.21783) Table 4 row 3: 16,384 H100, TP 8 CP 16 PP 16 DP 8, 131,072
    tokens, 38% BF16 MFU. At the published rate of the kernel Transformer Engine runs with causal skipping (the row's
    options, as the megatron-core stack) it is within the 20% tolerance; the two-GEMM pricing of the core misses it by
    ~-58%, which is why megatron-core prices fused attention at the rate (attention_rates.FUSED_RATE_NOTE)."""
    import yaml

    from commmodel.step.stacks import get_stack
    from commmodel.validation.training import validate_out_of_sample

    with open("commmodel/data/training_out_of_sample.yaml") as fh:
        runs = [r for r in yaml.safe_load(fh)["runs"] if r["id"] == "llama3-405b-h100-16384gpu-cp16"]
    assert runs[0]["options"]["flash_attention_rate"] is get_stack("megatron-core").options["flash_attention_rate"]
    record = validate_out_of_sample(runs)[0]
    assert abs(record["error_pct"]) <= 20.0
    # 0.3918 before the interleaved reduction went chunk by chunk (step/overlap.py interleaved_reduce_exposure),
    # 0.3964 before the bucketed param gather, 0.3973 before Transformer Engine's cuDNN attention at its
    # sequence-dependent rate (each of the 16 CP ranks' kernel calls sees 8,192 tokens)
    assert record["predicted"] == pytest.approx(0.3634, rel=0.01)
    runs[0]["options"] = {**runs[0]["options"], "flash_attention_rate": False}
    assert validate_out_of_sample(runs)[0]["error_pct"] == pytest.approx(-57.7, abs=2.0)


def test_rate_text_states_the_table_entry() -> None:
    """The stacks' assumption lines quote attention_rates through rate_text, so a changed entry changes the line."""
    from commmodel.step.attention_rates import rate_text
    from commmodel.step.stacks import STACKS

    assert rate_text("cudnn", 90) == "0.549 × s/(s + 580) of the bf16 peak: 0.48 at 4K, 0.51 at 8K"
    assert rate_text("flash2", 80) == "0.56 of the bf16 peak"
    assert any(rate_text("cudnn", 90) in b.text for b in STACKS["megatron-core"].behaviours)
    assert any(rate_text("flash2", 90, (8192,)) in b.text for b in STACKS["fsdp2"].behaviours)


def test_a_gpu_without_a_published_rate_is_said_to_be_priced_by_the_fallback():
    """The megatron-core attention line quotes NVIDIA rates; on an MI300X (no CUDA compute capability) the output adds
    a line with the fallback the GPU is priced at: 0.56 / 0.869 × its matmul efficiency 0.511 = 0.33."""
    from commmodel.step.attention import FALLBACK_FRACTION_OF_MATMUL, rate_line
    from commmodel.step.stack_assumptions import assumptions
    from commmodel.step.stacks import stack_options

    mi300x = load_system("amd-mi300x")
    options = stack_options("megatron-core")
    line = rate_line(mi300x, options.attention_kernel)
    assert attention_efficiency(mi300x, "te", 8192) == pytest.approx(0.56 / 0.869 * 0.511, rel=1e-3)
    assert FALLBACK_FRACTION_OF_MATMUL == pytest.approx(0.56 / 0.869)
    assert "mi300x" in line and "no published rate" in line and "= 0.33 of the bf16 peak" in line
    assert line in assumptions("megatron-core", options, mi300x)
    assert not any("no published rate" in a for a in assumptions("megatron-core", options, H100))
    unpriced = stack_options("megatron-core", flash_attention_rate=False)
    assert not any("fused attention on" in a for a in assumptions("megatron-core", unpriced, mi300x))


@pytest.mark.parametrize(("system", "stack", "entry", "at_8k"), [
    ("dgx-h100", "megatron-core", ("cudnn", 90), 0.51),   # TE runs cuDNN from sm_90: 0.549 × 8192/(8192 + 580)
    ("gb200-nvl72", "megatron-core", ("cudnn", 100), 0.43),  # 0.544 × 8192/(8192 + 2220)
    ("dgx-h100", "fsdp2", ("flash2", 90), 0.29),          # SDPA keeps FlashAttention-2 below sm_100: 0.3384 × 0.868
    ("dgx-a100", "fsdp2", ("flash2", 80), 0.56),          # flat: Dao 2023's single A100 figure
])
def test_every_priced_run_states_the_rate_its_gpu_takes(system: str, stack: str, entry: tuple[str, int],
                                                        at_8k: float) -> None:
    """The stacks' attention lines quote NVIDIA examples (H100, B200); the output adds the entry the run's own GPU is
    priced at, so a GB200 run does not read as priced at the H100's rate."""
    from commmodel.step.attention_rates import rate_text
    from commmodel.step.stack_assumptions import assumptions
    from commmodel.step.stacks import stack_options

    gpu_system = load_system(system)
    options = stack_options(stack)
    lines = [a for a in assumptions(stack, options, gpu_system) if a.startswith("fused attention on")]
    assert len(lines) == 1
    assert f"sm_{entry[1]}, {entry[0]}" in lines[0] and rate_text(*entry) in lines[0]
    assert attention_efficiency(gpu_system, options.attention_kernel, 8192) == pytest.approx(at_8k, abs=0.005)


def test_fp8_on_a_gpu_without_a_cuda_architecture_is_one_clear_line():
    from typer.testing import CliRunner

    from commmodel.cli.app import app

    for argv in (["estimate", "-m", "llama3-8b", "-n", "8", "-s", "amd-mi300x", "--dtype", "fp8"],
                 ["query", "llama3-8b on 16 MI355X, fp8"]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 1
        assert result.output.strip().count("\n") == 0
        assert "not priced" in result.output and "--dtype bf16" in result.output and "sm_90" not in result.output


def test_fp8_gemms_take_the_measured_fp8_mamf_ratio():
    """stas00/ml-engineering @744d01e MAMF tables: H100 SXM bf16 794.5 of 989 (0.803), FP8 1402.6 of 1979 (0.709).
    A large FP8 GEMM on an H100 runs at 0.709 × d/(d + d½) of the FP8 peak; a bf16 one at 0.803; a GPU without an
    FP8 figure uses its bf16 ratio for FP8 too."""
    from commmodel.step.compute import gemm_half_dim
    from commmodel.workload.flops import Gemm

    d = np.array([8192.0])
    gemm = Gemm("fc1", 2 * d**3, d, d, d, False)
    h100 = H100.gpu
    assert h100.matmul_efficiency_for("fp8") == 0.709 and h100.matmul_efficiency_for("bf16") == 0.803
    for dtype, large in (("fp8", 0.709), ("mxfp8", 0.709), ("bf16", 0.803)):
        half = gemm_half_dim(H100, dtype)
        assert float(gemm_efficiency(H100, gemm, dtype)[0]) == pytest.approx(large * 8192 / (8192 + half), rel=1e-12)
    a100 = A100.gpu  # no FP8 peak, no FP8 MAMF: the bf16 ratio stands in
    assert a100.matmul_efficiency_fp8 is None and a100.matmul_efficiency_for("fp8") == a100.matmul_efficiency.value
