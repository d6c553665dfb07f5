"""Transformer shape and its exact parameter count (DESIGN §5).

One frozen model describes a decoder-only transformer: GPT-style (LayerNorm, biases, learned
positions, GeLU MLP, tied embeddings), Llama-style (RMSNorm, no biases, RoPE, SwiGLU, untied,
grouped-query attention), BLOOM-style (ALiBi, an extra LayerNorm after the embedding) and
mixture-of-experts variants. ``num_params`` counts every weight exactly, so presets can be checked
against published totals (Brown et al. 2020 Table 2.1, Touvron et al. 2023, Llama 3 model card,
BigScience BLOOM model card, Narayanan et al. 2021 Table 1).

Mixture-of-experts blocks follow Megatron-Core's parameter count (NVIDIA/Megatron-LM
megatron/training/theoretical_memory_usage.py @00caa53, ``compute_weight_and_optimizer_memory``):
routed experts of width ``moe_ffn_hidden_size``, shared experts of the same width, a router of h × E,
leading dense blocks and an MoE-layer interval; multi-latent attention (MLA, DeepSeek-V2/V3) counts
its low-rank query and key/value projections exactly as that file does. Not modelled (each under
0.01% of any preset): DeepSeek-V3's per-expert routing bias (E per block), gpt-oss's attention sinks
(one scalar per head), Qwen3's per-head q/k RMSNorm (2·head_dim per block); the router's scoring
function (softmax or sigmoid) changes neither parameters nor matmul FLOPs.
"""

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from commmodel.dtype_bytes import STORAGE_BYTES
from commmodel.errors import WorkloadError

ModelDtype = Literal["bf16", "fp16", "fp32", "fp8", "fp8-current", "fp8-rowwise", "fp8-blockwise", "mxfp8", "nvfp4"]

DTYPE_BYTES: dict[str, float] = {dtype: STORAGE_BYTES[dtype if dtype in ("fp32", "bf16", "fp16") else "bf16"]
                                 for dtype in sorted(get_args(ModelDtype), key=lambda name: name != "fp32")}
"""Bytes per element of the weights, activations and gradients a model keeps and moves in each training dtype
(IEEE 754 binary32/16, bfloat16). FP8, MXFP8 and NVFP4 training quantise only the linear GEMMs' inputs, on the
fly: weights, activations, norms and the TP/PP messages stay bf16 (Transformer Engine "Using FP8 with Transformer
Engine"; torchtitan docs/float8.md), so they count 2 bytes; the casts and FP8 parameter all-gathers are priced
in commmodel.step.precision, the sequence-parallel TP all-gathers that per-tensor FP8 recipes run in FP8 in
commmodel.step.tp_wire."""


class TransformerModel(BaseModel):
    """A decoder-only transformer: shape, sequence length and training dtype."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    """Preset or user name (e.g. "gpt3-175b", "llama3-8b")."""
    num_layers: int = Field(strict=True, ge=1)
    """Transformer blocks (l)."""
    hidden_size: int = Field(strict=True, ge=1)
    """Model width (h)."""
    num_heads: int = Field(strict=True, ge=1)
    """Attention (query) heads (a); hidden_size must be a multiple of it."""
    num_kv_heads: int = Field(strict=True, ge=1)
    """Key/value heads: = num_heads for multi-head attention, fewer for grouped-query attention
    (defaults to num_heads when omitted)."""
    ffn_hidden_size: int = Field(strict=True, ge=1)
    """Inner width of the MLP (f); defaults to 4h, or 8h/3 rounded up to 256 with gated_mlp."""
    vocab_size: int = Field(strict=True, ge=1)
    """Vocabulary (V), as padded by the training code (Megatron pads GPT-2's 50257 to 51200)."""
    seq_len: int = Field(strict=True, ge=1)
    """Training sequence length (s)."""
    dtype: ModelDtype = "bf16"
    """Dtype of weights and activations in matmuls (mixed precision: master weights stay fp32)."""
    num_experts: int = Field(strict=True, default=1, ge=1)
    """Experts per MoE MLP (1 = a dense model)."""
    experts_per_token: int = Field(strict=True, default=1, ge=1)
    """Experts each token is routed to (top-k)."""
    moe_ffn_hidden_size: int | None = Field(strict=True, default=None, ge=1)
    """Inner width of one routed (and shared) expert (HF ``moe_intermediate_size``, Megatron
    ``--moe-ffn-hidden-size``); None = ffn_hidden_size (Mixtral). Dense blocks use ffn_hidden_size."""
    num_shared_experts: int = Field(strict=True, default=0, ge=0)
    """Experts every token passes through besides its top-k, each moe_ffn_hidden_size wide
    (DeepSeek-V3 and Llama 4: 1)."""
    first_dense_layers: int = Field(strict=True, default=0, ge=0)
    """Leading blocks with a dense MLP of ffn_hidden_size (DeepSeek-V3 ``first_k_dense_replace``: 3)."""
    moe_layer_interval: int = Field(strict=True, default=1, ge=1)
    """After the leading dense blocks every n-th block is MoE and the others dense: ⌊(l − dense)/n⌋ MoE
    blocks (Llama 4 Maverick ``interleave_moe_layer_step`` 2: blocks 1, 3, 5, ...)."""
    kv_channels: int | None = Field(strict=True, default=None, ge=1)
    """Width of one attention head (Megatron ``--kv-channels``, HF ``head_dim``); None = hidden_size /
    num_heads. Qwen3 and gpt-oss use a wider query (num_heads × kv_channels ≠ hidden_size); with MLA it
    is the non-rotary query/key head width (DeepSeek ``qk_nope_head_dim``)."""
    q_lora_rank: int | None = Field(strict=True, default=None, ge=1)
    """MLA: rank of the low-rank query projection (None = a full h × a·d query projection)."""
    kv_lora_rank: int | None = Field(strict=True, default=None, ge=1)
    """MLA: rank of the compressed key/value latent; set = multi-latent attention (DeepSeek-V2/V3)."""
    qk_rope_head_dim: int = Field(strict=True, default=0, ge=0)
    """MLA: width of the decoupled rotary part of each query/key head (DeepSeek-V3: 64)."""
    v_head_dim: int | None = Field(strict=True, default=None, ge=1)
    """Width of one value head (MLA; DeepSeek-V3: 128); None = kv_channels."""
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
    qk_layernorm: bool = False
    """A norm over each query and each key head before RoPE (Qwen3's ``q_norm``/``k_norm``, OLMo 2, Gemma 3; Megatron
    ``--qk-layernorm``): memory-bound work on a·d + g·d elements per token and the norms' saved inputs
    (:attr:`qk_norm_width`). Multi-latent attention's own latent norms are counted by :mod:`.mla_memory` instead."""
    attention_window: int | None = Field(strict=True, default=None, ge=1)
    """Tokens a query sees in the locally attending blocks: the last ``attention_window`` (a sliding window:
    Mistral 7B, gpt-oss, Gemma) or those of its own chunk of that length (``attention_chunked``: Llama 4); None:
    every block attends to the whole causal prefix."""
    attention_chunked: bool = False
    """The local blocks attend within fixed chunks of ``attention_window`` tokens rather than a sliding window."""
    local_attention_fraction: float = Field(default=0.0, ge=0.0, le=1.0)
    """Share of the blocks that attend locally (gpt-oss 1/2, Llama 4 3/4, Gemma 3 5/6, Mistral 7B all)."""

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
        if self.kv_channels is None and self.hidden_size % self.num_heads:
            raise WorkloadError(
                f"model {self.name}: hidden_size {self.hidden_size} is not a multiple of num_heads "
                f"{self.num_heads}; pick heads that divide the hidden size (or give kv_channels)"
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
        if (self.attention_window is None) != (self.local_attention_fraction == 0.0):
            raise WorkloadError(f"model {self.name}: attention_window and local_attention_fraction go together; give "
                                "both (the window in tokens and the share of blocks that use it) or neither")
        self._check_moe()
        self._check_mla()
        return self

    def _check_moe(self) -> None:
        moe_only = {"moe_ffn_hidden_size": self.moe_ffn_hidden_size, "num_shared_experts": self.num_shared_experts,
                    "first_dense_layers": self.first_dense_layers, "moe_layer_interval": self.moe_layer_interval - 1}
        if not self.is_moe:
            given = [k for k, v in moe_only.items() if v]
            if given:
                raise WorkloadError(f"model {self.name}: {', '.join(given)} only apply to a mixture of experts; "
                                    f"set num_experts > 1 or drop them")
            return
        if self.num_moe_layers < 1:
            raise WorkloadError(
                f"model {self.name}: no MoE block left (num_layers {self.num_layers}, first_dense_layers "
                f"{self.first_dense_layers}, moe_layer_interval {self.moe_layer_interval}); lower first_dense_layers "
                f"or moe_layer_interval"
            )

    def _check_mla(self) -> None:
        if self.kv_lora_rank is None:
            given = [k for k in ("q_lora_rank", "v_head_dim") if getattr(self, k) is not None]
            given += ["qk_rope_head_dim"] if self.qk_rope_head_dim else []
            if given:
                raise WorkloadError(f"model {self.name}: {', '.join(given)} only apply to multi-latent attention; "
                                    f"give kv_lora_rank too or drop them")
            return
        if self.num_kv_heads != self.num_heads:
            raise WorkloadError(
                f"model {self.name}: multi-latent attention has one key/value head per query head, got "
                f"num_kv_heads {self.num_kv_heads} ≠ num_heads {self.num_heads}; drop num_kv_heads"
            )

    # ------------------------------------------------------------------ derived sizes

    @property
    def head_dim(self) -> int:
        """Width of one attention head: kv_channels, else h / a."""
        return self.kv_channels if self.kv_channels is not None else self.hidden_size // self.num_heads

    @property
    def is_mla(self) -> bool:
        """Multi-latent attention (kv_lora_rank given)."""
        return self.kv_lora_rank is not None

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head in the scores: head_dim plus MLA's rotary part."""
        return self.head_dim + self.qk_rope_head_dim

    @property
    def value_head_dim(self) -> int:
        """Width of one value head: v_head_dim, else head_dim."""
        return self.v_head_dim if self.v_head_dim is not None else self.head_dim

    @property
    def query_dim(self) -> int:
        """Width of the query per token, a · qk_head_dim (= h for plain multi-head attention)."""
        return self.num_heads * self.qk_head_dim

    @property
    def attention_out_dim(self) -> int:
        """Width of the attention output fed to the output projection: a · value_head_dim."""
        return self.num_heads * self.value_head_dim

    @property
    def qk_norm_width(self) -> float:
        """Elements per token the query/key head norms read (:attr:`qk_layernorm`): a·d + g·d, 0 without them (or
        with MLA)."""
        if not self.qk_layernorm or self.is_mla:
            return 0.0
        return float(self.query_dim + self.num_kv_heads * self.qk_head_dim)

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
    def attention_input_weights(self) -> int:
        """Matmul weights from the block input to Q, K, V (the chain of low-rank ones with MLA)."""
        h, a = self.hidden_size, self.num_heads
        if not self.is_mla:
            return h * (self.query_dim + 2 * self.kv_dim)
        rank = self.kv_lora_rank or 0
        q = (self.q_lora_rank * (h + self.query_dim) if self.q_lora_rank is not None else h * self.query_dim)
        kv = rank * (h + a * (self.head_dim + self.value_head_dim)) + h * self.qk_rope_head_dim
        return q + kv

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections of one block (with biases when ``bias``; MLA adds its two
        latent norms, Megatron-Core's ``self_attn_term``)."""
        h, kv = self.hidden_size, self.kv_dim
        weights = self.attention_input_weights + self.attention_out_dim * h
        biases = (self.query_dim + 2 * kv + h) if self.bias else 0
        norm_width = 2 if self.norm == "layernorm" else 1
        latent_norms = norm_width * ((self.q_lora_rank or 0) + (self.kv_lora_rank or 0))
        return weights + biases + latent_norms

    @property
    def expert_ffn_hidden_size(self) -> int:
        """Inner width of one expert: moe_ffn_hidden_size, else ffn_hidden_size."""
        return self.moe_ffn_hidden_size if self.moe_ffn_hidden_size is not None else self.ffn_hidden_size

    def _mlp_params(self, ffn: int) -> int:
        h = self.hidden_size
        biases = ((2 if self.gated_mlp else 1) * ffn + h) if self.bias else 0
        return self.mlp_matrices * h * ffn + biases

    @property
    def expert_params(self) -> int:
        """One expert (routed or shared): 2 or 3 matrices of h × f_expert, plus biases."""
        return self._mlp_params(self.expert_ffn_hidden_size)

    @property
    def dense_mlp_params(self) -> int:
        """The MLP of a dense block: 2 or 3 matrices of h × f, plus biases."""
        return self._mlp_params(self.ffn_hidden_size)

    @property
    def router_params(self) -> int:
        """Router of one MoE block: h × E (+ E biases when ``bias``, gpt-oss); 0 when dense."""
        return (self.hidden_size + (1 if self.bias else 0)) * self.num_experts if self.is_moe else 0

    @property
    def num_moe_layers(self) -> int:
        """MoE blocks: ⌊(l − first_dense_layers) / moe_layer_interval⌋ (0 when dense)."""
        return (self.num_layers - self.first_dense_layers) // self.moe_layer_interval if self.is_moe else 0

    @property
    def num_dense_layers(self) -> int:
        """Blocks with a dense MLP: l − num_moe_layers."""
        return self.num_layers - self.num_moe_layers

    @property
    def tp_mlp_share(self) -> float:
        """Share of the l blocks whose MLP runs on the attention's tensor-parallel group (1 when dense): dense
        blocks, and MoE blocks with shared experts. Megatron-Core @d98e8a6: a shared expert is a TP MLP that
        all-gathers its input and reduce-scatters its output over the TP group (``moe/shared_experts.py``), while
        the routed experts run on the expert-TP group (``moe/token_dispatcher.py``: ``tp_group = expt_tp``; the etp
        collectives are priced with the dispatch, :mod:`commmodel.step.experts`), so a routed-only MoE block adds
        no TP collective around its MLP."""
        if not self.is_moe or self.num_shared_experts > 0:
            return 1.0
        return self.num_dense_layers / self.num_layers

    @property
    def mlp_params(self) -> int:
        """The MLP of an MoE block: routed and shared experts plus the router (the dense MLP when dense)."""
        if not self.is_moe:
            return self.dense_mlp_params
        return (self.num_experts + self.num_shared_experts) * self.expert_params + self.router_params

    @property
    def routed_expert_params_per_layer(self) -> float:
        """Routed-expert parameters per block averaged over the l blocks: MoE blocks × E × expert / l."""
        return self.num_moe_layers * self.num_experts * self.expert_params / self.num_layers

    @property
    def blocks_params(self) -> int:
        """All l blocks: dense ones (attention, dense MLP, two norms) and MoE ones (attention, experts,
        router, two norms)."""
        shared = self.attention_params + 2 * self.norm_params
        dense = self.num_dense_layers * (shared + self.dense_mlp_params)
        return dense + self.num_moe_layers * (shared + self.mlp_params) if self.is_moe else dense

    @property
    def layer_params(self) -> float:
        """Parameters of one block averaged over the l blocks (exact when all blocks are alike)."""
        return self.blocks_params / self.num_layers

    @property
    def active_ffn_width(self) -> float:
        """MLP inner width a token passes through per block, averaged over the l blocks:
        (dense blocks · f + MoE blocks · (top-k + shared) · f_expert) / l. Model FLOPs and activations
        of the MLP scale with it (k · f for Mixtral, f for a dense model)."""
        routed = (self.experts_per_token + self.num_shared_experts) * self.expert_ffn_hidden_size
        return (self.num_dense_layers * self.ffn_hidden_size + self.num_moe_layers * routed) / self.num_layers

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
        """Exact parameter count: the l blocks + embeddings + final norm (+ untied output head)."""
        return self.blocks_params + self.embedding_params + self.output_params

    @property
    def num_active_params(self) -> int:
        """Parameters a token touches: only experts_per_token of the routed experts in each MoE block
        (= num_params when dense); embeddings and the output head counted."""
        inactive = (self.num_experts - self.experts_per_token) * self.expert_params
        return self.num_params - self.num_moe_layers * inactive

    def describe(self) -> str:
        """One line: name, size and shape."""
        from commmodel.units import format_count

        moe = ""
        if self.is_moe:
            shared = f" + {self.num_shared_experts} shared" if self.num_shared_experts else ""
            moe = (f", {self.num_experts} experts top-{self.experts_per_token}{shared} in {self.num_moe_layers} "
                   f"of {self.num_layers} layers, {format_count(self.num_active_params)} active (embeddings included)")
        gqa = f", {self.num_kv_heads} kv-heads" if self.num_kv_heads != self.num_heads else ""
        local = (f", {'chunked' if self.attention_chunked else 'sliding-window'} attention of {self.attention_window} "
                 f"tokens in {self.local_attention_fraction:.0%} of blocks" if self.attention_window else "")
        return (
            f"{self.name}: {format_count(self.num_params)} params; {self.num_layers} layers, hidden "
            f"{self.hidden_size}, {self.num_heads} heads{gqa}, ffn {self.ffn_hidden_size}, vocab "
            f"{self.vocab_size}, seq {self.seq_len}{moe}{local}"
        )

