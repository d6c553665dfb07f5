"""The CLI surface (DESIGN §8) is a contract: commands, flags, exit codes, JSON on stdout alone.

Three tables keep it:

* ``TOP_LEVEL``: every top-level command that may exist (DESIGN §8's list). A command outside it
  fails the suite until it is added here (one line).
* ``FROZEN``: the exact option names of each leaf command once it has settled. A listed command
  that exists must keep exactly those options (renaming a flag breaks the freeze on purpose);
  listed commands that do not exist yet are skipped. To freeze new commands, run
  ``python tests/test_cli_surface.py`` and paste the lines it prints.
* ``DESIGN_FLAGS``: DESIGN §8 as written: every flag it names for a command must be there as
  soon as that command exists.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

import commmodel
from commmodel.cli.app import app

runner = CliRunner()

TOP_LEVEL = {"profiles", "collective", "sweep", "estimate", "plan", "compare", "query", "calibrate", "validate",
             "plot", "diagnose"}

# Option names (long forms, without --help) of each settled leaf command.
FROZEN: dict[str, set[str]] = {
    "calibrate compute": {"--device", "--dtype", "--ffn", "--hidden", "--iters", "--json", "--micro-batch", "--out", "--resume", "--seq-len", "--tp", "--warmup"},
    "calibrate fit": {"--base", "--compute", "--json", "--max-segments", "--name", "--ops", "--out"},
    "calibrate import": {"--algo", "--append", "--in-place", "--json", "--nodes", "--op", "--out", "--proto", "--ranks", "--system"},
    "calibrate run": {"--algo", "--backend", "--dtype", "--factor", "--groups", "--iters", "--json", "--max-size", "--min-size", "--ops", "--out", "--proto", "--quiet", "--resume", "--system", "--timeout", "--warmup"},
    "collective": {"--algo", "--gpus", "--gpus-per-node", "--json", "--library", "--network", "--selection", "--size", "--system"},
    "compare": {"--activation-fp8-input-store", "--memory-headroom", "--attention-kernel", "--cross-entropy", "--attention-flops", "--recompute-layers", "--dropout", "--fp8-param-gather", "--no-fp8-param-gather", "--moe-dispatcher", "--moe-a2a-overlap", "--moe-imbalance", "--no-moe-a2a-overlap", "--offload-modules", "--recompute-modules", "--precision-aware-optimizer", "--bucket-size", "--grad-reduce-dtype", "--overlap", "--no-overlap", "--elementwise", "--dtype", "--flash-attention", "--flash-attention-rate", "--no-flash-attention-rate", "--global-batch", "--gpus", "--gpus-per-node", "--json", "--library", "--model", "--network", "--no-flash-attention", "--no-tp-comm-overlap", "--quiet", "--seq-len", "--stack", "--system", "--tp-comm-overlap", "--pp-p2p-overlap", "--no-pp-p2p-overlap", "--cp-comm-overlap", "--no-cp-comm-overlap", "--tp-overlap-kind"},
    "diagnose": {"--activation-fp8-input-store", "--attention-flops", "--attention-kernel", "--bucket-size", "--cp", "--cp-comm-overlap", "--cross-entropy", "--dropout", "--dtype", "--elementwise", "--ep", "--etp", "--flash-attention", "--flash-attention-rate", "--fp8-param-gather", "--global-batch", "--gpus-per-node", "--grad-reduce-dtype", "--json", "--memory-headroom", "--micro-batch", "--model", "--moe-a2a-overlap", "--moe-dispatcher", "--moe-imbalance", "--network", "--no-cp-comm-overlap", "--no-flash-attention", "--no-flash-attention-rate", "--no-fp8-param-gather", "--no-moe-a2a-overlap", "--no-overlap", "--no-pp-p2p-overlap", "--no-tp-comm-overlap", "--offload-modules", "--overlap", "--pp", "--pp-p2p-overlap", "--precision-aware-optimizer", "--quiet", "--recompute-layers", "--recompute-modules", "--seq-len", "--stack", "--system", "--threshold", "--tp", "--tp-comm-overlap", "--tp-overlap-kind"},
    "estimate": {"--activation-fp8-input-store", "--memory-headroom", "--attention-kernel", "--cross-entropy", "--attention-flops", "--recompute-layers", "--dropout", "--fp8-param-gather", "--no-fp8-param-gather", "--moe-dispatcher", "--moe-a2a-overlap", "--no-moe-a2a-overlap", "--offload-modules", "--recompute-modules", "--precision-aware-optimizer", "--elementwise", "--async", "--bucket-size", "--compression", "--cp", "--dp-mode", "--dtype", "--emit", "--ep", "--etp", "--ffn-hidden", "--flash-attention", "--flash-attention-rate", "--no-flash-attention-rate", "--global-batch", "--gpus", "--gpus-per-node", "--grad-reduce-dtype", "--heads", "--hidden", "--json", "--kv-heads", "--layers", "--library", "--micro-batch", "--moe-imbalance", "--model", "--network", "--no-flash-attention", "--no-overlap", "--no-sequence-parallel", "--no-tp-comm-overlap", "--overlap", "--pp", "--recompute", "--schedule", "--seq-len", "--sequence-parallel", "--stack", "--straggler-cv", "--system", "--topk-fraction", "--tp", "--tp-comm-overlap", "--pp-p2p-overlap", "--no-pp-p2p-overlap", "--cp-comm-overlap", "--no-cp-comm-overlap", "--tp-overlap-kind", "--vocab", "--vpp", "--zero"},
    "plan": {"--activation-fp8-input-store", "--attention-kernel", "--cross-entropy", "--attention-flops", "--recompute-layers", "--dropout", "--fp8-param-gather", "--no-fp8-param-gather", "--moe-dispatcher", "--moe-a2a-overlap", "--moe-imbalance", "--no-moe-a2a-overlap", "--offload-modules", "--recompute-modules", "--precision-aware-optimizer", "--bucket-size", "--grad-reduce-dtype", "--overlap", "--no-overlap", "--elementwise", "--cp", "--csv", "--dtype", "--emit", "--ep", "--flash-attention", "--flash-attention-rate", "--no-flash-attention-rate", "--global-batch", "--gpus", "--gpus-per-node", "--json", "--library", "--max-tp", "--memory-headroom", "--micro-batch", "--model", "--network", "--no-flash-attention", "--no-tp-comm-overlap", "--pp", "--quiet", "--recompute", "--seq-len", "--stack", "--system", "--top", "--tp", "--tp-comm-overlap", "--pp-p2p-overlap", "--no-pp-p2p-overlap", "--cp-comm-overlap", "--no-cp-comm-overlap", "--tp-overlap-kind", "--zero"},
    "plot breakdown": {"--dpi", "--global-batch", "--gpus", "--gpus-per-node", "--json", "--model", "--network", "--out", "--seq-len", "--stack", "--system", "--top", "--dtype", "--library"},
    "plot calibration": {"--base", "--dpi", "--json", "--op", "--out", "--ranks"},
    "plot collective": {"--algo", "--dpi", "--factor", "--gpus", "--gpus-per-node", "--json", "--library", "--selection", "--max-size", "--measured", "--min-size", "--network", "--out", "--setup", "--system"},
    "plot scaling": {"--dpi", "--global-batch", "--json", "--max-gpus", "--metric", "--min-gpus", "--model", "--out", "--size", "--stack", "--system"},
    "plot timeline": {"--activation-fp8-input-store", "--attention-flops", "--attention-kernel", "--bucket-size", "--compression", "--cp", "--cp-comm-overlap", "--cross-entropy", "--dpi", "--dropout", "--dtype", "--elementwise", "--ep", "--etp", "--flash-attention", "--flash-attention-rate", "--fp8-param-gather", "--global-batch", "--gpus", "--gpus-per-node", "--grad-reduce-dtype", "--json", "--library", "--memory-headroom", "--micro-batch", "--model", "--moe-a2a-overlap", "--moe-dispatcher", "--moe-imbalance", "--network", "--no-cp-comm-overlap", "--no-flash-attention", "--no-flash-attention-rate", "--no-fp8-param-gather", "--no-moe-a2a-overlap", "--no-overlap", "--no-pp-p2p-overlap", "--no-sequence-parallel", "--no-tp-comm-overlap", "--offload-modules", "--out", "--overlap", "--pp", "--pp-p2p-overlap", "--precision-aware-optimizer", "--recompute", "--recompute-layers", "--recompute-modules", "--seq-len", "--sequence-parallel", "--stack", "--system", "--tp", "--tp-comm-overlap", "--tp-overlap-kind", "--zero"},
    "plot whatif": {"--dpi", "--dtype", "--global-batch", "--gpus", "--json", "--library", "--model", "--network", "--out", "--seq-len", "--stack", "--system"},
    "profiles from-nccl": {"--json", "--name", "--out"},
    "profiles gpus": {"--json"},
    "profiles links": {"--json"},
    "profiles list": {"--json"},
    "profiles schema": set(),
    "profiles show": {"--json"},
    "profiles validate": {"--json"},
    "query": {"--dtype", "--global-batch", "--gpus", "--gpus-per-node", "--json", "--model", "--network", "--seq-len", "--stack", "--system", "--top"},
    "sweep": {"--algo", "--csv", "--factor", "--gpus", "--gpus-per-node", "--json", "--max-size", "--library", "--min-size", "--network", "--quiet", "--selection", "--system"},
    "validate": {"--json"},
}

_NET = {"--network"}  # DESIGN §8: --network on collective, sweep, estimate, plan, compare
DESIGN_FLAGS: dict[str, set[str]] = {
    "profiles list": {"--json"},
    "profiles show": {"--json"},
    "profiles validate": set(),
    "profiles schema": set(),
    "collective": {"--size", "--gpus", "--system", "--gpus-per-node", "--algo", "--json"} | _NET,
    "sweep": {"--gpus", "--system", "--gpus-per-node", "--min-size", "--max-size", "--factor", "--algo",
              "--json", "--csv"} | _NET,
    "estimate": {"--model", "--gpus", "--system", "--tp", "--pp", "--micro-batch", "--global-batch", "--seq-len",
                 "--layers", "--hidden", "--heads", "--vocab", "--zero", "--recompute", "--sequence-parallel",
                 "--vpp", "--json"} | _NET,
    "plan": {"--model", "--gpus", "--system", "--global-batch", "--seq-len", "--top", "--json", "--csv"} | _NET,
    "compare": {"--model", "--gpus", "--system", "--json"} | _NET,
    "query": {"--json"},
    "calibrate run": {"--out"},
    "calibrate import": {"--out"},
    "calibrate fit": {"--out", "--base"},
    "validate": {"--json"},
    "plot": {"--out"},  # a command or a group: then every `plot KIND` needs it
    # Beyond DESIGN §8 (additions, held to the same --json rule):
    "profiles links": {"--json"},
    "profiles gpus": {"--json"},
    "calibrate compute": {"--out", "--json"},
    "diagnose": {"--system", "--gpus-per-node", "--json"},
    "profiles from-nccl": {"--out", "--json"},
}
# DESIGN §8: "Every command has --json". Exceptions, each with its reason:
NO_JSON = {"profiles schema"}  # its whole output is already one JSON document


def _leaf_commands(command, path: str = "") -> dict:
    """Every runnable command by its path ("profiles list"); typer vendors click, so duck-type groups."""
    if isinstance(getattr(command, "commands", None), dict):
        leaves: dict = {}
        for name, sub in command.commands.items():
            leaves.update(_leaf_commands(sub, f"{path} {name}".strip()))
        return leaves
    return {path: command}


def _options(command) -> set[str]:
    names = {opt for param in command.params if param.param_type_name == "option"
             for opt in (*param.opts, *param.secondary_opts)}
    return {name for name in names if name.startswith("--") and name != "--help"}


ROOT = typer.main.get_command(app)
LEAVES = _leaf_commands(ROOT)


def test_help_lists_every_registered_command():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert set(ROOT.commands) >= {"profiles"}
    for name in ROOT.commands:
        assert name in result.stdout
    profiles_help = runner.invoke(app, ["profiles", "--help"])
    for name in ("list", "show", "validate", "schema"):
        assert name in profiles_help.stdout


def test_version_prints_the_installed_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"commmodel {commmodel.__version__}"
    assert commmodel.__version__ == version("commmodel")  # pyproject and package agree


@pytest.mark.parametrize("argv", [
    ["--no-such-flag"], ["no-such-command"], ["profiles", "show"], ["profiles", "list", "--bogus"],
    ["profiles", "no-such-subcommand"], ["profiles", "validate"],
])
def test_usage_errors_exit_2(argv):
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_profiles_list_json_is_one_document_alone_on_stdout():
    result = runner.invoke(app, ["profiles", "list", "--json"])
    assert result.exit_code == 0
    document = json.loads(result.stdout)  # fails on any extra text
    names = {system["name"] for system in document["systems"]}
    assert {"dgx-h100"} <= names
    for system in document["systems"]:
        assert {"name", "gpu", "gpus_per_node"} <= set(system)


def test_python_dash_m_is_the_same_command_and_errors_stay_off_stdout():
    ok = subprocess.run([sys.executable, "-m", "commmodel", "profiles", "list", "--json"],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stderr == ""
    assert json.loads(ok.stdout) == json.loads(runner.invoke(app, ["profiles", "list", "--json"]).stdout)
    bad = subprocess.run([sys.executable, "-m", "commmodel", "profiles", "show", "no-such-box", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "no-such-box" in bad.stderr


def test_top_level_commands_are_the_known_ones():
    unknown = sorted(set(ROOT.commands) - TOP_LEVEL)
    assert not unknown, f"new top-level commands {unknown}: add them to TOP_LEVEL (and DESIGN §8)"
    assert "profiles" in ROOT.commands


def _frozen_lines() -> list[str]:
    """The FROZEN entries of the commands as they are now (for pasting after a deliberate change)."""
    def literal(options: set[str]) -> str:
        return "{" + ", ".join(f'"{name}"' for name in sorted(options)) + "}" if options else "set()"

    return [f'    "{path}": {literal(_options(command))},' for path, command in sorted(LEAVES.items())]


@pytest.mark.parametrize("path", sorted(FROZEN))
def test_frozen_commands_keep_their_options(path):
    if path not in LEAVES:
        pytest.skip(f"`commmodel {path}` does not exist yet")
    assert _options(LEAVES[path]) == FROZEN[path]


@pytest.mark.parametrize("path", sorted(DESIGN_FLAGS))
def test_design_flags_are_present(path):
    commands = {leaf: cmd for leaf, cmd in LEAVES.items() if leaf == path or leaf.startswith(path + " ")}
    if not commands:
        pytest.skip(f"`commmodel {path}` does not exist yet")
    for leaf, command in commands.items():
        missing = DESIGN_FLAGS[path] - _options(command)
        assert not missing, f"`commmodel {leaf}` lacks DESIGN §8 flags {sorted(missing)}"


def test_every_command_has_json():
    lacking = sorted(path for path, command in LEAVES.items()
                     if path not in NO_JSON and "--json" not in _options(command))
    assert not lacking, f"DESIGN §8: every command has --json; missing on {lacking}"


def test_design_table_and_frozen_table_agree():
    """A frozen entry must itself satisfy DESIGN §8, so the freeze can never lock in a missing flag."""
    for path, options in FROZEN.items():
        design = next((flags for name, flags in DESIGN_FLAGS.items() if path == name or path.startswith(name + " ")),
                      None)
        assert design is not None, f"{path} is not a DESIGN §8 command"
        assert design <= options, f"{path}: frozen options lack {sorted(design - options)}"


def test_cli_start_up_does_not_import_heavy_modules():
    code = ("import commmodel.cli.app, sys, json; "
            "print(json.dumps(sorted(m for m in ('pandas', 'matplotlib', 'torch', 'scipy') if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


if __name__ == "__main__":
    print("\n".join(_frozen_lines()))


@pytest.mark.parametrize("name", ["estimate", "plan", "compare"])
def test_step_commands_forward_every_stack_flag(name):
    """cli.stack_flags.STACK_FLAGS owns the flag → StepOptions mapping: each of estimate, plan and compare has every one of
    those parameters (so stack_flags(locals()) forwards them all) and each target is a StepOptions field."""
    import inspect

    from commmodel.cli.stack_flags import STACK_FLAGS, stack_flags
    from commmodel.step.options import StepOptions

    params = inspect.signature(LEAVES[name].callback).parameters
    assert set(STACK_FLAGS) <= set(params)
    assert {f for fields in STACK_FLAGS.values() for f in fields} <= set(StepOptions.model_fields)
    given = stack_flags({"dropout": 0.1, "bucket_size": "64MiB", "fp8_param_gather": False, "unrelated": 1})
    assert given["hidden_dropout"] == given["attention_dropout"] == 0.1
    assert given["bucket_size_bytes"] == "64MiB" and given["fp8_param_allgather"] is False
    assert "unrelated" not in given and "dropout" not in given


def test_low_precision_mfu_is_printed_beside_mfu_and_carried_by_plan_layouts() -> None:
    """Issue 12 item 3: MFU against the dense 16-bit peak, the FP8-peak figure beside it, labelled: in the human
    estimate (not for 16-bit training, where the two are equal) and in every plan --json layout."""
    args = ["estimate", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--global-batch", "64"]
    fp8 = runner.invoke(app, [*args, "--dtype", "fp8"]).output
    line = next(x for x in fp8.splitlines() if x.startswith("per GPU"))
    mfu, low = (float(v) for v in re.findall(r"MFU ([\d.]+)%", line))
    assert "of the fp8 peak" in line and low == pytest.approx(mfu * 989 / 1979, abs=0.06)
    for sixteen_or_more in ("bf16", "fp32"):  # MFU's own peak: nothing beside it
        out = runner.invoke(app, [*args, "--dtype", sixteen_or_more]).output
        assert "of the" not in next(x for x in out.splitlines() if x.startswith("per GPU")), sixteen_or_more
    plan = json.loads(runner.invoke(app, ["plan", "-m", "llama3-8b", "-n", "8", "-s", "dgx-h100", "--dtype", "fp8",
                                          "--top", "2", "--json"]).output)
    assert all(row["mfu_low_precision_peak"] == pytest.approx(row["mfu"] * 989 / 1979, rel=1e-6)
               for row in plan["layouts"])
