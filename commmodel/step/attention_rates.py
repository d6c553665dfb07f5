"""Published fused-attention rates: forward + backward throughput per kernel and GPU architecture, and how it grows
with the sequence a kernel call sees.

Each entry is ``asymptote × s / (s + s½)`` of the GPU's dense 16-bit peak, s the tokens of one kernel call (the
sequence, or its 1/cp share under context parallelism). The form is the GEMM model's d/(d + d½) along the key
loop: every query tile of a FlashAttention-style kernel pays a fixed prologue/epilogue (loading Q, the softmax
rescale, writing O and the log-sum-exp) and then streams the s keys, so short sequences amortise less. Where a
publisher swept the sequence, ``asymptote`` and ``s½`` are the least-squares fit (on the logarithm of the rate) over
that sweep, named beside it; a single published point is a flat entry (s½ = 0).

Convention of every figure (FlashAttention papers, cudnn-frontend's benchmarks): causal FLOPs halved, forward
4·b·s²·a·d / 2, backward 2.5 × forward, head dim 128, bf16.
"""

from typing import NamedTuple

import numpy as np


class AttentionRate(NamedTuple):
    """One kernel's published forward + backward rate on one GPU architecture."""

    asymptote: float
    """Rate at long sequences as a fraction of the dense 16-bit peak."""
    half_seq_tokens: float
    """s½: the rate is ``asymptote × s / (s + s½)`` at s tokens per kernel call; 0 where no sweep was published."""
    source: str
    """Where the figures come from (publisher, file, commit) and the fit's domain and worst residual."""

    def at(self, seq_tokens: "np.ndarray | float") -> "np.ndarray | float":
        """The rate at ``seq_tokens`` per kernel call: ``asymptote × s / (s + s½)``; the asymptote for a flat entry or
        an infinite sequence."""
        if self.half_seq_tokens == 0.0 or np.all(np.isinf(seq_tokens)):
            return self.asymptote
        seq = np.asarray(seq_tokens, dtype=float)
        return self.asymptote * seq / (seq + self.half_seq_tokens)


CUDNN_FRONTEND_H200 = ("NVIDIA/cudnn-frontend benchmark/benchmark_results.csv @91b7532 (v1.10, Jan 2025; the same file "
                       "as benchmark/sdpa_benchmark/benchmark_results.csv @b372d39): one Hopper GPU (sm_90), clocks "
                       "locked at 1,980 MHz and 700 W with the README's H200 commands (nvidia-smi -ac 3201,1980: "
                       "3,201 MHz is the H200's memory clock; the CSV names no GPU), cuDNN 9.1, causal, head dim 128, "
                       "16 heads, b·s = 16K-64K tokens")
CUDNN_FRONTEND_B200 = ("NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_bf16_training/artifacts/"
                       "sdpa_benchmark_results_NVIDIA_B200.csv @f937055: one B200, free clock, PyTorch 2.8 nv25.05, "
                       "cuDNN 9.10.2, causal, b = 1, 128 query / 8 KV heads of 128")

ATTENTION_RATES: dict[tuple[str, int], AttentionRate] = {
    ("flash2", 80): AttentionRate(0.56, 0.0, (
        "FlashAttention-2 on A100 80GB SXM4, head dim 128, causal: ~165-190 TFLOP/s of 312 for 1K-16K tokens (Dao "
        "2023, arXiv:2307.08691, Fig. 4; abstract: 50-73% of the theoretical maximum); no sweep fitted")),
    ("flash2", 90): AttentionRate(0.3384, 1250.0, (
        f"PyTorch SDPA's FlashAttention-2 ('Pytorch' column): 257.9 / 287.3 / 311.2 / 324.6 / 328.1 TFLOP/s at 4K / "
        f"8K / 16K / 32K / 64K tokens; fit 334.8 TFLOP/s x s/(s + 1,250), worst residual 1.1% ({CUDNN_FRONTEND_H200}). "
        "The asymptote is Dao 2023 Fig. 7's ~335 TFLOP/s for the flash-attn package on H100 SXM5")),
    ("cudnn", 90): AttentionRate(0.5490, 580.0, (
        f"cuDNN fused attention ('cuDNN BF16' column): 477.4 / 502.8 / 525.9 / 535.9 / 538.1 TFLOP/s at 4K / 8K / "
        f"16K / 32K / 64K tokens; fit 543.2 TFLOP/s x s/(s + 580), worst residual 0.9% ({CUDNN_FRONTEND_H200}). The "
        "FlashAttention-3 paper's own H100 figure puts cuDNN's forward at 574-617 TFLOP/s for 1K-16K (Shah et al. "
        "2024, arXiv:2407.08608, Fig. 5)")),
    ("flash2", 100): AttentionRate(0.1648, 1250.0, (
        f"PyTorch SDPA's FlashAttention-2 (pyt_flash_attention): 281 / 326 / 348 / 358 / 363 / 364 TFLOP/s at 4K-128K "
        f"tokens; fit over 4K-128K 371 TFLOP/s x s/(s + 1,250), worst residual 1.2% ({CUDNN_FRONTEND_B200}): the sm_80 "
        "mma.sync kernel, which does not use Blackwell's tcgen05 tensor-core path")),
    ("cudnn", 100): AttentionRate(0.5440, 2220.0, (
        f"PyTorch SDPA's cuDNN backend (pyt_cudnn): 754 / 1,009 / 1,143 / 1,205 / 1,156 / 1,111 TFLOP/s at 4K-128K "
        f"tokens; fit over 4K-128K 1,224 TFLOP/s x s/(s + 2,220), worst residual 8.3% (the sweep falls past 32K) "
        f"({CUDNN_FRONTEND_B200})")),
    ("cudnn", 103): AttentionRate(0.6706, 930.0, (
        "cuDNN fused attention on one GB300 (Blackwell Ultra, sm_103; cuDNN 9.22, cudnn-frontend 1.21.1), causal, "
        "b = 2, 64 query / 8 KV heads of 128 (Llama 3.1 shape): 1,352 / 1,534 / 1,605 / 1,598 TFLOP/s fwd + bwd at "
        "4K / 8K / 16K / 32K tokens (1,054 at 2K); fit over 4K-32K 1,676 TFLOP/s x s/(s + 930) of the 2,500 TFLOP/s "
        "peak, worst residual 2.0% (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/llama3.1/gb300/"
        "llama3.1_20260424_100757.csv @3929da2, time_ms and tflops per pass). Blackwell Ultra doubles the exponent "
        "throughput attention's softmax needs, so sm_100's figure does not carry over")),
}
"""Published rates keyed by kernel and the compute capability they were measured on (sm_80: A100; sm_90: H100, and
H200/GH200/H800 which share its GH100 die; sm_100: B200, GB200; sm_103: B300, GB300). Below 4K tokens the B200 sweep
falls under the fit (launch-bound kernels at b = 1: 0.21 of it at 512 tokens); the model's runs are 2K tokens and
longer.

cuDNN's version matters and the table has one per entry: the Hopper and B200 sweeps are cuDNN 9.1 and 9.10, the
versions of the 2024-2025 runs the model is checked on. Newer releases are faster on the same parts: on one H200,
cuDNN 9.19 reaches 591 / 644 / 673 TFLOP/s forward and 474 / 541 / 579 backward at 4K / 8K / 16K (Llama 3.1 shape,
cudnn-frontend results/h200_919_only_cudnn @3929da2), about 13% above the 9.1 fit at 8K; on one GB200 cuDNN 9.22
gives 1,393 TFLOP/s fwd + bwd at 8K (results/llama3.1/gb200 @3929da2), 38% above the B200's 9.10 figure. Runs on
today's libraries may therefore be faster than priced here."""

TRITON_FA2_FWD_SLOWDOWN = 1.4
"""FlashAttention in Triton (Tri Dao's 2022-23 ``flash_attn_triton.py``, the kernel behind llm-foundry's
``attn_impl: triton``) over FlashAttention-2 in the forward: "FlashAttention-2 is around 1.3-1.5× faster than
FlashAttention in Triton in the forward pass" (Dao 2023, arXiv:2307.08691 §4.1, A100 80GB SXM4); the middle of
that range."""

TRITON_FA2_BWD_SLOWDOWN = 2.0
"""The same in the backward: "around 2× faster in the backward pass" (Dao 2023 §4.1)."""

FA2_BWD_OVER_FWD_RATE = 63.0 / 73.0
"""FlashAttention-2's backward rate over its forward rate: "up to 73% of the theoretical maximum FLOPs/s" forward and
"up to 63%" backward on A100 (Dao 2023 §1 and §4.1), which sets how FA2's forward + backward time splits."""


def triton_fa2_slowdown() -> float:
    """Forward + backward time of the Triton FlashAttention over FlashAttention-2's, each pass slowed by its own
    factor and weighted by FA2's time in it: the backward does 2.5 × the forward's FLOPs (FlashAttention accounting)
    at ``FA2_BWD_OVER_FWD_RATE`` of its rate, so (1 × 1.4 + 2.5/0.863 × 2.0) / (1 + 2.5/0.863) = 1.85."""
    bwd_time = 2.5 / FA2_BWD_OVER_FWD_RATE
    return (TRITON_FA2_FWD_SLOWDOWN + bwd_time * TRITON_FA2_BWD_SLOWDOWN) / (1.0 + bwd_time)


DERIVED_KERNELS: dict[str, tuple[str, float]] = {"triton": ("flash2", triton_fa2_slowdown())}
"""Kernels with no published rate of their own, priced from another's: kernel -> (the kernel whose rate it takes,
its measured forward + backward slowdown against it). The same slowdown applies wherever the base kernel is priced,
its published entry or the fallback (:func:`commmodel.step.attention.attention_efficiency`), with the base's sequence
form (the same tiling). Triton: measured against FlashAttention-2 on A100 (Dao 2023 §4.1), assumed elsewhere."""


def rate_entry(kernel: str, sm: int) -> AttentionRate | None:
    """The rate ``kernel`` runs at on compute capability ``sm``: its published entry, or for a
    :data:`DERIVED_KERNELS` kernel its base's entry over the slowdown; None where the base has no entry."""
    base, slowdown = DERIVED_KERNELS.get(kernel, (kernel, 1.0))
    entry = ATTENTION_RATES.get((base, sm))
    if entry is None or slowdown == 1.0:
        return entry
    return entry._replace(asymptote=entry.asymptote / slowdown,
                          source=f"{base}'s entry / {slowdown:.3f} (DERIVED_KERNELS): {entry.source}")


DROPOUT_SLOWDOWN: dict[str, float] = {"flash2": 1.14, "cudnn": 1.30}
"""Forward + backward time of a fused attention kernel with attention dropout (p = 0.1) over without (the Triton kernel
has none: Dao's ``flash_attn_triton.py`` lists dropout among what it does not support, so a run with attention
dropout did not run it, and none is priced for it); the published
rates leave out the Philox random numbers the kernel draws for every score, in the forward and again in the backward.
Measured on one H100 SXM (benchmarks/megatron_kernels.py, 2026-11-26, three runs; PyTorch 2.11 SDPA, causal,
s = 4096, head dim 128, 12-16 heads): FlashAttention-2 1.07-1.15 in 12 of 13 cases (one 1.50), median 1.14; cuDNN
1.17-1.42, taken at the middle of that range, 1.30 (the per-case figures of that run were not kept)."""


def rate_text(kernel: str, sm: int, at_tokens: tuple[int, ...] = (4096, 8192)) -> str:
    """The entry for ``kernel`` on compute capability ``sm`` as a stack's assumption line states it, e.g.
    "0.549 × s/(s + 580) of the bf16 peak: 0.48 at 4K, 0.51 at 8K" (a flat entry: "0.56 of the bf16 peak")."""
    rate = rate_entry(kernel, sm)
    if rate is None:
        raise KeyError(f"no rate for attention kernel {kernel!r} on sm_{sm}")
    if rate.half_seq_tokens == 0.0:
        return f"{rate.asymptote:.2f} of the bf16 peak"
    points = ", ".join(f"{rate.at(s):.2f} at {s // 1024}K" for s in at_tokens)
    return f"{rate.asymptote:.3f} × s/(s + {rate.half_seq_tokens:,.0f}) of the bf16 peak: {points}"


FUSED_RATE_NOTE = (
    "Megatron-Core and torchtitan (fsdp2) price fused attention at the published rate of the kernel that runs, causal "
    "blocks skipped, for the tokens of one kernel call (step/attention.py, step/attention_rates.py): Megatron-Core "
    "attends through Transformer Engine, which runs cuDNN fused attention from sm_90 (attention_kernel te; TE @d0067d0 "
    "get_attention_backend, 'FusedAttention preference on Hopper+'); torchtitan through SDPA with its own priority, "
    "FlashAttention-2 below sm_100 and cuDNN from sm_100 (attention_kernel auto; torchtitan/models/attention.py "
    "@6fc499f). Rates from NVIDIA/cudnn-frontend's sweeps (Hopper, clocks locked as for an H200, @91b7532: cuDNN "
    "477-538, PyTorch's FlashAttention-2 258-328 TFLOP/s from 4K to 64K tokens; B200 @f937055). Checked: one "
    "torchtitan Llama-3 8B block on a 700 W H100 (torch 2.11, whose SDPA prefers cuDNN there) measured 24.6 ms "
    "eager, 20.5 compiled, priced 25.1 / 21.1 "
    "(tests/test_eager_elementwise.py). Moving Megatron-Core from FlashAttention-2's flat 0.34 to TE's cuDNN and both "
    "kernels to their sequence sweeps: Megatron-Core's own runs MAE 10.9% -> 11.1%, mixtures of experts 14.0% -> "
    "13.2%, fsdp2 without the power-limited B200s 20.1% -> 18.0%, out of sample 4.9% -> 4.6%. Before the rate, the "
    "GEMM pricing of the core gave MAE 14.1% on Megatron-Core's runs (slow on 11 of 12) and missed Llama 3 405B at "
    "128K by -57.7%; fsdp2's GEMM pricing made the 32K-256K rows 44-67% slow (benchmarks/training_accuracy.py, "
    "'sensitivity fsdp2'). ddp prices it as fsdp2 does since DDP steps measured on a lent H100 (one_gpu_step.py) "
    "came out 3-20% slow under the GEMM pricing with their eager elementwise work.")
"""Which stacks price attention at a published kernel rate, which kernel, and why (issue 12;
benchmarks/training_accuracy.py)."""
