"""The shipped profile library: every system loads, every number has a source, the facts match their citations.

[HF §n] = ../shared/validation/hardware_facts.md section n (a digest of the public sources it names).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import ProfileError
from commmodel.hardware.models import GPU, ScaleOutTier, ScaleUpTier, System
from commmodel.io.profiles import (
    PROFILES_DIRNAME,
    list_systems,
    load_gpus,
    load_links,
    load_system,
    profiles_dir,
    system_paths,
)
from commmodel.units import parse_flops_per_s, parse_rate_bytes_per_s

runner = CliRunner()
GB = 1e9
Gb = 1e9 / 8
REPO = Path(__file__).resolve().parent.parent

# DESIGN §8: "Systems the library must name" (plus generic Ethernet clusters).
DESIGN_SYSTEMS = [
    "dgx-a100", "dgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72", "alps-gh200", "aws-p4d", "aws-p4de",
    "aws-p5", "aws-p6-b200", "gcp-a3-high", "gcp-a3-mega", "azure-nd-a100-v4", "azure-nd-h100-v5",
    "azure-nd-h200-v5", "oci-bm-gpu4.8", "pcie-2x-rtx2080ti", "pcie-8x-rtx4090",
]
# DESIGN §8 catalogue names for --network and system files.
DESIGN_LINKS = [
    "nvlink3", "nvlink4", "nvlink5", "nvlink-c2c", "pcie3", "pcie4", "pcie5", "pcie6", "ib-edr", "ib-hdr",
    "ib-ndr", "ib-xdr", "eth-10g", "eth-25g", "eth-100g", "eth-200g", "eth-400g", "eth-800g", "roce-100g",
    "roce-200g", "roce-400g", "efa-v1", "efa-v2", "efa-v3", "efa-v4", "tcpx", "tcpxo", "slingshot-11",
    "omnipath-100g",
]
# Fields that are structure, not measurements: the only bare numbers a profile may hold.
STRUCTURAL = {"gpus_per_node", "domain_size", "nics_per_node", "min_ranks", "oversubscription", "gpus_per_host_link",
              "links_per_gpu"}


@pytest.mark.parametrize("name", sorted(system_paths()))
def test_every_shipped_system_loads_and_its_file_name_is_its_name(name):
    system = load_system(name)
    assert system.name == name
    assert system.gpus_per_node >= 1 and system.sources


def test_library_names_every_design_system_and_generic_ethernet_clusters():
    names = set(system_paths())
    assert set(DESIGN_SYSTEMS) <= names
    generic_eth = [s for s in list_systems() if s.scale_out and s.scale_out.kind == "ethernet"]
    assert len(generic_eth) >= 2


def test_catalogue_has_every_design_link_in_the_right_tier():
    links = load_links()
    for name in DESIGN_LINKS:
        expected = "scale_up" if name.startswith(("nvlink", "pcie")) else "scale_out"
        assert links[name].tier == expected, name
    for gen in (3, 4, 5, 6):
        assert links[f"pcie{gen}"].kind == "pcie_p2p"
        assert links[f"pcie{gen}-host"].kind == "pcie_host"
        assert links[f"pcie{gen}-host"].bw_bytes_per_s.value == links[f"pcie{gen}"].bw_bytes_per_s.value
    assert {links[n].kind for n in ("nvlink3", "nvlink4", "nvlink5")} == {"nvswitch"}
    assert links["nvlink-c2c"].kind == "nvlink_c2c"


def _walk(node, path=""):
    """Yield (path, node) for every dict and leaf of a dumped model."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}[{i}]")


@pytest.mark.parametrize("name", sorted(system_paths()))
def test_every_number_in_a_system_carries_a_source(name):
    dumped = load_system(name).model_dump(mode="python")
    sourced = 0
    for path, node in _walk(dumped):
        if isinstance(node, dict) and "value" in node:
            assert set(node) == {"value", "source"}, path
            assert isinstance(node["source"], str) and len(node["source"]) >= 10, path
            sourced += 1
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            leaf = path.rsplit(".", 1)[-1]
            parent = path.rsplit(".", 1)[0]
            assert leaf in STRUCTURAL or leaf == "value", f"{name}: bare number at {path}"
            if leaf == "value":
                assert "source" in _lookup(dumped, parent), path
    # GPU (4+ numbers), scale-up (3), scale-out (3 if present): nothing was dropped on the way.
    assert sourced >= 7


def _lookup(tree, dotted):
    node = tree
    for part in dotted.split("."):
        node = node[part]
    return node


def test_catalogue_sources_are_real_citations_or_stated_assumptions():
    for name, spec in load_links().items():
        for field in (spec.bw_bytes_per_s, spec.efficiency, spec.latency_s):
            text = field.source.lower()
            assert "todo" not in text and "?" not in text.replace("(did", ""), name
            assert len(text) >= 25, (name, text)
    for name, data in load_gpus().items():
        gpu = GPU.model_validate(data)
        for field in (gpu.hbm_bytes, gpu.hbm_bw_bytes_per_s, gpu.matmul_efficiency,
                      *gpu.peak_flops_per_s.values()):
            assert len(field.source) >= 20, name


@pytest.mark.parametrize("kind", ["ethernet", "roce", "pcie_p2p", "pcie_host"])
def test_efficiency_is_one_value_per_link_kind_where_no_generation_was_measured(kind):
    # These kinds have one measurement each, so every generation carries it ("assumed like ..."); EFA has
    # one per generation (test_efa_efficiency_per_generation_reproduces_its_source).
    values = {spec.efficiency.value for spec in load_links().values() if spec.kind == kind}
    assert len(values) == 1, (kind, values)


# ---------------------------------------------------------------- line-rate facts, each with its citation

@pytest.mark.parametrize(("link", "gb_per_s"), [
    ("nvlink3", 300), ("nvlink4", 450), ("nvlink5", 900),   # [HF §1] NVLink table, uni = bidirectional / 2
    ("ib-edr", 12.5), ("ib-hdr", 25), ("ib-ndr", 50), ("ib-xdr", 100),  # [HF §3] IBTA 4x port rates
    ("efa-v1", 12.5), ("efa-v2", 12.5), ("efa-v3", 25), ("efa-v4", 50),  # [HF §4] per adapter
    ("tcpx", 25), ("tcpxo", 25), ("slingshot-11", 25), ("omnipath-100g", 12.5),  # [HF §4]
    ("pcie3", 15.75),                                        # [HF §2] Intel 683111: Gen3 x16 126 Gb/s
])
def test_link_line_rates_match_the_spec_sheets(link, gb_per_s):
    assert load_links()[link].bw_bytes_per_s.value == pytest.approx(gb_per_s * GB, rel=1e-9)


@pytest.mark.parametrize("gbit", [10, 25, 100, 200, 400, 800])
def test_ethernet_and_roce_rates_are_the_line_rate_in_bytes(gbit):
    links = load_links()
    assert links[f"eth-{gbit}g"].bw_bytes_per_s.value == gbit * Gb  # 1 GB/s = 8 Gb/s [HF §4]
    if f"roce-{gbit}g" in links:
        assert links[f"roce-{gbit}g"].bw_bytes_per_s.value == gbit * Gb


def test_pcie_generations_double():
    links = load_links()
    rates = [links[f"pcie{g}"].bw_bytes_per_s.value for g in (3, 4, 5, 6)]
    for slower, faster in zip(rates, rates[1:]):
        assert faster / slower == pytest.approx(2.0, rel=0.05)  # [HF §2]: 15.75, ~31, ~63, ~121 GB/s


@pytest.mark.parametrize(("system", "nics", "node_gb_per_s"), [
    ("dgx-h100", 8, 400),          # 8x 400 Gb/s NDR = 400 GB/s [HF §4, MLE-net node table]
    ("dgx-a100", 8, 200),          # 8x 200 Gb/s HDR (NVIDIA DGX A100 datasheet; AddyLaddy nccl#812)
    ("azure-nd-a100-v4", 8, 200),  # 1.6 Tb/s per VM [HF §4, AZ]
    ("azure-nd-h100-v5", 8, 400),  # 3.2 Tb/s per VM [HF §4, AZ]
    ("aws-p4d", 4, 50),            # EFA v1 4x 100 Gb/s [HF §4]
    ("aws-p4de", 4, 50),
    ("aws-p5", 32, 400),           # EFA v2 32x 100 Gb/s = 3.2 Tb/s [HF §4]
    ("aws-p6-b200", 8, 400),       # EFA v4 8x 400 Gb/s [HF §4]
    ("gcp-a3-high", 4, 100),       # TCPX 4x 200 Gb/s [HF §4]
    ("gcp-a3-mega", 8, 200),       # TCPXO 8x 200 Gb/s [HF §4]
    ("alps-gh200", 4, 100),        # Slingshot-11 200 Gb/s, one NIC per GH200 [HF §4, cscs-docs]
    ("oci-bm-gpu4.8", 16, 200),    # 1.6 Tb/s RoCE cluster network (16 x 100 Gb/s)
    ("gb200-nvl72", 4, 200),       # one 400 Gb/s CX-7 per GPU (GCP A4X: 4x CX-7 = 1,600 Gbps per tray)
    ("aws-p5en", 16, 400),         # EFA v3 16x 200 Gb/s [HF §4; MLE-net node table]
    ("gcp-a4", 8, 400),            # 8x CX-7, 3,200 Gbps for GPU-to-GPU (Google Cloud 'Networking and GPU machines')
    ("azure-nd-gb200-v6", 4, 200), # 4x 400 Gb/s Quantum-2 CX7 per VM (learn.microsoft.com nd-gb200-v6-series)
    ("hgx-b300", 8, 800),          # 8x ConnectX-8 800 Gb/s (DGX B300; MLE-net node table)
    ("gb300-nvl72", 4, 400),       # one ConnectX-8 800 Gb/s per GPU (GB300 NVL72: 72 CX-8 NICs)
    ("amd-mi300x", 8, 400),        # Azure ND MI300X v5: 8x 400 Gb/s NDR
    ("gcp-a3-ultra", 8, 400),      # 8x CX-7, 3,200 Gbps for GPU-to-GPU (Google Cloud 'Networking and GPU machines')
    ("gcp-a4x", 4, 200),           # 4x CX-7, 1,600 Gbps for GPU-to-GPU (same page)
    ("gcp-a4x-max", 8, 400),       # 4x CX-8 SuperNICs, 3,200 Gbps in an 8-way rail-aligned topology (same page)
    ("azure-nd-gb300-v6", 4, 400), # 800 Gb/s Quantum-X800 per GPU, 4 GPUs per VM (Azure ND GB300 v6 announcement)
    ("cpu-host", 1, 50),           # Azure HBv4: one 400 Gb/s NDR
])
def test_node_network_line_rates(system, nics, node_gb_per_s):
    out = load_system(system).scale_out
    assert out.nics_per_node == nics
    assert out.nics_per_node * out.nic_bw_bytes_per_s.value == pytest.approx(node_gb_per_s * GB, rel=1e-9)


def test_scale_up_domains():
    nvl72 = load_system("gb200-nvl72")
    assert (nvl72.gpus_per_node, nvl72.scale_up.domain_size) == (4, 72)  # NVL72: 18 trays x 4 GPUs
    alps = load_system("alps-gh200")
    assert alps.scale_up.kind == "nvlink_direct" and alps.scale_up.in_network_reduction is None  # no NVSwitch
    for name in ("pcie-2x-rtx2080ti", "pcie-8x-rtx4090"):
        box = load_system(name)
        assert box.scale_up.kind == "pcie_host" and box.scale_out is None  # P2P disabled on GeForce


# ---------------------------------------------------------------- efficiencies reproduce their cited measurements

@pytest.mark.parametrize(("link", "measured_gb_per_s", "rel"), [
    ("nvlink3", 232.5, 0.02),   # 8x A100 ring busbw 230-235 GB/s (stas00 234.89, nccl-tests#175 232.54) [HF §1]
    ("nvlink4", 367.2, 0.01),   # 8x H200 ring busbw 367.2 GB/s at 16 GiB (stas00) [HF §1]
    ("nvlink5", 682.2, 0.005),  # 8x B200 ring (NVLS off) 682.2 GB/s at 8 GiB (stas00/ml-engineering "SHARP", p6-b200)
    ("xgmi-mi300", 312.912, 0.005),  # 8x MI300X all_reduce_bench 4 GiB: 312.912 GB/s busbw (stas00/ml-engineering)
    ("ib-hdr", 24.0, 0.01),     # 192 GB/s over 8 HDR NICs (AddyLaddy, nccl#812) = 24 per NIC [HF §3]
    ("ib-ndr", 47.5, 0.02),     # CX-7 NDR 46-48 (up to 49) GB/s per NIC (AddyLaddy, nccl-tests#290/#319) [HF §3]
    ("ib-edr", 12.0, 0.02),     # 12.2 GB/s per 100G EDR HCA (sjeaugey, nccl-tests#29) [HF §3]
    # 2x RTX 2080 Ti without P2P behind one switch: all-reduce busbw 4.00 GB/s per GPU, both GPUs'
    # staged traffic on the one Gen3 x16 uplink: 2 x 4.00 GB/s per link [HF §2]
    ("pcie3-host", 2 * 4.00, 0.01),
    ("pcie4", 25.95, 0.01),     # 4x RTX 4090 with a P2P driver: 25.95 GB/s (tinygrad/open-gpu-kernel-modules#36)
    ("omnipath-100g", 135 / 4 / 8, 0.02),  # Jean Zay: 4 OPA links delivered ~135 Gb/s [HF §4]
])
def test_achievable_bandwidth_reproduces_its_source(link, measured_gb_per_s, rel):
    spec = load_links()[link]
    achievable = spec.bw_bytes_per_s.value * spec.efficiency.value
    assert achievable == pytest.approx(measured_gb_per_s * GB, rel=rel)


def test_nvls_busbw_reproduces_its_source():
    links = load_links()
    nvls4 = links["nvlink4"].in_network_reduction
    nvls5 = links["nvlink5"].in_network_reduction
    # 480.0 GB/s NVLS all-reduce busbw on 8x H200 at 16 GiB (stas00; sjeaugey nccl-tests#212) [HF §1]
    assert 450 * GB * nvls4.busbw_efficiency.value == pytest.approx(480 * GB, rel=0.01)
    # 838.0 GB/s NVLS busbw at 8 GiB on 8x B200 (p6-b200, NCCL 2.27.7; stas00/ml-engineering "SHARP")
    assert 900 * GB * nvls5.busbw_efficiency.value == pytest.approx(838.0 * GB, rel=0.005)
    # The 72-GPU rack keeps its own: 834.57 GB/s at 8 GiB (coreweave/nccl-tests README, NCCL 2.26.2) and a
    # ring slope of ~846 GB/s between 1 and 8 GiB.
    for name in ("gb200-nvl72", "azure-nd-gb200-v6", "gb300-nvl72", "gcp-a4x", "azure-nd-gb300-v6", "gcp-a4x-max"):
        up = load_system(name).scale_up
        assert 900 * GB * up.in_network_reduction.busbw_efficiency.value == pytest.approx(834.57 * GB, rel=0.005)
        assert up.bw_bytes_per_s.value * up.efficiency.value == pytest.approx(846 * GB, rel=0.01)
    # NCCL picks NVLS from 5 GPUs on 8x H200 and from 6 on 8x B200 (same sweeps); NVL72 partitions <= 4 GPUs
    # get no multicast (NVIDIA GB200 NVL Partition Guide).
    assert (nvls4.min_ranks, nvls5.min_ranks) == (5, 6)
    assert load_system("gb200-nvl72").scale_up.in_network_reduction.min_ranks == 5
    assert links["nvlink3"].in_network_reduction is None  # A100 has no NVLS [HF §1, setups.md]


# ---------------------------------------------------------------- GPU facts

@pytest.mark.parametrize(("gpu", "dtype", "tflops"), [
    ("a100-sxm-80gb", "bf16", 312), ("a100-sxm-40gb", "bf16", 312), ("a100-pcie-80gb", "bf16", 312),
    ("h100-sxm-80gb", "bf16", 989), ("h100-sxm-80gb", "fp8", 1979), ("h100-pcie-80gb", "bf16", 756),
    ("h200-sxm-141gb", "bf16", 989), ("gh200-96gb", "bf16", 989), ("b200-sxm-180gb", "bf16", 2250),
    ("gb200", "bf16", 2500), ("gb200", "fp8", 5000), ("v100-sxm2-32gb", "fp16", 125),
])  # [HF §5] dense peaks (MLE-acc; V100 datasheet)
def test_gpu_dense_peaks(gpu, dtype, tflops):
    model = GPU.model_validate(load_gpus()[gpu])
    assert model.peak_for(dtype) == pytest.approx(tflops * 1e12, rel=1e-9)


@pytest.mark.parametrize(("gpu", "mamf_tflops"), [
    ("a100-sxm-80gb", 271.2), ("a100-pcie-80gb", 252.9), ("h100-sxm-80gb", 794.5), ("gh200-96gb", 828.6),
    ("b200-sxm-180gb", 1745), ("gb200", 1822), ("h200-sxm-141gb", 794.5),
])  # [HF §5] measured MAMF (stas00/ml-engineering compute/accelerator; H200: the H100 SXM row's note "H200 is the same")
def test_matmul_efficiency_is_measured_mamf_over_peak(gpu, mamf_tflops):
    model = GPU.model_validate(load_gpus()[gpu])
    assert model.matmul_efficiency.value * model.peak_for("bf16") == pytest.approx(mamf_tflops * 1e12, rel=0.005)


def test_gpu_catalogue_invariants():
    for name, data in load_gpus().items():
        gpu = GPU.model_validate(data)
        peaks = {d: f.value for d, f in gpu.peak_flops_per_s.items()}
        if "fp8" in peaks and "bf16" in peaks:  # fp8 runs at twice the bf16 tensor rate (dense)
            assert peaks["fp8"] / peaks["bf16"] == pytest.approx(2.0, rel=0.03), name
        if "tf32" in peaks:
            assert peaks["tf32"] / peaks["bf16"] == pytest.approx(0.5, rel=1e-3), name
        assert 0.5 < gpu.matmul_efficiency.value <= 1.0, name
        # Either a measured MAMF or an assumption that says what stands in for it.
        source = gpu.matmul_efficiency.source
        assert source.startswith("MAMF ") or (source.startswith("assumed") and "MAMF" in source), name
        if gpu.matmul_efficiency_fp8 is not None:  # the same rule for the FP8 ratio
            fp8 = gpu.matmul_efficiency_fp8.source
            assert 0.5 < gpu.matmul_efficiency_fp8.value <= 1.0, name
            assert fp8.startswith("MAMF ") or (fp8.startswith("assumed") and "MAMF" in fp8), name


# ---------------------------------------------------------------- the CLI on the library

def test_profiles_list_json_names_every_design_system():
    result = runner.invoke(app, ["profiles", "list", "--json"])
    assert result.exit_code == 0
    systems = {s["name"]: s for s in json.loads(result.stdout)["systems"]}
    assert set(DESIGN_SYSTEMS) <= set(systems)
    assert systems["dgx-h100"]["node_network_GBps"] == pytest.approx(400)
    assert systems["dgx-h100"]["gpu"] == "h100-sxm-80gb" and systems["dgx-h100"]["gpus_per_node"] == 8


def test_profiles_show_dgx_h100_json_has_gpu_tiers_and_sources():
    result = runner.invoke(app, ["profiles", "show", "dgx-h100", "--json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["gpu"]["name"] == "h100-sxm-80gb"
    assert parse_flops_per_s(doc["gpu"]["peak_flops_per_s"]["bf16"]["value"]) == pytest.approx(989e12)
    assert doc["scale_up"]["link"] == "nvlink4"
    assert parse_rate_bytes_per_s(doc["scale_up"]["bw_bytes_per_s"]["value"]) == 450e9
    assert doc["scale_out"]["link"] == "ib-ndr" and doc["scale_out"]["nics_per_node"] == 8
    assert "NDR" in doc["scale_out"]["nic_bw_bytes_per_s"]["source"]
    assert doc["sources"]
    # The dump is itself a complete profile: it validates back to the same system.
    assert System.model_validate(doc) == load_system("dgx-h100")


def test_profiles_show_human_output_prints_values_with_sources():
    result = runner.invoke(app, ["profiles", "show", "gb200-nvl72"])
    assert result.exit_code == 0
    assert "domain of 72 GPUs" in result.stdout and "900 GB/s" in result.stdout
    assert "(coreweave/nccl-tests README" in result.stdout  # the NVLS efficiency's source


def test_profiles_links_and_gpus_json():
    links = json.loads(runner.invoke(app, ["profiles", "links", "--json"]).stdout)["links"]
    by_name = {entry["name"]: entry for entry in links}
    assert set(DESIGN_LINKS) <= set(by_name)
    assert by_name["ib-ndr"]["bw_GBps"] == pytest.approx(50) and by_name["ib-ndr"]["latency_us"] > 0
    gpus = json.loads(runner.invoke(app, ["profiles", "gpus", "--json"]).stdout)["gpus"]
    assert {"a100-sxm-80gb", "h100-sxm-80gb", "rtx-4090"} <= {g["name"] for g in gpus}


def test_profiles_schema_is_json_with_the_system_fields():
    result = runner.invoke(app, ["profiles", "schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert {"gpu", "gpus_per_node", "scale_up", "scale_out"} <= set(schema["properties"])


def test_validate_accepts_the_whole_shipped_library():
    result = runner.invoke(app, ["profiles", "validate", str(profiles_dir()), "--json"])
    assert result.exit_code == 0, result.output
    checked = json.loads(result.stdout)["checked"]
    assert all(item["ok"] for item in checked)
    assert len(checked) == len(system_paths()) + 2  # + links.yaml and gpus.yaml


# ---------------------------------------------------------------- finding the library after installation

def _library(root: Path) -> Path:
    folder = root / PROFILES_DIRNAME
    folder.mkdir(parents=True)
    (folder / "links.yaml").write_text("{}\n")
    return folder


def test_profiles_dir_prefers_the_copy_inside_an_installed_package(tmp_path):
    package = tmp_path / "site-packages" / "commmodel"
    installed = _library(package)
    _library(tmp_path / "site-packages")  # a stray checkout-style folder next to it loses
    assert profiles_dir(package) == installed


def test_profiles_dir_falls_back_to_the_source_checkout(tmp_path):
    package = tmp_path / "repo" / "commmodel"
    package.mkdir(parents=True)
    checkout = _library(tmp_path / "repo")
    assert profiles_dir(package) == checkout


def test_profiles_dir_missing_library_names_both_places(tmp_path):
    package = tmp_path / "commmodel"
    package.mkdir()
    with pytest.raises(ProfileError, match="reinstall") as err:
        profiles_dir(package)
    assert str(package / PROFILES_DIRNAME) in str(err.value)


def test_pyproject_ships_the_library_inside_the_wheel_and_sdist():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    wheel = config["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["force-include"][PROFILES_DIRNAME] == f"commmodel/{PROFILES_DIRNAME}"
    assert "commmodel" in wheel["packages"]
    assert PROFILES_DIRNAME in config["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    # The checkout layout that force-include copies from is the one profiles_dir() falls back to.
    assert profiles_dir() in {REPO / PROFILES_DIRNAME, REPO / "commmodel" / PROFILES_DIRNAME}


# ---------------------------------------------------------------- systems added for issues 11, 12 and 14

@pytest.mark.parametrize(("link", "measured_gb_per_s", "node_line_gb_per_s"), [
    ("efa-v1", 42.4, 50),     # 2x p4de tree slope 42.4 GB/s per node of 4x 12.5 (aws-p4de-2n-efa)
    ("efa-v3", 364.87, 400),  # 4x p5en Ring, 4 GiB: 364.87 GB/s busbw over 16x 25 GB/s (stas00/ml-engineering)
    ("efa-v4", 377.34, 400),  # 4x p6-b200, 4 GiB: 377.34 GB/s busbw over 8x 50 GB/s (stas00/ml-engineering)
])
def test_efa_efficiency_per_generation_reproduces_its_source(link, measured_gb_per_s, node_line_gb_per_s):
    assert load_links()[link].efficiency.value == pytest.approx(measured_gb_per_s / node_line_gb_per_s, rel=0.005)


def test_tcpxo_latency_is_above_rdma_and_tcpx_at_least_as_slow():
    links = load_links()
    # TCP-based: fitted 10.45 us through tree/Simple to the 2x A3 Mega 123.4 us floor, vs the RDMA hop 6.7 us (ib-ndr);
    # a Simple network hop pays it twice (tests/test_collectives_simple_only.py has the closed form)
    assert links["tcpxo"].latency_s.value == pytest.approx(10.5e-6)
    assert links["tcpx"].latency_s.value >= links["tcpxo"].latency_s.value > links["ib-ndr"].latency_s.value


@pytest.mark.parametrize(("gpu", "dtype", "tflops"), [
    ("b300-sxm-288gb", "bf16", 2250), ("b300-sxm-288gb", "fp8", 4500),   # [MLE-acc] DGX B300 datasheet, dense
    ("gb300", "bf16", 2500), ("gb300", "fp4", 15000),                     # GB300 NVL72: 1,080 PF dense FP4 / 72
    ("b200-sxm-180gb", "fp4", 9000), ("gb200", "fp4", 10000),             # HGX B200 / GB200 NVL72 spec: 18 / 20 PF sparse FP4
    ("mi300x", "bf16", 1307.4), ("mi300x", "fp8", 2614.9),                # AMD MI300X spec, dense
    ("mi325x", "bf16", 1307.4),                                           # same compute as MI300X
    ("mi355x", "bf16", 2500), ("mi355x", "fp8", 5000),                    # AMD MI355X spec, dense (sparse x2)
])
def test_new_gpu_dense_peaks(gpu, dtype, tflops):
    assert GPU.model_validate(load_gpus()[gpu]).peak_for(dtype) == pytest.approx(tflops * 1e12, rel=1e-9)


MIB = 2.0**20
GIB = 2.0**30


@pytest.mark.parametrize(("gpu", "hbm_bytes", "hbm_tb_per_s", "mamf_tflops"), [
    ("b300-sxm-288gb", 275040 * MIB, 8.0, 1769.0),  # nvidia-smi total; [MLE-acc] memory table and MAMF table
    ("mi300x", 205822885888, 5.3, 668.4),  # rocm-smi VRAM total
    ("mi325x", 256 * GIB, 6.0, 784.9),
    ("mi355x", 288 * GIB, 8.0, 1565.0),
])
def test_new_gpu_memory_and_mamf(gpu, hbm_bytes, hbm_tb_per_s, mamf_tflops):
    model = GPU.model_validate(load_gpus()[gpu])
    assert model.hbm_bytes.value == hbm_bytes
    assert model.hbm_bw_bytes_per_s.value == pytest.approx(hbm_tb_per_s * 1e12)
    assert model.matmul_efficiency.value * model.peak_for("bf16") == pytest.approx(mamf_tflops * 1e12, rel=0.005)


@pytest.mark.parametrize(("link", "links", "per_link_gb_per_s"), [("xgmi-mi300", 7, 64), ("xgmi-mi355", 7, 76.5)])
def test_xgmi_mesh_records_links_and_per_link_rate(link, links, per_link_gb_per_s):
    spec = load_links()[link]  # AMD: 128 / 153 GB/s peak per link, duplex, halved [MLE-net xGMI table]
    assert spec.kind == "xgmi" and spec.links_per_gpu == links
    assert spec.link_bw_bytes_per_s.value == per_link_gb_per_s * GB
    assert spec.bw_bytes_per_s.value == pytest.approx(links * per_link_gb_per_s * GB)
    up = load_system("amd-mi300x" if link == "xgmi-mi300" else "amd-mi355x").scale_up
    assert (up.kind, up.links_per_gpu, up.domain_size) == ("xgmi", links, 8) and up.in_network_reduction is None


def test_mesh_link_count_and_rate_must_agree_with_the_total():
    spec = load_links()["xgmi-mi300"]
    data = spec.model_dump(mode="json", exclude={"name", "tier", "description"}, exclude_none=True)
    data.update(domain_size=8, link="xgmi-mi300", links_per_gpu=6)  # 6 x 64 != 448
    with pytest.raises(ValueError, match="links_per_gpu 6"):
        ScaleUpTier.model_validate(data)
    data.pop("link_bw_bytes_per_s")
    with pytest.raises(ValueError, match="go together"):
        ScaleUpTier.model_validate(data)


def test_oversubscription_above_one_needs_a_source():
    out = load_system("dgx-h100").scale_out.model_dump(mode="json")
    with pytest.raises(ValueError, match="oversubscription_source"):
        ScaleOutTier.model_validate({**out, "oversubscription": 7.0})
    tier = ScaleOutTier.model_validate({**out, "oversubscription": 7.0, "oversubscription_source": "Llama 3 paper 1:7"})
    assert tier.node_bw_bytes_per_s == pytest.approx(load_system("dgx-h100").scale_out.node_bw_bytes_per_s / 7)


def test_new_systems_key_facts():
    assert load_system("hgx-b300").gpu.hbm_bytes.value == 275040 * MIB   # B300 "288 GB": nvidia-smi 275040 MiB
    assert load_system("hgx-b300").scale_out.nic_bw_bytes_per_s.value == 100 * GB  # ConnectX-8 800 Gb/s
    nd = load_system("azure-nd-gb200-v6")
    assert (nd.gpus_per_node, nd.scale_up.domain_size) == (4, 72)       # a 4-GPU VM in a 72-GPU NVL72 rack
    a4x_max = load_system("gcp-a4x-max")                                 # a 4-GPU bare-metal node of a GB300 NVL72
    assert (a4x_max.gpu.name, a4x_max.gpus_per_node, a4x_max.scale_up.domain_size) == ("gb300", 4, 72)
    assert (a4x_max.scale_out.kind, a4x_max.scale_out.link) == ("roce", "roce-400g")  # CX-8 as 2 x 400GbE each
    for name in ("hgx-b300", "gb300-nvl72"):                            # NVLink 5: 1.8 TB/s bidirectional
        assert load_system(name).scale_up.bw_bytes_per_s.value == 900 * GB
    cpu = load_system("cpu-host")
    assert cpu.scale_up.kind == "host_loopback" and cpu.host_memory_bw_bytes_per_s.value == 780 * GB  # HBv4 STREAM


@pytest.mark.parametrize("args", [
    # the default library per system: rccl on AMD Instinct, gloo on CPU hosts, nccl on NVIDIA
    ["--size", "1GiB", "--gpus", "16", "--system", "amd-mi300x"],
    ["--size", "1GiB", "--gpus", "4", "--gpus-per-node", "4", "--system", "cpu-host"],
    ["--size", "1GiB", "--gpus", "144", "--system", "gb300-nvl72"],
])
def test_collective_runs_on_the_new_systems(args):
    result = runner.invoke(app, ["collective", "all_reduce", *args, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["num_ranks"] == int(args[3]) and doc["best"]["time_s"] > 0


def test_cpu_host_four_local_ranks_run_at_the_loopback_rate():
    # 4 ranks on one host under gloo (the default there): torch's 60 us call, gloo's ring over loopback-tcp in 1 MiB
    # segments (gloo/allreduce.cc: 1024 segments, 256 per rank, 2·3·256 = 1536 messages) of 23 us + gloo's 63 us
    # hand-off, 2·3/4·S copied at both ends (× 2) at the measured 2.7 GB/s stream, and 3/4·S reduced on the CPU at
    # 3 bytes of traffic per byte of the 97.5 GB/s share
    result = runner.invoke(app, ["collective", "all_reduce", "--size", "1GiB", "--gpus", "4", "--gpus-per-node", "4",
                                 "--system", "cpu-host", "--json"])
    doc = json.loads(result.stdout)
    assert doc["num_nodes"] == 1 and doc["library"] == "gloo"
    s = 2.0**30
    time_s = 60e-6 + 1536 * (23e-6 + 63e-6) + 2 * 1.5 * s / 2.7e9 + 0.75 * s * 3 / 97.5e9
    assert doc["best"]["busbw_GBps"] == pytest.approx(1.5 * s / time_s / 1e9, rel=1e-6)
    assert doc["best"]["busbw_GBps"] == pytest.approx(2.7 / 2, rel=0.15)  # the stream, copied at both ends, sets it


def test_xgmi_full_board_all_reduce_matches_its_measurement():
    # 8x MI300X at 4 GiB: 312.912 GB/s busbw (stas00/ml-engineering). Subsets of the board (2 GPUs: 47.671
    # GB/s) are NOT modelled yet: the collective model prices xGMI like a switch (a later issue).
    result = runner.invoke(app, ["collective", "all_reduce", "--size", "4GiB", "--gpus", "8", "--system", "amd-mi300x",
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["best"]["busbw_GBps"] == pytest.approx(312.912, rel=0.01)


@pytest.mark.parametrize(("gpu", "reported_mib"), [
    ("a100-sxm-40gb", 40960), ("a100-sxm-80gb", 81920), ("h100-sxm-80gb", 81559),  # modal-labs/modal-client #2797
    ("h800-sxm-80gb", 81559), ("h200-sxm-141gb", 143771), ("b200-sxm-180gb", 183359),  # TensorRT-LLM #10278 (B200)
    ("gb200", 189471), ("gb300", 284208), ("l40s", 46068),
])
def test_gpu_capacity_is_what_the_driver_reports(gpu, reported_mib):
    """The datasheets' "80 GB" is binary for these parts: nvidia-smi's memory.total, in MiB, is the capacity."""
    assert GPU.model_validate(load_gpus()[gpu]).hbm_bytes.value == reported_mib * MIB


def test_an_h100_layout_between_80e9_and_the_reported_capacity_fits():
    """Llama 3 8B, seq 8192, CP 2 × DP 4 on one H100 node in FP8 needs ~82.6 GB with the distributed optimizer and
    fp32 main grads: over 80e9 B but inside the 81559 MiB (85.5e9 B) the GPU has. Read as 80e9 B it was called out of
    memory."""
    from commmodel.step.estimate import evaluate_single
    from commmodel.step.layout import Layout
    from commmodel.step.stacks import stack_options
    from commmodel.workload.presets import PRESETS

    layout = Layout(tp=1, cp=2, pp=1, dp=4, micro_batch=1, global_batch=128, zero=1, recompute="none")
    model = PRESETS["llama3-8b"].model_copy(update={"dtype": "fp8", "seq_len": 8192})
    fp32_grads = stack_options("megatron-core", grad_reduce_dtype="fp32", memory_headroom_bytes=0.0)
    row = evaluate_single(model, load_system("dgx-h100"), 8, layout, fp32_grads)
    assert 80e9 < row["memory_bytes_per_gpu"] < 81559 * MIB - 1e9
    assert row["fits"]  # against the driver's total (no headroom kept)


def test_estimate_says_when_a_layout_misses_only_the_headroom():
    """Every command keeps the same 4 GB free (StepOptions.memory_headroom_bytes), estimate as plan and query: a layout
    between the driver's total and that limit does not fit, and estimate says it is the headroom it misses."""
    from commmodel.step.estimate import estimate
    from commmodel.step.layout import Layout
    from commmodel.step.stacks import stack_options
    from commmodel.workload.presets import PRESETS

    system = load_system("dgx-h100")
    model = PRESETS["llama3-8b"].model_copy(update={"dtype": "fp8", "seq_len": 8192})
    tight = Layout(tp=1, cp=2, pp=1, dp=4, micro_batch=1, global_batch=128, zero=1, recompute="none")
    fp32_grads = stack_options("megatron-core", grad_reduce_dtype="fp32")
    flags = estimate(model, system, 8, tight, fp32_grads).flags
    assert any("free, less than the 4 GB kept for the CUDA context" in f for f in flags)
    assert estimate(model, system, 8, tight, fp32_grads.model_copy(update={"memory_headroom_bytes": 0.0})).row["fits"]
    roomy = Layout(tp=2, cp=2, pp=1, dp=2, micro_batch=1, global_batch=128, zero=1, recompute="selective",
                   sequence_parallel=True)
    assert not any("does not fit" in f for f in estimate(model, system, 8, roomy, fp32_grads).flags)


def test_dgx_names_load_the_profile_of_the_same_node() -> None:
    """`-s dgx-b200` was 'unknown system (did you mean hgx-b200?)'; NVIDIA's DGX names now load the profile of the
    same node, which keeps its own name in every output."""
    from commmodel.io.profiles import SYSTEM_ALIASES, load_system, system_paths

    shipped = system_paths()
    assert not set(SYSTEM_ALIASES) & set(shipped) and set(SYSTEM_ALIASES.values()) <= set(shipped)
    for alias, name in SYSTEM_ALIASES.items():
        assert load_system(alias).name == name
