"""``profiles from-nccl``: NCCL topology XML and NCCL_DEBUG=INFO logs to a draft system profile.

Real input: Azure's ND A100 v4 NCCL_TOPO_FILE (../shared/evidence, Azure/azhpc-images @ 8e9d055). Fixtures in
tests/fixtures/nccl are modelled on INFO lines and topology dumps posted in public NCCL issues (cited in
each file's header)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import ProfileError
from commmodel.io.nccl_draft import draft_from_nccl, read_nccl_files
from commmodel.io.nccl_log import read_nccl_log
from commmodel.io.nccl_topo import read_topology
from commmodel.io.profiles import load_system_file

EVIDENCE = Path(os.environ.get("COMMMODEL_EVIDENCE_DIR") or Path(__file__).resolve().parents[2] / "shared" / "evidence")
"""CI clones main with shared/ beside it; a worktree elsewhere points COMMMODEL_EVIDENCE_DIR at it."""
AZURE = EVIDENCE / "azure-ndv4-nccl-topo.xml"
needs_evidence = pytest.mark.skipif(not AZURE.exists(), reason="../shared/evidence not beside the checkout")
FIX = Path(__file__).parent / "fixtures" / "nccl"
DUMP = FIX / "h100-ndr-topo-dump.xml"
IB_LOG = FIX / "h100-2node-info.log"
ROCE_LOG = FIX / "a100-roce-nonvls-info.log"
runner = CliRunner()


@needs_evidence
def test_azure_topo_file_states_8_gpus_8_ib_nics_on_pcie4_x16():
    topo = read_topology(AZURE)
    assert len(topo.gpus) == 8 and len(topo.nics) == 8
    assert {g.pci.pci_class for g in topo.gpus} == {"0x0302"}  # 3D controller
    assert {n.kind for n in topo.nics} == {"infiniband"}  # class 0x020700
    assert {(g.pci.link_speed_gts, g.pci.link_width) for g in topo.gpus} == {(16.0, 16)}
    assert {(n.pci.link_speed_gts, n.pci.link_width) for n in topo.nics} == {(16.0, 16)}
    assert [n.speed_mbps for n in topo.nics] == [None] * 8  # an input file states no <net speed>
    assert {g.sm for g in topo.gpus} == {None} and topo.gpus[0].line == 4 and topo.nics[0].line == 5


@needs_evidence
def test_azure_draft_reads_counts_and_assumes_the_rest(tmp_path):
    out = tmp_path / "ndv4.yaml"
    result = runner.invoke(app, ["profiles", "from-nccl", str(AZURE), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    fields = {f["field"]: f for f in json.loads(result.stdout)["fields"]}
    assert fields["gpus_per_node"]["value"] == 8 and fields["gpus_per_node"]["status"] == "read"
    assert fields["scale_out.nics_per_node"]["value"] == 8 and fields["scale_out.nics_per_node"]["status"] == "read"
    assert str(AZURE) in fields["gpus_per_node"]["source"]
    for assumed in ("gpu", "scale_up.link", "scale_out.link"):  # no sm, no <nvlink>, no <net speed>
        assert fields[assumed]["status"] == "assumed"
    system = load_system_file(out)
    assert (system.gpus_per_node, system.scale_out.nics_per_node, system.scale_out.kind) == (8, 8, "infiniband")
    # the GPUs' PCIe Gen4 links say an A100-generation node (it drafted an H100 SXM, a Gen5 part, with NDR)
    assert (system.gpu.name, system.scale_up.link, system.scale_out.link) == ("a100-sxm-80gb", "nvlink3", "ib-hdr")
    checked = runner.invoke(app, ["profiles", "validate", str(out)])
    assert checked.exit_code == 0 and checked.stdout.startswith("ok")


def test_info_log_facts_and_their_lines():
    log = read_nccl_log(IB_LOG)
    assert (log.version.value, log.version.line) == ("2.18.3+cuda12.2", 8)
    assert (log.nranks.value, log.nnodes.value, log.local_ranks.value) == (16, 2, 8)
    assert log.nnodes.line == 15
    assert (log.nvls.value, log.nvls.line) == (True, 13)
    assert log.network.value == "IB"
    assert log.nics.value == [(f"mlx5_{i}:1", "IB") for i in range(8)] and log.nics.line == 9
    assert (log.channels.value, log.nvls_channels.value) == (32, 16)
    roce = read_nccl_log(ROCE_LOG)
    assert roce.nvls.value is False and roce.network.value == "IBext_v8"
    assert [t for _, t in roce.nics.value] == ["RoCE"] * 4 and roce.channels.value == 24


def test_dump_and_log_give_an_h100_ndr_profile_sourced_to_the_files(tmp_path):
    draft = draft_from_nccl(*read_nccl_files([DUMP, IB_LOG]))
    assert draft.get("scale_up.link").value == "nvlink4" and draft.get("scale_up.link").status == "read"
    assert draft.get("scale_out.link").value == "ib-ndr" and draft.get("scale_out.link").status == "read"
    assert draft.get("scale_out.nics_per_node").value == 8
    out = tmp_path / "h100.yaml"
    assert runner.invoke(app, ["profiles", "from-nccl", str(DUMP), str(IB_LOG), "--out", str(out)]).exit_code == 0
    system = load_system_file(out)
    assert system.scale_out.nic_bw_bytes_per_s.value == 400e9 / 8  # <net speed="400000"> Mb/s
    assert system.scale_out.nic_bw_bytes_per_s.source.startswith(f"from-nccl: {DUMP}: line 9")
    assert system.gpu.compute_capability.value == "sm_90"
    assert system.scale_up.in_network_reduction is not None  # the log says NVLS is available
    topo = read_topology(DUMP)
    assert {g.nvlink_count for g in topo.gpus} == {18} and all(g.nvswitch for g in topo.gpus)


def test_a_log_saying_no_nvls_removes_it_and_roce_ports_give_roce(tmp_path):
    out = tmp_path / "roce.yaml"
    result = runner.invoke(app, ["profiles", "from-nccl", str(ROCE_LOG), "--out", str(out)])
    assert result.exit_code == 0, result.output
    system = load_system_file(out)
    assert system.scale_up.in_network_reduction is None
    assert (system.scale_out.kind, system.scale_out.nics_per_node, system.gpus_per_node) == ("roce", 4, 8)
    assumed = result.stdout.split("\nassumed:\n")[1].split("\nfacts:\n")[0]
    assert "scale_out.link = roce-400g" in assumed and "gpu = " in assumed  # no speed, no sm in a log


def test_a_single_node_log_without_nics_has_no_scale_out(tmp_path):
    log = tmp_path / "one.log"
    log.write_text("h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                   "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0\n")
    draft = draft_from_nccl(*read_nccl_files([log]))
    assert draft.get("scale_out").value is None and draft.get("gpus_per_node").value == 4
    out = tmp_path / "one.yaml"
    assert runner.invoke(app, ["profiles", "from-nccl", str(log), "--out", str(out)]).exit_code == 0
    assert load_system_file(out).scale_out is None


@pytest.mark.parametrize(("name", "words"), [
    ("not-nccl.log", "no NCCL lines"),
    ("wrong-schema.xml", "root element <gpus> is not NCCL's <system>"),
])
def test_bad_files_end_with_one_line_naming_the_file(tmp_path, name, words):
    result = runner.invoke(app, ["profiles", "from-nccl", str(FIX / name), "--out", str(tmp_path / "x.yaml")])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {FIX / name}") and words in lines[0]
    assert not (tmp_path / "x.yaml").exists()


def test_dtd_and_entities_are_refused(tmp_path):
    bomb = tmp_path / "bomb.xml"
    bomb.write_text('<?xml version="1.0"?>\n<!DOCTYPE system [<!ENTITY a "aaaaaaaa">]>\n<system>&a;</system>\n')
    with pytest.raises(ProfileError, match="DTD or entity"):
        read_topology(bomb)


@pytest.mark.parametrize("count", ["two", "-3", "0"])
def test_a_damaged_nvlink_count_is_one_line(tmp_path, count):
    """<nvlink count="two"> ended in a ValueError traceback, and count="-3" was drafted as "-3 NVLinks per GPU"."""
    text = DUMP.read_text()
    first = text.index('count="')
    end = text.index('"', first + len('count="'))
    damaged = tmp_path / "topo.xml"
    damaged.write_text(text[:first] + f'count="{count}"' + text[end + 1:])
    with pytest.raises(ProfileError, match=rf"topo.xml: line \d+: <nvlink count='{count}'> is not a whole number"):
        read_topology(damaged)


@pytest.mark.parametrize(("topo", "logs", "left_out"), [
    ("synthetic-h100-storage-first-topo.xml", ["synthetic-h100-8port-info.log"], None),
    ("synthetic-h100-storage-first-topo.xml", [], 2),
    ("synthetic-h100-mgmt-eth-first-topo.xml", [], 3),
])
def test_the_draft_takes_the_nics_nccl_trains_over(tmp_path, topo, logs, left_out):
    """Synthetic DGX H100 dumps (an audit's: the fixture dump with 2 × 200G storage ports, or 100 GbE management plus
    storage ports, listed before the 8 × 400G compute HCAs). The draft took the first NIC's speed and kind (ib-hdr,
    eth-100g) and counted every port (10, 11); it now takes the NICs the log says NCCL uses, else those of the most
    common speed, and says how many it left out."""
    out = tmp_path / "d.yaml"
    result = CliRunner().invoke(app, ["profiles", "from-nccl", str(FIX / topo), *[str(FIX / x) for x in logs],
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    system = load_system_file(out)
    assert (system.scale_out.link, system.scale_out.nics_per_node) == ("ib-ndr", 8)
    assert system.scale_out.nic_bw_bytes_per_s.value == pytest.approx(400e9 / 8)
    if left_out:
        assert f"{left_out} NIC(s) at another speed left out" in result.output
