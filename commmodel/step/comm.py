"""Communication of one training step: TP, PP and DP/ZeRO terms, vectorised over layouts (the
mixture-of-experts all-to-alls and expert gradients: :mod:`commmodel.step.experts`; context parallelism's K/V
exchange: :mod:`commmodel.step.context_parallel`; gradient bucket sizes: :mod:`commmodel.step.buckets`).

Ranks are placed as :mod:`commmodel.step.placement` says (Megatron-LM order tp-cp-dp-pp): TP packed in
a node, the gradient group (dp·cp ranks, passed here as dp) strided by tp, pipeline
neighbours tp·cp·dp ranks apart (the slowest stage boundary paces every stage); send/recv hops are priced
by :func:`commmodel.step.placement.p2p_hop_s`.

Every collective is priced by :func:`commmodel.collectives.collective_cost` (algorithm ``auto``);
message sizes follow nccl-tests (the whole buffer S).
"""

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from commmodel.collectives.api import collective_times
from commmodel.hardware.models import System
from commmodel.step.buckets import bucket_counts, bucket_split, effective_bucket_bytes
from commmodel.step.precision import param_wire_bytes
from commmodel.step.tp_wire import TpWireBytes
from commmodel.step.options import StepOptions
from commmodel.step.placement import Placement, dp_ranks_per_node, p2p_hop_s, tier_alpha_bw, tp_ranks_per_node
from commmodel.workload.memory import dense_params_per_gpu
from commmodel.workload.model import TransformerModel
from commmodel.workload.recompute_policies import RECOMPUTE_FULL, RECOMPUTE_OP
from commmodel.workload.stages import stage_layers


CollectiveRequest = tuple[str, np.ndarray, np.ndarray, np.ndarray]
"""(op, size_bytes, num_ranks, ranks_per_node) of collectives to price, arrays of one shape."""


def price_collectives(system: System, requests: Mapping[str, CollectiveRequest],
                      library: str | None = None) -> dict[str, np.ndarray]:
    """Time of every named request (0 for 1-rank groups and empty buffers), in one
    :func:`~commmodel.collectives.api.collective_times` pass (each element what :func:`collective_cost` gives):
    a planner evaluation prices only a few hundred distinct groups, so the collective model's fixed per-call
    cost, not its per-element cost, dominates. Every request's columns are concatenated once (all ops
    together), the active groups' topology is built once, and each op prices its own active elements."""
    shapes: list[tuple[int, ...]] = []
    columns: tuple[list, list, list] = ([], [], [])
    ops: list[str] = []
    for op, size, n, rpn in requests.values():
        if not np.shape(size) == np.shape(n) == np.shape(rpn):
            size, n, rpn = np.broadcast_arrays(size, n, rpn)
        shapes.append(np.shape(size))
        ops.append(op)
        for column, values in zip(columns, (size, n, rpn)):
            column.append(values)
    size, n, rpn = (np.concatenate(column, axis=None, dtype=float) for column in columns)
    counts = [math.prod(shape) for shape in shapes]
    distinct_ops = list(dict.fromkeys(ops))
    op_code = np.repeat([distinct_ops.index(op) for op in ops], counts)
    times = np.zeros(size.shape)
    active = (n > 1) & (size > 0)  # price only real groups: a 1-rank "group" may not even fit the topology
    if active.any():
        times[active] = collective_times(distinct_ops, op_code[active], size[active], system, n[active], rpn[active],
                                         library=library)
    out: dict[str, np.ndarray] = {}
    start = 0
    for name, shape, count in zip(requests, shapes, counts):
        part = times[start:start + count]
        out[name] = part if len(shape) == 1 else part.reshape(shape)  # a 1-d request's slice has its shape already
        start += count
    return out


class TensorParallelComm(NamedTuple):
    """TP collectives of one micro-batch on one stage (seconds, arrays)."""

    all_reduce_s: np.ndarray
    """All-reduces without sequence parallelism."""
    reduce_scatter_s: np.ndarray
    """Reduce-scatters with sequence parallelism."""
    all_gather_s: np.ndarray
    """All-gathers with sequence parallelism, the backward's input re-gathers (``regather_s``) included."""
    regather_s: np.ndarray
    """Part of ``all_gather_s``: the backward's re-gather of the column-parallel linears' inputs
    (``StepOptions.tp_input_regather``), which runs behind the input-gradient GEMM."""


def tensor_parallel_requests(model: TransformerModel, system: System, micro_batch: np.ndarray, tp: np.ndarray,
                             sequence_parallel: np.ndarray,
                             wire: TpWireBytes | None = None) -> dict[str, CollectiveRequest]:
    """One TP collective of a block over b·s·h elements: an all-reduce, or with sequence parallelism a
    reduce-scatter, an all-gather of the column-parallel input and one of the row-parallel output gradient
    (zero-size where it does not apply), each at its bytes per element in ``wire``
    (:func:`commmodel.step.tp_wire.tp_wire_bytes`; the training dtype's bytes for all when None)."""
    w = wire or TpWireBytes(model.dtype_bytes, model.dtype_bytes, model.dtype_bytes)
    elements = np.asarray(micro_batch, dtype=float) * model.seq_len * model.hidden_size
    t = np.asarray(tp)
    rpn = tp_ranks_per_node(system, t)
    sp = np.asarray(sequence_parallel, dtype=bool)
    return {"all_reduce": ("all_reduce", np.where(sp, 0.0, elements * w.reduce_scatter), t, rpn),
            "reduce_scatter": ("reduce_scatter", np.where(sp, elements * w.reduce_scatter, 0.0), t, rpn),
            "all_gather": ("all_gather", np.where(sp, elements * w.input_all_gather, 0.0), t, rpn),
            "grad_all_gather": ("all_gather", np.where(sp, elements * w.grad_all_gather, 0.0), t, rpn)}


def tensor_parallel_from_times(model: TransformerModel, times: Mapping[str, np.ndarray], pp: np.ndarray,
                               recompute: np.ndarray, regather: bool = False) -> TensorParallelComm:
    """Per block: 2 all-reduces forward and 2 backward (Shoeybi et al. 2019), or with sequence
    parallelism 2 all-gathers + 2 reduce-scatters each way (Korthikanti et al. 2022 §4.2.2): the forward's
    all-gathers of the column-parallel inputs (``times["all_gather"]``) and reduce-scatters of the row-parallel
    outputs, the backward's all-gathers of the row-parallel output gradients (``times["grad_all_gather"]``, the
    input all-gather's time when absent) and reduce-scatters of the input gradients. Full recompute repeats the
    forward's four, op SAC (:mod:`commmodel.workload.op_sac`) the two all-gathers feeding recomputed mms but not
    the saved reduce-scatters; an all-reduce counts as the average of the two. With ``regather`` (Megatron's and
    Transformer Engine's column-parallel linears, ``StepOptions.tp_input_regather``) the backward all-gathers the
    QKV and fc1 inputs once more: 2 more input all-gathers per block (0 s without sequence parallelism, where the
    all-gather time is 0). × l/p blocks per stage; the MLP's half only in :attr:`TransformerModel.tp_mlp_share`
    of them (routed-only MoE blocks: attention's half)."""
    rc = np.asarray(recompute)
    full, op = (rc == RECOMPUTE_FULL).astype(float), (rc == RECOMPUTE_OP).astype(float)
    blocks = stage_layers(model, pp) * (1.0 + model.tp_mlp_share) / 2.0
    input_gathers = (2.0 + 2.0 * full + 2.0 * op) * blocks
    grad_gathers, reduce_scatters = 2.0 * blocks, (4.0 + 2.0 * full) * blocks
    all_reduces = (input_gathers + grad_gathers + reduce_scatters) / 2.0
    grad_gather_s = times.get("grad_all_gather", times["all_gather"])
    regather_s = (2.0 * blocks if regather else 0.0) * times["all_gather"]
    all_gather_s = input_gathers * times["all_gather"] + grad_gathers * grad_gather_s + regather_s
    return TensorParallelComm(all_reduce_s=all_reduces * times["all_reduce"],
                              reduce_scatter_s=reduce_scatters * times["reduce_scatter"],
                              all_gather_s=all_gather_s, regather_s=regather_s * np.ones_like(all_gather_s))


def pipeline_p2p_s(model: TransformerModel, system: System, micro_batch: np.ndarray, tp: np.ndarray,
                   pp: np.ndarray, dp: np.ndarray, vpp: np.ndarray) -> np.ndarray:
    """Send/recv of one micro-batch on one stage: activations forward and their gradients backward,
    once per model chunk (v per GPU). Each of the tp ranks sends b·s·h·e/tp (Megatron's scatter/gather
    optimisation, Narayanan et al. 2021 §4.1); the slowest boundary sets the pace, and it crosses the
    network when tp·dp·pp > gpus_per_node."""
    size = np.asarray(micro_batch, dtype=float) * model.seq_len * model.hidden_size * model.dtype_bytes / np.asarray(tp)
    one = np.zeros(np.shape(size))
    piped = np.asarray(pp) > 1
    if np.any(piped):  # no pipeline, no hop: the placement is not needed
        cross_node = Placement(system, tp=tp, dp=dp, pp=pp).crosses_nodes("pp")
        one[piped] = p2p_hop_s(system, size[piped], cross_node[piped])
    return 2.0 * np.asarray(vpp, dtype=float) * one


class DataParallelComm(NamedTuple):
    """DP gradient/parameter traffic of one step (seconds, arrays) and what can hide behind compute."""

    all_reduce_s: np.ndarray
    """Gradient all-reduce (ZeRO 0), once per step."""
    reduce_scatter_s: np.ndarray
    """Gradient reduce-scatter (ZeRO 1: once per step; ZeRO 2: every micro-batch; ZeRO 3: every layer of
    every micro-batch's backward)."""
    all_gather_s: np.ndarray
    """Parameter all-gather (ZeRO 1-2: once after the update, bucket by bucket with overlap on; ZeRO 3: every
    layer, forward and backward, of every micro-batch)."""
    parameter_server_s: np.ndarray
    """Parameter-server push + pull, once per step."""
    last_bucket_s: np.ndarray
    """The reduction that can only start once the backward ends (the tail): the last bucket plus the
    first stage's embedding gradients, produced last (:func:`~commmodel.step.buckets.bucket_tail_bytes`)."""
    bucket_s: np.ndarray
    """One bucket's reduction (the first parameter bucket an all-gather must finish before the forward)."""
    layer_all_gather_s: np.ndarray
    """ZeRO 3: one layer's parameter all-gather (0 otherwise)."""
    layer_reduce_scatter_s: np.ndarray
    """ZeRO 3: one layer's gradient reduce-scatter (0 otherwise)."""
    gather_buckets: np.ndarray | float = 1.0
    """ZeRO 1-2: buckets the parameter all-gather runs in (⌈gradient bytes / bucket⌉ with overlap on, the
    gradient buckets' parameters; 1 with overlap off: one gather of the whole buffer)."""


def parameter_server_s(system: System, size_bytes: np.ndarray, dp: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Central server on one worker: its link carries (n−1)·S in and the same out, full duplex,
    T = α + (n−1)·S / B with B the worker's own link (DESIGN §4: 1.2 GB over 1 GB/s, 10 workers: 10.8 s)."""
    n = np.asarray(dp, dtype=float)
    alpha, bw = tier_alpha_bw(system, n, dp_ranks_per_node(system, tp, dp))
    return np.where(n > 1, alpha + (n - 1) * np.asarray(size_bytes, dtype=float) / bw, 0.0)


def data_parallel_requests(model: TransformerModel, system: System, tp: np.ndarray, pp: np.ndarray, dp: np.ndarray,
                           zero: np.ndarray, options: StepOptions,
                           params: np.ndarray | None = None, *, cp: np.ndarray | int = 1) -> dict[str, CollectiveRequest]:
    """One occurrence of each DP collective (independent of the micro-batch count), zero-size where the
    ZeRO stage does not use it: the whole stage's gradients and weights for ZeRO 0-2, one full bucket
    and the partial buckets that end the buffer and its tail (:func:`~commmodel.step.buckets.bucket_split`,
    :func:`~commmodel.step.buckets.bucket_tail_bytes`), and one layer's share (1/⌈l/p⌉ of them) for ZeRO 3, which gathers and
    reduces layer by layer. ``dp`` is the gradient group (dp·cp ranks), ``cp`` its context-parallel factor (the
    bucket grows with dp alone: :func:`~commmodel.step.buckets.effective_bucket_bytes`). ``params``: :func:`dense_params_per_gpu` of these
    layouts, when the caller has it."""
    params = dense_params_per_gpu(model, tp, pp) if params is None else params
    grad_bytes = params * options.grad_wire_bytes_per_element
    weight_bytes = params * param_wire_bytes(model.dtype_bytes, model.dtype, options.fp8_param_allgather)
    rpn = dp_ranks_per_node(system, tp, dp)
    size = effective_bucket_bytes(options, np.asarray(dp, dtype=float) / np.asarray(cp, dtype=float))
    bucket = np.minimum(size, grad_bytes)
    _, rest, _, tail_rest = bucket_counts(model, tp, grad_bytes, options, size)
    layers = stage_layers(model, pp)
    z = np.asarray(zero)
    n = np.asarray(dp)
    whole = (z == 1) | (z == 2)
    out = {
        "all_reduce": ("all_reduce", np.where(z == 0, grad_bytes, 0.0), n, rpn),
        "reduce_scatter": ("reduce_scatter", np.where(whole, grad_bytes, 0.0), n, rpn),
        "all_gather": ("all_gather", np.where(whole, weight_bytes, 0.0), n, rpn),
        "layer_all_gather": ("all_gather", np.where(z == 3, weight_bytes / layers, 0.0), n, rpn),
        "layer_reduce_scatter": ("reduce_scatter", np.where(z == 3, grad_bytes / layers, 0.0), n, rpn),
    }
    for op, used in (("all_reduce", z == 0), ("reduce_scatter", whole)):
        out[f"bucket_{op}"] = (op, np.where(used, bucket, 0.0), n, rpn)
        out[f"rest_{op}"] = (op, np.where(used, rest, 0.0), n, rpn)
        out[f"tail_rest_{op}"] = (op, np.where(used, tail_rest, 0.0), n, rpn)
    # The parameter all-gather runs on the same buckets (the bucket's parameters, in their wire dtype).
    weight_per_grad = np.divide(weight_bytes, grad_bytes, out=np.zeros(np.shape(grad_bytes)), where=grad_bytes > 0)
    out["bucket_all_gather"] = ("all_gather", np.where(whole, bucket * weight_per_grad, 0.0), n, rpn)
    out["rest_all_gather"] = ("all_gather", np.where(whole, rest * weight_per_grad, 0.0), n, rpn)
    return out


def bucketed_times(model: TransformerModel, times: Mapping[str, np.ndarray], tp: np.ndarray, pp: np.ndarray,
                   dp: np.ndarray, options: StepOptions, op: str,
                   params: np.ndarray | None = None, *, cp: np.ndarray | int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(link, tail) seconds of one bucketed reduction: every bucket pays the collective's latency,
    link = ⌊G/B⌋·t(B) + t(G mod B) for G gradient bytes in buckets of B (:func:`~commmodel.step.buckets.effective_bucket_bytes` of
    dp = ``dp``/``cp``), tail likewise on :func:`~commmodel.step.buckets.bucket_tail_bytes`. ``params``: :func:`dense_params_per_gpu` of
    these layouts, when the caller has it."""
    params = dense_params_per_gpu(model, tp, pp) if params is None else params
    grad_bytes = params * options.grad_wire_bytes_per_element
    bucket = effective_bucket_bytes(options, np.asarray(dp, dtype=float) / np.asarray(cp, dtype=float))
    full, _, tail_full, _ = bucket_counts(model, tp, grad_bytes, options, bucket)
    one = times[f"bucket_{op}"]
    return full * one + times[f"rest_{op}"], tail_full * one + times[f"tail_rest_{op}"]


def bucketed_gather(times: Mapping[str, np.ndarray], grad_bytes: np.ndarray,
                    bucket_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(link, buckets) of the ZeRO 1-2 parameter all-gather run bucket by bucket, as Megatron-Core's
    ``--overlap-param-gather`` does (megatron/core/optimizer/distrib_optimizer.py @937571c
    ``_dispatch_gather_model_params``: one ``_all_gather_base`` per gradient bucket): every bucket pays the
    collective's latency, link = ⌊G/B⌋·t(bucket) + t(rest); buckets = ⌈G/B⌉ (at least 1) for G gradient bytes in
    buckets of B = ``bucket_bytes`` (:func:`~commmodel.step.buckets.effective_bucket_bytes`)."""
    full, rest = bucket_split(grad_bytes, bucket_bytes)
    return full * times["bucket_all_gather"] + times["rest_all_gather"], np.maximum(full + (rest > 0), 1.0)


def zero3_pp_unsharded(zero: np.ndarray, pp: np.ndarray, options: StepOptions) -> np.ndarray:
    """Which layouts run ZeRO 3 the way ``torch.distributed.pipelining`` drives FSDP2 (``zero3_pp_keep_unsharded``
    and pp ≥ 2): each block all-gathered once per step, in its chunk's first forward, and reduce-scattered once,
    after its chunk's last backward; unsharded parameters and gradients are held in between.

    The source (the [TT-H100] tables' torch 1963fc8, 2024-12-23, and torchtitan 9dec370): torchtitan
    ``parallelize_llama.py`` @9dec370 ``apply_fsdp`` passes ``reshard_after_forward=False`` to every block and the
    root where ``pp_enabled`` ("For PP, do not reshard after forward to avoid per-microbatch all-gathers");
    ``torch/distributed/pipelining/stage.py`` ``backward_maybe_with_nosync`` (FSDP branch from pytorch/pytorch#134052,
    Aug 2024) calls ``set_is_last_backward(False)``, ``set_reshard_after_backward(False)`` and
    ``set_requires_gradient_sync(False)`` before every backward, and after the ``last_backward`` one sets all three
    True and runs ``post_backward()`` of every FSDP parameter group of the stage's module: all its reduce-scatters at
    once. FSDP2's ``post_backward`` without gradient sync keeps the gradient unsharded, upcast to the reduce dtype
    (``to_accumulated_grad_if_needed``); pytorch/pytorch#124319 describes the pattern ("only all-gather on the first
    microbatch forward and reduce-scatter on the last microbatch backward")."""
    return (np.asarray(zero) == 3) & (np.asarray(pp) > 1) & bool(options.zero3_pp_keep_unsharded)


def data_parallel_from_times(model: TransformerModel, system: System, times: Mapping[str, np.ndarray],
                             tp: np.ndarray, pp: np.ndarray, dp: np.ndarray, zero: np.ndarray,
                             num_micro_batches: np.ndarray, options: StepOptions,
                             params: np.ndarray | None = None, *, cp: np.ndarray | int = 1) -> DataParallelComm:
    """Count each priced DP collective per step.

    ZeRO-0 all-reduces once per step (gradient accumulation: once per m micro-batches); ZeRO-1
    (Megatron's distributed optimizer) reduce-scatters once and all-gathers the updated 16-bit weights;
    ZeRO-2 reduce-scatters every micro-batch (partitioned gradients cannot accumulate locally); ZeRO-3
    gathers each layer's weights before its forward and again before its backward and reduce-scatters
    its gradients after, for every micro-batch: parameters are re-sharded after use, so nothing stays
    gathered across micro-batches (Rajbhandari et al. 2020 §5; PyTorch FSDP ``reshard_after_forward``), except
    where :func:`zero3_pp_unsharded` (FSDP2 under PyTorch pipelining): once per block per step.

    With overlap on, the ZeRO 0-2 gradient reduction runs bucket by bucket (PyTorch DDP, Megatron-LM
    ``overlap_grad_reduce``) and each bucket pays the collective's latency (:func:`bucketed_times`), and so
    does the ZeRO 1-2 parameter all-gather (:func:`bucketed_gather`); with overlap off it is one collective over the whole contiguous gradient buffer, as Megatron-LM
    did before overlapping (2021-2022). ``params``: :func:`dense_params_per_gpu` of these layouts, when the
    caller has it (computed here otherwise); ``dp`` is the gradient group (dp·cp), ``cp`` its context-parallel
    factor (:func:`~commmodel.step.buckets.effective_bucket_bytes` grows with dp alone).
    """
    params = dense_params_per_gpu(model, tp, pp) if params is None else params
    z = np.asarray(zero)
    m = np.asarray(num_micro_batches, dtype=float)
    layers = stage_layers(model, pp)
    size = effective_bucket_bytes(options, np.asarray(dp, dtype=float) / np.asarray(cp, dtype=float))
    if options.dp_mode == "parameter_server":
        grad_bytes = params * options.grad_wire_bytes_per_element
        bucket = np.minimum(size, grad_bytes)
        zeros = np.zeros(np.shape(grad_bytes))
        one_bucket = parameter_server_s(system, bucket, dp, tp)
        return DataParallelComm(zeros, zeros, zeros, parameter_server_s(system, grad_bytes, dp, tp),
                                one_bucket, one_bucket, zeros, zeros)
    ag_layer, rs_layer = times["layer_all_gather"], times["layer_reduce_scatter"]
    all_reduce, reduce_scatter = times["all_reduce"], times["reduce_scatter"]
    ar_tail, rs_tail = times["bucket_all_reduce"], times["bucket_reduce_scatter"]
    all_gather, gather_buckets = times["all_gather"], np.ones(np.shape(times["all_gather"]))
    if options.overlap:  # an op no layout runs stays 0 s (its requests are empty): nothing to count
        if (z == 0).any():
            all_reduce, ar_tail = bucketed_times(model, times, tp, pp, dp, options, "all_reduce", params, cp=cp)
        if ((z == 1) | (z == 2)).any():
            reduce_scatter, rs_tail = bucketed_times(model, times, tp, pp, dp, options, "reduce_scatter", params, cp=cp)
        all_gather, gather_buckets = bucketed_gather(times, params * options.grad_wire_bytes_per_element, size)
    # ZeRO 3 under torch.distributed.pipelining keeps every block gathered for the whole step: one gather and one
    # reduce-scatter per block per step (zero3_pp_keep_unsharded, :func:`zero3_pp_unsharded`).
    once = zero3_pp_unsharded(z, pp, options)
    return DataParallelComm(
        all_reduce_s=all_reduce,
        reduce_scatter_s=np.where(z == 3, np.where(once, 1.0, m) * layers * rs_layer,
                                  np.where(z == 2, m, 1.0) * reduce_scatter),
        all_gather_s=np.where(z == 3, np.where(once, 1.0, 2.0 * m) * layers * ag_layer, all_gather),
        parameter_server_s=np.zeros(np.shape(times["all_reduce"])),
        last_bucket_s=np.where(z == 0, ar_tail, rs_tail),
        bucket_s=np.where(z == 0, times["bucket_all_reduce"], times["bucket_reduce_scatter"]),
        layer_all_gather_s=ag_layer,
        layer_reduce_scatter_s=rs_layer,
        gather_buckets=np.where(z == 3, 1.0, gather_buckets),
    )


def data_parallel_comm(model: TransformerModel, system: System, tp: np.ndarray, pp: np.ndarray, dp: np.ndarray,
                       zero: np.ndarray, num_micro_batches: np.ndarray, options: StepOptions,
                       *, cp: np.ndarray | int = 1) -> DataParallelComm:
    """Gradients of the busiest GPU's dense (non-expert) parameters over the dp group (bytes per element set by compression):
    :func:`data_parallel_requests` priced and counted by :func:`data_parallel_from_times`."""
    times = price_collectives(system, data_parallel_requests(model, system, tp, pp, dp, zero, options, cp=cp),
                              options.library)
    return data_parallel_from_times(model, system, times, tp, pp, dp, zero, num_micro_batches, options, cp=cp)
