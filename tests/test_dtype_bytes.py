"""One table of element sizes (commmodel/dtype_bytes.py); the model's, the optimizer states', the gradient wire's, the
quantised copies' and calibration's tables are read from it (IEEE 754, bfloat16, OCP FP8)."""

from __future__ import annotations

import pytest

from commmodel.calibrate.dtypes import ELEMENT_BYTES
from commmodel.dtype_bytes import STORAGE_BYTES
from commmodel.step.options import GRAD_BYTES_PER_ELEMENT
from commmodel.step.precision import NARROW_BYTES
from commmodel.workload.model import DTYPE_BYTES
from commmodel.workload.optimizer_states import STATE_DTYPE_BYTES


def test_every_dtype_table_reads_the_one_storage_table():
    assert STORAGE_BYTES == {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
    # training in FP8/MXFP8/NVFP4 keeps weights, activations and messages in bf16 (only the GEMM inputs are cast)
    assert DTYPE_BYTES == {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2, "fp8-current": 2, "fp8-rowwise": 2,
                           "fp8-blockwise": 2, "mxfp8": 2, "nvfp4": 2}
    assert STATE_DTYPE_BYTES == {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
    assert GRAD_BYTES_PER_ELEMENT == {"none": 4, "bf16": 2, "fp16": 2, "int8": 1}
    assert ELEMENT_BYTES == {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "float8_e4m3fn": 1}
    assert all(isinstance(size, int) for size in ELEMENT_BYTES.values())  # element counts divide by them
    assert NARROW_BYTES["fp8"] == 1 and NARROW_BYTES["fp8-blockwise"] == pytest.approx(1 + 4 / 128)
    assert NARROW_BYTES["mxfp8"] == pytest.approx(1 + 1 / 32)
