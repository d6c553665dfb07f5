"""Enumerate parallel layouts as numpy columns and prune the ones that cannot run (DESIGN §6).

Everything here is array arithmetic, never a Python loop per layout. The grid is kept factored
(:class:`LayoutGrid`): (tp, pp, cp) pairs × micro-batches as outer rows, the ZeRO/recompute/SP combinations
and the vpp/ep combinations as two small axes. Every pruning rule reads only structural fields, so it is one
boolean expression over the outer × inner rows (each charged for the combinations it stands for), and only
the survivors are expanded to full columns, in the row-major order of the whole product.

Columns and their meaning are the step model's layout schema (:data:`commmodel.step.layout.LAYOUT_SCHEMA`,
recompute coded by ``RECOMPUTE_CODES``); the pruning rules are its rule table
(:data:`commmodel.step.layout_rules.LAYOUT_RULES`), less the ones the enumeration meets by construction.
"""

from typing import NamedTuple

import numpy as np

from commmodel.errors import LayoutError
from commmodel.planner.space import SearchSpace
from commmodel.step.grouping import distinct
from commmodel.step.layout import RECOMPUTE_CODES, LayoutArrays
from commmodel.step.layout_rules import A2A_OVERLAP_REASON, LAYOUT_RULES, LayoutLimits, a2a_overlap_bad

PRUNING_RULES = tuple(rule for rule in LAYOUT_RULES if not rule.enumerated)
"""The layout rules the enumeration can break, in the order they are charged."""
_RULE = {rule.key: rule.reason for rule in LAYOUT_RULES}
_CP_RULE = next(rule for rule in LAYOUT_RULES if rule.key == "cp")
REASON_HEADS, REASON_LAYERS = _RULE["heads"], _RULE["layers"]
REASON_BATCH, REASON_INTERLEAVE = _RULE["batch"], _RULE["interleave_batch"]
REASON_MEMORY = "memory"
PRUNE_REASONS: tuple[str, ...] = tuple(rule.reason for rule in PRUNING_RULES)
"""Divisibility reasons in the order they are charged: a layout is counted under the first it breaks."""


class Candidates(NamedTuple):
    """Layouts that survived divisibility pruning, plus what was enumerated and why the rest went."""

    columns: dict[str, np.ndarray]
    """Equal-length layout columns (the schema's fields) of the surviving layouts."""
    num_enumerated: int
    """Distinct layouts enumerated (sequence parallel only with tp > 1, vpp > 1 only with pp > 1,
    ZeRO > 0 only with dp > 1)."""
    pruned: dict[str, int]
    """Reason -> layouts removed for it (each counted under the first rule it breaks)."""

    @property
    def num_layouts(self) -> int:
        """Layouts left to evaluate."""
        return int(self.columns["tp"].shape[0])


def divisors(n: int) -> np.ndarray:
    """Every divisor of ``n`` in increasing order, from its prime factorisation (trial division up to
    √n: a few thousand steps even for n = 2**40, and no array of n candidates). Python integers: a search
    has at most a few thousand divisors, fewer than numpy's per-call costs would repay."""
    if n < 1:
        raise LayoutError(f"divisors of {n}: give a whole number ≥ 1")
    found = [1]
    rest, p = int(n), 2
    while p * p <= rest:
        power = 0
        while rest % p == 0:
            rest //= p
            power += 1
        if power:
            found = [d * p**k for d in found for k in range(power + 1)]
        p += 1 if p == 2 else 2
    if rest > 1:
        found += [d * rest for d in found]
    return np.array(sorted(found), dtype=np.int64)


def _powers_of_two(limit: int) -> np.ndarray:
    """1, 2, 4, … up to ``limit`` (int64; just 1 below 2), from Python integers: the same values as
    ``2 ** arange(floor(log2(limit)) + 1)`` without the first-call costs of numpy's log2 and integer power."""
    return np.array([1 << k for k in range(max(int(limit), 1).bit_length())], dtype=np.int64)


def tp_candidates(num_gpus: int, max_tp: int, pinned: tuple[int, ...] | None = None) -> np.ndarray:
    """Tensor-parallel degrees: powers of two ≤ ``max_tp`` that divide the GPUs (or the pinned ones)."""
    if pinned is not None:
        values = distinct(np.asarray(pinned, dtype=np.int64))
    else:
        values = _powers_of_two(max_tp)
    return values[num_gpus % values == 0]


def parallel_pairs(num_gpus: int, max_tp: int, max_pp: int, space: SearchSpace) -> tuple[np.ndarray, np.ndarray]:
    """All (tp, pp) with tp·pp dividing the GPU count, tp from :func:`tp_candidates`, pp ≤ ``max_pp``."""
    for axis, pinned in (("tp", space.tp), ("pp", space.pp)):
        bad = [int(v) for v in (pinned or ()) if num_gpus % int(v)]
        if bad:
            raise LayoutError(
                f"--{axis} {', '.join(map(str, bad))} does not divide {num_gpus} GPUs (tp × pp × dp must equal the "
                f"GPUs); pick {axis} from {', '.join(str(d) for d in divisors(num_gpus)[:12])}"
            )
    tp_values = tp_candidates(num_gpus, max_tp, space.tp)
    pp_values = np.asarray(space.pp, dtype=np.int64) if space.pp is not None else divisors(num_gpus)
    pp_values = distinct(pp_values[pp_values <= max_pp])
    tp_index, pp_index = np.nonzero(num_gpus % (tp_values[:, None] * pp_values) == 0)  # tp-major, as a meshgrid
    if space.tp is not None and space.pp is not None and not tp_index.size:  # "--tp 8 --pp 8" on 8 GPUs
        pins = f"{', '.join(map(str, space.tp))} × {', '.join(map(str, space.pp))}"
        raise LayoutError(f"no --tp × --pp ({pins}) divides {num_gpus} GPUs (tp × pp × dp must equal the GPUs); "
                          f"pin a smaller one or use more GPUs")
    return tp_values[tp_index], pp_values[pp_index]


def cp_candidates(num_gpus: int, seq_len: int | None, space: SearchSpace) -> np.ndarray:
    """Context-parallel degrees: the pinned ones, else 1 below ``space.cp_min_seq_len`` tokens, else powers
    of two ≤ ``space.max_cp`` dividing the GPUs with seq_len % (2·cp) = 0 (Megatron's load-balanced chunks)."""
    if space.cp is not None:
        values = distinct(np.asarray(space.cp, dtype=np.int64))
        bad = [int(v) for v in values if num_gpus % int(v) or (seq_len is not None and seq_len % (2 * int(v)) and v > 1)]
        if bad:
            good = [c for c in divisors(num_gpus) if c == 1 or seq_len is None or seq_len % (2 * c) == 0]
            raise LayoutError(f"--cp {', '.join(map(str, bad))} must divide {num_gpus} GPUs and leave 2·cp equal chunks "
                              f"of the {seq_len}-token sequence; pick cp from {', '.join(map(str, good[:12]))}")
        return values
    if seq_len is None or seq_len < space.cp_min_seq_len:
        return np.ones(1, dtype=np.int64)
    values = _powers_of_two(space.max_cp)
    return values[(num_gpus % values == 0) & ~_CP_RULE.broken(LayoutLimits(1, 1, None, seq_len), num_gpus, {"cp": values})]


def ep_candidates(num_experts: int, space: SearchSpace) -> np.ndarray:
    """Expert-parallel degrees: 1 for a dense model; the pinned ones (each must divide the experts), else
    powers of two ≤ ``space.max_ep`` dividing the experts. Whether ep·etp divides tp·cp·dp is the
    schema's "ep_fold" rule, charged when pruning."""
    if space.ep is not None:
        values = np.unique(np.asarray(space.ep, dtype=np.int64))
        bad = [int(v) for v in values if v > 1 and (num_experts <= 1 or num_experts % int(v))]
        if bad and num_experts <= 1:
            raise LayoutError(f"--ep {', '.join(map(str, bad))}: the model is dense (no experts), so ep is 1; drop --ep")
        if bad:
            raise LayoutError(f"--ep {', '.join(map(str, bad))} must divide the model's {num_experts} experts")
        return values
    if num_experts <= 1:
        return np.ones(1, dtype=np.int64)
    values = _powers_of_two(space.max_ep)
    return values[num_experts % values == 0]


def _recompute_policies(space: SearchSpace, num_experts: int) -> tuple[str, ...]:
    """The space's recompute policies for this model: "moe" (MoE-layer checkpointing) is dropped on a dense
    model, and an error when it is the only one asked for."""
    if num_experts > 1 or "moe" not in space.recompute:
        return space.recompute
    rest = tuple(r for r in space.recompute if r != "moe")
    if not rest:
        raise LayoutError("recompute moe checkpoints the MoE layers, and the model is dense; "
                          "use --recompute none, selective, full or op")
    return rest


class LayoutGrid(NamedTuple):
    """The layout grid in factored form: layout (o, f, i) is outer row o, free combination f and inner
    combination i, in the row-major order of the product (tp, pp, cp) pair × micro-batch × ZeRO × recompute ×
    SP × vpp × ep that :func:`enumerate_layouts` returns. The divisibility rules read only outer and inner
    fields, so they are evaluated on the O × I structural rows, not on the O × F × I product."""

    outer: dict[str, np.ndarray]
    """tp, pp, cp, dp, micro_batch of each outer row (pair-major, micro-batch minor)."""
    free: dict[str, np.ndarray]
    """zero, recompute, sequence_parallel of each free combination (ZeRO-major)."""
    inner: dict[str, np.ndarray]
    """vpp, ep of each inner combination (vpp-major)."""
    free_keep: np.ndarray
    """[O, F]: False where the combination is a no-op repeat (SP at tp = 1, ZeRO > 0 at dp·cp = 1, ZeRO 0 at
    dp·cp > 1 when the space did not ask for it)."""
    inner_keep: np.ndarray
    """[O, I]: False where vpp > 1 at pp = 1 (a no-op repeat)."""
    global_batch: int
    """Sequences per step (one value for the whole grid)."""

    @property
    def num_enumerated(self) -> int:
        """Layouts of the product that are not no-op repeats."""
        return int(self.free_keep.sum(axis=1) @ self.inner_keep.sum(axis=1))

    def structural(self) -> dict[str, np.ndarray]:
        """The O × I structural rows (outer-major) as layout columns, without the free fields."""
        size_o, size_i = self.inner_keep.shape
        out = {k: np.repeat(v, size_i) for k, v in self.outer.items()}
        out.update({k: np.tile(v, size_o) for k, v in self.inner.items()})
        out["global_batch"] = np.full(size_o * size_i, self.global_batch, dtype=np.int64)
        out["etp"] = np.ones(size_o * size_i, dtype=np.int64)
        return out

    def expand(self, alive: np.ndarray) -> dict[str, np.ndarray]:
        """Layout columns of every (o, f, i) with ``alive[o, i]`` and ``free_keep[o, f]``, in product order."""
        rows = np.flatnonzero(alive.any(axis=1) & self.free_keep.any(axis=1))
        o, f, i = np.nonzero(self.free_keep[rows, :, None] & alive[rows, None, :])
        return self.columns_at(rows[o], f, i)

    def fields(self, rows: np.ndarray) -> "GridFields":
        """The layout fields of the cells (``rows`` × free × inner) as broadcastable arrays: outer fields
        [R, 1, 1], free [1, F, 1], inner [1, 1, I] (a per-layout formula on them gives each cell's value)."""
        scalar = np.ones((1, 1, 1), dtype=np.int64)
        return GridFields(**{k: v[rows, None, None] for k, v in self.outer.items()},
                          **{k: v[None, :, None] for k, v in self.free.items()},
                          **{k: v[None, None, :] for k, v in self.inner.items()},
                          global_batch=scalar * self.global_batch, etp=scalar)

    def columns_at(self, o: np.ndarray, f: np.ndarray, i: np.ndarray) -> dict[str, np.ndarray]:
        """Layout columns of the cells (outer row ``o``, free combination ``f``, inner combination ``i``)."""
        columns = {k: self.outer[k].take(o) for k in ("tp", "pp", "dp")}  # take: numpy's faster gather
        columns["micro_batch"] = self.outer["micro_batch"].take(o)
        columns["global_batch"] = np.full(o.shape, self.global_batch, dtype=np.int64)
        columns.update({k: self.free[k].take(f) for k in ("zero", "recompute", "sequence_parallel")})
        columns["vpp"] = self.inner["vpp"].take(i)
        columns["cp"] = self.outer["cp"].take(o)
        columns["ep"] = self.inner["ep"].take(i)
        columns["etp"] = np.ones(o.shape, dtype=np.int64)
        return columns


class GridFields(NamedTuple):
    """The layout fields of a block of grid cells as mutually broadcastable arrays (:meth:`LayoutGrid.fields`):
    what a per-layout formula that reads :class:`~commmodel.step.layout.LayoutArrays` attributes also accepts, so
    that it runs once on the factored grid instead of on every expanded layout."""

    tp: np.ndarray
    """Tensor-parallel degrees, [R, 1, 1]."""
    pp: np.ndarray
    """Pipeline-parallel degrees, [R, 1, 1]."""
    cp: np.ndarray
    """Context-parallel degrees, [R, 1, 1]."""
    dp: np.ndarray
    """Data-parallel degrees, [R, 1, 1]."""
    micro_batch: np.ndarray
    """Sequences per micro-batch, [R, 1, 1]."""
    zero: np.ndarray
    """ZeRO stages, [1, F, 1]."""
    recompute: np.ndarray
    """Recompute codes, [1, F, 1]."""
    sequence_parallel: np.ndarray
    """Sequence parallelism, [1, F, 1]."""
    vpp: np.ndarray
    """Virtual pipeline stages, [1, 1, I]."""
    ep: np.ndarray
    """Expert-parallel degrees, [1, 1, I]."""
    global_batch: np.ndarray
    """Sequences per step, [1, 1, 1]."""
    etp: np.ndarray
    """Expert tensor-parallel degrees (1), [1, 1, 1]."""

    num_micro_batches = property(LayoutArrays.num_micro_batches.fget)
    """Micro-batches per step per replica: the same property as :class:`~commmodel.step.layout.LayoutArrays`'."""


def _product(*axes: np.ndarray) -> list[np.ndarray]:
    """Columns of the row-major Cartesian product of ``axes`` (``np.meshgrid(*axes, indexing="ij")`` raveled)."""
    index = np.indices([axis.size for axis in axes]).reshape(len(axes), -1)
    return [axis[i] for axis, i in zip(axes, index)]


def layout_grid(
    *, num_layers: int, num_gpus: int, global_batch: int, gpus_per_node: int, space: SearchSpace = SearchSpace(),
    seq_len: int | None = None, num_experts: int = 1,
) -> LayoutGrid:
    """The factored layout grid (:class:`LayoutGrid`) with its no-op masks: sequence_parallel=True at
    tp = 1, vpp > 1 at pp = 1, and ZeRO > 0 at dp·cp = 1 (nothing to shard over: such layouts run as ZeRO 0
    even when the space asks only for stages ≥ 1, e.g. fsdp2's 2-3)."""
    if num_gpus < 1 or global_batch < 1:
        raise LayoutError(f"GPUs {num_gpus} and global batch {global_batch} must both be ≥ 1")
    max_tp = space.max_tp or gpus_per_node
    max_pp = space.max_pp or num_layers
    tp_pairs, pp_pairs = parallel_pairs(num_gpus, max_tp, max_pp, space)
    cp_values = cp_candidates(num_gpus, seq_len, space)
    tp_cp = np.repeat(tp_pairs, cp_values.size)
    pp_cp = np.repeat(pp_pairs, cp_values.size)
    cp_cp = np.tile(cp_values, tp_pairs.size)
    fits = num_gpus % (tp_cp * cp_cp * pp_cp) == 0
    micro = distinct(np.asarray(space.micro_batches, dtype=np.int64))
    tp, pp, cp = (np.repeat(values[fits], micro.size) for values in (tp_cp, pp_cp, cp_cp))
    dp = num_gpus // (tp * cp * pp)
    outer = {"tp": tp, "pp": pp, "cp": cp, "dp": dp, "micro_batch": np.tile(micro, int(fits.sum()))}
    zero, recompute, sequence_parallel = _product(
        distinct(np.asarray((0, *space.zero_stages), dtype=np.int64)),
        distinct(np.asarray([RECOMPUTE_CODES[r] for r in _recompute_policies(space, num_experts)], dtype=np.int64)),
        distinct(np.asarray(space.sequence_parallel, dtype=bool)))
    vpp, ep = _product(np.arange(1, space.max_vpp + 1, dtype=np.int64), ep_candidates(num_experts, space))
    # ZeRO over one rank is no ZeRO: dp·cp = 1 layouts run as stage 0 whatever stages were asked for
    alone = (dp * cp == 1)[:, None]
    free_noop = ((sequence_parallel & (tp == 1)[:, None]) | ((zero > 0) & alone)
                 | ((zero == 0) & ~alone & (0 not in space.zero_stages)))
    return LayoutGrid(outer=outer, free={"zero": zero, "recompute": recompute,
                                         "sequence_parallel": sequence_parallel.astype(bool)},
                      inner={"vpp": vpp, "ep": ep}, free_keep=~free_noop, inner_keep=~((vpp > 1) & (pp == 1)[:, None]),
                      global_batch=global_batch)


def enumerate_layouts(
    *, num_layers: int, num_gpus: int, global_batch: int, gpus_per_node: int, space: SearchSpace = SearchSpace(),
    seq_len: int | None = None, num_experts: int = 1,
) -> dict[str, np.ndarray]:
    """The full layout grid as columns, without the no-op combinations (:func:`layout_grid`).

    Product of (tp, pp) pairs × micro_batch × zero × recompute × sequence_parallel × vpp × ep, in that
    row-major order, then dropping the no-ops that repeat another layout: sequence_parallel=True at
    tp = 1, vpp > 1 at pp = 1, and ZeRO > 0 at dp·cp = 1.
    """
    grid = layout_grid(num_layers=num_layers, num_gpus=num_gpus, global_batch=global_batch,
                       gpus_per_node=gpus_per_node, space=space, seq_len=seq_len, num_experts=num_experts)
    return grid.expand(grid.inner_keep)


REASON_ACCUMULATION = "accumulation steps ≠ pinned"
"""Pruning label of layouts whose micro-batches per step differ from ``SearchSpace.accumulation_steps``."""


def pruning_masks(columns: dict[str, np.ndarray], num_gpus: int, limits: LayoutLimits,
                  require_microbatches_divisible_by_pp: bool = True) -> dict[str, np.ndarray]:
    """Reason -> boolean mask of the layouts that break that rule (True = cannot run): the step model's
    :data:`~commmodel.step.layout_rules.LAYOUT_RULES` the enumeration can break; the interleaving rule only
    when ``require_microbatches_divisible_by_pp``."""
    out = {}
    for rule in PRUNING_RULES:
        if rule.key == "interleave_batch" and not require_microbatches_divisible_by_pp:
            out[rule.reason] = np.zeros(columns["tp"].shape, dtype=bool)
        else:
            out[rule.reason] = rule.broken(limits, num_gpus, columns)
    return out


def charge_first_reason(masks: dict[str, np.ndarray], weights: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """(keep mask, reason -> count) charging each rejected row to the first rule it breaks; row r stands for
    ``weights[r]`` layouts (0: a row that is not enumerated, never kept nor counted)."""
    alive = weights > 0
    counts: dict[str, int] = {}
    for reason, bad in masks.items():
        hit = alive & bad
        counts[reason] = int(weights[hit].sum())
        alive &= ~bad
    return alive, counts


class CandidateGrid(NamedTuple):
    """The layouts that survive divisibility pruning, still factored: cell (o, f, i) of :attr:`grid` is a
    candidate where ``alive[o, i]`` and ``grid.free_keep[o, f]`` (:meth:`LayoutGrid.expand` lists them)."""

    grid: LayoutGrid
    """The enumerated grid."""
    alive: np.ndarray
    """[O, I]: structural rows that break no divisibility rule."""
    num_enumerated: int
    """Distinct layouts enumerated (see :class:`Candidates`)."""
    pruned: dict[str, int]
    """Reason -> layouts removed for it (each counted under the first rule it breaks)."""
    num_layouts: int
    """Candidate layouts (the cells :meth:`LayoutGrid.expand` would list)."""

    def rows(self) -> np.ndarray:
        """Outer rows holding at least one candidate."""
        return np.flatnonzero(self.alive.any(axis=1) & self.grid.free_keep.any(axis=1))

    def cells(self, rows: np.ndarray) -> np.ndarray:
        """[R, F, I]: which cells of ``rows`` are candidates."""
        return self.grid.free_keep[rows, :, None] & self.alive[rows, None, :]


def candidate_grid(
    *, num_layers: int, num_heads: int, num_kv_heads: int | None, num_gpus: int, global_batch: int,
    gpus_per_node: int, space: SearchSpace = SearchSpace(), seq_len: int | None = None, num_experts: int = 1,
    a2a_overlap: bool = False, schedule: str = "1f1b",
) -> CandidateGrid:
    """Enumerate, then find every layout that breaks a divisibility rule (counted by reason), without expanding.

    The rules read only the structural fields (tp, pp, cp, dp, micro-batch, vpp, ep, etp, global batch), so
    they are evaluated once per structural row of the :class:`LayoutGrid`, each row charged for the
    ZeRO/recompute/SP combinations it stands for. ``a2a_overlap`` (a MoE model under ``--moe-a2a-overlap``) also
    prunes the structures Megatron-Core refuses to overlap (:func:`~commmodel.step.layout_rules.a2a_overlap_bad`)."""
    grid = layout_grid(num_layers=num_layers, num_gpus=num_gpus, global_batch=global_batch,
                       gpus_per_node=gpus_per_node, space=space, seq_len=seq_len, num_experts=num_experts)
    columns = grid.structural()
    masks = pruning_masks(columns, num_gpus, LayoutLimits(num_layers, num_heads, num_kv_heads, seq_len, num_experts),
                          space.require_microbatches_divisible_by_pp)
    if a2a_overlap:
        masks[A2A_OVERLAP_REASON] = a2a_overlap_bad(columns, schedule)
    if space.accumulation_steps is not None:
        steps = columns["global_batch"] // np.maximum(columns["micro_batch"] * columns["dp"], 1)
        masks[REASON_ACCUMULATION] = ~(steps[:, None] == np.asarray(space.accumulation_steps, dtype=np.int64)).any(axis=1)
    weights = np.repeat(grid.free_keep.sum(axis=1), grid.inner_keep.shape[1]) * grid.inner_keep.ravel()
    keep, pruned = charge_first_reason(masks, weights)
    return CandidateGrid(grid=grid, alive=keep.reshape(grid.inner_keep.shape), num_enumerated=grid.num_enumerated,
                         pruned=pruned, num_layouts=int(weights[keep].sum()))


def candidate_layouts(
    *, num_layers: int, num_heads: int, num_kv_heads: int | None, num_gpus: int, global_batch: int,
    gpus_per_node: int, space: SearchSpace = SearchSpace(), seq_len: int | None = None, num_experts: int = 1,
) -> Candidates:
    """Enumerate, then drop every layout that breaks a divisibility rule (counted by reason):
    :func:`candidate_grid`, and only the survivors expanded to full columns."""
    found = candidate_grid(num_layers=num_layers, num_heads=num_heads, num_kv_heads=num_kv_heads, num_gpus=num_gpus,
                           global_batch=global_batch, gpus_per_node=gpus_per_node, space=space, seq_len=seq_len,
                           num_experts=num_experts)
    return Candidates(columns=found.grid.expand(found.alive), num_enumerated=found.num_enumerated,
                      pruned=found.pruned)
