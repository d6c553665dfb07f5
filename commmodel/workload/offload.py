"""Megatron-Core's fine-grained activation offloading (``--fine-grained-activation-offloading --offload-modules
...``) as stored activation bytes that leave the GPU.

Sources, NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553:

* ``docs/user-guide/features/fine_grained_activation_offloading.md``: "Each module offloads its **input**
  activation to CPU during forward and reloads it before backward", a D2H copy on its own ``d2h_stream`` and an
  H2D copy on ``h2d_stream`` (the compute stream waits for the reload before the module's backward);
* ``megatron/core/transformer/transformer_config.py`` ``offload_modules`` (the names, "offload the input of" each)
  and its checks: ``attn_proj`` only together with ``core_attn``; no ``expert_fc1``/``moe_act`` under the ``moe``
  recompute module;
* ``megatron/core/pipeline_parallel/fine_grained_activation_offload.py``: ``post_warmup_callback`` sets the
  offload margin to the number of distinct group names and keeps the last group of each name on the GPU ("so that
  the reloading won't block the main stream"): one layer-micro-batch of every offloaded module stays;
  ``tensor_need_offloading_checker`` skips tensors under ``min_offloaded_tensor_size`` elements (default
  1024·1024, :data:`MIN_OFFLOADED_TENSOR_ELEMENTS`).

Each module maps to terms of the per-token inventory
(:func:`commmodel.workload.memory.linear_layer_bytes_per_token`; e the training dtype's bytes, i what a linear keeps
of its input): see :func:`module_tensors`. ``fused_group_mlp`` and ``gdp_qkv`` (Transformer Engine op fuser, gated
delta nets) are not modelled. ``activation_offload_fraction`` and ``delta_offload_bytes_across_pp_ranks`` are left at
their defaults (1.0, 0: every eligible group offloaded). The pinned host memory the copies need is not counted.
"""

from typing import Literal, NamedTuple

import numpy as np

from commmodel.errors import WorkloadError
from commmodel.workload import mla_memory, moe_recompute
from commmodel.workload.model import TransformerModel
from commmodel.workload.recompute_policies import RECOMPUTE_MOE, RECOMPUTE_NONE, RECOMPUTE_SELECTIVE
from commmodel.workload.saved_inputs import SavedInputs
from commmodel.workload.recompute_modules import mlp_widths

OffloadModule = Literal["attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"]
"""Megatron-Core's module names (``TransformerConfig.offload_modules``) this model prices."""

OFFLOAD_MODULES: tuple[str, ...] = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1",
                                    "moe_act")
"""Every accepted name, in a block's forward order."""

MOE_ONLY_MODULES = frozenset({"expert_fc1", "moe_act"})
"""Modules that exist only in MoE blocks (the docs' table: "MoE models only")."""

MIN_OFFLOADED_TENSOR_ELEMENTS = 1024 * 1024
"""Megatron-Core's ``min_offloaded_tensor_size`` default (elements): smaller saved tensors stay on the GPU
(fine_grained_activation_offload.py @d98e8a6 ``tensor_need_offloading_checker``)."""


class OffloadTensor(NamedTuple):
    """One saved tensor an offloaded module's group moves to the host."""

    elements_per_token: float
    """Elements per token and block before the tensor-parallel split (averaged over blocks for MoE-only tensors)."""
    bytes_per_element: float
    """Bytes of one stored element."""
    split: bool
    """Divided by tp (else replicated over tp without sequence parallelism, divided by tp with it)."""


def check_offload_modules(modules: tuple[str, ...], model: TransformerModel | None = None) -> None:
    """Refuse unknown names, ``attn_proj`` without ``core_attn`` and MoE-only modules on a dense model (Megatron's
    own rules, transformer_config.py @d98e8a6): a :class:`WorkloadError` naming the value and the fix."""
    unknown = [m for m in modules if m not in OFFLOAD_MODULES]
    if unknown:
        raise WorkloadError(f"offload_modules {', '.join(unknown)} unknown; choose from {', '.join(OFFLOAD_MODULES)} "
                            "(Megatron-Core --offload-modules names)")
    if "attn_proj" in modules and "core_attn" not in modules:
        raise WorkloadError("offload_modules attn_proj needs core_attn too (Megatron-Core: attn_proj's input is "
                            "core_attn's output, which core_attn's backward reads); add core_attn")
    moe_only = sorted(MOE_ONLY_MODULES & set(modules))
    if model is not None and moe_only and not model.is_moe:
        raise WorkloadError(f"offload_modules {', '.join(moe_only)} exist only in MoE blocks and {model.name} is "
                            "dense; drop them")


def module_tensors(model: TransformerModel, module: str, flash_attention: bool,
                   saved: SavedInputs = SavedInputs()) -> tuple[OffloadTensor, ...]:
    """The inventory's tensors that offloading ``module`` takes off the GPU (per token and block).

    * ``attn_norm``: the block input the attention norm keeps, e·h (one of the "two norm inputs");
    * ``qkv_linear``: the QKV linear's input (the norm output), i·h;
    * ``core_attn``: Q, K and V, e each (:func:`commmodel.workload.mla_memory.qkv_widths`);
    * ``attn_proj``: the projection input (e·a·d_v; where the linear keeps its narrow copy, :meth:`.SavedInputs.projection`,
      fused attention's own output beside it);
    * ``mlp_norm``: the pre-MLP norm's input, e·h (the other norm input);
    * ``moe_act``: the routed experts' fc1 output, the activation's input, (2 gated | 1)·e per unit of routed width
      (the grouped experts only, :func:`commmodel.workload.recompute_modules.mlp_widths`: Megatron's shared experts
      are a plain MLP with no ``moe_act`` group, experts.py);
    * ``expert_fc1``: the routed experts' fc1 input, the dispatched (permuted) copies of the routed tokens, i per
      element of :func:`commmodel.workload.moe_recompute.routed_input_width` (k·h per token in MoE blocks; Megatron
      offloads the 16-bit original there under a non-MX FP8 recipe, ``set_save_original_input(linear_fc1)``, priced
      at i here).
    """
    e = model.dtype_bytes
    i = saved.linear(model)
    h, o = float(model.hidden_size), float(model.attention_out_dim)
    if module in ("attn_norm", "mlp_norm"):
        return (OffloadTensor(h, e, False),)
    if module == "qkv_linear":
        return (OffloadTensor(h, i, False),)
    if module == "core_attn":
        return tuple(OffloadTensor(width, e, True) for width in mla_memory.qkv_widths(model))
    if module == "attn_proj":
        if saved.projection(model, flash_attention) == e:
            return (OffloadTensor(o, e, True),)
        return (OffloadTensor(o, e, True), OffloadTensor(o, i, True)) if flash_attention else (OffloadTensor(o, i, True),)
    if module == "moe_act":
        return (OffloadTensor((2 if model.gated_mlp else 1) * mlp_widths(model)["routed"], e, True),)
    return (OffloadTensor(moe_recompute.routed_input_width(model), i, True),)  # expert_fc1


OFFLOADABLE_RECOMPUTE_CODES = {"attention": (RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_MOE),
                               "moe": (RECOMPUTE_NONE, RECOMPUTE_SELECTIVE)}
"""Recompute policies (:mod:`commmodel.workload.recompute_policies` codes) under which a
module's saved input is stored and so can be offloaded: full recompute and op SAC keep none of these tensors; the
``moe`` recompute module drops the MoE layer's inner activations (Megatron refuses expert_fc1/moe_act with it)."""


def offloaded_bytes_per_layer(model: TransformerModel, modules: tuple[str, ...], micro_batch: np.ndarray,
                              tp: np.ndarray, sequence_parallel: np.ndarray, recompute: np.ndarray,
                              flash_attention: bool, saved: SavedInputs = SavedInputs()) -> np.ndarray:
    """Bytes of one block and micro-batch on one GPU that the offloaded ``modules`` move to the host: every tensor of
    :func:`module_tensors`, b·s tokens, /tp where split or sequence-parallel, a tensor under
    :data:`MIN_OFFLOADED_TENSOR_ELEMENTS` elements skipped, 0 under a recompute code that does not store it.
    ``modules`` are checked first (:func:`check_offload_modules`)."""
    check_offload_modules(modules, model)
    tokens = np.asarray(micro_batch, dtype=float) * model.seq_len
    t = np.asarray(tp, dtype=float)
    sp = np.asarray(sequence_parallel, dtype=bool)
    rc = np.asarray(recompute)
    total = np.zeros(np.broadcast_shapes(tokens.shape, t.shape, sp.shape, rc.shape))
    for module in modules:
        codes = OFFLOADABLE_RECOMPUTE_CODES["moe" if module in MOE_ONLY_MODULES else "attention"]
        stored = np.isin(rc, codes)
        for tensor in module_tensors(model, module, flash_attention, saved):
            elements = tokens * tensor.elements_per_token / np.where(sp | tensor.split, t, 1.0)
            kept = stored & (elements >= MIN_OFFLOADED_TENSOR_ELEMENTS)
            total = total + np.where(kept, elements * tensor.bytes_per_element, 0.0)
    return total


def freed_layers(in_flight_layers: np.ndarray) -> np.ndarray:
    """Layer-micro-batches whose offloaded tensors are off the GPU at the peak: all in flight but the one group of
    each module Megatron keeps as its offload margin (``post_warmup_callback``), max(n − 1, 0)."""
    return np.maximum(np.asarray(in_flight_layers, dtype=float) - 1.0, 0.0)
