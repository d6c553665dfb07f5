"""Layouts: one error naming every factor, and the vectorised masks agreeing with it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.errors import LayoutError
from commmodel.step.layout import Layout, LayoutArrays
from commmodel.step.layout_rules import check_layout, layout_divisibility_masks, layout_problems
from commmodel.workload import PRESETS

LLAMA70 = PRESETS["llama3-70b"]  # 80 layers, 64 heads, 8 kv-heads


def test_valid_layout_passes() -> None:
    check_layout(LLAMA70, 64, Layout(tp=8, pp=4, dp=2, micro_batch=1, global_batch=64, vpp=2))


def test_every_factor_named() -> None:
    bad = Layout(tp=3, pp=3, dp=3, micro_batch=4, global_batch=10, vpp=30)
    with pytest.raises(LayoutError) as err:
        check_layout(LLAMA70, 32, bad)
    msg = str(err.value)
    assert "tp 3 × pp 3 × dp 3 = 27 ≠ 32 GPUs" in msg
    assert "pp 3 × vpp 30 = 90 virtual stages exceed layers 80 + 2" in msg
    assert "heads 64 are not divisible by tp 3" in msg
    assert "global batch 10 is not divisible by micro-batch 4 × dp 3 = 12" in msg
    assert "\n" not in msg


def test_interleaving_needs_pipeline_and_whole_rounds() -> None:
    problems = layout_problems(LLAMA70, 16, Layout(tp=8, pp=2, dp=1, global_batch=3, vpp=2))
    assert any("divisible by pp 2" in p for p in problems)
    assert any("vpp 2 needs pipeline" in p for p in layout_problems(LLAMA70, 8, Layout(tp=8, vpp=2, global_batch=4)))


@settings(max_examples=300, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 3, 4, 8, 16]), pp=st.sampled_from([1, 2, 3, 4, 5, 8]), dp=st.integers(1, 8),
    mb=st.integers(1, 4), gb=st.integers(1, 64), vpp=st.integers(1, 3), zero=st.integers(0, 3),
    sp=st.booleans(), gpus=st.sampled_from([16, 32, 64, 96]),
)
def test_masks_agree_with_check(tp, pp, dp, mb, gb, vpp, zero, sp, gpus) -> None:
    layout = Layout(tp=tp, pp=pp, dp=dp, micro_batch=mb, global_batch=gb, vpp=vpp, zero=zero, sequence_parallel=sp)
    masks = layout_divisibility_masks(LLAMA70, gpus, LayoutArrays.from_layouts([layout]))
    any_mask = bool(np.any(np.stack(list(masks.values()))))
    assert any_mask == bool(layout_problems(LLAMA70, gpus, layout))


def test_layout_arrays_round_trip_and_take() -> None:
    layouts = [Layout(tp=t, pp=2, dp=4 // t, global_batch=8, recompute=r, sequence_parallel=t > 1)
               for t, r in ((1, "none"), (2, "selective"), (4, "full"))]
    arrays = LayoutArrays.from_layouts(layouts)
    assert [arrays.layout(i) for i in range(3)] == layouts
    picked = arrays.take(np.array([False, True, True]))
    assert len(picked) == 2 and list(picked.recompute) == [1, 2]
    with pytest.raises(LayoutError, match="one value per layout"):
        LayoutArrays(tp=[1, 2], pp=[1], dp=[1, 1], micro_batch=[1, 1], global_batch=[1, 1], zero=[0, 0],
                     recompute=[0, 0], sequence_parallel=[False, False], vpp=[1, 1])
