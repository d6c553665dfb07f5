"""Time the CPU/gloo calibration loop and report its accuracy (DESIGN §9: a 2-rank sweep + fit < 1 min).

    python benchmarks/calibrate_gloo.py [--iters 25] [--iters-large 60] [--max-size 4MiB] [--repeat 3]
                                        [--base pcie-2x-rtx2080ti]

Each repeat: a 2-rank ``torchrun`` sweep of all_reduce with gloo, 8 B .. 64 KiB with ``--iters`` and then
(``--resume``) up to max-size with ``--iters-large``, ``calibrate fit`` over ``--base``, then the calibrated
profile's prediction error against the measured medians above 64 KiB, with the 1-minute load average per core
before and after the sweep (> 1: other processes held every core). The test suite runs the same loop.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def one_run(workdir: Path, iters: int, iters_large: int, max_size: str, base: str) -> dict[str, float]:
    from commmodel.calibrate.report import fit_report
    from commmodel.collectives import collective_cost
    from commmodel.io.measurements import read_measurements
    from commmodel.io.profiles import load_system

    csv, profile = workdir / "gloo.csv", workdir / "gloo.yaml"
    cores = os.cpu_count() or 1
    load_before = os.getloadavg()[0] / cores
    start = time.perf_counter()
    for top, count, extra in (("64KiB", iters, []), (max_size, iters_large, ["--resume"])):
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        "-m", "commmodel", "calibrate", "run", "--out", str(csv), "--ops", "all_reduce",
                        "--min-size", "8", "--max-size", top, "--iters", str(count), "--warmup", "3", "--quiet",
                        *extra], check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    sweep_s = time.perf_counter() - start
    load_after = os.getloadavg()[0] / cores
    start = time.perf_counter()
    doc, _ = fit_report(csv, out=profile, base=base)
    fit_s = time.perf_counter() - start
    rows = [r for r in read_measurements(csv).rows if r["size_bytes"] > 64 * 2**10]
    sizes = np.array([r["size_bytes"] for r in rows], dtype=float)
    measured = np.array([r["time_s_median"] for r in rows])
    predicted = collective_cost("all_reduce", sizes, load_system(str(profile)), 2).time_s
    errors = np.abs(predicted / measured - 1)
    return {"sweep_s": sweep_s, "fit_s": fit_s, "r2": doc["groups"][0]["r2"],
            "median_err": float(np.median(errors)), "max_err": float(errors.max()),
            "load": f"{load_before:.2f}/{load_after:.2f}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=25)
    parser.add_argument("--iters-large", type=int, default=60)
    parser.add_argument("--max-size", default="4MiB")
    parser.add_argument("--base", default="pcie-2x-rtx2080ti")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'run':>3}  {'sweep s':>8}  {'fit s':>6}  {'R2':>6}  {'median |err| >64KiB':>20}  {'max |err|':>9}  "
          f"{'load/core':>9}")
    for k in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            r = one_run(Path(tmp), args.iters, args.iters_large, args.max_size, args.base)
        print(f"{k:>3}  {r['sweep_s']:8.2f}  {r['fit_s']:6.2f}  {r['r2']:6.3f}  {100 * r['median_err']:19.1f}%  "
              f"{100 * r['max_err']:8.1f}%  {r['load']:>9}")


if __name__ == "__main__":
    main()
