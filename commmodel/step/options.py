"""Knobs of the training-step model that are not part of the layout (DESIGN §5 "knobs")."""

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from commmodel.dtype_bytes import STORAGE_BYTES
from commmodel.errors import WorkloadError
from commmodel.hardware.messages import ReadableInit
from commmodel.limits import MAX_SIZE_BYTES, MIN_TOPK_FRACTION
from commmodel.step.attention import AttentionKernel
from commmodel.step.layout import Schedule
from commmodel.units import SizeBytes
from commmodel.workload.eager import ElementwiseKind
from commmodel.workload.flops import AttentionFlopsKind, CrossEntropyKind
from commmodel.workload.memory import LOSS_BYTES_PER_LOGIT
from commmodel.workload.offload import MOE_ONLY_MODULES as OFFLOAD_MOE_ONLY, check_offload_modules
from commmodel.workload.optimizer_states import PrecisionAwareOptimizer
from commmodel.workload.recompute_modules import DEFAULT_RECOMPUTE_MODULES, check_recompute_modules

Compression = Literal["none", "bf16", "fp16", "int8", "topk"]
CpComm = Literal["ring", "torch-allgather"]
"""How context parallelism exchanges K/V (:func:`commmodel.step.context_parallel.context_parallel_s`): ``ring`` (Megatron-Core /
Transformer Engine ``cp_comm_type="p2p"``: one K/V block per step behind one block of compute, GQA heads) or
``torch-allgather`` (PyTorch ``context_parallel``, torchtitan's default rotate method: one all-gather of the
repeated K/V heads behind the first block only, fp32 dK/dV passed on per step)."""
TpOverlapKind = Literal["userbuffers", "async-tp"]
"""How ``StepOptions.tp_comm_overlap`` overlaps the TP collectives: Transformer Engine userbuffers
(``--tp-comm-overlap``) or PyTorch Async TP (torchtitan ``enable_async_tensor_parallel``)."""

ADAM_BYTES_PER_PARAM = 30.0
"""HBM traffic of one fused Adam update per parameter: read the fp32 gradient (4), read and write the
fp32 master weight, m and v (3 × 8), write the 16-bit weight (2)."""

GRAD_BYTES_PER_ELEMENT: dict[str, float] = {"none": STORAGE_BYTES["fp32"],
                                            **{c: STORAGE_BYTES[c] for c in ("bf16", "fp16", "int8")}}
"""Bytes per gradient element on the wire. "none" is fp32: Megatron-LM reduces bf16 gradients in
fp32 main-grad buffers (``accumulate_allreduce_grads_in_fp32``), the baseline compression halves."""

DDP_BUCKET_CAP_BYTES = 25 * 2**20
"""PyTorch DDP's default gradient bucket, ``bucket_cap_mb=25`` read as MiB (25·1024·1024 bytes:
torch/nn/parallel/distributed.py, ``int(bucket_cap_mb * 1024 * 1024)``)."""

FIXED_BUCKET: dict[str, float] = {"bucket_params": 0.0, "bucket_params_per_dp_rank": 0.0}
"""What an explicit bucket size turns off (``--bucket-size``, the advice's bucket candidates): the bucket counted in
parameters and its growth with dp, so ``bucket_size_bytes`` is the bucket
(:func:`commmodel.step.buckets.effective_bucket_bytes`)."""

DEFAULT_MEMORY_HEADROOM_BYTES = 4e9
"""Memory every command keeps free on every GPU by default (``StepOptions.memory_headroom_bytes``): the CUDA
context and cuBLAS/cuDNN workspaces (~0.5-1 GB per process), NCCL's communication buffers (NCCL_BUFFSIZE 4 MiB
per channel per peer, and Megatron-Core's persistent ``nccl_ub`` buffers) and PyTorch caching-allocator fragmentation.
Fujii et al. 2024 (arXiv:2411.06465, 454 Megatron-LM runs on A100/H100): runs estimated below 80% of device memory
never ran out of memory; 4 GB is 5% of an 80 GB GPU, between the bare overheads and that safe bound
(``--memory-headroom 20%`` for the bound)."""

TOPK_INDEX_BYTES = 4.0
"""Each kept top-k value travels with a 32-bit index (Lin et al. 2018, Deep Gradient Compression)."""

DEFAULT_MOE_IMBALANCE = 1.52
"""Tokens on the most loaded expert ÷ the mean, for a top-k router balanced by an auxiliary loss: Wang et
al. 2024, "Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts" (arXiv:2408.15664) Table 2,
MaxVio_global = (max_i load_i − mean)/mean = 0.52 for the 3B DeepSeekMoE model (64 routed experts, top-6)
with the auxiliary loss (0.72 at 1B; 0.04 with their loss-free balancing). MaxVio_global is measured over
the validation set (per training batch, their Figure 3, the auxiliary-loss router stays well above the
loss-free one). The larger of their two models is used; pass 1.04 for a loss-free (DeepSeek-V3) router."""

LOSS_FREE_MOE_IMBALANCE = 1.04
"""The same measurement for a router balanced by per-expert biases instead of an auxiliary loss (DeepSeek-V3's
"auxiliary-loss-free" strategy, arXiv:2412.19437 §2.1.2): Wang et al. 2024 (arXiv:2408.15664) Table 2,
MaxVio_global = 0.04 for the 3B model with loss-free balancing."""


class StepOptions(ReadableInit, BaseModel):
    """How the step runs beyond the layout: overlap, compression, DP architecture, stragglers."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    _error_class: ClassVar[Any] = WorkloadError

    overlap: bool = True
    """Overlap the data-parallel gradient reduction with the last micro-batch's backward pass
    (bucketed, as PyTorch DDP and Megatron's overlap_grad_reduce do); only the last bucket stays exposed."""
    bucket_size_bytes: SizeBytes = DDP_BUCKET_CAP_BYTES
    """Gradient bucket size (default: PyTorch DDP's bucket_cap_mb = 25, i.e. 25 MiB), unless ``bucket_params`` sizes
    it; the smallest bucket when ``bucket_params_per_dp_rank`` grows it
    (:func:`commmodel.step.buckets.effective_bucket_bytes`)."""
    bucket_params: float = Field(default=0.0, ge=0.0)
    """The bucket in parameters where a stack sizes it so (Megatron-Core: 40M): above 0 the bucket floor is this ×
    the gradient wire bytes instead of ``bucket_size_bytes`` (160 MB of fp32 gradients, 80 MB of bf16)."""
    bucket_params_per_dp_rank: float = Field(default=0.0, ge=0.0)
    """Parameters the gradient bucket grows by per data-parallel rank: the bucket is max(its floor, this × dp ×
    gradient wire bytes per element), dp without cp (Megatron-Core: 1e6, ``bucket_size = max(40000000,
    1000000 * get_data_parallel_world_size())``, distributed_data_parallel.py @937571c). 0 (default): a fixed bucket,
    as PyTorch DDP and DeepSpeed have; an explicit ``--bucket-size`` sets it to 0 (:func:`commmodel.step.stacks.stack_options`)."""
    grad_reduce_dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    """Dtype of uncompressed gradients on the DP wire: fp32 as Megatron-LM's argument default does for bf16 training
    (``accumulate_allreduce_grads_in_fp32``); bf16 as ``--grad-reduce-in-bf16`` and Megatron-Bridge's performance
    recipes (``grad_reduce_in_fp32 = False``); fp16/bf16 as PyTorch DDP does for 16-bit gradients. Where the stack
    keeps Megatron's main-grad buffer (``main_grad_accumulation``) the buffer has this dtype too
    (:attr:`main_grad_bytes`)."""
    compression: Compression = "none"
    """Gradient compression on the DP wire: none, bf16/fp16 (2 bytes), int8 (1 byte), topk (kept values
    with their indices); everything but none is lossy."""
    topk_fraction: float = Field(default=0.01, ge=MIN_TOPK_FRACTION, le=1.0)
    """Fraction of gradient elements kept by top-k (each with a 4-byte index), 10^-6 to 1
    (:data:`~commmodel.limits.MIN_TOPK_FRACTION`); lossy."""
    library: str | None = None
    """Communication library pricing every collective (nccl, rccl, gloo, mpi, mpich:
    :mod:`commmodel.collectives.libraries`); None prices NCCL's algorithms (the CLI passes the system's default)."""
    dp_mode: Literal["all_reduce", "parameter_server"] = "all_reduce"
    """Data-parallel architecture: collective all-reduce (or ZeRO RS/AG), or a parameter server
    placed on one worker whose link carries every worker's gradients in and the model out."""
    synchronous: bool = True
    """Synchronous updates wait for the slowest worker; asynchronous ones do not (stale gradients)."""
    straggler_cv: float = Field(default=0.0, ge=0.0, le=1.0)
    """Coefficient of variation of one worker's step time (normal model); 0 = identical workers.
    A synchronous step takes mean × (1 + cv × E[max of n standard normals])."""
    schedule: Schedule = "1f1b"
    """Pipeline schedule: 1F1B (interleaved when vpp > 1) or GPipe (all forwards, then all backwards)."""
    flash_attention: bool = False
    """Fused attention (FlashAttention): no s×s score matrix in memory or HBM traffic. Off by default,
    as in the Megatron-LM runs the model is validated on (2021-2022)."""
    flash_attention_rate: bool = False
    """With flash_attention: price the attention core as one fused kernel that skips the causally
    masked blocks, at the published FlashAttention-2 rate of the GPU family (commmodel/step/attention.py).
    Off (default): its QKᵀ and PV are priced as GEMMs over the full s×s square, as before. Opt-in
    because it makes the short-sequence flash runs of the out-of-sample set 10-30% fast (docs/estimate.md)."""
    attention_kernel: AttentionKernel = "auto"
    """Which fused kernel the attention core runs where ``flash_attention_rate`` prices it
    (:mod:`commmodel.step.attention`): ``auto`` (cuDNN attention on sm_100 and later, FlashAttention-2 below: what
    torchtitan's SDPA priority picks), ``te`` (cuDNN from sm_90: what Transformer Engine picks, the megatron-core
    stack), ``flash2``, ``cudnn`` or ``triton`` (the 2023 Triton FlashAttention, FlashAttention-2's rate over its
    measured slowdown); each at its published rate on the GPU's architecture for the tokens of one kernel call
    (:mod:`commmodel.step.attention_rates`)."""
    cp_comm: CpComm = "ring"
    """Context parallelism's K/V exchange (:data:`CpComm`): ``ring`` (Megatron-Core p2p, the default) or
    ``torch-allgather`` (PyTorch ``context_parallel`` as torchtitan runs it; the fsdp2 stack)."""
    cp_comm_overlap: bool = True
    """Context parallelism's K/V exchange runs behind the attention blocks as each method schedules it
    (:func:`commmodel.step.context_parallel.context_parallel_s`). Off: every CP transfer is on the critical path,
    as in PyTorch ``context_parallel`` under ``torch.compile`` before PyTorch 2.8: a traced functional collective is
    waited on at once and Inductor's ``reorder_for_locality`` moved each collective next to its wait, until
    pytorch/pytorch#150074 (merged 2025-04) skipped wait nodes ("increasing the locality between a collective and its
    wait node is generally worse for performance", torch/_inductor/fx_passes/post_grad.py ``reorder_for_locality``;
    torch/distributed/_functional_collectives.py ``_maybe_wrap_tensor``: ``if _are_we_tracing(): return
    wait_tensor(self)``)."""
    tp_comm_overlap: bool = False
    """Overlap tensor-parallel collectives with GEMMs (Transformer Engine userbuffers, PyTorch AsyncTP);
    off in the Megatron-LM papers, where TP communication sits on the critical path. Only tp − 1 of the
    tp ring chunks hide: the first must arrive before any GEMM can start (:func:`commmodel.step.terms.tp_term`)."""
    tp_overlap_kind: TpOverlapKind = "userbuffers"
    """Which implementation ``tp_comm_overlap`` runs (:data:`TpOverlapKind`): ``userbuffers`` (Transformer Engine,
    the megatron-core stack: the step's TP traffic against the step's matmuls) or ``async-tp`` (PyTorch's
    torch.compile micro-pipelined TP, the fsdp2 stack: each fused collective against its own GEMMs only, the
    backward's column-parallel input-gradient reduce-scatters not fused: :mod:`commmodel.step.async_tp`)."""
    pp_p2p_overlap: bool = False
    """Under the interleaved pipeline schedule (vpp ≥ 2), each chunk's send/recv runs behind the next chunk's compute
    and only the pipeline fill's and drain's hops stay on the critical path (Megatron-LM ``overlap_p2p_comm``, on by
    default there and forced off without interleaving: :func:`commmodel.step.terms.pp_p2p_term`); off: every hop
    sits between stages, as the Megatron-LM papers' schedule ran it."""
    tp_input_regather: bool = False
    """With sequence parallelism the backward all-gathers each column-parallel linear's (QKV, fc1) sequence-sharded
    input again for its weight gradient, the forward having kept only the shard, and overlaps that all-gather with
    the input-gradient GEMM: Megatron-LM's own linear (megatron/mpu/layers.py @02bb1f5c, Mar 2022; core/
    tensor_parallel/layers.py @937571c) and Transformer Engine's LayerNormLinear (userbuffers ``ub_bulk_dgrad`` or an
    async ``gather_along_first_dim``, module/layernorm_linear.py @v1.8). Two more all-gathers per block and
    micro-batch, hidden (:func:`commmodel.step.terms.tp_term`); off where autograd keeps the gathered input
    (PyTorch DTensor TP)."""
    attention_dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Attention dropout probability; above 0 the fused attention core (``flash_attention_rate``) runs
    its kernel's ``DROPOUT_SLOWDOWN`` slower (:mod:`commmodel.step.attention_rates`) and unfused attention stores the
    s×s dropout mask and output beside the softmax output (Korthikanti's 5as/h instead of 2as/h). Megatron-LM's own
    default is 0.1; today's recipes mostly train without (0, the default here)."""
    hidden_dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Dropout probability after the attention projection and after the MLP; above 0 each block stores their two
    1-byte masks per hidden element (Korthikanti et al. 2022 §4's "2sbh"), at 0 PyTorch's dropout returns its input
    and keeps nothing (aten/src/ATen/native/Dropout.cpp ``_dropout_impl``: ``if (p == 0 || !train ...) return
    input``). Megatron-LM's own default is 0.1 (the megatron-lm-2021 and deepspeed stacks); today's recipes
    (Llama, Qwen, torchtitan, llm-foundry) train without (0, the default here). Activation memory only."""
    cross_entropy: CrossEntropyKind = "fused"
    """How the loss runs (:func:`commmodel.workload.flops.cross_entropy_bytes`): ``fused`` (one pass over the
    logits, fp32 softmax out) or ``unfused`` (Megatron-Core's vocabulary-parallel cross entropy op by op in
    fp32, 52 bytes per bf16 logit forward + backward)."""
    attention_flops: AttentionFlopsKind = "square"
    """How model FLOPs (TFLOP/s per GPU, MFU, HFU) count the attention scores and context
    (:func:`commmodel.workload.flops.counted_core_share`): ``square`` (the full s×s square: Narayanan et al. 2021,
    torchtitan, llm-foundry) or ``causal`` (its causal half: Megatron-LM since 2026-01, NeMo's flops formulas).
    A reporting rule: the step time does not depend on it."""
    main_grad_accumulation: bool = False
    """Megatron's main-grad buffer: every micro-batch's weight gradients accumulate into it (gradient-accumulation
    fusion; the embedding through a backward hook: :func:`commmodel.step.compute.grad_accumulation_bytes`) and it
    holds the gradients in the reduce dtype (:attr:`main_grad_bytes` per parameter of memory)."""
    elementwise: ElementwiseKind = "fused"
    """How each block's norms, activation, RoPE and residual adds run (:mod:`commmodel.workload.eager`):
    ``fused`` (Megatron's fused kernels, one read + write each), ``eager`` (torchtitan's Llama op by op in eager
    PyTorch: about 3.2× the bytes), ``compiled`` (torch.compile: fused regions plus torchtitan's GQA K/V copy)."""
    grad_buffer_passes: float = Field(default=0.0, ge=0.0)
    """Element passes per local parameter a stack makes once per step over its whole (unsharded) gradient buffer
    beside the optimizer, each :attr:`main_grad_bytes` (Megatron-Core: zero, NaN-check norm, 1/dp scaling = 4,
    :data:`commmodel.step.terms.MCORE_GRAD_BUFFER_PASSES`); 0 where none is modelled."""
    optimizer_bytes_per_param: float = Field(default=ADAM_BYTES_PER_PARAM, gt=0.0)
    """HBM bytes per (sharded) parameter of the optimizer step, gradient clipping included: one fused Adam
    (:data:`ADAM_BYTES_PER_PARAM`, the default) or what a stack runs instead (fsdp2: torchtitan's fused AdamW after
    foreach clipping, :data:`commmodel.step.terms.FSDP2_FUSED_ADAMW_BYTES_PER_PARAM`; a run on an older torchtitan or
    llm-foundry sets foreach AdamW, :data:`commmodel.step.terms.FOREACH_ADAMW_BYTES_PER_PARAM`)."""
    zero3_pp_keep_unsharded: bool = False
    """ZeRO 3 with pipeline parallelism (pp ≥ 2) as ``torch.distributed.pipelining`` drives FSDP2: parameters stay
    gathered and gradients accumulate unsharded (in the reduce dtype) across the step's micro-batches; each block is
    all-gathered once, in its model chunk's first forward, and reduce-scattered once, after that chunk's last
    backward (:func:`commmodel.step.overlap.fsdp_pp_gather_exposure`; docs/stacks-sources.md §3a). Off: ZeRO 3
    re-gathers and reduce-scatters every block in every micro-batch (DeepSpeed ZeRO-3, FSDP without PP)."""
    fsdp_copies: bool = False
    """FSDP2's copies around its collectives (the all-gather's shard cast and copy-in, its copy-out into the unsharded
    parameters, the gradients' ``chunk_cat`` into the reduce-scatter input), priced as HBM traffic in the breakdown
    term ``copies`` (:mod:`commmodel.step.stack_copies`). The fsdp2 stack's."""
    autocast_casts: bool = False
    """fp32 parameters trained under ``torch.autocast``: each micro-batch casts every weight to the low-precision
    dtype and its gradient back to fp32, and later micro-batches add into ``.grad`` (breakdown term ``copies``,
    :func:`commmodel.step.stack_copies.ddp_copy_bytes`). The ddp stack's."""
    grads_set_to_none: bool = False
    """The stack frees the gradients between steps (``optimizer.zero_grad()``, ``set_to_none=True`` by default since
    PyTorch 2.0; torchtitan train.py @9dec370 calls it before each step's forward), so with one micro-batch and no
    pipeline they only appear as the backward frees the activations: the step's peak is the larger of the
    activations with the loss's buffers (at the start of the backward) and the gradients (at its end), and the
    gradients term counts only what exceeds the former. With gradient accumulation or a pipeline they are held
    while other micro-batches' activations are (summed, as Megatron's persistent gradient buffer always is). Measured
    on a lent H100 (benchmarks/one_gpu_step.py): every FSDP2 and DDP peak is the activations plus the loss's buffers
    over the parameters and optimizer states, no gradient among them. The fsdp2 and ddp stacks'; memory only."""
    grad_bucket_copy: bool = False
    """PyTorch DDP's reducer allocates its flat all-reduce buckets beside the gradients, one more gradient-sized buffer
    in the gradient dtype, unless ``gradient_as_bucket_view=True`` (torch/nn/parallel/distributed.py: "the saved
    memory size will be equal to the total gradients size"; default False). A lent H100 measured it: 7.69 GB
    allocated by ``DistributedDataParallel(model)`` for 1.92e9 fp32 parameters (benchmarks/one_gpu_step.py).
    The ddp stack's; the copies into and out of the buckets are priced in the breakdown term ``copies``
    (:data:`commmodel.step.stack_copies.DDP_BUCKET_BYTES_PER_PARAM`)."""
    micro_batch_overhead_s: float = Field(default=0.0, ge=0.0)
    """Fixed time a pipeline engine adds to every micro-batch on every stage where pp > 1 (instruction
    dispatch, p2p synchronisation); 0 where a stack has none (commmodel.step.stacks)."""
    fp8_param_allgather: bool = False
    """ZeRO-3/FSDP and distributed-optimizer parameter all-gathers carry FP8 weights (1 byte per element),
    as torchao ``enable_fsdp_float8_all_gather`` and Megatron-Core ``fp8_param_gather`` do; FP8 models only."""
    memory_headroom_bytes: float = Field(default=DEFAULT_MEMORY_HEADROOM_BYTES, ge=0.0)
    """Memory kept free per GPU: a layout fits when its estimate is ≤ HBM − headroom. The default,
    :data:`DEFAULT_MEMORY_HEADROOM_BYTES`, is every command's (estimate, plan, compare, query, the plots) and the
    Python API's; 0 judges against the driver's total."""
    loss_bytes_per_logit: float = Field(default=LOSS_BYTES_PER_LOGIT, gt=0.0)
    """Bytes per logit the loss holds at the step's peak (:data:`commmodel.workload.memory.LOSS_BYTES_PER_LOGIT`:
    fp32 logits and gradient; torchtitan's eager fp32 cross entropy holds 12)."""
    stack: str | None = None
    """Name of the training stack these options came from (commmodel.step.stacks); None: set field by field."""
    moe_imbalance: float = Field(default=DEFAULT_MOE_IMBALANCE, ge=1.0, le=1024.0)
    """Mixtures of experts: tokens on the most loaded expert ÷ the mean (1 = perfectly balanced); it
    slows the busiest EP rank's expert GEMMs and its all-to-all (:mod:`commmodel.step.experts`)."""
    moe_a2a_overlap: bool = False
    """Overlap the MoE dispatch/combine all-to-alls with compute (DeepEP / Megatron
    ``--overlap-moe-expert-parallel-comm``); off by default."""
    moe_dispatcher: Literal["alltoall", "deepep", "hybridep"] = "alltoall"
    """MoE token dispatcher: "alltoall" (Megatron-Core ``--moe-token-dispatcher-type alltoall``: every token
    copy crosses the network on its own), "deepep" (DeepEP, ``flex``: a token crosses to each remote
    NVLink domain once and fans out over NVLink there; :func:`commmodel.step.experts.dispatch_requests`) or
    "hybridep" (``flex`` with ``--moe-flex-dispatcher-backend hybridep``: DeepEP's routing with the token
    permutation fused into its kernels). Each moves its own permutation bytes
    (:data:`commmodel.step.experts.PERMUTE_PASSES`)."""
    offload_modules: tuple[str, ...] = ()
    """Megatron-Core's fine-grained activation offloading (``--fine-grained-activation-offloading --offload-modules``):
    the modules (attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, moe_act) whose saved input goes to
    host memory in the forward and comes back before the backward (:mod:`commmodel.workload.offload`); the copies
    cross the system's GPU-host link (``System.host_link_bw_bytes_per_s``) beside the compute (the ``offload``
    term). Empty (default, every stack): nothing offloaded."""
    recompute_layers: int | None = Field(default=None, ge=1)
    """Blocks per model chunk that a layout's ``recompute: full`` checkpoints (Megatron's ``--recompute-method block
    --recompute-num-layers N``: the first N of each chunk, the rest store their activations;
    :func:`commmodel.workload.stages.full_recompute_fraction`). None: every block (``--recompute-method uniform``)."""
    recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES
    """Megatron-Core's ``--recompute-modules``: what a layout's ``recompute: selective`` checkpoints, from core_attn,
    layernorm, mlp, moe_act, shared_experts, moe (:mod:`commmodel.workload.recompute_modules`). Default
    ("core_attn",), Megatron's: Korthikanti's selective recompute of the attention core. Other codes ignore it."""
    precision_aware_optimizer: PrecisionAwareOptimizer | None = None
    """Megatron-Core's ``--use-precision-aware-optimizer`` with its ``--exp-avg-dtype``, ``--exp-avg-sq-dtype`` and
    ``--main-params-dtype``: the optimizer states' bytes per parameter
    (:func:`commmodel.workload.memory.optimizer_bytes_per_param`). None (default, every stack): plain Adam, fp32
    moments and master copy (12 bytes per parameter). The optimizer step's HBM traffic is not changed by it."""

    activation_fp8_input_store: bool = False
    """Megatron-Core's TransformerConfig ``activation_func_fp8_input_store`` (no Megatron-LM flag): the MLP's SwiGLU
    keeps its input (the fc1 output) for the backward as an unscaled FP8 copy, 1 byte per element instead of e, cast
    back before the backward (:mod:`commmodel.workload.activation_store`; its casts' HBM passes are priced). Off
    (default, every stack)."""

    @model_validator(mode="after")
    def _check(self) -> "StepOptions":
        if not 1 <= self.bucket_size_bytes <= MAX_SIZE_BYTES:  # a bucket is a message: the same cap (limits)
            raise WorkloadError(f"bucket_size_bytes: {self.bucket_size_bytes:g} bytes must be at least 1 byte and at "
                                f"most {MAX_SIZE_BYTES:.0e} (1 EB); try 25MiB (PyTorch DDP's default)")
        if self.flash_attention_rate and not self.flash_attention:
            raise WorkloadError("flash_attention_rate true needs flash_attention true (the fused-kernel rate "
                                "prices FlashAttention); add --flash-attention (flash_attention: true) or drop "
                                "--flash-attention-rate (flash_attention_rate)")
        check_offload_modules(self.offload_modules)
        check_recompute_modules(self.recompute_modules)
        inside = sorted(OFFLOAD_MOE_ONLY & set(self.offload_modules))
        if "moe" in self.recompute_modules and inside:
            raise WorkloadError(f"offload_modules {', '.join(inside)} with recompute_modules moe: Megatron-Core refuses "
                                "offloading inside the checkpointed MoE layer (transformer_config.py @d98e8a6); "
                                "drop one of them")
        if self.activation_fp8_input_store and "moe_act" in self.offload_modules:
            raise WorkloadError("offload_modules moe_act with activation_fp8_input_store: the offloaded tensor is then "
                                "the FP8 copy, which commmodel does not model; drop one of them")
        return self

    def for_training_dtype(self, dtype: str) -> "StepOptions":
        """These options for a model trained in ``dtype``: fp32 training keeps and reduces its gradients in fp32. A
        stack's 16-bit gradient reduction (Megatron-Core ``--grad-reduce-in-bf16``, DeepSpeed's bf16 buckets) is an
        option of 16-bit and lower training; without ``--bf16``/``--fp16`` Megatron-LM keeps fp32 main grads."""
        if dtype == "fp32" and self.grad_reduce_dtype != "fp32":
            return self.model_copy(update={"grad_reduce_dtype": "fp32"})
        return self

    @property
    def main_grad_bytes(self) -> float:
        """Bytes per element of the gradients a stack keeps in its reduce dtype: 4 in fp32, 2 in bf16 or fp16."""
        return 4.0 if self.grad_reduce_dtype == "fp32" else 2.0

    @property
    def grad_wire_bytes_per_element(self) -> float:
        """Bytes per gradient element on the DP wire, index overhead included for top-k."""
        base = GRAD_BYTES_PER_ELEMENT["bf16" if self.grad_reduce_dtype != "fp32" else "none"]
        if self.compression == "topk":
            return self.topk_fraction * (base + TOPK_INDEX_BYTES)
        return min(base, GRAD_BYTES_PER_ELEMENT[self.compression])

    @property
    def lossy(self) -> bool:
        """Whether the compression changes the gradients (top-k always; quantisation when it narrows
        the wire dtype): convergence must then be checked."""
        if self.compression == "topk":
            return True
        base = GRAD_BYTES_PER_ELEMENT["bf16" if self.grad_reduce_dtype != "fp32" else "none"]
        return self.compression != "none" and GRAD_BYTES_PER_ELEMENT[self.compression] < base


MOE_FLAGS: dict[str, str] = {"moe_imbalance": "--moe-imbalance", "moe_dispatcher": "--moe-dispatcher",
                             "moe_a2a_overlap": "--moe-a2a-overlap"}
"""The mixture-of-experts flags of the step commands (StepOptions field -> flag), refused on a dense model."""


def check_moe_flags(model: Any, knobs: dict[str, Any]) -> None:
    """One line where a MoE flag is given for a dense model, or an imbalance above what routing can make: the
    busiest expert holds at most every token once, so max ÷ mean ≤ experts ÷ top-k."""
    given = [flag for knob, flag in MOE_FLAGS.items() if knobs.get(knob) not in (None, False)]
    if given and not model.is_moe:
        raise WorkloadError(f"{', '.join(given)}: {model.name} is dense (no experts); drop the flag or pick a "
                            "mixture-of-experts model")
    limit = model.num_experts / model.experts_per_token if model.is_moe else None
    if knobs.get("moe_imbalance") is not None and limit is not None and knobs["moe_imbalance"] > limit:
        raise WorkloadError(f"--moe-imbalance {knobs['moe_imbalance']:g}: the busiest of {model.name}'s "
                            f"{model.num_experts} experts gets at most every token once, {limit:g} × the mean "
                            f"(experts ÷ top-{model.experts_per_token}); give 1 to {limit:g}")
