"""The search: one evaluator call, memory pruning, ranking, records, frame, explanation; and the oracle
that the vectorised columns equal the step model evaluated one layout at a time."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from commmodel.errors import LayoutError
from commmodel.io.profiles import load_system
from commmodel.planner.enumerate import REASON_MEMORY
from commmodel.planner.explain import explain_pair, explain_plan, layout_label
from commmodel.planner.search import LAYOUT_RECORD_KEYS, default_global_batch, default_max_tp, plan
from commmodel.planner.space import SearchSpace
from commmodel.step.options import StepOptions
from commmodel.workload.model import TransformerModel

TOY = TransformerModel(name="toy", num_layers=8, hidden_size=512, num_heads=8, vocab_size=1000, seq_len=128)
HBM_BYTES = 80e9  # dgx-h100: H100 SXM 80 GB


class FakeEvaluator:
    """A closed-form stand-in for the step model so ranking and pruning can be checked by hand.

    compute = global_batch / GPUs × (1 + 0.2·recompute) s; bubble = (pp − 1)/(m·vpp) × compute;
    tp comm = 0.05·(tp − 1) s; memory = 400 GB / (tp·pp) / (1 + zero) / (1 + recompute) × micro_batch.
    """

    def __init__(self):
        self.calls = 0

    def __call__(self, model, system, num_gpus, a, options):
        self.calls += 1
        m = a.global_batch // (a.micro_batch * a.dp)
        compute = a.global_batch / num_gpus * (1 + 0.2 * a.recompute)
        bubble = (a.pp - 1) / (m * a.vpp) * compute
        tp_s = 0.05 * (a.tp - 1) * (1.0 - 0.1 * a.sequence_parallel)
        step = compute + bubble + tp_s
        memory = 400e9 / (a.tp * a.pp) / (1 + a.zero) / (1 + a.recompute) * a.micro_batch
        return {
            "step_time_s": step, "fits": memory <= HBM_BYTES, "memory_bytes_per_gpu": memory,
            "tokens_per_s": a.global_batch * 128 / step, "model_tflops_per_gpu": 100 / step, "mfu": 0.1 / step,
            "mfu_low_precision_peak": 0.05 / step, "exposed_comm_fraction": tp_s / step,
            "compute/link_s": compute, "compute/exposed_s": compute,
            "pp/bubble/link_s": bubble, "pp/bubble/exposed_s": bubble,
            "tp/all_reduce/link_s": tp_s, "tp/all_reduce/exposed_s": tp_s,
        }


@pytest.fixture(scope="module")
def fake_result(dgx_h100):
    evaluator = FakeEvaluator()
    # the search's mechanics over every axis: a bare StepOptions and the full space (without them plan() takes the
    # default stack's options and search, as the CLI: test_plan_without_options_answers_as_the_cli)
    result = plan(TOY, dgx_h100, 16, global_batch=64, evaluator=evaluator, options=StepOptions(), space=SearchSpace())
    return result, evaluator


def test_evaluator_called_once_on_every_surviving_layout(fake_result):
    result, evaluator = fake_result
    assert evaluator.calls == 1
    assert result.num_evaluated == result.num_enumerated - sum(v for k, v in result.pruned.items() if k != REASON_MEMORY)
    assert result.num_feasible == result.num_evaluated - result.pruned[REASON_MEMORY]
    assert result.pruned[REASON_MEMORY] > 0  # the fake's memory rule rejects tp·pp small layouts


def test_ranking_matches_a_brute_force_oracle(fake_result, dgx_h100):
    result, _ = fake_result
    times = result.columns["step_time_s"]
    assert np.all(np.diff(times) >= 0)
    # Brute force in plain Python over the same space: the best feasible step time.
    best = np.inf
    space = SearchSpace()
    for tp, pp, mb, zero, rc, sp, vpp in itertools.product((1, 2, 4, 8), (1, 2, 4, 8), space.micro_batches,
                                                           (0, 1, 2, 3), (0, 1, 2), (False, True), range(1, 9)):
        dp, rem = divmod(16, tp * pp)
        if rem or (sp and tp == 1) or (vpp > 1 and pp == 1) or (zero and dp == 1):
            continue
        if 8 % (pp * vpp) or 64 % (mb * dp) or (vpp > 1 and (64 // (mb * dp)) % pp):
            continue
        if 400e9 / (tp * pp) / (1 + zero) / (1 + rc) * mb > HBM_BYTES:
            continue
        m = 64 // (mb * dp)
        compute = 64 / 16 * (1 + 0.2 * rc)
        best = min(best, compute + (pp - 1) / (m * vpp) * compute + 0.05 * (tp - 1) * (1 - 0.1 * sp))
    assert times[0] == pytest.approx(best, rel=1e-12)


def test_ties_go_to_the_simpler_layout_then_less_memory(fake_result):
    result, _ = fake_result
    c = result.columns
    same = c["step_time_s"] == c["step_time_s"][0]
    assert same.sum() > 1  # the fake's step time ignores ZeRO, so stages tie
    key = np.stack([c["zero"][same], c["recompute"][same], c["vpp"][same], c["memory_bytes_per_gpu"][same]], axis=1)
    assert [tuple(k) for k in key] == sorted(tuple(k) for k in key)


def test_records_have_exactly_the_design_keys(fake_result):
    result, _ = fake_result
    records = result.records(3)
    assert len(records) == 3
    for i, record in enumerate(records, start=1):
        assert tuple(record) == LAYOUT_RECORD_KEYS
        assert record["rank"] == i
        assert record["recompute"] in ("none", "selective", "full")
        assert isinstance(record["sequence_parallel"], bool)
        assert record["tp"] * record["pp"] * record["dp"] == 16


def test_frame_has_breakdown_columns(fake_result):
    result, _ = fake_result
    frame = result.to_frame(top=5)
    assert frame.attrs["pruned"] == result.pruned and frame.attrs["evaluated"] == result.num_evaluated
    assert list(frame.index) == [1, 2, 3, 4, 5]
    assert {"tp", "pp", "dp", "step_time_s", "pp/bubble/exposed_s", "tp/all_reduce/exposed_s"} <= set(frame.columns)
    assert frame["recompute"].isin(["none", "selective", "full"]).all()


def test_explanation_names_the_largest_differing_term():
    a = {"tp": 8, "pp": 1, "dp": 2, "micro_batch": 1, "zero": 0, "recompute": "none", "sequence_parallel": True,
         "vpp": 1, "step_time_s": 10.0, "compute/exposed_s": 9.0, "pp/bubble/exposed_s": 0.0, "tp/all_reduce/exposed_s": 1.0}
    b = dict(a, tp=4, pp=2, dp=2, step_time_s=12.5, **{"pp/bubble/exposed_s": 3.0, "tp/all_reduce/exposed_s": 0.5})
    out = explain_pair(a, b, label_a="rank 1", label_b="rank 2")
    assert out["delta_s"] == pytest.approx(2.5)
    assert out["changed"] == {"tp": [8, 4], "pp": [1, 2]}
    assert [t["term"] for t in out["terms"]] == ["pp/bubble", "tp/all_reduce"]
    assert out["terms"][0]["delta_s"] == pytest.approx(3.0)
    assert "beats" in out["text"] and "pp/bubble" in out["text"]
    assert layout_label(a) == "tp8 pp1 dp2 mb1 zero0 recompute=none sp"
    assert layout_label({**a, "ep": 8, "etp": 2}) == "tp8 pp1 dp2 ep8 etp2 mb1 zero0 recompute=none sp"


def test_explain_plan_compares_rank_one_with_a_different_split(fake_result):
    result, _ = fake_result
    explanations = explain_plan(result)
    assert explanations
    first = explanations[0]
    assert first["delta_s"] > 0  # the runner-up is the first layout that is actually slower
    runner_up = int(first["b"].split()[-1])
    assert np.all(result.columns["step_time_s"][: runner_up - 1] == result.columns["step_time_s"][0])
    for extra in explanations[1:]:
        assert extra["changed"].keys() & {"tp", "pp"}


def test_nothing_fits_names_the_smallest_layout(dgx_h100):
    huge = FakeEvaluator()
    result = plan(TOY, dgx_h100, 2, global_batch=8, evaluator=lambda *a: {**huge(*a), "fits": np.zeros(len(a[3].tp), bool)})
    assert result.num_feasible == 0 and result.closest_infeasible is not None
    with pytest.raises(LayoutError, match="no layout of toy fits on 2 GPUs"):
        result.require_feasible()


def test_nothing_divides_is_a_clean_error(dgx_h100):
    prime = TransformerModel(name="prime", num_layers=7, hidden_size=7 * 64, num_heads=7, vocab_size=100, seq_len=64)
    result = plan(prime, dgx_h100, 16, global_batch=3, space=SearchSpace(pp=(2, 4)), evaluator=FakeEvaluator())
    assert result.num_evaluated == 0
    with pytest.raises(LayoutError, match="divisibility"):
        result.require_feasible()


def test_default_max_tp_follows_the_scale_up_domain():
    assert default_max_tp(load_system("dgx-h100")) == 8
    assert default_max_tp(load_system("gb200-nvl72")) == 8  # 4 GPUs per tray, 72 on NVLink
    assert default_max_tp(load_system("alps-gh200")) == 4
    assert default_max_tp(load_system("pcie-2x-rtx2080ti")) == 2


def test_default_global_batch():
    # GPT-3 175B, seq 2048, 1024 GPUs on 8-GPU nodes: 4M tokens = 2048 sequences = 128 nodes × 16
    assert default_global_batch(175e9, 2048, 1024, 8) == 2048
    # 1B model: 1M tokens / 2048 = 512 sequences on one node
    assert default_global_batch(1e9, 2048, 8, 8) == 512
    # 1536 GPUs = 192 nodes: 2048 sequences round up to 192 × 16 = 3072
    assert default_global_batch(145e9, 2048, 1536, 8) == 3072
    # a tiny job still gets one sequence per node at least
    assert default_global_batch(1e9, 1_000_000, 64, 8) == 8
    # 3 GPUs in one node: dp = 3 must divide it -> 3 × 256 = 768 ≥ 512 sequences
    assert default_global_batch(1e9, 2048, 3, 8) == 768
    # 2520 GPUs (315 nodes, odd part 315): 2520 ≥ 2048 sequences
    assert default_global_batch(530e9, 2048, 2520, 8) == 2520


# ------------------------------------------------------------------ the real step model


@pytest.fixture(scope="module")
def real_result():
    pytest.importorskip("commmodel.step.evaluate")
    from commmodel.workload.presets import get_model

    return get_model("gpt3-1.3b"), load_system("dgx-a100"), plan(get_model("gpt3-1.3b"), load_system("dgx-a100"), 32,
                                                                 global_batch=256, options=StepOptions())


def test_vectorised_columns_equal_one_layout_at_a_time(real_result):
    """Oracle: a row of the one-pass search equals the step model run on that layout alone."""
    from commmodel.step.evaluate import evaluate_layouts
    from commmodel.step.layout import Layout, LayoutArrays
    from commmodel.step.layout_rules import check_layout

    model, system, result = real_result
    rng = np.random.default_rng(7)
    for i in rng.choice(result.num_feasible, size=min(15, result.num_feasible), replace=False):
        row = result.row(int(i))
        layout = Layout(**{k: row[k] for k in ("tp", "pp", "dp", "micro_batch", "global_batch", "zero", "recompute",
                                               "sequence_parallel", "vpp")})
        check_layout(model, 32, layout)  # the planner only ranks layouts the step model accepts
        single = evaluate_layouts(model, system, 32, LayoutArrays.from_layouts([layout]))
        for key in ("step_time_s", "memory_bytes_per_gpu", "mfu", "tokens_per_s", "dp/all_reduce/exposed_s"):
            assert row[key] == pytest.approx(float(single[key][0]), rel=1e-12), key


def test_vectorised_columns_equal_the_single_layout_estimate(real_result):
    """Oracle: the search's numbers equal ``estimate`` (the `commmodel estimate` path) on random layouts."""
    estimate_mod = pytest.importorskip("commmodel.step.estimate")
    if not hasattr(estimate_mod, "estimate"):
        pytest.skip("commmodel.step.estimate.estimate is not written yet")
    from commmodel.step.layout import Layout
    from commmodel.step.options import StepOptions

    model, system, result = real_result
    rng = np.random.default_rng(11)
    for i in rng.choice(result.num_feasible, size=min(10, result.num_feasible), replace=False):
        row = result.row(int(i))
        layout = Layout(**{k: row[k] for k in ("tp", "pp", "dp", "micro_batch", "global_batch", "zero", "recompute",
                                               "sequence_parallel", "vpp")})
        single = estimate_mod.estimate(model, system, 32, layout, StepOptions()).to_json()
        assert row["step_time_s"] == pytest.approx(single["step_time_s"], rel=1e-9)
        assert row["memory_bytes_per_gpu"] == pytest.approx(single["memory_bytes_per_gpu"], rel=1e-9)
        assert row["mfu"] == pytest.approx(single["mfu"], rel=1e-9)


def test_real_search_is_consistent(real_result):
    _, _, result = real_result
    assert result.num_feasible > 0
    assert np.all(np.diff(result.columns["step_time_s"]) >= 0)
    assert np.all(result.columns["fits"])
    assert np.all(result.columns["memory_bytes_per_gpu"] <= result.hbm_bytes)


def test_plan_limit_is_the_gpu_memory_less_the_headroom():
    """The memory limit a plan reports (PlanResult.hbm_bytes, the header's 'do not fit in', the no-fit error) is the
    one its evaluator's fits used: the driver's capacity less StepOptions.memory_headroom_bytes."""
    from commmodel.io.profiles import load_system
    from commmodel.planner.search import plan
    from commmodel.step.options import StepOptions
    from commmodel.workload.presets import PRESETS

    system = load_system("dgx-h100")
    options = StepOptions(memory_headroom_bytes=4e9)
    result = plan(PRESETS["llama3-8b"], system, 16, options=options)
    assert result.hbm_bytes == pytest.approx(81559 * 2**20 - 4e9) and result.memory_headroom_bytes == 4e9
    assert np.all(result.columns["memory_bytes_per_gpu"] <= result.hbm_bytes)
    from commmodel.errors import LayoutError

    with pytest.raises(LayoutError, match=r"of 81\.5 GB \(memory less headroom\)"):
        plan(PRESETS["llama3-70b"], system, 8, options=options).require_feasible()
