"""Gradient buckets of the data-parallel reduction: how big one is for each layout, how a gradient buffer cuts into
them, and which bytes only the end of the backward can reduce (the tail). The DP collectives that run on them are
priced in :mod:`commmodel.step.comm`; the memory buffers they need in :mod:`commmodel.workload.memory`."""

from __future__ import annotations

import numpy as np

from commmodel.step.options import StepOptions
from commmodel.workload.model import TransformerModel

MCORE_BUCKET_PARAMS = 40_000_000
"""Megatron-Core's smallest DDP bucket, 40 M parameters (stacks.py [MCORE-DDP]: max(40e6, 1e6·dp))."""
MCORE_BUCKET_PARAMS_PER_DP_RANK = 1_000_000
"""Parameters Megatron-Core's DDP bucket grows by per data-parallel rank beyond dp = 40 ([MCORE-DDP]:
``max(40000000, 1000000 * parallel_state.get_data_parallel_world_size())``)."""
DS_REDUCE_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed ZeRO ``reduce_bucket_size`` default, 5e8 elements (stacks.py [DS-ZERO])."""
DS_REDUCE_BUCKET_BYTES = "1GB"
""":data:`DS_REDUCE_BUCKET_ELEMENTS` 16-bit gradients (2 bytes each)."""


def effective_bucket_bytes(options: StepOptions, dp: np.ndarray | int) -> np.ndarray:
    """Gradient bucket bytes of each layout, the one place the bucket is sized (gradient reduction, its tail,
    the parameter all-gather, the parameter server, the memory buffers, the advice):

        B = max(bucket_size_bytes (or bucket_params × w), bucket_params_per_dp_rank × dp × w)

    with w the gradient wire bytes per element and ``dp`` the data-parallel size without cp. Megatron-Core
    (bucket_params_per_dp_rank 1e6) grows its 40M-parameter bucket "to ensure that chunks used in NCCL
    ring-reduce implementations are large enough to remain bandwidth-bound": ``bucket_size = max(40000000,
    1000000 * parallel_state.get_data_parallel_world_size())`` (megatron/core/distributed/
    distributed_data_parallel.py @937571c L51-54; the same at core_v0.13.0 L62-65), where
    ``get_data_parallel_world_size(with_context_parallel=False)`` leaves cp out. Fixed (B = bucket_size_bytes)
    where bucket_params_per_dp_rank is 0."""
    wire = options.grad_wire_bytes_per_element
    floor = options.bucket_params * wire if options.bucket_params else float(options.bucket_size_bytes)
    return np.maximum(floor, options.bucket_params_per_dp_rank * np.asarray(dp, dtype=float) * wire)


def bucket_split(total_bytes: np.ndarray, bucket_bytes: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(full buckets, bytes of the last partial bucket) of a gradient buffer cut into equal buckets
    (``bucket_bytes``: one size, or one per layout)."""
    total = np.asarray(total_bytes, dtype=float)
    bucket = np.asarray(bucket_bytes, dtype=float)
    full = np.floor(total / bucket * (1 + 1e-12))
    return full, np.maximum(total - full * bucket, 0.0)


def bucket_tail_bytes(model: TransformerModel, tp: np.ndarray, grad_bytes: np.ndarray,
                      options: StepOptions, bucket_bytes: np.ndarray | float) -> np.ndarray:
    """Gradient bytes whose reduction cannot start before the backward ends: the embedding's (word and
    learned positions, on the first stage, split over tp; a tied output head accumulates into the same
    tensor, so its gradient is complete only then too) plus the first block's gradients that share its bucket.
    Backward produces gradients last layer first, and buckets are filled in reverse parameter order and closed at a
    parameter boundary once full, a parameter never split (PyTorch DDP, Li et al. 2020 §3.2.3; Megatron-Core
    param_and_grad_buffer.py @937571c: a bucket is finalised when ``param_end_index - bucket_start >= bucket_size``).
    So the input embedding, the last parameter, joins the bucket the blocks left partly filled: the tail is the
    embedding plus the blocks' bytes past their last full bucket. The overlap timeline cuts the same buffer the same
    way (:func:`commmodel.step.gradients.step_timeline`). ``bucket_bytes``: :func:`effective_bucket_bytes` of these
    layouts."""
    embedding = np.minimum(model.embedding_params / np.asarray(tp, dtype=float) * options.grad_wire_bytes_per_element,
                           grad_bytes)
    return embedding + bucket_split(np.asarray(grad_bytes, dtype=float) - embedding, bucket_bytes)[1]


def bucket_counts(model: TransformerModel, tp: np.ndarray, grad_bytes: np.ndarray, options: StepOptions,
                   bucket: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(full buckets, rest bytes) of the whole gradient buffer and of its tail (:func:`bucket_tail_bytes`)."""
    full, rest = bucket_split(grad_bytes, bucket)
    tail_full, tail_rest = bucket_split(bucket_tail_bytes(model, tp, grad_bytes, options, bucket), bucket)
    return full, rest, tail_full, tail_rest
