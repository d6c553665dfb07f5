"""Calibration round trip: every published nccl-tests setup imported, fitted, written, reloaded and priced.

Run: ``python benchmarks/calibration_roundtrip.py`` (``--json`` prints the records). Target (DESIGN §9): the
fitted profile reproduces each setup's rows of ≥ 1 MiB within 5% (median |busbw error|), priced as
``commmodel collective --system fitted.yaml`` prices them. "before" is the shipped profile, unfitted.
"""

from __future__ import annotations

import json
import sys
import time

from commmodel.validation.roundtrip import run_round_trip


def main() -> int:
    start = time.perf_counter()
    result = run_round_trip()
    elapsed = time.perf_counter() - start
    if "--json" in sys.argv:
        print(json.dumps(result, indent=2))
        return 0
    head = f"{'setup':<34} {'rows':>4}  {'before':>7}  {'fitted':>7}  {'worst':>7}  result  knobs"
    print(head)
    print("-" * len(head))
    for r in result["records"]:
        if r["passed"] is None:
            print(f"{r['setup_id']:<34} {'-':>4}  not fitted: {r['notes'][0][:110]}")
            continue
        knobs = ", ".join(f"{k}={v:.4g}" for k, v in r["knobs"].items())
        print(f"{r['setup_id']:<34} {r['rows']:>4}  {r['median_before'] * 100:>6.1f}%  {r['median'] * 100:>6.1f}%  "
              f"{r['worst'] * 100:>+6.1f}%  {'PASS' if r['passed'] else 'FAIL':<6}  {knobs}")
    s = result["summary"]
    print(f"\n{s['passed']} of {s['scored']} fitted setups pass ({s['setups'] - s['scored']} not fittable) ({s['target']}); median over setups {s['median'] * 100:.1f}%"
          f"; {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
