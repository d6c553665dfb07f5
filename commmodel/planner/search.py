"""The planner: enumerate → prune by divisibility → memory of every candidate → prune by memory → step
model on the rest → rank.

``plan`` returns numpy columns (no pandas here); :meth:`PlanResult.to_frame` builds the DataFrame
lazily. Every layout that survives the divisibility rules (DESIGN §6) has its memory per GPU evaluated
(:func:`commmodel.step.evaluate.memory_columns`, the step model's own memory formulas); the layouts that do
not fit are dropped and counted, and the full step model (compute, communication, bubble) runs once, on
the ones that fit. The result is the same as evaluating every candidate with the step model and dropping
the unfit ones afterwards (tests/test_planner_memory_first.py); a custom ``evaluator`` is still called once
on every candidate.
Ranking is by step time (equivalently tokens/s at a fixed global batch); ties go to the simpler
layout (lower ZeRO stage, less recompute, fewer virtual stages), then to the one with less memory.
"""

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from commmodel.errors import LayoutError
from commmodel.hardware.models import System
from commmodel.hardware.cluster import Cluster
from commmodel.planner.enumerate import REASON_MEMORY, CandidateGrid, candidate_grid
from commmodel.planner.space import SearchSpace, for_stack
from commmodel.step.grouping import distinct
from commmodel.step.layout import LAYOUT_SCHEMA, RECOMPUTE_NAMES, RECORD_FIELDS, LayoutArrays
from commmodel.step.knob_rules import check_searched_recompute
from commmodel.step.layout_rules import check_recompute_offload

Evaluator = Callable[..., Mapping[str, np.ndarray]]
"""``(model, system, num_gpus, arrays, options) -> columns``: the step model's vectorised entry point."""

LAYOUT_RECORD_KEYS: tuple[str, ...] = (
    "rank", *RECORD_FIELDS, "step_time_s", "model_tflops_per_gpu", "mfu", "mfu_low_precision_peak",
    "memory_bytes_per_gpu",
)
"""Keys of one entry of ``plan --json`` "layouts" (DESIGN §8): rank, the layout schema's per-layout fields
(:data:`commmodel.step.layout.RECORD_FIELDS`), then the headline numbers; ``mfu_low_precision_peak`` beside ``mfu``
(issue 12: MFU against the dense 16-bit peak, the FP8/FP4-peak figure beside it; equal to ``mfu`` in 16 bits)."""

BATCH_TOKENS_BY_SIZE: tuple[tuple[float, float], ...] = ((3e9, 1.0e6), (20e9, 2.0e6), (math.inf, 4.0e6))
"""Default tokens per global batch by parameter count: GPT-3 used 0.5-1M tokens below 3B, 2M for
6.7B/13B and 3.2M for 175B (Brown et al. 2020, Table 2.1); Llama 2 used 4M at every size
(Touvron et al. 2023, §2.2). (upper bound on parameters, tokens per batch)."""


def default_global_batch(num_params: float, seq_len: int, num_gpus: int, gpus_per_node: int) -> int:
    """A conventional global batch: the tokens of :data:`BATCH_TOKENS_BY_SIZE` in sequences, rounded
    up to a power-of-two multiple of lcm(node count, odd part of the GPU count), so that the
    data-parallel degrees of the usual splits divide it (3 GPUs -> a multiple of 3)."""
    tokens = next(t for limit, t in BATCH_TOKENS_BY_SIZE if num_params < limit)
    sequences = max(1.0, tokens / seq_len)
    odd = num_gpus
    while odd % 2 == 0:
        odd //= 2
    unit = math.lcm(max(1, num_gpus // max(1, gpus_per_node)), odd)
    return unit * 2 ** max(0, math.ceil(math.log2(sequences / unit) - 1e-9))


def layout_global_batch(num_params: float, seq_len: int, num_gpus: int, gpus_per_node: int, per_step: int) -> int:
    """The global batch of one layout whose command does not say one (``estimate``): :func:`default_global_batch`,
    what plan, compare and query assume, rounded up to a multiple of ``per_step`` sequences (micro-batch × dp, × pp
    with interleaving, whose micro-batch count must divide by pp), so a layout is priced as the planner prices it."""
    batch = default_global_batch(num_params, seq_len, num_gpus, min(num_gpus, gpus_per_node))
    return -(-batch // per_step) * per_step


def default_max_tp(system: System) -> int:
    """Largest tensor-parallel degree searched by default: the GPUs of a node, or up to 8 GPUs of a
    scale-up domain that spans nodes (GB200 NVL72 trays hold 4 GPUs but TP 8 stays on NVLink).
    TP traffic (4 collectives per layer per micro-batch) must not cross the scale-out network."""
    domain = system.scale_up.domain_size
    return max(system.gpus_per_node, min(domain, 8))


@dataclass(frozen=True, eq=False)  # holds arrays: a generated == or hash could not compare them
class PlanResult:
    """A finished search: ranked feasible layouts as columns, plus counts and timing."""

    model_name: str
    """Model searched."""
    system_name: str
    """System (and network) searched."""
    num_gpus: int
    """GPUs in the job."""
    global_batch: int
    """Sequences per optimizer step."""
    seq_len: int
    """Tokens per sequence."""
    columns: dict[str, np.ndarray]
    """Feasible layouts sorted best first: layout fields, step-model columns, breakdown terms."""
    num_enumerated: int
    """Distinct layouts enumerated."""
    num_evaluated: int
    """Layouts that survived divisibility pruning, each evaluated for memory per GPU (``plan --json``
    "evaluated"). The full step model ran on the num_feasible of them that fit (with the default
    evaluator; a custom evaluator ran on all of them); pruned["memory"] counts the rest."""
    pruned: dict[str, int]
    """Reason -> layouts removed (divisibility rules, then "memory")."""
    search_s: float
    """Wall time of the whole search (enumerate, prune, evaluate, rank)."""
    closest_infeasible: dict[str, Any] | None
    """When nothing fits: the evaluated layout that needs the least memory, with its memory."""
    hbm_bytes: float
    """What ``fits`` was judged against on one GPU: its memory less ``memory_headroom_bytes``."""
    memory_headroom_bytes: float = 0.0
    """Memory the search kept free per GPU (the options' ``memory_headroom_bytes``)."""

    @property
    def num_feasible(self) -> int:
        """Layouts that fit in memory (the ranked ones)."""
        return int(self.columns["step_time_s"].shape[0]) if "step_time_s" in self.columns else 0

    def row(self, index: int) -> dict[str, Any]:
        """Every column of ranked layout ``index`` (0 = best) as plain Python values, rank included."""
        out: dict[str, Any] = {"rank": index + 1}
        for key, column in self.columns.items():
            value = column[index].item() if hasattr(column[index], "item") else column[index]
            out[key] = value
        return decode_layout_fields(out)

    def rows(self, top: int | None = None, keys: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """The best ``top`` layouts as :meth:`row` gives them (only ``keys`` when given), built column by
        column in one pass: each value is converted once, so the cost is linear in rows × keys."""
        count = self.num_feasible if top is None else min(top, self.num_feasible)
        names = ("rank", *self.columns) if keys is None else keys
        fields = {field.name: field for field in LAYOUT_SCHEMA}
        values: list[list[Any]] = []
        for name in names:
            if name == "rank":
                values.append(list(range(1, count + 1)))
            elif name in fields:
                values.append(fields[name].decode_column(self.columns[name][:count]))
            else:
                values.append(self.columns[name][:count].tolist())
        return [dict(zip(names, row)) for row in zip(*values)]

    def records(self, top: int | None = None) -> list[dict[str, Any]]:
        """The best ``top`` layouts with exactly the ``plan --json`` keys."""
        return self.rows(top, LAYOUT_RECORD_KEYS)

    def require_feasible(self) -> "PlanResult":
        """Self, or a :class:`LayoutError` saying what the closest layout needs when nothing fits."""
        if self.num_feasible:
            return self
        close = self.closest_infeasible
        if close is None:
            raise LayoutError(f"no layout of {self.model_name} on {self.num_gpus} GPUs passes the divisibility rules "
                              f"({_pruned_text(self.pruned)}); loosen a pinned flag (--tp, --pp, --cp, --ep, "
                              f"--micro-batch, --vpp) or change --gpus or --global-batch")
        raise LayoutError(
            f"no layout of {self.model_name} fits on {self.num_gpus} GPUs of {self.system_name}: the smallest needs "
            f"{close['memory_bytes_per_gpu'] / 1e9:.1f} GB per GPU of {self.hbm_bytes / 1e9:.1f} GB "
            f"(memory less headroom) "
            f"(tp {close['tp']}, pp {close['pp']}, dp {close['dp']}, ZeRO {close['zero']}, recompute {close['recompute']}, "
            f"micro-batch {close['micro_batch']}); use more GPUs, a GPU with more memory or a smaller model"
        )

    def to_frame(self, top: int | None = None):
        """The ranked layouts as a pandas DataFrame (rank, layout, metrics, breakdown columns)."""
        import pandas as pd  # lazy: the core search stays pandas-free

        count = self.num_feasible if top is None else min(top, self.num_feasible)
        data = {"rank": np.arange(1, count + 1)}
        for key, column in self.columns.items():
            data[key] = column[:count]
        frame = pd.DataFrame(data)
        frame["recompute"] = np.asarray(RECOMPUTE_NAMES, dtype=object)[frame["recompute"].to_numpy(dtype=int)]
        if "bound" in frame:  # the code the evaluator stores, by name (as StepEstimate.bound gives it)
            from commmodel.step.evaluate import BOUND_NAMES

            frame["bound"] = np.asarray(BOUND_NAMES, dtype=object)[frame["bound"].to_numpy(dtype=int)]
        frame = frame.set_index("rank")
        frame.attrs.update(pruned=dict(self.pruned), enumerated=self.num_enumerated, evaluated=self.num_evaluated,
                           model=self.model_name, system=self.system_name, num_gpus=self.num_gpus,
                           global_batch=self.global_batch)
        return frame


def decode_layout_fields(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its layout-schema fields as plain :class:`~commmodel.step.layout.Layout` values
    (recompute by name, sequence parallelism as a bool), in place."""
    for field in LAYOUT_SCHEMA:
        if field.name in record:
            record[field.name] = field.decode(record[field.name])
    return record


def _pruned_text(pruned: Mapping[str, int]) -> str:
    return ", ".join(f"{reason}: {count}" for reason, count in pruned.items() if count) or "none"


def _columns_of(result: Any) -> dict[str, np.ndarray]:
    """The evaluator's output (a mapping, or an object with ``columns``/``as_dict``) as a dict of arrays."""
    if hasattr(result, "as_dict"):
        result = result.as_dict()
    elif hasattr(result, "columns") and isinstance(result.columns, Mapping):
        result = result.columns
    return {str(k): np.asarray(result[k]) for k in result.keys()}


def rank_order(step_time_s: np.ndarray, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """Indices best first: step time; on a tie the simpler layout (lower ZeRO stage, less recompute,
    fewer virtual stages: less that can go wrong), then less memory, then the smaller micro-batch; then
    enumeration order. One stable argsort by step time; only the rows of tied step times are then ordered
    by the full key (a lexsort of those rows alone), which is the same order as a lexsort of every row."""
    keys = [columns["micro_batch"]]
    if "memory_bytes_per_gpu" in columns:
        keys.append(columns["memory_bytes_per_gpu"])
    keys += [columns["vpp"], columns["recompute"], columns["zero"], step_time_s]
    order = np.argsort(step_time_s, kind="stable")
    ordered = step_time_s[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1])
    if tied.size:
        at = distinct(np.concatenate([tied, tied + 1]))  # positions (ascending) inside runs of equal step time
        rows = order[at]
        order[at] = rows[np.lexsort([key[rows] for key in keys])]
    return order


def _without_full_recompute(space: SearchSpace) -> SearchSpace:
    """The search space without full recompute, which the EP all-to-all overlap refuses (one line where that
    leaves no policy)."""
    kept = tuple(r for r in space.recompute if r != "full")
    if not kept:
        raise LayoutError("--moe-a2a-overlap: Megatron-Core refuses the EP all-to-all overlap with full recompute "
                          "(transformer_config.py); search another --recompute or drop --moe-a2a-overlap")
    return space.model_copy(update={"recompute": kept})


def plan(
    model: Any, system: System, num_gpus: int, *, global_batch: int | None = None, gpus_per_node: int | None = None,
    space: SearchSpace | None = None, options: Any = None, evaluator: Evaluator | None = None,
) -> PlanResult:
    """Search every layout of ``model`` on ``num_gpus`` GPUs of ``system`` and rank the feasible ones.

    Without ``options`` every default is the CLI's (:func:`commmodel.step.job.default_options`: the default stack,
    the GPU's dtype, the system's library, and the 4 GB per GPU ``plan`` keeps free); without ``space``, the stack's
    search (:func:`commmodel.planner.space.for_stack`). Options given are used as they are."""
    from commmodel.step.job import checked_model

    model = checked_model(model)
    if options is None:
        from commmodel.step.job import default_options

        options, model = default_options(model, system)
    if space is None:
        from commmodel.step.stacks import get_stack

        space = for_stack(get_stack(options.stack)) if options.stack else SearchSpace()
    start_s = time.perf_counter()  # the search itself: resolving the defaults above (imports, once) is setup
    check_recompute_offload(space.recompute, options.offload_modules)
    check_searched_recompute(options, space.recompute)
    overlap = bool(options.moe_a2a_overlap and getattr(model, "is_moe", False))
    if overlap and options.schedule != "dualpipe":  # Megatron-Core: "disable full recomputation when enabling ..."
        space = _without_full_recompute(space)
    view = Cluster.for_gpus(system, num_gpus, gpus_per_node).system
    if space.max_tp is None:
        space = space.model_copy(update={"max_tp": default_max_tp(view)})
    if global_batch is None:
        global_batch = default_global_batch(model.num_params, model.seq_len, num_gpus, view.gpus_per_node)
    candidates = candidate_grid(
        num_layers=model.num_layers, num_heads=model.num_heads, num_kv_heads=getattr(model, "num_kv_heads", None),
        num_gpus=num_gpus, global_batch=global_batch, gpus_per_node=view.gpus_per_node, space=space,
        seq_len=model.seq_len, num_experts=getattr(model, "num_experts", 1),
        a2a_overlap=overlap, schedule=options.schedule,
    )
    pruned = dict(candidates.pruned)
    headroom_bytes = float(options.memory_headroom_bytes)
    common = dict(model_name=model.name, system_name=view.name, num_gpus=num_gpus, global_batch=global_batch,
                  seq_len=model.seq_len, num_enumerated=candidates.num_enumerated,
                  hbm_bytes=float(view.gpu.hbm_bytes.value) - headroom_bytes,  # the limit the evaluator's fits uses
                  memory_headroom_bytes=headroom_bytes)
    if candidates.num_layouts == 0:
        pruned[REASON_MEMORY] = 0
        return PlanResult(columns={}, num_evaluated=0, pruned=pruned, closest_infeasible=None,
                          search_s=time.perf_counter() - start_s, **common)
    if evaluator is None:
        merged, num_unfit = _memory_first(model, view, num_gpus, _fitting_candidates(model, view, candidates, options),
                                          options)
    else:
        columns = candidates.grid.expand(candidates.alive)
        step = _columns_of(evaluator(model, view, num_gpus, LayoutArrays.from_columns(columns), options))
        merged = {**columns, **{k: v for k, v in step.items() if k not in columns}}
        num_unfit = 0
    fits = np.asarray(merged["fits"], dtype=bool) & np.isfinite(merged["step_time_s"])
    pruned[REASON_MEMORY] = num_unfit + int((~fits).sum())
    closest = None
    if not fits.any():
        i = int(np.argmin(merged["memory_bytes_per_gpu"]))
        closest = decode_layout_fields({k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in merged.items()})
    rows = np.flatnonzero(fits)
    every = rows.size == fits.size  # usually: the step model ran only on layouts that fit
    keys = {k: merged[k] if every else merged[k][rows]
            for k in ("micro_batch", "memory_bytes_per_gpu", "vpp", "recompute", "zero") if k in merged}
    order = rank_order(merged["step_time_s"] if every else merged["step_time_s"][rows], keys)
    rows = order if every else rows[order]
    # every column gathered once (take: numpy's faster gather), already ranked; each unranked column freed as it goes
    ranked = {k: merged.pop(k).take(rows, axis=0) for k in tuple(merged)}
    return PlanResult(columns=ranked, num_evaluated=candidates.num_layouts, pruned=pruned, closest_infeasible=closest,
                      search_s=time.perf_counter() - start_s, **common)


class _Fitting(NamedTuple):
    """The candidates that fit in memory, then the one that needs the least (the fallback), as one table."""

    layouts: LayoutArrays
    """The fitting candidates in enumeration order, then the least-memory candidate (a copy of the columns)."""
    memory: dict[str, np.ndarray]
    """Their memory columns (:func:`commmodel.step.evaluate.memory_columns`), row for row."""
    num_fitting: int
    """Fitting candidates (the rows before the fallback)."""
    num_candidates: int
    """Candidates whose memory was evaluated."""
    names: tuple[str, ...]
    """The candidates' column order."""


def _fitting_candidates(model: Any, view: System, candidates: CandidateGrid, options: Any) -> _Fitting:
    """Memory (:func:`commmodel.step.evaluate.memory_columns`) of every candidate, evaluated once on the factored
    grid (each term on the fields it reads: :meth:`~commmodel.planner.enumerate.LayoutGrid.fields`); the candidates
    that fit, and the one that needs the least memory (the first such in enumeration order, as ``argmin`` over
    the expanded candidates gives), are the only layouts expanded to columns."""
    from commmodel.step.evaluate import memory_columns

    rows = candidates.rows()
    cells = candidates.cells(rows)
    memory = memory_columns(model, view, candidates.grid.fields(rows), options)
    fit = np.flatnonzero(cells & memory["fits"])  # flat cell numbers, in enumeration order
    least = int(np.argmin(np.where(cells, memory["memory_bytes_per_gpu"], np.inf)))
    if not cells.flat[least]:  # no candidate needs less than infinite memory: the first candidate is the least
        least = int(np.flatnonzero(cells)[0])
    at = np.unravel_index(np.append(fit, least), cells.shape)
    columns = candidates.grid.columns_at(rows.take(at[0]), at[1], at[2])
    index: dict[tuple[int, ...], np.ndarray] = {}
    gathered = {}
    for key, value in memory.items():
        value = np.reshape(value, np.broadcast_shapes(np.shape(value), (1, 1, 1)))
        if value.shape not in index:
            index[value.shape] = _cell_index(value.shape, at)
        gathered[key] = value.reshape(-1).take(index[value.shape])
    return _Fitting(layouts=LayoutArrays.from_columns(columns), memory=gathered, num_fitting=int(fit.size),
                    num_candidates=candidates.num_layouts, names=tuple(columns))


def _cell_index(shape: tuple[int, ...], at: tuple[np.ndarray, ...]) -> np.ndarray:
    """Flat positions, in an array of ``shape`` (each axis the grid's or 1: broadcast), of the cells ``at``."""
    index = np.zeros_like(at[0])
    for coordinate, size in zip(at, shape):
        index = index * size + (coordinate if size > 1 else 0)
    return index


def _memory_first(model: Any, view: System, num_gpus: int, fitting: _Fitting,
                  options: Any) -> tuple[dict[str, np.ndarray], int]:
    """(layout + step-model columns of the layouts passed to the step model, how many were not).

    The step model runs only on the candidates that fit (:func:`_fitting_candidates`), in enumeration order,
    with their memory columns passed in (its "fits" is then the same test). When none of them fits with a
    finite step time, the candidate that needs the least memory is evaluated alone instead, so that the
    closest infeasible layout has every column."""
    from commmodel.step.evaluate import evaluate_layouts

    def evaluate(part: slice) -> dict[str, np.ndarray]:
        layouts = fitting.layouts.take(part)
        step = evaluate_layouts(model, view, num_gpus, layouts, options,
                                memory={k: v[part] for k, v in fitting.memory.items()})
        merged = {k: getattr(layouts, k) for k in fitting.names}  # the candidates' column order
        merged.update((k, v) for k, v in step.items() if k not in merged)
        return merged

    count = fitting.num_fitting
    merged = evaluate(slice(0, count)) if count else None
    if merged is None or not (merged["fits"] & np.isfinite(merged["step_time_s"])).any():
        count = 1
        merged = evaluate(slice(-1, None))
    return merged, fitting.num_candidates - count
