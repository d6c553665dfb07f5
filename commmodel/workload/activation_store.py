"""Megatron-Core's ``activation_func_fp8_input_store`` (a TransformerConfig field with no Megatron-LM flag): the MLP
activation keeps its input, the fc1 output, in FP8 for its backward instead of the 16-bit tensor (``StepOptions.
activation_fp8_input_store``; off by default in every stack). The one owner of the bytes per element of MLP width
the activation keeps of its input, and of the cast's HBM traffic.

Sources, NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553 ``megatron/core/``:

* ``transformer/transformer_config.py`` ``activation_func_fp8_input_store`` ("Store the input of MLP activation
  function in FP8 for backprop to save memory. The stored input is casted back to the original precision before
  backprop computation") and ``__post_init__``: "Storing activation input in FP8 is supported only for SwiGLU"
  (``activation_func`` silu with ``gated_linear_unit``);
* ``fusions/fused_bias_swiglu.py`` ``SwiGLUFunction`` / ``BiasSwiGLUFunction`` / ``WeightedSwiGLUFunction``:
  ``input_for_backward = input.to(torch.float8_e4m3fn)``, saved by ``ctx.save_for_backward``, and in the backward
  ``input.to(ctx.ori_input_dtype)``: a plain cast, no scale, so 1 byte per element of the 2·f-wide gate-and-up
  input (:data:`FP8_STORE_BYTES`); one cast kernel forward (read e, write 1) and one back (read 1, write e);
* ``transformer/mlp.py`` (dense MLP), ``moe/shared_experts.py`` and ``moe/experts.py`` (``TEGroupedMLP``: routed
  experts, ``weighted_bias_swiglu_impl`` with the routing probabilities) pass the flag on the fused-SwiGLU path
  (``bias_activation_fusion``, Megatron's default).

With ``--recompute-modules moe_act`` the routed experts' activation runs under ``CheckpointWithoutOutput``
(tensor_parallel/random.py: the forward under ``torch.no_grad()``, the checkpoint keeping its input, the 16-bit
fc1 output): the FP8 copy is then made only in the recompute and the stored routed activation input stays 16-bit
(:func:`commmodel.workload.recompute_modules.dropped_bytes_per_token` gives that back). The dense and shared-expert
activations keep the FP8 copy.
"""

from __future__ import annotations

from commmodel.errors import WorkloadError
from commmodel.workload.model import TransformerModel

FP8_STORE_BYTES = 1.0
"""Bytes per element of the stored copy: ``torch.float8_e4m3fn`` without a scale (fused_bias_swiglu.py @d98e8a6)."""


def check_activation_store(model: TransformerModel, fp8_input_store: bool) -> None:
    """Megatron-Core's rule: the FP8 input store only with a SwiGLU MLP (gated, silu); a :class:`WorkloadError`,
    one line, otherwise. The model has no activation field: a gated MLP is taken as SwiGLU (every gated preset is)."""
    if fp8_input_store and not model.gated_mlp:
        raise WorkloadError(f"activation_fp8_input_store with {model.name}'s ungated MLP: Megatron-Core stores the "
                            "activation input in FP8 only for SwiGLU (transformer_config.py @d98e8a6); drop "
                            "--activation-fp8-input-store")


def activation_input_bytes(model: TransformerModel, fp8_input_store: bool) -> float:
    """Bytes per element of MLP width that the activation keeps of its input, the fc1 output(s): (2 gated | 1)·e,
    or 2·:data:`FP8_STORE_BYTES` with the FP8 input store (SwiGLU: gate and up)."""
    if fp8_input_store:
        check_activation_store(model, fp8_input_store)
        return 2 * FP8_STORE_BYTES
    return (2 if model.gated_mlp else 1) * model.dtype_bytes


def store_cast_bytes(model: TransformerModel, fp8_input_store: bool) -> tuple[float, float]:
    """(forward, backward) HBM bytes per element of MLP width of the store's casts: the forward's
    ``input.to(float8_e4m3fn)`` reads e and writes 1 over the 2·f-wide input, the backward's cast back reads 1 and
    writes e: 2·(e + 1) each; (0, 0) without the store."""
    if not fp8_input_store:
        return 0.0, 0.0
    check_activation_store(model, fp8_input_store)
    per_element = 2 * (model.dtype_bytes + FP8_STORE_BYTES)
    return per_element, per_element
