"""Megatron-Core's DDP bucket grows with dp: max(40M, 1M·dp) parameters (distributed_data_parallel.py @937571c
L51-54), and every use of the bucket (reduction, tail, parameter gather, memory, planner, CLI) reads the same size."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.io.profiles import load_system
from commmodel.planner.search import plan
from commmodel.planner.space import SearchSpace
from commmodel.step.advice import _option_candidates
from commmodel.step.buckets import effective_bucket_bytes
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.stacks import STACKS, stack_options
from commmodel.workload.presets import get_model

MCORE = stack_options("megatron-core", grad_reduce_dtype="fp32")  # 4-byte gradients: the closed forms below
MCORE_BF16 = stack_options("megatron-core")  # the stack's own bf16 gradients
MODEL = get_model("gpt3-1.3b")
runner = CliRunner()


def test_megatron_core_bucket_closed_forms() -> None:
    # fp32 gradients, 4 bytes each: max(40e6, 1e6·dp) parameters
    params = effective_bucket_bytes(MCORE, np.array([1, 8, 40, 41, 96, 1024])) / 4.0
    assert params.tolist() == [40e6, 40e6, 40e6, 41e6, 96e6, 1024e6]
    assert MCORE.bucket_params_per_dp_rank == 1e6
    # the same parameters in bf16 gradients, 2 bytes each: the 40M floor is 80 MB, not the fp32 160 MB
    assert (effective_bucket_bytes(MCORE_BF16, np.array([1, 96])) / 2.0).tolist() == [40e6, 96e6]


def test_explicit_bucket_and_other_stacks_are_fixed() -> None:
    explicit = stack_options("megatron-core", bucket_size_bytes="160MB")
    assert explicit.bucket_params_per_dp_rank == explicit.bucket_params == 0.0
    assert effective_bucket_bytes(explicit, np.array([8, 96])).tolist() == [160e6, 160e6]
    for name in STACKS.keys() - {"megatron-core"}:
        options = stack_options(name)
        assert effective_bucket_bytes(options, np.array([1000])).tolist() == [float(options.bucket_size_bytes)]


@pytest.mark.parametrize(("dp", "cp", "params"), [(96, 1, 96e6), (48, 2, 48e6), (8, 1, 40e6)])
def test_grown_bucket_prices_as_that_fixed_bucket(dp: int, cp: int, params: float) -> None:
    # the growth changes nothing but the bucket: a fixed bucket of the grown size gives every column (cp left out
    # of dp: Megatron's get_data_parallel_world_size(with_context_parallel=False))
    system = load_system("dgx-h100")
    layout = Layout(tp=1, pp=1, dp=dp, cp=cp, micro_batch=1, global_batch=4 * dp, zero=1)
    grown = evaluate_single(MODEL, system, dp * cp, layout, MCORE)
    fixed = evaluate_single(MODEL, system, dp * cp, layout, MCORE.model_copy(
        update={"bucket_size_bytes": 4.0 * params, "bucket_params_per_dp_rank": 0.0, "bucket_params": 0.0}))
    assert {k: v for k, v in grown.items() if k != "stack"} == pytest.approx(
        {k: v for k, v in fixed.items() if k != "stack"}, rel=1e-12)
    small = evaluate_single(MODEL, system, dp * cp, layout,
                            stack_options("megatron-core", bucket_size_bytes="160MB", grad_reduce_dtype="fp32"))
    # memory: two buckets held where dp·cp > 1
    assert grown["memory/buffers_bytes"] - small["memory/buffers_bytes"] == pytest.approx(2 * (4.0 * params - 160e6))
    if params > 40e6:
        assert grown["dp/reduce_scatter/link_s"] < small["dp/reduce_scatter/link_s"]  # fewer latencies


def test_plan_agrees_with_estimate() -> None:
    # layouts sharing (tp, pp, dp·cp, ZeRO) with different cp get different buckets: the planner's keyed
    # pricing must give every row what evaluate_single gives the layout alone
    system = load_system("dgx-h100")
    space = SearchSpace(cp=(1, 2, 4), zero_stages=(1,), micro_batches=(1,))
    result = plan(MODEL, system, 384, global_batch=1536, space=space, options=MCORE).require_feasible()
    every = [result.row(i) for i in range(len(result.columns["step_time_s"]))]
    rows = [r for cp in (1, 2, 4) for r in [x for x in every if x["cp"] == cp][:20]]  # the best 20 of each cp
    assert {r["cp"] for r in rows} >= {1, 2} and max(r["dp"] for r in rows) > 40
    for row in rows:
        alone = evaluate_single(MODEL, system, 384, Layout.from_record(row), MCORE)
        assert row["step_time_s"] == pytest.approx(alone["step_time_s"], rel=1e-9)
        assert row["memory_bytes_per_gpu"] == pytest.approx(alone["memory_bytes_per_gpu"], rel=1e-9)


def test_bucket_advice_starts_from_the_grown_bucket() -> None:
    layout = Layout(tp=1, pp=1, dp=96, micro_batch=1, global_batch=384, zero=1)
    bucket = {text: options for text, options, _ in _option_candidates(MCORE, layout, {}) if "bucket" in text}
    assert set(bucket) == {"bucket size 384 MB → 1.536 GB", "bucket size 384 MB → 96 MB"}
    assert [float(o.bucket_size_bytes) for o in bucket.values()] == [1536e6, 96e6]
    assert {o.bucket_params_per_dp_rank for o in bucket.values()} == {0.0}  # 96 MB is what it tries, not max(96, 384)
    # and what it prices: the candidate's own bucket, not Megatron's 40M-parameter floor
    assert [float(effective_bucket_bytes(o, layout.dp)) for o in bucket.values()] == [1536e6, 96e6]


def test_cli_states_the_rule_and_an_explicit_bucket_overrides_it() -> None:
    argv = ["estimate", "--model", "gpt3-1.3b", "--gpus", "96", "--system", "dgx-h100", "--global-batch", "384"]
    grown = runner.invoke(app, argv + ["--json"])
    assert grown.exit_code == 0, grown.output
    rule = [a for a in json.loads(grown.stdout)["assumptions"] if a.startswith("buckets of max(40M, 1M·dp)")]
    assert len(rule) == 1
    human = runner.invoke(app, argv)
    assert "assumes   buckets of max(40M, 1M·dp) parameters" in human.stdout
    fixed = json.loads(runner.invoke(app, argv + ["--bucket-size", "160MB", "--json"]).stdout)
    assert "override: bucket_params_per_dp_rank = 0.0 (stack megatron-core: 1000000.0)" in fixed["assumptions"]
    # the smaller explicit bucket is used: more buckets, each paying the collective's latency
    grown_rs = json.loads(grown.stdout)["breakdown"]["dp/reduce_scatter"]
    assert fixed["breakdown"]["dp/reduce_scatter"]["link_s"] > grown_rs["link_s"]
