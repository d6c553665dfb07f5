"""The step model: hand-computed toy steps, closed forms, invariants and vectorised = per-layout."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.step.comm import parameter_server_s
from commmodel.step.compute import GEMM_HALF_EFFICIENCY_DIM, HBM_EFFICIENCY, KERNEL_OVERHEAD_S, KERNELS_PER_LAYER_FORWARD
from commmodel.step.estimate import estimate, evaluate_single
from commmodel.step.evaluate import (
    ADAM_BYTES_PER_PARAM,
    BREAKDOWN_TERMS,
    evaluate_layouts,
    expected_max_standard_normal,
)
from commmodel.step.layout import Layout, LayoutArrays
from commmodel.step.layout_rules import layout_problems
from commmodel.step.options import StepOptions
from commmodel.workload import PRESETS

from toys import TOY, toy_system


def test_toy_single_gpu_step_by_hand() -> None:
    """One GPU, one micro-batch: step = 3 × forward + Adam, every term counted by hand."""
    system = toy_system()
    row = evaluate_single(TOY, system, 1, Layout(global_batch=1), StepOptions())
    # d½ scales with the ridge point: the toy's 100 TFLOP/s / 1 TB/s = 100 FLOP/B vs the A100's 312/2.039
    half_dim = GEMM_HALF_EFFICIENCY_DIM * 100.0 / (312e12 / 2.039e12)  # = 167.3
    slow = (16 + half_dim) / 16  # every toy GEMM has smallest dimension 16 (the tokens)
    gemm_s = 1_638_400 * slow / 100e12
    hbm = 1e12 * HBM_EFFICIENCY
    elem_bytes = 16 * (2 * 2 * 2 * 64 + 2 * 7 * 64 + 2 * 2 * 256 + 4 * 16 * 9)
    layer_s = gemm_s + elem_bytes / hbm + KERNELS_PER_LAYER_FORWARD * KERNEL_OVERHEAD_S
    logits_s = 2 * 16 * 64 * 128 * slow / 100e12 + 16 * 10 * 128 / hbm
    forward_s = 2 * layer_s + logits_s
    optimizer_s = TOY.num_params * ADAM_BYTES_PER_PARAM / hbm
    assert row["compute/exposed_s"] == pytest.approx(3 * forward_s, rel=1e-12)
    assert row["step_time_s"] == pytest.approx(3 * forward_s + optimizer_s, rel=1e-12)
    assert row["model_flops_per_step"] == 3 * (2 * 1_638_400 + 262_144)
    assert row["tokens_per_s"] == pytest.approx(16 / row["step_time_s"])
    for term in BREAKDOWN_TERMS:
        if term not in ("compute", "optimizer"):
            assert row[f"{term}/link_s"] == 0.0, term


def test_pipeline_bubble_and_p2p_by_hand() -> None:
    """pp 2 inside one node: p2p = 2 directions × (S/B) per micro-batch; bubble = (p−1)/(m·v) of the work."""
    system = toy_system(gpus_per_node=2)
    one = evaluate_single(TOY, system, 1, Layout(global_batch=8), StepOptions())
    row = evaluate_single(TOY, system, 2, Layout(pp=2, global_batch=8), StepOptions())
    p2p = 2 * (16 * 64 * 2) / 100e9  # b·s·h·e bytes over the 100 GB/s scale-up link, both directions
    assert row["pp/p2p/link_s"] == pytest.approx(8 * p2p, rel=1e-12)
    t_mb = (row["compute/link_s"] + row["pp/p2p/link_s"]) / 8
    assert row["pp/bubble/exposed_s"] == pytest.approx(t_mb, rel=1e-12)  # (p − 1)/v = 1 micro-batch
    toy4 = TOY.model_copy(update={"num_layers": 4})
    # pp 4 on two 2-GPU nodes: the stage 1 → 2 boundary crosses the network and paces every stage; each
    # GPU gets half of the node's one 1 GB/s NIC (every GPU of the node sends at the same time).
    spans = evaluate_single(toy4, system, 4, Layout(pp=4, global_batch=8), StepOptions())
    assert spans["pp/p2p/link_s"] == pytest.approx(8 * 2 * (16 * 64 * 2) / 0.5e9, rel=1e-12)
    plain = evaluate_single(toy4, system, 2, Layout(pp=2, global_batch=8), StepOptions())
    inter = evaluate_single(toy4, system, 2, Layout(pp=2, global_batch=8, vpp=2), StepOptions())
    assert inter["pp/bubble/exposed_s"] < plain["pp/bubble/exposed_s"]
    gpipe = evaluate_single(TOY, system, 2, Layout(pp=2, global_batch=8), StepOptions(schedule="gpipe"))
    assert gpipe["memory/activations_bytes"] > row["memory/activations_bytes"]
    assert one["compute/link_s"] > row["compute/link_s"]  # half the layers per GPU


def test_parameter_server_design_example() -> None:
    """DESIGN §4: 300M fp32 parameters (1.2 GB) over 1 GB/s links, server on a worker: 1.2 s with 2
    workers, 10.8 s with 10 (linear in workers)."""
    system = toy_system(gpus_per_node=1)
    got = parameter_server_s(system, np.array([1.2e9, 1.2e9]), np.array([2, 10]), np.array([1, 1]))
    assert got == pytest.approx([1.2, 10.8], rel=1e-12)


def test_straggler_expected_maximum() -> None:
    # Exact E[max] of 2 and 10 standard normals: 1/√π = 0.5642 and 1.5388 (Harter 1961 tables).
    assert expected_max_standard_normal(1) == 0.0
    assert expected_max_standard_normal(2) == pytest.approx(0.5642, rel=0.06)
    assert expected_max_standard_normal(10) == pytest.approx(1.5388, rel=0.02)
    system = toy_system(gpus_per_node=1)
    base = evaluate_single(TOY, system, 8, Layout(dp=8, global_batch=8), StepOptions())
    slow = evaluate_single(TOY, system, 8, Layout(dp=8, global_batch=8), StepOptions(straggler_cv=0.1))
    factor = 1 + 0.1 * expected_max_standard_normal(8)
    assert slow["step_time_s"] == pytest.approx(base["step_time_s"] * factor, rel=1e-12)
    free = evaluate_single(TOY, system, 8, Layout(dp=8, global_batch=8),
                           StepOptions(straggler_cv=0.1, synchronous=False))
    assert free["step_time_s"] <= base["step_time_s"]


def test_compression_shrinks_dp_traffic() -> None:
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    model = PRESETS["gpt3-1.3b"]
    lay = Layout(dp=8, global_batch=8)
    fp32 = evaluate_single(model, system, 8, lay, StepOptions())["dp/all_reduce/link_s"]
    bf16 = evaluate_single(model, system, 8, lay, StepOptions(compression="bf16"))["dp/all_reduce/link_s"]
    topk = evaluate_single(model, system, 8, lay, StepOptions(compression="topk", topk_fraction=0.01))["dp/all_reduce/link_s"]
    # Zero-latency links: bandwidth-bound (the collective library's fixed overheads are microseconds).
    assert bf16 / fp32 == pytest.approx(0.5, rel=1e-3)
    assert topk / fp32 == pytest.approx(0.01 * (4 + 4) / 4, rel=0.05)  # values + 32-bit indices
    assert StepOptions(compression="int8").lossy and not StepOptions().lossy


def test_overlap_hides_all_but_the_last_bucket() -> None:
    system = toy_system(gpus_per_node=1, nic="100 Gb/s")
    model = PRESETS["gpt3-1.3b"]
    lay = Layout(dp=8, global_batch=8)
    off = evaluate_single(model, system, 8, lay, StepOptions(overlap=False))
    on = evaluate_single(model, system, 8, lay, StepOptions(overlap=True))
    assert off["dp/all_reduce/exposed_s"] == off["dp/all_reduce/link_s"]
    assert on["dp/all_reduce/exposed_s"] < off["dp/all_reduce/exposed_s"]
    assert on["dp/all_reduce/exposed_s"] > 0  # the last bucket cannot hide
    assert on["step_time_s"] < off["step_time_s"]


def test_breakdown_sums_to_step_time() -> None:
    from commmodel.io.profiles import load_system

    system = load_system("dgx-h100")
    layouts = [Layout(tp=8, pp=4, dp=4, micro_batch=1, global_batch=256, zero=z, recompute=r, sequence_parallel=sp, vpp=v)
               for z in (0, 1, 3) for r in ("none", "selective", "full") for sp in (False, True) for v in (1, 2)]
    cols = evaluate_layouts(PRESETS["llama3-70b"], system, 128, LayoutArrays.from_layouts(layouts),
                            StepOptions(straggler_cv=0.05))
    total = sum(cols[f"{t}/exposed_s"] for t in BREAKDOWN_TERMS)
    assert np.allclose(total, cols["step_time_s"], rtol=1e-12)
    assert np.all(cols["mfu"] <= cols["hfu"]) and np.all(cols["hfu"] < 1)


def _valid_layouts(model, gpus):
    out = []
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8):
            if gpus % (tp * pp):
                continue
            dp = gpus // (tp * pp)
            for mb in (1, 2):
                for zero in (0, 1, 2, 3):
                    for rc in ("none", "selective", "full"):
                        lay = Layout(tp=tp, pp=pp, dp=dp, micro_batch=mb, global_batch=mb * dp * 8, zero=zero,
                                     recompute=rc, sequence_parallel=tp > 1, vpp=2 if pp > 1 else 1)
                        if not layout_problems(model, gpus, lay):
                            out.append(lay)
    return out


MODEL = PRESETS["gpt3-6.7b"]
LAYOUTS = _valid_layouts(MODEL, 64)


def test_vectorised_equals_per_layout() -> None:
    from commmodel.io.profiles import load_system

    system = load_system("dgx-h100")
    cols = evaluate_layouts(MODEL, system, 64, LayoutArrays.from_layouts(LAYOUTS))
    for i in range(0, len(LAYOUTS), 7):
        single = evaluate_single(MODEL, system, 64, LAYOUTS[i])
        for key, value in single.items():
            assert cols[key][i] == pytest.approx(value, rel=1e-12, abs=1e-300), key


@settings(max_examples=40, deadline=None)
@given(index=st.integers(0, len(LAYOUTS) - 1), up=st.floats(1.0, 4.0), out=st.floats(1.0, 4.0))
def test_more_bandwidth_never_slower(index: int, up: float, out: float) -> None:
    base = toy_system(gpus_per_node=8, nic="100 Gb/s", up="100 GB/s")
    fast = toy_system(gpus_per_node=8, nic=f"{100 * out} Gb/s", up=f"{100 * up} GB/s")
    lay = LAYOUTS[index]
    slow_t = evaluate_single(MODEL, base, 64, lay)["step_time_s"]
    fast_t = evaluate_single(MODEL, fast, 64, lay)["step_time_s"]
    assert fast_t <= slow_t * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(index=st.integers(0, len(LAYOUTS) - 1), k=st.integers(1, 6))
def test_more_accumulation_never_more_dp_traffic_per_sample(index: int, k: int) -> None:
    system = toy_system(gpus_per_node=8, nic="100 Gb/s")
    lay = LAYOUTS[index]
    per_replica = lay.micro_batch * lay.dp

    def per_sample(steps: int) -> float:
        row = evaluate_single(MODEL, system, 64, lay.model_copy(update={"global_batch": per_replica * lay.pp * steps}))
        dp_s = sum(row[f"dp/{t}/link_s"] for t in ("all_reduce", "reduce_scatter", "all_gather", "parameter_server"))
        return dp_s / (per_replica * lay.pp * steps)

    assert per_sample(k + 1) <= per_sample(k) * (1 + 1e-12)


def test_zero_memory_order() -> None:
    from commmodel.io.profiles import load_system

    system = load_system("dgx-h100")
    lays = [Layout(tp=8, pp=1, dp=8, global_batch=64, zero=z) for z in (0, 1, 2, 3)]
    mem = evaluate_layouts(PRESETS["llama3-8b"], system, 64, LayoutArrays.from_layouts(lays))["memory_bytes_per_gpu"]
    assert mem[3] <= mem[2] <= mem[1] <= mem[0]


def test_estimate_advice_is_re_evaluated() -> None:
    from commmodel.io.profiles import load_system

    system = load_system("dgx-h100")
    lay = Layout(tp=8, pp=4, dp=4, global_batch=128, recompute="selective", sequence_parallel=True)
    est = estimate(PRESETS["llama3-70b"], system, 128, lay, StepOptions(overlap=False))
    assert est.row["fits"]
    assert est.advice, "an unoverlapped, uninterleaved 70B job has something to improve"
    for a in est.advice:
        again = evaluate_single(PRESETS["llama3-70b"], system, 128, a.layout, a.options)
        assert a.step_time_s == pytest.approx(again["step_time_s"], rel=1e-12)
        assert a.gain_pct >= 1.0
    assert [a.gain_pct for a in est.advice] == sorted((a.gain_pct for a in est.advice), reverse=True)


def test_does_not_fit_names_the_term() -> None:
    from commmodel.io.profiles import load_system

    est = estimate(PRESETS["llama3-70b"], load_system("dgx-h100"), 8, Layout(tp=8, global_batch=8), StepOptions(),
                   with_advice=False)
    assert not est.row["fits"] and est.bound == "memory"
    terms = est.memory_terms  # seq 8192 without recompute or SP: activations dominate
    assert est.memory_broken_by == max(terms, key=terms.__getitem__) == "activations"
    assert any("does not fit" in f and "activations" in f for f in est.flags)
    broken = estimate(PRESETS["llama3-70b"], load_system("dgx-h100"), 64, Layout(tp=8, dp=8, global_batch=64),
                      StepOptions())
    assert not broken.row["fits"] and broken.advice  # e.g. ZeRO, pipeline stages or recompute make it fit
    for a in broken.advice:
        assert evaluate_single(PRESETS["llama3-70b"], load_system("dgx-h100"), 64, a.layout, a.options)["fits"]
