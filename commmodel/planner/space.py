"""What the planner searches over: a frozen, documented :class:`SearchSpace` (DESIGN §6).

The defaults follow what Megatron-LM practitioners actually sweep (Narayanan et al. 2021 §5,
Korthikanti et al. 2022 §6): tensor parallel in powers of two up to the GPUs of one node (up to 8
inside an NVLink domain wider than a node)
(TP traffic is too heavy for the scale-out network), pipeline parallel over every divisor of the
remaining GPUs that also divides the layers, micro-batches in powers of two, every ZeRO stage and
recompute policy, sequence parallelism when tp > 1 and interleaving (virtual stages) when pp > 1.
Gradient accumulation is not a separate axis: it is the number of micro-batches per step,
``global_batch / (micro_batch · dp)``, so the micro-batch axis already sweeps it.
"""

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from commmodel.errors import LayoutError
from commmodel.hardware.messages import ReadableInit

from commmodel.workload.recompute_policies import Recompute as RecomputeName


class SearchSpace(ReadableInit, BaseModel):
    """The layout axes the planner enumerates; every axis can be narrowed or pinned."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    _error_class: ClassVar[Any] = LayoutError

    max_tp: int | None = Field(default=None, ge=1)
    """Largest tensor-parallel degree (default: GPUs per node, or up to 8 inside a scale-up domain that
    spans nodes such as NVL72, so TP never crosses the scale-out network)."""
    tp: tuple[int, ...] | None = None
    """Pin tensor parallelism to these degrees (default: powers of two up to ``max_tp`` dividing the GPUs)."""
    pp: tuple[int, ...] | None = None
    """Pin pipeline parallelism to these degrees (default: every divisor of GPUs / tp up to ``max_pp``)."""
    max_pp: int | None = Field(default=None, ge=1)
    """Largest pipeline degree (default: the number of layers)."""
    micro_batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    """Micro-batch sizes (sequences per GPU per forward pass); gradient accumulation follows from them."""
    accumulation_steps: tuple[int, ...] | None = None
    """Pin the micro-batches per replica per step (gradient accumulation = global batch / (micro-batch × dp));
    default: whatever the micro-batch and dp leave."""
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    """ZeRO stages (0 = plain data parallel, 1 optimizer, 2 + gradients, 3 + weights sharded)."""
    recompute: tuple[RecomputeName, ...] = ("none", "selective", "full")
    """Activation recomputation policies (Korthikanti et al. 2022)."""
    sequence_parallel: tuple[bool, ...] = (False, True)
    """Sequence parallelism on/off; "on" is only generated where tp > 1 (it is a no-op at tp = 1)."""
    cp: tuple[int, ...] | None = None
    """Pin context parallelism to these degrees (default: 1 below ``cp_min_seq_len`` tokens, else powers of
    two up to ``max_cp`` that divide the GPUs and leave 2·cp equal chunks of the sequence)."""
    max_cp: int = Field(default=16, ge=1)
    """Largest context-parallel degree searched by default (Llama 3 405B trained 128K tokens on cp 16)."""
    cp_min_seq_len: int = Field(default=32768, ge=1)
    """Sequence length from which context parallelism is searched by default: below it a GPU holds a whole
    sequence's activations and cp only adds K/V traffic (keeps the default search as fast as without cp)."""
    ep: tuple[int, ...] | None = None
    """Pin expert parallelism to these degrees (mixtures of experts; default: powers of two up to ``max_ep``
    dividing the experts; each must also divide tp·cp·dp, Megatron-Core parallel folding). Dense: 1."""
    max_ep: int = Field(default=64, ge=1)
    """Largest expert-parallel degree searched by default (DeepSeek-V3 trained on EP 64, arXiv:2412.19437 §3.2)."""
    max_vpp: int = Field(default=8, ge=1)
    """Largest interleaving degree (virtual stages per GPU); vpp > 1 only where pp > 1 and it divides."""
    require_microbatches_divisible_by_pp: bool = True
    """Megatron-LM's interleaved schedule needs the micro-batch count to be a multiple of pp."""

    @model_validator(mode="after")
    def _check(self) -> "SearchSpace":
        for name in ("tp", "pp", "cp", "ep", "micro_batches", "accumulation_steps"):
            values = getattr(self, name)
            if values is not None and (not values or any(v < 1 for v in values)):
                raise LayoutError(f"search space {name} = {values!r}: give one or more whole numbers ≥ 1")
        if not self.zero_stages or any(z not in (0, 1, 2, 3) for z in self.zero_stages):
            raise LayoutError(f"search space zero_stages = {self.zero_stages!r}: use stages among 0, 1, 2, 3")
        if not self.recompute or not self.sequence_parallel:
            raise LayoutError("search space recompute and sequence_parallel need at least one value each")
        return self


def for_stack(stack: Any, space: SearchSpace | None = None) -> SearchSpace:
    """``space`` (default: every axis) with the stack's ZeRO stages, recompute policies and parallel pins
    (``Stack.search_pins``: megatron-core searches ZeRO 0/1, ddp dp alone) on every axis ``space`` was built
    without: what ``plan`` searches when its flags pin nothing, and what :func:`commmodel.planner.plan` searches
    when called without a space."""
    space = space or SearchSpace()
    unsaid = {name: values for name, values in stack.search_pins.items() if name not in space.model_fields_set}
    return space.model_copy(update=unsaid)


@dataclass(frozen=True)
class StackVariant:
    """One training stack of a search or a comparison: its name, its StepOptions (explicit flags applied) and what
    the planner searches under it (its ZeRO stages and recompute policies)."""

    name: str
    """The stack (``--stack``)."""
    options: Any
    """StepOptions under that stack."""
    space: SearchSpace | None
    """The search space under it (None: the default space)."""
