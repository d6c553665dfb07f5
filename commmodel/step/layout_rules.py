"""The one table of layout divisibility rules (:data:`LAYOUT_RULES`) and the checks that read it.

Each :class:`LayoutRule` carries its planner reason label, its vectorised test over layout columns and its
message with every factor: :func:`check_layout` raises one :class:`~commmodel.errors.LayoutError` naming every
broken rule, :func:`layout_divisibility_masks` and the planner's pruning (:mod:`commmodel.planner.enumerate`)
evaluate the same table as arrays. The layout itself and its field list live in :mod:`commmodel.step.layout`.
"""

from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np

from commmodel.errors import LayoutError
from commmodel.step.layout import Layout, LayoutArrays
from commmodel.workload.model import TransformerModel
from commmodel.workload.offload import MOE_ONLY_MODULES
from commmodel.workload.recompute_policies import RECOMPUTE_MOE, RECOMPUTE_NAMES


class LayoutLimits(NamedTuple):
    """The model sizes the layout rules divide: layers, heads, kv-heads, sequence length and routed experts."""

    num_layers: int
    num_heads: int
    num_kv_heads: int | None = None
    seq_len: int | None = None
    num_experts: int = 1

    @classmethod
    def of(cls, model: TransformerModel) -> "LayoutLimits":
        """The limits of ``model``."""
        return cls(model.num_layers, model.num_heads, model.num_kv_heads, model.seq_len, model.num_experts)


Columns = Mapping[str, np.ndarray]
"""Layout columns by field name (:meth:`LayoutArrays.columns` or the planner's table)."""


def _per_replica(c: Columns) -> np.ndarray:
    return c["micro_batch"] * c["dp"]


def _gpus_bad(m: LayoutLimits, n: int, c: Columns) -> np.ndarray:
    return c["tp"] * c["cp"] * c["pp"] * c["dp"] != n


def _heads_bad(m: LayoutLimits, n: int, c: Columns) -> np.ndarray:
    tp = c["tp"]
    bad = m.num_heads % tp != 0
    if m.num_kv_heads is not None:
        bad = bad | ((m.num_kv_heads % tp != 0) & (tp % m.num_kv_heads != 0))
    return bad


def _layers_bad(m: LayoutLimits, n: int, c: Columns) -> np.ndarray:
    return np.where(c["vpp"] > 1, c["pp"] * c["vpp"] > m.num_layers + 2, c["pp"] > m.num_layers)


def _batch_bad(m: LayoutLimits, n: int, c: Columns) -> np.ndarray:
    return c["global_batch"] % _per_replica(c) != 0


def _interleave_bad(m: LayoutLimits, n: int, c: Columns) -> np.ndarray:
    per_replica = _per_replica(c)
    whole = c["global_batch"] % per_replica == 0
    return whole & (c["vpp"] > 1) & ((c["global_batch"] // np.maximum(per_replica, 1)) % c["pp"] != 0)


def _cp_bad(m: LayoutLimits, n: int, c: Columns) -> np.ndarray:
    if m.seq_len is None:
        return np.zeros(np.shape(c["cp"]), dtype=bool)
    return (c["cp"] > 1) & (m.seq_len % (2 * c["cp"]) != 0)


def _column(c: Columns, name: str) -> np.ndarray:
    """A layout column, or 1 for a table that predates the field (e.g. the planner's cp-only probes)."""
    return c[name] if name in c else np.ones(np.shape(c["tp"]), dtype=np.int64)


def _ep_dense_bad(m: LayoutLimits, n: int, c: Columns) -> np.ndarray:
    return (m.num_experts <= 1) & ((_column(c, "ep") > 1) | (_column(c, "etp") > 1))


def _ep_experts_bad(m: LayoutLimits, n: int, c: Columns) -> np.ndarray:
    return (m.num_experts > 1) & (m.num_experts % _column(c, "ep") != 0)


def _ep_fold_bad(m: LayoutLimits, n: int, c: Columns) -> np.ndarray:
    return (c["tp"] * _column(c, "cp") * c["dp"]) % (_column(c, "ep") * _column(c, "etp")) != 0


def _ep_fold_text(model: TransformerModel, n: int, x: Layout) -> str:
    return (f"ep {x.ep} × etp {x.etp} = {x.ep * x.etp} does not divide tp {x.tp} × cp {x.cp} × dp {x.dp} = "
            f"{x.tp * x.cp * x.dp} (expert groups fold over the attention ranks of one pipeline stage)")


def _gpus_text(model: TransformerModel, n: int, x: Layout) -> str:
    cp = f" × cp {x.cp}" if x.cp > 1 else ""
    return f"tp {x.tp}{cp} × pp {x.pp} × dp {x.dp} = {x.num_gpus} ≠ {n} GPUs"


def _heads_text(model: TransformerModel, n: int, x: Layout) -> str:
    if model.num_heads % x.tp:
        return f"heads {model.num_heads} are not divisible by tp {x.tp}"
    return f"kv-heads {model.num_kv_heads} neither divide nor are divisible by tp {x.tp}"


def _layers_text(model: TransformerModel, n: int, x: Layout) -> str:
    if x.vpp > 1:
        return (f"pp {x.pp} × vpp {x.vpp} = {x.pp * x.vpp} virtual stages exceed layers {model.num_layers} + 2 "
                f"(every chunk needs a layer, except the first and last, which may hold only the embedding and the loss)")
    return f"pp {x.pp} exceeds the {model.num_layers} layers (every stage needs at least one)"


def _batch_text(model: TransformerModel, n: int, x: Layout) -> str:
    per_replica = x.micro_batch * x.dp
    return f"global batch {x.global_batch} is not divisible by micro-batch {x.micro_batch} × dp {x.dp} = {per_replica}"


def _interleave_text(model: TransformerModel, n: int, x: Layout) -> str:
    per_replica = x.micro_batch * x.dp
    return (f"interleaving needs micro-batches per replica {x.global_batch // per_replica} "
            f"(= global batch {x.global_batch} / (micro-batch {x.micro_batch} × dp {x.dp})) divisible by pp {x.pp}")


def _cp_text(model: TransformerModel, n: int, x: Layout) -> str:
    return (f"sequence length {model.seq_len} is not divisible by 2 × cp {x.cp} = {2 * x.cp} "
            f"(context parallelism cuts each sequence into 2·cp equal chunks for causal load balance)")


class LayoutRule(NamedTuple):
    """One divisibility rule: its reason label, its vectorised test and its message with every factor."""

    key: str
    """Short name (the key of :func:`layout_divisibility_masks`)."""
    reason: str
    """Label under which the planner counts the layouts it prunes for this rule."""
    broken: Callable[[LayoutLimits, int, Columns], np.ndarray]
    """(limits, GPUs, columns) -> True where a layout breaks the rule."""
    message: Callable[[TransformerModel, int, Layout], str]
    """The error text for one layout that breaks it, every factor shown."""
    enumerated: bool = False
    """The planner's enumeration never generates a layout that breaks it (it is not a pruning reason)."""


LAYOUT_RULES: tuple[LayoutRule, ...] = (
    LayoutRule("gpus", "tp·cp·pp·dp ≠ GPUs", _gpus_bad, _gpus_text, enumerated=True),
    # Megatron-LM: heads split evenly over tp; kv groups split evenly or are replicated (tp a multiple).
    LayoutRule("heads", "heads % tp", _heads_bad, _heads_text),
    # one layer per stage; interleaved, one per virtual stage except the first and last (embedding, loss)
    LayoutRule("layers", "pp·vpp > layers (+2 with interleaving)", _layers_bad, _layers_text),
    LayoutRule("batch", "global_batch % (micro_batch·dp)", _batch_bad, _batch_text),
    # the interleaved 1F1B schedule runs micro-batches in rounds of pp (Narayanan et al. 2021 §2.2)
    LayoutRule("interleave_batch", "microbatches % pp (interleaved)", _interleave_bad, _interleave_text),
    LayoutRule("vpp", "vpp > 1 needs pp ≥ 2", lambda m, n, c: (c["vpp"] > 1) & (c["pp"] < 2),
               lambda model, n, x: f"vpp {x.vpp} needs pipeline parallelism (pp {x.pp} < 2)", enumerated=True),
    LayoutRule("cp", "seq_len % (2·cp)", _cp_bad, _cp_text, enumerated=True),
    LayoutRule("sequence_parallel", "sequence parallelism needs tp ≥ 2",
               lambda m, n, c: c["sequence_parallel"] & (c["tp"] < 2),
               lambda model, n, x: f"sequence parallelism needs tp ≥ 2 (tp {x.tp})", enumerated=True),
    LayoutRule("zero", "ZeRO needs dp·cp ≥ 2", lambda m, n, c: (c["zero"] > 0) & (c["dp"] * c["cp"] < 2),
               lambda model, n, x: f"ZeRO stage {x.zero} shards over data parallelism (dp·cp ranks) but dp is {x.dp}"
                                   f" and cp {x.cp}",
               enumerated=True),
    LayoutRule("ep_dense", "ep/etp > 1 on a dense model", _ep_dense_bad,
               lambda model, n, x: f"ep {x.ep} / etp {x.etp} need a mixture of experts ({model.name} is dense)",
               enumerated=True),
    # Megatron-Core: num_moe_experts % expert_model_parallel_size == 0
    LayoutRule("ep_experts", "num_experts % ep", _ep_experts_bad,
               lambda model, n, x: f"experts {model.num_experts} are not divisible by ep {x.ep}"),
    # Megatron-Core parallel folding (arXiv:2504.14960 §3): ep·etp divides the tp·cp·dp ranks of a stage
    LayoutRule("ep_fold", "(tp·cp·dp) % (ep·etp)", _ep_fold_bad, _ep_fold_text),
)
"""Every rule a layout must meet, in the order the planner charges a pruned layout (to the first it breaks).
Layers need not divide evenly over pp or pp·vpp: the busiest stage or chunk sets the pace (module doc)."""


def layout_divisibility_masks(model: TransformerModel, num_gpus: int, arrays: LayoutArrays) -> dict[str, np.ndarray]:
    """Rule key -> boolean array, True where the layout breaks that rule (:data:`LAYOUT_RULES`)."""
    limits, columns = LayoutLimits.of(model), arrays.columns()
    return {rule.key: np.asarray(rule.broken(limits, num_gpus, columns), dtype=bool) for rule in LAYOUT_RULES}


def layout_problems(model: TransformerModel, num_gpus: int, layout: Layout) -> list[str]:
    """Every rule ``layout`` breaks, each as a message that shows all its factors."""
    masks = layout_divisibility_masks(model, num_gpus, LayoutArrays.from_layouts([layout]))
    return [rule.message(model, num_gpus, layout) for rule in LAYOUT_RULES if masks[rule.key][0]]


def check_dense_experts(model: TransformerModel, layout: Layout) -> None:
    """ep or etp above 1 on a dense model: one line whose fix is to drop them (no factor to make divide)."""
    if not model.is_moe and (layout.ep > 1 or layout.etp > 1):
        raise LayoutError(f"--ep {layout.ep} / --etp {layout.etp}: {model.name} is dense (no experts), so both are 1; "
                          "drop --ep and --etp")


def check_layout(model: TransformerModel, num_gpus: int, layout: Layout) -> None:
    """Raise one :class:`LayoutError` listing every broken rule with its factors, or return."""
    if layout.recompute == RECOMPUTE_NAMES[RECOMPUTE_MOE] and not model.is_moe:
        raise LayoutError(f"recompute moe checkpoints the MoE layers, and {model.name} is dense; "
                          "use --recompute none, selective, full or op")
    check_dense_experts(model, layout)
    problems = layout_problems(model, num_gpus, layout)
    if problems:
        raise LayoutError(
            f"invalid layout for {model.name} on {num_gpus} GPUs: " + "; ".join(problems)
            + f"; change --tp/--cp/--pp/--vpp/{'--ep/--etp/' if model.is_moe else ''}--micro-batch/--global-batch so the "
            "factors divide"
        )


def check_schedule(layout: Layout, schedule: str) -> None:
    """Raise one :class:`LayoutError` when ``layout`` cannot run ``schedule``: DualPipe feeds micro-batches
    from both pipeline ends, so its stages pair up (pp even) and each rank already holds two of them (no
    interleaving: vpp 1), DeepSeek-V3 (arXiv:2412.19437 §3.2.1: "the pipeline stages and micro-batches be
    divisible by 2")."""
    if schedule != "dualpipe":
        return
    problems = [f"pp {layout.pp} is odd" if layout.pp % 2 else "", f"vpp {layout.vpp} ≠ 1" if layout.vpp != 1 else ""]
    problems = [p for p in problems if p]
    if problems:
        raise LayoutError(f"the dualpipe schedule needs an even pp and vpp 1 ({'; '.join(problems)}); "
                          f"change --pp/--vpp or use --schedule 1f1b")


def check_recompute_offload(recompute: tuple[str, ...], offload_modules: tuple[str, ...]) -> None:
    """Raise one :class:`LayoutError` when a policy in ``recompute`` is ``moe`` (the whole MoE layer checkpointed)
    and ``offload_modules`` names a module inside that layer: Megatron-Core refuses it (transformer_config.py
    @d98e8a6; :class:`commmodel.step.options.StepOptions` applies the same rule to ``recompute_modules`` moe)."""
    inside = sorted(MOE_ONLY_MODULES & set(offload_modules))
    if RECOMPUTE_NAMES[RECOMPUTE_MOE] in recompute and inside:
        raise LayoutError(f"--recompute moe with --offload-modules {','.join(inside)}: Megatron-Core refuses "
                          "offloading inside the checkpointed MoE layer (transformer_config.py @d98e8a6); drop one "
                          "of them")


A2A_OVERLAP_REASON = "--moe-a2a-overlap needs ep ≥ 2 and, with pp ≥ 2, vpp ≥ 2"
"""Pruning label of the layouts Megatron-Core refuses to run with ``--overlap-moe-expert-parallel-comm``."""


def a2a_overlap_bad(columns: Columns, schedule: str = "1f1b") -> np.ndarray:
    """True where the EP all-to-all overlap cannot run the layout's structure: no expert parallelism, or, under
    Megatron-Core's schedules (not DualPipe, which pairs its chunks itself), a pipeline without virtual stages
    (megatron/core/transformer/transformer_config.py ``__post_init__``: "overlap_moe_expert_parallel_comm is only
    supported with expert model parallelism"; "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size
    must be specified when pipeline_model_parallel_size > 1"). Its third rule, no full recompute, is
    :func:`check_a2a_overlap`'s."""
    no_ep = columns["ep"] < 2
    if schedule == "dualpipe":
        return no_ep
    return no_ep | ((columns["pp"] > 1) & (columns["vpp"] < 2))


def check_a2a_overlap(layout: Layout, enabled: bool, schedule: str = "1f1b") -> None:
    """Raise one :class:`LayoutError` where ``--moe-a2a-overlap`` is asked for a layout that cannot run it
    (:func:`a2a_overlap_bad`; and Megatron-Core's "disable full recomputation when enabling
    overlap_moe_expert_parallel_comm", its schedules only)."""
    if not enabled:
        return
    megatron = schedule != "dualpipe"
    problems = [f"ep {layout.ep} < 2" if layout.ep < 2 else "",
                f"pp {layout.pp} without virtual stages (vpp {layout.vpp})"
                if megatron and layout.pp > 1 and layout.vpp < 2 else "",
                "full recompute" if megatron and layout.recompute == "full" else ""]
    problems = [p for p in problems if p]
    if problems:
        raise LayoutError(f"--moe-a2a-overlap: Megatron-Core refuses the EP all-to-all overlap with "
                          f"{'; '.join(problems)} (transformer_config.py); change the layout or drop --moe-a2a-overlap")
