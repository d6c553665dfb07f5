"""What one block's linears and MLP activation keep of their inputs for the backward: the one record that the
activation inventory (:mod:`.memory`), the recompute modules (:mod:`.recompute_modules`, :mod:`.moe_recompute`)
and activation offloading (:mod:`.offload`) read, so that a precision recipe's rules live in one place
(the step layer builds it: :func:`commmodel.step.stack_precision.saved_inputs`).

No ``from __future__ import annotations`` here: NamedTuple fields are evaluated at import (start-up rule,
docs/architecture.md).
"""

from typing import NamedTuple

from commmodel.workload import activation_store
from commmodel.workload.model import TransformerModel


class SavedInputs(NamedTuple):
    """Bytes per element a block keeps of its linears' and its activation's inputs."""

    linear_bytes: float | None = None
    """What a linear keeps of its input for the weight gradient: None = the training dtype's bytes (16-bit
    training); under a low-precision recipe the narrow copy it keeps (:func:`commmodel.step.precision.saved_input_bytes`)."""
    activation_bytes: float | None = None
    """What the MLP activation keeps of its input (the fc1 output(s)) per element of MLP width: None = (2 gated |
    1)·e; Megatron-Core's FP8 input store: :func:`commmodel.workload.activation_store.activation_input_bytes`."""
    projection_copy: bool = True
    """Whether the attention projection keeps its own narrow copy of its input where ``linear_bytes`` is narrow
    (Transformer Engine's default, torchao's tensorwise ``input_fp8``). False where the stack saves the original
    input instead: Megatron-Core calls ``set_save_original_input(linear_proj)`` for FP8 recipes other than delayed
    and for FP4 (NVIDIA/Megatron-LM @d98e8a6 megatron/core/transformer/attention.py: "the output of the fused
    core_attn is saved by itself, and linear_proj also saves the quantized tensor of this output"), so only the
    16-bit output stays and the backward casts it again."""

    elementwise: str = "fused"
    """How the block's elementwise work runs (:data:`commmodel.workload.eager.ELEMENTWISE_KINDS`): op by op it keeps
    more than the fused inventory (:func:`commmodel.workload.eager.saved_extra_bytes_per_token`)."""

    def linear(self, model: TransformerModel) -> float:
        """i: what a linear keeps of its input, bytes per element."""
        return model.dtype_bytes if self.linear_bytes is None else self.linear_bytes

    def activation(self, model: TransformerModel) -> float:
        """a: what the activation keeps of its input, bytes per element of MLP width."""
        if self.activation_bytes is not None:
            return self.activation_bytes
        return activation_store.activation_input_bytes(model, False)

    def projection(self, model: TransformerModel, flash_attention: bool) -> float:
        """Bytes per element of the projection input (a·d_v wide) the block stores: e where the linear keeps the
        16-bit input (16-bit training, or the original saved); with a narrow copy, fused attention's own output e
        plus the copy i (FlashAttention keeps ``out`` for its backward), the copy alone after unfused attention
        (its context is read by no backward)."""
        e, i = model.dtype_bytes, self.linear(model)
        if i == e or not self.projection_copy:
            return e
        return e + i if flash_attention else i
