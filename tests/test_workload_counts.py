"""Hand-counted FLOPs, bytes and memory of a 2-layer toy transformer, and the published closed forms.

Toy: l = 2, h = 64, a = 4 heads (d = 16), f = 256, V = 128, s = 16, GPT style (LayerNorm, biases,
learned positions, tied embeddings), bf16.
"""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.workload import PRESETS, TransformerModel
from commmodel.workload.flops import (
    hardware_flops_per_step,
    layer_elementwise_bytes,
    layer_gemms,
    logits_gemm,
    megatron_flops_per_step,
    model_flops_per_step,
)
from commmodel.workload.memory import activation_bytes_per_layer, in_flight_layers, memory_terms, params_per_gpu

TOY = TransformerModel(name="toy", num_layers=2, hidden_size=64, num_heads=4, vocab_size=128, seq_len=16)
ONE = np.array([1])


def test_toy_parameter_count() -> None:
    # Block: QKV 64·192 + 192, proj 64·64 + 64, fc1 64·256 + 256, fc2 256·64 + 64, 2 LayerNorms 2·128.
    block = 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64 + 2 * 128
    assert block == 49_984 == TOY.layer_params
    # Embedding 128·64, positions 16·64, final LayerNorm 128; the output head is tied.
    assert TOY.num_params == 2 * block + 128 * 64 + 16 * 64 + 128 == 109_312


def test_toy_gemm_flops() -> None:
    flops = {g.name: float(g.flops[0]) for g in layer_gemms(TOY, ONE, ONE)}
    assert flops == {
        "qkv": 2 * 16 * 192 * 64,        # 393,216
        "scores": 2 * 4 * 16 * 16 * 16,  # 32,768: b·a heads of (s×d)·(d×s)
        "context": 2 * 4 * 16 * 16 * 16,
        "proj": 2 * 16 * 64 * 64,
        "fc1": 2 * 16 * 256 * 64,
        "fc2": 2 * 16 * 64 * 256,
    }
    assert sum(flops.values()) == 1_638_400 == 24 * 16 * 64**2 + 4 * 16**2 * 64
    assert logits_gemm(TOY, ONE, ONE).flops[0] == 2 * 16 * 64 * 128
    # tp = 2 halves every matmul on one GPU.
    half = sum(float(g.flops[0]) for g in layer_gemms(TOY, ONE, np.array([2])))
    assert half == 1_638_400 / 2


def test_toy_step_flops() -> None:
    # Model FLOPs = 3 × (2 blocks + logits) per sequence; global batch 4.
    per_sequence = 3 * (2 * 1_638_400 + 262_144)
    assert model_flops_per_step(TOY, np.array([4.0]))[0] == 4 * per_sequence == 42_467_328
    assert megatron_flops_per_step(TOY, 4, full_recompute=False) == pytest.approx(42_467_328, rel=1e-12)
    full = hardware_flops_per_step(TOY, np.array([4.0]), np.array([2]))[0]
    assert full == 4 * (per_sequence + 2 * 1_638_400)
    assert megatron_flops_per_step(TOY, 4, full_recompute=True) == pytest.approx(full, rel=1e-12)
    selective = hardware_flops_per_step(TOY, np.array([4.0]), np.array([1]))[0]
    assert selective == 4 * (per_sequence + 2 * (32_768 * 2))


@pytest.mark.parametrize("name", ["gpt3-175b", "narayanan-1t", "korthikanti-22b"])
def test_megatron_formulas_match_general_count(name: str) -> None:
    m = PRESETS[name]
    gb = np.array([1536.0])
    assert model_flops_per_step(m, gb)[0] == pytest.approx(megatron_flops_per_step(m, 1536, False), rel=1e-12)
    assert hardware_flops_per_step(m, gb, np.array([2]))[0] == pytest.approx(
        megatron_flops_per_step(m, 1536, True), rel=1e-12)


def test_toy_elementwise_bytes() -> None:
    total, core = layer_elementwise_bytes(TOY, ONE, ONE, np.array([False]), flash_attention=False)
    e = 2
    per_token = 2 * 2 * e * 64 + 2 * (3 * e + 1) * 64 + 2 * e * 256 + 4 * 16 * (4 * e + 1)
    assert total[0] == 16 * per_token
    assert core[0] == 16 * 4 * 16 * (4 * e + 1)
    flash, flash_core = layer_elementwise_bytes(TOY, ONE, ONE, np.array([False]), flash_attention=True)
    assert flash_core[0] == 0 and flash[0] == total[0] - core[0]


@pytest.mark.parametrize(
    ("tp", "sp", "recompute", "per_sbh"),
    [
        # Korthikanti et al. 2022, Table 2 (bytes per s·b·h per layer); 5as/h = 5·4·16/64 = 5.
        (1, False, 0, 34 + 5),
        (2, False, 0, 10 + 24 / 2 + 5 / 2),
        (2, True, 0, 34 / 2 + 5 / 2),
        (2, True, 1, 34 / 2),
        (2, False, 2, 2),
        (2, True, 2, 2 / 2),
    ],
)
def test_activation_memory_korthikanti(tp: int, sp: bool, recompute: int, per_sbh: float) -> None:
    got = activation_bytes_per_layer(TOY, ONE, np.array([tp]), np.array([sp]), np.array([recompute]), False)
    assert got[0] == pytest.approx(16 * 1 * 64 * per_sbh, rel=1e-12)


def test_in_flight_microbatches() -> None:
    # 1F1B keeps p micro-batches of l/p layers on the first stage; interleaving × (1 + (p−1)/(p·v)).
    m = TransformerModel(name="m", num_layers=8, hidden_size=64, num_heads=4, vocab_size=128, seq_len=16)
    got = in_flight_layers(m, np.array([4, 4, 4, 1]), np.array([1, 2, 1, 1]), np.array([16, 16, 2, 16]), gpipe=False)
    assert list(got) == [8.0, 8 * (1 + 3 / 8), 2 * 2.0, 8.0]
    assert in_flight_layers(m, np.array([4]), np.array([1]), np.array([16]), gpipe=True)[0] == 2 * 16


def test_toy_memory_terms_and_zero_order() -> None:
    params = params_per_gpu(TOY, ONE, ONE, np.array([2]))[0]
    assert params == TOY.num_params
    terms = memory_terms(TOY, ONE, ONE, np.array([2, 2, 2, 2]), np.array([1] * 4), np.array([4] * 4),
                         np.array([0, 1, 2, 3]), np.array([0] * 4), np.array([False] * 4), np.array([1] * 4),
                         25e6, False, False)
    p = TOY.num_params
    assert list(terms["weights"]) == [2 * p, 2 * p, 2 * p, p]          # bf16, sharded at ZeRO-3
    assert list(terms["gradients"]) == [4 * p, 4 * p, 2 * p, 2 * p]    # fp32 main grads, sharded from ZeRO-2
    assert list(terms["optimizer"]) == [12 * p, 6 * p, 6 * p, 6 * p]   # fp32 master + Adam m, v, from ZeRO-1
    total = sum(terms.values())
    assert total[3] <= total[2] <= total[1] <= total[0]
