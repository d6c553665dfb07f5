"""Count (CPU) or time (CUDA) the elementwise work of one torchtitan Llama block in eager PyTorch (issue 12).

The block is torchtitan's Llama at pytorch/torchtitan@9dec370 (2024-12-26), op for op:
``torchtitan/models/norms.py`` ``RMSNorm.forward`` (``self._norm(x.float()).type_as(x) * self.weight``, ``_norm`` =
``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``), ``torchtitan/models/llama/model.py``
``apply_rotary_emb`` (``view_as_complex(xq.float()...)`` × ``freqs_cis``, ``view_as_real``, ``type_as``),
``repeat_kv`` (expand + reshape: a copy of K and V to every query head), ``Attention.forward`` (SDPA, causal),
``FeedForward.forward`` (``w2(F.silu(w1(x)) * w3(x))``) and ``TransformerBlock.forward`` (two residual adds).

``python benchmarks/eager_elementwise.py`` (no GPU): runs forward + backward of one block (Llama-3 8B widths,
a few tokens, bf16 activations and weights as FSDP2's ``param_dtype = bfloat16`` gives) under a
TorchDispatchMode and sums, per aten op that is neither a matmul nor SDPA nor a view, the bytes of its tensor
inputs and outputs (a broadcast operand counted at its stored size), i.e. one read of every input and one
write of every output: the op-by-op HBM traffic of eager mode. Prints bytes per token by group and the kernel
counts. ``--cuda`` times the same eager block against ``torch.compile`` of it (GEMMs and SDPA included in both,
median of CUDA-event timings).
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

H, A, KV_HEADS, HEAD_DIM, FFN = 4096, 32, 8, 128, 14336  # Llama-3 8B (torchtitan llama3 "8B" flavor)
MATMUL_OPS = ("mm", "addmm", "bmm", "_scaled_dot_product", "_flash_attention", "_efficient_attention",
              "_cudnn_attention")
GROUP = {"norm": "norm", "rope": "rope", "repeat_kv": "repeat_kv", "swiglu": "swiglu", "residual": "residual"}


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """torchtitan/models/norms.py @9dec370 RMSNorm.forward."""
    def _norm(y: torch.Tensor) -> torch.Tensor:
        return y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps)
    return _norm(x.float()).type_as(x) * weight


def apply_rotary_emb(xq, xk, freqs_cis):
    """torchtitan/models/llama/model.py @9dec370 apply_rotary_emb (reshape_for_broadcast inlined)."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """torchtitan/models/llama/model.py @9dec370 repeat_kv."""
    bs, slen, n_kv_heads, head_dim = x.shape
    return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


class Tagger:
    """Which part of the block the ops dispatched now belong to."""
    group = "other"


def block(x, w, freqs_cis, tag: Tagger):
    """torchtitan TransformerBlock.forward @9dec370: h = x + attention(norm(x)); out = h + ffn(norm(h))."""
    bs, s, _ = x.shape
    head_dim = 2 * freqs_cis.shape[-1]  # the shape comes from the weights and freqs_cis (Llama-3 8B by default)
    tag.group = "norm"
    xn = rms_norm(x, w["attention_norm"])
    tag.group = "gemm"
    xq, xk, xv = (xn @ w["wq"].t()).view(bs, s, -1, head_dim), (xn @ w["wk"].t()).view(bs, s, -1, head_dim), \
        (xn @ w["wv"].t()).view(bs, s, -1, head_dim)
    tag.group = "rope"
    xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
    tag.group = "repeat_kv"
    n_rep = w["wq"].shape[0] // w["wk"].shape[0]
    keys, values = repeat_kv(xk, n_rep), repeat_kv(xv, n_rep)
    tag.group = "gemm"
    out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                         is_causal=True)
    tag.group = "attn_out_copy"
    out = out.transpose(1, 2).contiguous().view(bs, s, -1)
    tag.group = "gemm"
    attn = out @ w["wo"].t()
    tag.group = "residual"
    h = x + attn
    tag.group = "norm"
    hn = rms_norm(h, w["ffn_norm"])
    tag.group = "gemm"
    a, b = hn @ w["w1"].t(), hn @ w["w3"].t()
    tag.group = "swiglu"
    g = F.silu(a) * b
    tag.group = "gemm"
    ffn = g @ w["w2"].t()
    tag.group = "residual"
    return h + ffn


def block_shapes(h: int = H, heads: int = A, kv_heads: int = KV_HEADS, ffn: int = FFN,
                 head_dim: int = HEAD_DIM) -> dict[str, tuple[int, ...]]:
    """Each weight of one torchtitan Llama block, [out, in] as nn.Linear stores it."""
    return {"wq": (heads * head_dim, h), "wk": (kv_heads * head_dim, h), "wv": (kv_heads * head_dim, h),
            "wo": (h, heads * head_dim), "w1": (ffn, h), "w3": (ffn, h), "w2": (h, ffn),
            "attention_norm": (h,), "ffn_norm": (h,)}


def weights(device: str, dtype=torch.bfloat16) -> dict[str, torch.Tensor]:
    return {k: (torch.randn(*v, device=device, dtype=dtype) * 0.02).requires_grad_()
            for k, v in block_shapes().items()}


def freqs(seq: int, device: str, head_dim: int = HEAD_DIM) -> torch.Tensor:
    f = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device=device)[: head_dim // 2].float() / head_dim))
    return torch.polar(torch.ones(seq, head_dim // 2, device=device), torch.outer(torch.arange(seq, device=device), f))


class ByteCounter(TorchDispatchMode):
    """Bytes read + written per aten op (views, matmuls and SDPA excluded), grouped by the Tagger's group."""

    def __init__(self, tag: Tagger):
        super().__init__()
        self.tag, self.phase = tag, "forward"
        self.bytes: dict[tuple[str, str], float] = defaultdict(float)
        self.kernels: dict[tuple[str, str], int] = defaultdict(int)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.__name__
        ins = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outs = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        group = self.tag.group if self.phase == "forward" else "backward"
        if any(name.startswith(m) for m in MATMUL_OPS):
            self.kernels[(self.phase, "gemm")] += 1
            return out
        in_ptrs = {t.untyped_storage().data_ptr() for t in ins}
        if not name.endswith("_") and outs and all(t.untyped_storage().data_ptr() in in_ptrs for t in outs):
            return out  # a view: no kernel
        if name in ("detach", "empty", "zeros_like", "empty_like", "lift_fresh"):
            return out
        size = sum(min(t.numel() * t.element_size(), t.untyped_storage().nbytes()) for t in ins + outs)
        self.bytes[(self.phase, group)] += size
        self.kernels[(self.phase, group if self.phase == "forward" else "elementwise")] += 1
        self.log.append((self.phase, group, name, size))
        return out

    log: list = []


def count(tokens: int = 8) -> None:
    tag = Tagger()
    w = weights("cpu")
    x = (torch.randn(1, tokens, H, dtype=torch.bfloat16)).requires_grad_()
    fc = freqs(tokens, "cpu")
    counter = ByteCounter(tag)
    with counter:
        y = block(x, w, fc, tag)
        counter.phase = "backward"
        y.backward(torch.ones_like(y))
    for phase, group, name, size in counter.log:
        print(f"{phase:8s} {group:13s} {name:40s} {size / tokens:10.0f} B/token")
    total = defaultdict(float)
    for (phase, group), b in sorted(counter.bytes.items()):
        print(f"{phase:8s} {group:13s} {b / tokens:10.0f} B/token")
        total[phase] += b / tokens
    print(dict(total), dict(counter.kernels))


def _median_ms(fn, grad, reps: int) -> float:
    for _ in range(3):
        fn().backward(grad)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn().backward(grad)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def time_cuda(tokens: int = 8192, reps: int = 20, device: str = "cuda") -> None:
    """Eager vs torch.compile, forward + backward, of RMSNorm, RoPE, SwiGLU and the whole block (Llama-3 8B
    widths, ``tokens`` tokens, bf16), median ms; beside each, the model's time for its bytes at 0.8 × 3.35 TB/s."""
    tag = Tagger()
    w = weights(device)
    fc = freqs(tokens, device)
    hbm = 0.8 * 3.35e12
    x = torch.randn(1, tokens, H, device=device, dtype=torch.bfloat16, requires_grad=True)
    q = torch.randn(1, tokens, A, HEAD_DIM, device=device, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, tokens, KV_HEADS, HEAD_DIM, device=device, dtype=torch.bfloat16, requires_grad=True)
    a = torch.randn(1, tokens, FFN, device=device, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(1, tokens, FFN, device=device, dtype=torch.bfloat16, requires_grad=True)
    parts = {  # name: (function, output-gradient shape, eager bytes/token, fused bytes/token) fwd + bwd
        "rmsnorm": (lambda: rms_norm(x, w["attention_norm"]), (1, tokens, H), (36 + 92) * H, 3 * 4 * H),
        "rope": (lambda: torch.cat([t.flatten(2) for t in apply_rotary_emb(q, k, fc)], -1),
                 (1, tokens, (A + KV_HEADS) * HEAD_DIM), 40 * (A + KV_HEADS) * HEAD_DIM, 3 * 4 * (A + KV_HEADS) * HEAD_DIM),
        "swiglu": (lambda: F.silu(a) * b, (1, tokens, FFN), 28 * FFN, 3 * 6 * FFN),
        "block": (lambda: block(x, w, fc, tag), (1, tokens, H), 610_304 + 1_257_472, 3 * 196_608),
    }
    for name, (fn, shape, eager_b, fused_b) in parts.items():
        grad = torch.randn(*shape, device=device, dtype=torch.bfloat16)
        try:
            eager_ms = _median_ms(fn, grad, reps)
            compiled_ms = _median_ms(torch.compile(fn), grad, reps)
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"{name}: failed {type(exc).__name__}: {exc}"[:300], flush=True)
            continue
        print(f"{name:8s} tokens={tokens} fwd+bwd eager {eager_ms:.3f} ms compiled {compiled_ms:.3f} ms "
              f"(model bytes: eager {eager_b * tokens / hbm * 1e3:.3f} ms, fused {fused_b * tokens / hbm * 1e3:.3f} ms)",
              flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cuda", action="store_true", help="time eager vs torch.compile on a GPU")
    args = parser.parse_args()
    time_cuda() if args.cuda else count()
