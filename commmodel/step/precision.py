"""Training precision: which peak each part of the step runs at, and what stays in 16 bits (issue 12).

Low-precision training formats scale only the linear layers' GEMMs (QKV, attention projection, FC1, FC2):

* ``fp8``: per-tensor scaled FP8 (Transformer Engine ``DelayedScaling`` / torchao "tensorwise"), Ada/Hopper and
  later (compute capability ≥ 8.9; NVIDIA Hopper architecture whitepaper, FP8 Transformer Engine) at the
  GPU's dense FP8 peak × its measured FP8 MAMF ratio where the profile has one (``matmul_efficiency_fp8``: H100
  1402.6 of 1979 = 0.709, B200 0.763, stas00/ml-engineering @744d01e; bf16's ratio stands in elsewhere).
* ``fp8-current``: per-tensor FP8 with current scaling (Transformer Engine ``Float8CurrentScaling``, Megatron
  ``--fp8-recipe tensorwise``: MEGATRON_COMMIT megatron/core/fp8_utils.py L777-778; NeMo's "FP8-CS"): the scale
  taken from each tensor's own amax, one more read of it before the cast (:data:`TE_CASTS`), at the per-tensor FP8
  rate; under torchao the same dynamic "tensorwise" scaling
  as ``fp8``. Megatron-Core then keeps its own fp32 master weights and saves the projection's 16-bit input, as for
  every recipe other than delayed scaling (workload/optimizer_states.py, workload/saved_inputs.py).
* ``fp8-rowwise``: torchao's rowwise recipe (one fp32 scale per row of each operand), at the per-tensor FP8 rate ×
  the GPU's ``fp8_rowwise_gemm_ratio`` where measured (:func:`recipe_gemm_ratio`: ``torch._scaled_mm`` runs
  row-wise scales in a CUTLASS kernel, tensor-wise ones in cuBLAS; on a lent H100 the row-wise GEMMs of the Llama-3
  8B/70B blocks ran at 0.564 of the FP8 peak against 0.605 tensor-wise, benchmarks/gemm_shapes.py).
* ``fp8-blockwise``: DeepSeek-V3's fine-grained FP8 (arXiv:2412.19437 §3.3: 1×128 activation and gradient tiles,
  128×128 weight blocks, FP32 scales), Transformer Engine ``Float8BlockScaling`` / Megatron ``--fp8-recipe
  blockwise``, Hopper only (sm_90: TE_COMMIT fp8_blockwise_scaling.rst "Supported devices": on Blackwell TE
  emulates it with MXFP8, "the preferred recipe on Blackwell", so the model refuses it there and points to
  ``mxfp8``), at the dense FP8 peak with the GPU's FP8 matmul efficiency, as per-tensor FP8. Evidence for that rate:
  deepseek-ai/DeepGEMM README (1×128 × 128×128 fine-grained-scaled FP8 GEMMs "up to 1550 TFLOPS on H800", News
  2025.04.18, 0.78 of its 1979 dense peak) against per-tensor FP8's measured 1453 of 1979 on H200 (0.73;
  stas00/ml-engineering compute/accelerator/README.md @744d01e): block scaling need not run below per-tensor FP8,
  though TE notes the Hopper block-scaled GEMM is software-emulated (promotion on CUDA cores) with lower overhead
  for 1D×2D than 1D×1D. No separate blockwise efficiency is modelled (none is published for TE's cuBLAS path).
* ``mxfp8``: OCP Microscaling FP8 (1×32 blocks, e8m0 scales), Blackwell (sm_100+) block-scaled tensor cores,
  at the dense FP8 peak and FP8 matmul efficiency (NVIDIA Blackwell architecture technical brief: MXFP8 runs on
  the FP8 tensor-core path; torchtitan docs/mxfp8.md; no MXFP8 MAMF is published).
* ``nvfp4``: NVIDIA FP4 with 1×16 FP8-scaled blocks, Blackwell (sm_100+), at the dense FP4 peak (Blackwell
  technical brief; Transformer Engine NVFP4 recipe).

What stays in 16 bits (Transformer Engine "Using FP8 with Transformer Engine"; torchtitan docs/float8.md):
the attention core (DotProductAttention without fp8_dpa), norms and elementwise work, embeddings, the output
layer and the loss, the optimizer with fp32 master weights. Casting each linear input to the low-precision
format (and taking its amax/scales) reads the 16-bit tensor and writes the narrow copies each GEMM needs (X and W
for fprop, dY for dgrad, the column-wise X and dY for wgrad): extra HBM traffic per recipe, forward and backward,
priced by :func:`quantisation_bytes` (docs/estimate.md "Quantisation traffic per recipe"). Parameters travel in
16 bits unless the stack gathers them in FP8 (``fp8_param_allgather``: :func:`with_fp8_params`). MFU is always
reported against the dense 16-bit peak, as the published tables do; the low-precision-peak MFU is a separate,
labelled column.
"""

from typing import Any, NamedTuple

from commmodel.dtype_bytes import STORAGE_BYTES
from commmodel.errors import ProfileError, WorkloadError
from commmodel.hardware.models import GPU

LOW_PRECISION_PEAK: dict[str, str] = {"fp8": "fp8", "fp8-current": "fp8", "fp8-rowwise": "fp8", "fp8-blockwise": "fp8",
                                      "mxfp8": "fp8",
                                      "nvfp4": "fp4"}
"""Training dtype -> the GPU peak (gpus.yaml key) its linear GEMMs run at."""

MIN_SM: dict[str, int] = {"fp8": 89, "fp8-current": 89, "fp8-rowwise": 89, "fp8-blockwise": 90, "mxfp8": 100,
                          "nvfp4": 100}
"""Smallest compute capability with tensor cores for the format (FP8: Ada sm_89 / Hopper sm_90; FP8 block scaling:
Hopper sm_90, TE_COMMIT fp8_blockwise_scaling.rst "Requires SM90 (Hopper) or later"; MX and NVFP4 block scaling:
Blackwell sm_100)."""

BF16_MIN_SM = 80
"""bfloat16 tensor cores start with Ampere (sm_80; NVIDIA A100 Tensor Core GPU architecture whitepaper: "BF16"):
V100 (sm_70) and Turing (sm_75) train in fp16."""

EMULATED_FROM_SM: dict[str, tuple[int, str]] = {"fp8-blockwise": (100, "mxfp8")}
"""Formats Transformer Engine runs natively only below a compute capability and emulates from it on, with the dtype
to use there instead: FP8 block scaling on Blackwell "is emulated with MXFP8. Note that MXFP8 is the preferred
recipe on Blackwell" (TE_COMMIT fp8_blockwise_scaling.rst "Supported devices"). The emulation's conversions are not
priced: such a GPU is refused in one line."""

BLOCK_1D_ELEMENTS = 128
"""Elements per FP32 scale of a 1D block (1×128 activation and gradient tiles; TE_COMMIT fp8_blockwise_scaling.rst
"Block size"; DeepSeek-V3 arXiv:2412.19437 §3.3.2)."""

BLOCK_2D_ELEMENTS = 128 * 128
"""Elements per FP32 scale of a 2D block (128×128 weight blocks; the same sources)."""

SCALE_FP32_BYTES = STORAGE_BYTES["fp32"]
"""Bytes of one FP32 block scale (fp8_blockwise_scaling.rst "Scaling factors are stored as 32-bit floating point
numbers")."""

FP8_BYTES = STORAGE_BYTES["fp8"]
NARROW_BYTES: dict[str, float] = {"fp8": FP8_BYTES, "fp8-current": FP8_BYTES, "fp8-rowwise": FP8_BYTES,
                                  "fp8-blockwise": FP8_BYTES + SCALE_FP32_BYTES / BLOCK_1D_ELEMENTS,
                                  "mxfp8": FP8_BYTES + 1.0 / 32, "nvfp4": 0.5 + 1.0 / 16}
"""Bytes per element of the quantised copy of an activation (scales included: one e8m0 byte per 32 for MXFP8, one
e4m3 byte per 16 for NVFP4, OCP Microscaling Formats spec v1.0, NVIDIA NVFP4 blog; one FP32 scale per 1×128 tile
for FP8 blockwise, 1 + 4/128 = 1.03125)."""

BLOCKWISE_WEIGHT_BYTES = 1.0 + SCALE_FP32_BYTES / BLOCK_2D_ELEMENTS
"""Bytes per element of an FP8-blockwise weight copy: one FP32 scale per 128×128 block, 1 + 4/16384."""


def recipe_gemm_ratio(gpu: GPU, dtype: str) -> float:
    """Rate of ``dtype``'s linear GEMMs over the per-tensor FP8 (or 16-bit) kernel's at the same shapes: the GPU's
    measured ``fp8_rowwise_gemm_ratio`` for ``fp8-rowwise``, 1 for every other dtype and where unmeasured."""
    if dtype == "fp8-rowwise" and gpu.fp8_rowwise_gemm_ratio is not None:
        return gpu.fp8_rowwise_gemm_ratio.value
    return 1.0


def is_low_precision(dtype: str) -> bool:
    """Whether ``dtype`` scales the linear GEMMs below 16 bits."""
    return dtype in LOW_PRECISION_PEAK


def linear_peak_key(dtype: str) -> str:
    """The gpus.yaml peak key of the linear GEMMs under ``dtype``."""
    return LOW_PRECISION_PEAK.get(dtype, dtype)


def mfu_peak(gpu: GPU, dtype: str) -> float:
    """The peak MFU is measured against: the dense 16-bit peak (bf16, or fp16 where a GPU has no bf16) for every
    training dtype, fp32 included, as the published tables report it; the dtype's own peak only on a device without
    16-bit tensor cores (a CPU host)."""
    try:
        return gpu.peak_for("bf16")  # fp16 where the GPU states no bf16 peak (GPU.peak_for's own fallback)
    except ProfileError:
        return gpu.peak_for(high_precision_key(dtype))


def high_precision_key(dtype: str) -> str:
    """The peak key of what stays high precision (attention core, output layer): bf16 under a low-precision dtype."""
    return "bf16" if is_low_precision(dtype) else dtype


def default_dtype(gpu: object, dtype: str) -> str:
    """The dtype a model trains in on ``gpu`` when the user names none: its own (bf16 for the presets), fp16 on a GPU
    without bf16 tensor cores (before sm_80: V100, Turing), as such runs trained (Megatron-LM's V100 runs: --fp16);
    fp32 on a device whose profile states no 16-bit peak at all (a CPU host: fp32 is what it computes in)."""
    if dtype == "bf16" and _before_bf16(gpu):
        return "fp16"
    if dtype in SIXTEEN_BIT and hasattr(gpu, "peak_flops_per_s") and not has_16bit_peak(gpu):
        return "fp32"
    return dtype


SIXTEEN_BIT = ("bf16", "fp16")
"""The 16-bit training dtypes: MFU is measured against their peak (:func:`mfu_peak`)."""


def has_16bit_peak(gpu: GPU) -> bool:
    """Whether the profile states a 16-bit peak (every GPU; not a CPU host, which computes in fp32)."""
    return bool(set(SIXTEEN_BIT) & set(gpu.peak_flops_per_s))


def _before_bf16(gpu: object) -> bool:
    """Whether ``gpu`` states a compute capability below :data:`BF16_MIN_SM` (no bf16 tensor cores)."""
    return getattr(gpu, "compute_capability", None) is not None and getattr(gpu, "sm_version")() < BF16_MIN_SM


def check_precision(gpu: object, dtype: str) -> None:
    """One-line error when ``gpu`` cannot train in ``dtype`` (no tensor cores for it, or no sourced peak)."""
    if dtype == "bf16" and _before_bf16(gpu):
        raise WorkloadError(f"bf16 needs compute capability ≥ 8.0 (Ampere: bf16 tensor cores); {gpu.name} is "
                            f"sm_{gpu.sm_version()}: use --dtype fp16 (or say 'fp16')")
    if not is_low_precision(dtype):
        return
    name = getattr(gpu, "name", "gpu")
    if getattr(gpu, "compute_capability", None) is None:
        raise WorkloadError(f"{dtype} on {name} is not priced: the low-precision cast and GEMM rules here are "
                            f"Transformer Engine's and torchao's per NVIDIA architecture, and {name} states no CUDA "
                            f"compute capability (AMD Instinct, CPU hosts); use --dtype bf16")
    sm = getattr(gpu, "sm_version")()  # stated (checked above)
    if sm < MIN_SM[dtype]:
        raise WorkloadError(f"{dtype} needs compute capability ≥ {MIN_SM[dtype] / 10:.1f} (sm_{MIN_SM[dtype]}); "
                            f"{name} is sm_{sm}; use --dtype bf16" + (" or fp8" if sm >= MIN_SM["fp8"] else ""))
    if dtype in EMULATED_FROM_SM and sm >= EMULATED_FROM_SM[dtype][0]:
        native = EMULATED_FROM_SM[dtype][1]
        raise WorkloadError(f"{dtype} on {name} (sm_{sm}): Transformer Engine emulates FP8 block scaling with {native} "
                            f"on sm_{EMULATED_FROM_SM[dtype][0]}+ (fp8_blockwise_scaling.rst), which is not priced; "
                            f"use --dtype {native}")
    key = linear_peak_key(dtype)
    if key not in getattr(gpu, "peak_flops_per_s"):
        raise WorkloadError(f"{name} has no {key} peak in hardware_profiles/gpus.yaml, which {dtype} needs; "
                            f"use --dtype bf16 or add a sourced {key} peak")


TE_COMMIT = "NVIDIA/TransformerEngine@d0067d0da6cb01811b8072a7d304f0e00344ce2b"
AO_COMMIT = "pytorch/ao@36027d82d1ad9949597ea16002ff4940374b1b94"
MEGATRON_COMMIT = "NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553"

HP_BYTES = 2.0
"""Bytes per element of the 16-bit tensor each cast reads (bf16/fp16)."""


class TeCast(NamedTuple):
    """How one Transformer Engine tensor-scaled or block-scaled recipe casts a tensor (:func:`quantisation_bytes`)."""

    narrow: str
    """Its format's :data:`NARROW_BYTES` key (scales included)."""
    amax_pass: bool
    """The scale comes from the tensor itself, read once more first (current scaling, NVFP4's per-tensor scale);
    delayed scaling takes it from history, MXFP8's block scales come inside the cast kernel."""
    own_columnwise: bool
    """The column-wise copy has scales of its own, so it is quantised from the 16-bit data beside the row-wise one
    (MXFP8, NVFP4: mxfp8.rst / nvfp4.rst "Handling transposes"); per-tensor FP8 needs one copy on Blackwell and a
    transpose of it on Hopper."""


TE_CASTS: dict[str, TeCast] = {"te-fp8-delayed": TeCast("fp8", False, False),
                               "te-fp8-current": TeCast("fp8", True, False),
                               "te-mxfp8": TeCast("mxfp8", False, True), "te-nvfp4": TeCast("nvfp4", True, True)}
"""The Transformer Engine recipes that cast every operand alike (block-wise FP8's weights differ:
:func:`quantisation_bytes`)."""


class QuantisationBytes(NamedTuple):
    """HBM bytes per element of the 16-bit tensor that one linear's casts move in one micro-batch, per GEMM operand
    and pass: X the input (m·k), W the weight (k·n), dY the output gradient (m·n). Amax passes, 16-bit reads, the
    narrow copies written (scales included) and 16-bit transposed copies all count."""

    activation_forward: float
    """X in the forward (what fprop and, where written then, wgrad use)."""
    activation_backward: float
    """X cast again in the backward for wgrad (torchao re-casts the saved 16-bit input)."""
    weight_forward: float
    """W in the forward (priced every micro-batch: see :func:`quantisation_bytes`)."""
    weight_backward: float
    """W cast again in the backward for dgrad."""
    grad_output_backward: float
    """dY in the backward (dgrad and wgrad operands)."""


def cast_pass_bytes(narrow: float, copies: int, amax_pass: bool) -> float:
    """One kernel reading the 16-bit tensor once and writing ``copies`` narrow copies, after an amax pass that reads
    it once more where the scale is computed from the tensor itself (current scaling)."""
    return (HP_BYTES if amax_pass else 0.0) + HP_BYTES + copies * narrow


def _same(per_element: float, backward_x: float = 0.0, backward_w: float = 0.0) -> QuantisationBytes:
    """X, W and dY cast alike (dY's cast in the backward), re-casts of X and W in the backward as given."""
    return QuantisationBytes(per_element, backward_x, per_element, backward_w, per_element)


def quantisation_recipe(dtype: str, library: str) -> str:
    """The recipe a ``library`` ("te": Transformer Engine, Megatron-Core/NeMo/llm-foundry; "torchao": torchtitan)
    runs for ``dtype``: Megatron-Core's ``--fp8-recipe`` default is ``delayed`` (MEGATRON_COMMIT
    megatron/core/transformer/transformer_config.py ``fp8_recipe``) and llm-foundry's ``amp_fp8`` is TE
    ``DelayedScaling``; ``fp8-current`` is TE ``Float8CurrentScaling`` (``--fp8-recipe tensorwise``); torchtitan's
    float8 is torchao dynamic ("tensorwise") scaling, current scaling by construction. NVFP4 is TE's recipe."""
    if dtype == "fp8-rowwise":
        return "torchao-fp8-rowwise"
    if dtype == "fp8-blockwise":
        if library != "te":
            raise WorkloadError("fp8-blockwise is Transformer Engine's Float8BlockScaling (Megatron --fp8-recipe "
                                "blockwise); the torchao recipes of this stack are not modelled for it: use --stack "
                                "megatron-core, or --dtype fp8 / fp8-rowwise")
        return "te-fp8-blockwise"
    if dtype == "nvfp4":
        return "te-nvfp4"
    if dtype in ("fp8", "fp8-current"):
        if library != "te":
            return "torchao-fp8-tensorwise"
        return "te-fp8-delayed" if dtype == "fp8" else "te-fp8-current"
    return f"{'te' if library == 'te' else 'torchao'}-{dtype}"


def quantisation_bytes(recipe: str, sm: int) -> QuantisationBytes:
    """Per-element cast bytes of one linear under ``recipe`` on a GPU of compute capability ``sm``.

    * ``te-fp8-delayed`` / ``te-fp8-current``: one cast-transpose kernel writes the row-wise and (Hopper/Ada: FP8
      GEMMs take only TN layouts) the transposed column-wise copy, X and W in the forward, dY in the backward; on
      Blackwell (sm ≥ 100) one copy serves both (TE_COMMIT docs/features/low_precision_training/
      performance_considerations.rst, Tables 2 and "Architecture differences"). Current scaling reads the tensor
      once more for its amax (fp8_current_scaling.rst "Performance analysis"; csrc/quantizer.cpp
      Float8CurrentScalingQuantizer::quantize_impl: nvte_compute_amax then the cast); delayed takes it from history
      (fp8_delayed_scaling.rst). Hopper: 2 + 2·1 = 4 (delayed), 6 (current).
    * ``te-mxfp8``: 1×32 row-wise and 32×1 column-wise scales differ, so both copies are quantised from the 16-bit
      data (mxfp8.rst "Handling transposes"), in one kernel that loads each tile once and writes both
      (common/cast/mxfp8/quantize_mxfp8.cuh, ROWWISE_SCALING and COLWISE_SCALING): 2 + 2·(1 + 1/32).
    * ``te-fp8-blockwise`` (Hopper only, :data:`EMULATED_FROM_SM`): X and dY have 1×128 row-wise and 128×1
      column-wise scales that cover different elements, so "both versions must be quantized separately from the
      high-precision source" (fp8_blockwise_scaling.rst "Handling transposes"), in one kernel that loads each 128×128
      tile once and writes both, the block amax taken on the tile (common/transpose/
      quantize_transpose_vector_blockwise.cu ``block_scaled_1d_cast_transpose_kernel``): 2 + 2·(1 + 4/128); W has
      128×128 scales, quantised once and its column-wise copy made by transposing data and scales, in the same
      kernel (quantize_transpose_square_blockwise.cu): 2 + 2·(1 + 4/16384).
    * ``te-nvfp4``: an amax pass for the per-tensor FP32 scale (nvfp4.rst; quantizer.cpp NVFP4Quantizer:
      nvte_hadamard_transform_amax / nvte_compute_amax), then row-wise and RHT'd column-wise copies in one fused
      kernel (nvte_quantize_with_hadamard_transform): 2 + 2 + 2·(0.5 + 1/16).
    * torchao (AO_COMMIT torchao/testing/training/roofline_utils.py get_tensor_memory_traffic_ovhd_s, not fused with
      the previous op; torchao/float8/float8_linear.py, torchao/prototype/moe_training/mxfp8_linear.py):
      ``tensorwise``: X and dY amax 2 + one kernel writing dim0 and dim1 FP8 copies (2 + 2) = 6; W amax 2, dim0
      cast 3 forward, dim1 cast 3 backward. ``rowwise``: X and dY: kernel 1 reads 2, writes FP8 dim0 1 and a 16-bit
      transpose 2, kernel 2 casts the transpose (2 + 1) = 8 (X: 5 forward, 3 backward); W: 3 forward, transpose 4
      + cast 3 backward. ``mxfp8``: every operand cast twice from 16 bits, dim0 and dim1, each 2 + (1 + 1/32)
      (X and W once per pass, dY twice in the backward).
    """
    fp8, mx = NARROW_BYTES["fp8"], NARROW_BYTES["mxfp8"]
    if recipe in TE_CASTS:
        cast = TE_CASTS[recipe]
        copies = 2 if cast.own_columnwise or sm < 100 else 1
        return _same(cast_pass_bytes(NARROW_BYTES[cast.narrow], copies, cast.amax_pass))
    if recipe == "te-fp8-blockwise":
        tile = cast_pass_bytes(NARROW_BYTES["fp8-blockwise"], 2, amax_pass=False)
        return QuantisationBytes(tile, 0.0, cast_pass_bytes(BLOCKWISE_WEIGHT_BYTES, 2, amax_pass=False), 0.0, tile)
    if recipe == "torchao-fp8-tensorwise":
        cast = cast_pass_bytes(fp8, 1, amax_pass=False)
        both = cast_pass_bytes(fp8, 2, True)
        return QuantisationBytes(both, 0.0, HP_BYTES + cast, cast, both)
    if recipe == "torchao-fp8-rowwise":
        cast, transpose = cast_pass_bytes(fp8, 1, False), 2 * HP_BYTES
        return QuantisationBytes(cast + HP_BYTES, cast, cast, transpose + cast, cast + HP_BYTES + cast)
    if recipe == "torchao-mxfp8":
        cast = cast_pass_bytes(mx, 1, amax_pass=False)
        return QuantisationBytes(cast, cast, cast, cast, 2 * cast)
    raise ValueError(f"quantisation recipe {recipe!r}: use one of {', '.join(RECIPES)}")


def saved_input_bytes(recipe: str, dtype: str, sm: int) -> float:
    """Bytes per element a low-precision linear keeps of its input X for the weight gradient: the narrow copy
    (:data:`NARROW_BYTES`) where ``recipe`` casts X in the forward only, the 16-bit input where it casts X again in
    the backward (:attr:`QuantisationBytes.activation_backward` > 0), so one owner says both what is cast and what
    is kept. Transformer Engine keeps its FP8 cast (``_Linear.forward`` saves ``inputmat`` or ``inputmat_t``, the
    cast copy, unless ``override_linear_precision.wgrad``: TransformerEngine @0004dbd0
    transformer_engine/pytorch/module/linear.py); torchao tensorwise keeps its FP8 cast
    (``manual_float8_matmul_with_args_in_float8`` saves ``input_fp8``, pytorch/ao @eab345c float8_linear.py, the
    torchao of the torchtitan H100 benchmarks; under torch.compile the fused dim0+dim1 cast of
    :func:`quantisation_bytes` is saved instead of X); torchao rowwise and MX keep ``input_hp``
    (``matmul_with_hp_or_float8_args``, AO_COMMIT float8_linear.py) and re-cast it."""
    return HP_BYTES if quantisation_bytes(recipe, sm).activation_backward > 0 else NARROW_BYTES[dtype]


SAVES_ORIGINAL_PROJECTION_INPUT = frozenset({"te-fp8-current", "te-fp8-blockwise", "te-mxfp8", "te-nvfp4"})
"""Recipes under which the attention projection keeps its 16-bit input rather than its own cast beside it: Megatron-Core
calls ``set_save_original_input(self.linear_proj)`` when ``fp8_recipe != 'delayed'`` (TE ≥ 2.6) or under FP4, because
"the output of the fused core_attn is saved by itself, and linear_proj also saves the quantized tensor of this
output" (MEGATRON_COMMIT megatron/core/transformer/attention.py); its backward casts that input again. The TE recipes
here are what the Megatron-Core stack runs for those dtypes (:func:`quantisation_recipe`); the torchao recipes keep
their own behaviour (tensorwise its cast, rowwise and MX the 16-bit input already). The backward's extra cast of the
projection input (at most 2 + 1.03 bytes per element of a·d_v per micro-batch) is not priced."""


def saves_original_projection_input(recipe: str | None) -> bool:
    """Whether the projection keeps only its 16-bit input under ``recipe`` (:data:`SAVES_ORIGINAL_PROJECTION_INPUT`)."""
    return recipe in SAVES_ORIGINAL_PROJECTION_INPUT


FP8_PARAM_TRANSPOSE: dict[str, str] = {"te-fp8-delayed": "before-sm100", "te-fp8-current": "before-sm100",
                                       "torchao-fp8-tensorwise": "always", "te-mxfp8": "never"}
"""Recipes whose weights a stack can keep in low precision (``fp8_param_allgather``: Megatron ``--fp8-param-gather``,
torchao ``enable_fsdp_float8_all_gather``, tensorwise only) → when the column-wise copy is then an FP8 transpose:
on Hopper/Ada only (TE: Blackwell shares one layout), on every GPU (torchao: ``_scaled_mm`` takes its
second operand column-major, float8_ops.py ``preprocess_addmm`` ``b_data.t().contiguous().t()``). MXFP8 parameters
carry both usages (TE ``MXFP8Tensor``); torchao gathers MXFP8 and rowwise weights in 16 bits (torchtitan
docs/mxfp8.md), so those recipes keep their casts. FP8-blockwise weights are gathered quantised (TE
fp8_blockwise_scaling.rst "Quantized all-gather", row-wise and column-wise compact data, swizzled after the
gather): the gather is priced at 1 byte, but the swizzle is not modelled, so :func:`with_fp8_params` keeps that
recipe's weight casts (an overcount)."""
FP8_PARAM_GATHER_DTYPES = ("fp8", "fp8-current", "fp8-rowwise", "fp8-blockwise", "mxfp8")
"""Training dtypes whose weights ``fp8_param_allgather`` gathers in FP8 (Megatron ``--fp8-param-gather`` applies to
the FP8 recipes; NVFP4 weights are gathered in 16 bits here: no source says otherwise)."""


def with_fp8_params(q: QuantisationBytes, recipe: str, sm: int) -> QuantisationBytes:
    """``q`` when the stack keeps FP8 weights (``fp8_param_allgather``): the 16-bit weight casts are gone (the
    optimizer step or FSDP's pre-all-gather hook casts the 1/dp shard instead, not priced), a read-1 write-1
    FP8 transpose for dgrad remains where :data:`FP8_PARAM_TRANSPOSE` says so; other recipes unchanged."""
    if recipe not in FP8_PARAM_TRANSPOSE:  # blockwise: the post-gather swizzle is not modelled, its casts are kept
        return q
    rule = FP8_PARAM_TRANSPOSE[recipe]
    transpose = 2.0 * NARROW_BYTES["fp8"] if rule == "always" or (rule == "before-sm100" and sm < 100) else 0.0
    return QuantisationBytes(q.activation_forward, q.activation_backward, 0.0, transpose, q.grad_output_backward)


RECIPES = ("te-fp8-delayed", "te-fp8-current", "te-fp8-blockwise", "te-mxfp8", "te-nvfp4", "torchao-fp8-tensorwise",
           "torchao-fp8-rowwise", "torchao-mxfp8")
"""The recipes :func:`quantisation_bytes` prices."""


def param_wire_bytes(dtype_bytes: float, dtype: str, fp8_param_allgather: bool) -> float:
    """Bytes per parameter of a parameter all-gather: 16-bit weights under a low-precision dtype unless the
    stack gathers FP8 weights; the training dtype's bytes otherwise."""
    if is_low_precision(dtype):
        return 1.0 if fp8_param_allgather and dtype in FP8_PARAM_GATHER_DTYPES else 2.0
    return dtype_bytes


def mfu_peak_words(systems: list[Any]) -> str:
    """What MFU is measured against on these systems (:func:`commmodel.step.precision.mfu_peak`): the dense 16-bit
    peak, or a CPU host's own fp32 peak where its profile states no 16-bit one."""
    known = [s for s in systems if s is not None]
    without = [s.name for s in known if not has_16bit_peak(s.gpu)]
    if not without:
        return "the dense 16-bit peak"
    if len(without) == len(known):
        return "the fp32 peak (no 16-bit peak: a CPU host)"
    return f"the dense 16-bit peak; the fp32 peak on {', '.join(without)}"
