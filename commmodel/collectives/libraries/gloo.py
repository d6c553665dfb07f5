"""gloo (torch.distributed's CPU backend): its algorithms, torch's choice, TCP transport, CPU reduction.

Algorithms (facebookincubator/gloo@cc441984 ``gloo/``): all-reduce ``allreduce_ring.h``,
``allreduce_ring_chunked.h``, ``allreduce_halving_doubling.h`` (Rabenseifner's reduce-scatter by halving +
all-gather by doubling), ``allreduce_bcube.h`` and the newer ``allreduce.cc`` (ring or bcube);
``broadcast.cc`` a binomial tree (``for (i < dim)`` rounds over virtual ranks); ``allgather.cc`` a ring;
``alltoall.cc`` direct pairwise exchange; ``barrier`` a dissemination pattern.

torch's choice: ``ProcessGroupGloo::allreduce`` (pytorch/pytorch torch/csrc/distributed/c10d/
ProcessGroupGloo.cpp, ``AsyncAllreduceWork::allreduce``) builds ``gloo::AllreduceOptions`` without
``setAlgorithm``, so ``gloo/allreduce.cc`` (@cc441984, ``switch (opts.algorithm)``: ``UNSPECIFIED`` falls
through to ``RING``) runs the ring — for every size and rank count. GPU tensors are copied to pinned host
memory first (``AsyncAllreduceCUDAWork``) and back after.

Transport: gloo's TCP pairs, one socket per peer. Inside a host: loopback TCP; across hosts: TCP over
the NIC (IPoIB or Ethernet), one stream per peer, each stream bounded by the CPU copies of one core.
"""

from __future__ import annotations

import numpy as np

from commmodel.collectives.libraries.host import Transport
from commmodel.collectives.libraries.rules import DecisionTable, always
from commmodel.hardware.models import System

TORCH_GLOO_ALLREDUCE_SOURCE = ("pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupGloo.cpp AsyncAllreduceWork "
                               "(no setAlgorithm) + facebookincubator/gloo@cc441984 gloo/allreduce.cc "
                               "(UNSPECIFIED -> ring)")

GLOO_RULES: dict[str, DecisionTable] = {
    "all_reduce": always("ring", TORCH_GLOO_ALLREDUCE_SOURCE),
    "broadcast": always("binomial_tree", "facebookincubator/gloo@cc441984 gloo/broadcast.cc (binomial rounds)"),
    "all_gather": always("ring", "facebookincubator/gloo@cc441984 gloo/allgather.cc (ring)"),
    "reduce_scatter": always("ring", "pytorch ProcessGroupGloo reduce_scatter: gloo reduce_scatter (ring)"),
    "reduce": always("binomial_tree", "facebookincubator/gloo@cc441984 gloo/reduce.cc"),
    "all_to_all": always("pairwise", "facebookincubator/gloo@cc441984 gloo/alltoall.cc (direct pairs)"),
    "gather": always("pairwise", "facebookincubator/gloo@cc441984 gloo/gather.cc (every rank to the root)"),
    "scatter": always("pairwise", "facebookincubator/gloo@cc441984 gloo/scatter.cc (the root to every rank)"),
    "send_recv": always("p2p", "one TCP pair"),
    "barrier": always("dissemination", "facebookincubator/gloo@cc441984 gloo/barrier.cc"),
}
"""What torch.distributed with gloo runs, per primitive."""

GLOO_ALGORITHMS = frozenset({"ring", "ring_chunked", "halving_doubling", "bcube", "binomial_tree", "pairwise",
                             "p2p", "dissemination"})
"""gloo's own algorithms (``--algo NAME`` may force any that implements the op)."""

LOOPBACK_TCP_LATENCY_S = 23e-6
"""One message over loopback TCP: the catalogue's ``loopback-tcp`` link (hardware_profiles/links.yaml, measured
on the commmodel development VM, 1-byte ping-pong, median half round trip); a test keeps them equal."""

LOOPBACK_TCP_BW_BYTES_PER_S = 2.7e9
"""One loopback TCP stream: the catalogue's ``loopback-tcp`` rate (best of 10 × 64 MiB on the development VM)."""

TCP_STREAM_BW_BYTES_PER_S = LOOPBACK_TCP_BW_BYTES_PER_S
"""A TCP stream across hosts is bounded like one over loopback by one core's kernel copies (assumed equal)."""

PCIE5_STAGING_BW_BYTES_PER_S = 55.4e9
"""Pinned host↔device copy over PCIe Gen5 x16: nvbandwidth 55.4 of 63 GB/s (hardware_profiles/links.yaml,
pcie notes [HF §2]); used for GPU tensors staged through host memory."""

DEFAULT_HOST_MEMORY_BW_BYTES_PER_S = 614.4e9
"""Host memory bandwidth of a dual-socket GPU server when its profile omits it: 2 sockets × 8 channels ×
DDR5-4800 × 8 B = 614.4 GB/s (Intel Xeon Platinum 8480+ spec, ark.intel.com: 8 channels DDR5-4800; the DGX H100
carries two)."""

REDUCE_TRAFFIC_BYTES_PER_BYTE = 3.0
"""A CPU reduction of one byte reads two operands and writes one result."""


def host_memory_bw_per_rank(system: System) -> float:
    """One rank's share of host memory bandwidth (CPU hosts: their per-rank DDR share is the 'GPU' memory)."""
    if system.scale_up.kind == "host_loopback":
        return system.gpu.hbm_bw_bytes_per_s.value
    node = (system.host_memory_bw_bytes_per_s.value if system.host_memory_bw_bytes_per_s is not None
            else DEFAULT_HOST_MEMORY_BW_BYTES_PER_S)
    return node / system.gpus_per_node


def gloo_transport(system: System, spans_nodes: np.ndarray, ranks_per_node: np.ndarray) -> Transport:
    """α, β, γ of gloo: loopback TCP inside a host (the profile's own link on a CPU host), TCP over the NIC across."""
    cpu = system.scale_up.kind == "host_loopback"
    intra_s = system.scale_up.latency_s.value if cpu else LOOPBACK_TCP_LATENCY_S
    intra_bw = system.scale_up.effective_bw_bytes_per_s if cpu else LOOPBACK_TCP_BW_BYTES_PER_S
    out = system.scale_out
    if out is None:
        inter_s, inter_bw = np.inf, 0.0
    else:
        inter_s = out.latency_s.value + intra_s  # the fabric plus the TCP stack's per-message cost
        inter_bw = np.minimum(out.node_bw_bytes_per_s / ranks_per_node, TCP_STREAM_BW_BYTES_PER_S)
    return Transport(
        message_s=np.where(spans_nodes, inter_s, intra_s),
        bw_bytes_per_s=np.where(spans_nodes, np.minimum(inter_bw, intra_bw), intra_bw),
        reduce_bw_bytes_per_s=host_memory_bw_per_rank(system) / REDUCE_TRAFFIC_BYTES_PER_BYTE,
        staging_bw_bytes_per_s=np.inf if cpu else PCIE5_STAGING_BW_BYTES_PER_S,
    )
