"""The step model's GEMMs per training format against Transformer Engine's published GEMM benchmark (B300, H200 NVL).

    python benchmarks/te_gemm_recipes.py

Reads ``commmodel/data/te_gemm_recipes.yaml`` (NVIDIA/TransformerEngine @d0067d0da docs/examples/gemm_profiling:
one layer's 12 linear GEMMs of a hidden-4096 model at 15,872 tokens, BF16 / FP8 current and delayed scaling / MXFP8
/ NVFP4 on a B300, BF16 / FP8 on an H200 NVL, with the per-call quantisation ("autocast") and without it
("pre-quantized"), and on the B300 the four forward GEMMs one by one) and prices each figure on one GPU of the
setup's catalogue GPU with the step model's own pieces (:mod:`commmodel.validation.te_gemm`). No GPU is
needed. Target, as ``benchmarks/gemm_shapes.py``: each layer total (per format and mode) within ±15% of the
published time; the forward GEMMs' median |error| is printed beside it (no target: single calls of 0.2-1.4 ms).
Exit status 1 when a layer total misses.
"""

from __future__ import annotations

import statistics
import sys

from commmodel.io.profiles import compose_from_names
from commmodel.io.validation_data import read_te_gemm
from commmodel.validation.te_gemm import validate_te_gemm

TARGET_PCT = 15.0
"""Each layer total within ±15% (the band of benchmarks/gemm_shapes.py: the matmul time is the largest single term
of most steps, and the training targets allow 10% MAE)."""


def main() -> int:
    data = read_te_gemm()
    records = []
    for setup in data["setups"]:
        system = compose_from_names(setup["gpu"], 1, "pcie5", name=f"one {setup['gpu']}")
        records += validate_te_gemm(data, setup, system)
        print(f"{setup['id']}: {setup['gpu_reported']} (model: {setup['gpu']})")
    print(f"source: {data['source']}\n")
    print(f"{'setup':9s} {'scope':11s} {'mode':14s} {'format':11s} {'published ms':>12s} {'model ms':>9s} "
          f"{'error':>7s}")
    for r in records:
        print(f"{r['setup']:9s} {r['scope']:11s} {r['mode']:14s} {r['recipe']:11s} {r['published_ms']:12.3f} "
              f"{r['predicted_ms']:9.3f} {r['error_pct']:+6.1f}%")
    layers = [r for r in records if r["scope"] == "layer"]
    misses = [r for r in layers if abs(r["error_pct"]) > TARGET_PCT]
    fprop = [abs(r["error_pct"]) for r in records if r["scope"].startswith("fprop")]
    print(f"\nforward GEMMs one by one (autocast): median |error| {statistics.median(fprop):.1f}% over {len(fprop)} "
          f"(no target)")
    for key in dict.fromkeys((r["setup"], r["recipe"]) for r in layers):
        errors = ", ".join(f"{r['mode']} {r['error_pct']:+.1f}%" for r in layers if (r["setup"], r["recipe"]) == key)
        print(f"layer {key[0]:9s} {key[1]:11s} {errors}")
    verdict = "FAIL" if misses else "PASS"
    missed = "; missed: " + ", ".join(f"{r['setup']} {r['recipe']} {r['mode']} {r['error_pct']:+.1f}%"
                                      for r in misses) if misses else ""
    print(f"layer totals within ±{TARGET_PCT:.0f}%: {len(layers) - len(misses)} of {len(layers)} -> {verdict}{missed}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
