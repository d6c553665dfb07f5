"""Megatron-Core's precision-aware optimizer (commmodel/workload/optimizer_states.py): optimizer bytes per parameter
from the state dtypes (closed forms), the default unchanged, and one-line refusals."""

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.errors import WorkloadError
from commmodel.workload.memory import optimizer_bytes_per_param
from commmodel.workload.optimizer_states import PrecisionAwareOptimizer, state_bytes_per_param
from commmodel.workload.presets import get_model

LLAMA = get_model("llama3-8b")
BF16_MOMENTS = PrecisionAwareOptimizer(exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16")


def test_plain_adam_is_unchanged() -> None:
    assert optimizer_bytes_per_param(LLAMA) == 12.0
    assert optimizer_bytes_per_param(LLAMA.model_copy(update={"dtype": "fp32"})) == 8.0


@pytest.mark.parametrize(("optimizer", "bf16_params", "mcore_master", "expected"), [
    (BF16_MOMENTS, True, True, 2 + 2 + 4),       # MXFP8 weights: Megatron-Core's own fp32 master copy
    (BF16_MOMENTS, True, False, 2 + 2 + 2),      # bf16 weights: TE FusedAdam keeps int16 remainders
    (BF16_MOMENTS, False, False, 2 + 2 + 4),     # fp16 weights: a full fp32 master
    (PrecisionAwareOptimizer(), True, False, 4 + 4 + 2),
    (PrecisionAwareOptimizer(exp_avg_dtype="fp8", exp_avg_sq_dtype="bf16", main_params_dtype="fp16"), True, True,
     1 + 2 + 2)])
def test_state_bytes_closed_forms(optimizer, bf16_params, mcore_master, expected) -> None:
    assert state_bytes_per_param(optimizer, bf16_params, mcore_master) == expected


def test_parse_and_refusals() -> None:
    assert PrecisionAwareOptimizer.parse("bf16,bf16") == BF16_MOMENTS
    assert PrecisionAwareOptimizer.parse("bf16 bf16 fp16").main_params_dtype == "fp16"
    for text in ("bf16", "bf16,int8", "bf16,bf16,bf16"):
        with pytest.raises(WorkloadError, match="exp_avg,exp_avg_sq"):
            PrecisionAwareOptimizer.parse(text)
    with pytest.raises(WorkloadError, match="fp32"):
        optimizer_bytes_per_param(LLAMA.model_copy(update={"dtype": "fp32"}), BF16_MOMENTS)


def test_estimate_optimizer_memory_scales_with_the_state_bytes() -> None:
    args = ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--zero", "1", "--global-batch", "64",
            "--json"]
    import json

    runner = CliRunner()
    plain = json.loads(runner.invoke(app, args).output)["memory"]["optimizer_bytes"]
    narrow = json.loads(runner.invoke(app, args + ["--precision-aware-optimizer", "bf16,bf16"]).output)
    assert narrow["memory"]["optimizer_bytes"] == pytest.approx(plain * 6 / 12, rel=1e-12)  # bf16: remainders
    bad = runner.invoke(app, args[:-1] + ["--precision-aware-optimizer", "bf16"])
    assert bad.exit_code == 1 and bad.output.strip().count("\n") == 0


def test_qwen3_gb200_mxfp8_row_keeps_bf16_moments() -> None:
    """[ZOO] sbatch_benchmarking.sh @e865051, PR=mxfp8: --use-precision-aware-optimizer --main-params-dtype fp32
    --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16: 8 of Adam's 12 bytes per parameter, 11.31 → 7.54 GB; 138.4 GB in all
    (tests/test_activation_offload.py)."""
    from commmodel.io.profiles import load_system
    from commmodel.step.estimate import evaluate_single
    from commmodel.step.layout import Layout
    from commmodel.validation.moe import LAYOUT_FIELDS, _model, moe_run_options, read_training_moe

    run = next(r for r in read_training_moe() if r["id"] == "zoo-qwen3-235b-gb200-256gpu-mxfp8-ep64")
    opts = moe_run_options(run["stack"])
    assert opts.precision_aware_optimizer == BF16_MOMENTS
    layout = Layout(**{k: v for k, v in run["layout"].items() if k in LAYOUT_FIELDS})
    model, system = _model(run["model"]), load_system(run["system"])
    on = evaluate_single(model, system, 256, layout, opts)
    off = evaluate_single(model, system, 256, layout, opts.model_copy(update={"precision_aware_optimizer": None}))
    assert on["memory/optimizer_bytes"] == pytest.approx(off["memory/optimizer_bytes"] * 8 / 12, rel=1e-12)
    assert np.isclose(on["memory_bytes_per_gpu"], 138.44e9, rtol=1e-3)
    assert on["tokens_per_s"] == off["tokens_per_s"]
