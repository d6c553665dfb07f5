"""Megatron-Core's selective recompute modules (``--recompute-granularity selective --recompute-modules ...``): what
each module drops from the stored activations and what its backward does again, for layout ``recompute: selective``
(``StepOptions.recompute_modules``; Megatron's default, ``("core_attn",)``, is Korthikanti's selective recompute).

Sources, NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553 ``megatron/core/transformer/``:

* ``transformer_config.py`` ``recompute_modules`` (names; default ``["core_attn"]``; "moe_act", "layernorm",
  "mla_up_proj" use output-discarding checkpointing, "core_attn", "mlp", "moe", "shared_experts" normal
  checkpointing) and ``__post_init__``'s checks (unknown names; moe_act needs grouped GEMM experts; mla_up_proj needs
  multi-latent attention; FP8 delayed scaling refuses moe_act and layernorm);
* ``multi_latent_attention.py`` (``recompute_up_proj``): "mla_up_proj" runs the up projections, RoPE and the
  concatenations under ``CheckpointWithoutOutput`` and frees Q, K, V after the attention core (:mod:`.mla_memory`);
* ``transformer_layer.py``: "layernorm" checkpoints ``input_layernorm`` and ``pre_mlp_layernorm`` without their
  output (the norm outputs are discarded and rebuilt from the kept norm inputs before the consumers' backward);
  "mlp" checkpoints the MLP of dense blocks only (``if not self.is_moe_layer``);
* ``moe/experts.py`` (``activation_recompute``): "moe_act" runs the grouped experts' activation function under
  ``CheckpointWithoutOutput`` and discards its output after ``linear_fc2`` (fc2's saved input) has run; fc1's output,
  the checkpoint's input, stays;
* ``moe/moe_layer.py``: "moe" checkpoints the whole MoE layer (:mod:`.moe_recompute`), "shared_experts" the shared
  experts' MLP.

Per module, in the terms of the inventory (:func:`commmodel.workload.memory.linear_layer_bytes_per_token`; e the
training dtype's bytes, i what a linear keeps of its input, widths averaged over the l blocks as the inventory does):

==============  =====================================================  ==================================================
module          stored bytes per token and block it drops              forward work its backward redoes
==============  =====================================================  ==================================================
core_attn       the unfused attention's scores (0 with FlashAttention)  the attention core (as Korthikanti's selective)
layernorm       the two norm outputs, 2·i·h (replicated; MLA under a   the two norms' HBM bytes, 2·2e·h (replicated)
                narrow recipe 3·i·h: two down-projection casts)
moe_act         the routed activation output, i·w_routed (split; with  the activation's HBM bytes, (3e | 2e)·w_routed
                the FP8 input store less (2e − 2)·w_routed, the 16-bit
                input its checkpoint keeps)
mlp             dense MLP fc1 output(s) and activation output,         the dense share of the fc1 and fc2 GEMMs
                (a + i)·w_dense (split; a = (2 | 1)·e, or 2 with the
                FP8 input store, :mod:`.activation_store`)
shared_experts  the same over w_shared                                 the shared share of the fc1 and fc2 GEMMs
moe             :func:`.moe_recompute.dropped_bytes_per_token`          :func:`.moe_recompute.recomputed_share`, and the
                (routed and shared experts)                            dispatch and combine once more
mla_up_proj     Q, K, V e·(q + k + v) (split); the normed latents       the up projections' share of the qkv GEMM
                less the kept k rope part, i·(r_q + r_kv) − e·d_r      (:func:`.mla_memory.up_proj_gemm_share`) and
                (replicated; :func:`.mla_memory.up_proj_dropped_        the RoPE bytes, 2e·(q + kv) (split), in two
                bytes_per_token`)                                      kernels (Megatron's fused MLA RoPE, q and kv)
==============  =====================================================  ==================================================

w_routed = MoE blocks·k·f_expert/l, w_shared = MoE blocks·shared·f_expert/l, w_dense = dense blocks·f/l. Where
"moe" is listed it covers moe_act and shared_experts (both lie inside the checkpointed layer): they add nothing.
Approximations: mlp, shared_experts and moe redo their GEMMs only (their activation's HBM pass is not repeated,
as :mod:`.moe_recompute` already states); layernorm's recompute under a low-precision recipe re-quantises the
norm output (not priced); mla_up_proj's latent RMSNorms (fused into the up projections) are not priced, as the
forward's elementwise count (:func:`commmodel.workload.flops.layer_elementwise_bytes`) has no term for them either.
The gated-delta-net / hyper-connection modules are refused: the inventory has no account of those layers.
"""

from __future__ import annotations

from commmodel.errors import WorkloadError
from commmodel.workload import activation_store, mla_memory, moe_recompute
from commmodel.workload.model import TransformerModel
from commmodel.workload.saved_inputs import SavedInputs

RECOMPUTE_MODULES: tuple[str, ...] = ("core_attn", "layernorm", "mlp", "moe_act", "shared_experts", "moe",
                                      "mla_up_proj")
"""Every accepted name (Megatron-Core ``--recompute-modules`` names this model prices)."""

DEFAULT_RECOMPUTE_MODULES: tuple[str, ...] = ("core_attn",)
"""Megatron-Core's default (transformer_config.py @d98e8a6: ``self.recompute_modules = ["core_attn"]``)."""


def is_default(modules: tuple[str, ...]) -> bool:
    """Whether ``modules`` is Megatron's default (:data:`DEFAULT_RECOMPUTE_MODULES`), Korthikanti's selective recompute
    that the activation inventory and the compute model price without the module tables."""
    return tuple(modules) == DEFAULT_RECOMPUTE_MODULES

UNMODELLED_MODULES = frozenset({"gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc"})
"""Megatron-Core names refused here (module docstring)."""

MOE_ONLY_MODULES = frozenset({"moe_act", "shared_experts", "moe"})
"""Modules that exist only in MoE blocks."""


def check_recompute_modules(modules: tuple[str, ...], model: TransformerModel | None = None,
                            fp8_delayed: bool = False) -> None:
    """Refuse unknown or unmodelled names, MoE modules on a dense model, shared_experts without shared experts,
    mla_up_proj without multi-latent attention, and moe_act or layernorm under FP8 delayed scaling (Megatron-Core's
    rules): a :class:`WorkloadError`, one line."""
    unmodelled = [m for m in modules if m in UNMODELLED_MODULES]
    if unmodelled:
        raise WorkloadError(f"recompute_modules {', '.join(unmodelled)}: not modelled (the activation inventory has no "
                            f"account of their tensors); choose from {', '.join(RECOMPUTE_MODULES)}")
    unknown = [m for m in modules if m not in RECOMPUTE_MODULES]
    if unknown:
        raise WorkloadError(f"recompute_modules {', '.join(unknown)} unknown; choose from "
                            f"{', '.join(RECOMPUTE_MODULES)} (Megatron-Core --recompute-modules names)")
    if model is None:
        return
    moe_only = sorted(MOE_ONLY_MODULES & set(modules))
    if moe_only and not model.is_moe:
        raise WorkloadError(f"recompute_modules {', '.join(moe_only)} exist only in MoE blocks and {model.name} is "
                            "dense; drop them")
    if "mla_up_proj" in modules and not model.is_mla:
        raise WorkloadError(f"recompute_modules mla_up_proj: {model.name} has no multi-latent attention (no "
                            "kv_lora_rank; Megatron-Core: only supported with multi_latent_attention); drop it")
    if "shared_experts" in modules and model.num_shared_experts == 0:
        raise WorkloadError(f"recompute_modules shared_experts: {model.name} has no shared experts; drop it")
    narrow = sorted({"moe_act", "layernorm"} & set(modules))
    if narrow and fp8_delayed:
        raise WorkloadError(f"recompute_modules {', '.join(narrow)} with FP8 delayed scaling: Megatron-Core refuses "
                            "it (transformer_config.py); use a current-scaling recipe or drop them")


def effective_modules(modules: tuple[str, ...]) -> frozenset[str]:
    """The modules that act: "moe" absorbs moe_act and shared_experts (they run inside its checkpoint)."""
    names = frozenset(modules)
    return names - {"moe_act", "shared_experts"} if "moe" in names else names


def mlp_widths(model: TransformerModel) -> dict[str, float]:
    """Active MLP width per block averaged over the l blocks, by part: ``dense`` (dense blocks · f / l), ``routed``
    (MoE blocks · k · f_expert / l), ``shared`` (MoE blocks · shared · f_expert / l); they sum to
    :attr:`TransformerModel.active_ffn_width`."""
    if not model.is_moe:
        return {"dense": float(model.ffn_hidden_size), "routed": 0.0, "shared": 0.0}
    per_moe = model.num_moe_layers * model.expert_ffn_hidden_size / model.num_layers
    return {"dense": model.num_dense_layers * model.ffn_hidden_size / model.num_layers,
            "routed": model.experts_per_token * per_moe, "shared": model.num_shared_experts * per_moe}


def dropped_bytes_per_token(model: TransformerModel, modules: tuple[str, ...],
                            saved: SavedInputs = SavedInputs()) -> tuple[float, float]:
    """(replicated, split) stored bytes per token and block the modules drop beyond core_attn (module docstring's
    table; replicated stays whole over tp without sequence parallelism, split is divided by tp). layernorm drops
    what the linears keep of the two norm outputs (:func:`.mla_memory.attention_input_bytes_per_token` and fc1's
    i·h: under FP8/FP4 Megatron has them keep the discarded 16-bit output, ``set_for_recompute_input_layernorm``).
    ``saved`` (:class:`.SavedInputs`): i what a linear keeps of its input, a what the activation keeps of its input;
    with the FP8 input store (:mod:`.activation_store`) moe_act's checkpoint keeps the 16-bit fc1 output instead of
    the FP8 copy, so it gives back (a16 − a)·w_routed beside the output it drops."""
    names = effective_modules(modules)
    e, i, a = model.dtype_bytes, saved.linear(model), saved.activation(model)
    a16 = activation_store.activation_input_bytes(model, False)
    mlp_inner = a + i
    w = mlp_widths(model)
    replicated = 0.0
    if "layernorm" in names:
        replicated += mla_memory.attention_input_bytes_per_token(model, e, i) + i * model.hidden_size
    split = 0.0
    if "mla_up_proj" in names:
        up_replicated, up_split = mla_memory.up_proj_dropped_bytes_per_token(model, e, i)
        replicated, split = replicated + up_replicated, split + up_split
    if "moe_act" in names:
        split += (i - (a16 - a)) * w["routed"]
    if "mlp" in names:
        split += mlp_inner * w["dense"]
    if "shared_experts" in names:
        split += mlp_inner * w["shared"]
    if "moe" in names:
        split += moe_recompute.dropped_bytes_per_token(model, saved)
    return replicated, split


def recomputed_gemm_share(model: TransformerModel, modules: tuple[str, ...]) -> dict[str, float]:
    """Share of each per-block GEMM's forward work (``commmodel.workload.flops.layer_gemms`` names) the modules do
    again beyond core_attn: the dense and shared parts of fc1 and fc2 (mlp, shared_experts), the MoE layer's
    (moe, :func:`.moe_recompute.recomputed_share`), the up projections' part of qkv (mla_up_proj,
    :func:`.mla_memory.up_proj_gemm_share`)."""
    names = effective_modules(modules)
    w = mlp_widths(model)
    share: dict[str, float] = {}
    parts = [w[part] for part, module in (("dense", "mlp"), ("shared", "shared_experts")) if module in names]
    if parts:
        share = {"fc1": sum(parts) / model.active_ffn_width, "fc2": sum(parts) / model.active_ffn_width}
    if "mla_up_proj" in names:
        share["qkv"] = mla_memory.up_proj_gemm_share(model)
    if "moe" in names:
        for name, value in moe_recompute.recomputed_share(model).items():
            share[name] = share.get(name, 0.0) + value
    return share


def recomputed_elementwise_bytes_per_token(model: TransformerModel, modules: tuple[str, ...]) -> tuple[float, float]:
    """(replicated, split) HBM bytes per token and block of the memory-bound forward work the modules redo:
    layernorm's two norms (read + write, 2·2e·h; ``commmodel.workload.flops.layer_elementwise_bytes``' norm term),
    moe_act's activation over the routed width ((3e gated | 2e)·w_routed, its activation term) and mla_up_proj's
    RoPE (read + write 2e·(q + kv), its RoPE term)."""
    names = effective_modules(modules)
    e = model.dtype_bytes
    replicated = 2 * 2 * e * model.hidden_size if "layernorm" in names else 0.0
    split = (3 * e if model.gated_mlp else 2 * e) * mlp_widths(model)["routed"] if "moe_act" in names else 0.0
    if "mla_up_proj" in names and model.position_embedding == "rope":
        split += 2 * e * (model.query_dim + model.kv_dim)
    return replicated, split


def recomputed_kernels(modules: tuple[str, ...]) -> int:
    """Memory-bound kernels per block the modules launch again (each priced at one kernel overhead): layernorm's two
    norms, moe_act's activation, mla_up_proj's two fused RoPE kernels (``fused_apply_mla_rope_for_q`` / ``_for_kv``,
    multi_latent_attention.py @d98e8a6 with ``apply_rope_fusion``)."""
    names = effective_modules(modules)
    return 2 * ("layernorm" in names) + ("moe_act" in names) + 2 * ("mla_up_proj" in names)


def recomputes_dispatch(modules: tuple[str, ...]) -> bool:
    """Whether the modules redo the MoE token dispatch and combine (the "moe" module's checkpoint holds them)."""
    return "moe" in modules
