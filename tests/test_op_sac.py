"""torchtitan's op-level SAC as the recompute policy "op" (commmodel.workload.op_sac).

Closed forms from torchtitan ``torchtitan/parallelisms/parallelize_llama.py`` @9dec370 (``_save_list``: mm,
SDPA, reduce-scatter outputs saved, every second mm recomputed) over the mm order of its Llama block
(torchtitan/models/llama/model.py @9dec370: wq, wk, wv, SDPA, wo, w1, w3, w2), and the memory of the
published torchtitan H100 runs that ran it (benchmarks/llama3_h100_202412_torchtitan.md @31a17bf)."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.step.layout import RECOMPUTE_CODES, RECOMPUTE_NAMES, Layout
from commmodel.step.stacks import get_stack
from commmodel.workload import op_sac
from commmodel.workload.flops import hardware_flops_per_step, model_flops_per_step
from commmodel.workload.memory import activation_bytes_per_layer
from commmodel.workload.presets import get_model

L8B = get_model("llama3-8b")  # h 4096, 32 heads, 8 KV heads (kv 1024), SwiGLU f 14336, 32 layers, s 8192
OP = RECOMPUTE_CODES["op"]


def test_op_is_a_layout_policy_after_the_existing_codes() -> None:
    assert RECOMPUTE_NAMES[:4] == ("none", "selective", "full", "op")
    assert Layout(tp=1, pp=1, dp=8, global_batch=16, recompute="op").recompute == "op"


def test_every_second_mm_is_recomputed_in_torchtitan_order() -> None:
    kept = [name for i, (name, _, _) in enumerate(op_sac.block_matmuls(L8B)) if op_sac.saved(i)]
    assert kept == ["wq", "wv", "w1", "w2"]
    plain = get_model("gpt3-175b")  # two-matrix MLP: w1 kept, w2 (the 6th mm) recomputed
    assert [n for i, (n, _, _) in enumerate(op_sac.block_matmuls(plain)) if not op_sac.saved(i)] == ["wk", "wo", "w2"]


def test_saved_bytes_llama3_8b_closed_form() -> None:
    # block input + wq + wv + w1 + w2 outputs + SDPA output (bf16) + logsumexp (fp32 per head)
    per_token = 2 * (4096 + 4096 + 1024 + 14336 + 4096 + 4096) + 4 * 32
    assert per_token == 63_616
    got = activation_bytes_per_layer(L8B, np.array([2]), np.array([1]), np.array([False]), np.array([OP]), True)
    assert got[0] == pytest.approx(2 * 8192 * per_token, rel=1e-12)


def test_saved_bytes_with_tensor_and_sequence_parallelism() -> None:
    # tp 8 with SP: input sharded, mm outputs and heads split, plus the two saved reduce-scatter outputs
    t = 8
    per_token = 2 * 4096 / t + (2 * (4096 + 1024 + 14336 + 4096) + 2 * 4096 + 4 * 32) / t + 2 * 2 * 4096 / t
    got = op_sac.saved_bytes_per_token(L8B, np.array([t]), np.array([True]))
    assert got[0] == pytest.approx(per_token, rel=1e-12)


def test_recomputed_flops_are_wk_wo_w3() -> None:
    share = op_sac.recomputed_share(L8B)
    assert share == pytest.approx({"qkv": 1024 / 6144, "proj": 1.0, "fc1": 0.5, "fc2": 0.0})
    tokens, h = 8192, 4096
    extra = 32 * 2 * tokens * h * (1024 + 4096 + 14336)  # l × 2·s·h·(kv + h + f) per sequence
    got = hardware_flops_per_step(L8B, np.ones(1), np.array([OP])) - model_flops_per_step(L8B, np.ones(1))
    assert got[0] == pytest.approx(extra, rel=1e-12)


def test_op_keeps_less_than_korthikanti_selective_and_more_than_full() -> None:
    codes = np.array([RECOMPUTE_CODES[n] for n in ("selective", "op", "full")])
    sel, op, full = activation_bytes_per_layer(L8B, np.ones(3), np.ones(3), np.zeros(3, bool), codes, True)
    assert full < op < sel


def test_fsdp2_stack_searches_op_not_korthikanti_selective() -> None:
    assert get_stack("fsdp2").search_pins["recompute"] == ("none", "op", "full")
    assert "selective" in get_stack("megatron-core").recompute_policies


def test_recompute_time_is_the_redone_mms_plus_the_memory_bound_forward() -> None:
    from commmodel.io.profiles import load_system
    from commmodel.step.compute import gemm_efficiency, stage_compute
    from commmodel.workload.flops import layer_gemms

    system = load_system("dgx-h100")
    one, codes = np.ones(2), np.array([RECOMPUTE_CODES["none"], OP])
    none, op = (stage_compute(L8B, system, one, one, one, np.array([c]), np.zeros(1, bool), True) for c in codes)
    peak = system.gpu.peak_for("bf16")
    share = op_sac.recomputed_share(L8B)
    redo_s = sum(share.get(g.name, 0.0) * g.flops / (peak * gemm_efficiency(system, g, "bf16"))
                 for g in layer_gemms(L8B, np.ones(1), np.ones(1)))
    assert (op.matmul_s - none.matmul_s)[0] == pytest.approx(32 * redo_s[0], rel=1e-12)
    assert none.recompute_s[0] == 0.0
    # the memory-bound forward is redone too: more than the mms alone, less than a full block forward
    assert 32 * redo_s[0] < op.recompute_s[0] < none.forward_s[0]


TT_H100_8B = ("tt-llama31-8b-h100-8gpu-fsdp", "tt-llama31-8b-h100-8gpu-fsdp-compile",
              "tt-llama31-8b-h100-8gpu-fsdp-compile-fp8", "tt-llama31-8b-h100-128gpu-fsdp",
              "tt-llama31-8b-h100-128gpu-fsdp-compile", "tt-llama31-8b-h100-128gpu-fsdp-compile-fp8",
              "tt-llama31-8b-h100-8gpu-s32k-fp8", "tt-llama31-8b-h100-8gpu-s64k-cp2-fp8",
              "tt-llama31-8b-h100-8gpu-s128k-cp4-fp8", "tt-llama31-8b-h100-8gpu-s256k-cp8-fp8")
"""[TT-H100] Tables 1-3 (Llama 3.1 8B; op SAC or full AC): the published peak GiB is quoted in each row's source."""


@pytest.mark.parametrize("run_id", TT_H100_8B)
def test_torchtitan_h100_peak_memory(run_id: str) -> None:
    """torchtitan logs ``max_reserved_gib`` (torchtitan/metrics.py @9dec370: ``reserved_bytes.all.peak``), the
    caching allocator's reserve, never below what is allocated: the model (allocated bytes, no fragmentation)
    must not exceed it, and must not fall below it by more than the fragmentation a lent H100 measured for these
    programs under torchtitan's ``expandable_segments:True``: reserved 1.19-1.35x allocated
    (tests/fixtures/device/one_gpu_step_h100_expandable.json); every run fits the 96 GB part it ran on. The model
    reads 0.83-0.93 of the published reserves."""
    import re

    from commmodel.io.profiles import load_system_with_network
    from commmodel.io.validation_data import read_training_modern
    from commmodel.step.estimate import evaluate_single
    from commmodel.validation.modern import run_options
    from commmodel.validation.training import _oos_model

    run = next(r for r in read_training_modern() if r["id"] == run_id)
    published_gib = float(re.search(r"\| ([\d.]+) GiB", run["source"]).group(1))
    model = _oos_model({**run["model"], "dtype": run["dtype"]})
    system = load_system_with_network(run["system"], run.get("network"))
    result = evaluate_single(model, system, int(run["num_gpus"]), Layout(**run["layout"]), run_options(run))
    predicted_gib = result["memory_bytes_per_gpu"] / 2**30
    assert published_gib / 1.36 <= predicted_gib <= published_gib
    assert result["fits"]


def test_fsdp2_loss_buffers_are_torchtitan_eager_fp32_cross_entropy() -> None:
    """buffers = b·s·V logits × 12 bytes (fp32 log-probabilities, their gradient, the logits' gradient at the
    log-softmax backward; torchtitan train.py @9dec370) + two 25 MiB buckets + the reserved 2.0 GB
    (workload.buffers.RESERVED_BYTES)."""
    from commmodel.io.profiles import load_system
    from commmodel.step.estimate import evaluate_single
    from commmodel.step.stacks import stack_options

    layout = Layout(tp=1, pp=1, dp=8, micro_batch=2, global_batch=16, zero=3, recompute="op")
    result = evaluate_single(L8B, load_system("meta-grand-teton-h100"), 8, layout, stack_options("fsdp2"))
    expected = 2 * 8192 * 128_256 * 12.0 + 2 * 25 * 2**20 + 2.0e9
    assert result["memory/buffers_bytes"] == pytest.approx(expected, rel=1e-12)
