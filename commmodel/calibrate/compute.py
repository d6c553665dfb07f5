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

``--dtype fp8`` times ``torch._scaled_mm`` on float8_e4m3fn operands (A row-major, B column-major, unit scales, as
stas00/ml-engineering's mamf-finder.py @744d01e builds them) with a bf16 output, the GEMM a Transformer Engine FP8
linear runs; its fit writes ``matmul_efficiency_fp8`` (MAMF over the dense FP8 peak), the other dtypes
``matmul_efficiency``. FP8 GEMMs need a CUDA GPU of compute capability 8.9 or later (Ada, Hopper, Blackwell).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from commmodel.calibrate.dtypes import ELEMENT_BYTES, GEMM_DTYPES
from commmodel.errors import CalibrationError
from commmodel.hardware.models import GPU
from commmodel.step.precision import MIN_SM

_ELEMENT_BYTES = {word: ELEMENT_BYTES[name] for word, name in GEMM_DTYPES.items()}
"""Bytes per operand element of each ``--dtype`` (:data:`.dtypes.ELEMENT_BYTES` of its torch dtype)."""
_OUTPUT_BYTES = {"fp8": 2}
"""Bytes per product element where the product is not in the operand dtype: FP8 GEMMs write bf16."""
FP8_FROM_CAPABILITY = divmod(MIN_SM["fp8"], 10)
"""The first CUDA compute capability with FP8 tensor cores as torch reports it, (8, 9): the step model's
``precision.MIN_SM["fp8"]`` (sm_89, Ada; NVIDIA's CUDA GPUs table), below which ``torch._scaled_mm`` refuses float8
operands."""
FP8_DIM_MULTIPLE = 16
"""``torch._scaled_mm`` takes FP8 operands whose inner (k) and output (n) dimensions are multiples of 16: it raises
"Expected trailing dimension of mat1 to be divisible by 16" otherwise (pytorch/ao @36027d8
test/float8/test_base.py), and torchao converts only linears whose weight dimensions are divisible by 16
(docs/source/workflows/training.md)."""
EFFICIENCY_FIELD = {"fp8": "matmul_efficiency_fp8"}
"""The GPU field a measured dtype's MAMF/peak is written to (``matmul_efficiency`` for the dtypes not listed)."""


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
                warmup: int = 3, iters: int = 10,
                start: Callable[[dict[str, Any]], Callable[[dict[str, Any]], None]] | None = None
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Time each GEMM; returns COMPUTE_COLUMNS rows and an environment block. ``start`` (given the environment
    block before the first GEMM is timed) returns where each row goes the moment it is measured — a file written
    row by row keeps what was measured when the run is interrupted."""
    if dtype not in GEMM_DTYPES:
        raise CalibrationError(f"--dtype {dtype!r} unknown; use one of {', '.join(GEMM_DTYPES)}")
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise CalibrationError("--device cuda but torch sees no CUDA device; use --device cpu or auto")
    dev = torch.device(device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    check_fp8_device(dtype, dev.type, shapes, torch.cuda.get_device_capability(dev) if dev.type == "cuda" else None,
                     name)
    check_fits_memory(shapes, dtype, dev.type, _free_memory_bytes(dev))
    env = {"tool": "commmodel calibrate compute", "torch": torch.__version__, "device": name, "dtype": dtype,
           "cuda": torch.version.cuda or "", "warmup": warmup, "iters": iters}
    emit = start(env) if start is not None else None
    rows = []
    for kind, m, k, n in shapes:
        rows.append(_timed_row(kind, m, k, n, dtype, dev, name, warmup, iters))
        if emit is not None:
            emit(rows[-1])
    return rows, env


def _timed_row(kind: str, m: int, k: int, n: int, dtype: str, dev: Any, name: str, warmup: int,
               iters: int) -> dict[str, Any]:
    """One GEMM timed: its COMPUTE_COLUMNS row (median, p10, p90 of ``iters`` runs after ``warmup``)."""
    gemm = _gemm(m, k, n, dtype, dev)
    for _ in range(warmup):
        gemm()
    times = [_time_once(gemm, dev) for _ in range(iters)]
    median = float(np.median(times))
    return {"kind": kind, "m": m, "n": n, "k": k, "dtype": dtype, "device": name,
            "time_s_median": median, "time_s_p10": float(np.percentile(times, 10)),
            "time_s_p90": float(np.percentile(times, 90)),
            "tflops_median": 2.0 * m * n * k / median / 1e12 if median > 0 else None,
            "iters": iters, "source": "commmodel calibrate compute"}


def check_fp8_device(dtype: str, device_type: str, shapes: list[tuple[str, int, int, int]],
                     capability: tuple[int, int] | None = None, device_name: str = "") -> None:
    """Refuse ``--dtype fp8`` in one line, before any tensor is made, on a device without FP8 tensor cores
    (the host; a GPU below :data:`FP8_FROM_CAPABILITY`) or for a shape ``torch._scaled_mm`` does not take (k and n
    multiples of :data:`FP8_DIM_MULTIPLE`)."""
    if dtype != "fp8":
        return
    if device_type != "cuda":
        raise CalibrationError("--dtype fp8 times torch._scaled_mm, which needs a CUDA GPU of compute capability 8.9 "
                               "or later (Ada, Hopper, Blackwell); use --dtype bf16 or fp32 on this device")
    if capability is not None and capability < FP8_FROM_CAPABILITY:
        raise CalibrationError(f"--dtype fp8: {device_name or 'this GPU'} is sm_{capability[0]}{capability[1]}, "
                               f"without FP8 tensor cores (sm_89 and later); use --dtype bf16")
    for kind, m, k, n in shapes:
        if k % FP8_DIM_MULTIPLE or n % FP8_DIM_MULTIPLE:
            raise CalibrationError(f"--dtype fp8: the {kind} GEMM is {m} x {k} · {k} x {n}, and torch._scaled_mm "
                                   f"takes inner and output dimensions that are multiples of {FP8_DIM_MULTIPLE}; "
                                   f"pick --hidden, --ffn and --tp so that they are")


def _gemm(m: int, k: int, n: int, dtype: str, dev: Any) -> Any:
    """A callable running one (m × k)·(k × n) GEMM of ``dtype`` on ``dev``: torch.matmul, or for fp8
    torch._scaled_mm with A row-major, B column-major and unit scales into a bf16 product."""
    import torch

    torch_dtype = getattr(torch, GEMM_DTYPES[dtype])
    if dtype != "fp8":
        a = torch.randn(m, k, dtype=torch_dtype, device=dev)
        b = torch.randn(k, n, dtype=torch_dtype, device=dev)
        return lambda: torch.matmul(a, b)
    a = torch.randn(m, k, device=dev).to(torch_dtype)
    b = torch.randn(n, k, device=dev).to(torch_dtype).t()
    scale = torch.ones((), dtype=torch.float32, device=dev)
    return lambda: torch._scaled_mm(a, b, scale, scale, out_dtype=torch.bfloat16)


def _time_once(gemm: Any, dev: Any) -> float:
    """Seconds of one call: CUDA events on a GPU, the wall clock on the host."""
    if dev.type != "cuda":
        t0 = time.perf_counter()
        gemm()
        return time.perf_counter() - t0
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    gemm()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3


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


GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
"""Device files a GPU driver creates: NVIDIA's control and first GPU node, AMD ROCm's kernel fusion driver, WSL's
GPU paravirtualisation. Where none exists no CUDA/ROCm device can be opened, so ``--device cuda`` is refused before
torch's ~1 s import."""


def check_gpu_present(device: str) -> None:
    """One line for ``--device cuda`` on a host without a GPU driver's device files (:data:`GPU_DEVICE_NODES`)."""
    import os

    if device == "cuda" and not any(os.path.exists(node) for node in GPU_DEVICE_NODES):
        raise CalibrationError("--device cuda but this host has no GPU device (no /dev/nvidia*, /dev/kfd or /dev/dxg); "
                               "use --device cpu or auto")


def check_fits_memory(shapes: list[tuple[str, int, int, int]], dtype: str, device: str, free_bytes: int) -> None:
    """Refuse, before allocating, a GEMM whose A, B (m·k + k·n elements of ``dtype``) and product (m·n) exceed
    ``free_bytes`` on ``device``: an allocator error or swapping, never a timing, would follow."""
    if dtype not in _ELEMENT_BYTES:
        raise CalibrationError(f"--dtype {dtype!r} unknown; use one of {', '.join(_ELEMENT_BYTES)}")
    for kind, m, k, n in shapes:
        need = (m * k + k * n) * _ELEMENT_BYTES[dtype] + m * n * _OUTPUT_BYTES.get(dtype, _ELEMENT_BYTES[dtype])
        if need > free_bytes:
            raise CalibrationError(
                f"the {kind} GEMM ({m} x {k} · {k} x {n}) needs {need / 1e9:.3g} GB but {device} has "
                f"{free_bytes / 1e9:.3g} GB free; lower --hidden, --ffn, --seq-len or --micro-batch, or raise --tp")


def efficiency_field(rows: list[dict[str, Any]]) -> str:
    """The GPU field the rows' dtype is written to (:data:`EFFICIENCY_FIELD`)."""
    return EFFICIENCY_FIELD.get(str(rows[0].get("dtype")), "matmul_efficiency") if rows else "matmul_efficiency"


def matmul_efficiency(rows: list[dict[str, Any]], gpu: GPU) -> tuple[float, str]:
    """Best measured FLOP/s over the GPU's dense peak for that dtype, and a one-line detail."""
    measured = [r for r in rows if r.get("tflops_median")]
    if not measured:
        raise CalibrationError("the compute CSV has no timed matmul rows; run `commmodel calibrate compute` first")
    dtypes = {r["dtype"] for r in measured}
    if len(dtypes) != 1:
        raise CalibrationError(f"the compute CSV mixes dtypes {sorted(dtypes)}; measure one dtype per file")
    dtype = dtypes.pop()
    _check_device_matches(measured, gpu, dtype)
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


def _check_device_matches(measured: list[dict[str, Any]], gpu: GPU, dtype: str) -> None:
    """Refuse (one line) a compute CSV that cannot describe ``gpu``: CPU timings against a GPU profile or GPU timings
    against a CPU rank, and, on a GPU, an fp32 GEMM rate, which is not the tensor-core fraction the step model
    applies to 16-bit GEMMs (``matmul_efficiency``)."""
    from commmodel.step.precision import SIXTEEN_BIT, has_16bit_peak

    on_cpu = str(measured[0].get("device") or "").lower() == "cpu"
    is_gpu = has_16bit_peak(gpu)
    if on_cpu and is_gpu:
        raise CalibrationError(f"the compute CSV was measured on the CPU, and {gpu.name} is a GPU: run "
                               f"`commmodel calibrate compute` on that GPU, or fit a CPU run against --base cpu-host")
    if not on_cpu and not is_gpu:
        raise CalibrationError(f"the compute CSV was measured on {measured[0].get('device')}, and {gpu.name} is a CPU "
                               f"rank: pick the GPU's system as --base")
    if is_gpu and dtype not in EFFICIENCY_FIELD and dtype not in SIXTEEN_BIT:
        raise CalibrationError(f"the compute CSV times {dtype} GEMMs; {gpu.name}'s matmul efficiency is the 16-bit "
                               f"tensor-core fraction: measure with --dtype bf16 (or fp8)")
