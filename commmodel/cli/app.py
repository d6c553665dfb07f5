"""The ``commmodel`` command: wiring only (DESIGN §8).

One error boundary lives here: a :class:`~commmodel.errors.CommModelError` (or a pydantic
validation error from user input) becomes one line on stderr and exit code 1; usage errors (click's parser: a
value out of range, an unknown option, a missing argument) one line too, with exit code 2
(:func:`_show_usage_error`). ``COMMMODEL_DEBUG=1`` shows the traceback instead. Command modules are
imported when their command runs (``_COMMANDS``), and each keeps its heavy imports (pandas,
matplotlib, torch) inside its functions, so start-up stays fast (issue 17).
"""

import gc
import importlib
import os
import sys
import types
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from commmodel import __version__
from commmodel.errors import CommModelError


class _ErrorBoundaryGroup(TyperGroup):
    """Turns domain errors raised anywhere below into one stderr line and exit code 1; commands load lazily."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands(dict.fromkeys(_COMMANDS), **self.commands)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # names only: building every command is what --help alone needs

    def invoke(self, ctx: Any) -> Any:
        _import_numpy_with_one_blas_thread()
        try:
            return super().invoke(ctx)
        except CommModelError as err:
            from commmodel.cli.stack_flags import with_flag_names

            _fail(with_flag_names(str(err)), err)
        except Exception as err:  # pydantic ValidationError from user-supplied values
            if type(err).__name__ == "ValidationError" and type(err).__module__.startswith("pydantic"):
                from commmodel.hardware.catalogue import describe_validation_error

                _fail(describe_validation_error(err, "invalid input"), err)  # type: ignore[arg-type]
            raise


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
"""The variables OpenBLAS reads, in its order, for its thread count when numpy loads it (OpenBLAS USAGE.md,
"set OpenBLAS to use single thread": ``export OPENBLAS_NUM_THREADS=1``)."""


def _import_numpy_with_one_blas_thread() -> None:
    """Import numpy (every command uses it) with OpenBLAS on the calling thread only, unless the user set a
    thread count or numpy is already loaded.

    At load OpenBLAS starts one worker per core and each busy-waits for work (~2^28 cycles) before it
    sleeps: ~0.1 s of CPU in a ~0.2 s command, ~18 ms of wall time on a busy 2-core machine (issue 17,
    benchmarks/cli_startup.py), for BLAS calls a command never makes in parallel (the step model is
    elementwise; calibrate's fits solve a few columns, below OpenBLAS's threading threshold). The variable
    is set only around the import (OpenBLAS reads it once, when numpy loads it) and removed again, so the
    processes a command starts (torchrun, srun) see the user's environment."""
    if "numpy" in sys.modules or any(name in os.environ for name in BLAS_THREAD_VARIABLES):
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


MAX_ERROR_CHARS = 1000
"""Longest error line printed; the rest is counted, not shown (a 258 kB YAML of unknown keys made a 1.9 MB line)."""


def _fail(message: str, err: BaseException) -> None:
    if os.environ.get("COMMMODEL_DEBUG"):
        raise err
    first_line = " ".join(message.split())
    if len(first_line) > MAX_ERROR_CHARS:  # a message quoting a whole bad file (every unknown key) stays readable
        first_line = f"{first_line[:MAX_ERROR_CHARS]}… ({len(first_line) - MAX_ERROR_CHARS:,} more characters)"
    typer.echo(f"error: {first_line}", err=True)
    raise typer.Exit(1)


USAGE_ERROR: type = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
"""Click's ``UsageError`` (the base of ``typer.BadParameter``), from whichever click typer runs on (typer ≥ 0.20
vendors its own as ``typer._click``)."""


def _show_usage_error(self: Any, file: Any = None) -> None:
    """Click's usage error as one stderr line naming the command, the value and where help is, instead of its
    three lines ("Usage: ... / Try '... --help' for help. / Error: ..."); the exit code stays 2. Installed as
    :data:`USAGE_ERROR`'s ``show`` (the method click's and typer's standalone mode call to report one) when this
    module loads: click raises these from its own parser, so there is no subclass to choose."""
    command = self.ctx.command_path if self.ctx is not None else "commmodel"
    typer.echo(f"error: {' '.join(self.format_message().split())} (see '{command} --help')", err=True)


USAGE_ERROR.show = _show_usage_error  # type: ignore[attr-defined]

app = typer.Typer(
    cls=_ErrorBoundaryGroup,
    name="commmodel",
    help="Model communication in distributed training: collectives, training steps, layouts, calibration.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"commmodel {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """commmodel: α-β collective costs, training-step estimates, layout planning and calibration."""


def _plot_app() -> typer.Typer:
    """The ``commmodel plot`` group: the collective figures (cli/plot.py) and the step figures (cli/plot_step.py)."""
    from commmodel.cli import plot, plot_step
    from commmodel.cli.plot_common import PLOT_HELP

    group = typer.Typer(help=PLOT_HELP, no_args_is_help=True)
    for name, command in (("collective", plot.collective_cmd), ("scaling", plot.scaling_cmd),
                          ("calibration", plot.calibration_cmd), ("breakdown", plot_step.breakdown_cmd),
                          ("whatif", plot_step.whatif_cmd), ("timeline", plot_step.timeline_cmd)):
        group.command(name)(command)
    return group


# name → (module, attribute), or the name of a group builder in this module: a function is a command, a Typer
# a group. Imported and built only when
# invoked (or listed by --help), so a command pays for its own imports and signature parsing alone.
_COMMANDS = {
    "estimate": ("commmodel.cli.estimate", "estimate_cmd"),
    "plan": ("commmodel.cli.plan", "plan_cmd"),
    "compare": ("commmodel.cli.compare", "compare_cmd"),
    "query": ("commmodel.cli.query", "query_cmd"),
    "collective": ("commmodel.cli.collective", "collective_cmd"),
    "sweep": ("commmodel.cli.collective", "sweep_cmd"),
    "validate": ("commmodel.cli.validate", "validate_cmd"),
    "profiles": ("commmodel.cli.profiles", "app"),
    "plot": "_plot_app",
    "calibrate": ("commmodel.cli.calibrate", "app"),
    "diagnose": ("commmodel.cli.diagnose", "diagnose_cmd"),
}


def _build_command(name: str) -> Any:
    """The click command typer makes for ``name``, registered exactly as ``app.command``/``add_typer`` would."""
    spec = _COMMANDS[name]
    target = globals()[spec]() if isinstance(spec, str) else getattr(importlib.import_module(spec[0]), spec[1])
    holder = typer.Typer(rich_markup_mode=app.rich_markup_mode, add_completion=False)
    holder.callback()(lambda: None)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    return typer.main.get_group(holder).commands[name]


class _LazyCommands(dict):
    """``{name: click command}`` whose values are built on first access (click reads ``.get``/``.items``)."""

    def __getitem__(self, name: str) -> Any:
        if super().__getitem__(name) is None:
            self[name] = _build_command(name)
        return super().__getitem__(name)

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    def values(self) -> list:  # type: ignore[override]
        return [self[name] for name in self]

    def items(self) -> list:  # type: ignore[override]
        return [(name, self[name]) for name in self]


GC_YOUNG_THRESHOLD = 100_000
"""The cyclic collector's first threshold in a command process (Python's default is 700, gc.get_threshold()).
Start-up builds ~10^5 long-lived objects (typer's commands, pydantic's model classes, numpy), and with the
default each is walked by ~120 young and ~10 middle collections that free almost nothing: ~12 ms of a
~0.2 s command (issue 17, measured with gc.callbacks). At 100,000 those collections do not run during
start-up; a long command (plan --top 100000, validate) still collects every 100,000 net allocations, so
cyclic garbage stays bounded. Set before anything is imported by ``python -m commmodel`` (__main__.py)
and at the top of :func:`main` for the console script."""


RESERVED_FRAME_SLOTS = 36_000
"""Stack slots (8 bytes each) of the frame a command runs under (:func:`_in_one_stack_chunk`): ~288 KiB, so
CPython's frame data stack gives it a 512 KiB chunk of its own (Python/pystate.c ``push_chunk``: the smallest
16 KiB × 2^k holding the frame plus 1,000 slots) and the ~230 KiB left above it hold a command's deepest
call chain (~150 frames of tens of slots each; recursion up to the limit still fits, or spills as usual)."""


def _call(fn: Callable[[], Any]) -> Any:
    return fn()


def _in_one_stack_chunk(fn: Callable[[], Any]) -> Any:
    """``fn()`` called from a frame that reserves :data:`RESERVED_FRAME_SLOTS` (the code of ``_call`` with a
    larger ``co_stacksize``: slots never written, so never paged in).

    CPython 3.11 keeps frames in 16 KiB chunks and frees a chunk as soon as its first frame returns
    (Python/pystate.c ``_PyThreadState_PopFrame``, v3.11.7): a call chain that keeps crossing a chunk boundary
    maps and unmaps a chunk at every crossing (python/cpython gh-142183; one chunk is cached per thread since
    python/cpython#145789). Where the boundary falls depends on import order: on 1ba1c4d ``collective`` built
    the hardware models across one, 1,913 munmap calls (strace -c), ~15 ms of a ~0.17 s command, and
    ``query`` made ~220. Inside one large chunk none is crossed: 17-19 munmap calls for collective, query,
    plan, estimate and compare. Where frames are not chunked (3.10) it is a plain call with a larger frame."""
    code = _call.__code__
    runner = types.FunctionType(code.replace(co_stacksize=code.co_stacksize + RESERVED_FRAME_SLOTS), _call.__globals__)
    return runner(fn)


def main() -> None:
    """Console-script entry point.

    The collector's first threshold is raised to :data:`GC_YOUNG_THRESHOLD` first. On the way out the
    cyclic collector's objects are frozen: the interpreter's final full collection would otherwise walk
    the ~10^5 objects pydantic, typer and numpy built at start-up, ~35 ms of a 0.25 s command that frees
    nothing the exiting process needs (issue 17). Then, where nothing is left for the interpreter's
    shutdown to do, the process leaves at once (:func:`_exit_without_teardown`). Exit code and output are
    unchanged; files are closed by the commands themselves (``with``).
    """
    gc.set_threshold(GC_YOUNG_THRESHOLD)
    try:
        _in_one_stack_chunk(lambda: app(prog_name="commmodel"))  # no frame-chunk churn (see its docstring)
    except SystemExit as done:
        gc.freeze()
        _exit_without_teardown(done.code)
        raise
    finally:
        gc.freeze()


def _exit_without_teardown(code: object) -> None:
    """``os._exit(code)`` when the interpreter's shutdown would only free memory; otherwise return (the caller
    re-raises ``SystemExit`` and Python exits as usual).

    Python's shutdown runs the atexit callbacks, waits for non-daemon threads, flushes stdout and stderr,
    then tears down every module, deallocating the ~10^5 objects start-up built: ~5-7 ms of a ~0.2 s
    ``query`` (issue 17, benchmarks/cli_startup.py) that the operating system does anyway when the process
    ends. It leaves that way only when nothing else is pending: no atexit callback registered (logging,
    torch, tempfile and pyplot register one when imported or used), no thread but the main one, no profiler
    or tracer, stdout and stderr are the process's own (a caller that redirected them, e.g. a test, keeps
    control) and flush cleanly, and the code is an exit status (None or an int; other values Python prints
    to stderr). ``main`` is the process's entry point; code that runs commands in-process uses ``app``
    (typer's ``CliRunner``)."""
    import atexit

    if not (code is None or isinstance(code, int)) or sys.stdout is None or sys.stderr is None:
        return
    if sys.stdout is not sys.__stdout__ or sys.stderr is not sys.__stderr__:
        return
    pending_callbacks = getattr(atexit, "_ncallbacks", None)  # CPython's count of registered callbacks
    if pending_callbacks is None or pending_callbacks():
        return
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return  # a profiler or debugger (python -m cProfile -m commmodel ...) reports after the command
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return  # the usual shutdown reports it as it always has
    os._exit(code or 0)


if __name__ == "__main__":
    main()
    sys.exit(0)
