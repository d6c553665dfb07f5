"""Megatron-Core's MoE-layer recompute (``--recompute-granularity selective --recompute-modules moe``) as a
recompute policy (layout ``recompute: moe``, code :data:`commmodel.workload.recompute_policies.RECOMPUTE_MOE`).

Source: NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553 ``megatron/core/transformer/
transformer_config.py`` (``recompute_modules``: '"moe": recompute the MoE layer', normal checkpointing) and
``megatron/core/transformer/moe/moe_layer.py`` (``moe_layer_recompute``: the whole MoE forward, router,
token dispatch, routed and shared experts and combine, runs under ``tensor_parallel.checkpoint`` from the
layer's input). So in every MoE block:

* stored: only the MoE layer's input (the pre-MLP norm output, which the block keeps anyway); the expert
  MLP's inner activations (the routed fc1 input, k·h per token, :func:`routed_input_width`; fc1 output(s),
  activation output: 3·f or 2·f per routed copy) are dropped;
* recomputed in the backward: the router and expert GEMMs once more, and the dispatch and combine
  all-to-alls once more (:func:`commmodel.step.experts.dispatch_count`);
* while one MoE layer's backward runs, its inner activations exist again (one layer's worth of working
  memory).

Attention, the dense first blocks and the norms are untouched. The MoE layer's memory-bound work (permute,
activation function) is not repeated in the recompute time (a small share beside its GEMMs; not modelled).
On a dense model the policy is refused (:mod:`commmodel.step.layout_rules`).
"""

from __future__ import annotations

from commmodel.workload.model import TransformerModel
from commmodel.workload.saved_inputs import SavedInputs



def moe_mlp_width(model: TransformerModel) -> float:
    """The part of :attr:`TransformerModel.active_ffn_width` that lies in MoE blocks, averaged over the l
    blocks: MoE blocks · (top-k + shared) · f_expert / l (0 for a dense model)."""
    if not model.is_moe:
        return 0.0
    routed = (model.experts_per_token + model.num_shared_experts) * model.expert_ffn_hidden_size
    return model.num_moe_layers * routed / model.num_layers


def routed_input_width(model: TransformerModel) -> float:
    """Elements per token of the routed experts' fc1 input averaged over the l blocks: MoE blocks · k · h / l (0 for
    a dense model). The dispatched, permuted token copies are the grouped fc1 GEMM's input, which it keeps for its
    weight gradient (Megatron-Core @d98e8a6 moe/experts.py: TE ``GroupedLinear`` saves its input, or its cast under a
    low-precision recipe; ``--offload-modules expert_fc1`` "offloads the input of" it, transformer_config.py)."""
    if not model.is_moe:
        return 0.0
    return model.num_moe_layers * model.experts_per_token * model.hidden_size / model.num_layers


def recomputed_share(model: TransformerModel) -> dict[str, float]:
    """Share of each per-block GEMM's forward work (``commmodel.workload.flops.layer_gemms`` names) that the
    MoE recompute does again: the MLP GEMMs' MoE part, and the router (whose GEMM already counts MoE blocks only)."""
    if not model.is_moe:
        return {}
    mlp = moe_mlp_width(model) / model.active_ffn_width
    return {"fc1": mlp, "fc2": mlp, "router": 1.0}


def dropped_bytes_per_token(model: TransformerModel, saved: SavedInputs = SavedInputs()) -> float:
    """Stored bytes per token and block (before the tensor-parallel split) the checkpoint drops: the expert MLP's
    inner activations, the fc1 output(s) the activation keeps, a ((2 gated | 1)·e, or less with the FP8 input
    store, :mod:`.activation_store`) and the activation output fc2 keeps, i (e, or a low-precision recipe's narrow
    copy), per unit of :func:`moe_mlp_width` (Korthikanti et al. 2022 §4's MLP terms with the routed width), and the
    routed fc1 input, i per element of :func:`routed_input_width`; a and i from ``saved`` (:class:`.SavedInputs`;
    the same split as ``commmodel.workload.memory.linear_layer_bytes_per_token``)."""
    i = saved.linear(model)
    return (saved.activation(model) + i) * moe_mlp_width(model) + i * routed_input_width(model)
