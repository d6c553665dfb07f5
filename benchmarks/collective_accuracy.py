"""Collective accuracy: the model vs every published nccl-tests row shipped with commmodel.

Run: ``python benchmarks/collective_accuracy.py`` (``--rows`` adds one line per row, ``--json`` prints
the records and the summary, ``--no-round-trip`` skips the calibration round trip). Targets (DESIGN §9), per band: S ≥ 64 MiB busbw median over setups ≤ 10%, every
setup's median ≤ 20%; 64 KiB–64 MiB busbw median ≤ 15%, every setup ≤ 30%; S ≤ 64 KiB time median factor ≤ 1.5. A last section prices the out-of-sample prose
reference points of commmodel/data/nccl_out_of_sample.yaml (not in the CSV).
Rows: commmodel/data/nccl_tests.csv; setup → profile mapping: commmodel/data/nccl_setups.yaml.
"""

from __future__ import annotations

import json
import sys
import time

from commmodel.validation.collectives import out_of_sample_records, run_collectives
from commmodel.validation.roundtrip import run_round_trip
from commmodel.validation.report import (
    render_collective_rows,
    render_collective_summary,
    render_out_of_sample,
)


def main() -> int:
    start = time.perf_counter()
    section = run_collectives()
    elapsed = time.perf_counter() - start
    if "--json" in sys.argv:
        print(json.dumps(section, indent=2))
        return 0
    if "--rows" in sys.argv:
        print(render_collective_rows(section["records"]))
        print()
    print(render_collective_summary(section["summary"], section["bands"], section["libraries"]))
    print(f"\n{len(section['records'])} rows priced in {elapsed:.2f} s")
    print("\nOut of sample: prose reference points NOT in nccl_tests.csv (commmodel/data/nccl_out_of_sample.yaml)\n")
    print(render_out_of_sample(out_of_sample_records()))
    if "--no-round-trip" not in sys.argv:
        trip = run_round_trip()["summary"]
        verdict = "PASS" if trip["passed"] == trip["scored"] else "FAIL"
        print(f"\nCalibration round trip (benchmarks/calibration_roundtrip.py for the table): {trip['passed']} of "
              f"{trip['scored']} fitted setups within 5% on rows >= 1 MiB, median {trip['median'] * 100:.1f}%; "
              f"{trip['setups'] - trip['scored']} tables too short to fit — {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
