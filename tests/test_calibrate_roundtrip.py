"""Calibration round trip on every published setup (DESIGN §9: import → fit → predict within 5% on rows ≥ 1 MiB).

Each setup of commmodel/data/nccl_tests.csv is turned into measurement rows, fitted onto its shipped profile,
written as YAML, loaded back and priced as ``commmodel collective --system fitted.yaml`` prices it.
"""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from commmodel.calibrate.apply import calibrate_system
from commmodel.calibrate.groups import fit_measurements
from commmodel.calibrate.profile_writer import write_profile
from commmodel.cli.app import app
from commmodel.io.profiles import load_system
from commmodel.io.validation_data import read_nccl_rows, read_setups
from commmodel.validation.roundtrip import TARGET_ROUND_TRIP, measurement_rows, run_round_trip

# Tables the α-β fit refuses, with the fit's reason: a time that falls as the size grows. A change to the data or
# the fitter changes this set. Tables of fewer than three sizes with one ≥ 64 MiB get a bandwidth-only fit (the
# profile's latency kept): the mle-h200 8/16 GiB tables, mscclpp-ndmv4-1n and -2n1g (1 KiB, 1 GiB), OCI MI355X
# (8, 16 GiB).
NOT_FITTABLE = {"issue-nccltests150-a100-2n1g-hdr"}


# Known misses, kept visible: gcp-a3mega-2n-tcpxo, 22.5% (0.7% before the tree/Simple change). Google's TCPXO
# environment runs Simple only (tcpxo nccl_protocols), so its 8 B-16 KiB rows (123 us) run Simple as well and
# scale_out.latency_s and simple_fixed_s shift every row alike; the rows from 32 MiB lie on ~870 us + S/180 GB/s
# algbw, ~750 us above the model's tree/Simple fill at 2.23 constants. No size-independent constant gives both:
# with the small rows priced right the 1-64 MiB rows sit 25-40% fast. Before the change the small rows were priced
# tree/LL, where the fixed cost does not reach. The fit keeps the sourced 10.5 us hop (it wrote a 1 ns hop and a
# 43 us fixed cost, 19.7%, before it compared knob sets on a floored latency). A scale-out simple_fixed_s that ramps
# in with the tree/Simple piece (min(chunk, S/channels)/chunk, as the fill does; a collectives change) passes it at
# 0.9% with the hop at 10.65 us and 307 us fixed, and aws-p4de-2n-efa at 3.9% with its sourced 20 us hop.
# The three mscclpp NDmv4 tables measure all-reduce, all-gather and all-to-all in one run. Their all-gather and
# all-to-all sit off the model's op ratio (8 x A100 NVLink: all-gather busbw 253 GB/s vs all-reduce 231; 2 x 1 A100
# over one HDR NIC: all-reduce 18.7 vs all-gather 15.8), which one efficiency per tier cannot follow. The joint
# refinement now includes those peers' bandwidth rows (calibrate/apply.py), so the efficiency is the run's robust
# compromise: -1n 8.8% -> 0.1%, -2n1g 17.7% -> 2.3%, -2n8g 37.1% -> 4.3% (its all-to-all stays 11% off; before the
# tree/Simple change the primary-only fit gave 3.1%). On -2n8g the peers also keep the fit out of the tree branch
# the all-reduce alone slides into (efficiency 0.51, all_gather 45% slow; see the guard below).
# gcp-a3mega-2n-tcpxo was one (6.0%): its 8 GiB tree ran at 180.7 GB/s algbw, above the tree's NVLink chain bound
# 0.92 x 362 / 2 = 166.7 GB/s that a scale-out-only fit cannot move; the fit now raises the scale-up efficiency
# to the least value the rows prove (calibrate/legs.py).
KNOWN_MISSES = {"gcp-a3mega-2n-tcpxo"}


@pytest.fixture(scope="module")
def round_trip():
    return run_round_trip()


def test_every_fitted_setup_reproduces_its_rows_within_5_percent(round_trip):
    records = {r["setup_id"]: r for r in round_trip["records"]}
    assert set(records) == {row["setup_id"] for row in read_nccl_rows()}
    assert {s for s, r in records.items() if r["passed"] is None} == NOT_FITTABLE
    for setup_id, r in records.items():
        if r["passed"] is None:
            assert "size grows" in r["notes"][0], r["notes"]
            continue
        assert r["rows"] > 0
        assert (r["median"] <= TARGET_ROUND_TRIP) == (setup_id not in KNOWN_MISSES), (setup_id, r)


def test_the_fit_writes_a_simple_fixed_cost_where_mid_size_rows_need_one(round_trip):
    records = {r["setup_id"]: r for r in round_trip["records"]}
    # 8x A100 NVSwitch: rows 32-256 MiB run Simple ~100 us slower than the α-β line; the fit writes that back.
    for setup_id in ("mle-a100-1n-nccltests", "azure-nda100v4-1n"):
        fixed = records[setup_id]["knobs"]["scale_up.simple_fixed_s"]
        assert 30e-6 < fixed < 300e-6
        assert records[setup_id]["median"] < records[setup_id]["median_before"]


def test_the_cli_prices_the_written_profile_as_the_round_trip_does(tmp_path):
    setup_id = "azure-nda100v4-1n"
    setup = read_setups()[setup_id]
    rows = [r for r in read_nccl_rows() if r["setup_id"] == setup_id]
    meas = measurement_rows(rows, setup)
    _, calibration = calibrate_system(load_system(setup["system"]), fit_measurements(meas))
    path = write_profile(tmp_path / "fitted.yaml", setup["system"], calibration, "azure.csv", date="test")
    written = yaml.safe_load(path.read_text())
    assert "us" in str(written["scale_up"]["simple_fixed_s"]["value"])
    big = [m for m in meas if m["size_bytes"] >= 32 * 2**20]
    for m in big:
        result = CliRunner().invoke(app, ["collective", "all_reduce", "--size", str(m["size_bytes"]), "--gpus", "8",
                                          "--system", str(path), "--json"])
        assert result.exit_code == 0, result.output
        time_s = json.loads(result.stdout)["best"]["time_s"]
        assert time_s == pytest.approx(m["time_s_median"], rel=0.15)


def test_the_fitted_network_keeps_the_ring_at_large_sizes(round_trip):
    """mscclpp NDmv4 2 x 8 A100 (HDR): all-reduce, all-gather and all-to-all of one run; the fitted profile keeps
    the ring at the large sizes (efficiency near the 183.8/188.8 busbw ratio of the shipped 0.96, not a tree's 0.5).

    Since the channel ramp (collectives/channels.py) the 1 KiB rows carry their channel-bound streaming time, so
    the hop solved on them (4.5 us) no longer flips the large-message choice: the joint error keeps it instead of
    the base's (before the ramp: kept from the base); the efficiency is what the guard protects. Since the tree/Simple
    estimate took NCCL >= 2.23.4's constants the ring -> tree switch sits at efficiency ~0.89; the all-reduce alone
    walks from there into the tree at 0.51, the peers' rows in the joint refinement keep the ring."""
    record = {r["setup_id"]: r for r in round_trip["records"]}["mscclpp-ndmv4-2n8g"]
    assert 0.88 < record["knobs"]["scale_out.efficiency"] < 0.98  # 0.899: the joint L1 fit with all_to_all 11% off
    assert record["knobs"]["scale_out.latency_s"] == pytest.approx(4.5e-6, rel=0.05)
    assert record["median"] <= TARGET_ROUND_TRIP


def test_a_two_node_tree_above_the_intra_node_bound_raises_the_scale_up_efficiency_to_its_lower_bound(round_trip):
    """2 x a3-megagpu-8g (TCPXO): 8 GiB all-reduce at 180.7 GB/s algbw (47.535 ms) is above the base tree's NVLink
    chain bound 0.92 x 450 x 0.815 / 2 = 168.7 GB/s less its fill; the scale-up efficiency is raised to the least value
    reaching it with the network at its bound: 0.822 since the tree/Simple fill is priced (0.878 before, when the
    28 us hop carried no size-dependent fill). The TCPXO hop stays at its sourced 10.5 us (fitted to the same 123 us
    floor) and no Simple fixed cost is written: across this Simple-only fabric the fixed cost and the hop shift every
    row alike, the small rows ask for none and the rows >= 32 MiB for ~750 us more than the model's fill (see
    KNOWN_MISSES); the knob set with the lower joint error is kept."""
    record = {r["setup_id"]: r for r in round_trip["records"]}["gcp-a3mega-2n-tcpxo"]
    assert record["knobs"]["scale_up.efficiency"] == pytest.approx(0.822, abs=0.005)
    assert record["knobs"]["scale_out.latency_s"] == pytest.approx(10.5e-6, rel=0.05)
    assert "scale_out.simple_fixed_s" not in record["knobs"]
    assert any("simple_fixed_s kept from the base" in n for n in record["notes"]), record["notes"]
    assert 0.15 < record["median"] < 0.30


def test_a_scale_up_tier_measured_alone_is_not_raised_from_a_mixed_group(round_trip):
    """Single-node setups set scale-up from their own group; two-node setups whose network binds keep the base."""
    records = {r["setup_id"]: r for r in round_trip["records"]}
    for setup_id in ("aws-p4de-2n-efa", "mscclpp-ndmv4-2n8g", "issue-nccltests232-h100-2n1g-tree"):
        assert "scale_up.efficiency" not in records[setup_id]["knobs"], records[setup_id]["knobs"]


def test_a_table_of_two_large_sizes_is_fitted_on_bandwidth_alone(round_trip):
    """OCI MI355X publishes only 8 and 16 GiB: the efficiency is fitted there, the latency kept and said so."""
    records = {r["setup_id"]: r for r in round_trip["records"]}
    for setup_id in ("oci-mi355x-1n", "oci-mi355x-pollara-2n", "mle-h200-1n-gpucount-8g-nvlsoff"):
        record = records[setup_id]
        assert not any(k.endswith("latency_s") for k in record["knobs"]), record["knobs"]
        assert any("bandwidth-only fit" in n for n in record["notes"]), record["notes"]
        assert record["median"] < 0.01 < record["median_before"] or record["median"] <= record["median_before"]
