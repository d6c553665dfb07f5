"""How much data-parallel traffic hides behind compute, layer by layer (DESIGN §5 "overlap").

Gradient reduction (ZeRO 0-2) is bucketed: a bucket is reduced as soon as the backward has produced
it, behind the backward of the layers still to come (PyTorch DDP, Li et al. 2020 §3.2.3; Megatron-LM
``overlap_grad_reduce``). With uniform layers, summing max(0, comm − compute) over layers equals
max(0, total comm − backward window). Every bucket pays the collective's latency (link = buckets ×
one bucket's time, :func:`commmodel.step.comm.bucketed_times`), and the tail — the bucket holding the
first block's last gradients plus the embedding's, which backward produces last — can only start
when the backward ends, so

    exposed = max(link − window, min(tail, link))

with the window the backward (and recompute) of the last micro-batch (ZeRO 0-1: gradients
accumulate locally and are reduced once) or of every micro-batch (ZeRO 2: partitioned gradients are
reduce-scattered every micro-batch). ZeRO 1-2 gather the updated weights once, behind the next
forward, with the first bucket exposed.

ZeRO 3 gathers each layer's weights just before that layer runs, forward and again backward, and
reduce-scatters the layer's gradients after its backward, every micro-batch (nothing stays gathered:
Rajbhandari et al. 2020 §5, PyTorch FSDP ``reshard_after_forward``). A gather can only be prefetched
behind the neighbouring layer's compute (the PyTorch FSDP notes: "the 1st all-gather will not be able
to overlap with anything"), and in the backward the next layer's all-gather and this layer's
reduce-scatter share one NCCL communicator, so they run one after the other (Zhao et al. 2023, PyTorch
FSDP, §3.3 backward prefetching). Per micro-batch on a stage of L layers with per-layer gather g,
reduce-scatter r, forward f and backward (+ recompute) b:

    forward exposed  = g + (L − 1)·max(0, g − f)
    backward exposed = g + r + (L − 1)·max(0, g + r − b)

(the first gather and the last reduce-scatter cannot hide). Layers are taken as equal: the stage's
forward and backward are spread evenly over its L layers.
"""

from __future__ import annotations

import numpy as np

from commmodel.step.comm import DataParallelComm
from commmodel.step.compute import StageCompute
from commmodel.workload.model import TransformerModel, stage_layers


def zero3_exposure(num_layers: np.ndarray, gather_s: np.ndarray, reduce_s: np.ndarray, forward_s: np.ndarray,
                   backward_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gather exposed, reduce-scatter exposed) of one micro-batch under ZeRO 3, per the module formula.

    ``gather_s``/``reduce_s`` are one layer's collectives; ``forward_s``/``backward_s`` the stage's
    whole forward and backward (+ recompute) of one micro-batch. The backward's exposed time is split
    between gather and reduce-scatter in proportion to their link times.
    """
    L = np.asarray(num_layers, dtype=float)
    g, r = np.asarray(gather_s, dtype=float), np.asarray(reduce_s, dtype=float)
    f, b = np.asarray(forward_s, dtype=float) / L, np.asarray(backward_s, dtype=float) / L
    forward = g + (L - 1.0) * np.maximum(g - f, 0.0)
    backward = g + r + (L - 1.0) * np.maximum(g + r - b, 0.0)
    both = g + r
    gather_share = np.divide(g, both, out=np.zeros_like(both), where=both > 0)
    return forward + backward * gather_share, backward * (1.0 - gather_share)


def overlapped_dp_exposure(model: TransformerModel, comp: StageCompute, dpc: DataParallelComm, zero: np.ndarray,
                           pp: np.ndarray, num_micro_batches: np.ndarray, reduce_link: np.ndarray,
                           gather_link: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(reduce exposed, gather exposed) seconds per step with overlap on, synchronous updates."""
    z = np.asarray(zero)
    m = np.asarray(num_micro_batches, dtype=float)
    backward_s = comp.backward_s + comp.recompute_s
    reduce_window = np.where(z == 2, m, 1.0) * backward_s
    reduce_bucketed = np.where(reduce_link > 0, np.maximum(reduce_link - reduce_window,
                                                           np.minimum(dpc.last_bucket_s, reduce_link)), 0.0)
    gather_once = np.where(gather_link > 0, np.maximum(gather_link - comp.forward_s,
                                                       np.minimum(dpc.bucket_s, gather_link)), 0.0)
    if not np.any(z == 3):
        return reduce_bucketed, gather_once
    gather3, reduce3 = zero3_exposure(stage_layers(model, pp), dpc.layer_all_gather_s, dpc.layer_reduce_scatter_s,
                                      comp.forward_s, backward_s)
    return np.where(z == 3, m * reduce3, reduce_bucketed), np.where(z == 3, m * gather3, gather_once)
