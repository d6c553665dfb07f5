"""A parallel layout (tp × pp × dp, micro-batch, ZeRO, recompute, SP, interleaving) and its checks.

:class:`Layout` is one layout, validated field by field; :class:`LayoutArrays` holds many layouts
as equal-length numpy arrays so the step model evaluates them in one vectorised pass (the planner's
path). :data:`LAYOUT_SCHEMA` is the one field list (names, storage, record order). The divisibility
rules the fields must meet, and the checks that read them, are :mod:`commmodel.step.layout_rules`.

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

Expert parallelism (mixtures of experts; Megatron-Core ``--expert-model-parallel-size`` ep and
``--expert-tensor-parallel-size`` etp) folds over the tp × cp × dp ranks of a pipeline stage ("parallel
folding", arXiv:2504.14960 §3): ep·etp divides tp·cp·dp, ep divides the routed experts, and the expert
data-parallel group has edp = tp·cp·dp/(ep·etp) ranks. Dense models keep ep = etp = 1.
"""

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, NamedTuple, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from commmodel.errors import LayoutError
from commmodel.hardware.messages import ReadableInit
from commmodel.workload.recompute_policies import RECOMPUTE_CODES, RECOMPUTE_NAMES, Recompute


Schedule = Literal["1f1b", "gpipe", "dualpipe"]
SCHEDULE_NAMES: tuple[str, ...] = get_args(Schedule)
"""Pipeline schedules (:class:`commmodel.step.options.StepOptions` ``schedule``): 1F1B, interleaved when
vpp > 1 (Narayanan et al. 2021 §2.2), GPipe (Huang et al. 2019: all forwards, then all backwards), and
DualPipe (DeepSeek-V3, arXiv:2412.19437 §3.2.1: micro-batches fed from both ends of the pipeline, each rank
holding two stages; pp even; :func:`commmodel.step.terms.bubble_term`)."""


class LayoutField(NamedTuple):
    """One field of the layout schema: how it is stored in :class:`LayoutArrays` and shown in records."""

    name: str
    """Field name, shared by :class:`Layout`, :class:`LayoutArrays`, planner columns and ``plan --json``."""
    header: str
    """Short column header of text tables."""
    kind: Literal["int", "bool", "recompute"] = "int"
    """Stored as int64, bool, or a recompute policy coded by :data:`RECOMPUTE_CODES`."""
    per_layout: bool = True
    """False for a field fixed for the whole job (the global batch): left out of per-layout records."""
    required: bool = True
    """False for a field a record may omit (it then takes the :class:`Layout` default): the expert axes,
    so records written before mixtures of experts still read."""

    @property
    def dtype(self) -> type:
        """numpy dtype of the column."""
        return bool if self.kind == "bool" else np.int64

    def encode(self, value: Any) -> Any:
        """A :class:`Layout` value as stored in arrays."""
        return RECOMPUTE_CODES[value] if self.kind == "recompute" else value

    @property
    def align(self) -> str:
        """Text-table alignment: names left, numbers right."""
        return "l" if self.kind in ("bool", "recompute") else "r"

    def cell(self, value: Any) -> Any:
        """The value as a text-table cell (a flag shows as on / -)."""
        return ("on" if value else "-") if self.kind == "bool" else value

    def decode(self, value: Any) -> Any:
        """An array element as a plain :class:`Layout` value."""
        if self.kind == "recompute":
            return RECOMPUTE_NAMES[int(value)]
        return bool(value) if self.kind == "bool" else int(value)

    def decode_column(self, column: Any) -> list[Any]:
        """A whole column as plain :class:`Layout` values (:meth:`decode` of each element, in one pass)."""
        values = np.asarray(column)
        if self.kind == "recompute":
            return [RECOMPUTE_NAMES[code] for code in values.astype(np.int64).tolist()]
        return values.astype(bool if self.kind == "bool" else np.int64).tolist()


LAYOUT_SCHEMA: tuple[LayoutField, ...] = (
    LayoutField("tp", "tp"), LayoutField("pp", "pp"), LayoutField("cp", "cp"), LayoutField("dp", "dp"),
    LayoutField("micro_batch", "mb"), LayoutField("global_batch", "gb", per_layout=False),
    LayoutField("zero", "zero"), LayoutField("recompute", "recompute", kind="recompute"),
    LayoutField("sequence_parallel", "sp", kind="bool"), LayoutField("vpp", "vpp"),
    LayoutField("ep", "ep", required=False), LayoutField("etp", "etp", required=False),
)
"""The layout fields in display order (tables, records): the one list every module reads. A new parallel
dimension is one entry here plus its :class:`Layout` and :class:`LayoutArrays` field."""
LAYOUT_FIELDS: tuple[str, ...] = tuple(f.name for f in LAYOUT_SCHEMA)
"""Names of :data:`LAYOUT_SCHEMA`, in display order."""
RECORD_SCHEMA: tuple[LayoutField, ...] = tuple(f for f in LAYOUT_SCHEMA if f.per_layout)
"""The per-layout fields (all but the global batch), in display order."""
RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in RECORD_SCHEMA)
"""Fields of one layout in a per-layout record (``plan --json`` "layouts", what-if "best_layout")."""
_SCHEMA_BY_NAME: dict[str, LayoutField] = {f.name: f for f in LAYOUT_SCHEMA}


class Layout(ReadableInit, BaseModel):
    """How one training job is split over its GPUs (Megatron-LM vocabulary)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    _error_class: ClassVar[Any] = LayoutError

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
    ep: int = Field(default=1, ge=1)
    """Expert-parallel degree (mixtures of experts): each MoE layer's routed experts split over ep GPUs,
    folded over the tp × cp × dp ranks of a stage (Megatron-Core parallel folding); 1 for dense models."""
    etp: int = Field(default=1, ge=1)
    """Expert tensor-parallel degree: each routed expert's matrices split over etp GPUs (Megatron-Core
    ``--expert-tensor-parallel-size``); ep × etp divides tp × cp × dp."""

    @property
    def edp(self) -> int:
        """Expert data-parallel ranks: tp·cp·dp/(ep·etp) (Megatron-Core ``expert_data_parallel_size``)."""
        return max(self.tp * self.cp * self.dp // (self.ep * self.etp), 1)

    @property
    def num_gpus(self) -> int:
        """tp × cp × pp × dp."""
        return self.tp * self.cp * self.pp * self.dp

    @property
    def num_micro_batches(self) -> int:
        """Micro-batches per step on one replica: global_batch / (micro_batch × dp)."""
        return self.global_batch // (self.micro_batch * self.dp)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Layout":
        """The layout in a record holding (at least) every schema field, e.g. a planner row (recompute
        as a name or a code, numpy scalars allowed); other keys are ignored."""
        missing = [f.name for f in LAYOUT_SCHEMA if f.required and f.name not in record]
        if missing:
            raise LayoutError(f"layout record lacks {', '.join(missing)}; it needs {', '.join(LAYOUT_FIELDS)}")
        values = {}
        for f in LAYOUT_SCHEMA:
            if f.name not in record:
                continue
            value = record[f.name]
            values[f.name] = value if f.kind == "recompute" and isinstance(value, str) else f.decode(value)
        return cls(**values)

    def to_record(self, per_layout_only: bool = False) -> dict[str, Any]:
        """The schema fields in display order (without the global batch when ``per_layout_only``)."""
        return {f.name: getattr(self, f.name) for f in LAYOUT_SCHEMA if f.per_layout or not per_layout_only}


@dataclass(frozen=True, eq=False)  # holds arrays: a generated == or hash could not compare them
class LayoutArrays:
    """Many layouts as equal-length numpy arrays (recompute coded by :data:`RECOMPUTE_CODES`); a field
    left out (None) takes the :class:`Layout` default for every layout."""

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
    zero: np.ndarray | None = None
    """ZeRO stages 0-3 (int64)."""
    recompute: np.ndarray | None = None
    """Recompute codes: 0 none, 1 selective, 2 full, 3 op, 4 moe (int64)."""
    sequence_parallel: np.ndarray | None = None
    """Sequence parallelism on/off (bool)."""
    vpp: np.ndarray | None = None
    """Virtual pipeline stages per GPU (int64)."""
    cp: np.ndarray | None = None
    """Context-parallel degrees (int64)."""
    ep: np.ndarray | None = None
    """Expert-parallel degrees (int64)."""
    etp: np.ndarray | None = None
    """Expert tensor-parallel degrees (int64)."""

    def __post_init__(self) -> None:
        length = int(np.size(self.tp))
        for f in fields(self):
            spec = _SCHEMA_BY_NAME[f.name]
            raw = getattr(self, f.name)
            if raw is None:
                raw = np.full(length, spec.encode(Layout.model_fields[f.name].default))
            arr = np.atleast_1d(np.asarray(raw, dtype=spec.dtype))
            object.__setattr__(self, f.name, arr)
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
        return cls(**{f.name: np.array([f.encode(getattr(x, f.name)) for x in layouts], dtype=f.dtype)
                      for f in LAYOUT_SCHEMA})

    @classmethod
    def from_columns(cls, columns: Mapping[str, np.ndarray]) -> "LayoutArrays":
        """The schema fields of a column table (e.g. the planner's), other columns ignored."""
        return cls(**{name: columns[name] for name in LAYOUT_FIELDS if name in columns})

    def columns(self) -> dict[str, np.ndarray]:
        """Field name -> array, in schema order."""
        return {name: getattr(self, name) for name in LAYOUT_FIELDS}

    def take(self, index: np.ndarray) -> "LayoutArrays":
        """The layouts selected by a boolean mask or an index array."""
        return LayoutArrays(**{name: column[index] for name, column in self.columns().items()})

    def layout(self, i: int) -> Layout:
        """Layout number ``i`` as a :class:`Layout`."""
        return Layout(**{f.name: f.decode(getattr(self, f.name)[i]) for f in LAYOUT_SCHEMA})

    @property
    def num_micro_batches(self) -> np.ndarray:
        """Micro-batches per step per replica: global_batch // (micro_batch × dp)."""
        return self.global_batch // np.maximum(self.micro_batch * self.dp, 1)


assert set(LAYOUT_FIELDS) == set(Layout.model_fields) == {f.name for f in fields(LayoutArrays)}, "layout schema drift"
