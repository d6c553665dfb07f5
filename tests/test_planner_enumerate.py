"""Layout enumeration and divisibility pruning: counts checked by hand, rules, and agreement with the
step model's own divisibility rules (``commmodel.step.layout``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.errors import LayoutError
from commmodel.planner.enumerate import (
    PRUNE_REASONS, REASON_BATCH, REASON_HEADS, REASON_INTERLEAVE, REASON_LAYERS, candidate_layouts, divisors,
    enumerate_layouts, parallel_pairs, tp_candidates,
)
from commmodel.planner.space import SearchSpace

SMALL = SearchSpace(micro_batches=(1, 2), zero_stages=(0, 1), recompute=("none",), sequence_parallel=(False, True),
                    max_vpp=2)


def test_divisors_and_tp_candidates():
    assert divisors(12).tolist() == [1, 2, 3, 4, 6, 12]
    assert divisors(1).tolist() == [1]
    assert divisors(2520).shape[0] == 48  # 2520 = 2^3·3^2·5·7 -> 4·3·2·2 divisors
    assert tp_candidates(1024, 8).tolist() == [1, 2, 4, 8]
    assert tp_candidates(24, 8).tolist() == [1, 2, 4, 8]
    assert tp_candidates(12, 8).tolist() == [1, 2, 4]  # 8 does not divide 12
    assert tp_candidates(6, 4).tolist() == [1, 2]
    assert tp_candidates(64, 8, pinned=(8, 3, 8)).tolist() == [8]  # 3 does not divide 64


def test_parallel_pairs_by_hand():
    # 4 GPUs, tp ≤ 4, pp ≤ 4 layers: (1,1) (1,2) (1,4) (2,1) (2,2) (4,1)
    tp, pp = parallel_pairs(4, 4, 4, SearchSpace())
    assert sorted(zip(tp.tolist(), pp.tolist())) == [(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (4, 1)]
    # 2520 GPUs (Narayanan 530B row): pp = 35 must be a candidate for tp = 8 (2520 = 8·35·9)
    tp, pp = parallel_pairs(2520, 8, 105, SearchSpace())
    assert (8, 35) in set(zip(tp.tolist(), pp.tolist()))
    assert np.all(2520 % (tp * pp) == 0) and np.all(pp <= 105)


def test_enumeration_count_by_hand():
    # Per (tp, pp, dp): micro-batch 2 × zero (2 if dp > 1 else 1) × sp (2 if tp > 1 else 1) × vpp (2 if pp > 1 else 1)
    # (1,1,4): 2·2·1·1 = 4   (1,2,2): 2·2·1·2 = 8   (1,4,1): 2·1·1·2 = 4
    # (2,1,2): 2·2·2·1 = 8   (2,2,1): 2·1·2·2 = 8   (4,1,1): 2·1·2·1 = 4        total 36
    cols = enumerate_layouts(num_layers=4, num_gpus=4, global_batch=4, gpus_per_node=4, space=SMALL)
    assert cols["tp"].shape[0] == 36
    assert np.all(cols["tp"] * cols["pp"] * cols["dp"] == 4)
    assert not np.any(cols["sequence_parallel"] & (cols["tp"] == 1))
    assert not np.any((cols["vpp"] > 1) & (cols["pp"] == 1))
    assert not np.any((cols["zero"] > 0) & (cols["dp"] == 1))
    assert len({tuple(int(cols[k][i]) for k in cols) for i in range(36)}) == 36  # all distinct


def test_pruning_reasons_by_hand():
    # layers 4 % (pp·vpp): only (tp1, pp4, vpp2) breaks it: 2 micro-batches × 1 zero = 2 layouts.
    # global batch 4 % (mb·dp): (tp1 pp1 dp4) with mb 2 -> 8 breaks it: × 2 zero stages = 2.
    # interleaving m % pp: (tp1 pp2 dp2 vpp2) with mb 2 -> m = 1, odd: × 2 zero stages = 2.
    result = candidate_layouts(num_layers=4, num_heads=4, num_kv_heads=4, num_gpus=4, global_batch=4,
                               gpus_per_node=4, space=SMALL)
    assert result.num_enumerated == 36
    # a dense model: the expert rules ("num_experts % ep", "(tp·cp·dp) % (ep·etp)") never prune (ep 1)
    assert result.pruned == {REASON_HEADS: 0, REASON_LAYERS: 2, REASON_BATCH: 2, REASON_INTERLEAVE: 2,
                             **{reason: 0 for reason in PRUNE_REASONS[4:]}}
    assert len(PRUNE_REASONS) == 6
    assert result.num_layouts == 30
    assert list(result.pruned) == list(PRUNE_REASONS)


def test_heads_and_kv_heads_rules():
    space = SearchSpace(micro_batches=(1,), zero_stages=(0,), recompute=("none",), sequence_parallel=(False,), max_vpp=1)
    # 6 heads: tp 4 does not divide -> pruned for heads; tp 1, 2 stay.
    result = candidate_layouts(num_layers=8, num_heads=6, num_kv_heads=6, num_gpus=4, global_batch=8,
                               gpus_per_node=4, space=space)
    assert set(result.columns["tp"].tolist()) == {1, 2}
    assert result.pruned[REASON_HEADS] == 1
    # grouped-query attention: 8 heads, 2 kv-heads; tp 4 replicates kv groups (4 % 2 == 0) and is allowed.
    result = candidate_layouts(num_layers=8, num_heads=8, num_kv_heads=2, num_gpus=4, global_batch=8,
                               gpus_per_node=4, space=space)
    assert set(result.columns["tp"].tolist()) == {1, 2, 4}
    # 6 heads, 3 kv-heads: tp 2 neither divides 3 nor is a multiple of it.
    result = candidate_layouts(num_layers=8, num_heads=6, num_kv_heads=3, num_gpus=2, global_batch=8,
                               gpus_per_node=2, space=space)
    assert set(result.columns["tp"].tolist()) == {1}


def test_pinned_axes_and_max_tp():
    space = SearchSpace(tp=(8,), pp=(8,), micro_batches=(1,), zero_stages=(0,), recompute=("full",), max_vpp=1)
    cols = enumerate_layouts(num_layers=96, num_gpus=1024, global_batch=1536, gpus_per_node=8, space=space)
    assert set(zip(cols["tp"].tolist(), cols["pp"].tolist(), cols["dp"].tolist())) == {(8, 8, 16)}
    cols = enumerate_layouts(num_layers=96, num_gpus=64, global_batch=64, gpus_per_node=8,
                             space=SearchSpace(max_tp=2))
    assert cols["tp"].max() == 2


def test_bad_space_and_inputs_are_clean_errors():
    # pydantic wraps the validator's LayoutError in a ValidationError (a ValueError the CLI boundary maps to exit 1)
    with pytest.raises(ValueError, match="zero_stages"):
        SearchSpace(zero_stages=(4,))
    with pytest.raises(ValueError, match="micro_batches"):
        SearchSpace(micro_batches=())
    with pytest.raises(LayoutError):
        enumerate_layouts(num_layers=4, num_gpus=0, global_batch=4, gpus_per_node=8)


@settings(max_examples=40, deadline=None)
@given(num_gpus=st.sampled_from([1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64]),
       num_layers=st.integers(1, 48), heads=st.sampled_from([1, 2, 4, 6, 8, 12, 16, 32]),
       global_batch=st.integers(1, 256))
def test_survivors_satisfy_every_rule(num_gpus, num_layers, heads, global_batch):
    result = candidate_layouts(num_layers=num_layers, num_heads=heads, num_kv_heads=heads, num_gpus=num_gpus,
                               global_batch=global_batch, gpus_per_node=8)
    c = result.columns
    assert np.all(c["tp"] * c["pp"] * c["dp"] == num_gpus)
    assert np.all(heads % c["tp"] == 0)
    assert np.all(c["pp"] <= num_layers)  # uneven stages are allowed, but not empty ones
    # interleaving: a layer per chunk, except the first and last (embedding only, loss only)
    assert np.all((c["vpp"] == 1) | (c["pp"] * c["vpp"] <= num_layers + 2))
    assert np.all(global_batch % (c["micro_batch"] * c["dp"]) == 0)
    m = global_batch // (c["micro_batch"] * c["dp"])
    assert np.all((c["vpp"] == 1) | (m % c["pp"] == 0))
    assert result.num_enumerated == result.num_layouts + sum(result.pruned.values())


@settings(max_examples=25, deadline=None)
@given(num_gpus=st.sampled_from([2, 4, 8, 16, 24, 32]), num_layers=st.integers(1, 40),
       heads=st.sampled_from([4, 8, 12, 16]), kv_div=st.sampled_from([1, 2, 4]), global_batch=st.integers(1, 128))
def test_pruning_agrees_with_the_step_model_rules(num_gpus, num_layers, heads, kv_div, global_batch):
    """Oracle: a layout survives exactly when the step model's own masks find nothing wrong."""
    layout_mod = pytest.importorskip("commmodel.step.layout_rules")
    from commmodel.workload.model import TransformerModel

    model = TransformerModel(name="t", num_layers=num_layers, hidden_size=64 * heads, num_heads=heads,
                             num_kv_heads=heads // kv_div, vocab_size=1000, seq_len=128)
    cols = enumerate_layouts(num_layers=num_layers, num_gpus=num_gpus, global_batch=global_batch, gpus_per_node=8)
    arrays = layout_mod.LayoutArrays(**cols)
    theirs = np.zeros(len(arrays), dtype=bool)
    for mask in layout_mod.layout_divisibility_masks(model, num_gpus, arrays).values():
        theirs |= mask
    result = candidate_layouts(num_layers=num_layers, num_heads=heads, num_kv_heads=heads // kv_div,
                               num_gpus=num_gpus, global_batch=global_batch, gpus_per_node=8)
    assert result.num_layouts == int((~theirs).sum())


@pytest.mark.parametrize("n", [1, 2, 97, 720720, 2**26, 2**31 - 1, 3 * 2**20 * 7])
def test_divisors_by_factorisation_match_trial_division(n):
    """Oracle: trial division up to √n (pairs d, n/d); 2**26 and the Mersenne prime 2**31 − 1 would need
    GBs as an arange(1, n + 1)."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    expected = sorted(set(small + [n // d for d in small]))
    got = divisors(n)
    assert got.dtype == np.int64 and got.tolist() == expected


def test_divisor_counts_of_highly_composite_numbers():
    assert divisors(720720).size == 240  # 2^4·3^2·5·7·11·13: 5·3·2·2·2·2 divisors
    assert divisors(2**26).size == 27
    assert divisors(2**31 - 1).tolist() == [1, 2**31 - 1]


def test_pinned_accumulation_keeps_only_that_count_and_says_why() -> None:
    from commmodel.planner.enumerate import REASON_ACCUMULATION, candidate_layouts
    from commmodel.planner.space import SearchSpace

    kwargs = dict(num_layers=32, num_heads=32, num_kv_heads=8, num_gpus=64, global_batch=512, gpus_per_node=8)
    free = candidate_layouts(**kwargs)
    pinned = candidate_layouts(**kwargs, space=SearchSpace(accumulation_steps=(4,)))
    c = pinned.columns
    steps = c["global_batch"] // (c["micro_batch"] * c["dp"])
    assert pinned.num_layouts > 0 and set(steps.tolist()) == {4}
    assert pinned.num_layouts + pinned.pruned[REASON_ACCUMULATION] == free.num_layouts
    assert REASON_ACCUMULATION not in free.pruned


def test_powers_of_two_up_to_a_limit():
    from commmodel.planner.enumerate import _powers_of_two

    assert _powers_of_two(1).tolist() == [1]
    assert _powers_of_two(8).tolist() == [1, 2, 4, 8]
    assert _powers_of_two(12).tolist() == [1, 2, 4, 8]
    assert _powers_of_two(64).tolist() == [2**k for k in range(7)]
    assert _powers_of_two(2**24 - 1)[-1] == 2**23 and _powers_of_two(8).dtype == np.int64
