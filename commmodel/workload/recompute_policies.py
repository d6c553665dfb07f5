"""Activation-recompute policies and their integer codes: one numbering for the layout schema
(:class:`commmodel.step.layout.Layout`'s ``recompute``), the planner's arrays and the workload's memory and FLOP
formulas, which sit below the step layer and so take it from here."""

from typing import Literal, get_args

Recompute = Literal["none", "selective", "full", "op", "moe"]
RECOMPUTE_NAMES: tuple[str, ...] = get_args(Recompute)
"""Recompute policies in code order: the integer code of a policy in :class:`commmodel.step.layout.LayoutArrays` is
its index (0 none, 1 selective = attention core only, Korthikanti et al. 2022 §5; 2 full = whole blocks; 3 op =
torchtitan's op-level selective checkpointing, mm/SDPA outputs saved but every second mm recomputed,
:mod:`commmodel.workload.op_sac`; 4 moe = Megatron-Core ``--recompute-granularity selective --recompute-modules
moe``: each MoE layer (router, dispatch, experts, combine) checkpointed at its input and run again in the backward,
:mod:`commmodel.workload.moe_recompute`)."""
RECOMPUTE_CODES: dict[str, int] = {name: code for code, name in enumerate(RECOMPUTE_NAMES)}
"""Recompute policy -> integer code."""
RECOMPUTE_NONE, RECOMPUTE_SELECTIVE = RECOMPUTE_CODES["none"], RECOMPUTE_CODES["selective"]
RECOMPUTE_FULL, RECOMPUTE_OP, RECOMPUTE_MOE = RECOMPUTE_CODES["full"], RECOMPUTE_CODES["op"], RECOMPUTE_CODES["moe"]
