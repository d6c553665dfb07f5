"""Provenance of a step estimate: for every collective the step issues, whether its price comes from a
calibrated tier inside its measured sizes (``calibrated``), outside them (``extrapolated``) or from the
profile's sourced facts (``sourced``) — :mod:`commmodel.collectives.provenance` applied to the step's own
messages (:func:`commmodel.step.evaluate.step_requests`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from commmodel.collectives.provenance import prediction_provenance
from commmodel.hardware.models import System
from commmodel.hardware.cluster import Cluster
from commmodel.step.evaluate import step_requests
from commmodel.step.layout import Layout, LayoutArrays
from commmodel.step.options import StepOptions
from commmodel.workload.model import TransformerModel


def step_provenance(model: TransformerModel, system: System, num_gpus: int, layout: Layout,
                    options: StepOptions | None = None) -> list[dict[str, Any]]:
    """One record per collective of the step that moves bytes between ≥ 2 ranks: its breakdown family and
    name ("tp/all_reduce", "dp/bucket_reduce_scatter", ...), op, size, group, and its provenance."""
    options = options or StepOptions()
    view = Cluster.for_gpus(system, num_gpus).system
    first = np.zeros(1, dtype=np.int64)
    requests = step_requests(model, view, LayoutArrays.from_layouts([layout]), options, first, first,
                             first if model.is_moe else None, first if model.is_moe else None)
    out = []
    for name, (op, size, ranks, per_node) in sorted(requests.items()):
        size_bytes, num_ranks = float(np.ravel(size)[0]), int(np.ravel(ranks)[0])
        if size_bytes <= 0 or num_ranks < 2:
            continue
        prov = prediction_provenance(view, size_bytes, num_ranks, int(np.ravel(per_node)[0]), options.library)[0]
        out.append({"collective": name, "op": op, "size_bytes": size_bytes, "num_ranks": num_ranks, **prov.record()})
    return out
