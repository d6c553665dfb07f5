"""The console entry leaves without the interpreter's teardown only when nothing is pending (issue 17).

``commmodel.cli.app.main`` ends with ``os._exit`` after flushing stdout and stderr when no atexit callback,
no other thread and no redirected stream is left; otherwise Python exits as usual. These tests run it in
fresh interpreters and check what a user and a caller see: all of the output, the exit status, atexit
callbacks still run, and a caller that redirected stdout keeps control."""

import contextlib
import io
import json
import subprocess
import sys

import pytest

# A module-level object whose finaliser says when the interpreter tore the modules down.
_RUN = """
import os, sys
class Teardown:
    def __del__(self, write=os.write):  # fd 2 directly: sys.stderr may be gone by then
        write(2, b"torn down\\n")
sys.modules["teardown_marker"] = Teardown()  # finalised when the shutdown clears sys.modules
{setup}
sys.argv = ["commmodel", *{argv!r}]
from commmodel.cli.app import main
main()
"""

PLAN = ["plan", "--model", "gpt3-175b", "--gpus", "1024", "--system", "dgx-a100", "--json", "--top", "300"]


def _run(argv: list[str], setup: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _RUN.format(argv=argv, setup=setup)], capture_output=True,
                          text=True, check=False)


def test_a_finished_command_delivers_all_its_output_and_skips_the_teardown():
    done = _run(PLAN)
    assert done.returncode == 0
    assert len(json.loads(done.stdout)["layouts"]) == 300  # ~125 kB through the pipe, all of it
    assert "torn down" not in done.stderr


def test_exit_statuses_and_error_lines_are_kept():
    error = _run(["query", "nonsense words only"])
    assert error.returncode == 1 and error.stderr.startswith("error: could not read 'nonsense'")
    usage = _run(["plan", "--bogus"])
    assert usage.returncode == 2 and "No such option: --bogus" in usage.stderr
    assert _run(["--version"]).stdout == "commmodel 0.1.0\n"


def test_a_registered_atexit_callback_still_runs():
    done = _run(["--version"], setup="import atexit; atexit.register(lambda: print('atexit ran'))")
    assert done.returncode == 0
    assert done.stdout == "commmodel 0.1.0\natexit ran\n"
    assert "torn down" in done.stderr  # the usual shutdown


def test_a_caller_that_redirected_stdout_gets_system_exit(monkeypatch):
    from commmodel.cli.app import main

    monkeypatch.setattr(sys, "argv", ["commmodel", "--version"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        main()
    assert done.value.code in (0, None) and out.getvalue() == "commmodel 0.1.0\n"


def test_a_profiler_still_reports_after_the_command():
    done = subprocess.run([sys.executable, "-m", "cProfile", "-s", "tottime", "-m", "commmodel", "--version"],
                          capture_output=True, text=True, check=False)
    assert done.stdout.startswith("commmodel 0.1.0\n") and "function calls" in done.stdout
