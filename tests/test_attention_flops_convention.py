"""How model FLOPs count attention (``--attention-flops square|causal``): a reporting rule each stack takes from its
framework's own logger (Megatron-LM's num_floating_point_operations halves the square for the causal mask since
20d66d5, 2026-01-17; torchtitan and llm-foundry count the full square). The step time never depends on it."""

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.step.stack_assumptions import assumptions
from commmodel.step.stacks import STACK_NAMES, get_stack, stack_options
from commmodel.workload.flops import counted_core_share, megatron_flops_per_step, model_flops_per_step
from commmodel.workload.model import TransformerModel
from commmodel.workload.presets import get_model

ONE = np.ones(1)
GPT = TransformerModel(name="gpt-closed-form", num_layers=24, hidden_size=2048, num_heads=16, seq_len=8192,
                       vocab_size=51200)


def test_causal_count_is_the_closed_form_with_half_the_square() -> None:
    """72·B·s·l·h²·(1 + s/(6h) + V/(12lh)) counts the square (Korthikanti et al. 2022); the causal half turns s/(6h)
    into s/(12h) and leaves the rest alone."""
    b, s, layers, h, v = 1, GPT.seq_len, GPT.num_layers, GPT.hidden_size, GPT.vocab_size
    causal = 72 * b * s * layers * h**2 * (1 + s / (12 * h) + v / (12 * layers * h))
    assert float(model_flops_per_step(GPT, ONE)[0]) == pytest.approx(megatron_flops_per_step(GPT, 1, False))
    assert float(model_flops_per_step(GPT, ONE, "causal")[0]) == pytest.approx(causal)


def test_llama3_8b_at_8k_counts_eleven_percent_less() -> None:
    """NeMo's llama3 formula per token ÷ h²l: 12 + 12g/a + 18f/h + 12s/h·(½ if causal) + 6V/(lh); for Llama 3 8B at
    8,192 tokens 83.87 + 24 (square) against 83.87 + 12 (causal)."""
    m = get_model("llama3-8b")
    rest = 12 + 12 * 8 / 32 + 18 * 14336 / 4096 + 6 * 128256 / (32 * 4096)
    ratio = float(model_flops_per_step(m, ONE, "causal")[0] / model_flops_per_step(m, ONE, "square")[0])
    assert ratio == pytest.approx((rest + 12) / (rest + 24), rel=1e-9)


def test_local_windows_count_the_causal_band() -> None:
    """gpt-oss: half its blocks see 128 keys of 4,096. Causal, such a block counts w/s·(1 − w/(2s)) of the square
    (each query sees min(i, w) keys) and a full block ½."""
    oss = get_model("gpt-oss-120b")
    w = 128 / 4096
    assert counted_core_share(oss, "causal") == pytest.approx(0.5 - 0.5 * (0.5 - w * (1 - w / 2)))


@settings(max_examples=60, deadline=None)
@given(window=st.integers(1, 1 << 16), seq=st.integers(16, 1 << 16), share=st.floats(0.0, 1.0))
def test_causal_share_is_between_half_and_all_of_the_square_share(window: int, seq: int, share: float) -> None:
    """Invariant: the causal count never exceeds the square's and is at least half of it (each query sees at least
    half of the keys the square gives it, on average)."""
    m = GPT.model_copy(update={"seq_len": seq, "attention_window": window, "local_attention_fraction": share})
    square, causal = counted_core_share(m, "square"), counted_core_share(m, "causal")
    assert square / 2 - 1e-12 <= causal <= square + 1e-12


def test_bad_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="square, causal"):
        counted_core_share(GPT, "triangle")


def test_every_stack_states_its_rule_and_megatron_core_halves() -> None:
    """One line in every stack's assumptions; megatron-core counts causal, the others the square."""
    for name in STACK_NAMES:
        options = stack_options(name)
        lines = [line for line in assumptions(get_stack(name), options) if line.startswith("model FLOPs")]
        assert len(lines) == 1
        assert options.attention_flops == ("causal" if name == "megatron-core" else "square")
        assert ("causal half" in lines[0]) == (name == "megatron-core")


def _estimate(*extra: str) -> dict:
    args = ["estimate", "-m", "llama3-8b", "-n", "16", "-s", "dgx-h100", "--tp", "2", "--global-batch", "64", "--json"]
    result = CliRunner().invoke(app, args + list(extra))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_flag_changes_the_flops_and_not_the_step() -> None:
    """megatron-core's default (causal) against --attention-flops square: same step, TFLOP/s and MFU in the ratio of
    the two counts; the override is stated by the rule's own line, not as a second 'override' line."""
    causal, square = _estimate(), _estimate("--attention-flops", "square")
    m = get_model("llama3-8b")
    ratio = float(model_flops_per_step(m, ONE, "causal")[0] / model_flops_per_step(m, ONE, "square")[0])
    assert causal["step_time_s"] == square["step_time_s"]
    assert causal["model_tflops_per_gpu"] / square["model_tflops_per_gpu"] == pytest.approx(ratio)
    assert causal["mfu"] / square["mfu"] == pytest.approx(ratio)
    assert any("causal half" in a for a in causal["assumptions"])
    assert any("full s×s square" in a for a in square["assumptions"])
    assert not any(a.startswith("override: attention_flops") for a in square["assumptions"])


def test_bad_flag_is_one_line() -> None:
    result = CliRunner().invoke(app, ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100",
                                      "--attention-flops", "half"])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0 and "--attention-flops" in result.output
