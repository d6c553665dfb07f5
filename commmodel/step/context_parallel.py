"""Context parallelism's K/V exchange in one training step, vectorised over layouts: Megatron-Core's ring
(``cp_comm_type="p2p"``) or PyTorch's ``context_parallel`` as torchtitan runs it (all-gathered K/V, fp32 dK/dV
passed every ring step). Which one a stack uses is ``StepOptions.cp_comm``; send/recv hops are priced by
:func:`commmodel.step.placement.p2p_hop_s`."""

from __future__ import annotations

import numpy as np

from commmodel.hardware.models import System
from commmodel.step.placement import Placement, p2p_hop_s
from commmodel.workload.model import TransformerModel
from commmodel.workload.stages import stage_layers


def context_parallel_s(model: TransformerModel, system: System, local_micro_batch: np.ndarray, tp: np.ndarray,
                       cp: np.ndarray, pp: np.ndarray, recompute: np.ndarray,
                       attention_core_s: np.ndarray, method: str = "ring",
                       overlap: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(link, exposed) seconds of context parallelism's K/V ring for one micro-batch on one stage.

    Ring attention (Liu et al. 2023, arXiv:2310.01889; Megatron-Core ``cp_comm_type="p2p"``): each of
    the cp ranks holds s/cp tokens; per block, forward, cp − 1 steps each send the local K and V block
    to the next rank and receive the previous one's, S = (b·s/cp)·2·kv_local·e bytes
    (kv_local = max(kv_heads/tp, 1)·head_dim: GQA keeps it small), while the attention of the block in
    hand runs; backward sends K, V and their gradients, 2·S per step, behind twice the block's compute.
    Recompute (selective or full) redoes the forward ring. One step costs α + S/B on the hop the
    ring uses: it leaves the node when tp·cp > gpus_per_node. With c = attention core forward / cp
    (one block's compute), per block:

        link    = (cp − 1)·(t(S)·(1 + r) + t(2S))
        exposed = (cp − 1)·(max(0, t(S) − c)·(1 + r) + max(0, t(2S) − 2c))

    r = 1 with recompute, else 0; × ⌈l/p⌉ blocks. ``local_micro_batch`` is b/cp (tokens per rank / s).
    ``method="torch-allgather"`` prices PyTorch's ``context_parallel`` instead (:func:`torch_allgather_cp_s`).
    Without ``overlap`` (``StepOptions.cp_comm_overlap``) nothing hides: exposed = link.
    """
    c = np.asarray(cp, dtype=float)
    t = np.asarray(tp, dtype=float)
    heads = model.num_heads if method == "torch-allgather" else model.num_kv_heads  # torchtitan repeats K/V heads
    kv_local = np.maximum(heads / t, 1.0) * model.head_dim
    size = np.asarray(local_micro_batch, dtype=float) * model.seq_len * 2.0 * kv_local * model.dtype_bytes
    link = np.zeros(np.shape(size))
    exposed = np.zeros(np.shape(size))
    ring = c > 1
    if np.any(ring):
        spans_node = Placement(system, tp=t, cp=c).crosses_nodes("cp")[ring]
        one, two = p2p_hop_s(system, np.stack([size[ring], 2.0 * size[ring]]), spans_node)
        block = np.broadcast_to(np.asarray(attention_core_s, dtype=float), np.shape(size))[ring] / c[ring]
        redo = np.where(np.broadcast_to(np.asarray(recompute), np.shape(size))[ring] > 0, 2.0, 1.0)
        layers = stage_layers(model, np.broadcast_to(np.asarray(pp), np.shape(size))[ring])
        if method == "torch-allgather":
            link[ring], exposed[ring] = torch_allgather_cp_s(one, two, block, redo, c[ring])
            link[ring], exposed[ring] = layers * link[ring], layers * exposed[ring]
        else:
            steps = (c[ring] - 1.0) * layers
            link[ring] = steps * (one * redo + two)
            exposed[ring] = steps * (np.maximum(one - block, 0.0) * redo + np.maximum(two - 2.0 * block, 0.0))
    return link, (exposed if overlap else link.copy())


def torch_allgather_cp_s(one: np.ndarray, two: np.ndarray, block: np.ndarray, redo: np.ndarray,
                         cp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(link, exposed) seconds per block of PyTorch's ``context_parallel`` as torchtitan runs it.

    torchtitan (@9dec370, the [TT-H100] tables' commit) sets ``rotate_method="allgather"`` (config_manager.py
    ``--experimental.context_parallel_rotate_method``, default 'allgather': "all-gather all kv shards on ranks after
    the first sub-SDPA computation") and hands SDPA K/V already repeated to every query head (models/llama/model.py
    L201-209, ``repeat_kv``), so one rank's shard is S = (b·s/cp)·2·(a/tp)·d·e bytes (``one`` = t(S), ``two`` =
    t(2S), one hop each). In PyTorch's ``_templated_ring_attention`` (torch/distributed/tensor/experimental/
    _attention.py) the ``_AllGatherRotater`` issues one all-gather at step 0 and waits for it at step 1: the cp − 1
    shards, (cp − 1)·t(S), hide only behind step 0's causal diagonal block, c = core forward / cp (load balancing
    gives every step the same 1/cp of the rank's causal work). ``_templated_ring_attention_backward`` gathers K/V the
    same way behind step 0's backward (2c) and passes the fp32 dK/dV (2S bytes) to the next rank with an all-to-all
    (``dkv_rotater``, ``_RotateMethod.ALL_TO_ALL``) after every one of the cp steps, each behind the next step's
    backward, the last waited right after the loop. Per block, r = 1 with recompute (the forward redone):

        link    = (1 + r + 1)·(cp − 1)·t(S) + cp·t(2S)
        exposed = (1 + r)·max(0, (cp − 1)·t(S) − c) + max(0, (cp − 1)·t(S) − 2c) + (cp − 1)·max(0, t(2S) − 2c) + t(2S)
    """
    gather = (cp - 1.0) * one
    link = (redo + 1.0) * gather + cp * two
    exposed = (redo * np.maximum(gather - block, 0.0) + np.maximum(gather - 2.0 * block, 0.0)
               + (cp - 1.0) * np.maximum(two - 2.0 * block, 0.0) + two)
    return link, exposed


TORCH_CP_RING_STEP_PASSES: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "eager": ((36.0, 5.0), (48.0, 6.0)),
    "fused": ((8.0, 1.0), (24.0, 2.0)),
}
"""HBM bytes per element of one rank's local attention output (b/cp · s · a/tp · d) that PyTorch's ``context_parallel``
moves outside the SDPA kernels in every ring step after the first, as ((fp32 bytes, 16-bit elements) forward,
(fp32 bytes, 16-bit elements) backward): bytes = fp32 + e × 16-bit. Counted from ``_templated_ring_attention``,
``_SDPAMerger`` and ``_templated_ring_attention_backward`` (torch/distributed/tensor/experimental/_attention.py; the
late-2024 file with ``_RotateMethod.PRE_ALL_GATHER``, the [TT-H100] tables' torch 1963fc8 of 2024-12-23, and the same
code at 0123248a) for the rank that runs every step with its whole query (``i <= rank``: the last rank; the next layer's
all-gather waits for it):

* ``eager`` (op by op). Forward: ``out.to(torch.float32)`` (read e, write 4), ``out - block_out`` (read 8, write 4),
  ``F.sigmoid(block_lse - lse) * (...)`` (read 4, write 4), ``out - ...`` (read 8, write 4), and
  ``torch.cat([key.flatten(), value.flatten()])`` of the received K/V, run every step though the all-gather rotater
  sends only once (read 2e, write 2e): 36 + 5e. Backward: the same K/V ``cat`` (4e); ``_partial_update(grad_key,
  grad_key_, idx=0, add=True)`` for dK and dV (half-size ``+=``: read 2 + e/2, write 2; then ``torch.cat`` of the
  fp32 halves: read 4, write 4; 12 + e/2 each); ``torch.cat([grad_key.flatten(), grad_value.flatten()])`` of the
  fp32 dK/dV it sends (read 8, write 8); ``grad_query += grad_query_`` into fp32 (read 4 + e, write 4): 48 + 6e.
* ``fused`` (torch.compile traces the ring into the block's graph: the merge is one kernel per step, and the K/V
  ``cat`` whose result the rotater drops is dead code). Forward: read the fp32 running output and the step's 16-bit
  output, write fp32: 8 + e. Backward: read the received fp32 dK/dV and the step's 16-bit half-size dK/dV, write the
  fp32 buffer sent on (16 + e); read fp32 dQ and the step's 16-bit dQ, write fp32 (8 + e): 24 + 2e.

The first step (accumulating into zeroed fp32 buffers) and the casts back to 16-bit after the loop are left out: a
lower bound. The flash-attention kernels themselves are priced at their published rate (:mod:`commmodel.step.attention`).
"""


def torch_cp_ring_bytes(model: TransformerModel, local_micro_batch: np.ndarray, tp: np.ndarray, cp: np.ndarray,
                        elementwise: str) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes per block and micro-batch of PyTorch ``context_parallel``'s work beside the SDPA
    kernels: (cp − 1) ring steps × :data:`TORCH_CP_RING_STEP_PASSES` × the rank's attention-output elements
    b/cp · s · (a/tp) · d (K/V repeated to every query head, so dK/dV have as many). ``elementwise`` ``eager`` and
    ``eager-fused-rmsnorm`` run it op by op, ``compiled`` and ``fused`` as fused kernels; zero where cp = 1."""
    kind = "eager" if elementwise.startswith("eager") else "fused"
    (fwd32, fwd16), (bwd32, bwd16) = TORCH_CP_RING_STEP_PASSES[kind]
    e = model.dtype_bytes
    elements = (np.asarray(local_micro_batch, dtype=float) * model.seq_len
                * np.maximum(model.num_heads / np.asarray(tp, dtype=float), 1.0) * model.head_dim)
    steps = np.maximum(np.asarray(cp, dtype=float) - 1.0, 0.0)
    return steps * (fwd32 + e * fwd16) * elements, steps * (bwd32 + e * bwd16) * elements
