"""Context parallelism's K/V exchange in one training step, vectorised over layouts: Megatron-Core's ring
(``cp_comm_type="p2p"``) or PyTorch's ``context_parallel`` as torchtitan runs it (all-gathered K/V, fp32 dK/dV
passed every ring step). Which one a stack uses is ``StepOptions.cp_comm``; send/recv hops are priced by
:func:`commmodel.step.placement.p2p_hop_s`."""

from __future__ import annotations

import numpy as np

from commmodel.hardware.models import System
from commmodel.step.placement import Placement, p2p_hop_s
from commmodel.workload.model import TransformerModel, stage_layers


def context_parallel_s(model: TransformerModel, system: System, local_micro_batch: np.ndarray, tp: np.ndarray,
                       cp: np.ndarray, pp: np.ndarray, recompute: np.ndarray,
                       attention_core_s: np.ndarray, method: str = "ring") -> tuple[np.ndarray, np.ndarray]:
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
    return link, exposed


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
