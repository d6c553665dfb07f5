"""Training precision: which peak each part of the step runs at, and what stays in 16 bits (issue 12).

Low-precision training formats scale only the linear layers' GEMMs (QKV, attention projection, FC1, FC2):

* ``fp8``: per-tensor scaled FP8 (Transformer Engine ``DelayedScaling`` / torchao "tensorwise"), Ada/Hopper and
  later (compute capability ≥ 8.9; NVIDIA Hopper architecture whitepaper, FP8 Transformer Engine) at the
  GPU's dense FP8 peak.
* ``mxfp8``: OCP Microscaling FP8 (1×32 blocks, e8m0 scales), Blackwell (sm_100+) block-scaled tensor cores,
  at the dense FP8 peak (NVIDIA Blackwell architecture technical brief: MXFP8 runs on the FP8 tensor-core
  path; torchtitan docs/mxfp8.md).
* ``nvfp4``: NVIDIA FP4 with 1×16 FP8-scaled blocks, Blackwell (sm_100+), at the dense FP4 peak (Blackwell
  technical brief; Transformer Engine NVFP4 recipe).

What stays in 16 bits (Transformer Engine "Using FP8 with Transformer Engine"; torchtitan docs/float8.md):
the attention core (DotProductAttention without fp8_dpa), norms and elementwise work, embeddings, the output
layer and the loss, the optimizer with fp32 master weights. Casting each linear input to the low-precision
format (and taking its amax/scales) reads the 16-bit tensor and writes the narrow one: extra HBM traffic
priced by :func:`quantisation_bytes_per_element`. Parameters travel in 16 bits unless the stack gathers
them in FP8 (``fp8_param_allgather``). MFU is always reported against the dense 16-bit peak, as the published
tables do; the low-precision-peak MFU is a separate, labelled column.
"""

from __future__ import annotations

from commmodel.errors import WorkloadError

LOW_PRECISION_PEAK: dict[str, str] = {"fp8": "fp8", "mxfp8": "fp8", "nvfp4": "fp4"}
"""Training dtype -> the GPU peak (gpus.yaml key) its linear GEMMs run at."""

MIN_SM: dict[str, int] = {"fp8": 89, "mxfp8": 100, "nvfp4": 100}
"""Smallest compute capability with tensor cores for the format (FP8: Ada sm_89 / Hopper sm_90; MX and NVFP4
block scaling: Blackwell sm_100)."""

NARROW_BYTES: dict[str, float] = {"fp8": 1.0, "mxfp8": 1.0 + 1.0 / 32, "nvfp4": 0.5 + 1.0 / 16}
"""Bytes per element of the quantised copy, scales included (one e8m0 byte per 32 for MXFP8, one e4m3 byte per
16 for NVFP4; OCP Microscaling Formats spec v1.0; NVIDIA NVFP4 blog)."""


def is_low_precision(dtype: str) -> bool:
    """Whether ``dtype`` scales the linear GEMMs below 16 bits."""
    return dtype in LOW_PRECISION_PEAK


def linear_peak_key(dtype: str) -> str:
    """The gpus.yaml peak key of the linear GEMMs under ``dtype``."""
    return LOW_PRECISION_PEAK.get(dtype, dtype)


def high_precision_key(dtype: str) -> str:
    """The peak key of what stays high precision (attention core, output layer): bf16 under a low-precision dtype."""
    return "bf16" if is_low_precision(dtype) else dtype


def check_precision(gpu: object, dtype: str) -> None:
    """One-line error when ``gpu`` cannot train in ``dtype`` (no tensor cores for it, or no sourced peak)."""
    if not is_low_precision(dtype):
        return
    sm = getattr(gpu, "sm_version")()
    name = getattr(gpu, "name", "gpu")
    if sm is not None and sm < MIN_SM[dtype]:
        raise WorkloadError(f"{dtype} needs compute capability ≥ {MIN_SM[dtype] / 10:.1f} (sm_{MIN_SM[dtype]}); "
                            f"{name} is sm_{sm}; use --dtype bf16" + (" or fp8" if sm >= 89 else ""))
    key = linear_peak_key(dtype)
    if key not in getattr(gpu, "peak_flops_per_s"):
        raise WorkloadError(f"{name} has no {key} peak in hardware_profiles/gpus.yaml, which {dtype} needs; "
                            f"use --dtype bf16 or add a sourced {key} peak")


def quantisation_bytes_per_element(dtype: str) -> float:
    """HBM bytes of casting one 16-bit element to ``dtype``: read 2, write the narrow copy (0 for 16-bit)."""
    return 2.0 + NARROW_BYTES[dtype] if is_low_precision(dtype) else 0.0


def param_wire_bytes(dtype_bytes: float, dtype: str, fp8_param_allgather: bool) -> float:
    """Bytes per parameter of a parameter all-gather: 16-bit weights under a low-precision dtype unless the
    stack gathers FP8 weights; the training dtype's bytes otherwise."""
    if is_low_precision(dtype):
        return 1.0 if fp8_param_allgather else 2.0
    return dtype_bytes
