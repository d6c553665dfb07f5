"""The step model's GEMM rate per training format and its casts against Transformer Engine's published GEMM benchmark
on a B300 and an H200 NVL (commmodel/data/te_gemm_recipes.yaml: NVIDIA/TransformerEngine @d0067d0da
docs/examples/gemm_profiling/gemm_profiling.rst; benchmarks/te_gemm_recipes.py prints the table)."""

from __future__ import annotations

import pytest

from commmodel.errors import ProfileError
from commmodel.io.profiles import compose_from_names
from commmodel.io.validation_data import read_te_gemm
from commmodel.step.precision import NARROW_BYTES, TE_CASTS, quantisation_bytes
from commmodel.validation.te_gemm import call_cast_s, layer_calls, validate_te_gemm

DATA = read_te_gemm()
SETUPS = {setup["id"]: setup for setup in DATA["setups"]}
SYSTEMS = {name: compose_from_names(setup["gpu"], 1, "pcie5") for name, setup in SETUPS.items()}
B300 = SYSTEMS["b300"]
RECORDS = [r for name in SETUPS for r in validate_te_gemm(DATA, SETUPS[name], SYSTEMS[name])]
LAYER = {(r["mode"], r["recipe"]): r for r in RECORDS if r["scope"] == "layer" and r["setup"] == "b300"}
HOPPER = {(r["mode"], r["recipe"]): r for r in RECORDS if r["scope"] == "layer" and r["setup"] == "h200-nvl"}


@pytest.mark.parametrize("key", [k for k in LAYER if k[1] != "NVFP4"])
def test_a_layer_of_gemms_and_casts_is_priced_within_ten_percent(key) -> None:
    """BF16 12.758 ms, FP8 current 9.147, delayed 7.802, MXFP8 8.984 per layer with the casts; BF16 13.102, FP8
    current 6.812, MXFP8 7.161 without them ([TE-GEMM] "Per-layer total", B300): each within 10%."""
    assert abs(LAYER[key]["error_pct"]) <= 10.0, LAYER[key]


@pytest.mark.parametrize("key", list(HOPPER))
def test_hopper_fp8_layers_are_priced_within_ten_percent(key) -> None:
    """The H200 NVL (its datasheet's 600 W peaks, the SXM part's MAMF ratios: no NVL MAMF is published): BF16 32.014
    ms, FP8 current 20.285, delayed 18.978 with the casts; BF16 31.968, FP8 current 16.785 without ([TE-GEMM]
    "Worked Example: 5B Model on H200"): each within 10% (model −4.4%, +4.9%, +4.8%, −4.3%, +6.4%)."""
    assert abs(HOPPER[key]["error_pct"]) <= 10.0, HOPPER[key]


def test_the_model_orders_and_spaces_the_formats_as_the_benchmark() -> None:
    """The published speedups over BF16 with the casts: FP8 delayed 1.64x, MXFP8 1.42x, FP8 current 1.39x; the
    model's within 0.2 of each (1.46x, 1.41x, 1.32x: delayed scaling is the widest gap, its forward QKV call ran 29%
    faster than the model prices it), and the casts are what separates current from delayed scaling (the
    pre-quantized GEMMs are one kernel)."""
    bf16 = LAYER[("autocast", "BF16")]
    for name, published in (("FP8Delayed", 1.635), ("MXFP8", 1.420), ("FP8Current", 1.395)):
        speedup = bf16["predicted_ms"] / LAYER[("autocast", name)]["predicted_ms"]
        assert bf16["published_ms"] / LAYER[("autocast", name)]["published_ms"] == pytest.approx(published, abs=0.01)
        assert speedup == pytest.approx(published, abs=0.2)
    assert LAYER[("pre-quantized", "FP8Current")]["predicted_ms"] == pytest.approx(
        LAYER[("pre-quantized", "MXFP8")]["predicted_ms"], rel=1e-12)


def test_nvfp4_is_a_known_miss_the_model_is_too_fast() -> None:
    """NVFP4 (fp4 peak 12,600 TFLOP/s on B300, bf16's MAMF ratio standing in: no FP4 MAMF is published) is priced
    15-19% faster than the benchmark ran it, with and without its casts: a known miss (docs/accuracy.md). Fixing it
    should move these numbers; this test then needs its band changed with the note."""
    assert -20.0 < LAYER[("autocast", "NVFP4")]["error_pct"] < -15.0
    assert -18.0 < LAYER[("pre-quantized", "NVFP4")]["error_pct"] < -13.0


def test_a_layer_is_twelve_calls_of_the_benchmarks_shapes() -> None:
    """fprop M×K×N, dgrad M×N×K, wgrad K×M×N per linear: the layer's FLOPs are 3 × 2·M·h·(3h + h + 2f)."""
    calls = layer_calls(DATA["shape"])
    assert len(calls) == 12
    flops = sum(2.0 * m * k * n for _, m, k, n in calls)
    assert flops == pytest.approx(3 * 2.0 * 15872 * 4096 * (12288 + 4096 + 2 * 16384), rel=1e-12)


def test_a_calls_casts_are_the_training_casts_of_its_input_and_a_row_wise_weight() -> None:
    """MXFP8: the input row- and column-wise, 2 + 2(1 + 1/32) bytes per element (what training casts per X on
    Blackwell), the weight row-wise only, 2 + 1 + 1/32; per-tensor FP8 delayed: 3 bytes each, no second copy on
    Blackwell; 16-bit: nothing."""
    m, k, n = 15872, 4096, 4096
    bandwidth = B300.gpu.hbm_bw_bytes_per_s.value * 0.8
    mx = TE_CASTS["te-mxfp8"]
    assert mx.own_columnwise and not mx.amax_pass
    training_x = quantisation_bytes("te-mxfp8", 103).activation_forward
    assert training_x == pytest.approx(2 + 2 * NARROW_BYTES["mxfp8"])
    expected = (training_x * m * k + (2 + NARROW_BYTES["mxfp8"]) * k * n) / bandwidth + 2 * 4e-6
    assert call_cast_s(B300, "te-mxfp8", m, k, n) == pytest.approx(expected, rel=1e-12)
    assert call_cast_s(B300, "te-fp8-delayed", m, k, n) == pytest.approx(3.0 * (m * k + k * n) / bandwidth + 8e-6)
    assert call_cast_s(B300, None, m, k, n) == 0.0


def test_a_file_without_its_tables_is_one_clear_error(tmp_path) -> None:
    bad = tmp_path / "te.yaml"
    bad.write_text("recipes: {BF16: {dtype: bf16}}\nsetups: []\n")
    with pytest.raises(ProfileError, match="lacks shape"):
        read_te_gemm(bad)
    bad.write_text("shape: {}\nrecipes: {BF16: {dtype: bf16}}\nsetups: [{id: x, per_layer_ms: {}}]\n")
    with pytest.raises(ProfileError, match="setup 'x' lacks gpu"):
        read_te_gemm(bad)
    bad.write_text("shape: {}\nrecipes: {BF16: {dtype: bf16}}\nsetups: [{id: x, gpu: b300-sxm-288gb, per_layer_ms: "
                   "{autocast: {FP4: 1}}}]\n")
    with pytest.raises(ProfileError, match="FP4, which 'recipes' does not map"):
        read_te_gemm(bad)
