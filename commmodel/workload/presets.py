"""Named model shapes, and a reasonable shape for a bare parameter count (DESIGN §5).

Sources of the shapes:
- GPT-3 family: Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1 (vocab 50257,
  context 2048). Two rows of that table are not self-consistent (XL: 24 heads × 128 ≠ 2048;
  13B: d_model 5140 is not 40 × 128); we use 16 heads and 5120, as open re-implementations do.
- narayanan-*: Narayanan et al. 2021 (arXiv:2104.04473) Table 1 (vocab 51200 = GPT-2's padded
  by Megatron, seq 2048). korthikanti-22b: Korthikanti et al. 2022 (arXiv:2205.05198) Table 3.
- Llama 2: Touvron et al. 2023 (arXiv:2307.09288) and the released configs (vocab 32000, seq 4096).
- Llama 3 / 3.1: Meta "The Llama 3 Herd of Models" (arXiv:2407.21783) Table 3 (vocab 128256; the
  pre-training sequence length 8192).
- Nemotron-4: 15B, Parmar et al. 2024 (arXiv:2402.16819) Table 1 and §2 (32 layers, hidden 6144, 48 heads, 8 kv
  heads, seq 4096, vocab 256,000, squared-ReLU MLP of 4h, no bias, RoPE, untied embeddings: 12.5B non-embedding +
  3.2B embedding parameters); 340B, NVIDIA 2024 (arXiv:2406.11704) Table 1 (96 layers, hidden 18432, 96 heads,
  8 kv heads, the same recipe; 4h = 73728). LayerNorm, as Megatron-Core's Nemotron configs.
- BLOOM-176B: BigScience model card (70 layers, 14336 hidden, 112 heads, vocab 250880, ALiBi).
- Mixtral 8x7B: Jiang et al. 2024 (arXiv:2401.04088) Table 1; HF mistralai/Mixtral-8x7B-v0.1 config.json.
- Mixture-of-experts presets, from the released Hugging Face config.json of each model (field names in
  brackets), with the published totals they are tested against (tests/test_workload_moe.py):
  - mixtral-8x22b: mistralai/Mixtral-8x22B-v0.1 (hidden 6144, 56 layers, 48 heads, 8 kv heads,
    intermediate 16384, vocab 32768, 8 experts top-2); 141B total / 39B active (Mistral AI release notes).
  - deepseek-v3: deepseek-ai/DeepSeek-V3 (hidden 7168, 61 layers, 128 heads, intermediate 18432,
    moe_intermediate 2048, 256 routed + 1 shared experts top-8, first_k_dense_replace 3, q_lora_rank 1536,
    kv_lora_rank 512, qk_nope/rope/v head dims 128/64/128, vocab 129280); 671B total / 37B active
    (arXiv:2412.19437 §1, §4.2: 4K pre-training sequence length). The 14B multi-token-prediction module is
    not counted (the report's 671B excludes it).
  - qwen3-30b-a3b, qwen3-235b-a22b: Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B (hidden 2048/4096, 48/94
    layers, 32/64 heads, 4 kv heads, head_dim 128, moe_intermediate 768/1536, 128 experts top-8, vocab
    151936, untied); 30.5B/3.3B and 235B/22B (Qwen3 technical report arXiv:2505.09388 Table 2; seq 4096
    in pre-training stage 1). Each attention block norms every query and key head before RoPE (transformers
    models/qwen3_moe/modeling_qwen3_moe.py ``q_norm``/``k_norm``, RMSNorm over head_dim; ModelZoo
    ``--qk-layernorm``): qk_layernorm.
  - gpt-oss-120b: openai/gpt-oss-120b (hidden 2880, 36 layers, 64 heads × 64, 8 kv heads, intermediate
    2880, 128 experts top-4, vocab 201088, biases in attention, experts and router); 116.83B total / 5.13B
    active (gpt-oss model card, arXiv:2508.10925 Table 1, which leaves the input embedding out of
    "active"). Every other block attends within a 128-token sliding window (transformers
    models/gpt_oss/configuration_gpt_oss.py: layer_types "sliding_attention" on even blocks, sliding_window
    128): attention_window 128 on half the blocks, priced by the tiles the band touches
    (step/attention.py local_fraction); the attention sinks (64 scalars per block) are not counted.
  - gpt-oss-20b: openai/gpt-oss-20b, gpt-oss-120b's block with 24 layers and 32 experts top-4; 20.91B total /
    3.61B active (the same model card table, the same "active" convention).
  - llama4-maverick: meta-llama/Llama-4-Maverick-17B-128E text_config (hidden 5120, 48 layers, 40 heads,
    8 kv heads, head_dim 128, intermediate 8192 per expert, intermediate_size_mlp 16384 in dense blocks,
    128 experts top-1 + 1 shared, interleave_moe_layer_step 2, vocab 202048); 400B total / 17B active
    (Meta Llama 4 model card). Text model only (the vision encoder is not counted). Three blocks in four
    (the RoPE ones) attend within fixed 8,192-token chunks, every fourth (NoPE) to the whole prefix
    (text_config attention_chunk_size 8192; transformers models/llama4/modeling_llama4.py
    Llama4TextDecoderLayer: use_chunked_attention = (layer_idx + 1) % 4 != 0): attention_window 8192, chunked,
    on 3/4 of the blocks (no saving at sequences of 8,192 or less).
  - llama4-scout: meta-llama/Llama-4-Scout-17B-16E text_config, Maverick's shape with 16 experts (top-1 + 1 shared,
    intermediate 8192) in every block (interleave_moe_layer_step 1; Megatron-LM @d98e8a6
    examples/post_training/modelopt/conf/meta-llama/Llama-4-Scout-17B-16E-Instruct.sh:
    --num-experts 16 --moe-ffn-hidden-size 8192 --moe-router-topk 1); 109B total / 17B active (Meta Llama 4 model
    card: the model counted with its vision encoder; the text model here is 107.8B).
  Sequence lengths are the pre-training ones where published (4096 for DeepSeek-V3 and Qwen3, 4096 for
  gpt-oss's initial context, 8192 for Llama 4 and Mixtral 8x22B as an assumption).
"""

from __future__ import annotations

import difflib
import math
import re

from commmodel.errors import UnitError, WorkloadError
from commmodel.limits import MAX_NUM_PARAMS, MIN_NUM_PARAMS
from commmodel.units import parse_count
from commmodel.workload.model import TransformerModel


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 50257, seq: int = 2048) -> TransformerModel:
    return TransformerModel(name=name, num_layers=layers, hidden_size=hidden, num_heads=heads,
                            vocab_size=vocab, seq_len=seq)


def _llama(name: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int,
           seq: int) -> TransformerModel:
    return TransformerModel(
        name=name, num_layers=layers, hidden_size=hidden, num_heads=heads, num_kv_heads=kv_heads,
        ffn_hidden_size=ffn, vocab_size=vocab, seq_len=seq, gated_mlp=True, bias=False, norm="rmsnorm",
        position_embedding="rope", tied_embeddings=False,
    )


def _moe(name: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int, seq: int,
         experts: int, top_k: int, **extra: object) -> TransformerModel:
    """A Llama-style (RMSNorm, RoPE, SwiGLU, untied) mixture of experts."""
    fields = dict(name=name, num_layers=layers, hidden_size=hidden, num_heads=heads, num_kv_heads=kv_heads,
                  ffn_hidden_size=ffn, vocab_size=vocab, seq_len=seq, gated_mlp=True, bias=False, norm="rmsnorm",
                  position_embedding="rope", tied_embeddings=False, num_experts=experts, experts_per_token=top_k)
    return TransformerModel(**{**fields, **extra})  # type: ignore[arg-type]


_NARAYANAN = {  # Narayanan et al. 2021 Table 1: (params label, layers, hidden, heads)
    "1.7b": (24, 2304, 24), "3.6b": (30, 3072, 32), "7.5b": (36, 4096, 32), "18.4b": (40, 6144, 48),
    "39.1b": (48, 8192, 64), "76.1b": (60, 10240, 80), "145.6b": (80, 12288, 96),
    "310.1b": (96, 16384, 128), "529.6b": (105, 20480, 128), "1t": (128, 25600, 160),
}

PRESETS: dict[str, TransformerModel] = {
    m.name: m
    for m in (
        _gpt("gpt3-125m", 12, 768, 12),
        _gpt("gpt3-350m", 24, 1024, 16),
        _gpt("gpt3-760m", 24, 1536, 16),
        _gpt("gpt3-1.3b", 24, 2048, 16),
        _gpt("gpt3-2.7b", 32, 2560, 32),
        _gpt("gpt3-6.7b", 32, 4096, 32),
        _gpt("gpt3-13b", 40, 5120, 40),
        _gpt("gpt3-175b", 96, 12288, 96),
        *(_gpt(f"narayanan-{k}", *v, vocab=51200) for k, v in _NARAYANAN.items()),
        _gpt("korthikanti-22b", 48, 6144, 64, vocab=51200),
        _gpt("mt-nlg-530b", 105, 20480, 128, vocab=51200),
        _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
        _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
        _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
        _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
        _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
        _llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192),
        *(TransformerModel(name=f"nemotron4-{size}", num_layers=layers, hidden_size=hidden, num_heads=heads,
                           num_kv_heads=8, ffn_hidden_size=4 * hidden, vocab_size=256000, seq_len=4096,
                           gated_mlp=False, bias=False, norm="layernorm", position_embedding="rope",
                           tied_embeddings=False)
          for size, layers, hidden, heads in (("15b", 32, 6144, 48), ("340b", 96, 18432, 96))),
        TransformerModel(
            name="bloom-176b", num_layers=70, hidden_size=14336, num_heads=112, vocab_size=250880,
            seq_len=2048, position_embedding="alibi", embedding_norm=True,
        ),
        _moe("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096, 8, 2),
        _moe("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32768, 8192, 8, 2),
        _moe("deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 4096, 256, 8, moe_ffn_hidden_size=2048,
             num_shared_experts=1, first_dense_layers=3, q_lora_rank=1536, kv_lora_rank=512, kv_channels=128,
             qk_rope_head_dim=64, v_head_dim=128),
        _moe("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, 4096, 128, 8, moe_ffn_hidden_size=768, qk_layernorm=True,
             kv_channels=128),
        _moe("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 151936, 4096, 128, 8, moe_ffn_hidden_size=1536,
             qk_layernorm=True,
             kv_channels=128),
        _moe("gpt-oss-120b", 36, 2880, 64, 8, 2880, 201088, 4096, 128, 4, kv_channels=64, bias=True,
             attention_window=128, local_attention_fraction=0.5),
        _moe("gpt-oss-20b", 24, 2880, 64, 8, 2880, 201088, 4096, 32, 4, kv_channels=64, bias=True,
             attention_window=128, local_attention_fraction=0.5),
        _moe("llama4-scout", 48, 5120, 40, 8, 16384, 202048, 8192, 16, 1, moe_ffn_hidden_size=8192,
             num_shared_experts=1, moe_layer_interval=1, kv_channels=128, attention_window=8192,
             attention_chunked=True, local_attention_fraction=0.75),
        _moe("llama4-maverick", 48, 5120, 40, 8, 16384, 202048, 8192, 128, 1, moe_ffn_hidden_size=8192,
             num_shared_experts=1, moe_layer_interval=2, kv_channels=128, attention_window=8192,
             attention_chunked=True, local_attention_fraction=0.75),
    )
}

ALIASES: dict[str, str] = {
    "gpt3": "gpt3-175b", "gpt-3": "gpt3-175b", "gpt3-xl": "gpt3-1.3b", "bloom": "bloom-176b", "mixtral": "mixtral-8x7b",
    "mixtral-8x7b-v0.1": "mixtral-8x7b", "mixtral-8x22b-v0.1": "mixtral-8x22b", "deepseek-v3-base": "deepseek-v3",
    "mixtral-8x7": "mixtral-8x7b", "mixtral-8x22": "mixtral-8x22b",
    "qwen3-moe-30b": "qwen3-30b-a3b", "qwen3-moe-235b": "qwen3-235b-a22b", "gpt-oss": "gpt-oss-120b",
    "gpt-oss-20b-base": "gpt-oss-20b", "llama-4-maverick": "llama4-maverick", "llama4-maverick-17b-128e": "llama4-maverick",
    "llama-4-scout": "llama4-scout", "llama4-scout-17b-16e": "llama4-scout",
    "llama-2-7b": "llama2-7b", "llama-2-13b": "llama2-13b", "llama-2-70b": "llama2-70b",
    "llama-3-8b": "llama3-8b", "llama-3-70b": "llama3-70b", "llama-3-405b": "llama3-405b",
    "llama3.1-8b": "llama3-8b", "llama3.1-70b": "llama3-70b", "llama3.1-405b": "llama3-405b",
    "nemotron-4-15b": "nemotron4-15b", "nemotron-4-340b": "nemotron4-340b", "nemotron4-340b-base": "nemotron4-340b",
    "megatron-22b": "korthikanti-22b", "narayanan-530b": "narayanan-529.6b", "narayanan-1008b": "narayanan-1t",
}

# Anchor shapes for a bare parameter count: (params, hidden) of the GPT-3 family and the Megatron
# shapes above, interpolated log-log. Width grows roughly as N^(1/3) along this family.
_ANCHORS = sorted(
    (m.num_params, m.hidden_size) for m in PRESETS.values()
    if m.name.startswith(("gpt3-", "narayanan-")) and m.name != "gpt3-13b"
)


def _anchor_hidden(num_params: float) -> float:
    logs = [(math.log(p), math.log(h)) for p, h in _ANCHORS]
    x = math.log(num_params)
    if x <= logs[0][0]:
        (x0, y0), (x1, y1) = logs[0], logs[1]
    elif x >= logs[-1][0]:
        (x0, y0), (x1, y1) = logs[-2], logs[-1]
    else:
        i = next(i for i in range(1, len(logs)) if logs[i][0] >= x)
        (x0, y0), (x1, y1) = logs[i - 1], logs[i]
    return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0))


SHAPE_TOLERANCE = 0.03
"""A derived shape lands within 3% of the requested parameter count whenever the grid allows it."""


def _head_dim(hidden: int) -> int:
    """128-wide heads where h is a multiple of 1024 from 2048 (GPT-3 13B/175B, Megatron shapes), else 64."""
    return 128 if hidden >= 2048 and hidden % 1024 == 0 else 64


def _gpt_params(layers: int, hidden: int, seq_len: int, vocab_size: int) -> int:
    """Exact count of a GPT block stack: l·(12h² + 13h) + V·h + s·h + 2h (Narayanan et al. 2021 eq. for P,
    plus the final LayerNorm), the count :class:`TransformerModel` gives for a GPT shape."""
    return layers * (12 * hidden * hidden + 13 * hidden) + (vocab_size + seq_len) * hidden + 2 * hidden


def shape_for_params(num_params: float, seq_len: int = 2048, vocab_size: int = 51200) -> TransformerModel:
    """A GPT-style shape with about ``num_params`` parameters (within :data:`SHAPE_TOLERANCE`).

    Candidates: hidden sizes within ×0.7-×1.4 of the GPT-3/Megatron family's width for that count
    (log-log interpolation of the presets), multiples of 128 below 2048 and of 512 from 2048 (so that
    the heads, h/64 or h/128, divide by 8 for 8-way tensor parallelism); layers any count below 8 and
    multiples of 4 from 8 (so common pipeline depths divide them). Among the candidates within 3% of
    the count, the one whose width is closest (log) to the family's wins — from 1B those whose heads
    divide by 8 first; if none is within 3%, the closest count wins.
    """
    if not math.isfinite(num_params) or num_params < MIN_NUM_PARAMS:
        raise WorkloadError(f"parameter count {num_params:g} is too small for a transformer; give at least 1M (e.g. 125M)")
    if num_params > MAX_NUM_PARAMS:  # the width search below grows as N^(1/3): 1e30 would take hours
        raise WorkloadError(f"parameter count {num_params:g} is too large; accepted range is 1M to "
                            f"{MAX_NUM_PARAMS:g} (1000T, 500x the largest published model)")
    anchor = _anchor_hidden(num_params)
    best: tuple[tuple[float, ...], int, int] | None = None
    for hidden in range(128, int(anchor * 1.4) + 512, 128):
        if hidden < 0.7 * anchor or (hidden >= 2048 and hidden % 512) or hidden < 256:
            continue
        heads = hidden // _head_dim(hidden)
        per_layer = 12 * hidden * hidden + 13 * hidden
        rough = max(1.0, (num_params - _gpt_params(0, hidden, seq_len, vocab_size)) / per_layer)
        options = {max(1, math.floor(rough)), math.ceil(rough)} if rough < 8 else \
            {max(8, 4 * math.floor(rough / 4)), max(8, 4 * math.ceil(rough / 4))}
        for layers in options:
            error = abs(_gpt_params(layers, hidden, seq_len, vocab_size) / num_params - 1.0)
            key = (0.0 if error <= SHAPE_TOLERANCE else error,
                   float(num_params >= 1e9 and heads % 8 != 0), abs(math.log(hidden / anchor)))
            if best is None or key < best[0]:
                best = (key, layers, hidden)
    assert best is not None  # the grid always holds the anchor's neighbourhood
    _, layers, hidden = best
    from commmodel.units import format_count

    return _gpt(f"gpt-{format_count(num_params)}", layers, hidden, hidden // _head_dim(hidden), vocab=vocab_size,
                seq=seq_len)


COUNT_LIKE = re.compile(r"^[-+]?(?:\d|\.\d|nan\b|inf)", re.IGNORECASE)
"""A model spec that starts like a number ("-7B", "1e400B", "nan"): when it does not parse as a count, the
count's own error is the answer, not the list of presets."""


def get_model(spec: str) -> TransformerModel:
    """The model named by ``spec``: a preset name or a parameter count ("1B", "7e9"). Pure: model YAML
    files are read by :func:`commmodel.io.models.resolve_model`, which the CLI and query use."""
    text = spec.strip()
    key = text.lower()
    key = ALIASES.get(key, key)
    if key in PRESETS:
        return PRESETS[key]
    if text.endswith((".yaml", ".yml")):
        raise WorkloadError(f"model {spec!r} is a file; read it with commmodel.io.models.resolve_model "
                            f"(the CLI's --model does), or give a preset name or a parameter count")
    try:
        count = parse_count(text)
    except UnitError as err:
        if COUNT_LIKE.match(text):  # "-7B", "nan", "1e400B": a count the user meant, not a misspelt preset
            said = text if len(text) <= 24 else f"{text[:20]}…({len(text)} characters)"
            raise WorkloadError(f"model {said!r} is not a parameter count to train: "
                                f"{str(err).replace(f'count {text!r}', 'it').replace(repr(text), 'it')}") from None
        close = difflib.get_close_matches(key, [*PRESETS, *ALIASES], n=4, cutoff=0.6)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise WorkloadError(
            f"unknown model {spec!r}{hint}; give a preset name ({', '.join(PRESETS)}), a parameter "
            f"count such as 1B or 7e9, or a path to a model YAML file"
        ) from None
    return shape_for_params(count)
