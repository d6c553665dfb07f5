"""Start-up stays light (issue 17): what a CLI command imports and reads, not how long it takes.

Timing lives in ``benchmarks/cli_startup.py``; these tests fail when a heavy module creeps back onto
a command's import path or a catalogue file is read twice, whatever the machine's speed.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from commmodel.cli.app import app
from commmodel.io import profiles

HEAVY = ("pandas", "matplotlib", "torch", "scipy")

# Run the console-script entry in a fresh interpreter, then report which heavy modules got imported.
_PROBE = """
import contextlib, io, json, sys
from commmodel.cli.app import main
heavy = json.loads(sys.argv[2])
sys.argv = ["commmodel", *json.loads(sys.argv[1])]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main()
    except SystemExit as done:
        code = done.code
    else:
        code = 0
command_modules = {spec[0] for spec in sys.modules["commmodel.cli.app"]._COMMANDS.values() if not isinstance(spec, str)}\ncommand_modules |= {"commmodel.cli.plot", "commmodel.cli.plot_step"}  # the plot group's builder imports these
print(json.dumps({"code": code, "imported": sorted(m for m in heavy if m in sys.modules),
                  "command_modules": sorted(command_modules & set(sys.modules))}))
"""

COMMANDS = {
    "collective": ["collective", "all_reduce", "--size", "1GiB", "--gpus", "16", "--system", "dgx-h100", "--json"],
    "query": ["query", "8 GPUs, 1B params, IB NDR", "--json"],
    "plan": ["plan", "--model", "gpt3-175b", "--gpus", "1024", "--system", "dgx-a100", "--json"],
}


def _probe(argv: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_cli_command_imports_no_heavy_module(name):
    result = _probe(COMMANDS[name])
    assert result["code"] == 0
    assert result["imported"] == [], f"`commmodel {name}` imported {result['imported']}; import them inside functions"
    assert result["command_modules"] == [f"commmodel.cli.{name}"], "only the invoked command's module loads"


_QUERY_PROBE = """
import json, sys
from commmodel.io.profiles import ShippedSystems, load_gpus, load_links
from commmodel.query.answer import answer_query
from commmodel.query.parse import parse_query
shipped = ShippedSystems()
answer_query(parse_query(sys.argv[1], tuple(shipped)), {"systems": shipped, "links": load_links(), "gpus": load_gpus()})
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("commmodel.step", "commmodel.planner", "statistics",
                                                                  "commmodel.collectives.libraries.rccl")))))
"""


def _query_imports(text: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _QUERY_PROBE, text], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_a_collective_question_imports_no_step_model_or_planner():
    assert _query_imports("all-reduce 1GB on 16 A100 with HDR") == []


def test_a_plan_question_imports_neither_the_what_if_nor_the_single_layout_estimate():
    imported = _query_imports("8 GPUs, 1B params, IB NDR")
    assert "commmodel.planner.search" in imported and "commmodel.step.advice" in imported
    assert not {"commmodel.planner.whatif", "commmodel.step.estimate"} & set(imported)
    # NCCL's choice needs no RCCL tuner tables; no straggler spread needs no normal quantile (statistics)
    assert [m for m in imported if not m.startswith(("commmodel.step", "commmodel.planner"))] == []


_RUN_COMMAND = """
import contextlib, gc, io, json, os, sys
from commmodel.cli.app import main
sys.argv = ["commmodel", *json.loads(sys.argv[1])]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
"""
"""A fresh process runs the command given as a JSON argv, its output swallowed; each probe appends what it prints."""

_MODULES_PROBE = _RUN_COMMAND + """
print(json.dumps(sorted(m for m in sys.modules if m.startswith("commmodel."))))
"""

HOST_LIBRARY_MODULES = {f"commmodel.collectives.libraries.{name}" for name in ("gloo", "mpi", "host", "rules")}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_device_library_command_imports_no_host_library_and_no_unused_table_writer(name):
    done = subprocess.run([sys.executable, "-c", _MODULES_PROBE, json.dumps(COMMANDS[name])], capture_output=True,
                          text=True, check=True)
    imported = set(json.loads(done.stdout))
    assert "commmodel.collectives.api" in imported  # every one prices collectives (with NCCL here)
    assert not HOST_LIBRARY_MODULES & imported, "gloo/MPI rules and forms load with the first host library"
    # plan --json writes its ranked layouts as a ColumnTable; the others build none, so never load its writer
    assert ("commmodel.io.json_columns" in imported) == (name == "plan")


def test_import_of_cli_entry_is_light():
    code = f"import sys, commmodel.cli.app; print([m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_catalogue_files_are_read_once_per_process(monkeypatch):
    for cached in (profiles._links_in, profiles._gpus_in, profiles._raw_named, profiles._load_named):
        cached.cache_clear()
    reads: collections.Counter = collections.Counter()
    real = profiles.read_yaml  # every profile file goes through it (from the snapshot or parsed)

    def counting(path, *args, **kwargs):
        reads[str(path)] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(profiles, "read_yaml", counting)
    runner = CliRunner()
    for argv in COMMANDS.values():
        assert runner.invoke(app, argv).exit_code == 0
    catalogues = [p for p in reads if p.endswith(("links.yaml", "gpus.yaml"))]
    assert len(catalogues) == 2
    assert {p: n for p, n in reads.items() if n > 1} == {}


def test_libyaml_loader_reads_every_shipped_profile_as_the_python_loader_does():
    import yaml

    from commmodel.io.yaml_read import SAFE_LOADER

    if SAFE_LOADER is yaml.SafeLoader:
        pytest.skip("PyYAML built without libyaml: the pure-Python loader is the one in use")
    files = sorted(profiles.profiles_dir().rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert yaml.load(text, Loader=SAFE_LOADER) == yaml.load(text, Loader=yaml.SafeLoader), path  # noqa: S506


_SETTINGS_PROBE = _RUN_COMMAND + """
tasks = os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else None
print(json.dumps({"blas_var": os.environ.get("OPENBLAS_NUM_THREADS"), "omp": os.environ.get("OMP_NUM_THREADS"),
                  "threads": len(tasks) if tasks is not None else None, "gc_young": gc.get_threshold()[0]}))
"""


def _settings(env_extra: dict[str, str]) -> dict:
    import os

    from commmodel.cli.app import BLAS_THREAD_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", _SETTINGS_PROBE, json.dumps(COMMANDS["collective"])],
                          capture_output=True, text=True, check=True, env={**env, **env_extra})
    return json.loads(done.stdout)


def test_a_command_runs_numpy_on_one_blas_thread_without_leaving_the_variable_set():
    from commmodel.cli.app import GC_YOUNG_THRESHOLD

    settings = _settings({})
    assert settings["blas_var"] is None, "children (torchrun, srun) must see the user's environment"
    assert settings["gc_young"] == GC_YOUNG_THRESHOLD
    if settings["threads"] is not None:
        assert settings["threads"] == 1, "OpenBLAS started worker threads that busy-wait at start-up"


def test_a_users_blas_thread_count_is_kept():
    settings = _settings({"OMP_NUM_THREADS": "2"})
    assert settings["omp"] == "2" and settings["blas_var"] is None


_CHUNK_PROBE = """
import json, sys
import commmodel.cli.app as cli_app
sizes = []
def app(**kwargs):
    frame = sys._getframe()
    while frame is not None:
        sizes.append(frame.f_code.co_stacksize)
        frame = frame.f_back
    print(json.dumps(max(sizes)))
    raise SystemExit(0)
cli_app.app = app
cli_app.main()
"""


def test_a_command_runs_above_one_frame_that_reserves_a_large_stack_chunk():
    from commmodel.cli.app import RESERVED_FRAME_SLOTS

    done = subprocess.run([sys.executable, "-c", _CHUNK_PROBE], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) >= RESERVED_FRAME_SLOTS, "main() calls the command through _in_one_stack_chunk"


def test_help_lists_every_command_without_numpy():
    """``commmodel --help`` loads every command module to list them: none may import numpy at module level (the
    size sweep's grid did, 0.1 s on this machine, until its import moved inside ``sweep``)."""
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(["--help"]), json.dumps(["numpy", *HEAVY])],
                          capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    assert result["code"] == 0 and result["imported"] == []
