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
