"""Planner speed as a user meets it (issue 17, DESIGN §9): fresh-process medians beside in-process components.

    python benchmarks/planner_speed.py [--runs 7] [--synthetic 1000000]

Fresh processes (median and range of --runs, each a new ``python`` that imports the package, loads the
profiles and runs the figure once: what ``commmodel plan`` pays, imports excluded):

* ``search_s`` of GPT-3 175B on 1,024 A100 (dgx-a100, the default space: ``plan()`` without a space searches the
  default stack's, as ``commmodel plan`` does)                              target ≤ 8 ms
  and, beside it without a target, the same search over the generic ``SearchSpace()`` (every stack's knobs: ZeRO
  0-3, ...), the figure this line measured before plan()'s default became the stack's search
* layouts/s end to end on a large space: Llama-3 405B, 720,720 GPUs of dgx-h100, 32K context,
  ``--max-tp 64`` (evaluated layouts / search_s; ≥ 30k evaluated)          target ≥ 1,000,000 /s
  ("evaluated" = the layouts that pass the divisibility rules, each evaluated for memory per GPU; the
  full step model runs on the "feasible" ones that fit: both counts are printed)
* scale: the 175B search at 2^24 GPUs (the CLI cap, ``limits.MAX_GPUS``) and at 2^26 (Python API):
  wall time and tracemalloc peak of the search                            target < 0.5 s and < 100 MB
* ``plan --json`` output work for 100k ranked rows (the layouts' column table + the --json writer)
  target ≤ 0.2 s

In process (median of --runs warm calls in one process):

* the fixed cost of one evaluator call: ``evaluate_layouts`` on one layout (a Calculon-style single
  layout evaluation, ``estimate`` without advice)                           target ≤ 1 ms
* warm ``plan`` wall time of each case, and ``evaluate_layouts`` throughput on --synthetic random
  distinct layouts (every column varies: the worst case for the step model's grouping).

Threads are pinned to one. Exit status 1 when any target fails.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

REPO_DIR = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, sys, time, tracemalloc
from commmodel.io.profiles import load_system
from commmodel.planner.search import plan
from commmodel.planner.space import SearchSpace
from commmodel.workload.presets import get_model
case = json.loads(sys.argv[1])
model = get_model(case["model"])
if case.get("seq_len"):
    model = model.model_copy(update={"seq_len": case["seq_len"]})
if case.get("layers"):
    model = model.model_copy(update={"num_layers": case["layers"]})
system = load_system(case["system"])
space = SearchSpace(**case["space"]) if "space" in case else None  # None: the default stack's search, as the CLI
if case.get("trace"):
    tracemalloc.start()
start = time.perf_counter()
result = plan(model, system, case["gpus"], space=space, global_batch=case.get("global_batch"))
wall_s = time.perf_counter() - start
peak = tracemalloc.get_traced_memory()[1] if case.get("trace") else 0
out = {"search_s": result.search_s, "wall_s": wall_s, "evaluated": result.num_evaluated, "peak_bytes": peak,
       "feasible": result.num_feasible}
if case.get("rows"):
    from commmodel.cli.plan import layout_records
    from commmodel.io.json_text import dumps_indented
    start = time.perf_counter()
    table = layout_records(result, case["rows"])
    out["records_s"] = time.perf_counter() - start
    text = dumps_indented({"layouts": table})
    out["output_s"] = time.perf_counter() - start
    records = result.records(case["rows"])
    start = time.perf_counter()
    json.dumps(records, indent=2)
    out["stdlib_indent_s"] = time.perf_counter() - start
    out["rows"] = min(case["rows"], result.num_feasible)
print(json.dumps(out))
"""

GPT3 = {"model": "gpt3-175b", "system": "dgx-a100", "gpus": 1024}
LARGE = {"model": "llama3-405b", "system": "dgx-h100", "gpus": 720720, "seq_len": 32768, "space": {"max_tp": 64}}
ROWS = {"model": "llama2-7b", "layers": 96, "seq_len": 1024, "system": "dgx-h100", "gpus": 720720,
        "global_batch": 720720 * 5040, "space": {"max_tp": 64, "micro_batches": list(range(1, 17))}, "rows": 100_000}
"""A space with ≥ 100k feasible layouts (139k: Llama-2 7B's shape at 96 layers and 1K tokens fits almost everywhere;
240 divisors of 720,720 × 16 micro-batches, a global batch most of them divide)."""


def fresh(case: dict, runs: int) -> list[dict]:
    """``runs`` fresh processes of :data:`_CHILD` on ``case``."""
    out = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(case)], capture_output=True, text=True,
                              check=False, cwd=REPO_DIR)
        if done.returncode != 0:
            raise SystemExit(f"{case}: {done.stderr.strip().splitlines()[-1]}")
        out.append(json.loads(done.stdout))
    return out


def spread(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    """'median (min-max)' of ``values`` × ``scale``, ``digits`` after the point."""
    low, mid, high = (f"{x * scale:,.{digits}f}" for x in (min(values), statistics.median(values), max(values)))
    return f"{mid} ({low}-{high})"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def fresh_figures(runs: int) -> list[bool]:
    """Print the fresh-process figures; their PASS/FAIL."""
    verdicts = []
    r = fresh(GPT3, runs)
    ok = statistics.median(x["search_s"] for x in r) <= 8e-3
    print(f"175B on 1,024 A100: search_s {spread([x['search_s'] for x in r], 1e3)} ms "
          f"({r[0]['evaluated']:,} evaluated, {r[0]['feasible']:,} fit) -> target ≤ 8 ms median: {verdict(ok)}")
    verdicts.append(ok)
    r = fresh({**GPT3, "space": {}}, runs)
    print(f"  (component) the same over the generic SearchSpace(): search_s {spread([x['search_s'] for x in r], 1e3)} "
          f"ms ({r[0]['evaluated']:,} evaluated, {r[0]['feasible']:,} fit)")
    r = fresh(LARGE, runs)
    rates = [x["evaluated"] / x["search_s"] for x in r]
    ok = statistics.median(rates) >= 1e6
    print(f"405B on 720,720 H100, 32K, max-tp 64: {r[0]['evaluated']:,} evaluated ({r[0]['feasible']:,} fit), search_s "
          f"{spread([x['search_s'] for x in r], 1e3)} ms = {spread(rates, 1e-3)} k layouts/s "
          f"-> target ≥ 1,000k/s median: {verdict(ok)}")
    verdicts.append(ok)
    for gpus, how in ((2**24, "the CLI cap"), (2**26, "Python API, above the CLI cap")):
        r = fresh({**GPT3, "gpus": gpus, "trace": True}, runs)
        walls, peaks = [x["wall_s"] for x in r], [x["peak_bytes"] for x in r]
        ok = statistics.median(walls) < 0.5 and max(peaks) < 100e6
        print(f"175B on 2^{gpus.bit_length() - 1} = {gpus:,} GPUs ({how}): {r[0]['evaluated']:,} evaluated, search "
              f"{spread(walls, 1e3)} ms, peak {max(peaks) / 1e6:.1f} MB -> target < 0.5 s and < 100 MB: {verdict(ok)}")
        verdicts.append(ok)
    r = fresh(ROWS, max(3, runs // 2))
    ok = statistics.median(x["output_s"] for x in r) <= 0.2
    print(f"plan --json output work for {r[0]['rows']:,} rows (column table + the --json writer): "
          f"{spread([x['output_s'] for x in r], 1e3)} ms, of which building the table "
          f"{spread([x['records_s'] for x in r], 1e3)} ms (json.dumps(indent=2) alone: "
          f"{spread([x['stdlib_indent_s'] for x in r], 1e3)} ms) -> target ≤ 200 ms: {verdict(ok)}")
    verdicts.append(ok)
    return verdicts


def in_process(runs: int, synthetic: int) -> list[bool]:
    """Print the in-process component figures; their PASS/FAIL."""
    import numpy as np

    from commmodel.io.profiles import load_system
    from commmodel.planner.search import plan
    from commmodel.planner.space import SearchSpace
    from commmodel.step.evaluate import evaluate_layouts
    from commmodel.step.layout import Layout, LayoutArrays
    from commmodel.step.options import StepOptions
    from commmodel.workload.presets import get_model

    model, system, options = get_model("gpt3-175b"), load_system("dgx-a100"), StepOptions()
    one = LayoutArrays.from_layouts([Layout(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536)])
    evaluate_layouts(model, system, 1024, one, options)
    times = []
    for _ in range(max(runs, 50)):
        start = time.perf_counter()
        evaluate_layouts(model, system, 1024, one, options)
        times.append(time.perf_counter() - start)
    ok = statistics.median(times) <= 1e-3
    print(f"one layout (estimate without advice: evaluate_layouts on 1 layout): {spread(times, 1e3, 2)} ms "
          f"-> target ≤ 1 ms median: {verdict(ok)}")
    large = get_model("llama3-405b").model_copy(update={"seq_len": 32768})
    for label, args in (("175B on 1,024 A100", (model, system, 1024, None)),
                        ("175B on 1,024 A100, generic SearchSpace()", (model, system, 1024, SearchSpace())),
                        ("405B on 720,720 H100", (large, load_system("dgx-h100"), 720720, SearchSpace(max_tp=64)))):
        walls = [plan(*args[:3], space=args[3]).search_s for _ in range(runs)]
        print(f"warm plan {label}: {spread(walls, 1e3)} ms")
    rng = np.random.default_rng(0)
    arrays = synthetic_arrays(1024, synthetic, rng)
    walls = []
    for _ in range(max(2, runs // 3)):
        start = time.perf_counter()
        evaluate_layouts(model, system, 1024, arrays, options)
        walls.append(time.perf_counter() - start)
    print(f"evaluate_layouts on {synthetic:,} random distinct layouts: {spread(walls)} s = "
          f"{synthetic / statistics.median(walls):,.0f} layouts/s (component; no target)")
    return [ok]


def synthetic_arrays(num_gpus: int, size: int, rng):
    """``size`` distinct layouts of ``num_gpus`` GPUs (all columns vary; global batch makes rows unique)."""
    import numpy as np

    from commmodel.step.layout import LayoutArrays

    tp = 2 ** rng.integers(0, 4, size)
    pp = 2 ** rng.integers(0, 5, size)
    dp = np.maximum(num_gpus // (tp * pp), 1)
    micro = 2 ** rng.integers(0, 4, size)
    global_batch = micro * dp * (np.arange(size) % 4096 + 1)
    vpp = np.where(pp > 1, rng.integers(1, 4, size), 1)
    return LayoutArrays(tp=tp, pp=pp, dp=dp, micro_batch=micro, global_batch=global_batch,
                        zero=rng.integers(0, 4, size), recompute=rng.integers(0, 3, size),
                        sequence_parallel=(tp > 1) & (rng.random(size) < 0.5), vpp=vpp)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes (and warm calls) per figure")
    parser.add_argument("--synthetic", type=int, default=1_000_000, help="layouts in the throughput run")
    args = parser.parse_args()
    import numpy as np

    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, threads pinned to 1, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; figures are median (min-max)")
    print(f"\nfresh processes ({args.runs} each; imports and profile loading excluded):")
    verdicts = fresh_figures(args.runs)
    print("\nin process (components):")
    verdicts += in_process(args.runs, args.synthetic)
    print(f"\nall targets: {verdict(all(verdicts))} ({sum(verdicts)} of {len(verdicts)})")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
