"""Pipeline send/recv under Megatron-LM's ``overlap_p2p_comm`` (on by default with interleaving, off without it:
megatron/training/arguments.py @d98e8a6 L1000-1016, L3118): only the fill's and drain's hops stay exposed, (p − 1)
of the step's m·v chunk hops (commmodel.step.terms.pp_p2p_term)."""

import pytest

from commmodel.io.profiles import load_system
from commmodel.step.estimate import evaluate_single
from commmodel.step.layout import Layout
from commmodel.step.stacks import stack_options
from commmodel.workload.presets import get_model

MODEL, GPUS = get_model("llama3-8b"), 64


def _p2p(vpp: int, overlap: bool) -> tuple[float, float]:
    layout = Layout(tp=2, pp=4, dp=8, vpp=vpp, micro_batch=1, global_batch=128, zero=1, sequence_parallel=True)
    row = evaluate_single(MODEL, load_system("dgx-h100"), GPUS, layout,
                          stack_options("megatron-core", pp_p2p_overlap=overlap))
    return row["pp/p2p/link_s"], row["pp/p2p/exposed_s"]


def test_interleaved_hops_hide_but_the_fill_and_drain():
    link, exposed = _p2p(vpp=2, overlap=True)
    m = 128 // (1 * 8)  # micro-batches per replica
    assert link > 0
    assert exposed == pytest.approx(link * (4 - 1) / (m * 2), rel=1e-12)


@pytest.mark.parametrize(("vpp", "overlap"), [(2, False), (1, True)])
def test_without_the_overlap_or_without_interleaving_every_hop_is_exposed(vpp, overlap):
    link, exposed = _p2p(vpp, overlap)
    assert link > 0 and exposed == pytest.approx(link, rel=1e-12)


def test_deepspeed_searches_no_interleaved_schedule():
    """Its pipeline engine runs one 1F1B schedule (deepspeed/runtime/pipe/schedule.py TrainSchedule)."""
    from commmodel.planner import plan

    model = get_model("gpt3-13b")
    result = plan(model, load_system("dgx-a100"), 64, global_batch=512, options=stack_options("deepspeed"))
    assert result.num_feasible > 0 and set(result.columns["vpp"][:result.num_feasible]) == {1}
    megatron = plan(model, load_system("dgx-a100"), 64, global_batch=512)
    assert max(megatron.columns["vpp"][:megatron.num_feasible]) > 1  # the same search interleaves under megatron-core
