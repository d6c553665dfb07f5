"""Matmul micro-benchmark: the GEMMs a layout runs, their TFLOP/s, and the GPU's matmul efficiency.

Shapes of one transformer layer under tensor parallelism ``tp`` (Megatron-LM column/row split,
Shoeybi et al. 2019), with T = seq_len × micro_batch token rows, each GEMM (m × k) · (k × n):

- QKV projection          T × h        · h × 3h/tp
- attention output        T × h/tp     · h/tp × h
- MLP up (ffn = 4h)       T × h        · h × ffn/tp
- MLP down                T × ffn/tp   · ffn/tp × h

FLOPs of one GEMM = 2·m·n·k. The fitted ``matmul_efficiency`` is the best achieved FLOP/s over
the GPU's dense peak for the measured dtype (MAMF/peak, the field's definition); the median is
reported next to it. The benchmark runs on whatever device torch sees: CPU in the test suite
(fp32 by default there), a GPU where one is present (bf16 by default).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from commmodel.errors import CalibrationError
from commmodel.hardware.models import GPU

_TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
"""Bytes per element of each ``--dtype`` (IEEE binary32/binary16, bfloat16)."""


def layout_shapes(hidden: int, tp: int = 1, seq_len: int = 2048, micro_batch: int = 1,
                  ffn: int | None = None) -> list[tuple[str, int, int, int]]:
    """(name, m, k, n) of the four per-layer GEMMs of a tensor-parallel transformer layer."""
    ffn = ffn or 4 * hidden
    checks = (("hidden", hidden), ("tp", tp), ("seq_len", seq_len), ("micro_batch", micro_batch), ("ffn", ffn))
    for field, value in checks:
        if value < 1:
            raise CalibrationError(f"--{field.replace('_', '-')} {value} must be ≥ 1")
    if hidden % tp or ffn % tp:
        raise CalibrationError(f"--tp {tp} must divide --hidden {hidden} and the ffn size {ffn}")
    tokens = seq_len * micro_batch
    return [
        ("qkv", tokens, hidden, 3 * hidden // tp),
        ("attn_out", tokens, hidden // tp, hidden),
        ("mlp_up", tokens, hidden, ffn // tp),
        ("mlp_down", tokens, ffn // tp, hidden),
    ]


def run_matmuls(shapes: list[tuple[str, int, int, int]], dtype: str, device: str = "auto",
                warmup: int = 3, iters: int = 10) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Time each GEMM; returns COMPUTE_COLUMNS rows and an environment block."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise CalibrationError("--device cuda but torch sees no CUDA device; use --device cpu or auto")
    if dtype not in _TORCH_DTYPES:
        raise CalibrationError(f"--dtype {dtype!r} unknown; use one of {', '.join(_TORCH_DTYPES)}")
    torch_dtype = getattr(torch, _TORCH_DTYPES[dtype])
    dev = torch.device(device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    check_fits_memory(shapes, dtype, dev.type, _free_memory_bytes(dev))
    rows = []
    for kind, m, k, n in shapes:
        a = torch.randn(m, k, dtype=torch_dtype, device=dev)
        b = torch.randn(k, n, dtype=torch_dtype, device=dev)
        for _ in range(warmup):
            torch.matmul(a, b)
        times = []
        for _ in range(iters):
            if dev.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.matmul(a, b)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e-3)
            else:
                t0 = time.perf_counter()
                torch.matmul(a, b)
                times.append(time.perf_counter() - t0)
        median = float(np.median(times))
        rows.append({"kind": kind, "m": m, "n": n, "k": k, "dtype": dtype, "device": name,
                     "time_s_median": median, "time_s_p10": float(np.percentile(times, 10)),
                     "time_s_p90": float(np.percentile(times, 90)),
                     "tflops_median": 2.0 * m * n * k / median / 1e12 if median > 0 else None,
                     "iters": iters, "source": "commmodel calibrate compute"})
    env = {"tool": "commmodel calibrate compute", "torch": torch.__version__, "device": name, "dtype": dtype,
           "cuda": torch.version.cuda or "", "warmup": warmup, "iters": iters}
    return rows, env


def host_free_bytes() -> int:
    """Bytes of host memory available now (``SC_AVPHYS_PAGES``; physical memory where the platform lacks it)."""
    import os

    pages = os.sysconf("SC_AVPHYS_PAGES") if "SC_AVPHYS_PAGES" in os.sysconf_names else os.sysconf("SC_PHYS_PAGES")
    return int(pages * os.sysconf("SC_PAGE_SIZE"))


def _free_memory_bytes(dev: Any) -> int:
    """Bytes free for new tensors on ``dev``: the CUDA allocator's free memory, or the host's."""
    if dev.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(dev)[0])
    return host_free_bytes()


def check_fits_memory(shapes: list[tuple[str, int, int, int]], dtype: str, device: str, free_bytes: int) -> None:
    """Refuse, before allocating, a GEMM whose A, B and product (m·k + k·n + m·n elements of ``dtype``) exceed
    ``free_bytes`` on ``device``: an allocator error or swapping, never a timing, would follow."""
    if dtype not in _ELEMENT_BYTES:
        raise CalibrationError(f"--dtype {dtype!r} unknown; use one of {', '.join(_ELEMENT_BYTES)}")
    for kind, m, k, n in shapes:
        need = (m * k + k * n + m * n) * _ELEMENT_BYTES[dtype]
        if need > free_bytes:
            raise CalibrationError(
                f"the {kind} GEMM ({m} x {k} · {k} x {n}) needs {need / 1e9:.3g} GB but {device} has "
                f"{free_bytes / 1e9:.3g} GB free; lower --hidden, --ffn, --seq-len or --micro-batch, or raise --tp")


def matmul_efficiency(rows: list[dict[str, Any]], gpu: GPU) -> tuple[float, str]:
    """Best measured FLOP/s over the GPU's dense peak for that dtype, and a one-line detail."""
    measured = [r for r in rows if r.get("tflops_median")]
    if not measured:
        raise CalibrationError("the compute CSV has no timed matmul rows; run `commmodel calibrate compute` first")
    dtypes = {r["dtype"] for r in measured}
    if len(dtypes) != 1:
        raise CalibrationError(f"the compute CSV mixes dtypes {sorted(dtypes)}; measure one dtype per file")
    dtype = dtypes.pop()
    peak = gpu.peak_for(dtype)
    flops = np.array([r["tflops_median"] for r in measured]) * 1e12
    best = float(flops.max())
    efficiency = best / peak
    if efficiency > 1.5:
        raise CalibrationError(
            f"measured {best / 1e12:.4g} TFLOP/s {dtype} exceeds 1.5x the {gpu.name} peak ({peak / 1e12:.4g} TFLOP/s); "
            f"was it measured on another device? pick the matching --base"
        )
    detail = (f"best {best / 1e12:.4g} / median {float(np.median(flops)) / 1e12:.4g} TFLOP/s {dtype} over "
              f"{len(measured)} GEMMs on {measured[0].get('device') or 'the device'}, peak {peak / 1e12:.4g}")
    return efficiency, detail
