"""The step model's GEMM rate per training format and its cast pricing against Transformer Engine's own GEMM
benchmark (``commmodel/data/te_gemm_recipes.yaml``: a B300 in BF16, FP8 current and delayed scaling, MXFP8 and NVFP4;
an H200 NVL in BF16 and FP8).

One benchmark call is priced with the step model's own pieces: the GEMM by
:func:`commmodel.step.compute.gemm_time_s` at the format's dtype; in autocast mode, the casts of that call's input
(row-wise, plus its own column-wise copy where the recipe keeps one, :attr:`~commmodel.step.precision.TeCast.
own_columnwise`) and weight (row-wise only: the benchmark's input needs no gradient) by
:func:`commmodel.step.precision.cast_pass_bytes` at the HBM rate the step model prices memory-bound work at
(:data:`~commmodel.step.compute.HBM_EFFICIENCY`), plus :data:`~commmodel.step.compute.KERNEL_OVERHEAD_S` per cast
kernel (two where an amax pass comes first). Pre-quantized calls are the GEMM alone. Pure: the caller reads the file.
"""

from typing import Any

import numpy as np

from commmodel.hardware.models import System
from commmodel.step.compute import HBM_EFFICIENCY, KERNEL_OVERHEAD_S, gemm_time_s
from commmodel.step.precision import NARROW_BYTES, TE_CASTS, cast_pass_bytes
from commmodel.workload.flops import Gemm

MODES = ("autocast", "pre-quantized")
"""The benchmark's two timing modes (benchmarks/gemm/benchmark_gemm.py ``--pre-quantize``)."""


def call_cast_s(system: System, recipe: str | None, m: int, k: int, n: int) -> float:
    """Seconds of the casts in one autocast ``te.Linear(k, n)`` forward on an m × k input: 0 for 16-bit."""
    if recipe is None:
        return 0.0
    cast = TE_CASTS[recipe]
    narrow = NARROW_BYTES[cast.narrow]
    input_bytes = cast_pass_bytes(narrow, 2 if cast.own_columnwise else 1, cast.amax_pass) * m * k
    weight_bytes = cast_pass_bytes(narrow, 1, cast.amax_pass) * k * n
    kernels = 2 * (2 if cast.amax_pass else 1)
    return (input_bytes + weight_bytes) / (system.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY) \
        + kernels * KERNEL_OVERHEAD_S


def call_s(system: System, dtype: str, recipe: str | None, mode: str, m: int, k: int, n: int) -> float:
    """Seconds of one benchmark call: an m × k by k × n GEMM at ``dtype``, with its casts in autocast mode."""
    gemm = Gemm("fc1", np.array([2.0 * m * k * n]), np.array([m]), np.array([n]), np.array([k]), False)
    seconds = float(gemm_time_s(system, gemm, dtype)[0])
    return seconds + (call_cast_s(system, recipe, m, k, n) if mode == "autocast" else 0.0)


def layer_calls(shape: dict[str, int]) -> list[tuple[str, int, int, int]]:
    """(gemm, M, K, N) of the 12 calls of one layer: fprop M×K×N, dgrad M×N×K, wgrad K×M×N of QKV, attention out,
    MLP up and MLP down (the benchmark's own derivation from the model config)."""
    tokens, hidden = shape["tokens"], shape["hidden"]
    forward = [("qkv", hidden, shape["qkv_out"]), ("proj", hidden, hidden), ("fc1", hidden, shape["ffn"]),
               ("fc2", shape["ffn"], hidden)]
    calls = []
    for name, k, n in forward:
        calls += [(name, tokens, k, n), (name, tokens, n, k), (name, k, tokens, n)]
    return calls


def validate_te_gemm(data: dict[str, Any], setup: dict[str, Any], system: System) -> list[dict[str, Any]]:
    """One record per published figure of ``setup`` (one of ``data["setups"]``, priced on ``system``, one GPU of
    its ``gpu``): setup, scope ("layer" or "fprop <gemm>"), mode, recipe (the benchmark's name), published_ms,
    predicted_ms, error_pct."""
    records = []

    def record(scope: str, mode: str, name: str, published: float, predicted_s: float) -> None:
        records.append({"setup": setup["id"], "scope": scope, "mode": mode, "recipe": name,
                        "published_ms": float(published), "predicted_ms": predicted_s * 1e3,
                        "error_pct": 100.0 * (predicted_s * 1e3 / published - 1)})

    for mode in MODES:
        for name, published in setup["per_layer_ms"].get(mode, {}).items():
            spec = data["recipes"][name]
            total = sum(call_s(system, spec["dtype"], spec.get("recipe"), mode, m, k, n)
                        for _, m, k, n in layer_calls(data["shape"]))
            record("layer", mode, name, published, total)
    for row in setup.get("fprop_ms", []):
        for name, published in row["ms"].items():
            spec = data["recipes"][name]
            record(f"fprop {row['gemm']}", "autocast", name, published,
                   call_s(system, spec["dtype"], spec.get("recipe"), "autocast", row["m"], row["k"], row["n"]))
    return records
