"""Planner speed (DESIGN §9): layouts evaluated per second on one core, full-search wall time, query latency.

    python benchmarks/planner_speed.py [--repeat 5] [--synthetic 1000000] [--profile]

Prints, for GPT-3 175B on 1,024 A100 (dgx-a100) and Llama-3 70B on 512 H100 (dgx-h100):
- the full search (enumerate → prune → one evaluator call → rank): wall time (best and median of
  --repeat runs), layouts enumerated / evaluated, and evaluated layouts per second of evaluator time;
- throughput of ``evaluate_layouts`` in one call on two large sets of distinct layouts: "grid sweep",
  the valid candidate layouts of that search for 64 global batches (what a batch-size sweep feeds the
  evaluator), and "random", --synthetic random layouts (every column varies, every row distinct: the
  worst case for the step model's grouping of equal sub-keys);
- `commmodel query` end to end as a fresh process (best and median).
Targets: ≥ 1,000,000 layouts/s (the evaluator call inside the real search as well as the large sets); 175B × 1,024 search < 2 s; query < 1 s. Threads are pinned to one.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from commmodel.io.profiles import load_system  # noqa: E402
from commmodel.planner.search import plan  # noqa: E402
from commmodel.step.evaluate import evaluate_layouts  # noqa: E402
from commmodel.step.layout import LayoutArrays  # noqa: E402
from commmodel.step.options import StepOptions  # noqa: E402
from commmodel.workload.presets import get_model  # noqa: E402

CASES = (("gpt3-175b", "dgx-a100", 1024, 1536), ("llama3-70b", "dgx-h100", 512, 512))
"""(model, system, GPUs, global batch): GPT-3's 1536 (Narayanan et al. 2021 §5.1 175B run) and
Llama-3 70B's 512 × 8192 = 4M tokens."""
QUERY = "GPT-3 175B on 1024 A100s"


class TimedEvaluator:
    """``evaluate_layouts`` with its own wall time and the number of layouts it saw recorded."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.layouts = 0

    def __call__(self, model, system, num_gpus, arrays, options):
        start = time.perf_counter()
        out = evaluate_layouts(model, system, num_gpus, arrays, options)
        self.seconds += time.perf_counter() - start
        self.layouts += len(arrays)
        return out


def full_search(model_name: str, system_name: str, num_gpus: int, global_batch: int, repeat: int) -> dict:
    model, system = get_model(model_name), load_system(system_name)
    walls, evals = [], []
    result = None
    for _ in range(repeat):
        timed = TimedEvaluator()
        start = time.perf_counter()
        result = plan(model, system, num_gpus, global_batch=global_batch, evaluator=timed)
        walls.append(time.perf_counter() - start)
        evals.append(timed.seconds)
    best = result.row(0)
    return {"wall_best_s": min(walls), "wall_median_s": statistics.median(walls), "eval_best_s": min(evals),
            "enumerated": result.num_enumerated, "evaluated": result.num_evaluated, "feasible": result.num_feasible,
            "layouts_per_s": result.num_evaluated / min(evals),
            "best": f"tp{best['tp']} pp{best['pp']} dp{best['dp']} mb{best['micro_batch']} zero{best['zero']} "
                    f"{best['recompute']}{' sp' if best['sequence_parallel'] else ''} vpp{best['vpp']}"}


def synthetic_arrays(num_gpus: int, size: int, rng: np.random.Generator) -> LayoutArrays:
    """``size`` distinct layouts of ``num_gpus`` GPUs (all columns vary; global batch makes rows unique)."""
    tp = 2 ** rng.integers(0, 4, size)
    pp = 2 ** rng.integers(0, 5, size)
    dp = np.maximum(num_gpus // (tp * pp), 1)
    micro = 2 ** rng.integers(0, 4, size)
    per_replica = micro * dp
    global_batch = per_replica * (np.arange(size) % 4096 + 1)  # whole micro-batch counts, unique rows
    vpp = np.where(pp > 1, rng.integers(1, 4, size), 1)
    return LayoutArrays(tp=tp, pp=pp, dp=dp, micro_batch=micro, global_batch=global_batch,
                        zero=rng.integers(0, 4, size), recompute=rng.integers(0, 3, size),
                        sequence_parallel=(tp > 1) & (rng.random(size) < 0.5), vpp=vpp)


def grid_sweep_arrays(model, num_gpus: int, gpus_per_node: int, global_batch: int) -> LayoutArrays:
    """Every valid candidate layout of the search for 64 global batches (multiples of the given one / 8)."""
    from commmodel.planner.enumerate import candidate_layouts

    step = max(1, global_batch // 8)
    grids = [candidate_layouts(num_layers=model.num_layers, num_heads=model.num_heads, num_kv_heads=model.num_kv_heads,
                               num_gpus=num_gpus, global_batch=step * k, gpus_per_node=gpus_per_node).columns
             for k in range(1, 65)]
    return LayoutArrays(**{key: np.concatenate([g[key] for g in grids]) for key in grids[0]})


def throughput(model, system, num_gpus: int, arrays: LayoutArrays, repeat: int, profile: bool) -> dict:
    options = StepOptions()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        evaluate_layouts(model, system, num_gpus, arrays, options)
        times.append(time.perf_counter() - start)
    out = {"layouts": len(arrays), "best_s": min(times), "layouts_per_s": len(arrays) / min(times)}
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        evaluate_layouts(model, system, num_gpus, arrays, options)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
        out["profile"] = text.getvalue()
    return out


def query_latency(repeat: int) -> dict:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "commmodel", "query", QUERY, "--json"], capture_output=True,
                              text=True, check=False)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"query failed: {done.stderr.strip()}")
    return {"best_s": min(times), "median_s": statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--synthetic", type=int, default=1_000_000, help="layouts in the throughput run")
    parser.add_argument("--profile", action="store_true", help="print the evaluator's cProfile top functions")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, threads pinned to 1")
    ok = True
    rates: list[float] = []
    for model_name, system_name, num_gpus, batch in CASES:
        r = full_search(model_name, system_name, num_gpus, batch, args.repeat)
        print(f"\n{model_name} on {num_gpus} GPUs of {system_name}, global batch {batch}")
        print(f"  full search: {r['wall_best_s'] * 1e3:.1f} ms best, {r['wall_median_s'] * 1e3:.1f} ms median "
              f"(enumerated {r['enumerated']}, evaluated {r['evaluated']}, feasible {r['feasible']})")
        print(f"  evaluator inside the search: {r['eval_best_s'] * 1e3:.1f} ms = {r['layouts_per_s']:,.0f} layouts/s")
        rates.append(r["layouts_per_s"])
        print(f"  best layout: {r['best']}")
        model, system = get_model(model_name), load_system(system_name)
        sets = (("grid sweep", grid_sweep_arrays(model, num_gpus, system.gpus_per_node, batch)),
                ("random", synthetic_arrays(num_gpus, args.synthetic, np.random.default_rng(0))))
        for label, arrays in sets:
            t = throughput(model, system, num_gpus, arrays, max(2, args.repeat // 2), args.profile)
            print(f"  {label}: {t['layouts']:,} distinct layouts in one call, {t['best_s']:.3f} s = "
                  f"{t['layouts_per_s']:,.0f} layouts/s")
            if "profile" in t:
                print(t["profile"])
            rates.append(t["layouts_per_s"])
        if model_name == "gpt3-175b":
            target = r["wall_best_s"] < 2.0
            ok &= target
            print(f"  target 175B x 1,024 search < 2 s: {'PASS' if target else 'FAIL'}")
    q = query_latency(args.repeat)
    print(f"\nquery {QUERY!r} end to end (new process): {q['best_s']:.3f} s best, {q['median_s']:.3f} s median "
          f"-> target < 1 s: {'PASS' if q['median_s'] < 1.0 else 'FAIL'}")
    ok &= q["median_s"] < 1.0
    fast = min(rates) >= 1e6
    print(f"layouts/s target >= 1,000,000 on one core (inside the search and on the large sets): "
          f"{'PASS' if fast else 'FAIL'} (slowest {min(rates):,.0f}/s)")
    print(f"all targets: {'PASS' if ok and fast else 'FAIL'}")


if __name__ == "__main__":
    main()
