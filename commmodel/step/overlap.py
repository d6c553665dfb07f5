"""How much data-parallel traffic hides behind compute, layer by layer (DESIGN §5 "overlap").

Gradient reduction (ZeRO 0-2) is bucketed: a bucket is reduced as soon as the backward has produced
it, behind the backward of the layers still to come (PyTorch DDP, Li et al. 2020 §3.2.3; Megatron-LM
``overlap_grad_reduce``). With uniform layers, summing max(0, comm − compute) over layers equals
max(0, total comm − backward window). Every bucket pays the collective's latency (link = buckets ×
one bucket's time, :func:`commmodel.step.comm.bucketed_times`), and the tail — the embedding's gradients, which
backward produces last, and the first blocks' that share their bucket (:func:`commmodel.step.buckets.bucket_tail_bytes`)
— can only start when the backward ends, so

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

With interleaving (vpp ≥ 2) Megatron-Core does not reduce bucket by bucket in the backward: each model chunk's
whole gradient is reduced once that chunk's last backward is done, chunk 0's last (:func:`interleaved_reduce_exposure`).

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

ZeRO 3 under ``torch.distributed.pipelining`` (FSDP2 with pp ≥ 2, ``zero3_pp_keep_unsharded``) instead gathers each
block once per step, in its chunk's first forward (:func:`fsdp_pp_gather_exposure`), and reduce-scatters all of a
chunk's blocks at once after that chunk's last backward, in the order :func:`interleaved_reduce_exposure` prices
(PyTorch's ``ScheduleInterleaved1F1B`` runs the backwards in rounds of p micro-batches, last local stage first,
as Megatron-Core does; with one chunk the whole stage's reduction is exposed):
:func:`commmodel.step.comm.zero3_pp_unsharded` gives the source.
"""

from __future__ import annotations

import numpy as np

from commmodel.step.comm import DataParallelComm
from commmodel.step.compute import StageCompute
from commmodel.workload.model import TransformerModel
from commmodel.workload.stages import chunk_layers, stage_layers


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


def fsdp_pp_gather_exposure(num_layers: np.ndarray, gather_s: np.ndarray, forward_s: np.ndarray,
                            vpp: np.ndarray | int = 1) -> np.ndarray:
    """Exposed seconds of ZeRO 3's parameter all-gathers when every block is gathered once per step, in the first
    forward of its model chunk (FSDP2 under ``torch.distributed.pipelining``,
    :func:`commmodel.step.comm.zero3_pp_unsharded`). In each of the v chunks the first block's gather is not hidden
    and each later one hides behind the block before it (the forward formula of :func:`zero3_exposure`, once per
    chunk instead of once per micro-batch):

        exposed = v·g + (L − v)·max(0, g − f)

    ``num_layers``: the stage's L blocks; ``gather_s``: one block's gather g; ``forward_s``: the stage's forward of
    one micro-batch (f = forward_s / L per block); ``vpp``: chunks per stage."""
    L = np.asarray(num_layers, dtype=float)
    v = np.minimum(np.maximum(np.asarray(vpp, dtype=float), 1.0), L)
    g = np.asarray(gather_s, dtype=float)
    f = np.asarray(forward_s, dtype=float) / L
    return v * g + (L - v) * np.maximum(g - f, 0.0)


def interleaved_reduce_exposure(reduce_link: np.ndarray, embedding_share: np.ndarray, chunk_share: np.ndarray,
                                backward_s: np.ndarray, pp: np.ndarray, vpp: np.ndarray) -> np.ndarray:
    """Exposed seconds of the ZeRO 0-1 gradient reduction of the first pipeline stage under Megatron-Core's
    interleaved schedule (vpp ≥ 2), as the source runs it.

    The source (NVIDIA/Megatron-LM @937571c, the README's H100 runs): ``--no-delay-grad-reduce`` is off by default
    (megatron/training/arguments.py L1422-1424), so training.py L1001-1004 sets ``config.grad_sync_func`` to each
    chunk's ``start_grad_sync``; the interleaved schedule then keeps ``no_sync`` on through every backward
    (pipeline_parallel/schedules.py L729-733: per-bucket launching only when ``grad_sync_func is None``), so
    ``register_grad_ready`` launches nothing (distributed/param_and_grad_buffer.py L547, ``is_last_microbatch``),
    and after the backward of a chunk's last micro-batch (shifted by the pipeline rank, 0 on the first stage)
    reduces all that chunk's buckets at once (schedules.py L750-759). The backward runs the chunks in groups of p
    micro-batches, chunk v−1 first and chunk 0 last (``get_model_chunk_id(forward=False)``), so chunk k's reduction
    is launched with k·p chunk-backwards still to run and chunk 0's — which holds the input embedding — only when
    the backward is over. Unchanged as ``--no-align-grad-reduce`` (core_v0.12.0 arguments.py L2087, schedules.py
    L1067) and ``align_grad_reduce = True`` (main @d98e8a6, megatron/training/config/common_config.py L80).

    With chunk reductions R_k on one serial NCCL stream, R_0 = R_c + R_emb, and one chunk's backward b/v:

        exposed = max over j of (R_0 + j·R_c − j·p·b/v) = R_0 + max(0, (v − 1)·(R_c − p·b/v))

    (a linear function of j, so its maximum is at j = 0 or j = v − 1). ``reduce_link``: the stage's gradient
    reduction R; ``embedding_share``: the embedding's share e of its bytes (R_emb = e·R); ``chunk_share``: the busiest
    chunk's share of the stage's blocks (1/v when v divides them; R_c = (1 − e)·R·share); ``backward_s``: the stage's
    backward (+ recompute) of one micro-batch. The stage's idle cool-down would widen the window of chunks ≥ 1 and
    is left out (an upper bound); chunk 0's reduction is exposed in full either way."""
    link = np.asarray(reduce_link, dtype=float)
    e = np.clip(np.asarray(embedding_share, dtype=float), 0.0, 1.0)
    v = np.maximum(np.asarray(vpp, dtype=float), 1.0)
    r_chunk = (1.0 - e) * link * np.asarray(chunk_share, dtype=float)
    r_first = r_chunk + e * link
    window = np.asarray(pp, dtype=float) * np.asarray(backward_s, dtype=float) / v
    return np.minimum(r_first + np.maximum((v - 1.0) * (r_chunk - window), 0.0), link)


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
                           gather_link: np.ndarray, vpp: np.ndarray | int = 1,
                           embedding_share: np.ndarray | float = 0.0,
                           keep_unsharded: np.ndarray | bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(reduce exposed, gather exposed) seconds per step with overlap on, synchronous updates. ZeRO 0-1 with
    interleaving (pp ≥ 2, vpp ≥ 2) reduce chunk by chunk (:func:`interleaved_reduce_exposure`; ``embedding_share``:
    the input embedding's share of the stage's gradient bytes); so does ZeRO 3 where ``keep_unsharded``
    (:func:`commmodel.step.comm.zero3_pp_unsharded`; one chunk or more), whose gathers :func:`fsdp_pp_gather_exposure`
    prices."""
    z = np.asarray(zero)
    m = np.asarray(num_micro_batches, dtype=float)
    backward_s = comp.backward_s + comp.recompute_s
    reduce_window = np.where(z == 2, m, 1.0) * backward_s
    reduce_bucketed = np.where(reduce_link > 0, np.maximum(reduce_link - reduce_window,
                                                           np.minimum(dpc.last_bucket_s, reduce_link)), 0.0)
    v = np.broadcast_to(np.asarray(vpp, dtype=float), np.shape(reduce_bucketed))
    interleaved = (v > 1) & (np.asarray(pp) > 1) & (z <= 1)
    keep = np.broadcast_to(np.asarray(keep_unsharded, dtype=bool), np.shape(reduce_bucketed)) & (z == 3)
    layers = stage_layers(model, pp)
    if np.any(interleaved | keep):  # the chunk-by-chunk reduction both price
        chunked = interleaved_reduce_exposure(reduce_link, embedding_share, chunk_layers(model, pp, v) / layers,
                                              backward_s, pp, v)
        reduce_bucketed = np.where(interleaved & (reduce_link > 0), chunked, reduce_bucketed)
    gather_once = param_gather_exposure(gather_link, dpc.gather_buckets, comp.forward_s, vpp)
    if not np.any(z == 3):
        return reduce_bucketed, gather_once
    gather3, reduce3 = zero3_exposure(layers, dpc.layer_all_gather_s, dpc.layer_reduce_scatter_s,
                                      comp.forward_s, backward_s)
    reduce3, gather3 = m * reduce3, m * gather3
    if np.any(keep):
        reduce3 = np.where(keep, chunked, reduce3)
        gather3 = np.where(keep, fsdp_pp_gather_exposure(layers, dpc.layer_all_gather_s, comp.forward_s, v), gather3)
    return np.where(z == 3, reduce3, reduce_bucketed), np.where(z == 3, gather3, gather_once)
