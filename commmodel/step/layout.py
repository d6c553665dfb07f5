"""A parallel layout (tp × pp × dp, micro-batch, ZeRO, recompute, SP, interleaving) and its checks.

:class:`Layout` is one layout, validated field by field; :class:`LayoutArrays` holds many layouts
as equal-length numpy arrays so the step model evaluates them in one vectorised pass (the planner's
path). :func:`check_layout` raises one :class:`~commmodel.errors.LayoutError` naming every factor;
:func:`layout_divisibility_masks` is the same set of rules as boolean arrays.

Layers need not divide evenly over pp (Megatron-LM and BLOOM put the remainder on some stages:
BLOOM-176B runs 70 layers on pp 12); the busiest stage, ⌈l/p⌉ layers
(:func:`commmodel.workload.model.stage_layers`), sets the pipeline's pace and memory. The interleaved
schedule cuts the layers into pp × vpp chunks; they need not be equal either (Megatron-LM's
``--decoder-first/last-pipeline-num-layers``; Llama 3 405B runs 126 layers interleaved on pp 16): the
busiest chunk, ⌈l/(p·v)⌉ layers, sets the bubble's pace. Every chunk holds at least one layer, except
that the first and last chunks may hold only the embedding and the output layer with the loss (Llama 3,
arXiv:2407.21783 §3.3.2): pp × vpp ≤ l + 2.

Context parallelism (cp, Megatron-Core ``--context-parallel-size``; Liu et al. 2023 "Ring Attention")
splits every sequence over cp GPUs; rank order is tp-cp-dp-pp, so GPUs = tp × cp × pp × dp. The
causal load balance cuts the sequence into 2·cp chunks (rank r holds chunks r and 2·cp − 1 − r), so
the sequence length must be a multiple of 2·cp.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from commmodel.errors import LayoutError
from commmodel.workload.model import TransformerModel

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_CODES: dict[str, int] = {"none": 0, "selective": 1, "full": 2}
"""Integer codes of the recompute modes in :class:`LayoutArrays`."""
RECOMPUTE_NAMES: tuple[str, ...] = ("none", "selective", "full")


class Layout(BaseModel):
    """How one training job is split over its GPUs (Megatron-LM vocabulary)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int = Field(default=1, ge=1)
    """Tensor-parallel degree: each layer's matrices split over tp GPUs (inside a node)."""
    pp: int = Field(default=1, ge=1)
    """Pipeline-parallel degree: the layers split into pp stages."""
    dp: int = Field(default=1, ge=1)
    """Data-parallel degree: replicas of the tp × cp × pp model, each on its own share of the batch."""
    micro_batch: int = Field(default=1, ge=1)
    """Sequences per micro-batch on one replica."""
    global_batch: int = Field(default=1, ge=1)
    """Sequences per optimizer step over all replicas (= micro_batch × dp × accumulation steps)."""
    zero: int = Field(default=0, ge=0, le=3)
    """ZeRO stage: 0 none, 1 optimizer states sharded over dp, 2 + gradients, 3 + weights."""
    recompute: Recompute = "none"
    """Activation recomputation: none, selective (attention core only, Korthikanti 2022) or full."""
    sequence_parallel: bool = False
    """Megatron sequence parallelism: norms and dropout split over tp; TP all-reduce becomes RS + AG."""
    vpp: int = Field(default=1, ge=1)
    """Virtual pipeline stages per GPU (interleaved 1F1B when > 1)."""
    cp: int = Field(default=1, ge=1)
    """Context-parallel degree: each sequence split over cp GPUs, K/V passed around the cp ring."""

    @property
    def num_gpus(self) -> int:
        """tp × cp × pp × dp."""
        return self.tp * self.cp * self.pp * self.dp

    @property
    def num_micro_batches(self) -> int:
        """Micro-batches per step on one replica: global_batch / (micro_batch × dp)."""
        return self.global_batch // (self.micro_batch * self.dp)


_INT_FIELDS = ("tp", "pp", "dp", "micro_batch", "global_batch", "zero", "recompute", "vpp", "cp")


@dataclass(frozen=True)
class LayoutArrays:
    """Many layouts as equal-length numpy arrays (recompute coded 0 none / 1 selective / 2 full)."""

    tp: np.ndarray
    """Tensor-parallel degrees (int64)."""
    pp: np.ndarray
    """Pipeline-parallel degrees (int64)."""
    dp: np.ndarray
    """Data-parallel degrees (int64)."""
    micro_batch: np.ndarray
    """Sequences per micro-batch (int64)."""
    global_batch: np.ndarray
    """Sequences per step (int64)."""
    zero: np.ndarray
    """ZeRO stages 0-3 (int64)."""
    recompute: np.ndarray
    """Recompute codes: 0 none, 1 selective, 2 full (int64)."""
    sequence_parallel: np.ndarray
    """Sequence parallelism on/off (bool)."""
    vpp: np.ndarray
    """Virtual pipeline stages per GPU (int64)."""
    cp: np.ndarray | None = None
    """Context-parallel degrees (int64); None means 1 for every layout."""

    def __post_init__(self) -> None:
        length = None
        for f in fields(self):
            raw = getattr(self, f.name)
            if raw is None:
                raw = np.ones(length or 0, dtype=np.int64)
            arr = np.atleast_1d(np.asarray(raw, dtype=bool if f.name == "sequence_parallel" else np.int64))
            object.__setattr__(self, f.name, arr)
            if length is None:
                length = arr.shape[0]
            if arr.ndim != 1 or arr.shape[0] != length:
                raise LayoutError(
                    f"layout array {f.name} has shape {arr.shape}; every layout field needs one value per "
                    f"layout ({length})"
                )

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_layouts(cls, layouts: list[Layout]) -> "LayoutArrays":
        """Stack a list of :class:`Layout` into arrays."""
        return cls(
            tp=np.array([x.tp for x in layouts], dtype=np.int64),
            pp=np.array([x.pp for x in layouts], dtype=np.int64),
            dp=np.array([x.dp for x in layouts], dtype=np.int64),
            micro_batch=np.array([x.micro_batch for x in layouts], dtype=np.int64),
            global_batch=np.array([x.global_batch for x in layouts], dtype=np.int64),
            zero=np.array([x.zero for x in layouts], dtype=np.int64),
            recompute=np.array([RECOMPUTE_CODES[x.recompute] for x in layouts], dtype=np.int64),
            sequence_parallel=np.array([x.sequence_parallel for x in layouts], dtype=bool),
            vpp=np.array([x.vpp for x in layouts], dtype=np.int64),
            cp=np.array([x.cp for x in layouts], dtype=np.int64),
        )

    def take(self, index: np.ndarray) -> "LayoutArrays":
        """The layouts selected by a boolean mask or an index array."""
        return LayoutArrays(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def layout(self, i: int) -> Layout:
        """Layout number ``i`` as a :class:`Layout`."""
        return Layout(
            tp=int(self.tp[i]), pp=int(self.pp[i]), dp=int(self.dp[i]), micro_batch=int(self.micro_batch[i]),
            global_batch=int(self.global_batch[i]), zero=int(self.zero[i]),
            recompute=RECOMPUTE_NAMES[int(self.recompute[i])],  # type: ignore[arg-type]
            sequence_parallel=bool(self.sequence_parallel[i]), vpp=int(self.vpp[i]), cp=int(self.cp[i]),
        )

    @property
    def num_micro_batches(self) -> np.ndarray:
        """Micro-batches per step per replica: global_batch // (micro_batch × dp)."""
        return self.global_batch // np.maximum(self.micro_batch * self.dp, 1)


def layout_divisibility_masks(model: TransformerModel, num_gpus: int, arrays: LayoutArrays) -> dict[str, np.ndarray]:
    """Reason -> boolean array, True where the layout breaks that rule (vectorised :func:`check_layout`)."""
    a = arrays
    per_replica = a.micro_batch * a.dp
    return {
        "gpus": a.tp * a.cp * a.pp * a.dp != num_gpus,
        "layers": np.where(a.vpp > 1, a.pp * a.vpp > model.num_layers + 2, a.pp > model.num_layers),
        "cp": (a.cp > 1) & (model.seq_len % (2 * a.cp) != 0),
        "heads": model.num_heads % a.tp != 0,
        "kv_heads": (model.num_kv_heads % a.tp != 0) & (a.tp % model.num_kv_heads != 0),
        "batch": a.global_batch % per_replica != 0,
        "vpp": (a.vpp > 1) & (a.pp < 2),
        "interleave_batch": (a.vpp > 1) & ((a.global_batch // np.maximum(per_replica, 1)) % a.pp != 0),
        "sequence_parallel": a.sequence_parallel & (a.tp < 2),
        "zero": (a.zero > 0) & (a.dp < 2),
    }


def layout_problems(model: TransformerModel, num_gpus: int, layout: Layout) -> list[str]:
    """Every rule ``layout`` breaks, each as a message that shows all its factors."""
    x = layout
    problems = []
    if x.num_gpus != num_gpus:
        cp = f" × cp {x.cp}" if x.cp > 1 else ""
        problems.append(f"tp {x.tp}{cp} × pp {x.pp} × dp {x.dp} = {x.num_gpus} ≠ {num_gpus} GPUs")
    if x.vpp > 1 and x.pp * x.vpp > model.num_layers + 2:
        problems.append(
            f"pp {x.pp} × vpp {x.vpp} = {x.pp * x.vpp} virtual stages exceed layers {model.num_layers} + 2 "
            f"(every chunk needs a layer, except the first and last, which may hold only the embedding and the loss)"
        )
    elif x.pp > model.num_layers:
        problems.append(f"pp {x.pp} exceeds the {model.num_layers} layers (every stage needs at least one)")
    if model.num_heads % x.tp:
        problems.append(f"heads {model.num_heads} are not divisible by tp {x.tp}")
    elif model.num_kv_heads % x.tp and x.tp % model.num_kv_heads:
        problems.append(f"kv-heads {model.num_kv_heads} neither divide nor are divisible by tp {x.tp}")
    per_replica = x.micro_batch * x.dp
    if x.global_batch % per_replica:
        problems.append(
            f"global batch {x.global_batch} is not divisible by micro-batch {x.micro_batch} × dp {x.dp} = {per_replica}"
        )
    elif x.vpp > 1 and (x.global_batch // per_replica) % x.pp:
        problems.append(
            f"interleaving needs micro-batches per replica {x.global_batch // per_replica} "
            f"(= global batch {x.global_batch} / (micro-batch {x.micro_batch} × dp {x.dp})) divisible by pp {x.pp}"
        )
    if x.vpp > 1 and x.pp < 2:
        problems.append(f"vpp {x.vpp} needs pipeline parallelism (pp {x.pp} < 2)")
    if x.cp > 1 and model.seq_len % (2 * x.cp):
        problems.append(
            f"sequence length {model.seq_len} is not divisible by 2 × cp {x.cp} = {2 * x.cp} "
            f"(context parallelism cuts each sequence into 2·cp equal chunks for causal load balance)"
        )
    if x.sequence_parallel and x.tp < 2:
        problems.append(f"sequence parallelism needs tp ≥ 2 (tp {x.tp})")
    if x.zero > 0 and x.dp < 2:
        problems.append(f"ZeRO stage {x.zero} shards over data parallelism but dp is {x.dp}")
    return problems


def check_layout(model: TransformerModel, num_gpus: int, layout: Layout) -> None:
    """Raise one :class:`LayoutError` listing every broken rule with its factors, or return."""
    problems = layout_problems(model, num_gpus, layout)
    if problems:
        raise LayoutError(
            f"invalid layout for {model.name} on {num_gpus} GPUs: " + "; ".join(problems)
            + "; change --tp/--cp/--pp/--vpp/--micro-batch/--global-batch so the factors divide"
        )
