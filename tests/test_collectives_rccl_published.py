"""Published rccl-tests tables (AMD Instinct) in the validation set: priced with RCCL, each row sourced.

Rows: commmodel/data/nccl_tests.csv; setups (system, -g, library): commmodel/data/nccl_setups.yaml.
* amdsat-mi300x-1n: ROCm/system-acceptance-docs@b754ce7 docs/mi300x/performance-bench.rst, 8x MI300X,
  ``all_reduce_perf -b 8 -e 8G -f 2 -g 8``, 31 sizes.
* oci-mi355x-*: oci-ai-incubations/oci-gpu-quickstarts@da17d54 amd/MI355X/README-MI355X{,-Pollara}.md,
  8x MI355X per node, 1/2/4 nodes, the 8 and 16 GiB rows only (smaller sizes truncated by the publisher).
Issue 14's targets for RCCL: busbw median over the setups ≤ 10% at S ≥ 64 MiB, ≤ 20% in the mid band.
"""

from __future__ import annotations

import pytest

from commmodel.collectives import collective_cost
from commmodel.errors import CollectiveError
from commmodel.hardware.cluster import Cluster
from commmodel.io.profiles import load_system
from commmodel.io.validation_data import read_nccl_rows, read_setups
from commmodel.validation.collectives import (
    collective_records,
    setup_library,
    summarize_collectives,
    summarize_libraries,
)

RCCL_SETUPS = {"amdsat-mi300x-1n", "oci-mi355x-1n", "oci-mi355x-pollara-1n", "oci-mi355x-pollara-2n",
               "oci-mi355x-pollara-4n"}


@pytest.fixture(scope="module")
def records():
    return collective_records()


@pytest.fixture(scope="module")
def summary(records):
    return summarize_collectives(records)


def test_the_rccl_setups_are_the_amd_ones_and_declare_rccl():
    setups = read_setups()
    amd = {sid for sid, s in setups.items() if s["system"].startswith("amd-")}
    assert amd == RCCL_SETUPS
    # the MI300X table ran ROCm 6.2's RCCL (2.20.5): that release's tuner; the MI355X ones the newest source's
    assert {sid: setups[sid]["library"] for sid in RCCL_SETUPS} == {
        sid: "rccl-2.20" if sid == "amdsat-mi300x-1n" else "rccl" for sid in RCCL_SETUPS}
    # Without the field a setup takes the system's default library, the one `commmodel collective` takes.
    assert setup_library({}, load_system("amd-mi300x")) == "rccl"
    assert setup_library({}, load_system("dgx-a100")) == "nccl"
    assert setup_library({"library": "RCCL"}, load_system("dgx-a100")) == "rccl"


def test_every_rccl_row_is_priced_with_rccl_not_nccl(records):
    mine = [r for r in records if r["setup_id"] in RCCL_SETUPS]
    assert len(mine) == 31 + 4 * 2
    assert {r["library"] for r in mine} == {"rccl", "rccl-2.20"}
    assert {r["library"] for r in records if r["setup_id"] not in RCCL_SETUPS} == {"nccl"}
    setups = read_setups()
    for r in mine:
        system = Cluster.for_gpus(load_system(r["system"]), r["num_ranks"], r["gpus_per_node"]).system
        gpp = setups[r["setup_id"]]["gpus_per_process"]
        rccl = collective_cost("all_reduce", r["size_bytes"], system, r["num_ranks"], selection="library",
                               library=r["library"], gpus_per_process=gpp)
        assert r["predicted_time_s"] == pytest.approx(float(rccl.time_s), rel=1e-12)
        assert r["algorithm"] in {"ring", "tree"}  # RCCL has no NVLS
        # NCCL's own tuner does not choose for an RCCL system: asked for by name, a clear error, not a guess
        with pytest.raises(CollectiveError, match="selection 'nccl' is NCCL's tuner, and .* runs rccl"):
            collective_cost("all_reduce", r["size_bytes"], system, r["num_ranks"], selection="nccl")


def test_every_row_carries_its_source():
    rows = read_nccl_rows()
    assert len(rows) == 364
    assert all(row["source"].strip() for row in rows)
    amd = [row for row in rows if row["setup_id"] in RCCL_SETUPS]
    assert all(len(row["source"].split(" ")) > 1 for row in amd)  # repository@commit, then the file and section
    assert {row["source"].split(" ")[0] for row in amd} == {
        "github:ROCm/system-acceptance-docs@b754ce7", "github:oci-ai-incubations/oci-gpu-quickstarts@da17d54"}


def test_rccl_band_errors_per_setup(summary):
    cells = {(s["setup_id"], s["band"]): s for s in summary if s["setup_id"] in RCCL_SETUPS}
    assert set(cells) == {("amdsat-mi300x-1n", b) for b in ("small", "mid", "large")} | {
        (sid, "large") for sid in RCCL_SETUPS - {"amdsat-mi300x-1n"}}
    # 8x MI300X, -g 8: 2 of 8 large rows off by > 3%. Mid: RCCL 2.20.5 keeps LL to 4 MiB (its tuning_model_5);
    # the physical LL price is flat to 256 KiB (+44%) and too steep from 2 MiB (-25%, -28% at 4 MiB).
    assert cells["amdsat-mi300x-1n", "large"]["median"] == pytest.approx(0.013, abs=0.003)
    assert cells["amdsat-mi300x-1n", "mid"]["median"] == pytest.approx(0.153, abs=0.005)
    assert cells["amdsat-mi300x-1n", "small"]["median_factor"] == pytest.approx(1.20, abs=0.02)
    # MI355X: the profile's xGMI efficiency is MI300X's (assumed); the tables reach 407 of 535.5 GB/s.
    for sid in ("oci-mi355x-1n", "oci-mi355x-pollara-1n"):
        assert cells[sid, "large"]["median_signed"] == pytest.approx(-0.084, abs=0.005)
    for sid in ("oci-mi355x-pollara-2n", "oci-mi355x-pollara-4n"):
        assert cells[sid, "large"]["median_signed"] == pytest.approx(-0.107, abs=0.005)


def test_rccl_meets_issue_14_targets_over_its_setups(summary):
    lib = {(b["library"], b["band"]): b for b in summarize_libraries(summary)}
    large, mid = lib["rccl", "large"], lib["rccl", "mid"]
    assert (large["setups"], mid["setups"]) == (5, 1)
    assert large["median"] == pytest.approx(0.085, abs=0.003) and large["passed"]
    assert mid["median"] == pytest.approx(0.153, abs=0.005) and mid["passed"]
    # Known misses against the 10% large target, kept visible: the multi-node Pollara runs (-10.4%, -10.9%).
    assert set(large["setups_over_target"]) == {"oci-mi355x-pollara-2n", "oci-mi355x-pollara-4n"}
