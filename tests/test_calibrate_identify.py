"""A number the measurements do not pin keeps its sourced value (docs/calibration.md: "the sourced value stays
wherever the data do not contradict it").

``tests/fixtures/calibrate/synthetic_2n_h100_so080.csv``: the model's own 2-node × 8 H100 all-reduce sweep on a
dgx-h100 whose scale-out efficiency is 0.80 and LL hop 9 us. Above 2 MiB NCCL's choice (NVLS tree) does not depend
on the NIC efficiency anywhere in 0.75–1.0, so the rows cannot tell 0.80 from the catalogue's 0.95: the fit must keep
0.95 (before: the edge of that plateau, 0.683, which broke the 2 MiB row by 34% and slowed every all-gather and
reduce-scatter on the fitted profile by 17%), and must recover the 9 us hop, which the small rows do pin.
"""

from pathlib import Path

import numpy as np
import pytest

from commmodel.calibrate.groups import fit_measurements
from commmodel.calibrate.measured import group_cost
from commmodel.calibrate.report import fit_report
from commmodel.io.measurements import read_measurements
from commmodel.io.profiles import load_system

CSV = Path(__file__).parent / "fixtures" / "calibrate" / "synthetic_2n_h100_so080.csv"


def test_an_unidentified_efficiency_keeps_its_source_and_every_large_row_still_fits(tmp_path):
    out = tmp_path / "fitted.yaml"
    fit_report(CSV, out=out, base="dgx-h100")
    fitted = load_system(str(out))
    assert fitted.scale_out.efficiency.value == pytest.approx(0.95)
    assert fitted.scale_out.latency_s.value == pytest.approx(9e-6, rel=1e-3)
    data = read_measurements(CSV)
    group = fit_measurements(data.rows)[0]
    large = group.fit.sizes_bytes >= 2**20
    model_s = np.asarray(group_cost(fitted, group, group.fit.sizes_bytes[large], "auto").time_s)
    measured_s = np.asarray([r["time_s_median"] for r in data.rows if r["size_bytes"] >= 2**20])
    assert np.max(np.abs(model_s / measured_s - 1.0)) < 0.005  # nccl-tests prints 2 decimals of a microsecond


def test_a_profile_whose_every_number_was_kept_is_not_called_calibrated(tmp_path):
    """The same table's two largest rows: a bandwidth-only fit that keeps every base number ('chose the base profile
    (every knob kept)') writes no calibrated sizes, so `collective` says *sourced*, not *calibrated* (DESIGN §7)."""
    import json

    from typer.testing import CliRunner

    from commmodel.cli.app import app

    lines = CSV.read_text().splitlines()
    keep = [line for line in lines if line.startswith("#") or line.startswith("op,")
            or line.split(",")[1] in ("4294967296", "8589934592")]
    two = tmp_path / "two.csv"
    two.write_text("\n".join(keep) + "\n")
    out = tmp_path / "two.yaml"
    fit_report(two, out=out, base="dgx-h100")
    assert "calibrated_sizes" not in out.read_text()
    doc = CliRunner().invoke(app, ["collective", "all_reduce", "--size", "4GiB", "--gpus", "16", "--system", str(out),
                                   "--json"])
    assert json.loads(doc.stdout)["best"]["provenance"]["kind"] == "sourced"
