"""One question, one answer: the Python API called with no options gives the CLI's numbers (commmodel.step.job).

A notebook that calls ``estimate``, ``plan`` or ``collective_cost`` the way the README shows must get what
``commmodel estimate/plan/collective`` print for the same question: the default stack, the GPU's dtype, the system's
own library, the stack's ZeRO stage and sequence parallelism, the 4 GB ``plan`` keeps free, and NCCL's (the
library's) own choice of algorithm.
"""

import json

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.collectives import collective_cost
from commmodel.errors import CollectiveError, LayoutError, WorkloadError
from commmodel.io.profiles import load_system
from commmodel.planner import SearchSpace, compare, plan
from commmodel.step.estimate import estimate
from commmodel.step.job import with_layout_defaults
from commmodel.step.layout import Layout
from commmodel.step.options import DEFAULT_MEMORY_HEADROOM_BYTES, StepOptions
from commmodel.step.stacks import stack_options
from commmodel.workload.presets import get_model


def _cli_json(*args: str) -> dict:
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def test_estimate_without_options_is_the_cli_estimate():
    layout = Layout(tp=1, pp=1, dp=64, global_batch=128)
    api = estimate(get_model("llama3-8b"), load_system("dgx-h100"), 64, layout)
    cli = _cli_json("estimate", "-m", "llama3-8b", "-n", "64", "-s", "dgx-h100", "--tp", "1", "--pp", "1",
                    "--global-batch", "128")
    assert api.row["step_time_s"] == pytest.approx(cli["step_time_s"], rel=1e-12)
    assert api.options.stack == cli["stack"] == "megatron-core"
    assert api.layout.zero == 1  # the stack's distributed optimizer, as the CLI's layout


def test_plan_without_options_ranks_as_the_cli():
    api = plan(get_model("llama3-70b"), load_system("dgx-h100"), 512, global_batch=1024)
    cli = _cli_json("plan", "-m", "llama3-70b", "-n", "512", "-s", "dgx-h100", "--global-batch", "1024", "--top", "3")
    assert api.memory_headroom_bytes == DEFAULT_MEMORY_HEADROOM_BYTES
    assert [r["step_time_s"] for r in api.records(3)] == pytest.approx(
        [r["step_time_s"] for r in cli["layouts"][:3]], rel=1e-12)
    assert set(api.columns["zero"]) <= {0, 1}  # megatron-core's search: ZeRO 0/1 (distributed optimizer)


def test_compare_without_options_is_each_targets_plan():
    model, system = get_model("llama3-8b"), load_system("dgx-h100")
    one = compare(model, [("h100", system)], 16, global_batch=64).entries[0].result
    assert one.records(1)[0]["step_time_s"] == plan(model, system, 16, global_batch=64).records(1)[0]["step_time_s"]
    with pytest.raises(LayoutError, match="at least one"):
        compare(model, [], 16)


@pytest.mark.parametrize("system_name, library", [("cpu-host", "gloo"), ("amd-mi300x", "rccl"), ("dgx-h100", "nccl")])
def test_collective_cost_prices_the_systems_own_library_as_the_cli(system_name, library):
    cost = collective_cost("all_reduce", 2**20, load_system(system_name), 4)
    cli = _cli_json("collective", "all_reduce", "--size", "1MiB", "--gpus", "4", "--system", system_name)
    assert cli["library"] == library
    assert float(cost.time_s) == pytest.approx(cli["best"]["time_s"], rel=1e-12)
    assert str(cost.algorithm) == cli["best"]["algorithm"]


def test_a_device_library_on_the_other_vendors_gpus_is_refused():
    with pytest.raises(CollectiveError, match="RCCL runs on AMD Instinct GPUs.*use library=nccl"):
        collective_cost("all_reduce", 1e6, load_system("dgx-h100"), 8, library="rccl")
    with pytest.raises(CollectiveError, match="must be a System"):
        collective_cost("all_reduce", 1e6, "dgx-h100", 8)


def test_layout_defaults_fill_only_what_the_layout_does_not_say():
    options = stack_options("megatron-core")
    filled = with_layout_defaults(Layout(tp=8, dp=8, global_batch=64), options)
    assert (filled.zero, filled.sequence_parallel) == (1, True)
    said = with_layout_defaults(Layout(tp=8, dp=8, global_batch=64, zero=0, sequence_parallel=False), options)
    assert (said.zero, said.sequence_parallel) == (0, False)
    one_rank = with_layout_defaults(Layout(tp=1, dp=1, global_batch=8), options)  # nothing to shard or split
    assert (one_rank.zero, one_rank.sequence_parallel) == (0, False)
    bare = Layout(tp=8, dp=8, global_batch=64)
    assert with_layout_defaults(bare, StepOptions()) is bare  # no stack named: the layout as given


def test_a_what_if_edit_of_a_loaded_system_does_not_reach_the_next_load():
    """The models are frozen but hold dicts: a notebook doubling one loaded system's bf16 peak must not change the
    baseline it loads next (before: one shared cached object, the 'reloaded' baseline 5.94 s -> 3.59 s)."""
    edited = load_system("dgx-h100")
    peak = edited.gpu.peak_flops_per_s["bf16"]
    edited.gpu.peak_flops_per_s["bf16"] = peak.model_copy(update={"value": 2 * peak.value})
    assert load_system("dgx-h100").gpu.peak_flops_per_s["bf16"].value == peak.value


@pytest.mark.parametrize(("build", "error", "says"), [
    (lambda: Layout(tp=0), LayoutError, "Layout: tp: Input should be greater than or equal to 1 (got 0)"),
    (lambda: Layout(recompute="selectve"), LayoutError, "Layout: recompute:"),
    (lambda: StepOptions(overlapp=False), WorkloadError, "StepOptions: overlapp: unknown key"),
    (lambda: SearchSpace(zero_stages=(5,)), LayoutError, "SearchSpace: search space zero_stages = (5,)"),
])
def test_bad_inputs_built_by_hand_raise_one_readable_project_error(build, error, says):
    """A notebook's `except CommModelError` catches them, each problem on one line (before: pydantic's multi-line
    ValidationError with a URL)."""
    with pytest.raises(error) as caught:
        build()
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_the_package_names_its_entry_points_and_loads_them_on_first_use():
    """`import commmodel` loads nothing (start-up); its public names resolve to the owning modules' objects."""
    import subprocess
    import sys

    import commmodel
    from commmodel.collectives import collective_cost as owner_cost

    assert commmodel.collective_cost is owner_cost and commmodel.plan is plan and commmodel.Layout is Layout
    assert set(commmodel.__all__) >= {"load_system", "get_model", "estimate", "plan", "compare", "CommModelError"}
    loaded = subprocess.run([sys.executable, "-c", "import sys, commmodel; "
                             "print(sum(m.startswith('commmodel.') for m in sys.modules))"],
                            capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "0"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        commmodel.nope  # noqa: B018


def test_a_preset_tweaked_with_model_copy_is_validated_at_the_entry():
    """pydantic's model_copy(update=...) skips validation: estimate and plan validate the model again, so a
    negative sequence length is a one-line error, not a negative throughput."""
    bad = get_model("llama3-8b").model_copy(update={"seq_len": -5})
    with pytest.raises(WorkloadError, match="model llama3-8b: seq_len: Input should be greater than or equal to 1"):
        estimate(bad, load_system("dgx-h100"), 8, Layout(dp=8, global_batch=8))
    with pytest.raises(WorkloadError, match="seq_len"):
        plan(bad, load_system("dgx-h100"), 8)


def test_a_collective_cost_gives_json_ready_records():
    """One plain dict per element, Python scalars (a 0-d array did not go to JSON), the derived busbw included."""
    import json

    import numpy as np

    cost = collective_cost("all_reduce", 2.0 ** np.arange(20, 23), load_system("dgx-h100"), 8)
    rows = cost.records()
    assert len(rows) == 3 and json.loads(json.dumps(rows)) == rows
    assert rows[0]["num_ranks"] == 8 and isinstance(rows[0]["num_ranks"], int)
    assert [r["busbw_GBps"] for r in rows] == pytest.approx(list(cost.busbw_bytes_per_s / 1e9), rel=1e-12)
    one = collective_cost("all_reduce", 2**30, load_system("dgx-h100"), 8).records()
    assert len(one) == 1 and one[0]["algorithm"] == str(collective_cost("all_reduce", 2**30, load_system("dgx-h100"),
                                                                        8).algorithm)
