"""Tidy records for the step-time scaling plot: the planner's best layout at each GPU count (no drawing)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from commmodel.hardware.models import System

from commmodel.hardware.cluster import Cluster

SCALING_COLUMNS = ("system", "num_gpus", "global_batch", "step_time_s", "tokens_per_s", "mfu", "best_layout",
                   "library")
"""Columns of :func:`step_scaling`."""


def step_scaling(model: Any, systems: Mapping[str, System] | Sequence[System], gpu_counts: Sequence[int],
                 global_batch: int | None = None, options: Any = None, space: Any = None) -> Any:
    """DataFrame of the best layout's step time and tokens/s for ``model`` at each GPU count of each system.

    One global batch for every point (default: the planner's default for the largest count), so step
    times compare like for like; counts where it does not divide, or where nothing fits, are left out (no count at
    all: no row, as the collective form gives for a range without a power of two).
    """
    import pandas as pd

    from commmodel.planner.explain import layout_label
    from commmodel.planner.search import default_global_batch, plan

    named = systems if isinstance(systems, Mapping) else {s.name: s for s in systems}
    counts = sorted({int(n) for n in gpu_counts})
    if not counts:
        return pd.DataFrame([], columns=list(SCALING_COLUMNS))
    if global_batch is None:
        first = next(iter(named.values()))
        largest = Cluster.for_gpus(first, counts[-1]).system
        global_batch = default_global_batch(model.num_params, model.seq_len, counts[-1], largest.gpus_per_node)
    rows = []
    for label, system in named.items():
        own = _own_library(options, system)
        for n in counts:
            try:
                result = plan(model, system, n, global_batch=global_batch, options=own, space=space)
            except ValueError:  # CommModelError or a pydantic error: this count does not exist on this system
                continue
            if not result.num_feasible:
                continue
            best = result.row(0)
            rows.append({"system": label, "num_gpus": n, "global_batch": global_batch,
                         "step_time_s": best["step_time_s"], "tokens_per_s": best["tokens_per_s"],
                         "mfu": best["mfu"], "best_layout": layout_label(best),
                         "library": own.library if own is not None else None})
    return pd.DataFrame(rows, columns=list(SCALING_COLUMNS))


def _own_library(options: Any, system: System) -> Any:
    """``options`` with a library ``system`` runs: the one given where it runs there (a host library runs on any
    system), else the system's own (NCCL's options handed over for an AMD system: RCCL). None stays None (plan's
    defaults resolve it per system)."""
    if options is None:
        return None
    from commmodel.collectives.libraries import resolve_library
    from commmodel.errors import CollectiveError

    try:
        return options.model_copy(update={"library": resolve_library(system, options.library)[0]})
    except CollectiveError:
        return options.model_copy(update={"library": resolve_library(system, None)[0]})
