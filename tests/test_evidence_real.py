"""The evidence readers on real artefacts of other tools and clusters (tests/fixtures/evidence, sources in its
README) and on broken files: each is read as the file states it or refused in one line naming what is missing."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.io.kineto import read_trace
from commmodel.io.nccl_draft import draft_from_nccl, read_nccl_files
from commmodel.io.nccl_topo import read_topology

FIX = Path(__file__).parent / "fixtures" / "evidence"
runner = CliRunner()


def _events(name: str) -> list[dict]:
    return json.load(gzip.open(FIX / name, "rt"))["traceEvents"]


def _fields(*names: str) -> dict:
    draft = draft_from_nccl(*read_nccl_files([FIX / n for n in names]))
    return {f.path: f for f in draft.fields} | {f"fact:{f.path}": f for f in draft.facts} | {"notes": draft.notes}


def test_sampled_128_rank_trace_reads_sizes_from_input_dims_and_groups_from_c10d_dims():
    trace = read_trace(FIX / "hta-sampled-128ranks-rank0.json.gz")
    assert (trace.backend, trace.rank, trace.world_size, len(trace.steps)) == ("nccl", 0, 128, 2)
    assert Counter(c.op for c in trace.collectives) == {"all_to_all": 4, "all_reduce": 4, "all_gather": 2}
    # nccl:all_reduce Input Dims [[26955536]] float; nccl:all_to_all [[419430400]] unsigned char
    assert {c.size_bytes for c in trace.collectives if c.op == "all_reduce"} == {
        19618307 * 4.0, 26955536 * 4.0, 26258430 * 4.0, 5716654 * 4.0}
    assert {c.size_bytes for c in trace.collectives if c.op == "all_to_all"} == {3072.0, 419430400.0, 11386880.0}
    # c10d::_allgather_base_ Input Dims [[1073741824], [16777216]] signed char: S = 1 GiB on 1073741824/16777216 = 64
    assert {(c.size_bytes, c.group_size) for c in trace.collectives if c.op == "all_gather"} == {(2.0**30, 64)}
    kernels_us = sorted(e["dur"] for e in _events("hta-sampled-128ranks-rank0.json.gz")
                        if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
    assert sorted(c.time_s * 1e6 for c in trace.collectives) == pytest.approx(kernels_us)
    # every op ran as ncclKernel_SendRecv_RING_SIMPLE: the name states no algorithm or protocol of the collective
    assert {(c.algorithm, c.protocol) for c in trace.collectives} == {(None, None)}


def test_cpu_only_gloo_trace_of_300_ranks():
    trace = read_trace(FIX / "hta-cpu-only-gloo-rank34.json.gz")
    assert (trace.backend, trace.rank, trace.world_size) == ("gloo", 34, 300)
    ranges = [e for e in _events("hta-cpu-only-gloo-rank34.json.gz") if e.get("name") == "gloo:all_reduce"]
    assert len(trace.collectives) == len(ranges) == 10
    assert sorted(c.time_s for c in trace.collectives) == pytest.approx(sorted(e["dur"] * 1e-6 for e in ranges))
    assert {c.size_bytes for c in trace.collectives} == {321271 * 4.0, 2082411 * 4.0}
    assert {c.group_size for c in trace.collectives} == {300} and "world size" in trace.notes[0]  # 10 groups: assumed


def test_trace_without_record_shapes_has_no_sizes_and_says_why():
    trace = read_trace(FIX / "hta-df-index-resolver-window.json.gz")
    assert len(trace.collectives) == 20 and {c.size_bytes for c in trace.collectives} == {None}
    assert {(c.op, c.group_size, c.algorithm, c.protocol) for c in trace.collectives} == {("all_reduce", 2, "ring", None)}
    assert any("20 call(s) without a size" in n and "record_shapes=True" in n for n in trace.notes)
    result = runner.invoke(app, ["diagnose", str(FIX / "hta-df-index-resolver-window.json.gz"), "-s", "dgx-h100", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["collectives"]
    assert (row["count"], row["size_bytes"], row["measured_busbw_GBps"], row["model_time_s"]) == (20, None, None, None)


@pytest.mark.parametrize(("name", "words"), [
    ("hta-rank-non-gpu.json.gz", "(18 comm ranges, 0 NCCL kernels); profile with ProfilerActivity.CUDA"),
    ("hta-amd-mi250-rocm62.json.gz", "no distributed info"),
])
def test_traces_without_collectives_are_refused_in_one_line(name, words):
    result = runner.invoke(app, ["diagnose", str(FIX / name), "-s", "dgx-h100"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith(f"error: {FIX / name}") and words in lines[0]


def test_azure_ndv5_and_ndv2_topo_files():
    v5, v2 = read_topology(FIX / "azure-ndv5-topo.xml"), read_topology(FIX / "azure-ndv2-topo.xml")
    assert (len(v5.gpus), len(v5.nics), {n.kind for n in v5.nics}) == (8, 8, {"infiniband"})
    assert {(g.pci.link_speed_gts, g.pci.link_width) for g in v5.gpus} == {(32.0, 16)}
    assert (len(v2.gpus), len(v2.nics)) == (8, 1) and {g.pci.link_speed_gts for g in v2.gpus} == {16.0}
    fields = _fields("azure-ndv5-topo.xml")
    assert fields["fact:gpu_pcie"].value == "PCIe 5 x16 (32 GT/s)" and fields["gpu"].status == "assumed"


def test_azure_ncv4_self_nvlink_is_no_peer_link():
    topo = read_topology(FIX / "azure-ncv4-topo.xml")
    assert [(g.sm, g.nvlink_count, g.pci.link_width) for g in topo.gpus] == [(80, 0, None)] * 4
    assert [(n.name, n.speed_mbps) for n in topo.nics] == [("eth0", 100000.0)]
    fields = _fields("azure-ncv4-topo.xml")
    assert fields["gpu"].value == "a100-pcie-80gb" and fields["scale_up.link"].value == "pcie4"
    assert fields["scale_out.nic_bw_bytes_per_s"].value == "100 Gb/s" and fields["gpus_per_node"].value == 4


def test_aws_p4d_topo_file_has_efa_nics():
    topo = read_topology(FIX / "aws-p4d-24xl-topo.xml")
    assert (len(topo.gpus), len(topo.nics), {n.kind for n in topo.nics}) == (8, 4, {"efa"})
    assert {(g.pci.link_speed_gts, g.pci.link_width) for g in topo.gpus} == {(8.0, 16)}
    fields = _fields("aws-p4d-24xl-topo.xml")
    assert fields["scale_out.link"].value.startswith("efa") and fields["scale_out.nics_per_node"].value == 4


def test_rccl_dump_sm_is_not_read_as_a_cuda_capability():
    fields = _fields("rccl-gcn-topo.xml")
    assert fields["gpu"].value == "mi300x" and fields["gpu"].status == "assumed" and 'gcn="gfx942"' in fields["gpu"].source
    assert fields["scale_up.link"].value == "xgmi-mi300" and "1 xGMI links" in fields["scale_up.link"].source


def test_efa_log_reads_ofi_nics_and_ranks():
    fields = _fields("efa-ofi-info.log")
    assert fields["scale_out.nics_per_node"].value == 32 and fields["scale_out.link"].value.startswith("efa")
    assert (fields["gpus_per_node"].value, fields["gpus_per_node"].status) == (8, "read")
    assert fields["fact:net_plugin"].value == "AWS Libfabric" and fields["fact:nnodes"].value == 2


def test_log_of_two_hosts_with_redacted_names_is_a_log_and_says_the_net_lines_differ():
    fields = _fields("mixed-hosts-info.log")
    assert fields["scale_out.nics_per_node"].value == 2 and fields["fact:nranks"].value == 16
    assert any("NET lines disagree: 2 different port lists" in n for n in fields["notes"])


def _broken(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    real = (FIX / "hta-cpu-only-gloo-rank34.json.gz").read_bytes()
    content = {"truncated.json.gz": real[: len(real) // 2], "empty.json": b"", "bad.json.gz": b"\x1f\x8b\x08\x00junk",
               "no-events.json": b'{"schemaVersion": 1, "distributedInfo": {"rank": 0}}', "array.json": b'[{"ph": "X"}]',
               "no-system.xml": b"<topology><gpu/></topology>", "no-nccl.log": b"hello\nworld\n",
               "cut.xml": b'<system version="1"><cpu>'}[name]
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(("name", "words"), [
    ("truncated.json.gz", "truncated or corrupt gzip"), ("bad.json.gz", "truncated or corrupt gzip"),
    ("empty.json", "empty file"), ("no-events.json", "no 'traceEvents' array"), ("array.json", "a JSON array"),
])
def test_broken_traces_end_in_one_line(tmp_path, name, words):
    path = _broken(tmp_path, name)
    result = runner.invoke(app, ["diagnose", str(path), "-s", "dgx-h100"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith(f"error: {path}") and words in lines[0]


@pytest.mark.parametrize(("name", "words"), [
    ("no-system.xml", "not NCCL's <system>"), ("no-nccl.log", "no NCCL lines"), ("cut.xml", "not well-formed XML"),
    ("azure-ncv4-graph.xml", "an NCCL graph file"), ("aws-g5.48xl-topo.xml", "bus ids only"),
    ("hwloc-lstopo.xml", "an hwloc topology"),
])
def test_wrong_nccl_files_end_in_one_line(tmp_path, name, words):
    path = FIX / name if (FIX / name).exists() else _broken(tmp_path, name)
    result = runner.invoke(app, ["profiles", "from-nccl", str(path), "--out", str(tmp_path / "x.yaml")])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith(f"error: {path}") and words in lines[0]
    assert not (tmp_path / "x.yaml").exists()


def _one_launch_trace(path: Path, comm_args: dict, launch: tuple[str, str], kernel: tuple[str, float]) -> Path:
    """A rank-0-of-8 Kineto trace of one collective: its record_param_comms op (``comm_args``), the launch inside it
    (category, name) and the GPU kernel (name, duration in µs) the launch's correlation id points at."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 100.0, "dur": 50.0,
         "args": comm_args},
        {"ph": "X", "cat": launch[0], "name": launch[1], "pid": 1, "tid": 1, "ts": 120.0, "dur": 5.0,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": kernel[0], "pid": 2, "tid": 3, "ts": 130.0, "dur": kernel[1],
         "args": {"correlation": 7}},
    ]
    path.write_text(json.dumps({"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},
                                "traceEvents": events}))
    return path


@pytest.mark.parametrize("comm_args, launch, kernel, expected", [
    # the shape of a ROCm Kineto trace (HTA's MI250 file: hipLaunchKernel / hipExtModuleLaunchKernel runtime events)
    # with an RCCL all-reduce: record_param_comms as PyTorch >= 2.1 writes it, the kernel's launch inside it
    ({"Collective name": "allreduce", "In msg nelems": 4194304, "Out msg nelems": 4194304, "dtype": "BFloat16",
      "Group size": 8}, ("cuda_runtime", "hipExtLaunchKernel"),
     ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", 250.0), ("all_reduce", 4194304 * 2.0)),
    # NCCL >= 2.23 launches with cuLaunchKernelEx (enqueue.cc @ v2.23.4-1); Kineto files it under "cuda_driver";
    # RING_LL names the kernel, not the algorithm and protocol that ran
    ({"Collective name": "_allgather_base", "In msg nelems": 256, "Out msg nelems": 2048, "dtype": "BFloat16",
      "Group size": 8}, ("cuda_driver", "cuLaunchKernelEx"),
     ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 12.5), ("all_gather", 2048 * 2.0)),
], ids=["rocm-hip-launch", "nccl-2.23-driver-launch"])
def test_a_kernel_is_attributed_through_its_launch(tmp_path, comm_args, launch, kernel, expected):
    (call,) = read_trace(_one_launch_trace(tmp_path / "t.json", comm_args, launch, kernel)).collectives
    assert (call.op, call.size_bytes, call.group_size, call.num_kernels) == (*expected, 8, 1)
    assert call.time_s == pytest.approx(kernel[1] * 1e-6) and (call.algorithm, call.protocol) == (None, None)


def test_rccl_log_is_read_as_rccl_with_the_amd_stand_in():
    fields = _fields("rccl-info.log")
    assert (fields["fact:library"].value, fields["fact:nccl_version"].value) == ("RCCL", "2.27.7-HEAD:0d2c4fd")
    assert fields["gpus_per_node"].value == 8 and fields["scale_out.nics_per_node"].value == 8
    assert fields["scale_out.link"].value.startswith("roce") and fields["gpu"].value == "mi300x"


def test_log_whose_first_communicator_is_a_tp_pair_reads_the_largest_and_ring_lines_only():
    fields = _fields("tp-first-info.log")
    # line 3 opens a 2-rank TP communicator (localRanks 2); line 5 the 32-rank world (4 nodes x 8)
    assert (fields["gpus_per_node"].value, fields["fact:nranks"].value, fields["fact:nnodes"].value) == (8, 32, 4)
    assert "line 5" in fields["gpus_per_node"].source
    # "Channel 00/0 : 0[0] -> 1[1] via P2P" (line 2) is a connection, not a ring: the ring line says 24
    assert fields["fact:channels"].value == 24 and "line 4" in fields["fact:channels"].source
    assert any("communicators of 2, 32 ranks" in n for n in fields["notes"])


def test_group_size_from_process_group_ranks_or_the_named_pg_config_entry(tmp_path):
    def call(ts: float, corr: int, **extra) -> list[dict]:
        args = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float", **extra}
        return [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": ts, "dur": 20.0,
                 "args": args},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 5,
                 "dur": 2.0, "args": {"correlation": corr}},
                {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "pid": 0, "tid": 7,
                 "ts": ts + 10, "dur": 30.0, "args": {"correlation": corr}}]
    pgs = [{"pg_name": "0", "pg_size": 16}, {"pg_name": "3", "pg_size": 4}]
    events = (call(100.0, 1, **{"Process Group Ranks": "[0, 2, 4, 6]"}) + call(200.0, 2, **{"Process Group Name": "3"})
              + call(300.0, 3, **{"Process Group Ranks": "[" + ", ".join(map(str, range(30))) + ", ...]"}))
    path = tmp_path / "pg.json"
    path.write_text(json.dumps({"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 16, "pg_config": pgs},
                                "traceEvents": events}))
    trace = read_trace(path)
    assert [(c.group_size, c.size_bytes) for c in trace.collectives] == [(4, 4096.0), (4, 4096.0), (16, 4096.0)]
    assert trace.notes == ["group size taken as the world size: the trace does not name each collective's process group"]


