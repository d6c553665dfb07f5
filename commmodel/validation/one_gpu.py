"""The step model against whole training steps measured on one GPU (``benchmarks/one_gpu_step.py``).

Each measured config (a torchtitan-style Llama under FSDP2 or DDP on a one-rank process group, its shape, micro-batch
and SDPA kernel) becomes a model, a one-GPU layout and its stack's options on ``system``, goes through
:func:`commmodel.step.estimate.evaluate_single`, and is compared on the step time (the median of the measured steps)
and the memory: the allocator's peak (``max_memory_allocated``) against the model's total less
:data:`~commmodel.workload.buffers.RESERVED_BYTES` (what it sets aside for the driver, the CUDA context and NCCL,
which the allocator does not count), beside the allocator's reserved peak (``max_memory_reserved``: what the caching
allocator held, fragmentation included). The SDPA kernel is the one that ran: PyTorch 2.11 prefers cuDNN attention
on sm_90 (``default``), ``flash`` forced FlashAttention-2; the block is torchtitan's Llama op for op
(``elementwise="eager"``, the fsdp2 stack's default, set for the DDP configs too), or under torch.compile (``compiled``:
"compiled"). A config with a ``world`` above 1 ran as rank 0 of a fake process group of that size (FSDP2's multi-rank
path, collectives moving nothing): it is priced as one GPU of a ``world``-way data-parallel ZeRO-3 job, its step less
the communication the model exposes (:data:`commmodel.step.evaluate.COMM_TERMS`); ``ac`` "op" ran torchtitan's
op-level selective checkpointing (``recompute="op"``). Pure: the caller reads the file.
"""

from typing import Any

from commmodel.hardware.models import System
from commmodel.step.estimate import evaluate_single
from commmodel.step.evaluate import COMM_TERMS
from commmodel.step.layout import Layout
from commmodel.step.stacks import stack_options
from commmodel.workload.buffers import RESERVED_BYTES
from commmodel.workload.model import TransformerModel
from commmodel.workload.presets import get_model

KERNEL_RAN = {"default": "cudnn", "flash": "flash2"}
"""The SDPA kernel each measured ``kernel`` setting ran on sm_90 under torch 2.11 (the profiled step's cuDNN
``sdpa_sm90_flash`` kernels; ``sdpa_kernel(FLASH_ATTENTION)`` forces FlashAttention-2)."""


def measured_model(config: dict[str, Any]) -> TransformerModel:
    """The measured config's shape as a model: Llama-3 8B (RoPE, RMSNorm, SwiGLU, untied output) with its widths."""
    shape = config["shape"]
    return get_model("llama3-8b").model_copy(update={
        "num_layers": config["layers"], "hidden_size": shape["h"], "num_heads": shape["heads"],
        "num_kv_heads": shape["kv_heads"], "ffn_hidden_size": shape["ffn"], "vocab_size": shape["vocab"],
        "seq_len": config["seq"]})


def compare_one_gpu_steps(measured: dict[str, Any], system: System) -> list[dict[str, Any]]:
    """One record per measured config: name, stack, world, params (model, measured), step_ms (predicted, measured),
    step_error_pct, memory_gb (predicted tensors, measured peak), memory_error_pct, reserved_gb (measured)."""
    out = []
    for config in measured["configs"]:
        model = measured_model(config)
        batch, world = config["micro_batch"], config.get("world", 1)
        layout = Layout(tp=1, pp=1, dp=world, micro_batch=batch, global_batch=batch * world,
                        zero=3 if world > 1 else 0, recompute=config.get("ac", "none"))
        elementwise = "compiled" if config.get("compiled") else "eager"
        options = stack_options(config["stack"], attention_kernel=KERNEL_RAN[config["kernel"]], elementwise=elementwise)
        result = evaluate_single(model, system, world, layout, options)
        comm_s = sum(result[f"{term}/exposed_s"] for term in COMM_TERMS)
        step_ms = (result["step_time_s"] - comm_s) * 1e3
        memory_gb = (result["memory_bytes_per_gpu"] - RESERVED_BYTES) / 1e9  # tensors, as the allocator counts
        peak_gb = config["memory_bytes"]["peak_allocated"] / 1e9
        out.append({"name": config["name"], "stack": config["stack"], "world": world,
                    "params": (model.num_params, config["params"]),
                    "step_ms": (step_ms, config["step_ms"]), "step_error_pct": 100 * (step_ms / config["step_ms"] - 1),
                    "memory_gb": (memory_gb, peak_gb), "memory_error_pct": 100 * (memory_gb / peak_gb - 1),
                    "reserved_gb": config["memory_bytes"]["peak_reserved"] / 1e9})
    return out
