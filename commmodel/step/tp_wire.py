"""Bytes per element of each sequence-parallel TP collective under a low-precision recipe: the one owner of what the
TP all-gathers and reduce-scatters carry (:func:`commmodel.step.comm.tensor_parallel_requests` sizes them, the
assumption lines print :func:`tp_wire_line`).

With sequence parallelism a block's column-parallel linears (QKV, fc1) all-gather their input and its row-parallel
linears (proj, fc2) reduce-scatter their output; the backward all-gathers the row-parallel output gradient and
reduce-scatters the column-parallel input gradient (Korthikanti et al. 2022 §4.2.2). Per-tensor ("tensorwise") FP8
recipes cast the tensor BEFORE the all-gather and gather the 1-byte data; the scale is one fp32 number per tensor,
not gathered (below: it is computed from an amax all-reduced over the group, or kept per rank). What the GEMMs
write (the forward reduce-scatter of the row-parallel output, the backward's reduce-scatter of the input gradient)
stays 16-bit:

- torchao float8 tensorwise in torchtitan: ``apply_tp`` swaps in ``PrepareFloat8ModuleInput``,
  ``Float8ColwiseParallel`` and ``Float8RowwiseParallel`` when float8 is on and the recipe is not rowwise
  (pytorch/torchtitan torchtitan/models/llama3/parallelize_llama.py @820504e "For now, float8 all-gather with TP is
  only supported for tensorwise float8 scaling recipes. For rowwise recipes, we use regular TP and all-gather
  happens in high precision"; the same swap, float8 on, in torchtitan/parallelisms/parallelize_llama.py @9dec370).
  In pytorch/ao torchao/float8/float8_tensor_parallel.py (@eab345c, 2024-12-20; unchanged in substance @624304080,
  2025-06-13) ``PrepareFloat8ModuleInput._prepare_input_arg`` casts the Shard(1) input to e4m3
  (``hp_tensor_to_float8_dynamic``) and then redistributes it to Replicate, and torchao/float8/float8_ops.py
  ``allgather_fp8`` runs the functional all-gather on ``Float8Tensor._data`` (1 byte) with the scale unchanged.
  ``Float8RowwiseParallel._prepare_output_fn`` redistributes the bf16 GEMM output (reduce-scatter, 16-bit) and then
  applies ``NoopFwToFloat8BwDynamic``, whose backward casts the output gradient to float8 before autograd reaches
  the redistribute's backward: the output-gradient all-gather moves 1 byte too. The column-parallel input gradient
  (the sum of the wq/wk/wv or w1/w3 dgrads, bf16) is reduce-scattered in 16 bits.
- Transformer Engine delayed and current scaling (Megatron-Core's TELayerNormColumnParallelLinear / TERowParallel-
  Linear, sequence_parallel passed to TE): NVIDIA/TransformerEngine transformer_engine/pytorch/module/
  layernorm_linear.py @v1.12 writes the norm output as uint8 FP8 and ``gather_along_first_dim`` gathers it;
  @v2.4 (and TE_COMMIT @d0067d0) passes ``quantizer=input_quantizer`` and distributed.py ``_all_gather_fp8``
  quantises then gathers the FP8 data; its backward re-gathers the saved FP8 input with the quantizer (NCCL or
  ``ub_bulk_dgrad``). module/base.py ``grad_output_preprocess`` casts the row-parallel output gradient to FP8 and
  then gathers it (@v1.12 and @v2.4). With userbuffers overlap the all-gather buffers are FP8 ("AllGather buffers use
  fp8 when using fp8 recipe": ``initialize_ub`` ``fp8_buf = name in layers_all_gather_overlap`` @v2.4, the same
  rule @v1.12) and the reduce-scatter buffers 16-bit unless a user config asks otherwise.

Left 16-bit (no source read for a quantised gather at the stacks' versions, or the source gathers in high
precision): torchao rowwise (torchtitan's regular TP, above), torchao MX, TE blockwise (``force_hp_blockwise_ln_out_
gather`` @v2.4), TE MXFP8 and NVFP4 (not checked here). Without sequence parallelism the TP collectives are
all-reduces of GEMM outputs: 16-bit under every recipe. The per-cast amax all-reduce of a scalar (torchao's DTensor
amax, TE current scaling's amax reduction group) is not priced.
"""

from typing import NamedTuple

from commmodel.step.precision import NARROW_BYTES

QUANTISED_TP_GATHER_RECIPES: frozenset[str] = frozenset({"torchao-fp8-tensorwise", "te-fp8-delayed",
                                                          "te-fp8-current"})
"""Recipes whose sequence-parallel all-gathers (column-parallel input, its backward re-gather, row-parallel output
gradient) move the 1-byte FP8 data (module docstring for the sources)."""


class TpWireBytes(NamedTuple):
    """Bytes per element each sequence-parallel TP collective moves."""

    input_all_gather: float
    """The forward (and recompute) all-gather of a column-parallel linear's input, and the backward's re-gather of it
    (``StepOptions.tp_input_regather``: TE re-gathers the saved, already quantised shard)."""
    grad_all_gather: float
    """The backward all-gather of a row-parallel linear's output gradient."""
    reduce_scatter: float
    """The reduce-scatters of GEMM outputs, forward and backward (and the all-reduces without sequence
    parallelism)."""


def tp_wire_bytes(recipe: str | None, dtype_bytes: float) -> TpWireBytes:
    """Per-collective element size under the stack's ``recipe`` (:func:`commmodel.step.stack_precision.stack_recipe`;
    None in 16-bit training): the FP8 byte for the all-gathers of :data:`QUANTISED_TP_GATHER_RECIPES`, the training
    dtype's ``dtype_bytes`` otherwise."""
    gather = NARROW_BYTES["fp8"] if recipe in QUANTISED_TP_GATHER_RECIPES else dtype_bytes
    return TpWireBytes(input_all_gather=gather, grad_all_gather=gather, reduce_scatter=dtype_bytes)


def tp_wire_line(recipe: str | None) -> list[str]:
    """The assumption line of a recipe whose TP all-gathers move FP8, or none."""
    if recipe not in QUANTISED_TP_GATHER_RECIPES:
        return []
    torchao = recipe.startswith("torchao")
    where = ("torchao Float8ColwiseParallel / PrepareFloat8ModuleInput / Float8RowwiseParallel, torchtitan apply_tp"
             if torchao else "Transformer Engine gather_along_first_dim with the FP8 quantizer")
    gathers = "input, output gradient" if torchao else "input, its backward re-gather, output gradient"
    return [f"{recipe}: sequence-parallel TP all-gathers ({gathers}) move 1-byte FP8; reduce-scatters stay 16-bit "
            f"({where}; step/tp_wire.py)"]


__all__ = ["QUANTISED_TP_GATHER_RECIPES", "TpWireBytes", "tp_wire_bytes", "tp_wire_line"]
