"""PyTorch Async TP: what stays exposed of the tensor-parallel collectives, fused op by fused op.

torchtitan's ``enable_async_tensor_parallel`` turns on torch.compile's micro-pipeline TP pass
(pytorch/pytorch ``torch/_inductor/fx_passes/micro_pipeline_tp.py`` @5f65158; the same two patterns since its first
version, @00122fb). It rewrites two graph patterns only:

- ``all_gather → mm`` (the matmuls that take the gathered tensor as their left operand, on a non-contracting dim)
  into ``symm_mem.fused_all_gather_matmul(A_shard, [B_0, B_1, ...])``;
- ``mm → reduce_scatter`` (the reduce-scatter's input produced by one ``mm``/``_scaled_mm``:
  ``_find_producer_matmul``) into ``symm_mem.fused_matmul_reduce_scatter(A, B)``.

Each fused op decomposes its collective into tp chunks copied peer to peer while its own partial matmuls run
(``torch/distributed/_symmetric_memory/__init__.py`` @006b161: ``_pipelined_all_gather_and_consume``,
``_pipelined_produce_and_all2all``), and ends by making the compute stream wait for its copies: a fused
collective can hide behind the GEMMs fused with it and nothing else. With torchtitan's sequence-parallel Llama
block (separate ``wq``, ``wk``, ``wv`` linears; ``w2(silu(w1(x)) * w3(x))``: torchtitan models/llama/model.py)
the collectives of one block and micro-batch are, per half (attention; MLP):

    forward   all-gather → QKV (fc1)                fused with the QKV (fc1) GEMMs
              proj (fc2) → reduce-scatter           fused with the proj (fc2) GEMM
    backward  all-gather of the output gradient     fused with the proj (fc2) input-gradient GEMM
              → reduce-scatter of the input grad.   NOT fused: its input is the sum of the wq, wk, wv (w1, w3)
                                                    input-gradient GEMMs, not one mm (D. Vega-Myhre, pytorch/pytorch
                                                    #149946 review, 2025-03-28: "only valid scaled_mm-reduce-scatter
                                                    patterns in the forward graph, but not in the backward graph ...
                                                    the reduce-scatters are receiving as input the addition of various
                                                    scaled_mms"); an ungated MLP's single fc1 dgrad does fuse
    recompute full AC: the forward's four again; op SAC: the all-gather feeding the recomputed mm (wk; w3),
              fused with that mm only (:func:`commmodel.workload.op_sac.recomputed_share`)

A fused collective of link time T behind GEMMs of time g is priced as the step model's TP overlap always was
(Wang et al. 2023, "Overlap Communication with Dependent Computation via Decomposition", ASPLOS; the AsyncTP
design note, discuss.pytorch.org/t/209487): T/tp + max(0, T·(tp − 1)/tp − g).
"""

from __future__ import annotations

import numpy as np

from commmodel.hardware.models import System
from commmodel.step.compute import gemm_time_s
from commmodel.workload.flops import layer_gemms
from commmodel.workload.model import TransformerModel
from commmodel.workload.op_sac import recomputed_share
from commmodel.workload.recompute_policies import RECOMPUTE_FULL, RECOMPUTE_OP
from commmodel.workload.stages import stage_layers


def fused_exposed_s(link_s: np.ndarray, gemm_s: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Exposed seconds of one collective decomposed into tp chunks behind the GEMMs fused with it:
    T/tp + max(0, T·(tp − 1)/tp − g) (module docstring). The one owner of that rule: the userbuffers overlap
    (:func:`commmodel.step.terms.tp_term`) applies it to the step's TP traffic against the step's matmuls."""
    first = link_s / np.maximum(np.asarray(tp, dtype=float), 1.0)
    return first + np.maximum(link_s - first - gemm_s, 0.0)


def async_tp_exposed_s(model: TransformerModel, system: System, micro_batch: np.ndarray, tp: np.ndarray,
                       pp: np.ndarray, recompute: np.ndarray, all_gather_s: np.ndarray, reduce_scatter_s: np.ndarray,
                       ep: np.ndarray | int = 1, etp: np.ndarray | int = 1,
                       grad_all_gather_s: np.ndarray | None = None) -> np.ndarray:
    """Exposed seconds of one micro-batch's TP all-gathers and reduce-scatters on the busiest stage under PyTorch
    Async TP (module docstring). ``all_gather_s`` (a column-parallel input), ``reduce_scatter_s``,
    ``grad_all_gather_s`` (a row-parallel output gradient; ``all_gather_s`` when None): one collective of a block,
    at the bytes :mod:`commmodel.step.tp_wire` gives it; the ⌈l/p⌉ blocks' MLP halves count
    :attr:`TransformerModel.tp_mlp_share` times, as in :func:`commmodel.step.comm.tensor_parallel_from_times`,
    whose link time this splits."""
    g = {gemm.name: gemm_time_s(system, gemm, model.dtype) for gemm in layer_gemms(model, micro_batch, tp, ep, etp)}
    ag, rs, t = np.asarray(all_gather_s, dtype=float), np.asarray(reduce_scatter_s, dtype=float), tp
    gag = ag if grad_all_gather_s is None else np.asarray(grad_all_gather_s, dtype=float)
    halves = {"attention": ("qkv", "proj", False), "mlp": ("fc1", "fc2", not model.gated_mlp)}
    redo_share = recomputed_share(model)
    rc = np.asarray(recompute)
    per_half = {}
    for half, (column, row, dgrad_fused) in halves.items():
        steady = (fused_exposed_s(ag, g[column], t) + fused_exposed_s(rs, g[row], t)  # forward
                  + fused_exposed_s(gag, g[row], t)  # backward: output-gradient all-gather → row-parallel dgrad
                  + (fused_exposed_s(rs, g[column], t) if dgrad_fused else rs))  # input-gradient reduce-scatter
        full = fused_exposed_s(ag, g[column], t) + fused_exposed_s(rs, g[row], t)
        # op SAC: the input all-gather feeding the recomputed mm, as tensor_parallel_from_times counts it
        op = fused_exposed_s(ag, redo_share.get(column, 0.0) * g[column], t)
        per_half[half] = steady + np.where(rc == RECOMPUTE_FULL, full, np.where(rc == RECOMPUTE_OP, op, 0.0))
    return stage_layers(model, pp) * (per_half["attention"] + model.tp_mlp_share * per_half["mlp"])
