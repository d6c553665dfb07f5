"""Time the CPU/gloo calibration loop and report its accuracy (DESIGN §9: a 2-rank sweep + fit < 1 min).

    python benchmarks/calibrate_gloo.py [--iters 25] [--max-size 4MiB] [--repeat 3]

Each repeat: a 2-rank ``torchrun`` sweep of all_reduce 8 B .. max-size with gloo, ``calibrate fit`` over
dgx-h100, then the calibrated profile's prediction error against the measured medians above 64 KiB.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def one_run(workdir: Path, iters: int, max_size: str) -> dict[str, float]:
    from commmodel.calibrate.report import fit_report
    from commmodel.collectives import collective_cost
    from commmodel.io.measurements import read_measurements
    from commmodel.io.profiles import load_system

    csv, profile = workdir / "gloo.csv", workdir / "gloo.yaml"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                    "-m", "commmodel", "calibrate", "run", "--out", str(csv), "--ops", "all_reduce",
                    "--min-size", "8", "--max-size", max_size, "--iters", str(iters), "--warmup", "3", "--quiet"],
                   check=True, capture_output=True)
    sweep_s = time.perf_counter() - start
    start = time.perf_counter()
    doc, _ = fit_report(csv, out=profile, base="dgx-h100")
    fit_s = time.perf_counter() - start
    rows = [r for r in read_measurements(csv).rows if r["size_bytes"] > 64 * 2**10]
    sizes = np.array([r["size_bytes"] for r in rows], dtype=float)
    measured = np.array([r["time_s_median"] for r in rows])
    predicted = collective_cost("all_reduce", sizes, load_system(str(profile)), 2).time_s
    errors = np.abs(predicted / measured - 1)
    return {"sweep_s": sweep_s, "fit_s": fit_s, "r2": doc["groups"][0]["r2"],
            "median_err": float(np.median(errors)), "max_err": float(errors.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=25)
    parser.add_argument("--max-size", default="4MiB")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'run':>3}  {'sweep s':>8}  {'fit s':>6}  {'R2':>6}  {'median |err| >64KiB':>20}  {'max |err|':>9}")
    for k in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            r = one_run(Path(tmp), args.iters, args.max_size)
        print(f"{k:>3}  {r['sweep_s']:8.2f}  {r['fit_s']:6.2f}  {r['r2']:6.3f}  {100 * r['median_err']:19.1f}%  "
              f"{100 * r['max_err']:8.1f}%")


if __name__ == "__main__":
    main()
