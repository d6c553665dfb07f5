"""Megatron-Core's precision-aware optimizer (``--use-precision-aware-optimizer --exp-avg-dtype ... --exp-avg-sq-dtype
... --main-params-dtype ...``): the dtypes Adam keeps its states in, hence the optimizer bytes per parameter
(:func:`commmodel.workload.memory.optimizer_bytes_per_param`, the one owner of that number).

Sources, NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553:

* ``megatron/training/arguments.py``: ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` choices fp32, fp16, bf16, fp8;
  ``--main-params-dtype`` fp32, fp16 (defaults fp32; "used for storing the optimizer state in memory during
  training but does not affect the precision in the kernel computation");
* ``megatron/core/optimizer/optimizer_config.py``: ``store_param_remainders`` (default True: "store the 16-bit FP32
  parameter remainders ..., excluding the 16 bits shared with the BF16 parameters") and
  ``use_precision_aware_optimizer_no_fp8_or_ds_fp8`` (precision-aware and: main params not fp32, or no FP8 recipe,
  or delayed scaling): only then does Transformer Engine's FusedAdam hold the master weights
  (``megatron/core/optimizer/__init__.py``: ``master_weights``, ``master_weight_dtype``); otherwise (FP8 current,
  blockwise or MXFP8 weights with fp32 main params) Megatron-Core keeps its own fp32 master copy;
* ``megatron/core/optimizer/distrib_optimizer.py``: the master shard is int16 remainders where
  ``store_param_remainders`` and bf16, else ``main_params_dtype``.

So per parameter: exp_avg + exp_avg_sq bytes, plus the master copy: 2 (int16 remainders of bf16 weights, or fp16),
or 4 (fp32: Megatron-Core's own copy under an FP8 recipe other than delayed, or a 16-bit model trained in fp16).
An FP8 moment is taken as 1 byte (its per-tensor scale is negligible). NVFP4 weights are taken like the FP8 recipes
other than delayed (Megatron-Core's own fp32 master: an assumption; the flag tests ``fp8_recipe`` only).
"""


from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from commmodel.dtype_bytes import STORAGE_BYTES
from commmodel.errors import WorkloadError

StateDtype = Literal["fp32", "bf16", "fp16", "fp8"]
"""Megatron-Core's ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` choices."""

STATE_DTYPE_BYTES: dict[str, float] = {dtype: STORAGE_BYTES[dtype] for dtype in get_args(StateDtype)}
"""Bytes per element of each state dtype."""

REMAINDER_BYTES = 2.0
"""int16 remainders of an fp32 master weight beside its bf16 parameter (distrib_optimizer.py @d98e8a6)."""


class PrecisionAwareOptimizer(BaseModel):
    """The dtypes of Megatron-Core's precision-aware Adam (``--use-precision-aware-optimizer``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    exp_avg_dtype: StateDtype = "fp32"
    """First moment (``--exp-avg-dtype``)."""
    exp_avg_sq_dtype: StateDtype = "fp32"
    """Second moment (``--exp-avg-sq-dtype``)."""
    main_params_dtype: Literal["fp32", "fp16"] = "fp32"
    """Master weights (``--main-params-dtype``)."""

    @classmethod
    def parse(cls, text: str) -> "PrecisionAwareOptimizer":
        """``exp_avg,exp_avg_sq[,main_params]`` dtypes, e.g. ``bf16,bf16`` (the ModelZoo's launches)."""
        names = [n for n in text.replace(",", " ").split() if n]
        hint = ("give exp_avg,exp_avg_sq[,main_params] dtypes, e.g. bf16,bf16 or bf16,bf16,fp32 (moments: fp32, bf16, "
                "fp16, fp8; main params: fp32, fp16)")
        if not 2 <= len(names) <= 3:
            raise WorkloadError(f"precision-aware optimizer {text!r}: {hint}")
        try:
            return cls(**dict(zip(("exp_avg_dtype", "exp_avg_sq_dtype", "main_params_dtype"), names)))
        except ValidationError:
            raise WorkloadError(f"precision-aware optimizer {text!r}: {hint}") from None


def state_bytes_per_param(optimizer: PrecisionAwareOptimizer, bf16_params: bool, mcore_master: bool) -> float:
    """Optimizer bytes per parameter of the precision-aware Adam (module docstring): the two moments plus the
    master copy, 4 where Megatron-Core keeps it in fp32 (``mcore_master``: an FP8 recipe other than delayed with
    fp32 main params), 2 for fp16 main params or bf16 parameters' int16 remainders, else 4."""
    moments = STATE_DTYPE_BYTES[optimizer.exp_avg_dtype] + STATE_DTYPE_BYTES[optimizer.exp_avg_sq_dtype]
    if optimizer.main_params_dtype == "fp16":
        return moments + 2.0
    if mcore_master:
        return moments + 4.0
    return moments + (REMAINDER_BYTES if bf16_params else 4.0)
