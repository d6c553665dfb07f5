"""Training-step accuracy: predicted vs published Megatron-LM throughput and iteration times.

Run: ``python benchmarks/training_accuracy.py`` (add ``--json`` for the records). Rows come from
``commmodel/data/training_throughput.csv`` (Narayanan et al. 2021 Table 1; Korthikanti et al. 2022),
on the ``dgx-a100`` profile. Targets (DESIGN §9, issue 4): throughput MAE ≤ 10 %, no row worse than
20 %, Korthikanti iteration times within 15 %.
"""

from __future__ import annotations

import json
import sys
import time

from commmodel.io.validation_training import summarize, validate_training


def main() -> int:
    start = time.perf_counter()
    records = validate_training()
    elapsed = time.perf_counter() - start
    if "--json" in sys.argv:
        print(json.dumps({"records": records, "summary": summarize(records)}, indent=2))
        return 0
    header = f"{'row':>3}  {'model':<18} {'gpus':>5}  {'tp':>2} {'pp':>3} {'dp':>3} {'mb':>2} {'v':>1} {'rc':<9}  {'metric':<31} {'published':>10} {'predicted':>10} {'error':>7}"
    print(header)
    print("-" * len(header))
    for r in records:
        lay = r["layout"]
        print(f"{r['row']:>3}  {r['model'][:18]:<18} {r['num_gpus']:>5}  {lay['tp']:>2} {lay['pp']:>3} {lay['dp']:>3} "
              f"{lay['micro_batch']:>2} {lay['vpp']:>1} {lay['recompute']:<9}  {r['metric']:<31} "
              f"{r['published']:>10.4g} {r['predicted']:>10.4g} {r['error_pct']:>+6.1f}%" + ("" if r["fits"] else "  (does not fit)"))
    summary = summarize(records)
    print()
    for name, s in summary.items():
        if s["count"]:
            print(f"{name:<15} n={s['count']:<3} MAE {s['mae_pct']:5.1f}%   worst {s['worst_pct']:+6.1f}%  ({s['worst_row']})")
    print(f"\nevaluated in {elapsed * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
