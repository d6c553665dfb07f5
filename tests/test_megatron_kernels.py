"""Megatron-Core's work beside the GEMMs (issue 12; commmodel.step.stacks [MCORE-KERNELS]): the unfused fp32
vocabulary-parallel cross entropy, fp32 weight-gradient accumulation, the once-a-step gradient-buffer passes and
attention dropout, each checked against numbers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.io.profiles import load_system
from commmodel.step.attention import flash_attention_forward_s
from commmodel.step.compute import grad_accumulation_bytes, stage_compute
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions
from commmodel.step.stacks import stack_options
from commmodel.workload import TransformerModel
from commmodel.workload.flops import cross_entropy_bytes

# l = 2, h = 1024, a = 8, V = 1024, s = 2048, bf16 (e = 2), tied embeddings, learned positions (the defaults):
# per block 12h² + 13h = 12,596,224 parameters; embedding V·h + s·h = 1,048,576 + 2,097,152; final norm 2h = 2,048.
TOY = TransformerModel(name="kernel-toy", num_layers=2, hidden_size=1024, num_heads=8, vocab_size=1024, seq_len=2048)
ONE = np.array([1])
H100 = load_system("dgx-h100")
HBM_BYTES_PER_S = 0.8 * 3.35e12  # HBM_EFFICIENCY × the H100 SXM datasheet
LOGITS = 2048 * 1024  # tokens × V/tp of one micro-batch at tp 1


def test_unfused_cross_entropy_is_52_bytes_per_bf16_logit() -> None:
    forward, backward = cross_entropy_bytes(TOY, ONE, ONE, "unfused")
    # forward: read bf16 2, .float() write 4, max 4, -= 8, exp 8, sum 4, div_ 8 = 38; backward: mul_ 8, cast 4 + 2 = 14
    assert float(forward[0]) == LOGITS * 38 == 79_691_776
    assert float(backward[0]) == LOGITS * 14 == 29_360_128
    half_forward, half_backward = cross_entropy_bytes(TOY, ONE, np.array([2]), "unfused")
    assert float(half_forward[0] + half_backward[0]) == LOGITS * 52 / 2


def test_fused_cross_entropy_keeps_the_one_pass_rule() -> None:
    forward, backward = cross_entropy_bytes(TOY, ONE, ONE, "fused")
    assert float(forward[0]) == LOGITS * 10 == 20_971_520  # read 2, write and re-read fp32 softmax 8
    assert float(backward[0]) == 2 * LOGITS * 10
    with pytest.raises(ValueError, match="use one of fused, unfused"):
        cross_entropy_bytes(TOY, ONE, ONE, "chunked")


def test_grad_accumulation_bytes_by_hand() -> None:
    tp, pp = np.array([1, 2, 1]), np.array([1, 1, 2])
    got = grad_accumulation_bytes(TOY, tp, pp)
    # pp 1, tp 1: 2 blocks 25,192,448 + embedding 3,145,728 + norm 2,048 = 28,340,224 parameters × 6 = 170,041,344;
    # the tied word embedding's hook path (12) and the head's fused wgrad (6) over the 6 counted: 12 × 1,048,576 more
    assert got[0] == 170_041_344 + 12_582_912 == 182_624_256
    # tp 2: blocks and embedding halve, the final norm stays: 14,171,136 × 6 + 12 × 524,288
    assert got[1] == 85_026_816 + 6_291_456
    # pp 2: one block and the larger end stage (the embedding, 3,145,728): 15,741,952 × 6; no hook term (p > 1)
    assert got[2] == 94_451_712
    # untied: the head is its own 1,048,576 parameters at 6, the embedding 6 more: the same 6·P + 12·V·h
    untied = TOY.model_copy(update={"tied_embeddings": False})
    assert grad_accumulation_bytes(untied, ONE, ONE)[0] == 182_624_256


def test_bf16_main_grads_accumulate_a_third_of_the_bytes() -> None:
    """bf16 main grads (--grad-reduce-in-bf16): the wgrad GEMM reads and writes 2 + 2 where it would write 2, so 2
    extra per weight; the embedding hook writes 2, reads 2 and reads and writes the bf16 main grad: 8."""
    from commmodel.step.compute import accumulate_bytes_per_weight, embedding_grad_bytes_per_weight

    assert (accumulate_bytes_per_weight(4.0), embedding_grad_bytes_per_weight(4.0)) == (6.0, 12.0)
    assert (accumulate_bytes_per_weight(2.0), embedding_grad_bytes_per_weight(2.0)) == (2.0, 8.0)
    # pp 1, tp 1: 28,340,224 parameters × 2 + (8 − 2 + 2) × 1,048,576 (tied head: a second accumulate)
    assert grad_accumulation_bytes(TOY, ONE, ONE, main_grad_bytes=2.0)[0] == 28_340_224 * 2 + 8 * 1_048_576


def test_stage_compute_puts_the_loss_and_accumulation_in_their_passes() -> None:
    args = (TOY, H100, ONE, ONE, ONE, np.array([0]), np.array([False]), True, True)
    plain = stage_compute(*args)
    megatron = stage_compute(*args, cross_entropy="unfused", main_grad_bytes=4.0)
    assert float(plain.backward_s[0]) == pytest.approx(2 * float(plain.forward_s[0]))  # the old rule, unchanged
    assert float(megatron.forward_s[0] - plain.forward_s[0]) == pytest.approx(
        (79_691_776 - 20_971_520) / HBM_BYTES_PER_S)
    assert float(megatron.backward_s[0] - plain.backward_s[0]) == pytest.approx(
        (29_360_128 - 41_943_040 + 182_624_256) / HBM_BYTES_PER_S)  # 6.36e-5 s
    assert float(megatron.matmul_s[0]) == pytest.approx(float(plain.matmul_s[0]))  # all of it memory-bound


def test_attention_dropout_slows_the_fused_core_by_the_measured_ratio() -> None:
    causal_flops = 4 * 2048**2 * 1024 * (136 / 256)
    expected_s = 3.5 / 3 * causal_flops / (0.3384 * 2048 / 3298 * 989e12)  # 5.12e-5 s without dropout (FA2, s = 2,048)
    assert float(flash_attention_forward_s(TOY, H100, ONE, ONE, dropout=True)[0]) == pytest.approx(1.14 * expected_s)
    args = (TOY, H100, ONE, ONE, ONE, np.array([0]), np.array([False]), True, True)
    with_dropout = stage_compute(*args, attention_dropout=True)
    assert float(with_dropout.forward_s[0] - stage_compute(*args).forward_s[0]) == pytest.approx(2 * 0.14 * expected_s)


def test_grad_buffer_passes_cover_every_local_parameter_once_a_step() -> None:
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, zero=1)
    base = StepOptions(flash_attention=True)
    off = evaluate_single(TOY, H100, 8, layout, base)
    on = evaluate_single(TOY, H100, 8, layout, base.model_copy(update={"grad_buffer_passes": 4.0}))
    # the whole local buffer, not the 1/8 shard the optimizer updates: 28,340,224 × 4 passes × 4 bytes = 1.69e-4 s
    assert on["optimizer/link_s"] - off["optimizer/link_s"] == pytest.approx(28_340_224 * 16 / HBM_BYTES_PER_S)
    assert on["step_time_s"] - off["step_time_s"] == pytest.approx(28_340_224 * 16 / HBM_BYTES_PER_S)
    bf16 = evaluate_single(TOY, H100, 8, layout, base.model_copy(update={"grad_buffer_passes": 4.0,
                                                                         "grad_reduce_dtype": "bf16"}))
    assert bf16["optimizer/link_s"] - off["optimizer/link_s"] == pytest.approx(28_340_224 * 8 / HBM_BYTES_PER_S)


def test_megatron_core_stack_runs_the_kernels_and_the_2021_stack_does_not() -> None:
    core = stack_options("megatron-core")
    # today's recipes fuse the loss (--cross-entropy-loss-fusion); Megatron-LM's argument default does not (README rows)
    assert (core.cross_entropy, core.main_grad_accumulation, core.grad_buffer_passes) == ("fused", True, 4.0)
    # today's launches keep and reduce gradients in bf16 (--grad-reduce-in-bf16, Megatron-Bridge's perf recipes)
    assert (core.grad_reduce_dtype, core.main_grad_bytes) == ("bf16", 2.0)
    assert core.attention_dropout == 0.0  # today's recipes train without; a run sets it (the README rows: 0.1)
    old = stack_options("megatron-lm-2021")  # its loss: Megatron's vocab-parallel cross entropy op by op (2021)
    assert (old.cross_entropy, old.main_grad_accumulation, old.grad_buffer_passes) == ("unfused", False, 0.0)
    assert stack_options("megatron-core", cross_entropy="unfused").cross_entropy == "unfused"


def test_fused_loss_saves_22_bytes_per_bf16_logit_and_the_readme_rows_keep_the_unfused_one() -> None:
    """megatron-core's default loss is the fused one today's recipes launch (--cross-entropy-loss-fusion: 3e + 24 =
    30 bytes per bf16 logit forward + backward); Megatron-LM's argument default, unfused fp32 (2e + 48 = 52), is what
    the README's 2024 rows ran and carry. One micro-batch on one GPU: the step differs by exactly 22 bytes per logit
    at 0.8 of the HBM rate."""
    from commmodel.io.validation_data import read_training_modern
    from commmodel.step.compute import HBM_EFFICIENCY

    layout = Layout(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1, zero=0)
    fused = evaluate_single(TOY, H100, 1, layout, stack_options("megatron-core"))
    unfused = evaluate_single(TOY, H100, 1, layout, stack_options("megatron-core", cross_entropy="unfused"))
    logits = TOY.seq_len * TOY.vocab_size
    hbm = H100.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY
    assert unfused["compute/link_s"] - fused["compute/link_s"] == pytest.approx(22.0 * logits / hbm, rel=1e-9)
    readme_rows = [r for r in read_training_modern() if r["id"].startswith("mlm-gpt-")]
    assert len(readme_rows) == 11 and all(r["options"]["cross_entropy"] == "unfused" for r in readme_rows)


def test_megatron_core_keeps_its_gradients_in_the_reduce_dtype() -> None:
    """Megatron-DDP's buffer has the reduce dtype (grad_reduce_in_fp32 off: grad_dtype = param.dtype): the stack's
    bf16 default holds half the gradient bytes of --grad-reduce-dtype fp32 and reduce-scatters half the bytes;
    fsdp2, whose gradients are not Megatron's buffer, keeps fp32 gradient memory whatever goes on the wire."""
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, zero=1)
    bf16 = evaluate_single(TOY, H100, 8, layout, stack_options("megatron-core"))
    fp32 = evaluate_single(TOY, H100, 8, layout, stack_options("megatron-core", grad_reduce_dtype="fp32"))
    assert bf16["memory/gradients_bytes"] == pytest.approx(0.5 * fp32["memory/gradients_bytes"])
    assert fp32["memory/gradients_bytes"] == pytest.approx(28_340_224 * 4)
    assert bf16["step_time_s"] < fp32["step_time_s"]
    fsdp = [evaluate_single(TOY, H100, 8, layout, stack_options("fsdp2", grad_reduce_dtype=d))
            for d in ("fp32", "bf16")]
    assert fsdp[0]["memory/gradients_bytes"] == fsdp[1]["memory/gradients_bytes"]
