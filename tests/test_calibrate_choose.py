"""The fit's last step (calibrate/choose.py): of the full fit, its variants and the base profile, the one with the
least error on the table's own rows that is nowhere above the base's (or the round trip's 5%) is written."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from commmodel.calibrate.apply import Calibration, TierCalibration, calibrate_system, fit_candidate, usable_groups
from commmodel.calibrate.choose import TableError, table_error
from commmodel.calibrate.groups import fit_measurements
from commmodel.calibrate.knobs import get_knob, set_knob
from commmodel.calibrate.measured import pricing_selection
from commmodel.calibrate.profile_writer import write_profile
from commmodel.collectives import collective_cost
from commmodel.hardware.cluster import Cluster
from commmodel.io.profiles import load_system
from commmodel.io.validation_data import read_nccl_rows, read_setups
from commmodel.validation.roundtrip import measurement_rows

SIZES = 2.0 ** np.arange(3, 31)


def model_rows(system, num_ranks, ranks_per_node, group="all"):
    """The model's own all-reduce times on ``system`` as measurement rows (8 B-1 GiB)."""
    view = Cluster.for_gpus(system, num_ranks, ranks_per_node).system
    times = collective_cost("all_reduce", SIZES, view, num_ranks, ranks_per_node=ranks_per_node,
                            selection=pricing_selection(view)).time_s
    return [{"op": "all_reduce", "size_bytes": int(s), "num_ranks": num_ranks,
             "num_nodes": num_ranks // ranks_per_node, "group": group, "algorithm": "auto", "protocol": "",
             "time_s_median": float(t)} for s, t in zip(SIZES, times)]


def test_admissible_means_neither_median_above_the_base_or_the_round_trip_tolerance():
    base = TableError(bandwidth=0.012, latency=0.625)
    assert TableError(bandwidth=0.003, latency=0.625).admissible(base)
    assert TableError(bandwidth=0.017, latency=0.063).admissible(base)  # far better small rows, large ones within 5%
    assert not TableError(bandwidth=0.051, latency=0.063).admissible(base)  # large rows beyond the 5% round trip
    assert not TableError(bandwidth=0.003, latency=0.626).admissible(base)  # small rows worse than a base beyond 5%
    assert TableError(bandwidth=0.049, latency=0.0).admissible(TableError(bandwidth=0.0, latency=0.0))
    assert TableError(bandwidth=0.003, latency=0.6).total == pytest.approx(0.603)


def test_a_table_the_base_already_fits_does_not_get_worse():
    """8 x A100 (dgx-a100), the shipped profile's own times: the base error is zero and so is the written one."""
    shipped = load_system("dgx-a100")
    groups = fit_measurements(model_rows(shipped, 8, 8))
    assert table_error(shipped, groups).total == pytest.approx(0.0, abs=1e-12)
    calibrated, _ = calibrate_system(shipped, groups)
    assert table_error(calibrated, groups).total <= 1e-4


def test_a_fit_that_trades_within_the_round_trip_tolerance_is_written():
    """amdsat MI300X 1 x 8 (RCCL): the full fit's hop (2.6 us) brings the latency rows from 62.5% to 6.3% off and
    moves the rows >= 1 MiB from 1.2% to 1.7%, within the 5% round trip: the written profile has the fitted hop."""
    setup_id = "amdsat-mi300x-1n"
    setup = read_setups()[setup_id]
    groups = fit_measurements(measurement_rows([r for r in read_nccl_rows() if r["setup_id"] == setup_id], setup))
    shipped = load_system(setup["system"])
    usable = usable_groups(shipped, groups, [])
    base, full = table_error(shipped, usable), table_error(fit_candidate(shipped, usable)[0], usable)
    assert (base.bandwidth, base.latency) == pytest.approx((0.0123, 0.625), abs=0.001)
    assert (full.bandwidth, full.latency) == pytest.approx((0.0169, 0.063), abs=0.001)
    calibrated, calibration = calibrate_system(shipped, groups)
    chosen = table_error(calibrated, usable)
    assert chosen.admissible(base)
    assert (chosen.bandwidth, chosen.latency) == pytest.approx((0.0154, 0.063), abs=0.001)
    assert get_knob(calibrated, ("scale_up", "latency_s")) == pytest.approx(2.56e-6, rel=0.01)
    assert get_knob(shipped, ("scale_up", "latency_s")) == pytest.approx(0.6e-6)
    assert any(n.startswith("chose scale_up.simple_fixed_s kept from the base") for n in calibration.notes), \
        calibration.notes


def test_a_simple_only_fabric_keeps_the_sourced_hop_where_hop_and_fixed_cost_are_not_separable():
    """2 x a3-megagpu-8g, one rank per node (TCPXO runs Simple at every size): the hop and a Simple fixed cost add
    the same constant to every row, so only their sum is identified. Times of the shipped profile with the NIC
    efficiency at 0.80 and 30 us more on every row: the solver puts it all in the hop (10.5 -> 18 us: 4 hops x 7.5);
    a 30 us fixed cost with the sourced hop fits as exactly, keeps one more base value and is written."""
    shipped = load_system("gcp-a3-mega")
    rows = model_rows(set_knob(shipped, ("scale_out", "efficiency"), 0.80), 2, 1, "inter")
    groups = fit_measurements([{**r, "time_s_median": r["time_s_median"] + 30e-6} for r in rows])
    solved = fit_candidate(shipped, groups)[1].values()
    assert solved[("scale_out", "latency_s")] == pytest.approx(18.0e-6, rel=0.01)
    calibrated, calibration = calibrate_system(shipped, groups)
    assert get_knob(calibrated, ("scale_out", "latency_s")) == get_knob(shipped, ("scale_out", "latency_s")) == 10.5e-6
    assert calibration.values()[("scale_out", "simple_fixed_s")] == pytest.approx(30e-6, rel=0.01)
    assert get_knob(calibrated, ("scale_out", "efficiency")) == pytest.approx(0.80, rel=0.01)
    assert table_error(calibrated, groups).total < 1e-6


def test_a_kept_base_profile_is_still_written(tmp_path):
    """Every knob kept from the base: the tiers carry no values, and the profile (the base's numbers and the notes) is
    written all the same, without calibrated sizes: its predictions stay *sourced* (DESIGN §7), not calibrated."""
    tier = TierCalibration(tier="scale_up", group="all_reduce on 8 ranks", values={},
                           base_values={("scale_up", "efficiency"): 0.8}, direct_alpha_s=math.nan,
                           direct_bw_bytes_per_s=1.9e11, line_rate_bytes_per_s=3e11,
                           measured_sizes_bytes=(8.0, 2.0**30))
    path = write_profile(tmp_path / "p.yaml", "dgx-a100", Calibration(tiers=[tier], notes=["chose the base"]),
                         "run.csv", date="test")
    doc = yaml.safe_load(path.read_text())
    assert "calibrated_sizes" not in doc["scale_up"]
    assert load_system(str(path)).scale_up.efficiency.value == load_system("dgx-a100").scale_up.efficiency.value
