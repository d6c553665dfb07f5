"""The element-wise choice of a collective's algorithm × protocol: each candidate priced by its physics, scored by
the library's own estimate (NCCL's tuner, an RCCL release's) or by that time, the winner picked per element.

:func:`best` is what :func:`.api.collective_cost` and :func:`.api.collective_times` share; the winner travels as an
integer code into its labels and names are built once (:func:`names`). :func:`protocol_mask` says where a protocol may
run (the fabric's software, NCCL's LL128 rule, point-to-point across the network).
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.algorithms import ALGORITHMS, NET_SIMPLE_ONLY, AlgoCost, Algorithm
from commmodel.collectives.primitives import REDUCTION_BYTES_PER_BYTE
from commmodel.collectives.protocols import PROTOCOLS
from commmodel.collectives.topology import GroupTopology
from commmodel.collectives.tuner import TunerView



def protocol_mask(algo: Algorithm, protocol: str, topo: GroupTopology) -> np.ndarray | None:
    """Where ``algo`` may run with ``protocol``: across domains only what the fabric's software allows
    (``scale_out.nccl_protocols``), LL128 only where NCCL enables it; point-to-point patterns use Simple once they
    cross the network. None: everywhere (no mask to apply)."""
    mask = topo.protocol_allowed(protocol)
    if protocol == "LL128":
        mask = topo.ll128_enabled() if mask is None else mask & topo.ll128_enabled()
    if algo.name in NET_SIMPLE_ONLY and protocol != "Simple":
        mask = ~topo.spans_domains if mask is None else mask & ~topo.spans_domains
    return mask


NONE_CODE = -1
"""Winner code of a single-rank group (nothing to do): its algorithm and protocol read "none"."""


def shaped(values: np.ndarray | float, shape: tuple) -> np.ndarray:
    """``values`` as an array of ``shape``: itself when it already has it (most candidates), else broadcast."""
    return values if getattr(values, "shape", None) == shape else np.broadcast_to(values, shape)


def best(op: str, size: np.ndarray, topo: GroupTopology, found: dict[str, np.ndarray], shape: tuple,
          protocol: str, include_reduction: bool, tuner: TunerView | None = None) -> tuple[np.ndarray, ...]:
    """Element-wise choice over algorithms × protocols: (latency, bandwidth, winner code, labels, bytes).

    Each candidate's score is stacked and ``argmin`` picks the winner (the first on ties). The score is
    NCCL's tuner estimate where ``tuner`` models the candidate (its physical time elsewhere), or the
    physical time when ``tuner`` is None; the reported time is always the physical one. The winner
    travels as an integer code into ``labels`` (code 0 = no candidate applies), names are built once
    at the end by :func:`names`.
    """
    labels: list[tuple[str, str]] = [("", "")]
    rows: list[list[np.ndarray]] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for name, mask in found.items():
            algo = ALGORITHMS[name]
            for proto in algo.protocols:
                if protocol not in ("auto", proto):
                    continue
                rule = protocol_mask(algo, proto, topo)
                where = mask if rule is None else mask & rule  # mask holds somewhere (applicable)
                if rule is not None and not where.any():
                    continue
                labels.append((name, proto))
                rows.append(_priced(op, size, topo, algo, proto, where, include_reduction, tuner))
    if not rows:
        inf = np.full(shape, np.inf)
        return inf, inf, np.zeros(shape, dtype=np.intp), labels, np.full(shape, np.nan)
    table = _candidate_table(rows, shape)
    pick = np.argmin(table[:, 1], axis=0)
    forced = None if tuner is None else tuner.protocol_override(op, size)
    if forced is not None:
        pick = forced_protocol(pick, np.broadcast_to(forced, shape), labels, table[:, 0])
    total, _, latency, bandwidth, moved = np.take_along_axis(table, pick[None, None], axis=0)[0]
    found_any = np.isfinite(total)
    code = np.where(found_any, pick + 1, 0)
    return (np.where(found_any, latency, np.inf), np.where(found_any, bandwidth, np.inf), code, labels,
            np.where(found_any, moved, np.nan))


def _candidate_table(rows: list[list[np.ndarray]], shape: tuple) -> np.ndarray:
    """One array: candidate × (total, score, latency, bandwidth, bytes) × the groups' ``shape``."""
    try:  # every value already has the groups' shape (the step model's calls): no broadcasting
        table = np.array(rows)
    except ValueError:  # numpy refuses values of different shapes
        table = None
    if table is None or table.shape[2:] != shape:
        table = np.array([[shaped(value, shape) for value in row] for row in rows])
    return table


def _priced(op: str, size: np.ndarray, topo: GroupTopology, algo: Algorithm, proto: str, where: np.ndarray,
            include_reduction: bool, tuner: TunerView | None) -> list[np.ndarray]:
    """[total, score, latency, bandwidth, bytes] of one algorithm × protocol; total and score are inf where it
    may not run (not ``where``) or prices NaN."""
    priced: AlgoCost = algo.cost(op, size, topo, proto)
    latency = priced.latency_s
    if proto == "Simple":  # calibrated pipeline fill / proxy cost of large messages, per tier
        latency = latency + topo.simple_fixed_s
    bw = priced.bandwidth_s
    if include_reduction:
        bw = bw + priced.reduced_bytes_per_rank * (REDUCTION_BYTES_PER_BYTE / topo.hbm_bw_bytes_per_s)
    total = latency + bw
    total = np.where(where & (total == total), total, np.inf)  # NaN and masked-out never win
    score = tuner.estimate_s(op, algo.nccl_estimate, proto, size) if tuner is not None else None
    score = total if score is None else np.where(np.isfinite(total) & (score == score), score, np.inf)
    return [total, score, latency, bw, priced.bytes_per_rank]


def forced_protocol(pick: np.ndarray, forced: np.ndarray, labels: list[tuple[str, str]],
                     totals: np.ndarray) -> np.ndarray:
    """``pick`` moved to the same algorithm with the ``forced`` protocol (a :data:`.protocols.PROTOCOL_INDEX` code,
    −1: keep) where that pair is a candidate that runs here; elsewhere the tuner's pick stays (the override's pair
    unpriced)."""
    pairs = labels[1:]
    # target[k, p]: index of (algorithm of pair k, protocol p) among the candidates, −1 if none
    target = np.array([[pairs.index((a, p)) if (a, p) in pairs else -1 for p in PROTOCOLS] for a, _ in pairs])
    moved = target[pick, np.maximum(forced, 0)]
    ok = (forced >= 0) & (moved >= 0)
    moved = np.where(ok, moved, pick)
    runs = np.isfinite(np.take_along_axis(totals, moved[None], 0)[0])
    return np.where(ok & runs, moved, pick)


def names(code: np.ndarray, labels: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    """(algorithm, protocol) name arrays from winner codes; :data:`NONE_CODE` reads "none"."""
    algos = np.array([a for a, _ in labels] + ["none"], dtype=object)
    protos = np.array([p for _, p in labels] + ["none"], dtype=object)
    # NONE_CODE = -1 indexes the trailing "none"; asarray keeps 0-d results arrays
    return np.asarray(algos[code], dtype=object), np.asarray(protos[code], dtype=object)
