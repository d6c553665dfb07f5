"""What the attention stores for the backward, tensor by tensor, multi-latent attention (MLA) included, and what
Megatron-Core's ``--recompute-modules mla_up_proj`` drops and redoes (issue 13).

Sources, NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553 ``megatron/core/``:
``models/gpt/gpt_layer_specs.py`` (the Transformer Engine MLA spec: a separate ``input_layernorm``, the down
projections ``linear_q_down_proj`` and ``linear_kv_down_proj`` as ``TELinear`` in ``duplicated`` mode, the up
projections as ``TELayerNormColumnParallelLinear`` with the latent RMSNorms fused in, ``q_layernorm``/``kv_layernorm``
``IdentityOp``: the ``--qk-layernorm`` spec of Megatron's DeepSeek recipes), ``transformer/multi_latent_attention.py``
(``get_query_key_value_tensors``, ``qkv_up_proj_and_rope_apply``, ``recompute_up_proj``) and
``tensor_parallel/random.py`` (``CheckpointWithoutOutput``); NVIDIA/TransformerEngine @d0067d0
``pytorch/module/linear.py`` (``_Linear`` saves its own quantised input unless ``save_original_input``) and
``layernorm_linear.py`` (saves the norm input, made contiguous, and the norm output ``ln_out``, gathered again in the
backward under sequence parallelism).

Per token and block, before the tensor-parallel split (e the training dtype's bytes, i what a linear keeps of its
input, h hidden, n heads, d_n / d_r / d_v the non-rotary, rotary and value head widths, r_q / r_kv the latent
ranks; "replicated" is whole over tp without sequence parallelism and /tp with it, "split" is /tp):

=======================================  =========================  ============  ===============================
tensor (who keeps it)                    bytes                      part          with ``mla_up_proj``
=======================================  =========================  ============  ===============================
input norm output (the down projections) e·h in 16 bits (one        replicated    kept
                                         tensor); 2·i·h narrow
                                         (each TE linear its cast)
q latent c_q (q_up's fused norm input)   e·r_q                      replicated    kept (checkpoint input)
q latent normed (q_up GEMM input)        i·r_q                      replicated    dropped
kv latent c_kv (kv_up's norm input)      e·r_kv                     replicated    kept (checkpoint input)
kv latent normed (kv_up GEMM input)      i·r_kv                     replicated    dropped
k rope part k_pe                         none (RoPE and the         replicated    + e·d_r (checkpoint input)
                                         concat keep no input)
Q = [q_nope, rope(q_pe)] (the core)      e·n·(d_n + d_r)            split         dropped
K = [k_nope, rope(k_pe)] (the core)      e·n·(d_n + d_r)            split         dropped
V (the core)                             e·n·d_v                    split         dropped
=======================================  =========================  ============  ===============================

The up projections' own outputs (q, kv) are kept by nothing: the split, RoPE (which keeps only its cos/sin) and
the concatenations copy them into Q, K and V. ``mla_up_proj`` runs the up projections, RoPE and the concatenations
under ``CheckpointWithoutOutput``: the forward runs under ``no_grad`` (the normed latents are not kept), the
checkpoint keeps its inputs (c_q, c_kv and k_pe, views of the down projection's output), and Q, K, V are freed
once the attention core has run (``discard_output_and_register_recompute(core_attn_out)``) and rebuilt before its
backward: the up-projection GEMMs and RoPE run again. Without a q latent (``q_lora_rank`` None) the query
projection from h runs inside the checkpoint, whose input is then the 16-bit norm output.

Cross-check: the Megatron-MoE-ModelZoo estimator (yanring/Megatron-MoE-ModelZoo @e865051
``misc/tools/deepseek_mem_estimate.py``) lists the same tensors (input_norm_out, q_down_out, q_norm_out,
kv_compressed, kv_norm_out, q/k/v_apply_rope_out) with the same widths; it counts one narrow copy of the input norm
output and keeps the normed latents under up-projection recompute (an earlier spec with the latent norms outside
the checkpoint). Megatron's ``theoretical_memory_usage.py`` has no MLA activation term. Approximations: under
sequence parallelism the checkpoint's k_pe is gathered to the whole sequence (e·d_r, 128 bytes for DeepSeek-V3,
counted /tp here); the norms' fp32 statistics and the core's softmax statistics are not counted.
"""

from __future__ import annotations

from commmodel.workload.model import TransformerModel


def qkv_widths(model: TransformerModel) -> tuple[float, float, float]:
    """(Q, K, V) elements per token before the tensor-parallel split, the attention core's inputs: n·(d + d_r) for
    Q and K (one key head per query head with MLA, whose K carries the shared rotary part), n_kv·d_v for V."""
    query = float(model.query_dim)
    key = float(model.num_kv_heads * model.qk_head_dim)
    value = float(model.num_kv_heads * model.value_head_dim)
    return query, key, value


def attention_input_bytes_per_token(model: TransformerModel, e: float, i: float) -> float:
    """Bytes per token the attention keeps of the input norm's output (replicated): i·h for the fused norm-QKV
    linear; with MLA, two linears read it (q down or query projection, kv down): one e·h tensor in 16 bits, two
    narrow casts (2·i·h) under a low-precision recipe (module docstring)."""
    h = float(model.hidden_size)
    if not model.is_mla:
        return i * h
    return e * h if i == e else 2.0 * i * h


def latent_bytes_per_token(model: TransformerModel, e: float, i: float) -> float:
    """MLA's latents (replicated): each up projection's fused norm keeps its input (e) and its GEMM the normed
    latent (i), (e + i)·(r_q + r_kv); 0 without MLA."""
    if not model.is_mla:
        return 0.0
    return (e + i) * ((model.q_lora_rank or 0) + (model.kv_lora_rank or 0))


def up_proj_dropped_bytes_per_token(model: TransformerModel, e: float, i: float) -> tuple[float, float]:
    """(replicated, split) bytes per token and block ``mla_up_proj`` drops (module docstring's table): the normed
    latents i·(r_q + r_kv) less the k rope part e·d_r the checkpoint keeps, and Q, K, V. Without a q latent the
    checkpoint keeps the 16-bit norm output in place of the query projection's narrow cast: (i − e)·h more."""
    query, key, value = qkv_widths(model)
    rank_q = model.q_lora_rank
    replicated = i * (model.kv_lora_rank or 0) - e * model.qk_rope_head_dim
    replicated += i * rank_q if rank_q is not None else (i - e) * model.hidden_size
    return replicated, e * (query + key + value)


def up_proj_weights(model: TransformerModel) -> int:
    """Matmul weights the ``mla_up_proj`` checkpoint runs: the query up projection r_q·n·(d_n + d_r) (from h when
    there is no q latent) and the key/value up projection r_kv·n·(d_n + d_v)."""
    n = model.num_heads
    q_in = model.q_lora_rank if model.q_lora_rank is not None else model.hidden_size
    return q_in * n * model.qk_head_dim + (model.kv_lora_rank or 0) * n * (model.head_dim + model.value_head_dim)


def up_proj_gemm_share(model: TransformerModel) -> float:
    """Share of the block's ``qkv`` GEMM (``commmodel.workload.flops.layer_gemms``: MLA's chain of projections
    priced as one GEMM of :attr:`TransformerModel.attention_input_weights`) that the up projections are."""
    return up_proj_weights(model) / model.attention_input_weights
