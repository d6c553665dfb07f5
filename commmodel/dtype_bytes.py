"""Bytes per stored element of each number format: the one table every other dtype table derives from (the model's
training dtypes, optimizer states, gradients on the wire, calibration's torch dtypes)."""

STORAGE_BYTES: dict[str, float] = {"fp64": 8.0, "fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}
"""IEEE 754 binary64 / binary32 / binary16, bfloat16 (16 bits: Intel BF16 white paper, 2018), OCP 8-bit floating point
(E4M3 and E5M2, OCP OFP8 specification v1.0, 2023) and int8. Scaled formats add their scales where they are priced
(commmodel.step.precision ``NARROW_BYTES``)."""
