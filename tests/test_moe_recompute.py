"""Megatron-Core MoE-layer recompute (``--recompute-modules moe``) as the layout policy ``recompute: moe``
(commmodel/workload/moe_recompute.py): closed forms for what it stores and redoes, and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import LayoutError
from commmodel.step.experts import dispatch_count
from commmodel.step.layout import RECOMPUTE_CODES, Layout
from commmodel.workload import moe_recompute
from commmodel.workload.flops import hardware_flops_per_step, layer_gemms, model_flops_per_step
from commmodel.workload.memory import activation_bytes_per_layer
from commmodel.workload.presets import get_model

MOE = RECOMPUTE_CODES["moe"]
MIXTRAL = get_model("mixtral-8x7b")  # 32 MoE blocks, top-2 of 8, f_expert 14336, gated
DSV3 = get_model("deepseek-v3")      # 3 dense first blocks, 1 shared + top-8 of 256 routed experts


def test_the_layout_schema_takes_the_workloads_recompute_numbering() -> None:
    """One numbering: the layout schema's codes are the workload formulas' (no second table to keep in step)."""
    from commmodel.step import layout
    from commmodel.workload import recompute_policies

    assert layout.RECOMPUTE_CODES is recompute_policies.RECOMPUTE_CODES
    assert layout.RECOMPUTE_NAMES == ("none", "selective", "full", "op", "moe")
    assert MOE == recompute_policies.RECOMPUTE_MOE == 4


def test_mixtral_every_block_is_moe_so_the_whole_mlp_is_redone() -> None:
    assert moe_recompute.moe_mlp_width(MIXTRAL) == MIXTRAL.active_ffn_width == 2 * 14336
    assert moe_recompute.recomputed_share(MIXTRAL) == {"fc1": 1.0, "fc2": 1.0, "router": 1.0}
    assert moe_recompute.recomputed_share(get_model("llama3-8b")) == {}


def test_deepseek_dense_first_blocks_are_not_redone() -> None:
    # (58 MoE blocks · 9 · 2048) / (3 · 18432 + 58 · 9 · 2048) of the averaged MLP width
    moe_width = 58 * 9 * 2048 / 61
    assert moe_recompute.moe_mlp_width(DSV3) == pytest.approx(moe_width)
    assert moe_recompute.recomputed_share(DSV3)["fc1"] == pytest.approx(moe_width / DSV3.active_ffn_width)
    assert moe_recompute.recomputed_share(DSV3)["fc1"] < 1.0


def test_hardware_flops_add_the_router_and_expert_gemms_once() -> None:
    one = np.ones(1)
    redo = sum(g.flops for g in layer_gemms(MIXTRAL, one, one) if g.name in ("fc1", "fc2", "router"))[0]
    extra = hardware_flops_per_step(MIXTRAL, one, np.array([MOE]))[0] - model_flops_per_step(MIXTRAL, one)[0]
    assert extra == pytest.approx(MIXTRAL.num_layers * redo, rel=1e-12)


def test_stored_activations_drop_the_expert_inner_activations() -> None:
    b, t, sp = np.ones(1), np.full(1, 2.0), np.ones(1, bool)
    none, moe = (activation_bytes_per_layer(MIXTRAL, b, t, sp, np.array([code]), True)[0] for code in (0, MOE))
    # gated MLP: gate, up and product of the two routed copies, 2 bytes each, and the two copies of the token that
    # fc1 keeps as its input (k·h), split over tp 2
    assert none - moe == pytest.approx(MIXTRAL.seq_len * 2 * (3 * (2 * 14336) + 2 * 4096) / 2)
    full = activation_bytes_per_layer(MIXTRAL, b, t, sp, np.array([RECOMPUTE_CODES["full"]]), True)[0]
    assert full < moe < none


def test_the_checkpointed_layer_dispatches_and_combines_again() -> None:
    codes = np.array([RECOMPUTE_CODES[name] for name in ("none", "selective", "full", "op", "moe")])
    assert dispatch_count(codes).tolist() == [2.0, 2.0, 3.0, 2.0, 3.0]


def test_estimate_prices_it_between_none_and_full() -> None:
    from commmodel.io.profiles import load_system
    from commmodel.step.estimate import evaluate_single
    from commmodel.step.stacks import stack_options

    system = load_system("dgx-h100")
    rows = {rc: evaluate_single(MIXTRAL, system, 64, Layout(tp=1, pp=4, dp=16, ep=8, micro_batch=1, global_batch=256,
                                                             zero=1, recompute=rc), stack_options())
            for rc in ("none", "moe", "full")}
    assert rows["none"]["step_time_s"] < rows["moe"]["step_time_s"] < rows["full"]["step_time_s"]
    assert rows["full"]["memory_bytes_per_gpu"] < rows["moe"]["memory_bytes_per_gpu"] < rows["none"]["memory_bytes_per_gpu"]


def test_a_dense_model_refuses_it_in_one_line() -> None:
    from commmodel.step.layout_rules import check_layout

    with pytest.raises(LayoutError, match="dense"):
        check_layout(get_model("llama3-8b"), 8, Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, recompute="moe"))
    runner = CliRunner()
    for argv in (["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--recompute", "moe"],
                 ["plan", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--recompute", "moe"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 1 and "dense" in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
