"""Bad profiles (issue 2 §7): each is rejected through `commmodel profiles validate PATH` with exit 1 and one
stderr line that names the file, the field path and a fix."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import ProfileError
from commmodel.io.profiles import load_system_with_network, parse_network

runner = CliRunner()

GOOD = """\
name: my-box
gpu: h100-sxm-80gb
gpus_per_node: 8
scale_up: {link: nvlink4, domain_size: 8}
scale_out: {link: ib-ndr, nics_per_node: 8}
"""


def _with(*replace: tuple[str, str], extra: str = "") -> str:
    text = GOOD
    for old, new in replace:
        assert old in text
        text = text.replace(old, new)
    return text + textwrap.dedent(extra)


# (case id, file text, fragments the one-line message must contain: field path first, then the fix)
CASES = [
    ("malformed-yaml", GOOD.replace("domain_size: 8}", "domain_size: 8"),
     ["line 5", "malformed YAML", "fix the syntax"]),
    ("tab-indent", "name: x\n\tgpu: h100\n", ["line 2", "malformed YAML", "fix the syntax"]),
    ("empty-file", "", ["empty", "needs at least name, gpu, gpus_per_node and scale_up"]),
    ("only-comments", "# nothing here\n", ["empty", "needs at least"]),
    ("non-mapping", "- dgx-h100\n- aws-p5\n", ["must be a YAML mapping", "got list"]),
    ("unknown-key", GOOD + "colour: red\n", ["colour: unknown key", "remove it or fix its spelling"]),
    ("misspelt-key", GOOD.replace("scale_out:", "scale_ot:"),
     ["scale_ot: unknown key", "did you mean scale_out"]),
    ("unknown-nested-key", _with(("domain_size: 8}", "domain_size: 8, bandwith_bytes_per_s: 3}")),
     ["scale_up.bandwith_bytes_per_s: unknown key", "did you mean bw_bytes_per_s"]),
    ("negative-bandwidth", _with(("domain_size: 8}", 'domain_size: 8, bw_bytes_per_s: {value: "-450 GB/s", '
                                                    'source: "my own measurement"}}')),
     ["scale_up.bw_bytes_per_s.value", "negative", "≥ 0"]),
    ("zero-bandwidth", _with(("nics_per_node: 8}", 'nics_per_node: 8, nic_bw_bytes_per_s: {value: "0 Gb/s", '
                                                   'source: "my own measurement"}}')),
     ["scale_out.nic_bw_bytes_per_s", "must be > 0", "positive number"]),
    ("missing-unit", _with(("domain_size: 8}", 'domain_size: 8, bw_bytes_per_s: {value: 450, '
                                               'source: "my own measurement"}}')),
     ["scale_up.bw_bytes_per_s.value", "has no unit", "400 Gbps"]),
    ("wrong-unit-kind", _with(("domain_size: 8}", 'domain_size: 8, bw_bytes_per_s: {value: "450 us", '
                                                  'source: "my own measurement"}}')),
     ["scale_up.bw_bytes_per_s.value", "unknown rate unit 'us'", "accepted forms"]),
    ("unit-case", _with(("nics_per_node: 8}", 'nics_per_node: 8, nic_bw_bytes_per_s: {value: "400 gbps", '
                                              'source: "my own measurement"}}')),
     ["scale_out.nic_bw_bytes_per_s.value", "case-sensitive", "accepted forms"]),
    ("wrong-type", GOOD.replace("gpus_per_node: 8", "gpus_per_node: eight"),
     ["gpus_per_node", "valid integer", "write a whole number"]),
    ("zero-gpus", GOOD.replace("gpus_per_node: 8", "gpus_per_node: 0"),
     ["gpus_per_node", "(got 0)", "use a value ≥ 1"]),
    ("unknown-link", GOOD.replace("link: nvlink4", "link: nvlink9"),
     ["scale_up.link 'nvlink9' is not in the link catalogue", "did you mean nvlink5"]),
    ("network-link-as-scale-up", GOOD.replace("link: nvlink4", "link: ib-ndr"),
     ["scale_up.link 'ib-ndr' is a scale_out link", "pick a scale_up link: loopback-tcp, nvlink-c2c"]),
    ("scale-up-link-as-network", GOOD.replace("link: ib-ndr", "link: nvlink4"),
     ["scale_out.link 'nvlink4' is a scale_up link", "pick a scale_out link"]),
    ("missing-link", GOOD.replace("link: nvlink4, ", ""), ["scale_up.link is missing", "link: nvlink4"]),
    ("tier-not-mapping", GOOD.replace("{link: nvlink4, domain_size: 8}", "nvlink4"),
     ["scale_up must be a mapping", "scale_up: {link: nvlink4}"]),
    ("missing-scale-up", "name: x\ngpu: h100-sxm-80gb\ngpus_per_node: 8\n",
     ["scale_up: required field is missing", "add it"]),
    ("unknown-gpu", GOOD.replace("gpu: h100-sxm-80gb", "gpu: h100-sxm-80"),
     ["gpu 'h100-sxm-80' is not in the GPU catalogue", "did you mean h100-sxm-80gb"]),
    ("unknown-gpu-base", GOOD.replace("gpu: h100-sxm-80gb", "gpu: {base: a100-80gb}"),
     ["gpu.base 'a100-80gb'", "did you mean"]),
    ("inline-gpu-missing-fields", GOOD.replace("gpu: h100-sxm-80gb", 'gpu: {name: my-gpu, peak_flops_per_s: '
                                               '{bf16: {value: "100 TFLOP/s", source: "datasheet"}}}'),
     ["gpu.hbm_bytes: required field is missing", "add it"]),
    ("domain-does-not-divide", GOOD.replace("domain_size: 8", "domain_size: 3"),
     ["scale_up.domain_size 3 does not divide gpus_per_node 8", "set domain_size to 8"]),
    ("domain-not-whole-nodes", GOOD.replace("domain_size: 8", "domain_size: 12"),
     ["scale_up.domain_size 12 spans nodes but is not a multiple of gpus_per_node 8", "e.g. 8"]),
    ("efficiency-out-of-range", _with(("nics_per_node: 8}", 'nics_per_node: 8, efficiency: {value: 1.7, '
                                                            'source: "my own measurement"}}')),
     ["scale_out.efficiency.value", "must lie in (0, 1.5]", "write 0.82 or 82%"]),
    ("efficiency-above-line-rate", _with(("domain_size: 8}", 'domain_size: 8, efficiency: {value: 1.2, '
                                                             'source: "my own measurement"}}')),
     ["scale_up.efficiency = 1.2 exceeds 1", "write a value in (0, 1]"]),
    ("latency-unit-slip", _with(("nics_per_node: 8}", 'nics_per_node: 8, latency_s: {value: "5 ms", '
                                                      'source: "my own measurement"}}')),
     ["scale_out.latency_s = 5 ms", "did you mean 5 us"]),
    ("missing-source", _with(("domain_size: 8}", 'domain_size: 8, bw_bytes_per_s: {value: "400 GB/s"}}')),
     ["scale_up.bw_bytes_per_s.source: required field is missing", "every number needs a source"]),
    ("empty-source", _with(("nics_per_node: 8}", 'nics_per_node: 8, latency_s: {value: "5 us", source: ""}}')),
     ["scale_out.latency_s.source", "say where the number comes from"]),
    ("bad-nic-count", GOOD.replace("nics_per_node: 8", "nics_per_node: 0"),
     ["scale_out.nics_per_node", "(got 0)", "use a value ≥ 1"]),
    ("fractional-nic-count", GOOD.replace("nics_per_node: 8", "nics_per_node: 2.5"),
     ["scale_out.nics_per_node", "write a whole number"]),
    ("oversubscription-below-1", GOOD.replace("nics_per_node: 8}", "nics_per_node: 8, oversubscription: 0.5}"),
     ["scale_out.oversubscription", "use a value ≥ 1"]),
    ("bad-kind", GOOD.replace("domain_size: 8}", "domain_size: 8, kind: nvswitch2}"),
     ["scale_up.kind", "'nvswitch'", "use one of the listed values"]),
    ("nvls-without-nvswitch", GOOD.replace("domain_size: 8}", "domain_size: 8, kind: pcie_p2p}"),
     ["scale_up.in_network_reduction: NVLS needs an NVSwitch", "in_network_reduction: null"]),
]


@pytest.mark.parametrize(("case", "text", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_bad_profile_is_one_line_naming_file_field_and_fix(tmp_path, case, text, fragments):
    path = tmp_path / f"{case}.yaml"
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["profiles", "validate", str(path)])
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith(f"error: {path}")
    assert "Traceback" not in line
    for fragment in fragments:
        assert fragment in line, (fragment, line)


def test_the_good_profile_passes(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    result = runner.invoke(app, ["profiles", "validate", str(path)])
    assert result.exit_code == 0 and result.stdout.strip() == f"ok  {path} (my-box)"


def test_there_are_at_least_15_distinct_bad_inputs():
    assert len({text for _, text, _ in CASES}) >= 15


def test_missing_file_and_binary_file(tmp_path):
    result = runner.invoke(app, ["profiles", "validate", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1 and "no such file" in result.stderr
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    result = runner.invoke(app, ["profiles", "validate", str(binary)])
    assert result.exit_code == 1 and f"{binary}: cannot read" in result.stderr


def test_validate_reports_every_bad_file_and_still_lists_the_good_ones(tmp_path):
    good, bad1, bad2 = tmp_path / "good.yaml", tmp_path / "bad1.yaml", tmp_path / "bad2.yaml"
    good.write_text(GOOD)
    bad1.write_text(GOOD.replace("gpus_per_node: 8", "gpus_per_node: 0"))
    bad2.write_text(GOOD + "colour: red\n")
    result = runner.invoke(app, ["profiles", "validate", str(bad1), str(good), str(bad2), "--json"])
    assert result.exit_code == 1
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2 and str(bad1) in errors[0] and str(bad2) in errors[1]
    checked = json.loads(result.stdout)["checked"]
    assert [item["ok"] for item in checked] == [False, True, False]
    assert "gpus_per_node" in checked[0]["error"]


# ---------------------------------------------------------------- catalogue files

LINK_OK = """\
my-link:
  tier: scale_out
  kind: roce
  bw_bytes_per_s: {value: 100 Gb/s, source: "my NIC's datasheet"}
  efficiency: {value: 0.9, source: "my nccl-tests run, 2025-01-01"}
  latency_s: {value: 6 us, source: "my nccl-tests run, 2025-01-01"}
"""

CATALOGUE_CASES = [
    ("links.yaml", LINK_OK.replace("kind: roce", "kind: nvswitch"),
     ["my-link", "kind 'nvswitch' is not a scale_out kind", "use one of infiniband"]),
    ("links.yaml", LINK_OK.replace("value: 0.9", "value: 1.1"),
     ["my-link", "efficiency = 1.1 exceeds 1", "(0, 1]"]),
    ("links.yaml", LINK_OK.replace("tier: scale_out", "tier: backbone"),
     ["my-link: tier", "'scale_up' or 'scale_out'"]),
    ("links.yaml", "my-link: 100 Gb/s\n", ["my-link: a link spec must be a mapping"]),
    ("gpus.yaml", "my-gpu:\n  peak_flops_per_s: {}\n  hbm_bytes: {value: 80 GB, source: datasheet}\n"
                  "  hbm_bw_bytes_per_s: {value: 2 TB/s, source: datasheet}\n"
                  "  matmul_efficiency: {value: 0.8, source: 'assumed like A100'}\n",
     ["my-gpu", "peak_flops_per_s needs at least one dtype", "add e.g. bf16"]),
    ("gpus.yaml", "my-gpu:\n  peak_flops_per_s: {bf16: {value: 100 TFLOP/s, source: datasheet}}\n"
                  "  hbm_bytes: {value: 80 GB, source: datasheet}\n"
                  "  hbm_bw_bytes_per_s: {value: 2 TB/s, source: datasheet}\n"
                  "  matmul_efficiency: {value: 1.2, source: 'assumed like A100'}\n",
     ["my-gpu", "matmul_efficiency = 1.2 exceeds 1"]),
    ("gpus.yaml", "my-gpu:\n  peak_flops_per_s: {bf16: {value: 100 TFLOP/s, source: datasheet}}\n"
                  "  hbm_bytes: {value: 80 GiB, source: datasheet}\n"
                  "  hbm_bw_bytes_per_s: {value: 2 TB/s, source: datasheet}\n"
                  "  matmul_efficiency: {value: 0.8, source: 'assumed like A100'}\n"
                  "  matmul_efficiency_fp8: {value: 1.3, source: 'a typo'}\n",
     ["my-gpu", "matmul_efficiency_fp8 = 1.3 exceeds 1"]),
]


@pytest.mark.parametrize(("filename", "text", "fragments"), CATALOGUE_CASES)
def test_bad_catalogue_entries(tmp_path, filename, text, fragments):
    path = tmp_path / filename
    path.write_text(text)
    result = runner.invoke(app, ["profiles", "validate", str(path)])
    assert result.exit_code == 1, result.output
    line = result.stderr.strip()
    assert "\n" not in line and line.startswith(f"error: {path}: ")
    for fragment in fragments:
        assert fragment in line, (fragment, line)


def test_a_user_library_resolves_its_systems_against_its_own_catalogue(tmp_path):
    (tmp_path / "links.yaml").write_text(LINK_OK + "my-nvlink:\n  tier: scale_up\n  kind: nvswitch\n"
                                         "  bw_bytes_per_s: {value: 450 GB/s, source: datasheet x}\n"
                                         "  efficiency: {value: 0.8, source: measured y}\n"
                                         "  latency_s: {value: 2 us, source: measured y}\n")
    (tmp_path / "gpus.yaml").write_text("my-gpu:\n  peak_flops_per_s: {bf16: {value: 100 TFLOP/s, source: datasheet}}\n"
                                        "  hbm_bytes: {value: 80 GB, source: datasheet}\n"
                                        "  hbm_bw_bytes_per_s: {value: 2 TB/s, source: datasheet}\n"
                                        "  matmul_efficiency: {value: 0.8, source: 'assumed like A100'}\n")
    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "box.yaml").write_text(
        "gpu: my-gpu\ngpus_per_node: 4\nscale_up: {link: my-nvlink, domain_size: 4}\n"
        "scale_out: {link: my-link, nics_per_node: 2}\n")
    result = runner.invoke(app, ["profiles", "validate", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "(box)" in result.stdout and "link catalogue, 2 links" in result.stdout


# ---------------------------------------------------------------- --network LINK[:N]

@pytest.mark.parametrize(("spec", "fragments"), [
    ("ib-ndrr:8", ["unknown link 'ib-ndrr'", "did you mean ib-ndr"]),
    ("infiniband", ["unknown link 'infiniband'", "network links: efa-v1"]),
    ("nvlink4:8", ["nvlink4 joins GPUs inside a node", "pick a network link"]),
    ("ib-ndr:0", ["NIC count '0' must be a whole number ≥ 1", "ib-ndr:8"]),
    ("ib-ndr:x", ["NIC count 'x'"]),
    ("ib-ndr:", ["NIC count ''", "drop ':N'"]),
    ("eth-100g:-1", ["NIC count '-1'"]),
])
def test_bad_network_option_is_a_profile_error(spec, fragments):
    with pytest.raises(ProfileError) as err:
        parse_network(spec)
    message = str(err.value)
    assert f"--network {spec!r}" in message and "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_network_option_replaces_the_scale_out_tier():
    system = load_system_with_network("dgx-h100", "eth-100g:1")
    assert system.scale_out.link == "eth-100g" and system.scale_out.nics_per_node == 1
    assert system.scale_out.nics_per_node * system.scale_out.nic_bw_bytes_per_s.value == 12.5e9
    assert load_system_with_network("dgx-h100", "roce-400g").scale_out.nics_per_node == 8  # keeps the count
    assert load_system_with_network("pcie-2x-rtx2080ti", "eth-10g").scale_out.nics_per_node == 2  # 1 per GPU
