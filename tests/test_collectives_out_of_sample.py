"""Out-of-sample check: published all-reduce busbw quoted in prose (NVIDIA/nccl and nccl-tests issues, a GB200
multi-node NVLink test), none of them rows of commmodel/data/nccl_tests.csv. Each point, its source and its tolerance
live in commmodel/data/nccl_out_of_sample.yaml; the system is composed from the link catalogue on the fly, or is the
shipped profile a point names (``system:``).

Points marked ``known_miss`` are gaps the model does not close yet (none today: the two earlier ones, the 2-node auto
choice on A100 with 4 NICs and host-staged PCIe on a server CPU, pass); they are asserted to still miss, so a fix
shows up here.
"""

from __future__ import annotations

import pytest

from commmodel.validation.collectives import out_of_sample_records

RECORDS = {r["id"]: r for r in out_of_sample_records()}
EXPECTED = sorted(k for k, r in RECORDS.items() if r["status"] != "known_miss")
KNOWN_MISSES = sorted(k for k, r in RECORDS.items() if r["status"] == "known_miss")


def test_the_file_holds_the_brief_points() -> None:
    # 192 (nccl#812), 91 (nccl-tests#100), 96 (#119), 86 (#175), 396 (#319), 12.2 and 48 (#29), 28/35 (nccl#1639)
    measured = sorted(r["measured_busbw_GBps"] for r in RECORDS.values())
    for value in (12.2, 28.0, 35.0, 48.0, 86.0, 91.0, 96.0, 192.0, 396.0, 811.0):
        assert value in measured
    assert all(r["source"] for r in RECORDS.values())


@pytest.mark.parametrize("point_id", EXPECTED)
def test_out_of_sample_busbw_within_tolerance(point_id: str) -> None:
    r = RECORDS[point_id]
    assert abs(r["busbw_error"]) <= r["tolerance"], (
        f"{point_id}: predicted {r['predicted_busbw_GBps']:.1f} vs published {r['measured_busbw_GBps']:.1f} GB/s "
        f"({r['busbw_error'] * 100:+.1f}%, tolerance {r['tolerance'] * 100:.0f}%) — {r['source']}")


def test_known_misses_still_miss() -> None:
    """Every point marked known_miss still misses; there are none today, and a new one must be listed here."""
    assert KNOWN_MISSES == []
    for point_id in KNOWN_MISSES:
        r = RECORDS[point_id]
        assert abs(r["busbw_error"]) > r["tolerance"], f"{point_id} now passes: drop its known_miss status"


def test_a_rack_spanning_two_trays_runs_at_nvlink_rate() -> None:
    """GB200 NVL72, 8 GPUs on two trays of 4 (lixueduan.com GB200 MNNVL test: 811 GB/s): priced on the shipped
    gb200-nvl72 profile, one NVLink domain across the trays (multi-node NVLink), not over the trays' NICs (the same
    blog's InfiniBand run reached 85 GB/s)."""
    r = RECORDS["gb200-nvl72-mnnvl-2tray"]
    assert r["system"].startswith("gb200-nvl72") and r["num_ranks"] == 8
    assert r["predicted_busbw_GBps"] > 5 * 85.0 and abs(r["busbw_error"]) <= 0.10


def test_forced_ring_points_report_ring() -> None:
    for r in RECORDS.values():
        if r["algorithm_asked"] == "ring":
            assert r["algorithm"] == "ring"


def test_ndr_ring_is_bound_by_nvlink_not_the_nics() -> None:
    # 8x CX-7 at 0.95 x 50 GB/s = 380 GB/s of NICs; the H100 NVLink ring (0.815 x 450 = 367) binds first.
    r = RECORDS["h100-8xndr-2n-ring"]
    assert r["predicted_busbw_GBps"] == pytest.approx(0.815 * 450, rel=0.01)  # latency costs < 1% at 8 GiB
