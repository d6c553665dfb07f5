"""A measured group as commmodel's collective model sees it: where its ranks sat, which tier it exercises, which
group calibrates each tier, which rows set bandwidth and latency, and what the model predicts and picks for it
(the algorithm × protocol ``commmodel collective`` would choose). Used by the fit (:mod:`apply`), the check
(:mod:`check`) and the plots; pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from commmodel.calibrate.fit import BANDS, FitResult, band_masks
from commmodel.calibrate.regimes import switch_note
from commmodel.collectives import collective_cost
from commmodel.errors import CommModelError
from commmodel.hardware.cluster import Cluster
from commmodel.hardware.models import System

BOUND_SHARE = 0.5
"""A row is bandwidth-bound (latency-bound) when the fitted bandwidth (latency) term is at least this share."""


@dataclass(frozen=True)
class MeasuredGroup:
    """One fitted group with where its ranks sat."""

    fit: FitResult
    """The α-β fit."""
    num_nodes: int
    """Nodes the group spanned."""
    ranks_per_node: int
    """Ranks of the group in each node."""


def pricing_selection(system: System) -> str:
    """How ``commmodel collective`` chooses the algorithm × protocol on ``system`` by default: NCCL's own
    tuner estimate (``nccl``) where it can price the GPU (a CUDA compute capability), else the fastest pair
    (AMD and CPU hosts, until the library axis gives them their own rules). The fit solves against it."""
    return "nccl" if system.gpu.compute_capability is not None else "fastest"


def group_view(system: System, group: MeasuredGroup) -> System:
    """The system as a group of this many ranks and ranks per node sees it (``Cluster.for_gpus``)."""
    return Cluster.for_gpus(system, group.fit.num_ranks, group.ranks_per_node).system


def model_algorithm(system: System, group: MeasuredGroup) -> str:
    """The registry algorithm matching the measurement's forced one, else ``auto``."""
    name = group.fit.algorithm.strip().lower()
    if name in {"", "auto"}:
        return "auto"
    try:
        view = group_view(system, group)
        collective_cost(group.fit.op, 1.0, view, group.fit.num_ranks,
                        ranks_per_node=group.ranks_per_node, algorithm=name, selection=pricing_selection(view))
    except CommModelError:
        return "auto"
    return name


def group_cost(system: System, group: MeasuredGroup, sizes_bytes: np.ndarray, algorithm: str) -> Any:
    """The group's op at ``sizes_bytes`` on ``system``, chosen and priced as ``commmodel collective`` does
    (:func:`pricing_selection`): the one collective_cost call of every helper here."""
    view = group_view(system, group)
    return collective_cost(group.fit.op, np.asarray(sizes_bytes, dtype=float), view, group.fit.num_ranks,
                           ranks_per_node=group.ranks_per_node, algorithm=algorithm, selection=pricing_selection(view))


def model_times_s(system: System, group: MeasuredGroup, sizes_bytes: np.ndarray, algorithm: str) -> np.ndarray:
    """commmodel's predicted times for the group's op at ``sizes_bytes``, chosen and priced as
    ``commmodel collective`` does (:func:`pricing_selection`)."""
    return np.asarray(group_cost(system, group, sizes_bytes, algorithm).time_s, dtype=float)


def unmodelled_reason(system: System, group: MeasuredGroup) -> str:
    """Why commmodel cannot price this group on ``system`` ("" when it can)."""
    try:
        model_times_s(system, group, np.array([group.fit.sizes_bytes[-1]]), model_algorithm(system, group))
    except CommModelError as err:
        return str(err)
    return ""


def tier_of(system: System, group: MeasuredGroup) -> str:
    """Which tier a group exercises: scale_out when it spans scale-up domains."""
    from commmodel.collectives.topology import group_topology

    topo = group_topology(group_view(system, group), group.fit.num_ranks, group.ranks_per_node)
    return "scale_out" if bool(np.any(topo.spans_domains)) else "scale_up"


def isolates_tier(system: System, group: MeasuredGroup, tier: str) -> bool:
    """Whether ``group`` exercises ``tier`` alone: any group inside one domain; one rank per node across.

    A multi-node run with ``--groups all,intra,inter`` measures each tier separately: the intra-node
    groups see only NVLink/PCIe, the one-rank-per-node groups only the NICs. The whole-job group mixes
    both tiers, so it sets scale-out only when no one-rank-per-node group was measured.
    """
    if tier == "scale_up":
        return True  # tier_of already found it inside one scale-up domain
    return group.ranks_per_node == 1


def primary_groups(system: System, groups: list[MeasuredGroup]) -> dict[str, MeasuredGroup]:
    """The group that calibrates each tier.

    Preference, in order: a group that isolates the tier (:func:`isolates_tier`), all-reduce, most
    ranks, auto/ring over forced algorithms, most points.
    """
    best: dict[str, tuple[tuple, MeasuredGroup]] = {}
    for group in groups:
        fit = group.fit
        tier = tier_of(system, group)
        rank = (isolates_tier(system, group, tier), fit.op == "all_reduce", fit.num_ranks,
                fit.algorithm.lower() in {"auto", "ring"}, len(fit.sizes_bytes))
        if tier not in best or rank > best[tier][0]:
            best[tier] = (rank, group)
    return {tier: entry[1] for tier, entry in best.items()}


def bandwidth_rows(fit: FitResult) -> np.ndarray:
    """Rows that calibrate and check bandwidth: ≥ 64 MiB in the largest regime, else its bandwidth-bound rows."""
    last = fit.bandwidth_segment
    sizes = fit.sizes_bytes
    in_last = sizes >= last.size_min_bytes
    rows = in_last & band_masks(sizes)[BANDS[-1]]
    if not rows.any():
        share = last.slope_s_per_byte * sizes / last.predict_s(sizes)
        rows = in_last & (share >= BOUND_SHARE)
    if not rows.any():
        rows = sizes == sizes.max()
    return rows


def latency_rows(fit: FitResult) -> np.ndarray:
    """Rows that calibrate latency: the smallest regime's rows whose fitted latency term is ≥ 50% of the time."""
    first = fit.latency_segment
    sizes = fit.sizes_bytes
    if fit.bandwidth_only:
        return np.zeros(len(sizes), dtype=bool)
    return (sizes <= first.size_max_bytes) & (first.intercept_s >= BOUND_SHARE * first.predict_s(sizes))


def model_protocols(system: System, group: MeasuredGroup, sizes_bytes: np.ndarray, algorithm: str) -> np.ndarray:
    """The protocol ``commmodel collective`` picks for each size of the group."""
    cost = group_cost(system, group, sizes_bytes, algorithm)
    return np.broadcast_to(np.asarray(cost.protocol), np.shape(sizes_bytes))


def selection_note(system: System, group: MeasuredGroup) -> str | None:
    """:func:`regimes.switch_note` for ``group`` priced on the (calibrated) ``system``."""
    cost = group_cost(system, group, group.fit.sizes_bytes, model_algorithm(system, group))
    shape = np.shape(group.fit.sizes_bytes)
    choices = np.char.add(np.char.add(np.broadcast_to(np.asarray(cost.algorithm, dtype=str), shape), "/"),
                          np.broadcast_to(np.asarray(cost.protocol, dtype=str), shape))
    return switch_note(group.fit, np.asarray(cost.time_s, dtype=float), choices)
