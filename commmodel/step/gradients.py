"""The data-parallel gradient traffic of one layout as people draw and quote it: the bucket schedule of
one step's last micro-batch (:func:`step_timeline`, drawn by :mod:`commmodel.plots.timeline`) and the
plain gradient all-reduce (:func:`gradient_all_reduce`).

Two streams, as PyTorch DDP / Megatron run them:

* **compute**: forward of layers 0..L−1 back to back, then backward of layers L−1..0;
* **communication**: gradients fill buckets of ``bucket_bytes`` in the order backward produces them
  (last layer first; DDP's ``bucket_cap_mb`` = 25 MiB by default,
  :data:`commmodel.step.options.DDP_BUCKET_CAP_BYTES`); a layer's gradient may span several buckets (as if no
  single parameter were larger than a bucket), the last bucket holds the remainder. A bucket is
  ready when the layer holding its last byte finishes backward; its all-reduce starts when it is
  ready **and** the previous all-reduce has finished (one NCCL stream, collectives serialised).

The **exposed** communication is what runs past the end of backward: ``max(0, comm_end − compute_end)``;
everything else hides under backward compute. With ``overlap=False`` every all-reduce waits for the
end of backward (no hiding). The step ends when both streams are done (optimizer step not drawn).

Closed form used by the tests: L equal layers of backward time b, one bucket per layer whose
all-reduce takes c: exposed = c when c ≤ b, and L·(c − b) + b when c > b (communication-bound).
"""

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from commmodel.collectives import collective_cost
from commmodel.collectives.api import collective_times
from commmodel.errors import CommModelError
from commmodel.hardware.models import System
from commmodel.hardware.cluster import Cluster
from commmodel.step.buckets import effective_bucket_bytes
from commmodel.step.compute import stage_compute, stage_compute_knobs
from commmodel.step.layout import RECOMPUTE_CODES, Layout
from commmodel.step.options import DDP_BUCKET_CAP_BYTES, StepOptions
from commmodel.step.placement import Placement
from commmodel.workload.memory import dense_params_per_gpu
from commmodel.workload.model import TransformerModel
from commmodel.workload.stages import full_recompute_fraction, stage_layers

MAX_BUCKETS = 20_000
"""Most gradient buckets one timeline schedules (a 25 MiB bucket covers 524 GB of gradients)."""


class StepTimeline(NamedTuple):
    """Intervals of one step on the compute and communication streams, with the exposed tail."""

    intervals: tuple[dict[str, Any], ...]
    """Each: stream (compute|comm), kind (forward|backward|all_reduce), label, index, start_s, end_s, size_bytes."""
    compute_end_s: float
    """When backward finishes."""
    comm_end_s: float
    """When the last gradient all-reduce finishes (0 without communication)."""
    comm_link_s: float
    """Sum of all-reduce durations (the link time, hidden or not)."""
    buckets: tuple[int, ...] = ()
    """Per bucket, in launch order, the layer whose backward completes it (its ready time)."""
    comm_op: str = "all_reduce"
    """The collective each bucket runs (all_reduce; reduce_scatter under ZeRO ≥ 1)."""

    @property
    def step_time_s(self) -> float:
        """Both streams done."""
        return max(self.compute_end_s, self.comm_end_s)

    @property
    def exposed_comm_s(self) -> float:
        """Communication not hidden under backward: comm_end − compute_end, at least 0."""
        return max(0.0, self.comm_end_s - self.compute_end_s)


def _per_layer(values: float | Sequence[float] | np.ndarray, num_layers: int, name: str) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(values, dtype=float), (num_layers,)).copy()
    if np.any(~np.isfinite(arr)) or np.any(arr < 0):
        raise CommModelError(f"{name} must be finite and ≥ 0 for every layer, got {values!r}")
    return arr


def overlap_timeline(num_layers: int, forward_s: float | Sequence[float], backward_s: float | Sequence[float],
                     grad_bytes: float | Sequence[float], all_reduce_s: Callable[[np.ndarray], np.ndarray],
                     bucket_bytes: float = DDP_BUCKET_CAP_BYTES, overlap: bool = True,
                     comm_op: str = "all_reduce", final_bytes: float = 0.0) -> StepTimeline:
    """Schedule one step: per-layer forward/backward, bucketed gradient all-reduces, exposed tail.

    ``forward_s``, ``backward_s`` and ``grad_bytes`` are per layer (scalars broadcast), each layer's gradients
    produced at an even rate over its backward; ``final_bytes`` are complete only when the backward ends (the
    embedding's);
    ``all_reduce_s`` maps bucket sizes in bytes (an array) to all-reduce times in seconds, e.g.
    ``lambda s: collective_cost("all_reduce", s, system, dp).time_s``.
    """
    if int(num_layers) != num_layers or num_layers < 1:
        raise CommModelError(f"num_layers = {num_layers!r} must be a whole number ≥ 1")
    if not bucket_bytes > 0:
        raise CommModelError(f"bucket_bytes = {bucket_bytes!r} must be > 0 (DDP default 25 MiB)")
    num_layers = int(num_layers)
    fwd = _per_layer(forward_s, num_layers, "forward_s")
    bwd = _per_layer(backward_s, num_layers, "backward_s")
    grads = _per_layer(grad_bytes, num_layers, "grad_bytes")
    intervals: list[dict[str, Any]] = []
    t = 0.0
    for layer in range(num_layers):
        intervals.append({"stream": "compute", "kind": "forward", "label": f"F{layer}", "index": layer,
                          "start_s": t, "end_s": t + fwd[layer], "size_bytes": 0.0})
        t += fwd[layer]
    bwd_end = np.zeros(num_layers)
    for layer in reversed(range(num_layers)):
        intervals.append({"stream": "compute", "kind": "backward", "label": f"B{layer}", "index": layer,
                          "start_s": t, "end_s": t + bwd[layer], "size_bytes": 0.0})
        t += bwd[layer]
        bwd_end[layer] = t
    compute_end_s = t

    # Buckets of exactly bucket_bytes in the order backward produces gradients (last layer first), each layer's at an
    # even rate over its backward and ``final_bytes`` (the embedding's) at its end; a bucket is ready when its last
    # byte is produced.
    order = np.arange(num_layers)[::-1]
    produced = np.cumsum(grads[order])
    block_bytes = float(produced[-1]) if num_layers else 0.0
    total_bytes = block_bytes + final_bytes
    num_buckets = int(np.ceil(total_bytes / bucket_bytes - 1e-9)) if total_bytes > 0 else 0
    if num_buckets > MAX_BUCKETS:
        raise CommModelError(
            f"bucket_bytes = {bucket_bytes:g} splits {total_bytes:g} gradient bytes into {num_buckets:,} buckets "
            f"(at most {MAX_BUCKETS:,} are drawn); use a bucket of at least {total_bytes / MAX_BUCKETS:.3g} bytes"
        )
    edges = np.minimum(np.arange(1, num_buckets + 1) * bucket_bytes, total_bytes)
    sizes = np.diff(np.concatenate([[0.0], edges]))
    position = np.minimum(np.searchsorted(produced, edges * (1 - 1e-12), side="left"), num_layers - 1)
    last_layer = order[position]
    before = np.where(position > 0, produced[np.maximum(position - 1, 0)], 0.0)
    share = np.clip((edges - before) / np.maximum(grads[last_layer], 1e-300), 0.0, 1.0)
    ready_s = np.where(edges > block_bytes * (1 + 1e-12), compute_end_s,
                       bwd_end[last_layer] - (1.0 - share) * bwd[last_layer])
    durations = np.broadcast_to(np.asarray(all_reduce_s(sizes), dtype=float), sizes.shape) if num_buckets else sizes
    comm_free = 0.0
    for k, (at, size, duration) in enumerate(zip(ready_s, sizes, durations)):
        ready = at if overlap else compute_end_s
        start = max(float(ready), comm_free)
        comm_free = start + float(duration)
        intervals.append({"stream": "comm", "kind": "all_reduce", "label": f"{_short(comm_op)}{k}", "index": k,
                          "start_s": start, "end_s": comm_free, "size_bytes": float(size)})
    return StepTimeline(intervals=tuple(intervals), compute_end_s=compute_end_s, comm_end_s=comm_free,
                        comm_link_s=float(np.sum(durations)), buckets=tuple(int(x) for x in last_layer),
                        comm_op=comm_op)


def _short(comm_op: str) -> str:
    """A bucket's label prefix: AR for an all-reduce, RS for a reduce-scatter (``kind`` stays the gradient stream)."""
    return "RS" if comm_op == "reduce_scatter" else "AR"


def _gradient_group(model: TransformerModel, system: System, layout: Layout,
                    options: StepOptions) -> tuple[float, int, int]:
    """(gradient bytes of the busiest GPU on the wire, ranks, ranks per node) of the layout's gradient
    group: dp·cp ranks strided by tp (:mod:`commmodel.step.placement`), as the step model prices it."""
    place = Placement(system, tp=layout.tp, cp=layout.cp, dp=layout.dp, pp=layout.pp)
    ranks = int(place.size("grad"))
    params = dense_params_per_gpu(model, np.array([layout.tp]), np.array([layout.pp]))
    return float(params[0]) * options.grad_wire_bytes_per_element, ranks, int(place.ranks_per_node("grad"))


def _embedding_grad_bytes(model: TransformerModel, layout: Layout, options: StepOptions, grad_bytes: float) -> float:
    """Gradient bytes complete only at the end of the backward: the embedding's. Cut from the buffer's start, the
    buckets then hold the same tail :func:`commmodel.step.buckets.bucket_tail_bytes` gives the step model (the
    embedding and the blocks' bytes past their last full bucket)."""
    return min(model.embedding_params / layout.tp * options.grad_wire_bytes_per_element, grad_bytes)


def step_timeline(model: TransformerModel, system: System, num_gpus: int, layout: Layout,
                  options: StepOptions | None = None) -> StepTimeline:
    """The overlap timeline of the last micro-batch of a step, from the step model's own numbers.

    Compute: the stage's forward and backward(+recompute) of one micro-batch
    (:func:`commmodel.step.compute.stage_compute` at b/cp sequences per GPU, last and busiest stage),
    split evenly over its ⌈l/p⌉ layers. Gradients: the busiest GPU's parameters
    (:func:`commmodel.workload.memory.dense_params_per_gpu`; expert gradients reduce over their own
    group) × wire bytes per element (compression), the blocks' split evenly over the layers and the embedding's
    complete at the end of the backward (:func:`_embedding_grad_bytes`), bucketed at :func:`commmodel.step.buckets.effective_bucket_bytes`. Each bucket is an all-reduce
    (ZeRO 0) or a reduce-scatter (ZeRO ≥ 1) over the gradient group (dp·cp ranks strided by tp), priced by
    :func:`commmodel.collectives.collective_cost`. With dp·cp = 1 there is nothing to reduce. Not drawn:
    ZeRO-3's per-layer weight all-gathers, tensor- and context-parallel traffic (inside each layer's
    compute) and pipeline sends (between micro-batches); the step model prices them in its breakdown.
    """
    options = options or StepOptions()
    view = Cluster.for_gpus(system, num_gpus).system
    tp, pp = np.array([layout.tp]), np.array([layout.pp])
    comp = stage_compute(model, view, np.array([layout.micro_batch / layout.cp]), tp, pp,
                         np.array([RECOMPUTE_CODES[layout.recompute]]), np.array([layout.sequence_parallel]),
                         options.flash_attention, options.flash_attention_rate, layout.ep, layout.etp,
                         cp=layout.cp, **stage_compute_knobs(options),
                         full_share=full_recompute_fraction(model, pp, layout.vpp, options.recompute_layers))
    num_layers = int(stage_layers(model, layout.pp))  # the busiest stage sets the pace
    forward_s = float(comp.forward_s[0]) / num_layers
    backward_s = float(comp.backward_s[0] + comp.recompute_s[0]) / num_layers
    grad_bytes, ranks, ranks_per_node = _gradient_group(model, view, layout, options)
    op = "all_reduce" if layout.zero == 0 else "reduce_scatter"

    def reduce_s(sizes: np.ndarray) -> np.ndarray:
        """Each bucket priced as the step prices it (:func:`~commmodel.collectives.api.collective_times`: a device
        library's fastest pair, a host library's own rule: gloo's ring, not the fastest halving-doubling)."""
        if ranks <= 1:
            return np.zeros_like(sizes)
        flat = np.atleast_1d(np.asarray(sizes, dtype=float))
        times = collective_times([op], np.zeros(flat.size, dtype=int), flat, view, np.full(flat.size, float(ranks)),
                                 np.full(flat.size, float(ranks_per_node)), library=options.library)
        return times.reshape(np.shape(sizes))

    embedding = 0.0 if ranks <= 1 else _embedding_grad_bytes(model, layout, options, grad_bytes)
    per_layer = 0.0 if ranks <= 1 else (grad_bytes - embedding) / num_layers
    # ZeRO 3 / FSDP reduce-scatters each block's gradients as its backward ends (one collective a block), the others
    # bucket by bucket (commmodel.step.comm prices the same)
    bucket = per_layer if layout.zero == 3 and per_layer > 0 else float(effective_bucket_bytes(options, layout.dp))
    if not options.overlap and layout.zero != 3 and grad_bytes > 0:
        # no overlap: one reduction of the whole buffer after the backward, as the step model prices it
        # (Megatron-Core drops its buckets without overlap_grad_reduce: distributed_data_parallel.py bucket_size None)
        bucket = grad_bytes
    return overlap_timeline(num_layers, forward_s, backward_s, per_layer, reduce_s,
                            bucket_bytes=bucket, overlap=options.overlap,
                            comm_op=op, final_bytes=embedding)


def gradient_all_reduce(model: TransformerModel, system: System, num_gpus: int, layout: Layout,
                        options: StepOptions | None = None) -> dict[str, Any] | None:
    """One plain all-reduce of the busiest GPU's gradients over its gradient group (dp·cp ranks): the
    layout's DP traffic without ZeRO, bucketing or overlap, the reference number people quote
    (size_bytes, num_ranks, algorithm, time_s, busbw_GBps), priced as ``commmodel collective`` answers it: the
    library's own choice (``selection="library"``, what nccl-tests measures). None when the group has one rank."""
    options = options or StepOptions()
    view = Cluster.for_gpus(system, num_gpus).system
    grad_bytes, ranks, ranks_per_node = _gradient_group(model, view, layout, options)
    if ranks < 2:
        return None
    cost = collective_cost("all_reduce", grad_bytes, view, ranks, ranks_per_node, library=options.library,
                           selection="library")
    return {"size_bytes": grad_bytes, "num_ranks": ranks, "ranks_per_node": int(ranks_per_node),
            "algorithm": str(np.ravel(cost.algorithm)[0]),
            "time_s": float(np.ravel(cost.time_s)[0]), "busbw_GBps": float(np.ravel(cost.busbw_bytes_per_s)[0]) / 1e9}
