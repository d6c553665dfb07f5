"""Uneven pipeline stages: layers need not divide by pp; the busiest stage (⌈l/p⌉ layers) sets the pace."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.errors import LayoutError
from commmodel.io.profiles import load_system_with_network
from commmodel.planner.enumerate import REASON_LAYERS, candidate_layouts
from commmodel.planner.search import plan
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.layout_rules import check_layout
from commmodel.step.options import StepOptions
from commmodel.workload import PRESETS
from commmodel.workload.stages import stage_layers

BLOOM = PRESETS["bloom-176b"]  # 70 layers, seq 2048
# BLOOM-176B training (BigScience tr11, Le Scao et al. 2022 §3.4; HF blog "The Technology Behind BLOOM
# Training"): 384 A100 80GB on Jean Zay, 48 nodes of 8 with NVLink and 4 × 100 Gb/s Omni-Path,
# tp 4 × pp 12 × dp 8, micro-batch 2, global batch 2048 of 2048 tokens, ZeRO stage 1, bf16,
# activation checkpointing, Megatron-DeepSpeed (gradients reduced after the backward).
BLOOM_LAYOUT = Layout(tp=4, pp=12, dp=8, micro_batch=2, global_batch=2048, zero=1, recompute="full")
BLOOM_OPTIONS = StepOptions(overlap=False)
BLOOM_PUBLISHED_TFLOPS = 150.0  # per GPU, hardware FLOPs (recompute counted); tr11 README "~150 TFLOPs"


def _jean_zay():
    return load_system_with_network("dgx-a100", "omnipath-100g:4")


def test_stage_layers_is_the_ceiling() -> None:
    assert stage_layers(BLOOM, np.array([1, 2, 7, 12, 35, 70])).tolist() == [70, 35, 10, 6, 2, 1]


def test_uneven_layouts_pass_the_checks_and_interleaving_needs_a_layer_per_chunk() -> None:
    check_layout(BLOOM, 384, BLOOM_LAYOUT)  # 70 layers on 12 stages: 10 stages of 6, 2 of 5
    # 128 micro-batches is not a multiple of pp 12: use 96 (global batch 1536) for the interleaved checks.
    interleaved = BLOOM_LAYOUT.model_copy(update={"global_batch": 1536})
    check_layout(BLOOM, 384, interleaved.model_copy(update={"vpp": 2}))  # 24 chunks of ⌈70/24⌉ = 3 layers
    check_layout(BLOOM, 384, interleaved.model_copy(update={"vpp": 6}))  # 72 chunks ≤ 70 + 2
    with pytest.raises(LayoutError, match=r"pp 12 × vpp 7 = 84 virtual stages exceed layers 70 \+ 2"):
        check_layout(BLOOM, 384, interleaved.model_copy(update={"vpp": 7}))
    small = PRESETS["gpt3-1.3b"]  # 24 layers
    with pytest.raises(LayoutError, match=r"pp 32 exceeds the 24 layers"):
        check_layout(small, 32, Layout(pp=32, global_batch=32))


def test_uneven_stage_paces_like_the_even_model_with_the_same_busiest_stage() -> None:
    """70 layers on pp 12 run at the pace of 72 (both ⌈l/12⌉ = 6): identical step time and memory,
    and model FLOP/s lower by exactly 70-layer FLOPs / 72-layer FLOPs."""
    system = _jean_zay()
    even = BLOOM.model_copy(update={"num_layers": 72, "name": "bloom-72"})
    a = evaluate_single(BLOOM, system, 384, BLOOM_LAYOUT, BLOOM_OPTIONS)
    b = evaluate_single(even, system, 384, BLOOM_LAYOUT, BLOOM_OPTIONS)
    assert a["step_time_s"] == pytest.approx(b["step_time_s"], rel=1e-12)
    assert a["memory_bytes_per_gpu"] == pytest.approx(b["memory_bytes_per_gpu"], rel=1e-12)
    ratio = a["model_flops_per_step"] / b["model_flops_per_step"]
    assert 70 / 72 < ratio < 1  # the embedding and logits do not scale with the layers
    assert a["model_tflops_per_gpu"] / b["model_tflops_per_gpu"] == pytest.approx(ratio, rel=1e-12)


def test_bloom_176b_on_384_a100_matches_the_published_throughput() -> None:
    """Published ~150 TFLOP/s per GPU (BigScience tr11-176B-ml README; Le Scao et al. 2022 quote
    156 TFLOP/s for the fastest configuration); tolerance 20% (brief H9)."""
    row = evaluate_single(BLOOM, _jean_zay(), 384, BLOOM_LAYOUT, BLOOM_OPTIONS)
    assert row["fits"]  # ZeRO-1 + full recompute fit 80 GB
    assert row["hardware_tflops_per_gpu"] == pytest.approx(BLOOM_PUBLISHED_TFLOPS, rel=0.20)


def test_planner_accepts_bloom_uneven_stages() -> None:
    candidates = candidate_layouts(num_layers=70, num_heads=112, num_kv_heads=112, num_gpus=384, global_batch=2048,
                                   gpus_per_node=8)
    c = candidates.columns
    assert np.any((c["tp"] == 4) & (c["pp"] == 12) & (c["dp"] == 8) & (c["vpp"] == 1))
    assert not np.any((c["pp"] == 12) & (c["vpp"] > 1))  # m = 2048/(mb·dp) is never a multiple of 12
    assert not np.any(c["pp"] * c["vpp"] > 72)  # at most l + 2 chunks
    assert candidates.pruned[REASON_LAYERS] > 0
    result = plan(BLOOM, _jean_zay(), 384, global_batch=2048, options=BLOOM_OPTIONS)
    r = result.columns
    splits = list(dict.fromkeys(zip(r["tp"].tolist(), r["pp"].tolist())))
    assert (4, 12) in splits[:5]  # the split BigScience ran is among the planner's top five
