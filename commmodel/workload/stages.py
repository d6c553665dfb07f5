"""Blocks per pipeline stage and per virtual stage (model chunk): the shapes the step model prices the busiest stage
and the interleaved schedule's bubble with."""

from typing import Any

import numpy as np

from commmodel.workload.model import TransformerModel


def stage_layers(model: TransformerModel, pp: Any) -> np.ndarray:
    """Blocks on the busiest pipeline stage: ⌈l/p⌉ (exactly l/p when p divides l). With uneven
    stages the stage holding the extra block sets the pipeline's pace and its memory peak."""
    p = np.asarray(pp, dtype=np.int64)
    return (-(-model.num_layers // p)).astype(float)


def chunk_layers(model: TransformerModel, pp: Any, vpp: Any) -> np.ndarray:
    """Blocks in the busiest virtual pipeline stage (model chunk): ⌈l/(p·v)⌉.

    With interleaving the l blocks are cut into p·v chunks, v per GPU; when p·v does not divide l some
    chunks hold one block fewer (Megatron-LM ``--decoder-first/last-pipeline-num-layers``; Llama 3,
    arXiv:2407.21783 §3.3.2, drops one block from the first and the last stage, so their end chunks hold
    only the embedding or the output layer and loss). The warm-up and cool-down of the interleaved
    schedule pass through p − 1 chunks, so the busiest chunk sets the bubble's pace. v = 1 gives
    :func:`stage_layers`."""
    p = np.asarray(pp, dtype=np.int64)
    v = np.asarray(vpp, dtype=np.int64)
    return (-(-model.num_layers // (p * v))).astype(float)


def full_recompute_fraction(model: TransformerModel, pp: Any, vpp: Any, recompute_layers: int | None) -> np.ndarray:
    """Share of a model chunk's blocks that full recompute checkpoints: 1 where every block does (Megatron's
    ``--recompute-method uniform``, the default), min(N, c)/c for ``--recompute-method block --recompute-num-layers N``,
    which checkpoints the first N blocks of each model chunk (its ``num_layers_per_pipeline_rank``, per virtual stage
    with interleaving) and runs the rest unchecked (Megatron-LM @d98e8a6 megatron/core/recompute.py, method 'block'),
    c the busiest chunk's blocks (:func:`chunk_layers`)."""
    c = chunk_layers(model, pp, vpp)
    return np.ones_like(c) if recompute_layers is None else np.minimum(float(recompute_layers), c) / c


def block_recompute_line(recompute_layers: int) -> str:
    """The assumption line of ``--recompute-layers N`` (:func:`full_recompute_fraction`)."""
    return (f"where a layout recomputes full, only the first {recompute_layers} blocks of each model chunk are "
            f"checkpointed (Megatron-LM --recompute-method block --recompute-num-layers {recompute_layers}); the "
            f"others store their activations (megatron/core/recompute.py @d98e8a6)")
