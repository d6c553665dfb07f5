"""The shapes of RCCL's tuner data: one ``struct tuningModel`` and one RCCL release's tables.

Data only (no arithmetic): :mod:`.rccl_tuning` holds the newest stored release's tables and the estimate,
:mod:`.rccl_2_20` the tables RCCL 2.20.5 (ROCm 6.2) shipped.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TuningModel:
    """One ``struct tuningModel`` of tuning.cc, as data (latencies in us, ratios unitless)."""

    hw_lat_us: dict[str, dict[str, tuple[float, float, float]]]
    """``hwLat[NVLINK | PCI | NET][Tree | Ring][LL, LL128, Simple]``."""
    bw_ratio: tuple[dict[str, tuple[float, float, float]], dict[str, tuple[float, float, float]]]
    """``bwRatio[0: ≤ 2 nodes | 1: more][Tree | Ring][LL, LL128, Simple]``."""
    tree_correction: dict[str, tuple[float, ...]]
    """``treeCorrectionFactor[protocol][log2i(S >> 6)]`` (27 columns)."""
    ring_correction: dict[str, tuple[float, ...]]
    """``ringCorrectionFactor[protocol][log2i(S >> 6)]`` (27 columns; applied across nodes only)."""
    ll_proto_ranges: dict[str, dict[str, tuple[int, int, int, int]]]
    """``llProtoRanges[coll][LL | LL128] = (min, max, factor, thread_threshold)`` (bytes per rank; min and max
    applied by :meth:`.rccl_tuning.RcclTunerView.protocol_override`, factor and thread threshold do not touch
    the protocol); empty for a release whose ``struct tuningModel`` has no such member (no override)."""
    source: str
    """The structure this is read from."""


@dataclass(frozen=True)
class RcclRelease:
    """What one RCCL release's tuner reads: its tuning models, which one each gfx target gets, its arch rules."""

    name: str
    """``--library`` name that selects it."""
    commit: str
    """The RCCL source it is read from (owner/repo@sha)."""
    models: dict[int, TuningModel]
    """``rcclTuningModel[]`` entries the AMD systems here use."""
    model_by_gfx: dict[str, int]
    """gfx target → ``system->tuning`` on an 8-GPU, 7-link xGMI node (set by the matched rome model)."""
    tree_simple_off_one_node: frozenset[str]
    """Archs whose tree/Simple the tuner skips when every rank of the communicator is on one node."""
    ll128_archs: frozenset[str]
    """Archs on which ``ncclTopoTuneModel`` may enable LL128 (``pEnable``; also needs the build's ENABLE_LL128 and
    the topology's ``ll128Enabled``, and a nonzero ``bwRatio`` cell, which the tables here decide)."""


__all__ = ["RcclRelease", "TuningModel"]
