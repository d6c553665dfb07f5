"""Fused (FlashAttention) attention core: causal block skipping and a kernel efficiency per GPU architecture.

With ``StepOptions.flash_attention`` on, the attention core (QKᵀ, softmax, PV) is one fused kernel
rather than two batched GEMMs with the s×s scores in HBM (Dao et al. 2022; Dao 2023, FlashAttention-2;
Shah et al. 2024, FlashAttention-3). Two things change its time:

* **Causal skip.** The kernel tiles queries and keys in blocks of ``FLASH_BLOCK_TOKENS`` and skips the
  blocks above the causal diagonal: of n² tiles (n = s/B) it computes n(n + 1)/2, i.e. a fraction
  (1 + B/s)/2 of the full square — 0.53 at 2,048 tokens, 0.5005 at 131,072.
* **Rate.** The FlashAttention papers report forward + backward throughput on the causal-halved count
  (their benchmark: 4·b·s²·a·d / 2 forward, 2.5 × that backward because the backward recomputes
  the scores, 3.5 × in all). ``ATTENTION_FWD_BWD_EFFICIENCY`` is that published rate over the
  GPU's dense peak, per GPU architecture (compute capability). Forward + backward of one block's core therefore takes
  3.5 · F_causal / (eff · peak), which this model splits as forward = 7/6 · F_causal / (eff · peak)
  (the step model makes backward = 2 × forward).

FLOPs *counted* are unchanged: model FLOPs (MFU) and hardware FLOPs (HFU) keep the published
convention of the full s×s square without causal halving (Narayanan et al. 2021 §5.1; Korthikanti et al.
2022 App. A; MosaicML's 6N + 12·l·h·s; Llama 3 Table 4 MFU). Only the time uses the skipped blocks.
All presets are decoder-only (causal) language models.
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

from commmodel.hardware.models import System
from commmodel.step.precision import high_precision_key
from commmodel.workload.flops import attention_core_flops
from commmodel.workload.model import TransformerModel

FLASH_BLOCK_TOKENS = 128.0
"""Query/key tile edge of the FlashAttention-2 forward kernel for head dim 128 (Br = Bc = 128;
Dao 2023 §3.1 and the flash-attn ``kernel_traits`` for hdim 128 on sm80/sm90)."""

FLASH_FWD_BWD_FLOPS_PER_FORWARD = 3.5
"""Forward + backward FLOPs of a FlashAttention core over its forward FLOPs: the backward does 5
matmuls of the forward's 2 (it recomputes QKᵀ), 2.5 × forward (flash-attn
``benchmarks/benchmark_flash_attention.py``: ``flops(mode="fwd_bwd") = 3.5 × f``)."""

AttentionKernel = Literal["auto", "flash2", "cudnn"]
ATTENTION_KERNELS: tuple[str, ...] = get_args(AttentionKernel)
"""Which fused attention kernel prices the core (``StepOptions.attention_kernel``): ``flash2`` (FlashAttention-2,
PyTorch SDPA's ``FLASH_ATTENTION`` backend), ``cudnn`` (cuDNN's fused flash attention, SDPA's ``CUDNN_ATTENTION``),
``auto`` (:data:`CUDNN_FROM_SM`: what torchtitan's SDPA priority picks)."""

CUDNN_FROM_SM = 100
"""``auto`` runs cuDNN attention from this compute capability up and FlashAttention-2 below: torchtitan's
``ScaledDotProductAttention._init_backend`` puts ``SDPBackend.CUDNN_ATTENTION`` first when
``has_cuda_capability(10, 0)`` (capability ≥ 10.0) and ``FLASH_ATTENTION`` first otherwise
(torchtitan/models/attention.py @e7c0cae, Jun 2025, and @6fc499f, Aug 2025, the commit of the torchao B200 table;
pytorch/torchtitan#1196 "Use cudnn backend on B200": Llama 3 8B on B200 10,902 -> 12,211 tokens/s per GPU). Before
May 2025 (@9dec370, the H100 tables) torchtitan called ``F.scaled_dot_product_attention`` without a priority, and
PyTorch's default order put FLASH_ATTENTION first on sm_80/sm_90: the same choice there."""

ATTENTION_FWD_BWD_EFFICIENCY: dict[tuple[str, int], tuple[float, str]] = {
    ("flash2", 80): (0.56, "FlashAttention-2 on A100 80GB SXM4, head dim 128, causal, forward + backward: "
                           "~165-190 TFLOP/s of 312 for 1K-16K tokens (Dao 2023, arXiv:2307.08691, Fig. 4; "
                           "abstract: 50-73% of the theoretical maximum)"),
    ("flash2", 90): (0.34, "FlashAttention-2 on H100 80GB SXM5, head dim 128, causal, forward + backward: up to "
                           "~335 TFLOP/s of 989 (Dao 2023, Fig. 7; Shah et al. 2024, arXiv:2407.08608, Fig. 5-6 "
                           "baseline). FlashAttention-3 reaches ~60-75% forward and ~50% backward (Shah et al. "
                           "2024) but postdates or is absent from the 2023-2024 runs the model is checked on"),
    ("flash2", 100): (0.145, "PyTorch SDPA's FlashAttention-2 backend on one B200 (free clock), causal, head dim "
                             "128, 128 query / 8 KV heads, 8,192 tokens: forward 5.848 ms + backward 17.781 ms for "
                             "3.5 x 2.199e12 causal FLOPs = 326 TFLOP/s of 2,250 (NVIDIA/cudnn-frontend "
                             "benchmark/sdpa_benchmark_bf16_training/artifacts/sdpa_benchmark_results_NVIDIA_B200.csv "
                             "@f937055, PyTorch 2.8 nv25.05, cuDNN 9.10.2; 0.145-0.162 from 8K to 128K tokens): the "
                             "sm_80 mma.sync kernel, which does not use Blackwell's tcgen05 tensor-core path"),
    ("cudnn", 100): (0.448, "PyTorch SDPA's cuDNN backend on the same B200, same shape: forward 1.816 ms + backward "
                            "5.815 ms for 3.5 x 2.199e12 causal FLOPs = 1,008 TFLOP/s of 2,250 (cudnn-frontend "
                            "@f937055 sdpa_benchmark_results_NVIDIA_B200.csv; 0.448-0.535 from 8K to 128K tokens)"),
}
"""Published forward + backward attention-kernel throughput / dense bf16 peak, keyed by kernel and the compute
capability it was measured on (sm_80: A100; sm_90: H100, and H200/GH200 which share its GH100 die; sm_100: B200,
GB200). Each is the figure at 8-16K tokens, head dim 128, causal (the FlashAttention papers' and cudnn-frontend's
benchmark convention: causal FLOPs halved, backward 2.5 x forward). The GPU's ``compute_capability`` comes from the
catalogue (gpus.yaml)."""

OP_SAC_SAVED_KERNELS: tuple[str, ...] = ("flash2",)
"""Kernels whose output torchtitan's op-level SAC keeps (``--recompute op``): its ``_save_list`` names
``aten._scaled_dot_product_flash_attention`` and ``_efficient_attention`` but not ``_scaled_dot_product_cudnn_attention``
(torchtitan/models/llama3/infra/parallelize.py @6fc499f, the torchao B200 table's commit; added only by
pytorch/torchtitan#2095, "add all SDPA backends to op_sac_save_list", Dec 2025). So where ``auto`` runs cuDNN (B200),
op SAC recomputes the attention forward in the backward."""

FALLBACK_FRACTION_OF_MATMUL = ATTENTION_FWD_BWD_EFFICIENCY[("flash2", 80)][0] / 0.869
"""GPUs and kernels without a published figure (sm_70, sm_75, sm_89, sm_103, cuDNN below sm_100 ..., and the AMD
Instinct parts, which have no CUDA compute capability): attention at the A100's ratio of FlashAttention-2 rate to its
large-GEMM rate (0.56 / MAMF 0.869 = 0.64) times the GPU's own ``matmul_efficiency``."""


FLASH_DROPOUT_SLOWDOWN = 1.14
"""Forward + backward time of the FlashAttention-2 kernel with attention dropout (p = 0.1) over without: the
published rates (``ATTENTION_FWD_BWD_EFFICIENCY``; flash-attn ``benchmarks/benchmark_flash_attention.py``
runs ``dropout_p = 0.0``) leave out the Philox random numbers the kernel draws for every score, in the forward
and again in the backward. Measured on one H100 SXM (benchmarks/megatron_kernels.py, 2026-11-26, three runs;
PyTorch 2.11 SDPA's FlashAttention-2 backend, causal, s = 4096, head dim 128, 12-16 heads): 1.07-1.15 in 12 of
13 cases (one 1.50), median 1.14. (cuDNN's fused attention, which Transformer Engine v1.7-1.8 prefers on sm_90, slowed
1.17-1.42 in the same runs; the FlashAttention-2 figure goes with the FlashAttention-2 rate.) Megatron-LM
trains with ``--attention-dropout 0.1`` unless told otherwise (megatron/training/arguments.py @937571c)."""


def resolve_kernel(kernel: str, sm: int | None) -> str:
    """The kernel that runs: ``auto`` is cuDNN from :data:`CUDNN_FROM_SM` up, FlashAttention-2 below (and where the
    GPU states no compute capability)."""
    if kernel not in ATTENTION_KERNELS:
        raise ValueError(f"attention kernel {kernel!r}: use one of {', '.join(ATTENTION_KERNELS)}")
    if kernel != "auto":
        return kernel
    return "cudnn" if sm is not None and sm >= CUDNN_FROM_SM else "flash2"


def gpu_sm(system: System) -> int | None:
    """The GPU's compute capability as a number, None where the profile states none (AMD Instinct)."""
    return system.gpu.sm_version() if system.gpu.compute_capability is not None else None


def op_sac_saves_attention(system: System, kernel: str = "auto") -> bool:
    """Whether torchtitan's op SAC keeps the output of the attention kernel that runs (:data:`OP_SAC_SAVED_KERNELS`)."""
    return resolve_kernel(kernel, gpu_sm(system)) in OP_SAC_SAVED_KERNELS


def attention_efficiency(system: System, kernel: str = "auto") -> float:
    """Forward + backward fused-attention throughput of ``kernel`` as a fraction of the GPU's dense 16-bit peak:
    the published figure for the kernel on the GPU's architecture, else ``FALLBACK_FRACTION_OF_MATMUL`` × the GPU's
    matmul efficiency."""
    sm = gpu_sm(system)  # AMD Instinct parts state no CUDA compute capability
    published = ATTENTION_FWD_BWD_EFFICIENCY.get((resolve_kernel(kernel, sm), sm)) if sm is not None else None
    if published is not None:
        return published[0]
    return FALLBACK_FRACTION_OF_MATMUL * system.gpu.matmul_efficiency.value


def causal_fraction(seq_len: float) -> float:
    """Fraction of the s×s square a causal FlashAttention kernel computes: (1 + B/s)/2 (n(n+1)/2 of n² tiles)."""
    blocks = max(1.0, np.ceil(seq_len / FLASH_BLOCK_TOKENS))
    return (1.0 + 1.0 / blocks) / 2.0


def attention_peak_flops_per_s(system: System, dtype: str) -> float:
    """Peak the fused attention runs at: 16-bit even for FP8 models (Transformer Engine keeps
    DotProductAttention in bf16 unless fp8_dpa is set; NeMo's FP8 recipes leave it off)."""
    return system.gpu.peak_for(high_precision_key(dtype))


def flash_attention_forward_s(model: TransformerModel, system: System, micro_batch: np.ndarray,
                              tp: np.ndarray, dropout: bool = False, kernel: str = "auto") -> np.ndarray:
    """Forward time of one block's fused attention core on one GPU (backward is 2 × this in the step model).

    = 7/6 × (full-square core FLOPs × causal fraction) / (efficiency × peak), so that forward +
    backward = 3.5 × causal FLOPs / (efficiency × peak), the FlashAttention papers' own accounting;
    × ``FLASH_DROPOUT_SLOWDOWN`` with attention ``dropout``.
    """
    causal_flops = attention_core_flops(model, micro_batch, tp) * causal_fraction(model.seq_len)
    rate = attention_efficiency(system, kernel) * attention_peak_flops_per_s(system, model.dtype)
    slowdown = FLASH_DROPOUT_SLOWDOWN if dropout else 1.0
    return np.asarray(slowdown * FLASH_FWD_BWD_FLOPS_PER_FORWARD / 3.0 * causal_flops / rate, dtype=float)
