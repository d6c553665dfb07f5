"""GEMM efficiency against shape on one GPU: the measurement behind the step model's d/(d + d½) law
(:func:`commmodel.step.compute.gemm_efficiency`) and its routed-expert GEMMs.

Two modes:

* ``--measure --out DIR`` (on a GPU): times a grid of GEMMs and writes ``gemm_shapes.csv``:

  - ``dense``: ``torch.mm`` in bf16 and ``torch._scaled_mm`` in FP8 (E4M3 operands, unit tensor-wise scales, bf16
    output: the GEMM of a Transformer Engine / torchao FP8 linear, as ``commmodel calibrate compute --dtype fp8``
    times it; ``fp8-rowwise``: one fp32 scale per row of A and per column of B, torchao's rowwise recipe) over
    square sizes and over one small dimension at a time (m, n or k from 128 up, the others 4,096 or
    8,192), plus the block GEMMs of Llama-3 8B and 70B at tp 1…8;
  - ``grouped``: the routed experts' fc1 and fc2 of Qwen3-MoE (h 4,096, expert ffn 1,536), Mixtral (4,096, 14,336)
    and DeepSeek-V3 (7,168, 2,048) with G local experts of r rows each, run as PyTorch's grouped GEMM
    (``torch._grouped_mm``, bf16: what torchtitan's MoE runs, pytorch/torchtitan @9dec370
    ``models/moe.py`` ``_run_experts_grouped_mm``) and as G back-to-back ``torch.mm`` (``loop``: the
    sequential expert MLP).

  ``--part backward`` writes ``gemm_shapes_backward.csv``: the block GEMMs' data gradients (dY · W, both operands
  row-major, ``mm-nn``) and weight gradients (dYᵀ · X, the tokens the inner dimension, ``mm-tn``), whose FLOPs the
  step model prices at the forward GEMM's efficiency, and DeepSeek-V3's experts as grouped GEMMs.

  Each GEMM: ``WARMUP`` untimed calls, then ``REPEATS`` CUDA-event timings of one CUDA graph of ``CALLS``
  back-to-back calls (the GPU's time, without the host's launch cost); the median per call. The eager time of the
  same calls is kept beside it (``eager_time_s``). The GPU, torch, CUDA and clocks go in the CSV header.
* default (anywhere, no GPU needed): reads the measured CSV (``--csv``, default the H100 fixture in
  ``tests/fixtures/device/``) and prints, per shape family, the measured fraction of the dense peak next to the
  model's (:func:`~commmodel.step.compute.gemm_efficiency` on the catalogue's H100 SXM), their ratio and a PASS/FAIL
  on the median ratio of each family (target ``TARGET_RATIO``).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).parent.parent / "tests" / "fixtures" / "device" / "gemm_shapes_h100.csv"
FIXTURE_BACKWARD = FIXTURE.with_name("gemm_shapes_h100_backward.csv")
WARMUP, REPEATS, CALLS = 3, 7, 10
TARGET_RATIO = (0.85, 1.15)
"""Median model ÷ measured efficiency of a family must lie in this band (±15%: the step model's matmul time is the
largest single term of most steps, and the training targets allow 10% MAE)."""
TARGET_FAMILIES = ("block", "block_dgrad", "block_wgrad", "qwen3-moe", "deepseek-v3", "mixtral")
"""The families the target applies to: the GEMMs training steps run (dense blocks, routed experts). The one-small-
dimension sweeps and the squares show the shape law's form and are printed as diagnostics."""
MIN_FLOPS = 4e9
"""GEMMs below this many FLOPs (a few µs on an H100) are bound by kernel latency, not by the shape law: left out."""
SMALL_DIMS = (128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
SQUARE = (256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
EXPERTS = {"qwen3-moe": (4096, 1536), "mixtral": (4096, 14336), "deepseek-v3": (7168, 2048)}
"""(hidden, expert ffn) of each MoE family (Qwen3-235B-A22B, Mixtral 8x7B, DeepSeek-V3 configs on Hugging Face)."""
GROUPS = (1, 4, 8, 16, 32)
ROWS = (128, 256, 512, 1024, 2048, 4096, 8192)
FIELDS = ("family", "kind", "impl", "dtype", "groups", "m", "n", "k", "time_s", "tflops", "eager_time_s", "timing")


def dense_shapes() -> list[tuple[str, int, int, int]]:
    """(family, m, n, k): square, one small dimension, and Llama-3 8B / 70B block GEMMs at tp 1…8 (8,192 tokens)."""
    shapes = [("square", d, d, d) for d in SQUARE]
    shapes += [("small_m", d, 4096, 4096) for d in SMALL_DIMS]
    shapes += [("small_n", 8192, d, 4096) for d in SMALL_DIMS]
    shapes += [("small_k", 8192, 4096, d) for d in SMALL_DIMS]
    for h, ffn, q in ((4096, 14336, 6144), (8192, 28672, 10240)):
        for tp in (1, 2, 4, 8):
            shapes += [("block", 8192, q // tp, h), ("block", 8192, h, h // tp),
                       ("block", 8192, 2 * ffn // tp, h), ("block", 8192, h, ffn // tp)]
    return shapes


def backward_shapes() -> list[tuple[str, str, int, int, int]]:
    """(family, layout, m, n, k) of the block GEMMs' backward: for a forward Y (m × n) = X (m × k) · Wᵀ, the data
    gradient dX (m × k) = dY · W (both operands row-major: "nn") and the weight gradient dW (n × k) = dYᵀ · X (A
    transposed: "tn", its inner dimension the tokens)."""
    out = []
    for family, m, n, k in dense_shapes():
        if family == "block":
            out += [("block_dgrad", "nn", m, k, n), ("block_wgrad", "tn", n, k, m)]
    return out


def grouped_shapes() -> list[tuple[str, str, int, int, int, int]]:
    """(family, kind, G, rows per expert, n, k) of the routed experts' fc1 (n = 2·ffn, k = h) and fc2."""
    out = []
    for family, (h, ffn) in EXPERTS.items():
        for g in GROUPS:
            if g * max(ffn, h) * h > 32 * 4096 * 4096:  # Mixtral holds 8 experts: at most 8 per GPU
                continue
            for r in ROWS:
                out += [(family, "fc1", g, r, 2 * ffn, h), (family, "fc2", g, r, h, ffn)]
    return out


def _time_s(fn, torch) -> float:
    """Median seconds per call of ``fn`` (CUDA events over CALLS back-to-back calls, REPEATS times)."""
    for _ in range(WARMUP):
        fn()
    spans = []
    for _ in range(REPEATS):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(CALLS):
            fn()
        stop.record()
        torch.cuda.synchronize()
        spans.append(start.elapsed_time(stop) / 1e3 / CALLS)
    return statistics.median(spans)


def _graph_time_s(fn, torch) -> float:
    """As :func:`_time_s` with the CALLS calls captured in one CUDA graph and replayed: the GPU's time without the
    host's launch cost (a training step keeps the GPU fed from a queue of launches; one eager ``torch.mm`` here
    takes about 20 µs to launch, longer than the smallest GEMMs run)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS):
            fn()
    return _time_s(graph.replay, torch) / CALLS


def _dense_fn(torch, m: int, n: int, k: int, dtype: str):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    if dtype == "bf16":
        bt = b.t()
        return lambda: torch.mm(a, bt)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()  # B column-major, as _scaled_mm wants
    rowwise = dtype == "fp8-rowwise"  # torchao's rowwise recipe: one fp32 scale per row of A and column of B
    sa = torch.ones((m, 1) if rowwise else (), device="cuda", dtype=torch.float32)
    sb = torch.ones((1, n) if rowwise else (), device="cuda", dtype=torch.float32)
    return lambda: torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def _layout_fn(torch, m: int, n: int, k: int, layout: str):
    """bf16 (m × k) · (k × n) with each operand row-major ("n") or a transposed view ("t"), as autograd hands them
    to cuBLAS in the backward."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16) if layout[0] == "n" else \
        torch.randn(k, m, device="cuda", dtype=torch.bfloat16).t()
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) if layout[1] == "n" else \
        torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t()
    return lambda: torch.mm(a, b)


def _grouped_fn(torch, g: int, r: int, n: int, k: int, impl: str):
    x = torch.randn(g * r, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16)
    if impl == "grouped_mm":
        offs = torch.arange(1, g + 1, device="cuda", dtype=torch.int32) * r
        wt = w.transpose(-2, -1)
        return lambda: torch._grouped_mm(x, wt, offs=offs)
    xs, ws = x.split(r), [w[i].t() for i in range(g)]
    return lambda: [torch.mm(xs[i], ws[i]) for i in range(g)]


def environment(torch) -> list[str]:
    """Header lines: device, torch, CUDA, and nvidia-smi's clocks and power limit."""
    query = "power.limit,clocks.max.sm,clocks.sm,driver_version"
    try:
        smi = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        smi = f"unavailable: {exc}"
    return [f"# device: {torch.cuda.get_device_name()}", f"# torch: {torch.__version__}",
            f"# cuda: {torch.version.cuda}", f"# nvidia-smi {query}: {smi}", f"# date: {time.strftime('%Y-%m-%d')}",
            f"# timing: {WARMUP} warm-up calls, median of {REPEATS} CUDA-event spans of one CUDA graph of {CALLS} "
            f"calls (time_s, tflops; eager where timing says so) and of {CALLS} eager calls (eager_time_s)",
            "# command: python benchmarks/gemm_shapes.py --measure --out DIR"]


def _row(family, kind, impl, dtype, g, m, n, k, fn, torch) -> dict:
    try:
        call = fn()
        eager_s = _time_s(call, torch)
    except Exception as exc:  # noqa: BLE001 - one unsupported shape must not lose the others
        print(f"{family} {kind} {impl} {dtype} G{g} {m}x{n}x{k}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
        return {}
    try:
        seconds, timing = _graph_time_s(call, torch), "graph"
    except Exception as exc:  # noqa: BLE001 - a shape that cannot be captured keeps its eager time
        print(f"{family} {kind} {impl} {dtype} G{g} {m}x{n}x{k}: no graph ({type(exc).__name__})", flush=True)
        seconds, timing = eager_s, "eager"
    tflops = 2.0 * g * m * n * k / seconds / 1e12
    values = (family, kind, impl, dtype, g, m, n, k, f"{seconds:.6e}", f"{tflops:.2f}", f"{eager_s:.6e}", timing)
    return dict(zip(FIELDS, values))


def _write(writer, f, torch, rows) -> None:
    """Time each (family, kind, impl, dtype, G, m, n, k, factory) and write its row."""
    for family, kind, impl, dtype, g, m, n, k, factory in rows:
        row = _row(family, kind, impl, dtype, g, m, n, k, factory, torch)
        if row:
            writer.writerow(row)
            f.flush()
    torch.cuda.empty_cache()


def _part_rows(torch, part: str) -> list[tuple]:
    """The GEMMs of one ``--part``: "forward" (dense and grouped forward shapes), "backward" (the block GEMMs'
    data and weight gradients, and DeepSeek-V3's experts as grouped GEMMs)."""
    rows: list[tuple] = []
    if part == "forward":
        for dtype in ("bf16", "fp8", "fp8-rowwise"):
            rows += [(fam, "dense", "mm", dtype, 1, m, n, k,
                      lambda m=m, n=n, k=k, d=dtype: _dense_fn(torch, m, n, k, d)) for fam, m, n, k in dense_shapes()]
        impls = ("grouped_mm", "loop")
        experts = grouped_shapes()
    else:
        for fam, lay, m, n, k in backward_shapes():
            rows.append((fam, "dense", f"mm-{lay}", "bf16", 1, m, n, k,
                         lambda m=m, n=n, k=k, lay=lay: _layout_fn(torch, m, n, k, lay)))
        impls = ("grouped_mm",)
        experts = [e for e in grouped_shapes() if e[0] == "deepseek-v3"]
    for family, kind, g, r, n, k in experts:
        rows += [(family, kind, impl, "bf16", g, r, n, k,
                  lambda g=g, r=r, n=n, k=k, i=impl: _grouped_fn(torch, g, r, n, k, i)) for impl in impls]
    return rows


def measure(out: Path, part: str) -> None:
    """Time every shape of ``part`` and write ``gemm_shapes.csv`` (``gemm_shapes_backward.csv``) under ``out``, rows
    flushed as they come."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    path = out / ("gemm_shapes.csv" if part == "forward" else f"gemm_shapes_{part}.csv")
    with path.open("w", newline="") as f:
        f.write("\n".join(environment(torch)) + "\n")
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        _write(writer, f, torch, _part_rows(torch, part))
    print(f"wrote {path}", flush=True)


def read_rows(path: Path) -> list[dict]:
    """The measured rows of a ``gemm_shapes.csv`` (header comments skipped)."""
    with path.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def model_efficiency(system, row: dict) -> float:
    """The step model's fraction of the dense peak for one measured GEMM (d = min(rows per group, n, k))."""
    from commmodel.step.compute import gemm_efficiency
    from commmodel.workload.flops import Gemm

    m, n, k = (np.array([float(row[x])]) for x in "mnk")
    return float(gemm_efficiency(system, Gemm("fc1", m * n * k * 2, m, n, k, False), row["dtype"])[0])


def compare(paths: list[Path], system_name: str) -> int:
    """Print measured and modelled efficiency per family; 0 when every family's median ratio is in the band."""
    from commmodel.io.profiles import load_system
    from commmodel.step.precision import linear_peak_key

    system = load_system(system_name)
    groups: dict[tuple, list[tuple[float, float]]] = {}
    skipped = 0
    for row in (row for path in paths for row in read_rows(path)):
        if 2.0 * int(row["groups"]) * int(row["m"]) * int(row["n"]) * int(row["k"]) < MIN_FLOPS:
            skipped += 1
            continue
        peak = system.gpu.peak_for(linear_peak_key(row["dtype"]))
        measured = float(row["tflops"]) * 1e12 / peak
        key = (row["kind"] if row["kind"] == "dense" else "expert", row["impl"], row["dtype"], row["family"])
        groups.setdefault(key, []).append((measured, model_efficiency(system, row)))
    print(f"GEMM efficiency (fraction of the {system.gpu.name} dense peak): measured {', '.join(p.name for p in paths)} "
          "vs the step model")
    print(f"{'kind':<7}{'impl':<11}{'dtype':<12}{'family':<13}{'n':>4}{'measured':>10}{'model':>8}{'ratio':>8}"
          f"{'min':>7}{'max':>7}")
    failed = 0
    for key, pairs in sorted(groups.items()):
        ratios = [mod / meas for meas, mod in pairs]
        med = statistics.median(ratios)
        target = key[3] in TARGET_FAMILIES
        ok = TARGET_RATIO[0] <= med <= TARGET_RATIO[1]
        failed += target and not ok
        verdict = ("PASS" if ok else "FAIL") if target else "(diagnostic)"
        print(f"{key[0]:<7}{key[1]:<11}{key[2]:<12}{key[3]:<13}{len(pairs):>4}"
              f"{statistics.median(p[0] for p in pairs):>10.3f}{statistics.median(p[1] for p in pairs):>8.3f}"
              f"{med:>8.2f}{min(ratios):>7.2f}{max(ratios):>7.2f}  {verdict}")
    print(f"({skipped} GEMMs under {MIN_FLOPS:.0e} FLOPs left out: kernel-latency bound)")
    print(f"target: median model/measured in [{TARGET_RATIO[0]}, {TARGET_RATIO[1]}] for {', '.join(TARGET_FAMILIES)}: "
          f"{'PASS' if not failed else f'FAIL ({failed} families)'}")
    return 0 if not failed else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measure", action="store_true", help="time the grid on this machine's GPU")
    parser.add_argument("--part", choices=("forward", "backward"), default="forward",
                        help="which GEMMs --measure times (forward: dense and expert forward shapes; backward: the "
                             "block GEMMs' gradients and DeepSeek-V3's experts)")
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for gemm_shapes.csv (--measure)")
    parser.add_argument("--csv", type=Path, nargs="+", default=[FIXTURE, FIXTURE_BACKWARD],
                        help="measured CSVs to compare with the model (default: the H100 fixtures)")
    parser.add_argument("--system", default="dgx-h100", help="catalogue system whose GPU the CSV was measured on")
    args = parser.parse_args()
    if args.measure:
        measure(args.out, args.part)
        return 0
    missing = [str(p) for p in args.csv if not p.exists()]
    if missing:
        print(f"no measurement at {', '.join(missing)}: run with --measure on a GPU first", file=sys.stderr)
        return 2
    return compare(args.csv, args.system)


if __name__ == "__main__":
    sys.exit(main())
