"""CLI start-up time (DESIGN §9: a `collective` or `query` answer in well under a second).

Runs each command as a fresh subprocess N times and prints the best and the median wall time.
Commands whose sub-command does not exist yet are reported as "absent", not timed.

    python benchmarks/cli_startup.py [--runs 10] [--importtime]

``--importtime`` also lists the slowest imports of ``commmodel.cli.app`` (``python -X importtime``),
which is where start-up regressions come from (pandas, matplotlib and torch must not be among them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = [
    ["--help"],
    ["profiles", "list", "--json"],
    ["collective", "all_reduce", "--size", "1GiB", "--gpus", "16", "--system", "dgx-h100", "--json"],
    ["query", "8 GPUs, 1B params, IB NDR", "--json"],
]


def _entry_point() -> list[str]:
    """The installed console script if it is on PATH, else ``python -m commmodel``."""
    script = shutil.which("commmodel")
    return [script] if script else [sys.executable, "-m", "commmodel"]


def _time_once(argv: list[str]) -> tuple[float, int]:
    start_s = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start_s, done.returncode


def _present(entry: list[str], args: list[str]) -> bool:
    """A sub-command exists if ``<sub-command> --help`` succeeds (``--help`` itself always exists)."""
    if args[0].startswith("-"):
        return True
    return subprocess.run([*entry, args[0], "--help"], capture_output=True, check=False).returncode == 0


def _slowest_imports(count: int) -> list[tuple[float, str]]:
    """(cumulative seconds, module) of the slowest imports of the CLI, from ``-X importtime``."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import commmodel.cli.app"],
                          capture_output=True, text=True, check=False)
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]) * 1e-6, parts[2].rstrip()))
    return sorted(rows, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command (after one warm-up)")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports")
    options = parser.parse_args()

    entry = _entry_point()
    cases = [("python -c pass (interpreter floor)", [sys.executable, "-c", "pass"])]
    cases += [("commmodel " + " ".join(f'"{a}"' if " " in a else a for a in args), [*entry, *args])
              for args in COMMANDS if _present(entry, args)]
    absent = [args for args in COMMANDS if not _present(entry, args)]

    print(f"entry point: {' '.join(entry)}; {options.runs} runs each after 1 warm-up; "
          f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    print(f"{'command':<95} {'best ms':>8} {'median ms':>10} {'exit':>5}")
    for label, argv in cases:
        _time_once(argv)  # warm the page cache and .pyc files
        times_s, codes = zip(*(_time_once(argv) for _ in range(options.runs)))
        print(f"{label:<95} {min(times_s) * 1e3:>8.0f} {statistics.median(times_s) * 1e3:>10.0f} "
              f"{max(codes, key=abs):>5}")
    for args in absent:
        print(f"{'commmodel ' + args[0] + ' ...':<95} {'absent':>8}")
    if options.importtime:
        print("\nslowest imports of commmodel.cli.app (cumulative ms):")
        for seconds, module in _slowest_imports(15):
            print(f"{seconds * 1e3:>8.1f}  {module}")


if __name__ == "__main__":
    main()
