"""The assumption lines of a low-precision step: which quantisation recipe ran (named as a user sets it) and the
bytes its casts move, and a recipe whose GEMMs run at a measured fraction of the tensor-wise rate. Text only; the
numbers are :mod:`commmodel.step.precision`'s."""

from commmodel.hardware.models import GPU
from commmodel.step.precision import quantisation_bytes, recipe_gemm_ratio


def recipe_rate_line(gpu: GPU | None, dtype: str) -> list[str]:
    """The assumption line of a recipe whose GEMMs run at a measured fraction of the tensor-wise rate on ``gpu``
    (:func:`recipe_gemm_ratio`), or none."""
    ratio = 1.0 if gpu is None else recipe_gemm_ratio(gpu, dtype)
    if ratio == 1.0:
        return []
    return [f"{dtype} linear GEMMs at {ratio:.3f} of the tensor-wise FP8 rate on {gpu.name} (torch._scaled_mm's "
            f"row-wise kernel, measured: gpus.yaml fp8_rowwise_gemm_ratio, benchmarks/gemm_shapes.py)"]


RECIPE_WORDS: dict[str, str] = {
    "te-fp8-delayed": "Transformer Engine DelayedScaling (Megatron --fp8-recipe delayed, its default; --dtype "
                      "fp8-current for current scaling, NeMo's FP8-CS)",
    "te-fp8-current": "Transformer Engine Float8CurrentScaling (Megatron --fp8-recipe tensorwise, NeMo's FP8-CS): "
                      "each cast reads its tensor once more for the amax",
    "te-fp8-blockwise": "Transformer Engine Float8BlockScaling (Megatron --fp8-recipe blockwise)",
    "te-mxfp8": "Transformer Engine MXFP8BlockScaling (Megatron --fp8-recipe mxfp8)",
    "te-nvfp4": "Transformer Engine NVFP4BlockScaling",
    "torchao-fp8-tensorwise": "torchao float8 tensorwise (dynamic, current scaling)",
    "torchao-fp8-rowwise": "torchao float8 rowwise", "torchao-mxfp8": "torchao MX (mxfp8)",
}
"""How each quantisation recipe is named where a user sets it (the assumption line of :func:`recipe_line`)."""


def recipe_line(recipe: str | None, sm: int | None) -> list[str]:
    """The assumption line naming the low-precision recipe a step ran and the bytes its cast of one activation
    element moves in the forward (:func:`quantisation_bytes`); none for 16-bit training."""
    if recipe is None:
        return []
    cast = f": {quantisation_bytes(recipe, sm).activation_forward:g} bytes per activation element cast" if sm else ""
    return [f"low precision: {recipe}, {RECIPE_WORDS[recipe]}{cast} (step/precision.py quantisation_bytes)"]
