"""TransformerModel shape fields and what they cost: the query/key head norms."""

import pytest


def test_qk_head_norms_cost_their_elements_in_time_and_memory() -> None:
    """Qwen3-235B norms 64 query and 4 key heads of 128 per token (q_norm, k_norm): 8,704 elements. One fused norm
    reads and writes them (2e each way, forward) and keeps its input for the backward (e), split by tp like Q and K;
    multi-latent attention's latent norms are counted elsewhere, so DeepSeek-V3 adds none."""
    import numpy as np

    from commmodel.workload.flops import layer_elementwise_bytes
    from commmodel.workload.memory import linear_layer_bytes_per_token
    from commmodel.workload.presets import get_model

    qwen = get_model("qwen3-235b-a22b")
    plain = qwen.model_copy(update={"qk_layernorm": False})
    assert qwen.qk_layernorm and qwen.qk_norm_width == 64 * 128 + 4 * 128 == 8704
    assert plain.qk_norm_width == 0.0 and get_model("deepseek-v3").model_copy(
        update={"qk_layernorm": True}).qk_norm_width == 0.0
    one, tp, sp = np.asarray(1.0), np.asarray(2.0), np.asarray(True)
    with_norms, _ = layer_elementwise_bytes(qwen, one, tp, sp, True)
    without, _ = layer_elementwise_bytes(plain, one, tp, sp, True)
    assert float(with_norms - without) == pytest.approx(4096 * 2 * 2 * 8704 / 2)
    assert linear_layer_bytes_per_token(qwen, True)[1] - linear_layer_bytes_per_token(plain, True)[1] == 2 * 8704
