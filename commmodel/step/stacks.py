"""Training stacks as named, sourced bundles of step-model knobs (issue 12).

A stack is what a framework does by default: which optimizer sharding it runs (a layout field, ZeRO),
whether the data-parallel reduction hides behind the backward and in what buckets, whether tensor-parallel
communication overlaps the GEMMs, whether attention is fused, what each micro-batch costs the schedule.
Every behaviour carries its source. :data:`DEFAULT_STACK` is THE default of every command (estimate, plan,
compare, query, the step plots); an explicit flag always wins over the stack (:func:`stack_options`).

Sources, cited by key in each behaviour (see also docs/stacks-sources.md):

- [MCORE-DDP] NVIDIA/Megatron-LM ``megatron/core/distributed/distributed_data_parallel_config.py`` @0011998:
  ``overlap_grad_reduce``, ``overlap_param_gather``, ``use_distributed_optimizer``, ``bucket_size`` None by default,
  set by ``megatron/core/distributed/distributed_data_parallel.py`` @937571c L51-54 (core_v0.12.0 L56-59,
  core_v0.13.0 L62-65, unchanged) to max(40,000,000, 1,000,000·dp) parameters, dp without cp.
- [MLM-TPO] Megatron-LM ``--tp-comm-overlap`` (Transformer Engine userbuffers ring-exchange / bulk overlap of
  the TP all-gather / reduce-scatter with the column/row-parallel GEMMs; needs sequence parallelism).
- [MLM-REGATHER] with sequence parallelism a column-parallel linear keeps only its sequence shard of the input and
  its backward all-gathers it again for the weight gradient, launched before the input-gradient GEMM and waited
  after it: Megatron-LM ``megatron/mpu/layers.py`` @02bb1f5c (Mar 2022, "column parallel linear with sequence
  parallelism", the Korthikanti runs' code) and ``megatron/core/tensor_parallel/layers.py`` @937571c L441-462;
  Transformer Engine ``module/layernorm_linear.py`` @v1.8 L413-446 (userbuffers bulk all-gather ``qkv_dgrad`` /
  ``fc1_dgrad`` under ``--tp-comm-overlap``, else an async ``gather_along_first_dim``).
- [NARAYANAN21] Narayanan et al. 2021 (arXiv:2104.04473) §4-5; [KORTHIKANTI22] Korthikanti et al. 2022
  (arXiv:2205.05198) §5: gradient all-reduce after the backward, unfused attention, no distributed optimizer.
- [FSDP2] PyTorch FSDP2 (``fully_shard``; pytorch/pytorch f2805a0, #128884: implicit forward prefetch of one
  all-gather, explicit backward prefetch one block ahead); torchtitan job config: ``mixed_precision_param
  = bfloat16``, ``mixed_precision_reduce = float32``, SDPA (flash backend) attention.
- [DS-ZERO] deepspeedai/DeepSpeed ``deepspeed/runtime/zero/config.py`` @1b88ac3: ``reduce_bucket_size`` 5e8
  elements, ``overlap_comm`` True only for stage 3.
- [DDP] ``torch/nn/parallel/distributed.py``: ``bucket_cap_mb = 25``, all-reduce per bucket from autograd
  hooks (overlapped with the backward), no sharding; gradients in the parameter dtype (fp32 under AMP).
- [AMP] PyTorch's automatic mixed precision op reference (docs.pytorch.org/docs/stable/amp.html, "CUDA Ops that can
  autocast to float32"): ``cross_entropy``, ``log_softmax``, ``nll_loss`` run in fp32 under ``torch.autocast``.
- [TT-SAC] pytorch/torchtitan ``torchtitan/parallelisms/parallelize_llama.py`` @9dec370 ``_save_list`` and
  ``_apply_ac_to_transformer_block`` (``selective_ac_option = 'op'``, set by train_configs/llama3_8b.toml
  @9dec370); modelled in :mod:`commmodel.workload.op_sac`.
- [MCORE-KERNELS] Megatron-LM @937571c (the commit of the README's H100 scaling runs): without
  ``--cross-entropy-loss-fusion`` (off by default) the loss is the unfused vocabulary-parallel cross entropy in fp32
  (megatron/core/tensor_parallel/cross_entropy.py; the README's runs, which state no fusion flag); weight gradients
  accumulate into fp32 main grads
  (``gradient_accumulation_fusion`` on by default, ``accumulate_allreduce_grads_in_fp32`` with bf16); once a step the
  whole gradient buffer is zeroed, NaN-checked and scaled by 1/dp (megatron/core/distributed/param_and_grad_buffer.py,
  ``--check-for-nan-in-loss-and-grad`` on, ``average_in_collective`` off). Sized and measured in
  benchmarks/megatron_kernels.py (see :data:`commmodel.step.terms.MCORE_GRAD_BUFFER_PASSES`,
  :func:`commmodel.step.compute.accumulate_bytes_per_weight`,
  :func:`commmodel.workload.flops.cross_entropy_bytes`).
- [MCORE-GRAD] Megatron-LM ``arguments.py`` keeps fp32 main grads with ``--bf16``
  (``accumulate_allreduce_grads_in_fp32``) unless ``--grad-reduce-in-bf16``, which Megatron-LM @d98e8a6
  ``examples/llama/train_llama3_8b_h100_fp8.sh`` passes;
  Megatron-Bridge's performance recipes, whose runs are NVIDIA's published throughputs, set
  ``grad_reduce_in_fp32 = False`` (since 568b3a3, 2025-08-28; its convergence recipes keep True, recipes/common.py;
  ``perf_recipes/_common.py`` @067f987); the gradient buffer then has the parameter dtype (docs/stacks-sources.md §1).
- [MCORE-CE] the loss today's Megatron-Core recipes run: ``--cross-entropy-loss-fusion`` in Megatron-LM @d98e8a6
  ``examples/llama/train_llama3_8b_h100_fp8.sh`` and in every Megatron-MoE-ModelZoo @e865051
  ``model_configs/benchmarking`` launch (``--cross-entropy-fusion-impl`` native or te); NeMo 2.0's ``GPTConfig``
  defaults ``cross_entropy_loss_fusion`` to True. Megatron's native fused loss (megatron/core/fusions/
  fused_cross_entropy.py @d98e8a6: four ``jit_fuser`` = torch.compile stages over the fp32 copy, e + 4, 8, 8 and
  8 + e bytes per logit, 2e + 28) is priced at the generic fused figure, 3e + 24 (30 bytes in bf16, within 2 of it;
  Transformer Engine's Triton loss, ``--cross-entropy-fusion-impl te``, moves less: 3e + 16 at TE @d0067d0).
- [TT-EAGER] pytorch/torchtitan @9dec370: ``torchtitan/models/norms.py`` ``RMSNorm`` (fp32 upcast, pow, mean,
  rsqrt, mul, downcast, weight mul), ``torchtitan/models/llama/model.py`` ``apply_rotary_emb`` (complex multiply
  in fp32), ``repeat_kv`` (GQA K/V copy), ``FeedForward`` (silu, mul), ``TransformerBlock`` (two residual adds);
  ``train_configs/llama3_8b.toml`` ``compile = false``. Counted op for op in :mod:`commmodel.workload.eager`
  (benchmarks/eager_elementwise.py): 3.2× the fused bytes per Llama-3 8B layer (1,867,776 vs 589,824 per token).
- [SDPA] PyTorch 2.0+ ``scaled_dot_product_attention`` dispatches to the FlashAttention-2 kernel for
  16-bit CUDA inputs (torch.backends.cuda.flash_sdp_enabled, default on); torchtitan from May 2025
  (pytorch/torchtitan#1196; torchtitan/models/attention.py @e7c0cae, @6fc499f) sets the priority
  ``[CUDNN_ATTENTION, FLASH_ATTENTION, EFFICIENT_ATTENTION, MATH]`` where ``has_cuda_capability(10, 0)``, FLASH first
  below; its op-SAC save list (torchtitan/models/llama3/infra/parallelize.py @6fc499f) keeps flash/efficient SDPA
  outputs, not cuDNN's, until #2095 (Dec 2025). Rates: :data:`commmodel.step.attention_rates.ATTENTION_RATES`.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict

from commmodel.errors import WorkloadError
from commmodel.step.attention_rates import rate_text
from commmodel.step.precision import FP8_PARAM_GATHER_DTYPES
from commmodel.workload.recompute_policies import Recompute
from commmodel.step.options import FIXED_BUCKET, StepOptions
from commmodel.step.terms import MCORE_GRAD_BUFFER_PASSES, FSDP2_FUSED_ADAMW_BYTES_PER_PARAM
from commmodel.workload.memory import TORCHTITAN_LOSS_BYTES_PER_LOGIT
from commmodel.step.buckets import DS_REDUCE_BUCKET_BYTES, MCORE_BUCKET_PARAMS, MCORE_BUCKET_PARAMS_PER_DP_RANK

DS_PIPE_MICRO_BATCH_OVERHEAD_S = 0.05
"""Per-micro-batch, per-stage overhead of the 2021-2022 DeepSpeed pipeline engine (Megatron-DeepSpeed, pp > 1).
A fit over a named set, not a source: the L1 fit over the three Megatron-DeepSpeed runs of
commmodel/data/training_out_of_sample.yaml (mtnlg-530b-a100-2240gpu, mtnlg-530b-a100-3360gpu,
bloom-176b-a100-384gpu; grid 0-150 ms) gives 50 ms (MAE 22.0% -> 3.7% on those three, in sample). The evidence
that it exists: MT-NLG (Smith et al. 2022, arXiv:2201.11990 §3) reports 113-126 TFLOP/s per GPU under
Megatron-DeepSpeed where the same layout runs at ~163 under Megatron-LM (Narayanan et al. 2021 Table 1 scale)."""


class Behaviour(BaseModel):
    """One thing a stack does, with the knob it sets and where that is documented."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    """What the stack does, in words (printed as an assumption)."""
    source: str
    """Where it is documented: a source key of this module's docstring, a file at a commit or a paper section."""
    knob: str | None = None
    """The StepOptions field this line describes, if one: a run that overrides it is not told the line (the override
    line says what it runs instead)."""


class Stack(BaseModel):
    """A training stack: the StepOptions it implies, its layout defaults and the sourced behaviours."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The ``--stack`` name."""
    description: str
    """One line: which framework and era."""
    options: dict[str, Any]
    """StepOptions field values the stack sets (an explicit flag overrides each)."""
    zero: int
    """ZeRO stage of a single estimate (1 = distributed optimizer, 3 = FSDP full shard)."""
    zero_stages: tuple[int, ...]
    """ZeRO stages the planner searches under this stack."""
    sequence_parallel: bool
    """Sequence parallelism on wherever tp ≥ 2 (estimate's default)."""
    recompute_policies: tuple[Recompute, ...] = ("none", "selective", "full")
    """Recompute policies the planner searches under this stack (the layout's ``recompute`` names)."""
    parallel_pins: dict[str, tuple[int, ...] | int] = {}
    """SearchSpace fields the planner keeps under this stack where the user pins none (ddp: tp, pp, cp 1;
    deepspeed: ``max_vpp`` 1, its pipeline engine has no interleaved schedule)."""
    behaviours: tuple[Behaviour, ...]
    """Every behaviour with its source."""

    @property
    def search_pins(self) -> dict[str, tuple]:
        """The planner's SearchSpace fields this stack narrows: ZeRO stages, recompute policies, parallel degrees."""
        return {"zero_stages": self.zero_stages, "recompute": self.recompute_policies, **self.parallel_pins}


def _b(text: str, source: str, knob: str | None = None) -> Behaviour:
    return Behaviour(text=text, source=source, knob=knob)


SET_TO_NONE = _b("gradients freed between steps (zero_grad set_to_none): with one micro-batch and no pipeline the peak "
                  "is the larger of the activations with the loss's buffers and the gradients, not their sum",
                  "PyTorch Optimizer.zero_grad (set_to_none=True since 2.0); StepOptions.grads_set_to_none")
"""The fsdp2 and ddp stacks' gradient lifetime (one behaviour, stated by both)."""


STACKS: dict[str, Stack] = {s.name: s for s in (
    Stack(name="megatron-core", description="Megatron-Core / NeMo (2023-): distributed optimizer, overlapped "
          "per-bucket DP reduce-scatter / all-gather, TP comm overlap, fused attention",
          options={"overlap": True, "bucket_params": MCORE_BUCKET_PARAMS,
                   "bucket_params_per_dp_rank": MCORE_BUCKET_PARAMS_PER_DP_RANK,
                   "grad_reduce_dtype": "bf16", "flash_attention": True, "flash_attention_rate": True,
                   "attention_kernel": "te", "tp_comm_overlap": True, "micro_batch_overhead_s": 0.0,
                   "cross_entropy": "fused", "attention_flops": "causal",
                   "fp8_param_allgather": True,
                   "main_grad_accumulation": True, "grad_buffer_passes": MCORE_GRAD_BUFFER_PASSES,
                   "tp_input_regather": True, "pp_p2p_overlap": True},
          zero=1, zero_stages=(0, 1), sequence_parallel=True, behaviours=(
              _b("distributed optimizer (ZeRO-1): gradients reduce-scattered, parameters all-gathered over dp·cp",
                 "[MCORE-DDP] use_distributed_optimizer", knob="dp_mode"),
              _b("DP reduce-scatter bucket by bucket behind the last micro-batch's backward (the others run under "
                 "no_sync), the tail bucket exposed; with interleaving chunk by chunk, each chunk's whole reduction "
                 "after its last backward, the first chunk's (with the embedding) exposed; param all-gather bucket "
                 "by bucket in the first micro-batch's forward, one gather in flight, each launched when the forward "
                 "reaches the bucket before it (first model chunk only with interleaving)",
                 "[MCORE-DDP] overlap_grad_reduce, overlap_param_gather; docs/stacks-sources.md §1a "
                 "(param_and_grad_buffer.py, distrib_optimizer.py, schedules.py @937571c; delay/align_grad_reduce)"),
              _b("buckets of max(40M, 1M·dp) parameters, dp without cp (bf16 gradients: max(80 MB, 2 MB·dp)); "
                 "an explicit --bucket-size is used as given", "[MCORE-DDP] bucket_size, distributed_data_parallel.py"),
              _b("gradients kept and reduced in bf16, as NVIDIA's performance recipes and Megatron-LM's Llama 3 "
                 "example run (--grad-reduce-in-bf16): 2 bytes per parameter of gradient memory, half the "
                 "reduce-scatter; Megatron-LM's argument default, Megatron-Bridge's convergence recipes and the "
                 "MoE ModelZoo keep fp32 main grads: pass --grad-reduce-dtype fp32 for such a run", "[MCORE-GRAD]",
                 knob="grad_reduce_dtype"),
              _b("TP all-gather / reduce-scatter overlapped with the GEMMs (userbuffers) where tp ≥ 2 with "
                 "sequence parallelism; one of tp chunks stays exposed", "[MLM-TPO]"),
              _b("with sequence parallelism the backward all-gathers the QKV and fc1 inputs again for their weight "
                 "gradients, behind the input-gradient GEMM (two more all-gathers per block, hidden)",
                 "[MLM-REGATHER]"),
              _b("with interleaving (vpp ≥ 2) pipeline send/recv overlapped with the next chunk's compute: only the "
                 "fill's and drain's hops exposed (without interleaving Megatron turns the overlap off)",
                 "Megatron-LM @d98e8a6 megatron/training/arguments.py --no-overlap-p2p-communication (store_false: "
                 "overlap_p2p_comm on), L1000-1016 (off without the interleaved schedule)"),
              _b("fused attention through Transformer Engine: no s×s scores in HBM, causal blocks skipped; TE runs "
                 "cuDNN fused attention from sm_90 (Hopper and later), FlashAttention-2 below (attention_kernel te), "
                 "each at its published rate for the tokens of one kernel call (H100/H200 cuDNN "
                 f"{rate_text('cudnn', 90)}; see FUSED_RATE_NOTE)",
                 "TransformerEngine @d0067d0 dot_product_attention/utils.py get_attention_backend ('FusedAttention "
                 "preference on Hopper+'); step/attention.py, step/attention_rates.py", knob="flash_attention"),
              _b("no hidden or attention dropout, as today's Megatron-Core recipes set (Megatron-LM's argument "
                 "defaults are 0.1: pass --dropout 0.1 for such a run): no masks stored",
                 "Megatron-LM @d98e8a6 examples/llama/train_llama3_8b_h100_fp8.sh, examples/mixtral/"
                 "train_mixtral_8x7b_distributed.sh --hidden-dropout 0.0 --attention-dropout 0.0"),
              _b("with a low-precision dtype each linear keeps Transformer Engine's cast of its input for the weight "
                 "gradient (1 byte per element, MXFP8 and FP8 blockwise 1 + 1/32) instead of the 16-bit input: "
                 "activation memory",
                 "TransformerEngine @0004dbd0 pytorch/module/linear.py _Linear.forward; step/precision.py "
                 "saved_input_bytes"),
              _b(f"with an FP8 dtype ({', '.join(FP8_PARAM_GATHER_DTYPES)}) the distributed optimizer all-gathers FP8 "
                 "weights and "
                 "Transformer Engine keeps them, so no 16-bit weight is cast per micro-batch (--fp8-param-gather, as "
                 "today's FP8 launches pass it; fp8-blockwise keeps its casts priced: the post-gather swizzle is not "
                 "modelled; nvfp4 gathers 16-bit weights)",
                 "Megatron-LM @d98e8a6 examples/llama/train_llama3_8b_h100_fp8.sh; Megatron-MoE-ModelZoo @e865051 "
                 "sbatch_benchmarking.sh (blockwise, mxfp8); step/precision.py with_fp8_params"),
              _b("the loss is Megatron-Core's fused vocabulary-parallel cross entropy (--cross-entropy-loss-fusion, as "
                 "today's recipes set it; Megatron-LM's argument default is off, 52 bytes per bf16 logit: pass "
                 "--cross-entropy unfused for such a run): 30 bytes per bf16 logit of HBM traffic forward + backward",
                 "[MCORE-CE] megatron/core/fusions/fused_cross_entropy.py; Megatron-LM @d98e8a6 examples/llama/"
                 "train_llama3_8b_h100_fp8.sh, Megatron-MoE-ModelZoo @e865051 model_configs/benchmarking/*.yaml "
                 "--cross-entropy-loss-fusion"),
              _b("every micro-batch's weight-gradient GEMMs accumulate into the main grads (2 more bytes per weight "
                 "in bf16, 6 in fp32); the word embedding's gradient is added by a hook (8 or 12 bytes per element)",
                 "[MCORE-KERNELS] gradient_accumulation_fusion, _make_param_hook"),
              _b("once a step the whole local gradient buffer is zeroed, NaN-checked and scaled by 1/dp (4 passes: "
                 "8 bytes per parameter in bf16, 16 in fp32)", "[MCORE-KERNELS] param_and_grad_buffer.py"),
          )),
    Stack(name="megatron-lm-2021", description="Megatron-LM as in the Narayanan 2021 / Korthikanti 2022 tables",
          options={"overlap": False, "bucket_size_bytes": "25MiB", "grad_reduce_dtype": "fp32",
                   "flash_attention": False, "flash_attention_rate": False, "tp_comm_overlap": False,
                   "micro_batch_overhead_s": 0.0, "tp_input_regather": True, "hidden_dropout": 0.1,
                   "attention_dropout": 0.1, "cross_entropy": "unfused"},
          zero=0, zero_stages=(0,), sequence_parallel=False, behaviours=(
              _b("no distributed optimizer: the fp32 main gradients are all-reduced over dp after the last "
                 "backward (not overlapped)", "[NARAYANAN21] §4; [KORTHIKANTI22] §5"),
              _b("hidden and attention dropout 0.1 (Megatron-LM's defaults): their masks are stored, Korthikanti's "
                 "34·sbh + 5·as²b", "[KORTHIKANTI22] §4.1; Megatron-LM arguments.py --hidden-dropout/--attention-dropout"),
              _b("unfused attention: s×s scores in HBM, QKᵀ and PV as batched GEMMs",
                 "[NARAYANAN21] §4.2 (fused scale-mask-softmax only)", knob="flash_attention"),
              _b("the loss: Megatron-LM's vocabulary-parallel cross entropy op by op in fp32 (no fused loss kernel "
                 "until --cross-entropy-loss-fusion, 2024): 52 bytes per 16-bit logit of HBM traffic forward + "
                 "backward", "Megatron-LM megatron/mpu/cross_entropy.py, now megatron/core/tensor_parallel/"
                 "cross_entropy.py ([MCORE-KERNELS]); workload/flops.py cross_entropy_bytes", knob="cross_entropy"),
              _b("TP collectives on the critical path (no comm overlap), except that with sequence parallelism the "
                 "backward's re-gather of the QKV and fc1 inputs runs behind the input-gradient GEMM",
                 "[NARAYANAN21] §3.3; [MLM-REGATHER]"),
          )),
    Stack(name="fsdp2", description="PyTorch FSDP2 / torchtitan: per-block all-gather with prefetch, "
          "reduce-scatter per block, optional TP/PP/CP",
          options={"overlap": True, "bucket_size_bytes": "25MiB", "grad_reduce_dtype": "fp32",
                   "flash_attention": True, "flash_attention_rate": True, "attention_kernel": "auto",
                   "tp_comm_overlap": False, "tp_overlap_kind": "async-tp", "micro_batch_overhead_s": 0.0,
                   "loss_bytes_per_logit": TORCHTITAN_LOSS_BYTES_PER_LOGIT, "elementwise": "eager",
                   "cross_entropy": "eager", "fsdp_copies": True, "grads_set_to_none": True,
                   "cp_comm": "torch-allgather", "optimizer_bytes_per_param": FSDP2_FUSED_ADAMW_BYTES_PER_PARAM,
                   "zero3_pp_keep_unsharded": True},
          zero=3, zero_stages=(2, 3), sequence_parallel=True, recompute_policies=("none", "op", "full"), behaviours=(
              _b("full shard (ZeRO-3): each block's parameters all-gathered before its forward and again "
                 "before its backward, gradients reduce-scattered per block", "[FSDP2] reshard_after_forward=True",
                 knob="dp_mode"),
              _b("one all-gather prefetched ahead in forward and backward", "[FSDP2] #128884"),
              SET_TO_NONE,
              _b("FSDP2's copies around each collective in HBM (copies): the shard cast and copy-in, the copy-out "
                 "into the unsharded parameters (2e per gathered parameter), the gradients' chunk_cat into the fp32 "
                 "reduce-scatter input (e + 4)", "[FSDP2] _fsdp_collectives.py; step/stack_copies.py"),
              _b("with pipeline parallelism (pp >= 2) no resharding between micro-batches: each block all-gathered "
                 "once per step, in its model chunk's first forward (the first block of each chunk exposed), the "
                 "gathered parameters and the fp32-accumulated unsharded gradients held for the whole step, each "
                 "chunk's blocks reduce-scattered together after that chunk's last backward (the first chunk's, with "
                 "the embedding, exposed; with interleaving the later chunks' behind the p backwards still to run)",
                 "torchtitan parallelize_llama.py @9dec370 apply_fsdp reshard_after_forward=False with PP; "
                 "torch/distributed/pipelining/stage.py backward_maybe_with_nosync (pytorch/pytorch#134052, in the "
                 "[TT-H100] torch 1963fc8); docs/stacks-sources.md §3c"),
              _b("parameters in bf16, gradients reduce-scattered in fp32", "[FSDP2] torchtitan mixed_precision_reduce"),
              _b("torchao float8 tensorwise keeps each linear's FP8 cast of its input for the weight gradient (1 byte "
                 "per element); rowwise and MX keep the 16-bit input and cast it again in the backward",
                 "pytorch/ao float8_linear.py @eab345c (input_fp8) and @36027d8 (input_hp); step/precision.py "
                 "saved_input_bytes"),
              _b("attention through SDPA, causal blocks skipped, at the published rate of the kernel torchtitan's "
                 "priority picks (attention_kernel auto) for the tokens of one kernel call: FlashAttention-2 below "
                 f"sm_100 (A100 {rate_text('flash2', 80)}; H100/H200 {rate_text('flash2', 90, (8192,))}), cuDNN "
                 f"attention from sm_100 (B200 {rate_text('cudnn', 100, (8192,))}); op SAC keeps FlashAttention-2's "
                 "output but recomputes cuDNN's (see FUSED_RATE_NOTE)",
                 "[SDPA]; step/attention.py, step/attention_rates.py", knob="flash_attention"),
              _b("norms, RoPE, SwiGLU and residual adds run op by op in eager PyTorch, 3.2x the fused bytes in 101 "
                 "kernels per block (elementwise='eager', torchtitan's compile = false); under torch.compile "
                 "(elementwise='compiled', what a run's torch_compile sets) the fused bytes plus the GQA K/V copy; "
                 "eager blocks also keep what those ops save (Llama-3 8B: 221 KB per token and block, 139 fused)",
                 "[TT-EAGER]; commmodel/workload/eager.py saved_extra_bytes_per_token"),
              _b("context parallel through PyTorch context_parallel (cp_comm torch-allgather): K/V repeated to every "
                 "query head, all-gathered once per layer behind the first (diagonal) block only, fp32 dK/dV passed "
                 "on per ring step; load-balanced causal blocks (1/cp of the causal work each); every ring step "
                 "after the first merges its partial output into an fp32 running output and accumulates dQ/dK/dV "
                 "in fp32 (TORCH_CP_RING_STEP_PASSES: fused under torch.compile, op by op in eager)",
                 "torchtitan @9dec370 config_manager.py rotate_method default 'allgather', models/llama/model.py "
                 "L201-209; torch/distributed/tensor/experimental/_attention.py _AllGatherRotater, "
                 "_templated_ring_attention(_backward)"),
              _b("no dropout (torchtitan's Llama has none): no masks stored", "torchtitan models/llama/model.py "
                 "@9dec370"),
              _b("TP collectives not overlapped unless AsyncTP (--tp-comm-overlap); with it each fused all-gather / "
                 "reduce-scatter hides only behind its own GEMMs, and the backward's QKV and w1/w3 input-gradient "
                 "reduce-scatters (a sum of GEMMs, not fused) stay exposed", "[FSDP2] torchtitan "
                 "enable_async_tensor_parallel (default off); torch/_inductor/fx_passes/micro_pipeline_tp.py; "
                 "pytorch/pytorch#149946; step/async_tp.py"),
              _b("selective activation checkpointing is op-level SAC (--recompute op): per block the outputs of mm, "
                 "SDPA and TP reduce-scatter are kept except every second mm; the rest is recomputed in the backward",
                 "[TT-SAC]"),
              _b("optimizer step: fused AdamW over the sharded fp32 parameters after foreach gradient-norm clipping, "
                 "40 bytes per sharded parameter (runs before torchtitan#881, Feb 2025, ran foreach AdamW: 92, "
                 "optimizer_bytes_per_param)", "torchtitan job_config.py @6fc499f optimizer.implementation 'fused', "
                 "utils.clip_grad_norm_; FSDP2_FUSED_ADAMW_BYTES_PER_PARAM, FOREACH_ADAMW_BYTES_PER_PARAM"),
              _b("eager cross entropy on an fp32 copy of the bf16 logits: 12 bytes per logit at its backward "
                 "(saved log-probabilities, their gradient, the logits' gradient, all fp32), 48 bytes per logit of "
                 "HBM traffic forward + backward (cross_entropy eager; a lent H100 measured 18.0 ms for 1.05e9 "
                 "logits, the model 18.8)", "torchtitan train.py @9dec370 loss_fn; TORCHTITAN_LOSS_BYTES_PER_LOGIT; "
                 "EAGER_CE_FORWARD_FP32_BYTES_PER_LOGIT"),
          )),
    Stack(name="deepspeed", description="DeepSpeed ZeRO 1-3 and the 2021-2022 Megatron-DeepSpeed pipeline engine",
          options={"overlap": False, "bucket_size_bytes": DS_REDUCE_BUCKET_BYTES, "grad_reduce_dtype": "bf16",
                   "flash_attention": False, "flash_attention_rate": False, "tp_comm_overlap": False,
                   "micro_batch_overhead_s": DS_PIPE_MICRO_BATCH_OVERHEAD_S, "hidden_dropout": 0.1,
                   "attention_dropout": 0.1, "cross_entropy": "unfused"},
          zero=1, zero_stages=(0, 1, 2, 3), sequence_parallel=False, parallel_pins={"max_vpp": 1}, behaviours=(
              _b("hidden and attention dropout 0.1 (Megatron-DeepSpeed's defaults): their masks are stored",
                 "Megatron-DeepSpeed arguments.py --hidden-dropout/--attention-dropout"),
              _b("the loss: Megatron's vocabulary-parallel cross entropy op by op in fp32, as Megatron-DeepSpeed "
                 "kept it (52 bytes per 16-bit logit forward + backward)", "Megatron-DeepSpeed megatron/mpu/"
                 "cross_entropy.py ([MCORE-KERNELS]); workload/flops.py cross_entropy_bytes", knob="cross_entropy"),
              _b("ZeRO-1 by default in Megatron-DeepSpeed runs; reduce bucket 5e8 elements",
                 "[DS-ZERO] reduce_bucket_size"),
              _b("overlap_comm off for stages 1-2 (on only for stage 3)", "[DS-ZERO] overlap_comm validator"),
              _b("gradients reduced in the 16-bit training dtype", "[DS-ZERO] (fp16/bf16 optimizer wrappers)",
                 knob="grad_reduce_dtype"),
              _b("unfused attention (Megatron-DeepSpeed 2021-2022 kernels)", "MT-NLG (arXiv:2201.11990) §3",
                 knob="flash_attention"),
              _b("pipeline engine (pp > 1): 50 ms per micro-batch and stage", "fit over the three Megatron-DeepSpeed "
                 "runs of training_out_of_sample.yaml (DS_PIPE_MICRO_BATCH_OVERHEAD_S)"),
              _b("the pipeline engine runs one 1F1B schedule, not interleaved: the planner searches no virtual "
                 "stages (vpp 1)", "DeepSpeed deepspeed/runtime/pipe/schedule.py TrainSchedule (synchronous 1F1B; "
                 "no interleaved schedule class)"),
          )),
    Stack(name="ddp", description="PyTorch DistributedDataParallel: 25 MiB buckets overlapped with the backward",
          options={"overlap": True, "bucket_size_bytes": "25MiB", "grad_reduce_dtype": "fp32",
                   "flash_attention": True, "flash_attention_rate": True, "attention_kernel": "auto",
                   "tp_comm_overlap": False, "micro_batch_overhead_s": 0.0, "cross_entropy": "eager",
                   "grad_bucket_copy": True, "grads_set_to_none": True, "elementwise": "eager", "autocast_casts": True,
                   "loss_bytes_per_logit": TORCHTITAN_LOSS_BYTES_PER_LOGIT},
          zero=0, zero_stages=(0,), sequence_parallel=False, parallel_pins={"tp": (1,), "pp": (1,), "cp": (1,)},
          behaviours=(
              _b("data parallel alone: plan and compare search no tp, pp or cp under ddp (pin --tp/--pp for a "
                 "DTensor or pipelining job)", "[DDP]"),
              _b("no sharding: every rank holds the whole model, gradients and optimizer, and the reducer's buckets "
                 "hold one more copy of the gradients (gradient_as_bucket_view=False)", "[DDP]; grad_bucket_copy"),
              _b("all-reduce per 25 MiB bucket from autograd hooks, overlapped with the backward",
                 "[DDP] bucket_cap_mb", knob="dp_mode"),
              SET_TO_NONE,
              _b("gradients reduced in the parameter dtype (fp32 under AMP)", "[DDP]"),
              _b("attention through SDPA at the published rate of the kernel its priority picks, as fsdp2 (attention_kernel "
                 "auto); the model in eager PyTorch, op by op (torchtitan's Llama block as the eager model: elementwise "
                 "eager)", "[SDPA]; [TT-EAGER]; FUSED_RATE_NOTE", knob="flash_attention"),
              _b("fp32 parameters under torch.autocast: every micro-batch casts each weight to bf16 and its gradient "
                 "back (2e + 8 bytes per weight); the reducer copies the gradients into its buckets, divided, and back "
                 "(16 bytes per parameter per step) (copies)", "[AMP] autocast cache_enabled; [DDP] reducer.cpp; "
                 "step/stack_copies.py"),
              _b("no dropout (pass --dropout P for a model that has it): no masks stored",
                 "StepOptions.hidden_dropout"),
              _b("the loss is PyTorch's eager cross entropy, which autocast runs on an fp32 copy of the logits: 48 "
                 "bytes per bf16 logit of HBM traffic forward + backward (cross_entropy eager), 12 held at its backward",
                 "[AMP] 'CUDA Ops that can autocast to float32': cross_entropy; EAGER_CE_FORWARD_FP32_BYTES_PER_LOGIT"),
          )),
)}
"""Every stack by name."""

DEFAULT_STACK = "megatron-core"
"""THE default stack of every command."""

STACK_NAMES: tuple[str, ...] = tuple(STACKS)
"""Accepted ``--stack`` values."""


def get_stack(name: str | None = None) -> Stack:
    """The stack ``name`` (default :data:`DEFAULT_STACK`); an unknown name is an error listing the known ones."""
    key = (DEFAULT_STACK if name is None else name).strip().lower()
    if key not in STACKS:
        raise WorkloadError(f"unknown stack {name!r}; use one of {', '.join(STACK_NAMES)}")
    return STACKS[key]


def stack_options(name: str | None = None, **explicit: Any) -> StepOptions:
    """StepOptions of stack ``name`` with every explicit (not None) knob overriding the stack's value; an explicit
    ``bucket_size_bytes`` also turns off the stack's bucket in parameters and its growth with dp (``bucket_params``,
    ``bucket_params_per_dp_rank`` 0)."""
    stack = get_stack(name)
    given = {k: v for k, v in explicit.items() if v is not None}
    if given.get("flash_attention") is False:
        given.setdefault("flash_attention_rate", False)
    if "bucket_size_bytes" in given:  # the user's bucket is the bucket
        given = {**FIXED_BUCKET, **given}
    return StepOptions(**{**stack.options, **given, "stack": stack.name})


__all__ = ["DEFAULT_STACK", "STACKS", "STACK_NAMES", "Behaviour", "Stack", "get_stack",
           "stack_options"]
