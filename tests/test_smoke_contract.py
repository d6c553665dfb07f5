"""The seams other modules build on: profile loading, the collective entry point, the CLI boundary."""

from __future__ import annotations

import numpy as np
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.collectives import collective_cost

runner = CliRunner()


def test_ring_all_reduce_closed_form_on_one_node(dgx_h100):
    # T = base + 2(n-1)(alpha + S/(n B)) with B = 450 GB/s x efficiency inside the NVSwitch domain;
    # Simple protocol: NCCL base 8.4 us, alpha = the tier's LL hop + NCCL's Simple-LL difference (3.4-0.6 us).
    size = 4e9
    cost = collective_cost("all_reduce", size, dgx_h100, 8, algorithm="ring", protocol="Simple")
    bw = dgx_h100.scale_up.effective_bw_bytes_per_s
    alpha = dgx_h100.scale_up.latency_s.value + (3.4e-6 - 0.6e-6)
    expected = 8.4e-6 + 14 * (alpha + size / (8 * bw))
    assert np.isclose(cost.time_s, expected, rtol=1e-12)


def test_unknown_system_is_one_line_exit_1():
    result = runner.invoke(app, ["profiles", "show", "no-such-box"])
    assert result.exit_code == 1
    assert "unknown system 'no-such-box'" in result.output
    assert "Traceback" not in result.output
