"""The buffers a training process holds beside its weights and activations (``memory_terms``' "buffers" term): the
loss's logits, the gradient buckets in flight, the MoE dispatcher's working copies, and what the driver and libraries
keep (:data:`RESERVED_BYTES`)."""

import numpy as np

from commmodel.workload.model import TransformerModel

RESERVED_BYTES = 2.0e9
"""Device memory a training process cannot give to tensors, per GPU: what the driver keeps below the
nvidia-smi total that ``GPU.hbm_bytes`` records (PyTorch's out-of-memory messages on 80 GB A100/H100 parts
report a "total capacity" of 79.1-79.3 GiB against nvidia-smi's 79.65-80 GiB: ~0.5 GB), plus the CUDA
context, cuBLAS workspaces and NCCL channel buffers (about 1-1.5 GB in a PyTorch + NCCL process). The
context share is an assumption, not a measurement of one system."""


def buffer_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray, dp: np.ndarray,
                  bucket_size_bytes: np.ndarray | float, loss_bytes_per_logit: float,
                  moe_imbalance: float) -> np.ndarray:
    """:func:`memory_terms`' buffers: the loss's logits, two gradient buckets where dp > 1, the reserved bytes and
    the MoE dispatch buffers."""
    logits = loss_buffer_bytes(model, micro_batch, tp, loss_bytes_per_logit)
    buckets = np.where(dp > 1, 2.0 * bucket_size_bytes, 0.0)
    moe = moe_buffer_bytes(model, micro_batch, tp, moe_imbalance) if model.is_moe else 0.0
    return logits + buckets + RESERVED_BYTES + moe


def loss_buffer_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray,
                      loss_bytes_per_logit: float) -> np.ndarray:
    """What the loss holds at its backward: ``loss_bytes_per_logit`` per logit of the micro-batch, tokens · V/tp."""
    tokens = np.asarray(micro_batch, dtype=float) * model.seq_len
    return tokens * model.vocab_size / np.asarray(tp, dtype=float) * loss_bytes_per_logit


def moe_buffer_bytes(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray,
                     imbalance: float = 1.0) -> np.ndarray:
    """The token dispatcher's working buffers of one MoE layer (0 when dense): the permuted copy of the
    rank's b·s/tp tokens × top-k and the all-to-all receive buffer of as many (× the load imbalance on
    the busiest rank), each h wide in the training dtype (Megatron-Core ``MoEAlltoAllTokenDispatcher``:
    ``permute`` then ``all_to_all``; the same two on combine reuse them). Routed tokens' stored
    activations are in :func:`activation_bytes_per_layer` (the active MLP width counts top-k experts)."""
    if not model.is_moe:
        return np.zeros(np.shape(np.asarray(micro_batch) * np.asarray(tp)), dtype=float)
    routed = (np.asarray(micro_batch, dtype=float) * model.seq_len / np.asarray(tp, dtype=float)
              * model.experts_per_token * model.hidden_size * model.dtype_bytes)
    return routed * (1.0 + max(imbalance, 1.0))
