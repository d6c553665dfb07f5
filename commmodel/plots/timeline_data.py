"""The schedule of one data-parallel training step, for the overlap timeline (no drawing here).

Two streams, as PyTorch DDP / Megatron run them:

* **compute**: forward of layers 0..L−1 back to back, then backward of layers L−1..0;
* **communication**: gradients are grouped into buckets in the order backward produces them
  (last layer first; DDP's ``bucket_cap_mb`` = 25 MiB by default, PyTorch
  ``torch/nn/parallel/distributed.py``); a bucket closes once it holds at least ``bucket_bytes``
  (a layer is never split) and its all-reduce starts when it is closed **and** the previous
  all-reduce has finished (one NCCL stream, collectives serialised).

The **exposed** communication is what runs past the end of backward: ``max(0, comm_end − compute_end)``;
everything else hides under backward compute. With ``overlap=False`` every all-reduce waits for the
end of backward (no hiding). The step ends when both streams are done (optimizer step not drawn).

Closed form used by the tests: L equal layers of backward time b, one bucket per layer whose
all-reduce takes c: exposed = c when c ≤ b, and L·(c − b) + b when c > b (communication-bound).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from commmodel.errors import CommModelError

DDP_BUCKET_BYTES = 25 * 2**20
"""PyTorch DDP's default ``bucket_cap_mb=25`` (MiB), torch/nn/parallel/distributed.py."""


@dataclass(frozen=True)
class StepTimeline:
    """Intervals of one step on the compute and communication streams, with the exposed tail."""

    intervals: tuple[dict[str, Any], ...]
    """Each: stream (compute|comm), kind (forward|backward|all_reduce), label, index, start_s, end_s, size_bytes."""
    compute_end_s: float
    """When backward finishes."""
    comm_end_s: float
    """When the last gradient all-reduce finishes (0 without communication)."""
    comm_link_s: float
    """Sum of all-reduce durations (the link time, hidden or not)."""
    buckets: tuple[int, ...] = field(default=())
    """Layers per bucket, in launch order."""

    @property
    def step_time_s(self) -> float:
        """Both streams done."""
        return max(self.compute_end_s, self.comm_end_s)

    @property
    def exposed_comm_s(self) -> float:
        """Communication not hidden under backward: comm_end − compute_end, at least 0."""
        return max(0.0, self.comm_end_s - self.compute_end_s)

    def frame(self) -> Any:
        """The intervals as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(list(self.intervals))


def _per_layer(values: float | Sequence[float] | np.ndarray, num_layers: int, name: str) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(values, dtype=float), (num_layers,)).copy()
    if np.any(~np.isfinite(arr)) or np.any(arr < 0):
        raise CommModelError(f"{name} must be finite and ≥ 0 for every layer, got {values!r}")
    return arr


def overlap_timeline(num_layers: int, forward_s: float | Sequence[float], backward_s: float | Sequence[float],
                     grad_bytes: float | Sequence[float], all_reduce_s: Callable[[np.ndarray], np.ndarray],
                     bucket_bytes: float = DDP_BUCKET_BYTES, overlap: bool = True) -> StepTimeline:
    """Schedule one step: per-layer forward/backward, bucketed gradient all-reduces, exposed tail.

    ``forward_s``, ``backward_s`` and ``grad_bytes`` are per layer (scalars broadcast);
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

    # Buckets in backward order: close once ≥ bucket_bytes, the last one at layer 0.
    bucket_layers: list[list[int]] = [[]]
    filled = 0.0
    for layer in reversed(range(num_layers)):
        bucket_layers[-1].append(layer)
        filled += grads[layer]
        if filled >= bucket_bytes and layer > 0:
            bucket_layers.append([])
            filled = 0.0
    bucket_layers = [b for b in bucket_layers if b and grads[b].sum() > 0]
    sizes = np.array([grads[b].sum() for b in bucket_layers])
    durations = np.broadcast_to(np.asarray(all_reduce_s(sizes), dtype=float), sizes.shape) if len(sizes) else sizes
    comm_free = 0.0
    for k, (layers, size, duration) in enumerate(zip(bucket_layers, sizes, durations)):
        ready = compute_end_s if not overlap else bwd_end[layers[-1]]
        start = max(ready, comm_free)
        comm_free = start + float(duration)
        intervals.append({"stream": "comm", "kind": "all_reduce", "label": f"AR{k}", "index": k,
                          "start_s": start, "end_s": comm_free, "size_bytes": float(size)})
    return StepTimeline(intervals=tuple(intervals), compute_end_s=compute_end_s, comm_end_s=comm_free,
                        comm_link_s=float(np.sum(durations)), buckets=tuple(len(b) for b in bucket_layers))
