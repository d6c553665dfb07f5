"""Where a layout's ranks sit, and what one point-to-point hop between two of them costs.

Megatron-LM numbers ranks tensor fastest, then context, data and pipeline (``RANK_ORDER``, as
picotron's ``arange(world).view(pp, dp, cp, tp)``): rank = tp_rank + tp·(cp_rank + cp·(dp_rank +
dp·pp_rank)). A parallel group is a run of consecutive axes of that order; its ranks are ``stride``
apart, the product of the axes before it. Nodes hold ``gpus_per_node`` consecutive ranks and NVLink
(scale-up) domains ``domain_size`` of them, so a group of n ranks with stride s has

    ranks per node   = clip(gpus_per_node // s, 1, n)
    ranks per domain = clip(domain_size // s, 1, n)
    crosses nodes    ⇔ n > 1 and n·s > gpus_per_node

(a TP group, stride 1, is packed inside a node: min(tp, gpus_per_node)). The gradient group is the
cp and dp axes together (cp ranks hold the same parameters, so gradients reduce over dp·cp); the
expert groups fold over the same tp·cp·dp ranks of a stage in their own order
(``EXPERT_RANK_ORDER``, Megatron-Core's expert ``RankGenerator`` "tp-ep-dp-pp" with tp = etp and
dp = edp = tp·cp·dp/(ep·etp), "parallel folding", arXiv:2504.14960 §3): an expert-TP group is etp
consecutive ranks, an EP group ep ranks etp apart, the expert data-parallel group edp ranks ep·etp
apart. Pipeline neighbours are one stride of pp, tp·cp·dp ranks, apart: some stage boundary leaves the
node as soon as the whole pipeline spans more than one node. Every function takes Python ints or
numpy arrays over layouts alike.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from commmodel.collectives.topology import group_topology
from commmodel.hardware.models import System

RANK_ORDER: tuple[str, ...] = ("tp", "cp", "dp", "pp")
"""Parallel axes from fastest-varying to slowest (Megatron-Core ``RankGenerator`` order "tp-cp-ep-dp-pp"
without ep; Megatron-LM ``parallel_state.initialize_model_parallel``)."""

GROUPS: dict[str, tuple[str, ...]] = {"tp": ("tp",), "cp": ("cp",), "dp": ("dp",), "grad": ("cp", "dp"),
                                      "pp": ("pp",)}
"""Group name -> the consecutive axes of :data:`RANK_ORDER` it spans ("grad": the gradient group, dp·cp)."""

EXPERT_RANK_ORDER: tuple[str, ...] = ("etp", "ep", "edp")
"""Expert axes inside one pipeline stage, fastest first (Megatron-Core ``parallel_state`` expert
``RankGenerator(tp=expert_tensor_parallel_size, ep=expert_model_parallel_size, dp=expert_data_parallel_size,
order="tp-ep-dp-pp")``); they fold over the stage's tp·cp·dp ranks."""


class Placement:
    """The rank placement of one or many layouts (degrees as ints or equal-shape arrays)."""

    def __init__(self, system: System, *, tp: np.ndarray | int = 1, cp: np.ndarray | int = 1,
                 dp: np.ndarray | int = 1, pp: np.ndarray | int = 1, ep: np.ndarray | int = 1,
                 etp: np.ndarray | int = 1) -> None:
        self.gpus_per_node = system.gpus_per_node
        self.domain_size = system.scale_up.domain_size
        self.degrees = {"tp": np.asarray(tp), "cp": np.asarray(cp), "dp": np.asarray(dp), "pp": np.asarray(pp)}
        self._expert_axes = (ep, etp)

    @cached_property
    def expert_degrees(self) -> dict[str, np.ndarray]:
        """Degrees of :data:`EXPERT_RANK_ORDER`: etp, ep and edp = tp·cp·dp/(ep·etp) (derived on first use)."""
        ep, etp = self._expert_axes
        stage = self.degrees["tp"] * self.degrees["cp"] * self.degrees["dp"]
        fold = np.asarray(ep) * np.asarray(etp)
        return {"etp": np.asarray(etp), "ep": np.asarray(ep), "edp": np.maximum(stage // fold, 1)}

    def _axes(self, group: str) -> tuple[str, ...]:
        if group in EXPERT_RANK_ORDER:
            return (group,)
        if group not in GROUPS:
            raise ValueError(f"group {group!r}: use one of {', '.join(GROUPS)}, {', '.join(EXPERT_RANK_ORDER)}")
        return GROUPS[group]

    def _order(self, group: str) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
        if group in EXPERT_RANK_ORDER:
            return EXPERT_RANK_ORDER, self.expert_degrees
        return RANK_ORDER, self.degrees

    def size(self, group: str) -> np.ndarray:
        """Ranks in one group: the product of its axes' degrees."""
        degrees = self._order(group)[1]
        axes = self._axes(group)
        out = degrees[axes[0]]
        for axis in axes[1:]:
            out = out * degrees[axis]
        return out

    def stride(self, group: str) -> np.ndarray:
        """Rank distance between neighbours of the group: the product of the axes before it (in
        :data:`RANK_ORDER`, or :data:`EXPERT_RANK_ORDER` for "etp", "ep", "edp")."""
        order, degrees = self._order(group)
        first = order.index(self._axes(group)[0])
        out = np.ones((), dtype=np.int64)
        for axis in order[:first]:
            out = out * degrees[axis]
        return out

    def ranks_per_node(self, group: str) -> np.ndarray:
        """Ranks of one group inside one node: clip(gpus_per_node // stride, 1, size)."""
        return np.clip(self.gpus_per_node // self.stride(group), 1, self.size(group))

    def ranks_per_domain(self, group: str) -> np.ndarray:
        """Ranks of one group inside one NVLink (scale-up) domain: clip(domain_size // stride, 1, size)."""
        return np.clip(self.domain_size // self.stride(group), 1, self.size(group))

    def crosses_domains(self, group: str) -> np.ndarray:
        """Whether the group leaves its NVLink (scale-up) domain as priced: fewer of its ranks per domain than its
        size (groups aligned to domains; :meth:`straddles_domain` says where they cannot all be)."""
        return self.ranks_per_domain(group) < self.size(group)

    def straddles_domain(self, group: str) -> np.ndarray:
        """Whether some group of the job, small enough for one domain, still straddles a domain boundary: groups
        tile the ranks in blocks of size × stride consecutive ranks, so where that span does not divide the domain
        (64 of 72 on an NVL72 rack) and the job is larger than one domain, the block holding rank ``domain_size``
        (and others) lies across two domains. :meth:`ranks_per_domain` assumes aligned groups and does not see it."""
        span = self.size(group) * self.stride(group)
        world = self.degrees["tp"] * self.degrees["cp"] * self.degrees["dp"] * self.degrees["pp"]
        return (self.size(group) > 1) & (span < self.domain_size) & (self.domain_size % span != 0) & (
            world > self.domain_size)

    def crosses_nodes(self, group: str) -> np.ndarray:
        """Whether the group leaves its node: size > 1 and size × stride > gpus_per_node."""
        size = self.size(group)
        return (size > 1) & (size * self.stride(group) > self.gpus_per_node)


def tp_ranks_per_node(system: System, tp: np.ndarray) -> np.ndarray:
    """A TP group packed inside nodes: min(tp, gpus_per_node)."""
    return Placement(system, tp=tp).ranks_per_node("tp")


def dp_ranks_per_node(system: System, tp: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """A data-parallel (or gradient, dp·cp, or expert) group of ``dp`` ranks strided by tp:
    clip(gpus_per_node // tp, 1, dp)."""
    return Placement(system, tp=tp, dp=dp).ranks_per_node("dp")


def tier_alpha_bw(system: System, num_ranks: np.ndarray, ranks_per_node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(latency α in s, bandwidth B in bytes/s per rank) of the tier a group's transfers use: the
    scale-out network where the group spans scale-up domains, else the scale-up link."""
    topo = group_topology(system, num_ranks, ranks_per_node)
    bw = np.where(topo.spans_domains, topo.inter_bw_per_rank_bytes_per_s, topo.intra_bw_bytes_per_s)
    alpha = np.where(topo.spans_domains, topo.inter_latency_s, topo.intra_latency_s)
    return alpha, bw


def p2p_hop_s(system: System, size_bytes: np.ndarray, crosses_nodes: np.ndarray) -> np.ndarray:
    """One send/recv of ``size_bytes`` between two ranks, on different nodes where ``crosses_nodes``:
    T = α + S/B on the hop's tier (DESIGN §4 send/recv; :func:`tier_alpha_bw` of a 2-rank group, so a hop
    between nodes of one multi-node NVLink domain such as NVL72 stays on NVLink). ``size_bytes`` may
    carry extra leading axes (several sizes per hop)."""
    crosses = np.asarray(crosses_nodes, dtype=bool)
    alpha, bw = tier_alpha_bw(system, np.full(crosses.shape, 2.0), np.where(crosses, 1, 2))
    return alpha + np.asarray(size_bytes, dtype=float) / bw
