"""Element types in calibration, one table each (the owner; bench, compute, groups and the calibrate command import
them): what ``calibrate run`` measures, the spellings measurement files use, and what ``calibrate compute`` times."""

from commmodel.dtype_bytes import STORAGE_BYTES

ELEMENT_BYTES: dict[str, int] = {torch_name: int(STORAGE_BYTES[word]) for torch_name, word in (
    ("float32", "fp32"), ("float16", "fp16"), ("bfloat16", "bf16"), ("float64", "fp64"), ("float8_e4m3fn", "fp8"))}
"""Bytes per element of each torch dtype name (IEEE 754 binary32 / binary16 / binary64, bfloat16, OCP FP8 E4M3)."""

BENCH_DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
"""The ``calibrate run --dtype`` choices: the element types every backend's all-reduce sums natively (torch names)."""

DTYPE_NAMES: dict[str, str] = {"float": "float32", "fp32": "float32", "float32": "float32", "half": "float16",
                               "fp16": "float16", "float16": "float16", "bf16": "bfloat16", "bfloat16": "bfloat16",
                               "double": "float64", "float64": "float64"}
"""The element type names nccl-tests (float, half, bfloat16), ``calibrate run`` (torch's float32, float16) and the
model's dtype words (fp32, bf16) write, to one spelling each (torch's)."""

GEMM_DTYPES: dict[str, str] = {**{word: DTYPE_NAMES[word] for word in ("fp32", "fp16", "bf16")},
                               "fp8": "float8_e4m3fn"}
"""``calibrate compute --dtype`` word -> the torch dtype its GEMM operands use (FP8: E4M3, the forward format)."""

__all__ = ["BENCH_DTYPES", "DTYPE_NAMES", "ELEMENT_BYTES", "GEMM_DTYPES"]
