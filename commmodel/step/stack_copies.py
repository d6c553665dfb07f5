"""Copies a training stack makes outside the model's kernels, in HBM (the breakdown term ``copies``): FSDP2's around
its collectives (``StepOptions.fsdp_copies``), DDP's gradient buckets (``grad_bucket_copy``) and autocast's casts of
fp32 weights and their gradients (``autocast_casts``).

**FSDP2.** Source: torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py (the torch 2.13.0 wheel's file; torch
2.11 on the lent H100 ran the same copies, its trace's ``fsdp::all_gather_copy_in``, ``split_with_sizes_copy`` and
``fsdp::chunk_cat``):

- before each all-gather, ``foreach_all_gather`` casts each fp32 shard to the parameter dtype (``all_gather_inputs``:
  reads 4, writes e per sharded element) and ``all_gather_copy_in`` copies the casts into the flat input
  (``torch._foreach_copy_``: e + e): (4 + 3e)/dp per parameter;
- after it, ``foreach_all_gather_copy_out`` splits the flat output into the unsharded parameters
  (``split_with_sizes_copy``: reads e, writes e per parameter, on the compute stream): 2e per gathered parameter;
- before each reduce-scatter, ``foreach_reduce`` concatenates the unsharded gradients into the reduce-dtype input
  (``torch._chunk_cat``: reads e, writes r per parameter): e + r.

With ``reshard_after_forward`` (ZeRO 3, torchtitan's default without PP) every block is gathered in its forward and
again in its backward, the root (embedding, final norm, output) once, and every gradient reduce-scattered once, per
micro-batch; ZeRO 2 gathers once per micro-batch; under ``torch.distributed.pipelining`` (``zero3_pp_unsharded``)
once per step. Checked on a lent H100 (benchmarks/one_gpu_step.py, 2026-11-27): rank 0 of a fake 8-rank group, the
collectives moving nothing, ran a 4-block Llama-3 8B-wide model's copy-out in 5.26 ms and its chunk_cat in 6.41 ms
per step, where these bytes at the model's 0.8 × 3.35 TB/s give 4.2 and 4.3 ms.
"""

import numpy as np

from commmodel.step.options import StepOptions
from commmodel.workload.model import TransformerModel

FP32_SHARD_BYTES = 4.0
"""FSDP2 keeps each shard in fp32 (torchtitan's mixed precision: fp32 parameters, bf16 gathers)."""


def fsdp_copy_bytes(model: TransformerModel, params: np.ndarray, zero: np.ndarray, pp: np.ndarray, tp: np.ndarray,
                    dp: np.ndarray, m: np.ndarray, wire_bytes: float, options: StepOptions,
                    once_per_step: np.ndarray) -> np.ndarray:
    """HBM bytes per step of FSDP2's copies on one GPU holding ``params`` unsharded parameters (arrays over
    layouts): the module docstring's bytes per gather and per reduce-scatter, times the gathers and reduce-scatters
    of a step (``m`` micro-batches; ``once_per_step`` where pipelining holds the gathered parameters). ``wire_bytes``:
    the gathered parameter dtype's bytes (e); the reduce dtype's are ``options.main_grad_bytes`` (r). Zero where the
    stack has no FSDP copies, below ZeRO 2 or at dp = 1 (FSDP2 skips the collectives). ``params`` are the dense
    ones (:func:`commmodel.workload.memory.dense_params_per_gpu`): a mixture of experts' routed experts under FSDP2
    are not counted (no measured or published FSDP2 MoE run to check them on)."""
    z = np.asarray(zero)
    d = np.asarray(dp, dtype=float)
    if not options.fsdp_copies:
        return np.zeros(np.broadcast(z, d, params).shape)
    e, r = wire_bytes, options.main_grad_bytes
    per_gather = 2.0 * e + (FP32_SHARD_BYTES + 3.0 * e) / d
    # the root's share of the GPU's parameters (vocabulary-parallel embedding and head over tp, the final norm whole)
    root_params = (model.embedding_params + model.output_params - model.norm_params) / np.asarray(tp, dtype=float)
    root = np.where(np.asarray(pp) == 1, root_params + model.norm_params, 0.0)
    gathered = np.where(z >= 3, 2.0 * params - root, params)  # the root is gathered once, the blocks twice
    per_micro_batch = gathered * per_gather + params * (e + r)
    per_step = np.where(once_per_step, params * (per_gather + e + r), np.asarray(m, dtype=float) * per_micro_batch)
    return np.where((z >= 2) & (d > 1), per_step, 0.0)


DDP_BUCKET_BYTES_PER_PARAM = 16.0
"""HBM bytes per parameter and step of DDP's bucket copies without ``gradient_as_bucket_view``: the reducer writes
each fp32 gradient into its bucket already divided by the world size (``mul_out``: reads 4, writes 4) and, after the
all-reduce, copies the bucket back into the gradient (``copy_bucket_to_grad``: 4 + 4), once per step (gradient
accumulation runs under ``no_sync``). torch/csrc/distributed/c10d/reducer.cpp; on a lent H100 (benchmarks/
one_gpu_step.py, the DDP trace) 5.11 + 5.13 ms for 1.92e9 parameters, 16 bytes each at 3.0 TB/s."""
AUTOCAST_CAST_FP32_BYTES = 8.0
"""fp32 bytes per weight and micro-batch of autocast's casts besides 2e: the forward casts each fp32 weight once to
the low-precision dtype (the weight-cast cache, ``torch.autocast(cache_enabled=True)``: reads 4, writes e) and the
cast's backward turns its gradient back to fp32 (``ToCopyBackward``: reads e, writes 4)."""
GRAD_ACCUMULATE_BYTES = 12.0
"""fp32 bytes per parameter of each later micro-batch's gradient accumulation into ``.grad`` (``AccumulateGrad``
adds in place: reads 4 + 4, writes 4; the first micro-batch's gradient is taken as it is)."""


def ddp_copy_bytes(model: TransformerModel, params: np.ndarray, pp: np.ndarray, tp: np.ndarray, m: np.ndarray,
                   dtype_bytes: float, options: StepOptions) -> np.ndarray:
    """HBM bytes per step of DDP's bucket copies (:data:`DDP_BUCKET_BYTES_PER_PARAM` where ``grad_bucket_copy``)
    and of autocast's weight and gradient casts (``autocast_casts``, none when the training dtype is fp32 itself):
    per micro-batch (2e + 8) per weight (the parameters less the word embedding, which autocast leaves in fp32, on
    the first stage), and :data:`GRAD_ACCUMULATE_BYTES` per parameter for every micro-batch after the first."""
    p = np.asarray(params, dtype=float)
    total = np.zeros(np.broadcast(p, np.asarray(m)).shape)
    if options.grad_bucket_copy:
        total = total + p * DDP_BUCKET_BYTES_PER_PARAM
    if options.autocast_casts and dtype_bytes < FP32_SHARD_BYTES:
        mb = np.asarray(m, dtype=float)
        embedding = model.embedding_params / np.asarray(tp, dtype=float)
        weights = p - np.where(np.asarray(pp) == 1, embedding, 0.0)
        total = total + mb * weights * (2 * dtype_bytes + AUTOCAST_CAST_FP32_BYTES)
        total = total + np.maximum(mb - 1.0, 0.0) * p * GRAD_ACCUMULATE_BYTES
    return total
