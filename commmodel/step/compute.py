"""Compute time of one micro-batch on one pipeline stage, vectorised over layouts (DESIGN §5).

Two physically separate parts:

* **Matmuls** run at peak × ``matmul_efficiency`` (the GPU profile's measured MAMF / peak, the best
  a large GEMM reaches) × a shape factor d/(d + d½) on the smallest GEMM dimension d. Small
  matrices (hidden/tp, head_dim, few tokens per expert) fill fewer 128×128 tensor-core tiles per wave
  and amortise their prologue/epilogue less, so they run slower; d½ = 256, two edges of the 128-wide
  CUTLASS/cuBLAS tiles on the A100 80GB, scaled
  with each GPU's ridge point peak/HBM-bandwidth (a documented modelling choice, not a per-row fit).
* **Memory-bound work** (norms, softmax, dropout, activation, residual adds, cross entropy, RoPE, and
  where a stack does it the fp32 accumulation of weight gradients) moves its bytes at HBM bandwidth ×
  ``HBM_EFFICIENCY``.

Each GPU kernel also pays ``KERNEL_OVERHEAD_S`` (launch and tail), which matters only for small models.
"""

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from commmodel.hardware.models import System
from commmodel.step.attention import flash_attention_forward_s, op_sac_saves_attention
from commmodel.step.context_parallel import torch_cp_ring_bytes
from commmodel.step.experts import permute_bytes, routed_mlp_share
from commmodel.step.precision import high_precision_key, linear_peak_key, recipe_gemm_ratio
from commmodel.step.stack_precision import block_cast_bytes, block_store_cast_bytes, stack_recipe
from commmodel.workload.eager import ELEMENTWISE_KINDS, eager_elementwise_bytes, eager_kernels, gqa_copy_bytes
from commmodel.workload.flops import Gemm, cross_entropy_bytes, layer_elementwise_bytes, layer_gemms, logits_gemm
from commmodel.workload.memory import dense_params_per_gpu, expert_params_per_gpu
from commmodel.workload.model import TransformerModel
from commmodel.workload.recompute_policies import RECOMPUTE_FULL, RECOMPUTE_MOE, RECOMPUTE_OP, RECOMPUTE_SELECTIVE
from commmodel.workload.stages import stage_layers
from commmodel.workload import moe_recompute, recompute_modules as modules_
from commmodel.workload.op_sac import recomputed_share
from commmodel.workload.select import select

if TYPE_CHECKING:
    from commmodel.step.options import StepOptions

GEMM_HALF_EFFICIENCY_DIM = 256.0
"""d½: a GEMM whose smallest dimension is d runs at d/(d + d½) of the large-GEMM rate. The scale is
the tensor-core threadblock tile of cuBLAS/CUTLASS kernels, 128 wide (NVIDIA "Matrix Multiplication
Background" user's guide: tile and wave quantisation); d½ is two tile edges, one global choice checked
against the Megatron-LM tables (with d½ = 128 the throughput MAE of benchmarks/training_accuracy.py
rises from 6.6% to 10.1%), not a per-row fit. It holds for the A100 80GB; other GPUs scale it with
their ridge point (:func:`gemm_half_dim`)."""

REFERENCE_RIDGE_FLOPS_PER_BYTE = 312e12 / 2.039e12
"""Ridge point (dense bf16 peak / HBM bandwidth) of the A100 80GB SXM on which d½ = 256 was checked
(NVIDIA A100 datasheet: 312 TFLOP/s, 2,039 GB/s): 153 FLOP per byte. A GEMM tile must fetch its
operands from HBM while the tensor cores work; the FLOPs a GPU does per byte fetched set how much of
the matrix (how large d) it takes to amortise the fetch, tile prologue/epilogue and wave tails
(Williams et al. 2009, "Roofline"; NVIDIA "Matrix Multiplication Background" user's guide: tile and
wave quantisation). So d½ ∝ ridge: H100 SXM (989 TFLOP/s / 3.35 TB/s = 295 FLOP/B) → d½ ≈ 494,
FP8 on H100 (1979 / 3.35) → ≈ 988. Checked out of sample, not fitted: MPT on H100 (llm-foundry
benchmark tables) went from +13..+25% to +2..+10%, NeMo FP8 from +34..+40% to −18..+12%, with
every A100 80GB number unchanged (benchmarks/training_accuracy.py)."""

HBM_EFFICIENCY = 0.8
"""Achievable fraction of the HBM datasheet bandwidth for streaming elementwise kernels (copy-style
kernels reach ~80-90%, e.g. BabelStream on A100/H100); the lower end, as fused training kernels are
short and many."""

KERNEL_OVERHEAD_S = 4e-6
"""Launch plus tail cost of one kernel without CUDA graphs (a few µs on current GPUs)."""

ROUTED_GEMMS = ("fc1", "fc2")
"""The :func:`~commmodel.workload.flops.layer_gemms` whose work is partly routed experts' (MoE blocks)."""

KERNELS_PER_LAYER_FORWARD = 14
"""Kernels in one Megatron block forward (6 GEMMs incl. batched attention, 2 norms, softmax, dropout,
activation, 2 bias-dropout-adds, one copy); backward launches about twice as many."""

WGRAD_WRITE_BYTES = 2.0
"""Bytes per weight element a plain weight-gradient GEMM writes (a 16-bit gradient)."""


def accumulate_bytes_per_weight(main_grad_bytes: float) -> float:
    """Extra HBM bytes per weight element and micro-batch when the weight-gradient GEMM accumulates into Megatron's
    main-grad buffer instead of writing a 16-bit gradient: it reads C and writes D in the buffer's dtype where a plain
    GEMM writes 2: 6 with fp32 main grads, 2 with bf16. Megatron-Core does this for every linear layer by default
    (``gradient_accumulation_fusion``, on unless ``--no-gradient-accumulation-fusion``; Transformer Engine
    ``fuse_wgrad_accumulation``); the buffer is fp32 under Megatron-LM's argument default
    (``accumulate_allreduce_grads_in_fp32``, megatron/training/arguments.py @937571c), bf16 with
    ``--grad-reduce-in-bf16``. Priced as memory-bound time beside the GEMM: a lower bound, as measured on one H100 SXM
    (benchmarks/megatron_kernels.py, 2026-11-26, two runs) the bf16 × bf16 → fp32 accumulate GEMM of the README runs'
    shapes (k × n = h × 3h/tp, h × 4h/tp over 4,096 tokens) ran 1.19-1.34 × the bf16-output GEMM, where these bytes
    alone give 1.18-1.20."""
    return 2.0 * main_grad_bytes - WGRAD_WRITE_BYTES


def embedding_grad_bytes_per_weight(main_grad_bytes: float) -> float:
    """HBM bytes per word-embedding element and micro-batch on the first stage: its gradient is not a GEMM, so
    autograd writes a dense 16-bit [V/tp, h] gradient (zero-filled, 2) and Megatron's backward hook adds it into the
    main grad (``param.main_grad.add_(param.grad.data)``: reads 2, reads and writes the main grad;
    megatron/core/distributed/distributed_data_parallel.py @937571c ``_make_param_hook``): 12 in fp32, 8 in bf16.
    Measured (fp32): 1.70-1.78 ms for V·h = 131,072 × 2,048 on one H100 SXM (benchmarks/megatron_kernels.py, two
    runs), 1.20 ms by these bytes."""
    return 2.0 * WGRAD_WRITE_BYTES + 2.0 * main_grad_bytes


def grad_accumulation_bytes(model: TransformerModel, tp: np.ndarray, pp: np.ndarray, ep: np.ndarray | int = 1,
                            etp: np.ndarray | int = 1, main_grad_bytes: float = 4.0) -> np.ndarray:
    """HBM bytes one micro-batch's backward adds by accumulating weight gradients into main grads of
    ``main_grad_bytes`` on the busiest GPU: :func:`accumulate_bytes_per_weight` × its parameters (dense and routed
    experts: norms and biases, a few per thousand, counted alike), and where one stage holds the whole model (pp = 1)
    the word embedding's unfused path, :func:`embedding_grad_bytes_per_weight` less that per element (a tied head's
    fused wgrad is then a second accumulate)."""
    accumulate = accumulate_bytes_per_weight(main_grad_bytes)
    params = dense_params_per_gpu(model, tp, pp) + expert_params_per_gpu(model, pp, ep, etp)
    embedding = model.vocab_size * model.hidden_size / np.asarray(tp, dtype=float)
    extra = embedding_grad_bytes_per_weight(main_grad_bytes) - accumulate
    extra = extra + (accumulate if model.tied_embeddings else 0.0)
    return accumulate * params + np.where(np.asarray(pp) == 1, extra * embedding, 0.0)


class StageCompute(NamedTuple):
    """Compute time of one micro-batch on the slowest stage (seconds, arrays over layouts)."""

    forward_s: np.ndarray
    """Forward of the stage's layers (+ logits and loss on the last stage)."""
    backward_s: np.ndarray
    """Backward (twice the forward matmuls and memory traffic)."""
    recompute_s: np.ndarray
    """Forward work redone in the backward: full (whole blocks), selective (attention core), op (every
    second mm and the memory-bound ops, :mod:`commmodel.workload.op_sac`) or moe (the MoE layers' router and
    expert GEMMs, :mod:`commmodel.workload.moe_recompute`)."""
    matmul_s: np.ndarray
    """Part of forward + backward + recompute spent in matmuls."""
    memory_bound_s: np.ndarray
    """Part spent in memory-bound kernels (and launch overheads)."""
    attention_core_s: np.ndarray | float = 0.0
    """Forward of one block's attention core (scores, softmax, context) on one GPU: the compute that
    context parallelism's K/V exchange overlaps with."""
    routed_expert_s: np.ndarray | float = 0.0
    """Part of ``matmul_s`` spent in the routed experts' GEMMs (forward, backward and what recompute redoes):
    what the busiest expert-parallel rank's extra tokens stretch (0 for dense models)."""

    @property
    def total_s(self) -> np.ndarray:
        """forward + backward + recompute."""
        return self.forward_s + self.backward_s + self.recompute_s


def gemm_half_dim(system: System, dtype: str) -> float:
    """d½ for this GPU and dtype: ``GEMM_HALF_EFFICIENCY_DIM`` × (peak / HBM bandwidth) / ``REFERENCE_RIDGE``."""
    ridge_flops_per_byte = system.gpu.peak_for(linear_peak_key(dtype)) / system.gpu.hbm_bw_bytes_per_s.value
    return GEMM_HALF_EFFICIENCY_DIM * ridge_flops_per_byte / REFERENCE_RIDGE_FLOPS_PER_BYTE


def gemm_run_dtype(gemm: Gemm, training_dtype: str) -> str:
    """The dtype a block GEMM runs at: the training dtype for the linears; 16 bits for the attention core and the
    router, which no low-precision recipe casts (Megatron-Core's router is a plain GEMM with 16-bit inputs, its
    ``--moe-router-dtype fp32`` only an fp32 output: moe_utils.py @d98e8a6 ``RouterGatingLinearFunction``;
    torchtitan filters ``router.gate`` out of its float8 conversion; :func:`~.stack_precision.quantised_elements`)."""
    return high_precision_key(training_dtype) if gemm.attention_core or gemm.name == "router" else training_dtype


def gemm_efficiency(system: System, gemm: Gemm, dtype: str = "bf16") -> np.ndarray:
    """Fraction of peak a GEMM reaches: the GPU's large-GEMM efficiency at ``dtype``'s peak (bf16 MAMF / peak, or
    FP8's where measured: :meth:`~commmodel.hardware.models.GPU.matmul_efficiency_for`; row-wise FP8 × its measured
    kernel ratio, :func:`~commmodel.step.precision.recipe_gemm_ratio`) × d/(d + d½) with d its smallest dimension
    and d½ scaled with the GPU's ridge point (:func:`gemm_half_dim`)."""
    d = np.minimum(np.minimum(gemm.m, gemm.n), gemm.k)
    large = system.gpu.matmul_efficiency_for(linear_peak_key(dtype)) * recipe_gemm_ratio(system.gpu, dtype)
    return large * d / (d + gemm_half_dim(system, dtype))


def gemm_time_s(system: System, gemm: Gemm, training_dtype: str) -> np.ndarray:
    """Seconds of one block GEMM: its FLOPs at the peak of the dtype it runs at (:func:`gemm_run_dtype`) × its
    :func:`gemm_efficiency`."""
    dtype = gemm_run_dtype(gemm, training_dtype)
    return gemm.flops / (system.gpu.peak_for(linear_peak_key(dtype)) * gemm_efficiency(system, gemm, dtype))


def _elementwise_s(model: TransformerModel, system: System, micro_batch: np.ndarray, tp: np.ndarray,
                   ep: np.ndarray | int, etp: np.ndarray | int, sequence_parallel: np.ndarray, flash_attention: bool,
                   hbm_bytes_per_s: float, elementwise: str, fp8_params: bool = False,
                   activation_fp8_input_store: bool = False, moe_dispatcher: str = "alltoall") -> tuple:
    """(forward s, backward s beyond twice the forward, attention-core part) of one block's memory-bound work,
    the low-precision casts (:func:`block_cast_bytes`, forward and backward), the FP8 activation-input store's
    casts (:func:`block_store_cast_bytes`) and the MoE dispatcher's token permutations
    (:func:`~commmodel.step.experts.permute_bytes`) included in every kind.

    ``fused``: :func:`~commmodel.workload.flops.layer_elementwise_bytes` with ``KERNELS_PER_LAYER_FORWARD`` kernels,
    backward twice the forward (extra 0). ``compiled``: the same plus torchtitan's GQA K/V copy forward and
    backward (:func:`~commmodel.workload.eager.gqa_copy_bytes`). ``eager``: torchtitan's op-by-op bytes and kernels
    (:func:`~commmodel.workload.eager.eager_elementwise_bytes`, :func:`~commmodel.workload.eager.eager_kernels`;
    ``eager-fused-rmsnorm`` with torchtitan's Triton RMSNorm), the
    non-flash softmax bytes as in ``fused``."""
    if elementwise not in ELEMENTWISE_KINDS:
        raise ValueError(f"elementwise {elementwise!r}: use one of {', '.join(ELEMENTWISE_KINDS)}")
    elem_bytes, core_bytes = layer_elementwise_bytes(model, micro_batch, tp, sequence_parallel, flash_attention)
    # work whose backward moves its own bytes, not twice the forward's: the casts, the store's casts, the permutes
    cast_fwd, cast_bwd = block_cast_bytes(model, system, micro_batch, tp, ep, etp, elementwise, fp8_params)
    store_fwd, store_bwd = block_store_cast_bytes(model, micro_batch, tp, activation_fp8_input_store)
    permute = permute_bytes(model, micro_batch, tp, ep, moe_dispatcher)  # the backward moves the same bytes
    own_fwd, own_bwd = cast_fwd + store_fwd + permute, cast_bwd + store_bwd + permute
    own_extra_s = (own_bwd - 2.0 * own_fwd) / hbm_bytes_per_s
    core_elem_s = core_bytes / hbm_bytes_per_s
    if elementwise == "fused":
        fwd_s = (elem_bytes + own_fwd) / hbm_bytes_per_s + KERNELS_PER_LAYER_FORWARD * KERNEL_OVERHEAD_S
        return fwd_s, own_extra_s, core_elem_s
    if elementwise == "compiled":
        copy_bytes = gqa_copy_bytes(model, micro_batch, tp)
        fwd_s = (elem_bytes + own_fwd + copy_bytes) / hbm_bytes_per_s + KERNELS_PER_LAYER_FORWARD * KERNEL_OVERHEAD_S
        return fwd_s, own_extra_s - copy_bytes / hbm_bytes_per_s, core_elem_s  # K/V copied once backward, not 2×
    fused_norm = elementwise == "eager-fused-rmsnorm"
    fwd_bytes, bwd_bytes = eager_elementwise_bytes(model, micro_batch, tp, sequence_parallel, fused_norm)
    fwd_kernels, bwd_kernels = eager_kernels(fused_norm)
    fwd_s = (fwd_bytes + core_bytes + own_fwd) / hbm_bytes_per_s + fwd_kernels * KERNEL_OVERHEAD_S
    bwd_s = (bwd_bytes + 2.0 * core_bytes + own_bwd) / hbm_bytes_per_s + bwd_kernels * KERNEL_OVERHEAD_S
    return fwd_s, bwd_s - 2.0 * fwd_s, core_elem_s


def _torch_cp_ring_s(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray, cp: np.ndarray | int,
                     cp_comm: str, elementwise: str, hbm_bytes_per_s: float, block: tuple) -> tuple:
    """``block`` = (forward s, backward s beyond twice the forward, attention-core part) of one block's memory-bound
    work, with ``cp_comm`` torch-allgather PyTorch ``context_parallel``'s per-step merge and fp32 gradient
    accumulation added (:func:`commmodel.step.context_parallel.torch_cp_ring_bytes`): the forward's to the block and
    to its attention core (redone with it, overlapped by the K/V exchange), the backward's as its own bytes (not twice
    the forward's). Other ``cp_comm``: ``block`` unchanged."""
    if cp_comm != "torch-allgather":
        return block
    fwd_bytes, bwd_bytes = torch_cp_ring_bytes(model, micro_batch, tp, cp, elementwise)
    fwd_s, bwd_s = fwd_bytes / hbm_bytes_per_s, bwd_bytes / hbm_bytes_per_s
    elem_s, bwd_extra_s, core_elem_s = block
    return elem_s + fwd_s, bwd_extra_s + bwd_s - 2.0 * fwd_s, core_elem_s + fwd_s


def _redo_shares(model: TransformerModel, rc: np.ndarray, recompute_modules: tuple[str, ...],
                 elementwise: str) -> tuple[dict[str, dict[str, float]], bool]:
    """({policy: {Gemm name: share of its forward time redone}}, custom): the mms op SAC ("op"), the MoE-layer
    recompute ("moe") and the selective modules ("sel") run again, each only where some layout uses that policy (they
    are read for those layouts alone). custom: some layout runs selective with modules other than Megatron's default;
    they are then checked against the model and the stack's FP8 recipe
    (:func:`commmodel.workload.recompute_modules.check_recompute_modules`)."""
    custom = not modules_.is_default(recompute_modules) and bool((rc == RECOMPUTE_SELECTIVE).any())
    if custom:
        modules_.check_recompute_modules(recompute_modules, model,
                                         fp8_delayed=stack_recipe(model, elementwise) == "te-fp8-delayed")
    return {"op": recomputed_share(model) if (rc == RECOMPUTE_OP).any() else {},
            "moe": moe_recompute.recomputed_share(model) if (rc == RECOMPUTE_MOE).any() else {},
            "sel": modules_.recomputed_gemm_share(model, recompute_modules) if custom else {}}, custom


def _selective_redo(model: TransformerModel, micro_batch: np.ndarray, tp: np.ndarray, sequence_parallel: np.ndarray,
                    recompute_modules: tuple[str, ...] | None, hbm_bytes_per_s: float, parts: tuple) -> tuple:
    """(recompute s, its matmul s, its routed-expert s) of one block under ``recompute: selective`` with
    ``recompute_modules`` (:mod:`commmodel.workload.recompute_modules`; None: Megatron's default, core_attn alone, the
    attention core as Korthikanti's selective). ``parts`` = (attention core GEMM s, its
    memory-bound s, the modules' GEMM redo s, the routed experts' fc1+fc2 s). core_attn: the attention core as
    Korthikanti's selective; layernorm, moe_act, mla_up_proj: their forward HBM bytes plus their kernels
    (``recomputed_kernels``, :data:`KERNEL_OVERHEAD_S` each); mlp, shared_experts, moe, mla_up_proj: their GEMM shares
    (the module's redo s), and with moe the routed experts' GEMMs counted as routed work."""
    core_s, core_elem_s, gemm_redo_s, routed_s = parts
    if recompute_modules is None:
        return core_s + core_elem_s, core_s, 0.0
    t = np.asarray(tp, dtype=float)
    replicated, split = modules_.recomputed_elementwise_bytes_per_token(model, recompute_modules)
    rep = np.where(np.asarray(sequence_parallel, dtype=bool), replicated / t, replicated)
    tokens = np.asarray(micro_batch, dtype=float) * model.seq_len
    names = modules_.effective_modules(recompute_modules)
    kernels = modules_.recomputed_kernels(recompute_modules)
    elem_s = tokens * (rep + split / t) / hbm_bytes_per_s + kernels * KERNEL_OVERHEAD_S
    core = "core_attn" in names
    gemm_s = (core_s if core else 0.0) + gemm_redo_s
    redo_s = gemm_s + (core_elem_s if core else 0.0) + elem_s
    return redo_s, gemm_s, (routed_s if modules_.recomputes_dispatch(recompute_modules) else 0.0)


def stage_compute_knobs(options: "StepOptions") -> dict[str, object]:
    """The keyword arguments of :func:`stage_compute` that come from a stack's options: one owner for every caller
    (the step model and the gradient timeline) so that a knob reaches both."""
    return {"cross_entropy": options.cross_entropy, "attention_dropout": options.attention_dropout > 0,
            "main_grad_bytes": options.main_grad_bytes if options.main_grad_accumulation else 0.0,
            "elementwise": options.elementwise,
            "attention_kernel": options.attention_kernel, "fp8_params": options.fp8_param_allgather,
            "cp_comm": options.cp_comm, "recompute_modules": options.recompute_modules,
            "activation_fp8_input_store": options.activation_fp8_input_store, "moe_dispatcher": options.moe_dispatcher}


def stage_compute(model: TransformerModel, system: System, micro_batch: np.ndarray, tp: np.ndarray,
                  pp: np.ndarray, recompute: np.ndarray, sequence_parallel: np.ndarray, flash_attention: bool,
                  flash_attention_rate: bool = False, ep: np.ndarray | int = 1, etp: np.ndarray | int = 1, *,
                  cross_entropy: str = "fused", attention_dropout: bool = False, main_grad_bytes: float = 0.0,
                  elementwise: str = "fused", attention_kernel: str = "auto", fp8_params: bool = False,
                  cp: np.ndarray | int = 1, cp_comm: str = "ring", activation_fp8_input_store: bool = False,
                  recompute_modules: tuple[str, ...] = modules_.DEFAULT_RECOMPUTE_MODULES,
                  moe_dispatcher: str = "alltoall", full_share: np.ndarray | float = 1.0) -> StageCompute:
    """One micro-batch's forward, backward and recompute on the last (slowest) stage (l/p blocks, logits and loss).
    ``fp8_params``: FP8 weights kept (``fp8_param_allgather``); ``moe_dispatcher``: whose permutations. With
    ``flash_attention_rate`` (and ``flash_attention``) the attention core is one fused kernel, causal blocks skipped,
    at ``attention_kernel``'s published rate, slowed by ``attention_dropout`` (:mod:`.attention`); else two GEMMs.
    The loss runs as ``cross_entropy`` (:func:`~commmodel.workload.flops.cross_entropy_bytes`); the backward adds
    :func:`grad_accumulation_bytes` into ``main_grad_bytes`` main grads (0: none); the elementwise work as
    ``elementwise`` (:func:`_elementwise_s`; the ring merge under torch-allgather CP, :func:`_torch_cp_ring_s`);
    ``recompute: selective`` redoes ``recompute_modules`` (:func:`_selective_redo`), ``full`` ``full_share`` of the
    blocks (:func:`~commmodel.workload.stages.full_recompute_fraction`); the FP8 input store's casts too."""
    high_dtype = high_precision_key(model.dtype)
    hbm = system.gpu.hbm_bw_bytes_per_s.value * HBM_EFFICIENCY
    layers = stage_layers(model, pp)
    rc = np.asarray(recompute)

    fused_rate = bool(flash_attention and flash_attention_rate)
    gemm_s = core_s = 0.0
    shares, custom = _redo_shares(model, rc, recompute_modules, elementwise)
    redo = dict.fromkeys(shares, 0.0)
    routed_s = routed_op_s = 0.0  # the routed experts' share of fc1/fc2 (and of what op SAC redoes of them)
    routed_share = routed_mlp_share(model)
    for gemm in layer_gemms(model, micro_batch, tp, ep, etp):  # ep, etp: MoE expert GEMM shapes
        if gemm.attention_core and fused_rate:
            continue
        time_s = gemm_time_s(system, gemm, model.dtype)
        gemm_s = gemm_s + time_s
        if gemm.name in ROUTED_GEMMS:
            routed_s = routed_s + routed_share * time_s
            routed_op_s = routed_op_s + routed_share * shares["op"].get(gemm.name, 0.0) * time_s
        for key, share in shares.items():
            if gemm.name in share:  # adding 0 × time_s would change nothing
                redo[key] = redo[key] + share[gemm.name] * time_s
        if gemm.attention_core:
            core_s = core_s + time_s
    if fused_rate:
        # one fused kernel, causal blocks skipped, at the kernel's published rate (attention.py)
        core_s = flash_attention_forward_s(model, system, micro_batch, tp, attention_dropout, attention_kernel, cp)
        gemm_s = gemm_s + core_s
    logits = logits_gemm(model, micro_batch, tp)
    logits_s = logits.flops / (system.gpu.peak_for(high_dtype) * gemm_efficiency(system, logits, high_dtype))

    elem_s, elem_bwd_extra_s, core_elem_s = _torch_cp_ring_s(model, micro_batch, tp, cp, cp_comm, elementwise, hbm, (
        _elementwise_s(model, system, micro_batch, tp, ep, etp, sequence_parallel, flash_attention, hbm, elementwise,
                       fp8_params, activation_fp8_input_store, moe_dispatcher)))
    loss_fwd_bytes, loss_bwd_bytes = cross_entropy_bytes(model, micro_batch, tp, cross_entropy)
    accumulate_bytes = grad_accumulation_bytes(model, tp, pp, ep, etp, main_grad_bytes) if main_grad_bytes else 0.0

    layer_fwd_s = gemm_s + elem_s
    forward_s = layers * layer_fwd_s + logits_s + loss_fwd_bytes / hbm
    backward_s = (2.0 * (layers * layer_fwd_s + logits_s) + (loss_bwd_bytes + accumulate_bytes) / hbm
                  + layers * elem_bwd_extra_s)
    # op SAC redoes the fused attention forward where its save list lacks the kernel that runs (attention.py)
    op_core_s = 0.0 if not fused_rate or op_sac_saves_attention(system, attention_kernel) else core_s
    policies = [rc == RECOMPUTE_FULL, rc == RECOMPUTE_SELECTIVE, rc == RECOMPUTE_OP, rc == RECOMPUTE_MOE]
    sel_s, sel_gemm_s, sel_routed_s = _selective_redo(model, micro_batch, tp, sequence_parallel, recompute_modules if
                                                      custom else None, hbm, (core_s, core_elem_s, redo["sel"], routed_s))
    op_redo_s, moe_redo_s = redo["op"], redo["moe"]
    recompute_s = layers * select(
        policies, [full_share * layer_fwd_s, sel_s, op_redo_s + op_core_s + elem_s - core_elem_s, moe_redo_s], 0.0)
    matmul_s = 3.0 * (layers * gemm_s + logits_s) + layers * select(
        policies, [full_share * gemm_s, sel_gemm_s, op_redo_s + op_core_s, moe_redo_s], 0.0)
    total = forward_s + backward_s + recompute_s
    routed_redo_s = select(policies, [full_share * routed_s, sel_routed_s, routed_op_s, routed_s], 0.0)
    return StageCompute(
        forward_s=np.asarray(forward_s, dtype=float),
        backward_s=np.asarray(backward_s, dtype=float),
        recompute_s=np.asarray(recompute_s, dtype=float),
        matmul_s=np.asarray(matmul_s, dtype=float),
        memory_bound_s=np.asarray(total - matmul_s, dtype=float),
        attention_core_s=np.asarray(core_s + core_elem_s, dtype=float) * np.ones_like(np.asarray(total, dtype=float)),
        routed_expert_s=layers * (3.0 * routed_s + routed_redo_s) * np.ones_like(np.asarray(total, dtype=float)),
    )
