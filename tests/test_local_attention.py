"""Local attention (sliding window, chunked): the tiles a causal FlashAttention kernel computes, the rate it runs
at, the presets that have it (gpt-oss, Llama 4) and where a Hugging Face config.json states it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from commmodel.errors import WorkloadError
from commmodel.io.hf_config import model_from_hf
from commmodel.io.profiles import load_system
from commmodel.step.attention import (attention_block_kinds, attention_efficiency, causal_fraction,
                                      flash_attention_forward_s, local_fraction)
from commmodel.workload.flops import attention_core_flops
from commmodel.workload.model import TransformerModel
from commmodel.workload.presets import get_model

ONE = np.array([1.0])
H100 = load_system("dgx-h100")


def test_local_fraction_counts_the_tiles_the_band_touches() -> None:
    """s = 4,096 in 32 tiles of 128. A 128-token sliding window reaches one tile back: tile 0 reads 1 tile, every
    other 2, so 1 + 31·2 = 63 of 1,024. Chunks of 8,192 at s = 65,536: 8 causal chunks of 64 tiles, 8·64·65/2 of
    512²; at s ≤ the chunk or the window, the whole causal triangle."""
    assert local_fraction(4096, 128) == pytest.approx(63 / 1024)
    assert local_fraction(4096, 1024) == pytest.approx((9 * 10 / 2 + 23 * 9) / 1024)  # m = 8: 45 + 207 tiles
    assert local_fraction(65536, 8192, chunked=True) == pytest.approx(8 * 64 * 65 / 2 / 512**2)
    assert local_fraction(8192, 8192, chunked=True) == causal_fraction(8192)
    assert local_fraction(2048, 4096) == causal_fraction(2048)


def test_window_and_share_go_together() -> None:
    with pytest.raises((WorkloadError, ValueError), match="attention_window and local_attention_fraction go together"):
        TransformerModel(name="x", num_layers=2, hidden_size=256, num_heads=2, vocab_size=100, seq_len=512,
                         attention_window=128)
    with pytest.raises((WorkloadError, ValueError), match="go together"):
        TransformerModel(name="x", num_layers=2, hidden_size=256, num_heads=2, vocab_size=100, seq_len=512,
                         local_attention_fraction=0.5)


def test_gpt_oss_forward_attention_by_hand() -> None:
    """gpt-oss-120b at 4,096 tokens on an H100 under Transformer Engine's cuDNN: half the blocks attend fully (0.516 of
    the square at 0.549·4096/4676 of peak), half within 128 tokens (63/1,024 of it, at 0.549·128/708: a query tile
    loops over at most two key tiles, so the kernel's fixed cost per tile dominates)."""
    model = get_model("gpt-oss-120b")
    square = float(attention_core_flops(model, ONE, ONE)[0])
    full_eff = attention_efficiency(H100, "te", 4096.0)
    local_eff = attention_efficiency(H100, "te", 128.0)
    assert local_eff == pytest.approx(0.549 * 128 / 708)
    expected = 7 / 6 * square * (0.5 * causal_fraction(4096) / full_eff + 0.5 * (63 / 1024) / local_eff) / 989e12
    assert float(flash_attention_forward_s(model, H100, ONE, ONE, kernel="te")[0]) == pytest.approx(expected)
    full_only = model.model_copy(update={"attention_window": None, "local_attention_fraction": 0.0})
    ratio = expected / float(flash_attention_forward_s(full_only, H100, ONE, ONE, kernel="te")[0])
    assert ratio == pytest.approx(0.5 + 0.5 * (63 / 1024 / local_eff) / (causal_fraction(4096) / full_eff))
    assert 0.7 < ratio < 0.85  # the banded half costs ~58% of a full block's attention, not 12%


def test_llama4_chunks_save_nothing_up_to_the_chunk() -> None:
    model = get_model("llama4-maverick")  # 8,192 tokens, chunks of 8,192 on 3 blocks of 4
    assert [kind[1] for kind in attention_block_kinds(model)] == [causal_fraction(8192)] * 2
    long = model.model_copy(update={"seq_len": 65536})
    share_full, share_local = (kind[0] for kind in attention_block_kinds(long))
    assert (share_full, share_local) == (0.25, 0.75)
    assert attention_block_kinds(long)[1][1] == pytest.approx(8 * 64 * 65 / 2 / 512**2)


@pytest.mark.parametrize(("config", "window", "share"), [
    ({"sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 18}, 128, 0.5),  # gpt-oss
    ({"sliding_window": 1024, "sliding_window_pattern": 6}, 1024, 5 / 6),                               # Gemma 3
    ({"sliding_window": 4096}, 4096, 1.0),                                                             # Mistral v0.1
    ({"sliding_window": 131072, "use_sliding_window": False}, None, 0.0),                              # Qwen2
    ({"sliding_window": None}, None, 0.0),                                                             # Mixtral
])
def test_hf_config_local_attention(tmp_path, config: dict, window: int | None, share: float) -> None:
    base = {"hidden_size": 1024, "num_hidden_layers": 36, "num_attention_heads": 16, "vocab_size": 32000,
            "architectures": ["MistralForCausalLM"], "max_position_embeddings": 4096}
    (tmp_path / "config.json").write_text(json.dumps({**base, **config}))
    model = model_from_hf(tmp_path)
    assert (model.attention_window, model.local_attention_fraction) == (window, pytest.approx(share))


def test_model_flops_count_a_local_block_at_its_window() -> None:
    """MFU's FLOPs: a fully attending block counts the s×s square (the published convention), a local one s·w (each
    query against its w keys). gpt-oss at 4,096: 1 − ½(1 − 128/4096); Llama 4 at 65,536: 1 − ¾(1 − 8192/65536); at
    8,192 the chunk is the sequence and nothing changes. The count differs from the all-full model by exactly the
    attention core's cut share, three passes per block."""
    from commmodel.workload.flops import counted_core_share, model_flops_per_step

    oss = get_model("gpt-oss-120b")
    assert counted_core_share(oss) == pytest.approx(1 - 0.5 * (1 - 128 / 4096))
    llama4 = get_model("llama4-maverick")
    assert counted_core_share(llama4) == 1.0
    assert counted_core_share(llama4.model_copy(update={"seq_len": 65536})) == pytest.approx(1 - 0.75 * (1 - 1 / 8))
    full = oss.model_copy(update={"attention_window": None, "local_attention_fraction": 0.0})
    core = float(attention_core_flops(oss, ONE, ONE)[0])
    cut = 3 * oss.num_layers * core * (1 - counted_core_share(oss))
    assert float((model_flops_per_step(full, ONE) - model_flops_per_step(oss, ONE))[0]) == pytest.approx(cut)
