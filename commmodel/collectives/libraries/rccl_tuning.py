"""RCCL's own time estimate per algorithm × protocol: what ``auto`` chooses by for ``--library rccl``.

RCCL keeps NCCL's tuner skeleton (time = latency + S / algbw, min over algorithm × protocol) but replaces
its constants with one of several measured *tuning models* (ROCm/rccl@9e22c79d ``src/graph/tuning.cc``,
``struct tuningModel`` and ``rcclTuningModel[]``), chosen per machine: the matched xGMI topology model sets
``tuning=N`` (``src/graph/rome_models.cc``) and gfx950 overrides it to 6. The differences from NCCL
(:mod:`..tuner`), each read from that file (HIP branch of ``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime``):

* busBw = graph bandwidth × ``bwRatio[nNodes ≤ 2 ? 0 : 1][algorithm][protocol]`` — one measured ratio
  per cell instead of NCCL's LL/LL128 fractions, per-channel caps and the 0.92 tree efficiency;
  busBw → algbw as NCCL (ring × n/nsteps, tree × 1/2).
* latency: ``baseLat`` (12/12/17 us) + the model's ``hwLat`` per hop: ring (nsteps − nInter)·intra +
  nInter·inter with nInter = 2(nNodes − 1) for all-reduce, nNodes − 1 for all-gather/reduce-scatter,
  intra ≥ the network post overhead across nodes (2 us on an AMD host, × 3 for Simple); tree
  2((n/nNodes − 1)·intra + log₂nNodes·inter); inter is the tree's NET latency with one rank per node.
* at run time: tree bandwidth × ``treeCorrectionFactor[protocol][log₂(S/64)]`` and, across nodes, ring
  bandwidth × ``ringCorrectionFactor`` (27 columns, 64 B … 4 GiB; the last column beyond) — NCCL has no
  ring factor and no plateau term here.
* tree/Simple is switched off on gfx942/gfx950 when every rank is on one node; no NVLS, no CollNet.
* at enqueue, across ≥ 2 nodes, ``llProtoRanges`` override the protocol of the pair chosen above (the
  algorithm stays): :meth:`RcclTunerView.protocol_override`, read from ``rcclUpdateCollectiveProtocol``
  (:data:`ENQUEUE_SOURCE`; 9e22c79d itself is not in the stored mirror, see there).

Not modelled: the graph's ``latencyInter`` is taken as 0 (the verbs plugin's reported NIC latency); LL128
runs where :meth:`GroupTopology.ll128_enabled` allows it (the physical model's rule, standing in for
``comm->topo->ll128Enabled`` and the ENABLE_LL128 build flag; RCCL sets it from the matched topology
model's options: none of the tuning=5 models at 0cbce2a7 does, a later stored rome_models.cc gives one
MI300X model ``ll128Enabled=1``, so the LL128 cells of the override may read Simple on some MI300X
machines); ``llProtoRanges``' thread threshold (it sets
the per-collective thread/channel threshold, ``rcclUpdateThreadThreshold``, not the protocol or the
price) and factor (read only by a commented-out line); the single-node LL thresholds later RCCL versions
add to the same function; broadcast/reduce ranges (their choice here is the physical one, not RCCL's).
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.libraries.rccl_2_20 import RELEASE_2_20
from commmodel.collectives.libraries.rccl_model import RcclRelease, TuningModel
from commmodel.collectives.protocols import PROTOCOL_INDEX
from commmodel.collectives.topology import GroupTopology
from commmodel.errors import CollectiveError
from commmodel.hardware.models import System

RCCL_COMMIT = "ROCm/rccl@9e22c79d8dccb80075967c2a03f1a921c253c867"
"""The RCCL source every table here is read from."""

TUNING_CC = f"{RCCL_COMMIT} src/graph/tuning.cc"
"""The tuner file."""

BASE_LAT_US = {"tree": (12.0, 12.0, 17.0), "ring": (12.0, 12.0, 17.0)}
"""tuning.cc ``baseLat[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]`` rows Tree and Ring (us)."""

NET_OVERHEAD_AMD_HOST_US = 2.0
"""tuning.cc ``getNetOverhead``: x86 AMD CPU 2.0 us (Intel 1.0); the MI300X platform's host is 2× EPYC 9374F
(mlcommons/inference_results_v4.1 closed/AMD/systems/8xMI300X_2xEPYC-9374F.json), assumed alike for MI325X/MI355X."""

SIMPLE_NET_OVERHEAD_FACTOR = 3.0
"""tuning.cc: ``if (p == NCCL_PROTO_SIMPLE) netOverhead *= 3``."""

TREE_SIMPLE_OFF_ONE_NODE = frozenset({"gfx942", "gfx950"})
"""tuning.cc: tree/Simple skipped on these archs when all the communicator's GPUs are on one node."""

CORRECTION_COLUMNS = 27
"""tuning.cc ``treeCorrectionFactor[p][27]``/``ringCorrectionFactor[p][27]``; logSize ≥ 27 reads column 26."""

GFX_TARGET = {"mi300x": "gfx942", "mi325x": "gfx942", "mi355x": "gfx950"}
"""GPU catalogue name → LLVM gfx target (ROCm docs, reference/gpu-arch-specs: MI300X and MI325X gfx942 (CDNA3),
MI355X gfx950 (CDNA4)). RCCL matches ``gpu.gcn`` against these names."""

MODEL_BY_GFX = {"gfx942": 5, "gfx950": 6}
"""Tuning model per arch on an 8-GPU, 7-link xGMI node: the matching topology models rome_model_79 / 81 / 84
(8 GPUs, nLinks 7) set ``tuning=5`` in their options (ROCm/rccl@0cbce2a7 src/graph/rome_models.cc lines 559,
815, 828); ``parseRome4P2H`` then sets ``system->tuning = 6`` on gfx950 (ROCm/rccl@008c53db rome_models.cc)."""

ENQUEUE_SOURCE = ("ROCm/rccl@00c78b702a0ebeb284bef5dd133d108c0ded48ed src/rccl_wrap.cc "
                  "rcclUpdateCollectiveProtocol, the nNodes >= 2 branch (lines 55-84)")
"""Where the protocol override is read. 9e22c79d (the tuning.cc commit) is not in the stored mirror (its newest
commit is 0cbce2a7, 2024-10-24) and the index holds this file only at 00c78b70, whose declaration and helpers
(``rcclGetSizePerRank``, ``rcclGetTunableIndex``) match 9e22c79d's src/include/rccl_common.h; the multi-node
branch reads the same ``minMaxLLRange`` that ``ncclTopoTuneModel`` copies from ``llProtoRanges`` at 9e22c79d
(``memcpy(comm->minMaxLLRange, rcclTuningModel[tuning].llProtoRanges, ...)``)."""

OVERRIDE_OPS = ("all_reduce", "all_gather", "reduce_scatter")
"""Collectives whose choice here is RCCL's and whose ranges the override reads (rcclUpdateCollectiveProtocol
also covers broadcast and reduce; their choice here is the physical optimum, so they are left alone)."""

PER_RANK_SIZE_OPS = frozenset({"all_gather", "reduce_scatter"})
"""``rcclGetSizePerRank``: all-gather/reduce-scatter compare nBytes / nRanks (one rank's shard of the full
buffer), all-reduce compares nBytes (``rcclGetSizePerRank``, ROCm/rccl@9e22c79d src/include/rccl_common.h; that
header also fixes ``RCCL_LL_LIMITS_UNDEFINED`` = 0 and the entry order min, max, factor, thread threshold)."""

ALL_REDUCE_LL128_MAX_SCALE = 3.8
"""rcclUpdateCollectiveProtocol: for all-reduce across more than 2 nodes ``ll128Max *= 3.8`` (a uint64, so the
product is truncated): "Tree has special behavior at 2 nodes"."""


_PCI = {"tree": (2.2, 2.2, 5.7), "ring": (2.2, 2.2, 5.7)}
_NVLINK_5_6 = {"tree": (0.9, 0.9, 2.3), "ring": (0.8, 0.8, 2.1)}
_NET_5_6 = {"tree": (10.5, 10.5, 25.0), "ring": (9.5, 9.5, 320.0)}
_BW_RATIO_5_6 = ({"tree": (0.06, 0.06, 0.11), "ring": (0.08, 0.08, 1.00)},
                 {"tree": (0.06, 0.06, 0.59), "ring": (0.08, 0.08, 1.00)})
_F = 0.1  # the tables' floor value, spelled once to keep the rows readable
_TREE_LL_5_6 = (_F,) * 6 + (1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 1.0, 0.9, 1.0, 1.0) + (_F,) * 11
_RING_LL_5_6 = (_F,) * 11 + (1.0, 0.2, 1.0, 0.4, 0.4, _F, 0.2, 0.2) + (_F,) * 8

TUNING_MODELS: dict[int, TuningModel] = {
    5: TuningModel(
        hw_lat_us={"nvlink": _NVLINK_5_6, "pcie": _PCI, "net": _NET_5_6},
        bw_ratio=_BW_RATIO_5_6,
        tree_correction={
            "LL": _TREE_LL_5_6, "LL128": _TREE_LL_5_6,
            "Simple": (_F,) * 15 + (0.7, 1.0, 1.0, 1.0, 1.0, 1.0, 0.7, 0.7, 0.5, 0.6, 0.6, 0.6)},
        ring_correction={
            "LL": _RING_LL_5_6, "LL128": _RING_LL_5_6,
            "Simple": (_F,) * 22 + (1.0, 0.8, 1.0, 1.0, 1.0)},
        ll_proto_ranges={"reduce_scatter": {"LL": (0, 655360, 1, 16), "LL128": (131072, 3211264, 1, 64)},
                         "all_gather": {"LL": (0, 98304, 1, 16), "LL128": (98304, 5046272, 1, 64)},
                         "all_reduce": {"LL": (0, 1048576, 1, 0), "LL128": (1048576, 9437184, 3145728, 0)}},
        source=f"{TUNING_CC} tuning_model_5"),
    6: TuningModel(
        hw_lat_us={"nvlink": _NVLINK_5_6, "pcie": _PCI, "net": _NET_5_6},
        bw_ratio=_BW_RATIO_5_6,
        tree_correction={
            "LL": _TREE_LL_5_6,
            "LL128": (_F,) * 6 + (1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 1.0, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0) + (_F,) * 7,
            "Simple": (_F,) * 15 + (0.7, 1.0, _F, _F, _F, 0.9, 0.9, 0.7, 0.8, 0.6, 0.6, 0.6)},
        ring_correction={
            "LL": _RING_LL_5_6,
            "LL128": (_F,) * 11 + (1.0, 0.2, 1.0, 0.4, 0.4, _F, 0.2) + (_F,) * 9,
            "Simple": (_F,) * 22 + (1.0, 0.8, 0.8, 1.0, 1.0)},
        ll_proto_ranges={"reduce_scatter": {"LL": (0, 131071, 1, 16), "LL128": (131071, 4194304, 1, 64)},
                         "all_gather": {"LL": (0, 7, 1, 16), "LL128": (7, 8388608, 1, 64)},
                         "all_reduce": {"LL": (0, 131071, 1, 0), "LL128": (131071, 17660227, 3145728, 0)},
                         "reduce": {"LL": (0, 16383, 1, 0), "LL128": (16383, 16777216, 1, 0)},
                         "broadcast": {"LL": (0, 2048, 1, 0), "LL128": (2048, 16777216, 1, 0)}},
        source=f"{TUNING_CC} tuning_model_6"),
}
"""The tuning models that apply to the AMD systems in hardware_profiles (gfx942: 5, gfx950: 6)."""

RELEASE_NEWEST = RcclRelease(
    name="rccl", commit=RCCL_COMMIT, models=TUNING_MODELS, model_by_gfx=MODEL_BY_GFX,
    tree_simple_off_one_node=TREE_SIMPLE_OFF_ONE_NODE, ll128_archs=frozenset({"gfx90a", "gfx942", "gfx950"}))
"""The newest stored source (``--library rccl``): its tables above; LL128 where :meth:`GroupTopology.ll128_enabled`
allows it (a later stored tuning.cc, with PAT rows, enables LL128 on gfx90a, gfx942 and gfx950 when the topology's
``ll128Enabled`` is set; rocm-6.2.0 and 0cbce2a7 enable it on gfx90a only)."""

RELEASES: dict[str, RcclRelease] = {r.name: r for r in (RELEASE_NEWEST, RELEASE_2_20)}
"""Every RCCL release whose tuner is transcribed, by ``--library`` name (:mod:`.rccl_2_20`: ROCm 6.2)."""


def gfx_target(system: System) -> str:
    """The system GPU's gfx target; an error for a GPU RCCL's tables here do not cover."""
    if system.gpu.name not in GFX_TARGET:
        raise CollectiveError(f"RCCL's tuner tables are transcribed for {', '.join(GFX_TARGET)} "
                              f"(gfx942/gfx950), not {system.gpu.name}; use --selection fastest")
    return GFX_TARGET[system.gpu.name]


def correction_column(size_bytes: np.ndarray) -> np.ndarray:
    """tuning.cc ``log2i(nBytes >> 6)`` clamped to the table (below 64 B: column 0; from 4 GiB: column 26)."""
    whole = np.floor(np.maximum(np.asarray(size_bytes, dtype=float), 64.0) / 64.0)
    return np.minimum(np.floor(np.log2(whole)), CORRECTION_COLUMNS - 1).astype(np.intp)


class RcclTunerView:
    """RCCL's estimate for one group (arrays), with :class:`..tuner.TunerView`'s ``ring``/``tree``/``estimate_s``."""

    def __init__(self, system: System, topo: GroupTopology, size_bytes: np.ndarray, release: str = "rccl"):
        self.topo = topo
        self.gfx = gfx_target(system)
        self.release = RELEASES[release]
        if self.gfx not in self.release.model_by_gfx:
            raise CollectiveError(f"{release} ({self.release.commit}) has no tuning model for {self.gfx} "
                                  f"({system.gpu.name}); use --library rccl")
        self.model = self.release.models[self.release.model_by_gfx[self.gfx]]
        self.n_nodes = topo.num_domains
        self.multi = self.n_nodes > 1
        self.ppn = topo.num_ranks / self.n_nodes
        self.row = np.where(self.n_nodes <= 2, 0, 1)
        self.column = correction_column(size_bytes)
        self.g_intra_gbps = topo.intra_bw(simplex=True) / 1e9
        self.g_inter_gbps = topo.inter_domain_bw() / 1e9

    def _pick(self, table: tuple[dict, dict], family: str, protocol: str) -> np.ndarray:
        """``bwRatio[row][family][protocol]`` element-wise (row 0 up to two nodes, 1 beyond)."""
        i = PROTOCOL_INDEX[protocol]
        return np.where(self.row == 0, table[0][family][i], table[1][family][i])

    def _hw_lat_us(self, family: str, protocol: str) -> tuple[float, np.ndarray]:
        """(intra, inter) hop latency: the scale-up class's row, the NET row (Tree's with one rank per node)."""
        i = PROTOCOL_INDEX[protocol]
        lat = self.model.hw_lat_us
        inter = np.where(self.ppn == 1, lat["net"]["tree"][i], lat["net"][family][i])
        return lat[self.topo.intra_hw][family][i], inter

    def _corrected(self, table: dict, protocol: str) -> np.ndarray:
        return np.asarray(table[protocol])[self.column]

    def ring(self, op: str, protocol: str, size: np.ndarray) -> np.ndarray:
        """Estimated ring time (s) for all-reduce, all-gather or reduce-scatter."""
        n = self.topo.num_ranks
        nsteps = 2.0 * (n - 1) if op == "all_reduce" else n - 1.0
        bus = np.minimum(self.g_intra_gbps, self.g_inter_gbps) * self._pick(self.model.bw_ratio, "ring", protocol)
        algbw = bus * n / nsteps * np.where(self.multi, self._corrected(self.model.ring_correction, protocol), 1.0)
        intra, inter = self._hw_lat_us("ring", protocol)
        overhead = NET_OVERHEAD_AMD_HOST_US * (SIMPLE_NET_OVERHEAD_FACTOR if protocol == "Simple" else 1.0)
        intra = np.where(self.multi, np.maximum(intra, overhead), intra)
        per_node_hops = 2.0 if op == "all_reduce" else 1.0
        n_inter = np.where(self.multi, per_node_hops * (self.n_nodes - 1), 0.0)
        lat_us = BASE_LAT_US["ring"][PROTOCOL_INDEX[protocol]] + (nsteps - n_inter) * intra + n_inter * inter
        return (lat_us + size / (1e3 * algbw)) * 1e-6

    def tree(self, protocol: str, size: np.ndarray) -> np.ndarray:
        """Estimated tree all-reduce time (s); inf where RCCL switches tree/Simple off."""
        bw = np.where(self.n_nodes > 2, self.g_inter_gbps,
                      np.where(self.n_nodes == 2, np.minimum(self.g_intra_gbps, 2.0 * self.g_inter_gbps),
                               self.g_intra_gbps))
        algbw = bw * self._pick(self.model.bw_ratio, "tree", protocol) * 0.5
        algbw = algbw * self._corrected(self.model.tree_correction, protocol)
        intra, inter = self._hw_lat_us("tree", protocol)
        per_node = np.floor(self.ppn)
        lat_us = BASE_LAT_US["tree"][PROTOCOL_INDEX[protocol]] + 2.0 * (
            (per_node - 1) * intra + np.floor(np.log2(self.n_nodes)) * inter)
        time_s = (lat_us + size / (1e3 * algbw)) * 1e-6
        off = (protocol == "Simple") & ~self.multi & (self.gfx in self.release.tree_simple_off_one_node)
        return np.where(off, np.inf, time_s)

    def protocol_override(self, op: str, size: np.ndarray) -> np.ndarray | None:
        """The protocol RCCL's enqueue step forces, per cell: a :data:`PROTOCOL_INDEX` code, −1 where it keeps
        the tuner's; None where it never applies (one node everywhere, an op outside :data:`OVERRIDE_OPS`).

        :data:`ENQUEUE_SOURCE`, with s = the size per rank (:data:`PER_RANK_SIZE_OPS`, integer division) and the
        model's ``llProtoRanges[op]`` = LL (min, max), LL128 (min, max): across ≥ 2 nodes, when either max is
        defined (≠ 0): Simple; LL where LL.min < s ≤ LL.max; then, where LL128 is enabled, LL128 where
        LL128.min < s ≤ LL128.max' (all-reduce above 2 nodes: max' = ⌊max × 3.8⌋, else max) — LL128 wins an
        overlap. The algorithm the tuner chose is kept. The entries' factor and thread threshold play no part.
        """
        ranges = self.model.ll_proto_ranges.get(op) if op in OVERRIDE_OPS else None  # none before 2.21
        if ranges is None or not np.any(self.multi):
            return None
        (ll_min, ll_max, _, _), (ll128_min, ll128_max, _, _) = ranges["LL"], ranges["LL128"]
        if ll_max == 0 and ll128_max == 0:  # RCCL_LL_LIMITS_UNDEFINED: the model sets no cut-offs
            return None
        whole = np.floor(np.asarray(size, dtype=float))
        per_rank = np.floor(whole / self.topo.num_ranks) if op in PER_RANK_SIZE_OPS else whole
        scaled_max = np.floor(ll128_max * ALL_REDUCE_LL128_MAX_SCALE) if op == "all_reduce" else ll128_max
        ll128_max = np.where(self.n_nodes > 2, scaled_max, ll128_max)
        forced = np.where((per_rank > ll_min) & (per_rank <= ll_max), PROTOCOL_INDEX["LL"], PROTOCOL_INDEX["Simple"])
        ll128_on = self.topo.ll128_enabled() & (self.gfx in self.release.ll128_archs)
        in_ll128 = (per_rank > ll128_min) & (per_rank <= ll128_max) & ll128_on
        forced = np.where(in_ll128, PROTOCOL_INDEX["LL128"], forced)
        return np.where(self.multi, forced, -1)

    def estimate_s(self, op: str, estimate, protocol: str, size: np.ndarray) -> np.ndarray | None:
        """RCCL's estimated time with a registry entry's estimate hook (ring/tree), None where not modelled."""
        if op not in ("all_reduce", "all_gather", "reduce_scatter") or estimate is None:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            return estimate(self, op, protocol, size)


RCCL_VIEWS = {name: (lambda system, topo, size, _name=name: RcclTunerView(system, topo, size, release=_name))
              for name in RELEASES}
"""Selection name → the estimate view of that release (what :func:`..api.collective_cost` builds for it)."""

__all__ = ["ALL_REDUCE_LL128_MAX_SCALE", "RCCL_VIEWS", "RELEASES", "RELEASE_NEWEST", "RcclRelease", "BASE_LAT_US", "ENQUEUE_SOURCE", "GFX_TARGET", "MODEL_BY_GFX",
           "OVERRIDE_OPS", "PER_RANK_SIZE_OPS", "RCCL_COMMIT", "RcclTunerView", "TUNING_MODELS",
           "TuningModel", "correction_column", "gfx_target"]
