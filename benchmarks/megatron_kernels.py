"""GPU micro-benchmark: the kernels Megatron-Core runs beside the GEMMs that the step model prices (issue 12).

Needs a CUDA GPU and PyTorch (not a dependency of commmodel; run on a device machine). Prints one line per
measurement, median of ``REPS`` CUDA-event timings after warm-up, for the shapes of the Megatron-LM README
weak-scaling runs (Megatron-LM@937571c README: GPT 1.7B TP1, 7.1B TP2, 177B TP8; s = 4096, V = 131072):

1. ``copy``: device-to-device copy bandwidth (bytes read + written), the HBM rate the elementwise terms use.
2. ``gemm``: each linear GEMM of one block's forward, whole (m = s tokens), and as Transformer Engine
   userbuffers splits it under ``--tp-comm-overlap`` (TransformerEngine v1.8 ``module/base.py``
   ``initialize_ub``: ring-exchange AG for qkv_fprop / fc1_fprop in tp chunks of m/tp rows, pipeline RS
   for proj_fprop / fc2_fprop in 4 chunks of m/4 rows), launched one after another on one stream.
   ``ring``: the 177B's four ring-exchange GEMMs (qkv/fc1 forward, proj/fc2 input gradient) in tp chunks, on one
   stream and spread over TE's 3 compute streams (not yet run on a device: added by the issue-12 177B follow-up).
3. ``wgrad``: a weight-gradient GEMM writing bf16 vs accumulating into an fp32 main_grad (Megatron's
   gradient-accumulation fusion, on by default: ``--no-gradient-accumulation-fusion`` turns it off).
4. ``xent``: Megatron-Core's unfused vocab-parallel cross entropy (megatron/core/tensor_parallel/
   cross_entropy.py @937571c, the default: ``--cross-entropy-loss-fusion`` is off), forward + backward,
   on [s, 1, V/tp] bf16 logits, op for op (tp = 1: the all-reduces are no-ops).
5. ``attn``: PyTorch SDPA's FlashAttention-2 and cuDNN kernels, causal, head dim 128, forward + backward,
   with attention dropout 0 and 0.1 (Megatron's default ``--attention-dropout 0.1``), on contiguous [b, a, s, d]
   tensors and on Megatron's [s, b, a, d] layout seen through strides.
6. ``embedding``: the word embedding's backward on one rank (dense bf16 gradient of [V, h]) and Megatron's hook
   adding it into the fp32 main grad (distributed_data_parallel.py @937571c ``_make_param_hook``).
7. ``grad buffer``: Megatron-Core's once-a-step passes over a local fp32 gradient buffer (param_and_grad_buffer.py
   @937571c): ``zero_``, the 1/dp scaling ``*=``, the NaN-check ``norm``.

Run: ``python benchmarks/megatron_kernels.py``. Results of 2026-11-26 on one H100 80GB HBM3 SXM (PyTorch 2.11,
power limit 700 W) are quoted where the model uses them (step/compute.py, step/attention.py, step/terms.py,
workload/flops.py) and listed in docs/stacks-sources.md §11.
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

REPS = 20
SEQ = 4096
VOCAB = 131072
DEV = "cuda"
BF16 = torch.bfloat16

# name: (hidden h, ffn f, heads a, tp)
MODELS = {"gpt-1.7b": (2048, 8192, 16, 1), "gpt-7.1b": (4096, 16384, 32, 2), "gpt-177b": (12288, 49152, 96, 8)}


def timed(fn, reps: int = REPS, warm: int = 3) -> float:
    """Median seconds of fn() over reps CUDA-event timings."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3)
    return statistics.median(out)


def copy_bw() -> None:
    x = torch.empty(2**30, dtype=torch.uint8, device=DEV)
    y = torch.empty_like(x)
    t = timed(lambda: y.copy_(x))
    print(f"copy 1 GiB: {2 * x.numel() / t / 1e12:.3f} TB/s (read + write)")


def gemm_chunks() -> None:
    for name, (h, f, _a, tp) in MODELS.items():
        m = SEQ
        shapes = {"qkv": (h, 3 * h // tp, tp), "proj": (h // tp, h, 4), "fc1": (h, f // tp, tp), "fc2": (f // tp, h, 4)}
        for gname, (k, n, splits) in shapes.items():
            x = torch.randn(m, k, dtype=BF16, device=DEV)
            w = torch.randn(k, n, dtype=BF16, device=DEV)
            flops = 2.0 * m * k * n
            whole = timed(lambda: x @ w)
            if tp > 1:
                parts = list(x.chunk(splits, dim=0))
                outs = [torch.empty(m // splits, n, dtype=BF16, device=DEV) for _ in parts]
                chunked = timed(lambda: [torch.mm(p, w, out=o) for p, o in zip(parts, outs)])
                extra = f" | {splits} chunks of m={m // splits}: {flops / chunked / 1e12:6.1f} TFLOP/s ({chunked / whole:.3f}x)"
            else:
                extra = ""
            print(f"gemm {name} {gname} m={m} k={k} n={n}: {flops / whole / 1e12:6.1f} TFLOP/s{extra}")


def ring_chunks_on_streams() -> None:
    """The GEMMs Transformer Engine v1.8 runs as ring-exchange chunks (``initialize_ub`` defaults: qkv_fprop, fc1_fprop,
    proj_dgrad, fc2_dgrad; ``comm_gemm_overlap.h`` ``split_overlap_ag``: tp chunks of m/tp rows spread over
    ``_NUM_MAX_UB_STREAMS`` = 3 compute streams), for GPT 177B at TP 8: whole, chunked on one stream, chunked on 3
    streams. proj_dgrad / fc2_dgrad are the backward's input-gradient GEMMs (n = h/tp, f/tp; k = h)."""
    h, f, _a, tp = MODELS["gpt-177b"]
    shapes = {"qkv_fprop": (h, 3 * h // tp), "fc1_fprop": (h, f // tp), "proj_dgrad": (h, h // tp), "fc2_dgrad": (h, f // tp)}
    streams = [torch.cuda.Stream() for _ in range(3)] if DEV == "cuda" else []
    for gname, (k, n) in shapes.items():
        x = torch.randn(SEQ, k, dtype=BF16, device=DEV)
        w = torch.randn(k, n, dtype=BF16, device=DEV)
        parts = list(x.chunk(tp, dim=0))
        outs = [torch.empty(SEQ // tp, n, dtype=BF16, device=DEV) for _ in parts]
        flops = 2.0 * SEQ * k * n

        def on_streams() -> None:
            main = torch.cuda.current_stream()
            for i, (p, o) in enumerate(zip(parts, outs)):
                stream = streams[i % len(streams)]
                stream.wait_stream(main)
                with torch.cuda.stream(stream):
                    torch.mm(p, w, out=o)
            for stream in streams:
                main.wait_stream(stream)
        whole = timed(lambda: x @ w)
        one = timed(lambda: [torch.mm(p, w, out=o) for p, o in zip(parts, outs)])
        three = timed(on_streams) if streams else float("nan")
        print(f"ring {gname} m={SEQ} k={k} n={n}: whole {flops / whole / 1e12:6.1f} | {tp} chunks of m={SEQ // tp} "
              f"one stream {flops / one / 1e12:6.1f} ({one / whole:.3f}x) | 3 streams {flops / three / 1e12:6.1f} "
              f"({three / whole:.3f}x) TFLOP/s")


def wgrad_accumulate() -> None:
    for name, (h, f, _a, tp) in MODELS.items():
        for gname, (k, n) in {"qkv": (h, 3 * h // tp), "fc1": (h, f // tp)}.items():
            x = torch.randn(k, SEQ, dtype=BF16, device=DEV)  # X^T
            dy = torch.randn(SEQ, n, dtype=BF16, device=DEV)
            main = torch.zeros(k, n, dtype=torch.float32, device=DEV)
            flops = 2.0 * SEQ * k * n
            t16 = timed(lambda: x @ dy)
            try:
                t32 = timed(lambda: torch.addmm(main, x, dy, out_dtype=torch.float32))
                how = "addmm out_dtype fp32, beta 1"
            except Exception as err:  # noqa: BLE001 - report what this torch lacks and go on
                t32 = float("nan")
                how = f"unavailable ({type(err).__name__})"
            print(f"wgrad {name} {gname} k={k} n={n}: bf16 out {flops / t16 / 1e12:6.1f} TFLOP/s | "
                  f"fp32 accumulate {flops / t32 / 1e12:6.1f} TFLOP/s ({t32 / t16:.3f}x; {how})")


def megatron_xent(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Forward + backward of megatron/core/tensor_parallel/cross_entropy.py @937571c on one rank."""
    vocab_parallel_logits = logits.float()
    logits_max = torch.max(vocab_parallel_logits, dim=-1)[0]
    vocab_parallel_logits -= logits_max.unsqueeze(dim=-1)
    target_mask = (target < 0) | (target >= logits.size(-1))
    masked_target = target.clone()
    masked_target[target_mask] = 0
    logits_2d = vocab_parallel_logits.view(-1, logits.size(-1))
    masked_target_1d = masked_target.view(-1)
    arange_1d = torch.arange(start=0, end=logits_2d.size()[0], device=logits_2d.device)
    predicted_logits = logits_2d[arange_1d, masked_target_1d].clone().contiguous().view_as(target)
    predicted_logits[target_mask] = 0.0
    exp_logits = vocab_parallel_logits
    torch.exp(vocab_parallel_logits, out=exp_logits)
    sum_exp_logits = exp_logits.sum(dim=-1)
    loss = torch.log(sum_exp_logits) - predicted_logits
    exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))
    # backward
    grad_output = torch.ones_like(loss)
    grad_2d = exp_logits.view(-1, logits.size(-1))
    softmax_update = 1.0 - target_mask.view(-1).float()
    grad_2d[arange_1d, masked_target_1d] -= softmax_update
    exp_logits.mul_(grad_output.unsqueeze(dim=-1))
    return exp_logits.to(logits.dtype)  # autograd casts the fp32 gradient to the bf16 input's dtype


def xent() -> None:
    for tp in (1, 2, 8):
        v = VOCAB // tp
        logits = torch.randn(SEQ, 1, v, dtype=BF16, device=DEV)
        target = torch.randint(0, v, (SEQ, 1), device=DEV)
        t = timed(lambda: megatron_xent(logits, target))
        logits_n = SEQ * v
        print(f"xent tp={tp} V/tp={v}: {t * 1e3:.3f} ms fwd+bwd = {t / logits_n * 1e12:.3f} ps/logit "
              f"(at 2.68 TB/s that is {t / logits_n * 2.68e12:.1f} bytes/logit)")


def _attention_inputs(heads: int, layout: str) -> list[torch.Tensor]:
    """q, k, v of one micro-batch: contiguous [1, a, s, d], or Megatron's [s, 1, a, d] permuted (strided)."""
    def one() -> torch.Tensor:
        if layout == "bhsd":
            return torch.randn(1, heads, SEQ, 128, dtype=BF16, device=DEV)
        return torch.randn(SEQ, 1, heads, 128, dtype=BF16, device=DEV).permute(1, 2, 0, 3)
    return [one().requires_grad_() for _ in range(3)]


def attention() -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for name, (_h, _f, a, tp) in MODELS.items():
        heads = a // tp
        flops_causal = 4.0 * SEQ * SEQ * 128 * heads / 2 * 3.5  # FlashAttention benchmark convention
        for layout in ("bhsd", "sbhd"):
            q, k, v = _attention_inputs(heads, layout)
            for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
                res = {}
                for p in (0.0, 0.1):
                    def step(p=p, backend=backend):
                        with sdpa_kernel(backend):
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
                        o.backward(torch.ones_like(o))
                    res[p] = timed(step)
                print(f"attn {name} heads/gpu={heads} {layout} {backend.name}: fwd+bwd dropout 0: "
                      f"{flops_causal / res[0.0] / 1e12:6.1f} TFLOP/s | dropout 0.1: "
                      f"{flops_causal / res[0.1] / 1e12:6.1f} TFLOP/s ({res[0.1] / res[0.0]:.3f}x)")


def embedding() -> None:
    h, v = MODELS["gpt-1.7b"][0], VOCAB
    weight = torch.randn(v, h, dtype=BF16, device=DEV, requires_grad=True)
    ids = torch.randint(0, v, (1, SEQ), device=DEV)
    main_grad = torch.zeros(v, h, dtype=torch.float32, device=DEV)
    grad_out = torch.ones(1, SEQ, h, dtype=BF16, device=DEV)

    def step() -> None:
        weight.grad = None
        F.embedding(ids, weight).backward(grad_out)
        main_grad.add_(weight.grad)
    t = timed(step)
    print(f"embedding backward + main_grad.add_ V={v} h={h}: {t * 1e3:.3f} ms "
          f"({t / (v * h) * 2.68e12:.1f} bytes/element at 2.68 TB/s)")


def grad_buffer() -> None:
    n = int(1.7e9)  # GPT 1.7B at TP 1: every local parameter
    g = torch.zeros(n, dtype=torch.float32, device=DEV)
    zero, scale, norm = timed(lambda: g.zero_()), timed(lambda: g.mul_(0.5)), timed(lambda: g.norm(2))
    print(f"grad buffer {n:.3g} fp32: zero {zero * 1e3:.2f} ms, scale {scale * 1e3:.2f} ms, norm {norm * 1e3:.2f} ms "
          f"= {(zero + scale + norm) / n * 2.68e12:.1f} bytes/element at 2.68 TB/s")


def main() -> None:
    print(torch.__version__, torch.cuda.get_device_name(), f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs")
    big = torch.randn(8192, 8192, dtype=BF16, device=DEV)
    t = timed(lambda: big @ big)
    print(f"gemm 8192^3: {2 * 8192**3 / t / 1e12:.1f} TFLOP/s")
    for section in (copy_bw, gemm_chunks, ring_chunks_on_streams, wgrad_accumulate, xent, attention, embedding, grad_buffer):
        try:
            section()
        except Exception as err:  # noqa: BLE001 - one failed section must not lose the others
            print(f"{section.__name__} FAILED: {type(err).__name__}: {err}")
    t = timed(lambda: big @ big)
    print(f"gemm 8192^3 again: {2 * 8192**3 / t / 1e12:.1f} TFLOP/s")


if __name__ == "__main__":
    main()
