"""The step commands' stack-knob flags (estimate, plan, compare, plot timeline): one Annotated option type per
StepOptions knob, :data:`STACK_FLAGS`, which maps each flag's parameter to the StepOptions fields it sets, and
:func:`with_stack_flags`, which gives a command all of them. Every such flag defaults to None, "the stack's", so an
unset flag never overrides the stack (:func:`commmodel.step.job.job_setup`)."""

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from commmodel.cli.common import lower_case


FlashAttentionOpt = Annotated[
    bool | None, typer.Option("--flash-attention/--no-flash-attention",
                              help="Fused attention (FlashAttention): no s×s scores in memory or over HBM "
                                   "(default: the stack's).")
]
AttentionRateOpt = Annotated[
    bool | None, typer.Option("--flash-attention-rate/--no-flash-attention-rate",
                              help="Price the fused attention core at the published rate of the kernel that runs, "
                                   "causal blocks skipped; off prices its two matmuls as GEMMs over the full square "
                                   "(default: the stack's: on for megatron-core, fsdp2 and ddp; needs "
                                   "--flash-attention).")
]
AttentionKernelOpt = Annotated[str | None, typer.Option(
    "--attention-kernel", help="Fused attention kernel whose published rate prices the core: te (cuDNN attention on "
                               "sm_90+, FlashAttention-2 below: what Transformer Engine picks; megatron-core), auto "
                               "(cuDNN on sm_100+, FlashAttention-2 below: what torchtitan's SDPA picks; fsdp2), "
                               "flash2, cudnn, or triton (the 2023 Triton FlashAttention: FlashAttention-2's rate / "
                               "1.85, Dao 2023 §4.1) (default: the stack's; used where the attention is priced at a "
                               "kernel rate).")]
DropoutOpt = Annotated[float | None, typer.Option(
    "--dropout", help="Hidden and attention dropout probability in [0, 1): above 0 each block stores their masks "
                      "(default: the stack's: 0 for megatron-core, fsdp2 and ddp; 0.1 for megatron-lm-2021 and "
                      "deepspeed).")]
CrossEntropyOpt = Annotated[str | None, typer.Option(
    "--cross-entropy", help="How the loss runs: fused (one fused vocabulary-parallel kernel, as Megatron-Core's "
                            "--cross-entropy-loss-fusion), unfused (op by op in fp32, Megatron-LM's argument "
                            "default, which Megatron-Core runs without that flag) or eager (PyTorch's "
                            "F.cross_entropy on an fp32 copy) (default: the stack's; eager for fsdp2 and ddp).")]
RecomputeLayersOpt = Annotated[int | None, typer.Option(
    "--recompute-layers", min=1, help="With --recompute full, checkpoint only the first N blocks of each model chunk "
                                      "and store the rest (Megatron-LM --recompute-method block --recompute-num-layers "
                                      "N; default: every block, --recompute-method uniform).")]
AttentionFlopsOpt = Annotated[str | None, typer.Option(
    "--attention-flops", help="How model FLOPs (TFLOP/s, MFU, HFU) count attention: causal (its causal half, as "
                              "Megatron-LM since 2026-01 and NeMo log them) or square (the full s×s square: Narayanan "
                              "et al. 2021, torchtitan, llm-foundry); the step time does not change (default: the "
                              "stack's: causal for megatron-core, square otherwise).")]
ElementwiseOpt = Annotated[str | None, typer.Option(
    "--elementwise", help="How norms, RoPE, activations and residual adds run: fused (Megatron's kernels), eager "
                          "(PyTorch op by op), compiled (torch.compile) or eager-fused-rmsnorm (default: the stack's: "
                          "fused for megatron-core, eager for fsdp2).")]
OffloadModulesOpt = Annotated[str | None, typer.Option(
    "--offload-modules", help="Megatron-Core fine-grained activation offloading: modules whose saved input goes to "
                              "host memory, comma-separated, from attn_norm, qkv_linear, core_attn, attn_proj, "
                              "mlp_norm, expert_fc1, moe_act (default: none).")]
RecomputeModulesOpt = Annotated[str | None, typer.Option(
    "--recompute-modules", help="Megatron-Core --recompute-modules: what --recompute selective checkpoints, "
                                "comma-separated, from core_attn, layernorm, mlp, moe_act, shared_experts, moe, "
                                "mla_up_proj (default: core_attn, Megatron's).")]
PrecisionAwareOpt = Annotated[str | None, typer.Option(
    "--precision-aware-optimizer", help="Megatron-Core --use-precision-aware-optimizer: the exp_avg,exp_avg_sq"
                                        "[,main_params] dtypes, e.g. bf16,bf16 (default: off, fp32 Adam states).")]
ActivationStoreOpt = Annotated[bool | None, typer.Option(
    "--activation-fp8-input-store", help="Megatron-Core's TransformerConfig.activation_func_fp8_input_store (no "
                                         "Megatron-LM flag: set in code): SwiGLU keeps its input in FP8 for the "
                                         "backward (default: off in every stack).")]
StackOpt = Annotated[str | None, typer.Option(
    "--stack", help="Training stack: megatron-core (default), megatron-lm-2021, fsdp2, deepspeed, ddp; "
                    "sets overlap, sharding, attention and reduction defaults (each flag still overrides).")]
TrainDtypeOpt = Annotated[str | None, typer.Option(
    "--dtype", help="Training dtype: bf16, fp16, fp32, fp8 (per-tensor, Hopper+; delayed scaling under Transformer "
                    "Engine), fp8-current (per-tensor current scaling: Megatron --fp8-recipe tensorwise, NeMo FP8-CS), "
                    "fp8-rowwise (torchao), "
                    "fp8-blockwise (1x128/128x128 scales, Hopper), mxfp8 or nvfp4 (Blackwell).", callback=lower_case)]
TpCommOverlapOpt = Annotated[bool | None, typer.Option(
    "--tp-comm-overlap/--no-tp-comm-overlap", help="Overlap TP collectives with the GEMMs (default: the stack's).")]
PpP2pOverlapOpt = Annotated[bool | None, typer.Option(
    "--pp-p2p-overlap/--no-pp-p2p-overlap", help="With interleaving (--vpp ≥ 2), overlap pipeline send/recv with the "
                                                 "next chunk's compute (default: the stack's).")]
TpOverlapKindOpt = Annotated[str | None, typer.Option(
    "--tp-overlap-kind", help="What --tp-comm-overlap runs: userbuffers (Transformer Engine) or async-tp (PyTorch's "
                              "torch.compile micro-pipeline TP) (default: the stack's).")]
CpCommOverlapOpt = Annotated[bool | None, typer.Option(
    "--cp-comm-overlap/--no-cp-comm-overlap", help="Hide context parallelism's K/V exchange behind attention as the "
                                                   "stack schedules it; off: all exposed (torch.compile before "
                                                   "PyTorch 2.8) (default: on).")]
MoeDispatcherOpt = Annotated[str | None, typer.Option(
    "--moe-dispatcher", help="Mixture of experts: the token dispatcher, alltoall (Megatron-Core's), deepep or hybridep "
                             "(flex backends: one copy per remote NVLink domain) (default: alltoall).")]
MoeImbalanceOpt = Annotated[float | None, typer.Option(
    "--moe-imbalance", help="Mixture of experts: tokens on the busiest expert ÷ mean, 1 (balanced) to experts ÷ top-k "
                            "(default: a published aux-loss router's, stated in the output).", min=1.0)]
MoeA2AOverlapOpt = Annotated[bool | None, typer.Option(
    "--moe-a2a-overlap/--no-moe-a2a-overlap", help="Mixture of experts: overlap dispatch and combine with the other "
    "micro-batch's compute (Megatron-Core --overlap-moe-expert-parallel-comm) (default: off).")]
Fp8ParamGatherOpt = Annotated[bool | None, typer.Option(
    "--fp8-param-gather/--no-fp8-param-gather", help="With an FP8 dtype, gather and keep FP8 weights (Megatron-Core "
    "--fp8-param-gather, torchao's FP8 all-gather): no per-micro-batch weight cast, half the parameter all-gather "
    "(default: the stack's: on for megatron-core, off otherwise).")]
OverlapOpt = Annotated[bool | None, typer.Option(
    "--overlap/--no-overlap", help="Overlap DP reduction with backward (default: the stack's).")]
BucketSizeOpt = Annotated[str | None, typer.Option(
    "--bucket-size", help="Gradient bucket size in bytes, e.g. 25MiB or 80MB (default: the stack's; megatron-core "
                          "grows its buckets as max(40M, 1M·dp) parameters unless this is given).")]
GradReduceDtypeOpt = Annotated[str | None, typer.Option(
    "--grad-reduce-dtype", help="fp32, bf16 or fp16 gradients on the DP wire (default: the stack's).")]
MemoryHeadroomOpt = Annotated[str | None, typer.Option(
    "--memory-headroom", help="Memory kept free per GPU, bytes ('4GB') or percent ('10%') (default 4GB: CUDA context, "
                              "NCCL buffers, allocator fragmentation).")]


STACK_FLAGS: dict[str, tuple[str, ...]] = {
    "flash_attention": ("flash_attention",), "flash_attention_rate": ("flash_attention_rate",),
    "tp_comm_overlap": ("tp_comm_overlap",), "pp_p2p_overlap": ("pp_p2p_overlap",),
    "cp_comm_overlap": ("cp_comm_overlap",), "tp_overlap_kind": ("tp_overlap_kind",),
    "attention_kernel": ("attention_kernel",), "elementwise": ("elementwise",),
    "dropout": ("hidden_dropout", "attention_dropout"), "cross_entropy": ("cross_entropy",),
    "attention_flops": ("attention_flops",), "fp8_param_gather": ("fp8_param_allgather",),
    "moe_dispatcher": ("moe_dispatcher",), "moe_a2a_overlap": ("moe_a2a_overlap",),
    "moe_imbalance": ("moe_imbalance",),
    "offload_modules": ("offload_modules",), "recompute_modules": ("recompute_modules",),
    "precision_aware_optimizer": ("precision_aware_optimizer",),
    "activation_fp8_input_store": ("activation_fp8_input_store",), "overlap": ("overlap",),
    "bucket_size": ("bucket_size_bytes",), "grad_reduce_dtype": ("grad_reduce_dtype",),
    "recompute_layers": ("recompute_layers",), "memory_headroom": ("memory_headroom_bytes",),
}
"""The stack flags ``estimate``, ``plan`` and ``compare`` share: each command parameter and the StepOptions fields it
sets (``--dropout`` sets both dropouts; ``--memory-headroom``'s text is read against the GPU's memory in
:func:`commmodel.cli.common.step_setup`). One owner of the mapping; unset flags (None) keep
the stack's values."""


STACK_FLAG_OPTIONS: dict[str, Any] = {
    "flash_attention": FlashAttentionOpt, "flash_attention_rate": AttentionRateOpt,
    "tp_comm_overlap": TpCommOverlapOpt, "pp_p2p_overlap": PpP2pOverlapOpt, "cp_comm_overlap": CpCommOverlapOpt,
    "tp_overlap_kind": TpOverlapKindOpt, "attention_kernel": AttentionKernelOpt, "elementwise": ElementwiseOpt,
    "dropout": DropoutOpt, "cross_entropy": CrossEntropyOpt, "attention_flops": AttentionFlopsOpt,
    "fp8_param_gather": Fp8ParamGatherOpt, "moe_dispatcher": MoeDispatcherOpt, "moe_a2a_overlap": MoeA2AOverlapOpt,
    "moe_imbalance": MoeImbalanceOpt, "offload_modules": OffloadModulesOpt, "recompute_modules": RecomputeModulesOpt,
    "precision_aware_optimizer": PrecisionAwareOpt, "activation_fp8_input_store": ActivationStoreOpt,
    "overlap": OverlapOpt, "bucket_size": BucketSizeOpt, "grad_reduce_dtype": GradReduceDtypeOpt,
    "recompute_layers": RecomputeLayersOpt, "memory_headroom": MemoryHeadroomOpt,
}
"""The option of each :data:`STACK_FLAGS` parameter: what :func:`with_stack_flags` adds to a command."""


def with_stack_flags(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` (which takes ``**knobs``) with every :data:`STACK_FLAG_OPTIONS` flag among its options, each
    defaulting to None: one declaration for the commands that share them, read back with :func:`stack_flags`."""
    signature = inspect.signature(command)
    own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=option)
             for name, option in STACK_FLAG_OPTIONS.items()]
    command.__signature__ = signature.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
    return command


def stack_flags(params: dict[str, Any]) -> dict[str, Any]:
    """The StepOptions keywords of a step command's stack flags; ``params`` holds its parameters (``locals()`` at its
    top), of which only the :data:`STACK_FLAGS` names are read."""
    return {field: params[name] for name, fields in STACK_FLAGS.items() if name in params for field in fields}


def with_flag_names(message: str) -> str:
    """``message`` with each ``StepOptions: field:`` (a knob a step command's flag set) named by its flag, e.g.
    ``StepOptions: bucket_size_bytes: ...`` -> ``--bucket-size: ...``: what the user typed, not the model's field."""
    import re

    if not message.startswith("StepOptions: "):
        return message
    flags = {field: name for name, fields in STACK_FLAGS.items() for field in fields}
    named = re.sub(r"(?:StepOptions: )?\b([a-z][a-z0-9_]*): ",
                   lambda m: f"--{flags.get(m.group(1), m.group(1)).replace('_', '-')}: "
                   if m.group(0).startswith("StepOptions") or m.group(1) in flags else m.group(0), message)
    return "; ".join(dict.fromkeys(re.split(r"; (?=--)", named)))  # --dropout sets two fields: say it once
