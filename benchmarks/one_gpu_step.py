"""One whole training step on one GPU, timed by phase and its memory read back: the measurement the step model's
``estimate --gpus 1`` predicts (compute, loss, optimizer, weights/gradients/optimizer/activations/buffers).

The model is torchtitan's Llama op for op (the block of ``benchmarks/eager_elementwise.py``, pytorch/torchtitan
@9dec370 ``models/llama/model.py``), with its token embedding, final RMSNorm, untied output projection and loss
(``train.py`` loss_fn: ``F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))``), trained as each
stack does it on a one-rank process group (NCCL on a GPU, gloo on the CPU):

- ``fsdp2``: ``fully_shard`` per block and on the root, ``MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32)``, every block but the last resharded after its forward (torchtitan ``parallelize_llama.py``
  @9dec370 ``apply_fsdp``); fp32 sharded parameters.
- ``ddp``: fp32 parameters wrapped in ``DistributedDataParallel`` (25 MiB buckets), forward and loss under
  ``torch.autocast(bfloat16)``.

Both: ``torch.optim.AdamW(fused=True)`` (torchtitan ``optimizer.implementation = 'fused'``), gradient clipping
``clip_grad_norm_(max_norm=1.0, foreach=True)``, ``zero_grad(set_to_none=True)``; eager (no torch.compile);
SDPA with the kernel PyTorch picks (``default``) or FlashAttention-2 forced (``flash``).

Each config: 3 warm-up steps, then ``--steps`` timed steps, CUDA events at forward+loss / backward / optimizer
(clip, step, zero_grad); medians. Memory: ``max_memory_allocated`` over the timed steps, and the allocation after
the optimizer (parameters + optimizer states), after the backward (+ gradients). One profiled step of the configs
in ``TRACED`` is written as a Chrome trace (``torch.profiler``, ``trace_NAME.json.gz``) next to the JSON. Each config
runs in a fresh process. ``--loss`` times torchtitan's loss alone and lists its kernels.

Run on a GPU: ``python benchmarks/one_gpu_step.py --out DIR`` (writes ``one_gpu_step.json`` and the traces).
``--tiny`` runs small shapes on the CPU (gloo), to check the script without a GPU.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
from eager_elementwise import Tagger, block, block_shapes, freqs, rms_norm  # noqa: E402

WARM_STEPS = 3
L8B = {"h": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 128256, "head_dim": 128}
"""Llama-3 8B widths (torchtitan llama3 '8B' flavor; Meta's Llama 3 config)."""
W2B = {"h": 2048, "heads": 16, "kv_heads": 8, "ffn": 8192, "vocab": 128256, "head_dim": 128}
"""A 2,048-wide Llama-3 (head dim 128, untied output): the regime where the loss and the optimizer weigh most."""
TRACED = (0, 4, 5, 7)
"""The configs (indices in CONFIGS) of which one step is profiled."""
TINY = {"h": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 512, "head_dim": 16}

# name, stack, widths, layers, seq, micro-batch, SDPA kernel, data-parallel world (> 1: a fake process group)
CONFIGS = [
    ("8b-l4-s4k-b2", "fsdp2", L8B, 4, 4096, 2, "default", 1),
    ("8b-l2-s4k-b2", "fsdp2", L8B, 2, 4096, 2, "default", 1),
    ("8b-l4-s8k-b1", "fsdp2", L8B, 4, 8192, 1, "default", 1),
    ("8b-l4-s4k-b2-flash", "fsdp2", L8B, 4, 4096, 2, "flash", 1),
    ("8b-l4-s4k-b2-ddp", "ddp", L8B, 4, 4096, 2, "default", 1),
    ("2b-l12-s4k-b2", "fsdp2", W2B, 12, 4096, 2, "default", 1),
    ("2b-l12-s4k-b2-ddp", "ddp", W2B, 12, 4096, 2, "default", 1),
    ("8b-l4-s4k-b2-dp8", "fsdp2", L8B, 4, 4096, 2, "default", 8),
    ("8b-l4-s4k-b2-dp64", "fsdp2", L8B, 4, 4096, 2, "default", 64),
    ("8b-l16-s8k-b1-dp8", "fsdp2", L8B, 16, 8192, 1, "default", 8),
    ("8b-l32-s8k-b1-dp8-sac", "fsdp2", L8B, 32, 8192, 1, "flash", 8),
    ("8b-l32-s8k-b2-dp64-sac", "fsdp2", L8B, 32, 8192, 2, "flash", 64),
    ("8b-l8-s8k-b1-dp8-sac", "fsdp2", L8B, 8, 8192, 1, "flash", 8),
    ("8b-l8-s8k-b1-dp8-sac-compile", "fsdp2", L8B, 8, 8192, 1, "flash", 8),
]
OP_SAC = ("8b-l32-s8k-b1-dp8-sac", "8b-l32-s8k-b2-dp64-sac", "8b-l8-s8k-b1-dp8-sac", "8b-l8-s8k-b1-dp8-sac-compile")
"""Configs whose blocks run torchtitan's op-level selective activation checkpointing (parallelize_llama.py @9dec370
``_apply_ac_to_transformer_block``, ``selective_ac_option = 'op'``): the whole Llama-3 8B as torchtitan's December
2024 H100 tables ran it (FlashAttention-2, which that torch's SDPA picked)."""
COMPILED = ("8b-l8-s8k-b1-dp8-sac-compile",)
"""Configs whose blocks are each wrapped in ``torch.compile`` before FSDP2, as torchtitan's ``apply_compile``
(parallelize_llama.py @9dec370: per TransformerBlock, after activation checkpointing; fullgraph off here)."""
"""With a world above 1 the process joins a fake process group of that size (torch.testing._internal.distributed.
fake_pg: every collective returns at once, moving nothing): FSDP2 then runs its multi-rank path, its shards 1/world
of each parameter, the all-gather copy-in / copy-out and the reduce-scatter's chunk_cat included, i.e. one rank of
a data-parallel job without its communication."""


SAC_SAVE = ("mm", "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention", "abs", "max")
"""torchtitan @9dec370 ``_save_list`` (aten ops; its reduce-scatter entry has no op in a data-parallel-only run)."""


def op_sac_context():
    """torchtitan's op-SAC policy: save every output of an op in ``SAC_SAVE`` except every second mm."""
    from collections import defaultdict

    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    save = {getattr(torch.ops.aten, name).default for name in SAC_SAVE}
    meta: dict = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        keep = func in save and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Block(nn.Module):
    def __init__(self, shape: dict, device: str, sac: bool = False) -> None:
        super().__init__()
        dims = block_shapes(shape["h"], shape["heads"], shape["kv_heads"], shape["ffn"], shape["head_dim"])
        self.w = nn.ParameterDict({k: nn.Parameter(torch.randn(*v, device=device) * 0.02) for k, v in dims.items()})
        self.sac = sac

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        # a fresh Tagger per call: torch.compile breaks its graph on a checkpointed region that mutates an outer object
        if not self.sac:
            return block(x, dict(self.w.items()), freqs_cis, Tagger())
        from torch.utils.checkpoint import checkpoint
        return checkpoint(lambda y: block(y, dict(self.w.items()), freqs_cis, Tagger()), x, use_reentrant=False,
                          context_fn=op_sac_context, preserve_rng_state=False)


class Llama(nn.Module):
    def __init__(self, shape: dict, layers: int, seq: int, device: str, sac: bool = False) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(shape["vocab"], shape["h"], device=device)
        self.layers = nn.ModuleList(Block(shape, device, sac) for _ in range(layers))
        self.norm = nn.Parameter(torch.ones(shape["h"], device=device))
        self.output = nn.Linear(shape["h"], shape["vocab"], bias=False, device=device)
        self.register_buffer("freqs_cis", freqs(seq, device, shape["head_dim"]), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.freqs_cis)
        return self.output(rms_norm(h, self.norm))


def wrap(model: Llama, stack: str, world: int, device: str) -> nn.Module:
    if stack == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mesh = init_device_mesh(device, (world,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for i, layer in enumerate(model.layers):
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=i < len(model.layers) - 1)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=True)
    return model


def sdpa_context(kernel: str):
    from contextlib import nullcontext
    if kernel == "default":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(SDPBackend.FLASH_ATTENTION)


class Events:
    """CUDA events on a GPU, wall clock after a synchronize on the CPU."""

    def __init__(self, cuda: bool) -> None:
        self.cuda, self.marks = cuda, []

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def spans_ms(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:])]


def one_step(model, optimizer, tokens, labels, stack: str, kernel: str, events: Events, memory: dict) -> None:
    cuda = tokens.is_cuda
    events.mark()
    with sdpa_context(kernel), torch.autocast("cuda" if cuda else "cpu", torch.bfloat16, enabled=stack == "ddp"):
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
    del logits  # torchtitan train.py @9dec370: 'del pred' before the backward
    events.mark()
    if cuda:
        memory["after_forward"] = torch.cuda.memory_allocated()
    with sdpa_context(kernel):
        loss.backward()
    events.mark()
    if cuda:
        memory["after_backward"] = torch.cuda.memory_allocated()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, foreach=True)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    events.mark()
    if cuda:
        memory["after_optimizer"] = torch.cuda.memory_allocated()


def run_config(config: tuple, steps: int, device: str, trace_path: Path | None) -> dict:
    name, stack, shape, layers, seq, batch, kernel, world = config
    cuda = device == "cuda"
    model = Llama(shape, layers, seq, device, sac=name in OP_SAC)
    params = sum(p.numel() for p in model.parameters())
    if name in COMPILED:
        for i, layer in enumerate(model.layers):
            model.layers[i] = torch.compile(layer)
    model = wrap(model, stack, world, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, shape["vocab"], (batch, seq), device=device)
    labels = torch.randint(0, shape["vocab"], (batch, seq), device=device)
    memory: dict = {"before_step": torch.cuda.memory_allocated() if cuda else 0}
    for _ in range(WARM_STEPS):
        one_step(model, optimizer, tokens, labels, stack, kernel, Events(cuda), memory)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    phases = []
    for _ in range(steps):
        events = Events(cuda)
        one_step(model, optimizer, tokens, labels, stack, kernel, events, memory)
        phases.append(events.spans_ms())
    if cuda:
        memory["peak_allocated"] = torch.cuda.max_memory_allocated()
        memory["peak_reserved"] = torch.cuda.max_memory_reserved()
    if trace_path is not None:
        write_trace(model, optimizer, tokens, labels, stack, kernel, trace_path)
    fwd, bwd, opt = (statistics.median(p[i] for p in phases) for i in range(3))
    del model, optimizer
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return {"name": name, "stack": stack, "shape": shape, "layers": layers, "seq": seq, "micro_batch": batch,
            "kernel": kernel, "world": world, "ac": "op" if name in OP_SAC else "none",
            "compiled": name in COMPILED, "params": params, "steps": steps, "forward_ms": fwd, "backward_ms": bwd,
            "optimizer_ms": opt, "step_ms": statistics.median(sum(p) for p in phases),
            "step_ms_all": [round(sum(p), 3) for p in phases], "memory_bytes": memory}


def write_trace(model, optimizer, tokens, labels, stack: str, kernel: str, path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if tokens.is_cuda else [])
    with profile(activities=activities) as prof:
        one_step(model, optimizer, tokens, labels, stack, kernel, Events(tokens.is_cuda), {})
    raw = path.with_suffix("")
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()


def environment(cuda: bool) -> dict:
    env = {"torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", os.environ.get("PYTORCH_ALLOC_CONF", ""))}
    if cuda:
        env.update(device=torch.cuda.get_device_name(), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version(), nccl=".".join(map(str, torch.cuda.nccl.version())))
        query = "power.limit,clocks.max.sm,clocks.sm,driver_version,memory.total"
        try:
            env["nvidia_smi"] = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"],
                                               capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            env["nvidia_smi"] = f"unavailable: {exc}"
    return env


def init_group(world: int, cuda: bool) -> None:
    """A one-rank NCCL (GPU) or gloo (CPU) group, or rank 0 of a fake group of ``world`` ranks."""
    if world > 1:
        from torch.testing._internal.distributed.fake_pg import FakeStore
        torch.distributed.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.distributed.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)


def measure(out: Path, steps: int, tiny: bool, only: str) -> dict:
    """The config named ``only``, in this process."""
    cuda = torch.cuda.is_available() and not tiny
    device = "cuda" if cuda else "cpu"
    configs = [(n, s, TINY, max(1, layers // 2), 64, b, k, w) for n, s, _, layers, _, b, k, w in CONFIGS] if tiny \
        else CONFIGS
    init_group(next(c[7] for c in configs if c[0] == only), cuda)
    out.mkdir(parents=True, exist_ok=True)
    results = {"environment": environment(cuda), "configs": []}
    for i, config in enumerate(configs):
        if config[0] != only:
            continue
        try:
            trace = out / f"trace_{config[0]}.json.gz" if i in TRACED else None
            row = run_config(config, steps, device, trace)
        except Exception as exc:  # noqa: BLE001 - one failed config must not lose the others
            row = {"name": config[0], "error": f"{type(exc).__name__}: {exc}"[:500]}
        results["configs"].append(row)
        print(summary_line(row), flush=True)
    torch.distributed.destroy_process_group()
    return results


def measure_each(out: Path, steps: int, tiny: bool, names: list[str]) -> None:
    """Every config in ``names`` in a fresh process (one config's allocations, e.g. DDP's buckets, must not leak into
    the next), merged into ``one_gpu_step.json`` after each."""
    merged: dict = {"environment": None, "configs": []}
    for name in names:
        part = out / f"part_{name}.json"
        cmd = [sys.executable, __file__, "--only", name, "--steps", str(steps), "--out", str(out), "--part", str(part)]
        done = subprocess.run(cmd + (["--tiny"] if tiny else []), capture_output=True, text=True, timeout=600)
        print("\n".join(line for line in done.stdout.splitlines() if "USDT" not in line), flush=True)
        if done.returncode != 0 or not part.exists():
            merged["configs"].append({"name": name, "error": f"exit {done.returncode}: {done.stderr[-400:]}"})
        else:
            data = json.loads(part.read_text())
            merged["environment"] = data["environment"]
            merged["configs"] += data["configs"]
            part.unlink()
        (out / "one_gpu_step.json").write_text(json.dumps(merged, indent=1))


def loss_bench(out: Path, tiny: bool, reps: int = 20) -> None:
    """torchtitan's loss (train.py @9dec370 loss_fn) forward + backward on [2, s, V] bf16 logits, alone ('leaf') and
    behind the output projection ('linear', the projection's GEMMs left out of the kernel table): median ms of CUDA
    events, and one profiled run's kernels (name, count, ms) in ``loss_kernels.json``."""
    from torch.profiler import ProfilerActivity, profile
    cuda = torch.cuda.is_available() and not tiny
    device, (batch, seq, h, vocab) = ("cuda", (2, 4096, 4096, 128256)) if cuda else ("cpu", (2, 64, 64, 512))
    labels = torch.randint(0, vocab, (batch, seq), device=device)
    leaf = (torch.randn(batch, seq, vocab, device=device, dtype=torch.bfloat16) * 2).requires_grad_()
    hidden = torch.randn(batch, seq, h, device=device, dtype=torch.bfloat16, requires_grad=True)
    proj = nn.Linear(h, vocab, bias=False, device=device, dtype=torch.bfloat16)
    variants = {"leaf": lambda: leaf, "linear": lambda: proj(hidden)}
    report = {"logits": batch * seq * vocab, "variants": {}}
    for name, make in variants.items():
        def step() -> None:
            logits = make()
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
            del logits
            loss.backward()
        times = []
        for i in range(reps + 3):
            events = Events(cuda)
            events.mark()
            step()
            events.mark()
            times += events.spans_ms() if i >= 3 else []
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
            step()
        kernels = [(e.key, e.count, e.device_time_total / 1e3) for e in prof.key_averages()
                   if e.device_time_total > 0 and not e.key.startswith(("aten::", "autograd::", "Optimizer"))]
        report["variants"][name] = {"median_ms": statistics.median(times), "kernels": kernels}
        print(f"loss {name:7s} fwd+bwd {statistics.median(times):.2f} ms", flush=True)
        for key, count, ms in sorted(kernels, key=lambda k: -k[2])[:12]:
            print(f"    {ms:8.3f} ms {count:3d}  {key[:100]}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "loss_kernels.json").write_text(json.dumps(report, indent=1))


def summary_line(row: dict) -> str:
    if "error" in row:
        return f"{row['name']:20s} failed: {row['error']}"
    mem = row["memory_bytes"]
    peak = f" peak {mem['peak_allocated'] / 1e9:.2f} GB" if "peak_allocated" in mem else ""
    return (f"{row['name']:20s} {row['params'] / 1e9:.3f}B step {row['step_ms']:.1f} ms = fwd {row['forward_ms']:.1f}"
            f" + bwd {row['backward_ms']:.1f} + opt {row['optimizer_ms']:.1f}{peak}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("one_gpu_step_out"))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--tiny", action="store_true", help="small shapes on the CPU (gloo): checks the script")
    parser.add_argument("--only", help="one config, in this process (the driver runs each so)")
    parser.add_argument("--part", type=Path, help="with --only: where this config's JSON goes")
    parser.add_argument("--loss", action="store_true", help="time torchtitan's loss alone, by kernel")
    parser.add_argument("--configs", help="comma-separated config names (default: all)")
    args = parser.parse_args()
    if args.loss:
        loss_bench(args.out, args.tiny)
    elif args.only:
        args.part.write_text(json.dumps(measure(args.out, args.steps, args.tiny, args.only), indent=1))
    else:
        unknown = set(args.configs.split(",")) - {c[0] for c in CONFIGS} if args.configs else set()
        if unknown:
            parser.error(f"unknown config(s) {', '.join(sorted(unknown))}: use {', '.join(c[0] for c in CONFIGS)}")
        measure_each(args.out, args.steps, args.tiny, args.configs.split(",") if args.configs else
                     [c[0] for c in CONFIGS])
