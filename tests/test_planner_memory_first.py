"""The planner's memory-first search (memory on every candidate, the step model only on those that fit) against
the oracle of evaluating every candidate with the full step model: same ranked layouts, same numbers in every
column, same pruning counts and the same closest infeasible layout."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.io.profiles import load_system
from commmodel.planner.enumerate import REASON_MEMORY, candidate_grid, candidate_layouts
from commmodel.planner.search import default_global_batch, plan, rank_order
from commmodel.planner.space import SearchSpace
from commmodel.step.evaluate import evaluate_layouts, memory_columns
from commmodel.step.layout import LayoutArrays
from commmodel.step.stacks import get_stack, stack_options
from commmodel.workload.presets import get_model

CASES = (
    ("gpt3-175b", "dgx-a100", 1024, None, None),
    ("mixtral-8x7b", "dgx-h100", 64, None, None),
    ("llama3-70b", "dgx-h100", 256, 65536, None),  # context parallelism searched (≥ 32K tokens)
    ("llama3-8b", "dgx-h100", 64, None, "fsdp2"),
)
"""(model, system, GPUs, sequence length, stack): dense, MoE, cp and a PyTorch stack (ZeRO 2-3, op SAC)."""


def _inputs(name: str, system: str, seq_len: int | None, stack: str | None):
    model = get_model(name)
    if seq_len:
        model = model.model_copy(update={"seq_len": seq_len})
    space = None
    if stack:
        the_stack = get_stack(stack)
        space = SearchSpace(zero_stages=tuple(the_stack.zero_stages), recompute=tuple(the_stack.recompute_policies))
    return model, load_system(system), space, stack_options(stack)


def _assert_same(fast, full) -> None:
    assert fast.num_enumerated == full.num_enumerated and fast.num_evaluated == full.num_evaluated
    assert fast.pruned == full.pruned
    assert fast.closest_infeasible == full.closest_infeasible
    assert list(fast.columns) == list(full.columns)
    for key, column in full.columns.items():
        assert column.dtype == fast.columns[key].dtype, key
        assert np.array_equal(column, fast.columns[key]), key  # bit for bit: same rows, same order


@pytest.mark.parametrize("name,system,num_gpus,seq_len,stack", CASES)
def test_memory_first_search_equals_evaluating_every_candidate(name, system, num_gpus, seq_len, stack):
    model, node, space, options = _inputs(name, system, seq_len, stack)
    fast = plan(model, node, num_gpus, space=space, options=options)
    full = plan(model, node, num_gpus, space=space, options=options, evaluator=evaluate_layouts)
    assert 0 < fast.num_feasible < fast.num_evaluated  # memory pruned some, so the two paths differ in work
    assert fast.pruned[REASON_MEMORY] == fast.num_evaluated - fast.num_feasible
    _assert_same(fast, full)


def test_memory_first_when_nothing_fits_names_the_same_closest_layout():
    model, node = get_model("gpt3-175b"), load_system("dgx-a100")
    fast = plan(model, node, 8)
    full = plan(model, node, 8, evaluator=evaluate_layouts)
    assert fast.num_feasible == 0 and fast.closest_infeasible is not None
    assert fast.closest_infeasible["memory_bytes_per_gpu"] > node.gpu.hbm_bytes.value
    _assert_same(fast, full)


def _space_args(model, node, num_gpus, global_batch, space):
    """The search-space arguments both enumerations take (tp capped at 8)."""
    return dict(num_layers=model.num_layers, num_heads=model.num_heads, num_kv_heads=model.num_kv_heads,
                num_gpus=num_gpus, global_batch=global_batch, gpus_per_node=node.gpus_per_node,
                space=(space or SearchSpace()).model_copy(update={"max_tp": 8}), seq_len=model.seq_len,
                num_experts=model.num_experts)


@pytest.mark.parametrize("name,system,num_gpus,seq_len,stack", CASES)
def test_memory_columns_equal_the_step_models_memory_columns(name, system, num_gpus, seq_len, stack):
    model, node, space, options = _inputs(name, system, seq_len, stack)
    global_batch = default_global_batch(model.num_params, model.seq_len, num_gpus, node.gpus_per_node)
    candidates = candidate_layouts(**_space_args(model, node, num_gpus, global_batch, space))
    arrays = LayoutArrays.from_columns(candidates.columns)
    memory = memory_columns(model, node, arrays, options)
    step = evaluate_layouts(model, node, num_gpus, arrays, options)
    assert set(memory) == {"memory_bytes_per_gpu", "fits", *(k for k in step if k.startswith("memory/"))}
    for key, column in memory.items():
        assert np.array_equal(column, step[key]), key
    assert 0 < memory["fits"].sum() < len(arrays)


@pytest.mark.parametrize("name,system,num_gpus,seq_len,stack", CASES)
def test_memory_on_the_factored_grid_equals_memory_row_by_row(name, system, num_gpus, seq_len, stack):
    # the planner evaluates memory once on the grid's broadcastable fields (outer × free × inner cells);
    # gathered at the candidate cells it is the row-by-row memory of the expanded candidates, bit for bit
    model, node, space, options = _inputs(name, system, seq_len, stack)
    global_batch = default_global_batch(model.num_params, model.seq_len, num_gpus, node.gpus_per_node)
    found = candidate_grid(**_space_args(model, node, num_gpus, global_batch, space))
    rows = found.rows()
    cells = found.cells(rows)
    expanded = found.grid.expand(found.alive)
    assert int(cells.sum()) == found.num_layouts == expanded["tp"].size
    o, f, i = np.nonzero(cells)
    assert all(np.array_equal(column, expanded[k]) for k, column in found.grid.columns_at(rows[o], f, i).items())
    on_grid = memory_columns(model, node, found.grid.fields(rows), options)
    by_row = memory_columns(model, node, LayoutArrays.from_columns(expanded), options)
    assert list(on_grid) == list(by_row)
    for key, column in by_row.items():
        gathered = np.broadcast_to(on_grid[key], cells.shape)[o, f, i]
        assert gathered.dtype == column.dtype and np.array_equal(gathered, column), key


def test_rank_order_equals_a_lexsort_of_every_key():
    # rank_order sorts by step time and orders only tied runs by the remaining keys: the same as one lexsort
    rng = np.random.default_rng(7)
    for trial in range(200):
        size = int(rng.integers(0, 300))
        step_time_s = rng.integers(0, size // 4 + 2, size) * 0.25  # many exact ties
        columns = {k: rng.integers(0, 3, size) for k in ("micro_batch", "vpp", "recompute", "zero")}
        columns["memory_bytes_per_gpu"] = rng.integers(0, 2, size) * 1e9
        expected = np.lexsort([columns["micro_batch"], columns["memory_bytes_per_gpu"], columns["vpp"],
                               columns["recompute"], columns["zero"], step_time_s])
        assert np.array_equal(rank_order(step_time_s, columns), expected), trial
