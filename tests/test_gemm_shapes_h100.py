"""The step model's GEMM law (:func:`commmodel.step.compute.gemm_efficiency`) against GEMMs timed on a lent H100.

Fixture: ``tests/fixtures/device/gemm_shapes_h100.csv``, from ``python benchmarks/gemm_shapes.py --measure`` on a lent
NVIDIA H100 80GB HBM3 (700 W, driver 580.159.04, torch 2.11.0+cu130, 2026-11-27): each GEMM replayed from a CUDA graph
of 10 calls (the GPU's time, no launch cost), median of 7. bf16 ``torch.mm``, FP8 ``torch._scaled_mm`` with
tensor-wise and with row-wise scales, and the routed experts of Qwen3-MoE and Mixtral as ``torch._grouped_mm`` and as
a loop of ``torch.mm`` (that run stopped at its time limit before DeepSeek-V3's experts).
``gemm_shapes_h100_backward.csv`` (``--part backward``, a fresh machine of the same kind): the block GEMMs' data and
weight gradients in the layouts autograd hands cuBLAS, and DeepSeek-V3's experts as grouped GEMMs.

What it says: on the GEMMs of real blocks (Llama-3 8B and 70B at tp 1…8, 8,192 tokens) the law is within 4% (bf16)
and 6% (FP8) of the measured median; on GEMMs with one small dimension and two large ones it is pessimistic (0.55–0.84
of the measured rate: cuBLAS keeps ~0.6–0.7 of the peak down to 128-wide operands, where d/(d + d½) gives 0.2–0.4).
The law stays: adopting the measured plateau and d½ (or an arithmetic-intensity dimension) moved the one-GPU whole
steps measured on the same H100 from 4.6% to 4.1–7.1% MAE and every published multi-GPU table further off (fsdp2 H100
17.0 → 19.3–22.3%, the Megatron-LM 2021 table 6.5 → 9.2%: docs/accuracy.md "Known limits").
"""

import statistics
import sys
from pathlib import Path

import pytest

from commmodel.io.profiles import load_system
from commmodel.step.precision import linear_peak_key

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import gemm_shapes  # noqa: E402

H100 = load_system("dgx-h100")
ROWS = gemm_shapes.read_rows(gemm_shapes.FIXTURE) + gemm_shapes.read_rows(gemm_shapes.FIXTURE_BACKWARD)


def _ratios(family: str, dtype: str, impl: str = "mm") -> list[float]:
    """Model ÷ measured efficiency of one family's GEMMs above the kernel-latency floor."""
    out = []
    for row in ROWS:
        flops = 2.0 * int(row["groups"]) * int(row["m"]) * int(row["n"]) * int(row["k"])
        if row["family"] != family or row["dtype"] != dtype or row["impl"] != impl or flops < gemm_shapes.MIN_FLOPS:
            continue
        measured = float(row["tflops"]) * 1e12 / H100.gpu.peak_for(linear_peak_key(dtype))
        out.append(gemm_shapes.model_efficiency(H100, row) / measured)
    return out


def test_fixture_is_the_graph_timed_h100_run() -> None:
    header = [line for line in gemm_shapes.FIXTURE.read_text().splitlines() if line.startswith("#")]
    assert any("H100 80GB HBM3" in line for line in header)
    assert any("700.00 W" in line for line in header)
    assert {row["timing"] for row in ROWS} == {"graph"}
    assert len(ROWS) == 438 + 106


@pytest.mark.parametrize(("dtype", "low", "high"), [("bf16", 1.03, 1.05), ("fp8", 0.93, 0.95),
                                                     ("fp8-rowwise", 0.90, 0.92)])
def test_block_gemms_within_six_percent(dtype: str, low: float, high: float) -> None:
    """The 32 block GEMMs of Llama-3 8B and 70B at tp 1, 2, 4, 8: median model/measured 1.04 (bf16), 0.94 (FP8),
    0.91 (row-wise FP8, its kernel's measured ratio to tensor-wise applied, ``fp8_rowwise_gemm_ratio``: the law's
    FP8 bias, as tensor-wise; 0.97 before, the kernel's 7% and the law's 6% cancelling)."""
    ratios = _ratios("block", dtype)
    assert len(ratios) == 32
    assert low <= statistics.median(ratios) <= high


@pytest.mark.parametrize(("family", "impl"), [("block_dgrad", "mm-nn"), ("block_wgrad", "mm-tn")])
def test_backward_gemms_run_at_the_forward_rate(family: str, impl: str) -> None:
    """The step model prices the backward as twice the forward's FLOPs at the forward GEMM's efficiency: the 32 data
    gradients (dY · W) and weight gradients (dYᵀ · X, the 8,192 tokens the inner dimension) of the same blocks measure
    0.698 and 0.705 of the peak against the forward's 0.686, median model/measured 1.01 for both."""
    ratios = _ratios(family, "bf16", impl)
    assert len(ratios) == 32
    assert 0.99 <= statistics.median(ratios) <= 1.03


@pytest.mark.parametrize(("family", "impl", "low", "high"), [("qwen3-moe", "grouped_mm", 0.94, 0.98),
                                                               ("deepseek-v3", "grouped_mm", 0.95, 0.99),
                                                               ("qwen3-moe", "loop", 0.86, 0.90),
                                                               ("mixtral", "grouped_mm", 0.82, 0.86),
                                                               ("mixtral", "loop", 0.76, 0.80)])
def test_routed_expert_gemms(family: str, impl: str, low: float, high: float) -> None:
    """Routed experts, G of 1…32 local experts × 128…8,192 rows each: Qwen3-MoE's (1,536 wide) within 4% (grouped)
    and 12% (loop), DeepSeek-V3's (2,048 wide, h 7,168) within 3%; Mixtral's (14,336 wide) priced 16–22% slow, its few rows per expert the law's small dimension
    while the other two keep the GPU full (the same direction as the published Mixtral rows, −21% and −17%)."""
    assert low <= statistics.median(_ratios(family, "bf16", impl)) <= high


@pytest.mark.parametrize(("family", "dtype", "low", "high"), [("small_m", "bf16", 0.69, 0.73),
                                                                ("small_n", "fp8", 0.54, 0.58),
                                                                ("small_k", "fp8", 0.69, 0.73)])
def test_one_small_dimension_is_priced_slow(family: str, dtype: str, low: float, high: float) -> None:
    """The law's known bias, as docs/accuracy.md quotes it: one dimension of 128…4,096 with the others 4,096–8,192."""
    ratios = _ratios(family, dtype)
    assert len(ratios) == 10
    assert low <= statistics.median(ratios) <= high
    assert max(ratios) < 1.06


def test_rowwise_ratio_in_the_catalogue_is_the_fixtures() -> None:
    """gpus.yaml's ``fp8_rowwise_gemm_ratio`` for the H100 SXM is the fixture's median row-wise block rate over the
    tensor-wise one (0.564 / 0.605), and the step model's GEMM efficiency carries it for ``fp8-rowwise`` alone."""
    def median_tflops(dtype: str) -> float:
        return statistics.median(float(r["tflops"]) for r in ROWS if r["family"] == "block" and r["dtype"] == dtype)

    measured = median_tflops("fp8-rowwise") / median_tflops("fp8")
    assert H100.gpu.fp8_rowwise_gemm_ratio.value == pytest.approx(measured, abs=0.002)
    row = {"groups": 1, "m": 8192, "n": 4096, "k": 4096}
    tensorwise = gemm_shapes.model_efficiency(H100, {**row, "dtype": "fp8"})
    rowwise = gemm_shapes.model_efficiency(H100, {**row, "dtype": "fp8-rowwise"})
    assert rowwise / tensorwise == pytest.approx(H100.gpu.fp8_rowwise_gemm_ratio.value, rel=1e-12)


def test_rowwise_ratio_defaults_to_one_where_unmeasured() -> None:
    from commmodel.step.precision import recipe_gemm_ratio

    b200 = load_system("hgx-b200").gpu
    assert b200.fp8_rowwise_gemm_ratio is None
    assert recipe_gemm_ratio(b200, "fp8-rowwise") == 1.0
    assert recipe_gemm_ratio(H100.gpu, "fp8") == 1.0
    assert recipe_gemm_ratio(H100.gpu, "mxfp8") == 1.0
