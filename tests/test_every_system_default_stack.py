"""Every shipped system answers `estimate` and `plan` under the default stack (a user's first command on it).

Found broken once: the default megatron-core stack prices fused attention per CUDA compute capability, and the
AMD Instinct systems (which state none) failed with a profile error; they now take the fallback rate."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.io.profiles import list_systems, load_system
from commmodel.step.attention import FALLBACK_FRACTION_OF_MATMUL, attention_efficiency

runner = CliRunner()
GPU_SYSTEMS = [system.name for system in list_systems() if system.name != "cpu-host"]


@pytest.mark.parametrize("name", GPU_SYSTEMS)
def test_estimate_under_the_default_stack(name: str) -> None:
    import json

    gpus = load_system(name).gpus_per_node
    out = runner.invoke(app, ["estimate", "-m", "llama3-8b", "-n", str(gpus), "-s", name, "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["stack"] == "megatron-core"
    assert math.isfinite(doc["step_time_s"]) and doc["step_time_s"] > 0


@pytest.mark.parametrize("name", ["amd-mi300x", "amd-mi325x", "amd-mi355x"])
def test_amd_attention_rate_is_the_documented_fallback(name: str) -> None:
    system = load_system(name)
    assert system.gpu.compute_capability is None
    assert attention_efficiency(system) == pytest.approx(FALLBACK_FRACTION_OF_MATMUL * system.gpu.matmul_efficiency.value)
    out = runner.invoke(app, ["plan", "-m", "llama3-8b", "-n", "8", "-s", name, "--top", "1", "--json"])
    assert out.exit_code == 0, out.output
