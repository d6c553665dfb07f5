"""The low-precision recipe a stack runs, per block: which library casts (Transformer Engine or torchao, by the
stack's ``elementwise``), what its casts move through HBM per micro-batch, and what the block's linears and MLP
activation keep of their inputs for the backward (the activation inventory's
:class:`~commmodel.workload.saved_inputs.SavedInputs`). The recipes' per-element facts live in
:mod:`commmodel.step.precision`; the compute model (:mod:`commmodel.step.compute`) prices these bytes at HBM speed.
"""

import numpy as np

from commmodel.hardware.models import System
from commmodel.step.precision import (is_low_precision, quantisation_bytes, quantisation_recipe, saved_input_bytes,
                                      saves_original_projection_input, with_fp8_params)
from commmodel.workload import activation_store
from commmodel.workload.flops import layer_gemms
from commmodel.workload.model import TransformerModel
from commmodel.workload.saved_inputs import SavedInputs


QUANTISER_LIBRARY: dict[str, str] = {"fused": "te", "compiled": "torchao", "eager": "torchao",
                                     "eager-fused-rmsnorm": "torchao"}
"""Which library casts to low precision under each ``elementwise``: the fused-kernel stacks (Megatron-Core, NeMo,
llm-foundry) use Transformer Engine; torchtitan (compiled or eager) uses torchao float8 / MX."""


def quantised_elements(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray, ep: np.ndarray | int = 1,
                       etp: np.ndarray | int = 1) -> tuple:
    """(X, W, dY) elements of one block's low-precision GEMM operands on one GPU, averaged over the l blocks.

    X = FLOPs/(2n) and dY = FLOPs/(2k) per linear (every routed token copy is cast, top-k of them per token);
    W: QKV and projection k·n, the MLP's weights on the GPU: dense blocks' f/tp, MoE blocks' E/ep routed experts of
    f_expert/etp and the shared experts of f_expert/tp. The attention core and the router stay 16-bit (torchtitan
    filters ``router.gate``; Megatron-Core's router is not a TE linear)."""
    x = dy = w = 0.0
    for g in layer_gemms(model, micro_batch, tp, ep, etp):
        if g.attention_core or g.name == "router":
            continue
        x, dy = x + g.flops / (2.0 * g.n), dy + g.flops / (2.0 * g.k)
        if g.name in ("qkv", "proj"):
            w = w + g.k * g.n
    t, h = np.asarray(tp, dtype=float), float(model.hidden_size)
    matrices = float(model.mlp_matrices)
    dense_w = model.num_dense_layers * matrices * h * model.ffn_hidden_size / t
    routed = model.num_experts / np.asarray(ep, dtype=float) / np.asarray(etp, dtype=float)
    moe_w = model.num_moe_layers * matrices * h * model.expert_ffn_hidden_size * (routed + model.num_shared_experts / t)
    return x, w + (dense_w + moe_w) / model.num_layers, dy


def stack_recipe(model: TransformerModel, elementwise: str) -> str | None:
    """The low-precision recipe (:func:`commmodel.step.precision.quantisation_recipe`) the stack's library runs for
    the model's dtype, the library following the stack's ``elementwise`` (:data:`QUANTISER_LIBRARY`); None in 16-bit
    or fp32 training. One owner for the cast bytes, the kept linear inputs, Megatron's recompute-module rule and the
    precision-aware optimizer's master copy."""
    if not is_low_precision(model.dtype):
        return None
    return quantisation_recipe(model.dtype, QUANTISER_LIBRARY.get(elementwise, "te"))


def block_store_cast_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray,
                           fp8_input_store: bool) -> tuple:
    """(forward, backward) HBM bytes of one block's FP8 activation-input store casts in one micro-batch: b·s tokens
    × the active MLP width on the GPU (f/tp, as :func:`~commmodel.workload.flops.layer_elementwise_bytes`' activation
    term) × :func:`commmodel.workload.activation_store.store_cast_bytes`; (0, 0) without the store. The cast runs in
    the forward even under moe_act's no-grad checkpoint, so it is priced whatever the recompute."""
    if not fp8_input_store:
        return 0.0, 0.0
    fwd, bwd = activation_store.store_cast_bytes(model, fp8_input_store)
    width = np.asarray(micro_batch, dtype=float) * model.seq_len * model.active_ffn_width / np.asarray(tp, dtype=float)
    return fwd * width, bwd * width


def block_cast_bytes(model: TransformerModel, system: System, micro_batch: np.ndarray, tp: np.ndarray,
                     ep: np.ndarray | int, etp: np.ndarray | int, elementwise: str,
                     fp8_params: bool = False) -> tuple:
    """(forward, backward) HBM bytes of one block's casts to a low-precision dtype in one micro-batch:
    :func:`quantised_elements` × :func:`commmodel.step.precision.quantisation_bytes` of the recipe the stack's library
    runs (:data:`QUANTISER_LIBRARY`), with FP8 weights (``fp8_params``) as
    :func:`commmodel.step.precision.with_fp8_params`; (0, 0) for 16-bit training. Weights are cast every micro-batch
    (torchao, FSDP re-gathers; Megatron-Core's TE caches them across micro-batches, ``is_first_microbatch``: an
    overcount there)."""
    recipe = stack_recipe(model, elementwise)
    if recipe is None:
        return 0.0, 0.0
    q = quantisation_bytes(recipe, system.gpu.sm_version())
    q = with_fp8_params(q, recipe, system.gpu.sm_version()) if fp8_params else q
    x, w, dy = quantised_elements(model, micro_batch, tp, ep, etp)
    forward = q.activation_forward * x + q.weight_forward * w
    return forward, q.activation_backward * x + q.weight_backward * w + q.grad_output_backward * dy


def saved_inputs(model: TransformerModel, system: System, elementwise: str,
                 activation_fp8_input_store: bool = False) -> SavedInputs:
    """What the block's linears and MLP activation keep of their inputs (the activation inventory's
    :class:`~commmodel.workload.saved_inputs.SavedInputs`) under the recipe of the stack's library
    (:data:`QUANTISER_LIBRARY`): each linear the training dtype's bytes, or what the recipe keeps
    (:func:`commmodel.step.precision.saved_input_bytes`); the attention projection no copy of its own where the
    stack saves its original input (:func:`commmodel.step.precision.saves_original_projection_input`); the
    activation's input at the FP8 store's bytes where ``activation_fp8_input_store``."""
    recipe = stack_recipe(model, elementwise)
    linear = None if recipe is None else saved_input_bytes(recipe, model.dtype, system.gpu.sm_version())
    store = activation_store.activation_input_bytes(model, True) if activation_fp8_input_store else None
    return SavedInputs(linear, store, projection_copy=not saves_original_projection_input(recipe),
                       elementwise=elementwise)
