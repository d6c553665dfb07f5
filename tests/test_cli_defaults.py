"""One default everywhere: where a CLI option and a library model or function share a name, the CLI's default is the
library's (a number typed twice would let ``estimate`` and a notebook's ``Layout()`` answer one question two ways).
Options the stack decides default to None in the CLI and are left out here (tests/test_stack_*.py cover them), as is
``calibrate run``'s "all" (``--ops``, ``--groups``), a word the CLI reads as the model's whole list."""

from __future__ import annotations

import inspect

import typer.main

from commmodel.calibrate.bench import BenchConfig
from commmodel.calibrate.compute import run_matmuls
from commmodel.cli.app import app
from commmodel.step.layout import Layout
from commmodel.step.options import StepOptions

OWNERS = {"estimate": (Layout, StepOptions), "plot timeline": (Layout, StepOptions), "diagnose": (Layout,),
          "calibrate run": (BenchConfig,), "sweep": (BenchConfig,), "plot collective": (BenchConfig,)}
"""Command -> the models whose same-named fields own its option defaults."""


def _commands(group, prefix=""):
    for name, sub in getattr(group, "commands", {}).items():
        path = f"{prefix} {name}".strip()
        yield from _commands(sub, path) if hasattr(sub, "commands") else [(path, sub)]


def _shared_defaults():
    commands = dict(_commands(typer.main.get_command(app)))
    for command, owners in OWNERS.items():
        for param in commands[command].params:
            for owner in owners:
                field = owner.model_fields.get(param.name)
                if field is not None and param.default is not None and param.default != "all":
                    yield command, param.name, param.default, owner.__name__, field.default


def test_cli_option_defaults_are_the_library_defaults():
    shared = list(_shared_defaults())
    assert len(shared) >= 20  # tp, pp, cp, ep, etp, vpp, micro_batch, recompute, schedule, factor, warmup, iters …
    assert [s for s in shared if s[2] != s[4]] == []


def test_calibrate_compute_times_gemms_as_run_matmuls_does():
    command = dict(_commands(typer.main.get_command(app)))["calibrate compute"]
    library = inspect.signature(run_matmuls).parameters
    cli = {p.name: p.default for p in command.params}
    assert (cli["warmup"], cli["iters"]) == (library["warmup"].default, library["iters"].default) == (3, 10)
