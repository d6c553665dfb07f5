"""Fused (FlashAttention) attention core: causal block skipping and a kernel efficiency per GPU architecture.

With ``StepOptions.flash_attention`` on, the attention core (QKᵀ, softmax, PV) is one fused kernel
rather than two batched GEMMs with the s×s scores in HBM (Dao et al. 2022; Dao 2023, FlashAttention-2;
Shah et al. 2024, FlashAttention-3). Two things change its time:

* **Causal skip.** The kernel tiles queries and keys in blocks of ``FLASH_BLOCK_TOKENS`` and skips the
  blocks above the causal diagonal: of n² tiles (n = s/B) it computes n(n + 1)/2, i.e. a fraction
  (1 + B/s)/2 of the full square — 0.53 at 2,048 tokens, 0.5005 at 131,072.
* **Rate.** The FlashAttention papers report forward + backward throughput on the causal-halved count
  (their benchmark: 4·b·s²·a·d / 2 forward, 2.5 × that backward because the backward recomputes
  the scores, 3.5 × in all). :mod:`commmodel.step.attention_rates` holds that published rate over the
  GPU's dense peak, per kernel and GPU architecture (compute capability), and how it grows with the tokens of one
  kernel call where the publisher swept them. Which kernel runs is the attention library's rule
  (:data:`CUDNN_FROM_SM`: PyTorch SDPA under torchtitan, Transformer Engine under Megatron-Core). Forward + backward
  of one block's core therefore takes 3.5 · F_causal / (eff · peak), which this model splits as forward =
  7/6 · F_causal / (eff · peak) (the step model makes backward = 2 × forward).

FLOPs *counted* are unchanged: model FLOPs (MFU) and hardware FLOPs (HFU) keep the published
convention of the full s×s square without causal halving (Narayanan et al. 2021 §5.1; Korthikanti et al.
2022 App. A; MosaicML's 6N + 12·l·h·s; Llama 3 Table 4 MFU). Only the time uses the skipped blocks. Blocks with
local attention (a sliding window or chunks, :func:`local_fraction`) also skip the tiles outside their band in the
time, and are counted at s·w rather than s² (:func:`commmodel.workload.flops.counted_core_share`).
All presets are decoder-only (causal) language models.
"""

from typing import Literal, get_args

import numpy as np

from commmodel.hardware.models import System
from commmodel.step.attention_rates import (ATTENTION_RATES, DERIVED_KERNELS, DROPOUT_SLOWDOWN, AttentionRate,
                                            rate_entry, rate_text)
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

AttentionKernel = Literal["auto", "te", "flash2", "cudnn", "triton"]
ATTENTION_KERNELS: tuple[str, ...] = get_args(AttentionKernel)
"""Which fused attention kernel prices the core (``StepOptions.attention_kernel``): ``flash2`` (FlashAttention-2),
``cudnn`` (cuDNN's fused flash attention), ``triton`` (the 2022-23 Triton FlashAttention, llm-foundry's
``attn_impl: triton``: FlashAttention-2's rate over its measured slowdown,
:func:`.attention_rates.triton_fa2_slowdown`), or the rule of the library that picks one (:data:`CUDNN_FROM_SM`):
``auto`` (PyTorch SDPA's priority as torchtitan sets it) or ``te`` (Transformer Engine's, as Megatron-Core runs
it)."""

CUDNN_FROM_SM: dict[str, int] = {"auto": 100, "te": 90}
"""From which compute capability each library rule runs cuDNN attention (FlashAttention-2 below).

* ``auto``, PyTorch SDPA under torchtitan: ``ScaledDotProductAttention._init_backend`` puts
  ``SDPBackend.CUDNN_ATTENTION`` first when ``has_cuda_capability(10, 0)`` and ``FLASH_ATTENTION`` first otherwise
  (torchtitan/models/attention.py @e7c0cae, Jun 2025, and @6fc499f, Aug 2025, the commit of the torchao B200 table;
  pytorch/torchtitan#1196 "Use cudnn backend on B200": Llama 3 8B on B200 10,902 -> 12,211 tokens/s per GPU). Before
  May 2025 (@9dec370, the H100 tables) torchtitan called ``F.scaled_dot_product_attention`` without a priority, and
  PyTorch's default order put FLASH_ATTENTION first on sm_80/sm_90: the same choice there.
* ``te``, Transformer Engine's ``DotProductAttention`` (Megatron-Core's attention): ``get_attention_backend``
  disables FlashAttention "to give FusedAttention preference on Hopper+ for performance reasons" wherever both can
  run and the capability is ≥ 9.0 (transformer_engine/pytorch/attention/dot_product_attention/utils.py @d0067d0;
  the same rule in attention.py of TE v1.7-1.8, the version of the Megatron-LM H100 scaling runs); FusedAttention's
  arbitrary-sequence-length backend is cuDNN's flash attention."""

OP_SAC_SAVED_KERNELS: tuple[str, ...] = ("flash2",)
"""Kernels whose output torchtitan's op-level SAC keeps (``--recompute op``): its ``_save_list`` names
``aten._scaled_dot_product_flash_attention`` and ``_efficient_attention`` but not ``_scaled_dot_product_cudnn_attention``
(torchtitan/models/llama3/infra/parallelize.py @6fc499f, the torchao B200 table's commit; added only by
pytorch/torchtitan#2095, "add all SDPA backends to op_sac_save_list", Dec 2025). So where ``auto`` runs cuDNN (B200),
op SAC recomputes the attention forward in the backward."""

FALLBACK_FRACTION_OF_MATMUL = ATTENTION_RATES[("flash2", 80)].asymptote / 0.869
"""GPUs and kernels without a published figure (sm_70, sm_75, sm_89, FlashAttention-2 on sm_103, ..., and the AMD
Instinct parts, which have no CUDA compute capability): attention at the A100's ratio of FlashAttention-2 rate to its
large-GEMM rate (0.56 / MAMF 0.869 = 0.64) times the GPU's own ``matmul_efficiency``, flat in the sequence; the
Triton kernel there over its slowdown against FlashAttention-2 (:func:`fallback_efficiency`)."""


def resolve_kernel(kernel: str, sm: int | None) -> str:
    """The kernel that runs: a library rule (``auto``, ``te``) runs cuDNN from its :data:`CUDNN_FROM_SM` up and
    FlashAttention-2 below (and where the GPU states no compute capability); a named kernel runs as named."""
    if kernel not in ATTENTION_KERNELS:
        raise ValueError(f"attention kernel {kernel!r}: use one of {', '.join(ATTENTION_KERNELS)}")
    if kernel not in CUDNN_FROM_SM:
        return kernel
    return "cudnn" if sm is not None and sm >= CUDNN_FROM_SM[kernel] else "flash2"


def gpu_sm(system: System) -> int | None:
    """The GPU's compute capability as a number, None where the profile states none (AMD Instinct)."""
    return system.gpu.sm_version() if system.gpu.compute_capability is not None else None


def op_sac_saves_attention(system: System, kernel: str = "auto") -> bool:
    """Whether torchtitan's op SAC keeps the output of the attention kernel that runs (:data:`OP_SAC_SAVED_KERNELS`)."""
    return resolve_kernel(kernel, gpu_sm(system)) in OP_SAC_SAVED_KERNELS


def published_rate(system: System, kernel: str) -> AttentionRate | None:
    """The published rate of the kernel ``kernel`` resolves to on the system's GPU architecture; None where there is
    none (no entry, or a GPU without a CUDA compute capability: the AMD Instinct parts)."""
    sm = gpu_sm(system)
    return rate_entry(resolve_kernel(kernel, sm), sm) if sm is not None else None


def attention_efficiency(system: System, kernel: str = "auto", seq_tokens: np.ndarray | float = np.inf
                         ) -> np.ndarray | float:
    """Forward + backward fused-attention throughput of ``kernel`` as a fraction of the GPU's dense 16-bit peak at
    ``seq_tokens`` per kernel call: the published rate for the kernel on the GPU's architecture
    (:data:`~commmodel.step.attention_rates.ATTENTION_RATES`, asymptote × s/(s + s½); the asymptote where
    ``seq_tokens`` is infinite), else :func:`fallback_efficiency`."""
    rate = published_rate(system, kernel)
    if rate is None:
        return fallback_efficiency(system, kernel)
    return rate.at(seq_tokens)


def fallback_efficiency(system: System, kernel: str) -> float:
    """``FALLBACK_FRACTION_OF_MATMUL`` × the GPU's matmul efficiency, for a kernel with no published rate on this
    GPU; a :data:`~commmodel.step.attention_rates.DERIVED_KERNELS` kernel over its slowdown, as where its base's rate
    is published."""
    slowdown = DERIVED_KERNELS.get(resolve_kernel(kernel, gpu_sm(system)), ("", 1.0))[1]
    return FALLBACK_FRACTION_OF_MATMUL * system.gpu.matmul_efficiency.value / slowdown


def rate_line(system: System, kernel: str) -> str:
    """The assumption line naming the fused-attention rate the system's GPU is priced at: the published entry of the
    kernel ``kernel`` resolves to (the stacks' own lines quote NVIDIA examples, so the output must say which entry
    this GPU takes), or :data:`FALLBACK_FRACTION_OF_MATMUL`'s figure where there is none."""
    sm = gpu_sm(system)
    resolved = resolve_kernel(kernel, sm)
    arch = f"sm_{sm}, {resolved}" if sm is not None else "no CUDA compute capability"
    derived = (f", over {resolved}'s measured {DERIVED_KERNELS[resolved][1]:.2f}× slowdown against "
               f"{DERIVED_KERNELS[resolved][0]} (DERIVED_KERNELS)" if resolved in DERIVED_KERNELS else "")
    if published_rate(system, kernel) is not None:
        which = "its rate" if derived else "its published rate"
        return (f"fused attention on {system.gpu.name} ({arch}): {which} {rate_text(resolved, sm)} "
                f"(step/attention_rates.py{derived})")
    return (f"fused attention on {system.gpu.name} ({arch}): no published rate for this GPU, so "
            f"{FALLBACK_FRACTION_OF_MATMUL:.2f} × its matmul efficiency {system.gpu.matmul_efficiency.value:.3f} = "
            f"{attention_efficiency(system, kernel):.2f} of the bf16 peak, flat in the sequence (the A100's "
            f"FlashAttention-2 to large-GEMM ratio; step/attention.py FALLBACK_FRACTION_OF_MATMUL{derived})")


def causal_fraction(seq_len: float) -> float:
    """Fraction of the s×s square a causal FlashAttention kernel computes: (1 + B/s)/2 (n(n+1)/2 of n² tiles)."""
    blocks = max(1.0, np.ceil(seq_len / FLASH_BLOCK_TOKENS))
    return (1.0 + 1.0 / blocks) / 2.0


def local_fraction(seq_len: float, window: float, chunked: bool = False) -> float:
    """Fraction of the s×s square a causal FlashAttention kernel computes when each query sees only ``window``
    tokens: with n = ⌈s/B⌉ query tiles and m = ⌈w/B⌉, query tile i reads min(i, m) + 1 key tiles under a sliding
    window (FlashAttention-2's ``window_size``: the tiles the band touches), so Σ min(i + 1, m + 1) of n² tiles; under
    chunked attention the sequence is ⌈s/w⌉ causal chunks of m tiles each, m(m + 1)/2 tiles per chunk. A window of
    the whole sequence or more is :func:`causal_fraction`."""
    n = max(1.0, np.ceil(seq_len / FLASH_BLOCK_TOKENS))
    m = max(1.0, np.ceil(window / FLASH_BLOCK_TOKENS))
    if m >= n:
        return causal_fraction(seq_len)
    if chunked:
        return float(np.ceil(seq_len / window) * m * (m + 1.0) / 2.0 / n**2)
    return float(((m + 1.0) * (m + 2.0) / 2.0 + (n - m - 1.0) * (m + 1.0)) / n**2)


def attention_block_kinds(model: TransformerModel) -> list[tuple[float, float, float]]:
    """(share of the blocks, fraction of the s×s square computed, key tokens one query tile loops over at most) for
    each kind of block the model has: the fully attending ones (:func:`causal_fraction`, the whole sequence) and,
    with ``attention_window``, the ``local_attention_fraction`` that attend locally (:func:`local_fraction`, the
    window)."""
    full = (1.0 - model.local_attention_fraction, causal_fraction(model.seq_len), float(model.seq_len))
    if model.attention_window is None:
        return [full]
    window = float(model.attention_window)
    local = local_fraction(model.seq_len, window, model.attention_chunked)
    return [full, (model.local_attention_fraction, local, window)]


def attention_peak_flops_per_s(system: System, dtype: str) -> float:
    """Peak the fused attention runs at: 16-bit even for FP8 models (Transformer Engine keeps
    DotProductAttention in bf16 unless fp8_dpa is set; NeMo's FP8 recipes leave it off)."""
    return system.gpu.peak_for(high_precision_key(dtype))


def flash_attention_forward_s(model: TransformerModel, system: System, micro_batch: np.ndarray,
                              tp: np.ndarray, dropout: bool = False, kernel: str = "auto",
                              cp: np.ndarray | int = 1) -> np.ndarray:
    """Forward time of one block's fused attention core on one GPU (backward is 2 × this in the step model).

    = 7/6 × (full-square core FLOPs × the tiles computed) / (efficiency × peak), so that forward + backward =
    3.5 × causal FLOPs / (efficiency × peak), the FlashAttention papers' own accounting; averaged over the model's
    kinds of block (:func:`attention_block_kinds`: causal blocks skipped, and outside a local window too), each at
    the efficiency for the key tokens one query tile loops over: the s/cp each kernel call sees under context
    parallelism (its local queries against one chunk of keys at a time), at most the window; × the kernel's
    ``DROPOUT_SLOWDOWN`` with attention ``dropout``.
    """
    square_flops = attention_core_flops(model, micro_batch, tp)
    seq_tokens = model.seq_len / np.asarray(cp, dtype=float)
    peak = attention_peak_flops_per_s(system, model.dtype)
    time_s = sum(share * square_flops * tiles / (attention_efficiency(system, kernel, np.minimum(seq_tokens, keys))
                                                 * peak) for share, tiles, keys in attention_block_kinds(model))
    slowdown = DROPOUT_SLOWDOWN.get(resolve_kernel(kernel, gpu_sm(system)), 1.0) if dropout else 1.0
    return np.asarray(slowdown * FLASH_FWD_BWD_FLOPS_PER_FORWARD / 3.0 * time_s, dtype=float)
