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


# gcp-a3mega-2n-tcpxo was a known miss at 5.2% (base 6.1%): Google's TCPXO runs Simple only (tcpxo nccl_protocols), so
# scale_out.latency_s and simple_fixed_s shift every row alike and the solver wrote a 1 ns hop and a 39 us fixed cost.
# The fit now keeps the candidate profile with the least error on the table's own rows that is nowhere above the
# base's or 5% (calibrate/choose.py): the sourced hop and no fixed cost, the rates refined on the rows >= 1 MiB: 4.5%.
# The three mscclpp NDmv4 tables measure all-reduce, all-gather and all-to-all in one run. Their all-gather and
# all-to-all sit off the model's op ratio (8 x A100 NVLink: all-gather busbw 253 GB/s vs all-reduce 231; 2 x 1 A100
# over one HDR NIC: all-to-all 15.5 vs the ring's, whose all-reduce 18.7 / all-gather 15.8 ratio the ring's loop
# bubble now follows, ring.py net_loop_bubble_s), which one efficiency per tier cannot follow. The joint
# refinement now includes those peers' bandwidth rows (calibrate/apply.py), so the efficiency is the run's robust
# compromise: -1n 8.8% -> 0.1%, -2n1g 17.7% -> 2.3%, -2n8g 37.1% -> 3.6% (its all-to-all stays 11% off; before the
# tree/Simple change the primary-only fit gave 3.1%). On -2n8g the peers also keep the fit out of the tree branch
# the all-reduce alone slides into (efficiency 0.51, all_gather 45% slow; see the guard below).
# gcp-a3mega-2n-tcpxo was one (6.0%): its 8 GiB tree ran at 180.7 GB/s algbw, above the tree's NVLink chain bound
# 0.92 x 362 / 2 = 166.7 GB/s that a scale-out-only fit cannot move; the fit now raises the scale-up efficiency
# to the least value the rows prove (calibrate/legs.py).
KNOWN_MISSES: set[str] = set()


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


def test_the_fitted_network_stays_out_of_the_half_rate_tree_branch(round_trip):
    """mscclpp NDmv4 2 x 8 A100 (HDR): all-reduce, all-gather and all-to-all of one run; the fitted profile must not
    slide into the tree branch at efficiency 0.51 that reproduces the all-reduce alone and prices the all-gather 45%
    slow.

    Since the channel ramp (collectives/channels.py) the 1 KiB rows carry their channel-bound streaming time, so
    the hop solved on them (4.5 us) no longer flips the large-message choice. Since the tree/Simple fill runs each of
    the 16 channels at its share of the A100's NVLink (232 / 16 = 14.5 GB/s, not the lone channel's 24), the tree is
    slower at large sizes, and the joint L1 fit settles at efficiency 0.81, where NCCL's estimate picks the tree at
    1-4 GiB: all-reduce 2.4/4.8%, all-to-all 0.0/0.1%, all-gather (ring) -10.0/-13.4% (at the ring's 0.90 before:
    3.6/4.8%, 11.2/11.4%, 0.0/3.7%); the median improves 4.3% -> 3.6%.

    The fit then keeps the candidate with the least error on the table's own rows (calibrate/choose.py): the hop
    solved on the 1 KiB rows raised their time error 3.4% -> 5.5%, so the sourced hop stays, and the efficiency refined
    on every group's rows >= 1 MiB settles at 0.917: median 2.4%."""
    record = {r["setup_id"]: r for r in round_trip["records"]}["mscclpp-ndmv4-2n8g"]
    assert 0.78 < record["knobs"]["scale_out.efficiency"] < 0.98  # 0.917
    assert "scale_out.latency_s" not in record["knobs"]
    assert any(n.startswith("chose scale_out.latency_s kept from the base") for n in record["notes"]), record["notes"]
    assert record["median"] <= 0.03


def test_a_two_node_tree_above_the_intra_node_bound_raises_the_scale_up_efficiency_to_its_lower_bound(round_trip):
    """2 x a3-megagpu-8g (TCPXO): 8 GiB all-reduce at 180.7 GB/s algbw (47.535 ms) is above the base tree's NVLink
    chain bound 0.92 x 450 x 0.815 / 2 = 168.7 GB/s less its fill; the scale-up efficiency is raised (0.867; 0.822
    while the fill ran at Hopper's lone-channel 38.7 GB/s, 0.878 when the 28 us hop carried no size-dependent fill).
    Across this Simple-only fabric the TCPXO hop and a Simple fixed cost shift every row alike: only 4 x hop + fixed
    is identified (the 2-node tree/Simple floor, 123.4 = 81.6 + 4 x 10.45 us). The solver wrote it as a 1 ns hop and
    a 39 us fixed cost (median 5.2%); the fit now keeps the sourced split (calibrate/choose.py: that candidate has the
    least error on the table's rows nowhere above the base's or 5%), with the rates refined on the rows >= 1 MiB: 4.5%."""
    record = {r["setup_id"]: r for r in round_trip["records"]}["gcp-a3mega-2n-tcpxo"]
    knobs = record["knobs"]
    assert knobs["scale_up.efficiency"] == pytest.approx(0.867, abs=0.005)
    assert "scale_out.latency_s" not in knobs and "scale_out.simple_fixed_s" not in knobs
    assert 0.85 < knobs["scale_out.efficiency"] < 0.90  # 0.870
    assert 0.04 < record["median"] < 0.05


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
