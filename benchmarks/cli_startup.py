"""CLI start-up time as a user meets it: fresh processes, median and range (issue 17, DESIGN §9).

Runs each command as a fresh subprocess N times (after one warm-up), interleaved so that machine
noise hits every command alike, and prints the median, the range and PASS/FAIL against the targets:

* ``collective ... --json`` and ``query "8 GPUs, 1B params, IB NDR" --json``: median ≤ 0.30 s;
* ``plan --model gpt3-175b --gpus 1024 --system dgx-a100 --json``: median ≤ 0.35 s;
* each of those ≤ 2× the median of ``python -c "import numpy, pydantic, yaml"`` measured in the same run
  (the floor any numpy + pydantic + YAML tool pays).

A reference row, ``baseline 1 BLAS``, imports the same with ``OPENBLAS_NUM_THREADS=1`` set first, as commmodel
imports numpy (``commmodel.cli.app._import_numpy_with_one_blas_thread``): the plain baseline starts one OpenBLAS
thread per core, and on a busy 2-core machine their spin-wait makes it bimodal (0.09-0.30 s) and its median
load-dependent (0.102 s at load 1.3, 0.154 s at load 2.2), so each command's ratio to this row is printed too.
Another reference row, ``typer floor``, times the least a CLI built like this one pays: a one-command typer app
(typer 0.2x coerces each option through a pydantic ``TypeAdapter``) that imports numpy and YAML and
validates one pydantic model. It has no target; the distance from it to a command is what commmodel's own
imports, catalogue load and work cost.

Beside them, in-process component figures (median of a few fresh processes), in a command's order:
``commmodel.cli.app`` (typer), numpy, ``commmodel.hardware`` (pydantic and the model classes), the
collectives and profile reader, and the shipped catalogue load (links, GPUs, one system).

    python benchmarks/cli_startup.py [--runs 10] [--importtime] [--no-compile]

The package measured is the one beside this script (runs start in its repository root).
Bytecode: an installed wheel ships compiled ``.pyc`` files; a checkout run with
``PYTHONDONTWRITEBYTECODE=1`` recompiles every module on every start (≈ +60 ms). So the package is
compiled first (``compileall``) unless ``--no-compile`` is given; the header says which was measured.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "commmodel"
REPO_DIR = PACKAGE_DIR.parent  # the working directory of every run: `-m`/`-c` put it first on sys.path
BASELINE = "import numpy, pydantic, yaml"
ONE_BLAS_LABEL = "baseline 1 BLAS"
ONE_BLAS_BASELINE = f"import os; os.environ['OPENBLAS_NUM_THREADS'] = '1'; {BASELINE}"
"""The baseline with OpenBLAS on one thread, as commmodel imports numpy (see the module docstring)."""
# (label, commmodel arguments, median target in seconds or None)
COMMANDS = [
    ("collective",
     ["collective", "all_reduce", "--size", "1GiB", "--gpus", "16", "--system", "dgx-h100", "--json"], 0.30),
    ("query", ["query", "8 GPUs, 1B params, IB NDR", "--json"], 0.30),
    ("plan", ["plan", "--model", "gpt3-175b", "--gpus", "1024", "--system", "dgx-a100", "--json"], 0.35),
    ("--help", ["--help"], None),
]
MAX_RATIO_TO_BASELINE = 2.0
FLOOR_LABEL = "typer floor"
FLOOR = """
from typing import Annotated
import typer
app = typer.Typer(add_completion=False, rich_markup_mode=None)
@app.callback()
def root() -> None:
    pass
@app.command()
def run(gpus: Annotated[int, typer.Option()] = 8, json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    import json, numpy, yaml
    from pydantic import BaseModel
    class Job(BaseModel):
        gpus: int
    print(json.dumps({"gpus": Job(gpus=gpus).gpus}))
app(["run", "--gpus", "16", "--json"])
"""
"""The reference CLI of the ``typer floor`` row (see the module docstring)."""

_COMPONENTS = """
import time
t0 = time.perf_counter()
import gc
gc.set_threshold(100_000)  # as commmodel/__main__.py does
import commmodel.cli.app
t1 = time.perf_counter()
commmodel.cli.app._import_numpy_with_one_blas_thread()  # as a command does
t2 = time.perf_counter()
import commmodel.hardware
t3 = time.perf_counter()
import commmodel.collectives, commmodel.io.profiles
t4 = time.perf_counter()
from commmodel.io.profiles import load_gpus, load_links, load_system
load_links(); load_gpus(); load_system("dgx-h100")
t5 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)
"""


def _time_once(argv: list[str]) -> tuple[float, float, int]:
    """(wall seconds, child CPU seconds, exit code) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start_s = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=REPO_DIR)
    wall_s = time.perf_counter() - start_s
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall_s, cpu_s, done.returncode


def _measure(cases: list[tuple[str, list[str]]], runs: int) -> dict[str, list[tuple[float, float, int]]]:
    """Each case ``runs`` times, round-robin (a noisy minute slows every case, not one)."""
    samples: dict[str, list[tuple[float, float, int]]] = {label: [] for label, _ in cases}
    for label, argv in cases:
        _time_once(argv)  # warm the page cache
    for _ in range(runs):
        for label, argv in cases:
            samples[label].append(_time_once(argv))
    return samples


def _components(runs: int = 5) -> list[float]:
    """Median of ``runs`` fresh processes, seconds: import commmodel.cli.app; numpy (one BLAS thread, as a
    command imports it); commmodel.hardware; collectives + profile reader; the catalogue load."""
    figures = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", _COMPONENTS], capture_output=True, text=True, check=True,
                              cwd=REPO_DIR)
        figures.append([float(x) for x in done.stdout.split()])
    return [statistics.median(column) for column in zip(*figures)]


def _slowest_imports(argv: list[str], count: int) -> list[tuple[float, str]]:
    """(self seconds, module) of the slowest imports of one command, from ``-X importtime``."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, check=False,
                          cwd=REPO_DIR)
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[0].split(":")[1]) * 1e-6, parts[2].strip()))
    return sorted(rows, reverse=True)[:count]


def _verdict(median_s: float, target_s: float | None, baseline_s: float) -> str:
    if target_s is None:
        return f"{median_s / baseline_s:>5.2f}x   (no target)"
    checks = [median_s <= target_s, median_s <= MAX_RATIO_TO_BASELINE * baseline_s]
    return (f"{median_s / baseline_s:>5.2f}x  ≤ {target_s:.2f} s and ≤ {MAX_RATIO_TO_BASELINE:g}x: "
            f"{'PASS' if all(checks) else 'FAIL'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed fresh processes per command (after 1 warm-up)")
    parser.add_argument("--importtime", action="store_true", help="also list each command's slowest imports")
    parser.add_argument("--no-compile", action="store_true", help="do not compile the package to .pyc first")
    options = parser.parse_args()

    if not options.no_compile:
        compileall.compile_dir(str(PACKAGE_DIR), quiet=1)
    entry = [sys.executable, "-m", "commmodel"]
    cases = [("baseline", [sys.executable, "-c", BASELINE]), (ONE_BLAS_LABEL, [sys.executable, "-c", ONE_BLAS_BASELINE]),
             (FLOOR_LABEL, [sys.executable, "-c", FLOOR])]
    cases += [(label, [*entry, *args]) for label, args, _ in COMMANDS]
    samples = _measure(cases, options.runs)

    bytecode = "as found" if options.no_compile else "compiled (as installed)"
    print(f"{options.runs} fresh processes each (round-robin, after 1 warm-up); {os.cpu_count()} CPUs; "
          f"python {sys.version.split()[0]}; bytecode {bytecode}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'command':<16} {'median s':>9} {'min s':>7} {'max s':>7} {'cpu s':>7} {'exit':>5}  vs baseline, target")
    baseline_s = statistics.median(w for w, _, _ in samples["baseline"])
    one_blas_s = statistics.median(w for w, _, _ in samples[ONE_BLAS_LABEL])
    targets = {label: target for label, _, target in COMMANDS}
    failed = False
    for label, _ in cases:
        walls = [w for w, _, _ in samples[label]]
        median_s = statistics.median(walls)
        code = max((c for _, _, c in samples[label]), key=abs)
        cpu_s = statistics.median(c for _, c, _ in samples[label])
        if label == "baseline":
            verdict = "numpy + pydantic + yaml floor"
        elif label == ONE_BLAS_LABEL:
            verdict = f"{median_s / baseline_s:>5.2f}x   (reference: OPENBLAS_NUM_THREADS=1, as commmodel imports numpy)"
        elif label == FLOOR_LABEL:
            verdict = f"{median_s / baseline_s:>5.2f}x   (reference: typer + pydantic CLI, no target)"
        else:
            verdict = _verdict(median_s, targets[label], baseline_s) + f"; {median_s / one_blas_s:.2f}x of 1 BLAS"
        failed |= "FAIL" in verdict or code != 0
        print(f"{label:<16} {median_s:>9.3f} {min(walls):>7.3f} {max(walls):>7.3f} {cpu_s:>7.3f} {code:>5}  {verdict}")
    app_s, numpy_s, hardware_s, core_s, catalogue_s = _components()
    print(f"\nin process (median of 5): import commmodel.cli.app (typer) {app_s * 1e3:.0f} ms; "
          f"numpy {numpy_s * 1e3:.0f} ms; commmodel.hardware (all of pydantic, importlib.metadata via pydantic's "
          f"plugin loader, the model classes) {hardware_s * 1e3:.0f} ms; collectives + profile reader "
          f"{core_s * 1e3:.0f} ms; catalogue load (links + GPUs + dgx-h100, once per process) {catalogue_s * 1e3:.1f} ms")
    print("the commands: " + "; ".join(f"{label} = commmodel {' '.join(args)}" for label, args, _ in COMMANDS[:3]))
    if options.importtime:
        for label, args, _ in COMMANDS[:3]:
            print(f"\nslowest imports (self ms) of `{label}`:")
            for seconds, module in _slowest_imports(["-m", "commmodel", *args], 12):
                print(f"{seconds * 1e3:>8.1f}  {module}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
