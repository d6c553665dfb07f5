"""Transformer shape and its exact parameter count (DESIGN §5).

One frozen model describes a decoder-only transformer: GPT-style (LayerNorm, biases, learned
positions, GeLU MLP, tied embeddings), Llama-style (RMSNorm, no biases, RoPE, SwiGLU, untied,
grouped-query attention), BLOOM-style (ALiBi, an extra LayerNorm after the embedding) and
mixture-of-experts variants. ``num_params`` counts every weight exactly, so presets can be checked
against published totals (Brown et al. 2020 Table 2.1, Touvron et al. 2023, Llama 3 model card,
BigScience BLOOM model card, Narayanan et al. 2021 Table 1).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from pydantic import BaseModel, ConfigDict, Field, model_validator

from commmodel.errors import WorkloadError

ModelDtype = Literal["bf16", "fp16", "fp32", "fp8", "mxfp8", "nvfp4"]

DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "mxfp8": 2.0, "nvfp4": 2.0}
"""Bytes per element of the weights, activations and gradients a model keeps and moves in each training dtype
(IEEE 754 binary32/16, bfloat16). FP8, MXFP8 and NVFP4 training quantise only the linear GEMMs' inputs, on the
fly: weights, activations, norms and the TP/PP messages stay bf16 (Transformer Engine "Using FP8 with Transformer
Engine"; torchtitan docs/float8.md), so they count 2 bytes; the casts and FP8 parameter all-gathers are priced
in commmodel.step.precision."""


class TransformerModel(BaseModel):
    """A decoder-only transformer: shape, sequence length and training dtype."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1)
    """Preset or user name (e.g. "gpt3-175b", "llama3-8b")."""
    num_layers: int = Field(ge=1)
    """Transformer blocks (l)."""
    hidden_size: int = Field(ge=1)
    """Model width (h)."""
    num_heads: int = Field(ge=1)
    """Attention (query) heads (a); hidden_size must be a multiple of it."""
    num_kv_heads: int = Field(ge=1)
    """Key/value heads: = num_heads for multi-head attention, fewer for grouped-query attention
    (defaults to num_heads when omitted)."""
    ffn_hidden_size: int = Field(ge=1)
    """Inner width of the MLP (f); defaults to 4h, or 8h/3 rounded up to 256 with gated_mlp."""
    vocab_size: int = Field(ge=1)
    """Vocabulary (V), as padded by the training code (Megatron pads GPT-2's 50257 to 51200)."""
    seq_len: int = Field(ge=1)
    """Training sequence length (s)."""
    dtype: ModelDtype = "bf16"
    """Dtype of weights and activations in matmuls (mixed precision: master weights stay fp32)."""
    num_experts: int = Field(default=1, ge=1)
    """Experts per MoE MLP (1 = a dense model)."""
    experts_per_token: int = Field(default=1, ge=1)
    """Experts each token is routed to (top-k)."""
    gated_mlp: bool = False
    """SwiGLU/GeGLU MLP with three matrices (Llama) instead of two (GPT)."""
    bias: bool = True
    """Linear layers and norms carry biases (GPT, BLOOM) or not (Llama)."""
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    """LayerNorm (weight and bias, 2h) or RMSNorm (weight only, h)."""
    position_embedding: Literal["learned", "rope", "alibi"] = "learned"
    """Learned absolute positions add s·h parameters; RoPE and ALiBi add none."""
    tied_embeddings: bool = True
    """Output projection shares the input embedding matrix (GPT, BLOOM) or has its own (Llama)."""
    embedding_norm: bool = False
    """A norm right after the word embedding (BLOOM)."""

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        """Fill num_kv_heads and ffn_hidden_size from the other fields when they are omitted."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("num_kv_heads") is None and data.get("num_heads") is not None:
            data["num_kv_heads"] = data["num_heads"]
        if data.get("ffn_hidden_size") is None and data.get("hidden_size") is not None:
            hidden = int(data["hidden_size"])
            if data.get("gated_mlp"):
                # Llama: 2/3 of 4h, rounded up to a multiple of 256 (Touvron et al. 2023, model code).
                data["ffn_hidden_size"] = -(-int(8 * hidden / 3) // 256) * 256
            else:
                data["ffn_hidden_size"] = 4 * hidden
        return data

    @model_validator(mode="after")
    def _check(self) -> "TransformerModel":
        if self.hidden_size % self.num_heads:
            raise WorkloadError(
                f"model {self.name}: hidden_size {self.hidden_size} is not a multiple of num_heads "
                f"{self.num_heads}; pick heads that divide the hidden size"
            )
        if self.num_heads % self.num_kv_heads:
            raise WorkloadError(
                f"model {self.name}: num_heads {self.num_heads} is not a multiple of num_kv_heads "
                f"{self.num_kv_heads}; grouped-query attention needs whole groups"
            )
        if self.experts_per_token > self.num_experts:
            raise WorkloadError(
                f"model {self.name}: experts_per_token {self.experts_per_token} exceeds num_experts "
                f"{self.num_experts}; route each token to at most every expert"
            )
        return self

    # ------------------------------------------------------------------ derived sizes

    @property
    def head_dim(self) -> int:
        """Width of one attention head: h / a."""
        return self.hidden_size // self.num_heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): num_kv_heads × head_dim (= h without GQA)."""
        return self.num_kv_heads * self.head_dim

    @property
    def dtype_bytes(self) -> float:
        """Bytes per element in the training dtype."""
        return DTYPE_BYTES[self.dtype]

    @property
    def is_moe(self) -> bool:
        """Whether the MLPs are mixtures of experts."""
        return self.num_experts > 1

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices in one MLP (expert): 3 when gated, else 2."""
        return 3 if self.gated_mlp else 2

    @property
    def norm_params(self) -> int:
        """Parameters of one norm: 2h (LayerNorm) or h (RMSNorm)."""
        return (2 if self.norm == "layernorm" else 1) * self.hidden_size

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections of one block (with biases when ``bias``)."""
        h, kv = self.hidden_size, self.kv_dim
        weights = h * h + 2 * h * kv + h * h
        biases = (h + 2 * kv + h) if self.bias else 0
        return weights + biases

    @property
    def expert_params(self) -> int:
        """One MLP (one expert): 2 or 3 matrices of h × f, plus biases."""
        h, f = self.hidden_size, self.ffn_hidden_size
        biases = ((2 if self.gated_mlp else 1) * f + h) if self.bias else 0
        return self.mlp_matrices * h * f + biases

    @property
    def mlp_params(self) -> int:
        """All experts of one block plus the router (h × E) for MoE."""
        router = self.hidden_size * self.num_experts if self.is_moe else 0
        return self.num_experts * self.expert_params + router

    @property
    def layer_params(self) -> int:
        """One transformer block: attention + MLP (all experts) + two norms."""
        return self.attention_params + self.mlp_params + 2 * self.norm_params

    @property
    def embedding_params(self) -> int:
        """Word embedding V·h, plus s·h learned positions and the embedding norm where present."""
        positions = self.seq_len * self.hidden_size if self.position_embedding == "learned" else 0
        norm = self.norm_params if self.embedding_norm else 0
        return self.vocab_size * self.hidden_size + positions + norm

    @property
    def output_params(self) -> int:
        """Final norm plus the output projection V·h when it is not tied to the embedding."""
        head = 0 if self.tied_embeddings else self.vocab_size * self.hidden_size
        return self.norm_params + head

    @property
    def num_params(self) -> int:
        """Exact parameter count: l × block + embeddings + final norm (+ untied output head)."""
        return self.num_layers * self.layer_params + self.embedding_params + self.output_params

    @property
    def num_active_params(self) -> int:
        """Parameters a token touches: only experts_per_token of the experts (= num_params when dense)."""
        inactive = (self.num_experts - self.experts_per_token) * self.expert_params
        return self.num_params - self.num_layers * inactive

    def describe(self) -> str:
        """One line: name, size and shape."""
        from commmodel.units import format_count

        moe = f", {self.num_experts} experts top-{self.experts_per_token}" if self.is_moe else ""
        gqa = f", {self.num_kv_heads} kv-heads" if self.num_kv_heads != self.num_heads else ""
        return (
            f"{self.name}: {format_count(self.num_params)} params; {self.num_layers} layers, hidden "
            f"{self.hidden_size}, {self.num_heads} heads{gqa}, ffn {self.ffn_hidden_size}, vocab "
            f"{self.vocab_size}, seq {self.seq_len}{moe}"
        )


def stage_layers(model: TransformerModel, pp: Any) -> np.ndarray:
    """Blocks on the busiest pipeline stage: ⌈l/p⌉ (exactly l/p when p divides l). With uneven
    stages the stage holding the extra block sets the pipeline's pace and its memory peak."""
    p = np.asarray(pp, dtype=np.int64)
    return (-(-model.num_layers // p)).astype(float)


def chunk_layers(model: TransformerModel, pp: Any, vpp: Any) -> np.ndarray:
    """Blocks in the busiest virtual pipeline stage (model chunk): ⌈l/(p·v)⌉.

    With interleaving the l blocks are cut into p·v chunks, v per GPU; when p·v does not divide l some
    chunks hold one block fewer (Megatron-LM ``--decoder-first/last-pipeline-num-layers``; Llama 3,
    arXiv:2407.21783 §3.3.2, drops one block from the first and the last stage, so their end chunks hold
    only the embedding or the output layer and loss). The warm-up and cool-down of the interleaved
    schedule pass through p − 1 chunks, so the busiest chunk sets the bubble's pace. v = 1 gives
    :func:`stage_layers`."""
    p = np.asarray(pp, dtype=np.int64)
    v = np.asarray(vpp, dtype=np.int64)
    return (-(-model.num_layers // (p * v))).astype(float)
