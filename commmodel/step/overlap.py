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
reduce-scattered every micro-batch). Megatron-Core launches the reduce-scatter only in the last
micro-batch (megatron/core/distributed/param_and_grad_buffer.py @937571c ``register_grad_ready``: "only
when processing the last microbatch"; the schedules run the others under ``no_sync``), and on pipeline
stages after the first the whole buffer is one bucket reduced once that stage's backward is done
(distributed_data_parallel.py ``bucket_size = None`` for pp rank > 0; schedules.py ``grad_sync_func``,
"other pipeline stages do grad reduction during pipeline bubble"): stage p has p backwards of slack, so
the first stage, priced here, sets the exposure.

ZeRO 1-2 gather the updated weights once a step, bucket by bucket, in the first micro-batch's forward
(:func:`param_gather_exposure`).

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


def param_gather_exposure(gather_link: np.ndarray, buckets: np.ndarray, forward_s: np.ndarray,
                          vpp: np.ndarray | int = 1) -> np.ndarray:
    """Exposed seconds of the ZeRO 1-2 parameter all-gather, run as Megatron-Core's ``--overlap-param-gather``
    runs it.

    The source (NVIDIA/Megatron-LM @937571c, the README's H100 runs, unchanged in core_v0.8.0;
    megatron/core/optimizer/distrib_optimizer.py ``zero_grad`` / ``_make_forward_pre_hook`` /
    ``_finish_param_sync_helper``): ``zero_grad`` launches the first bucket's all-gather at the start of the
    step; a forward pre-hook on the first module of bucket k waits for bucket k and only then launches bucket
    k+1 ("we can't pre-launch all-gathers for all buckets at once ... head-of-line block the compute kernels").
    One gather is in flight at a time, beside the forward of the bucket before it, in the first micro-batch
    only (the handles are then spent). With N equal buckets, gather g and forward f each:

        exposed = g + (N − 1)·max(0, g − f)

    (comm-bound: N·g − (N − 1)·f; compute-bound: the first bucket). Pipeline stages after the first keep
    one bucket (distributed_data_parallel.py: ``bucket_size = None`` for pipeline rank > 0), launched at the
    start of the step and needed only when their first micro-batch arrives, after the first stage's forward
    and its stalls (≥ N·g): hidden. With interleaving only the first model chunk is bucketed
    (training.py ``disable_bucketing=(model_chunk_idx > 0)``); a later chunk's one gather is launched when the
    chunk before it is gathered and needed one pipeline round later (and from core_v0.9.0
    ``align_param_gather``, on by default with interleaving, launches each chunk's gathers ahead from the
    schedule): the chain runs over the first chunk's ⌈N/vpp⌉ buckets.

    ``gather_link``: the stage's bucketed gathers; ``buckets``: N; ``forward_s``: the stage's forward of one
    micro-batch (all its chunks).
    """
    link = np.asarray(gather_link, dtype=float)
    n = np.maximum(np.asarray(buckets, dtype=float), 1.0)
    g, f = link / n, np.asarray(forward_s, dtype=float) / n
    chained = np.maximum(np.ceil(n / np.maximum(np.asarray(vpp, dtype=float), 1.0) - 1e-9) - 1.0, 0.0)
    return np.where(link > 0, g + chained * np.maximum(g - f, 0.0), 0.0)


def overlapped_dp_exposure(model: TransformerModel, comp: StageCompute, dpc: DataParallelComm, zero: np.ndarray,
                           pp: np.ndarray, num_micro_batches: np.ndarray, reduce_link: np.ndarray,
                           gather_link: np.ndarray, vpp: np.ndarray | int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(reduce exposed, gather exposed) seconds per step with overlap on, synchronous updates."""
    z = np.asarray(zero)
    m = np.asarray(num_micro_batches, dtype=float)
    backward_s = comp.backward_s + comp.recompute_s
    reduce_window = np.where(z == 2, m, 1.0) * backward_s
    reduce_bucketed = np.where(reduce_link > 0, np.maximum(reduce_link - reduce_window,
                                                           np.minimum(dpc.last_bucket_s, reduce_link)), 0.0)
    gather_once = param_gather_exposure(gather_link, dpc.gather_buckets, comp.forward_s, vpp)
    if not np.any(z == 3):
        return reduce_bucketed, gather_once
    gather3, reduce3 = zero3_exposure(stage_layers(model, pp), dpc.layer_all_gather_s, dpc.layer_reduce_scatter_s,
                                      comp.forward_s, backward_s)
    return np.where(z == 3, m * reduce3, reduce_bucketed), np.where(z == 3, m * gather3, gather_once)
