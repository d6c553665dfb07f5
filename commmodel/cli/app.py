"""The ``commmodel`` command: wiring only (DESIGN §8).

One error boundary lives here: a :class:`~commmodel.errors.CommModelError` (or a pydantic
validation error from user input) becomes one line on stderr and exit code 1; usage errors are
typer's and exit 2. ``COMMMODEL_DEBUG=1`` shows the traceback instead. Command modules are
imported here so that ``--help`` lists them; each keeps its heavy imports (pandas, matplotlib,
torch) inside its functions so start-up stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from commmodel import __version__
from commmodel.errors import CommModelError


class _ErrorBoundaryGroup(TyperGroup):
    """Turns domain errors raised anywhere below into one stderr line and exit code 1."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except CommModelError as err:
            _fail(str(err), err)
        except Exception as err:  # pydantic ValidationError from user-supplied values
            if type(err).__name__ == "ValidationError" and type(err).__module__.startswith("pydantic"):
                from commmodel.hardware.catalogue import describe_validation_error

                _fail(describe_validation_error(err, "invalid input"), err)  # type: ignore[arg-type]
            raise


def _fail(message: str, err: BaseException) -> None:
    if os.environ.get("COMMMODEL_DEBUG"):
        raise err
    first_line = " ".join(message.split())
    typer.echo(f"error: {first_line}", err=True)
    raise typer.Exit(1)


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


def _register() -> None:
    from commmodel.cli import compare, plan, profiles, query

    app.add_typer(profiles.app, name="profiles")
    app.add_typer(_plot_app(), name="plot")
    from commmodel.cli import calibrate

    app.add_typer(calibrate.app, name="calibrate")
    from commmodel.cli import estimate as estimate_cli

    app.command("estimate")(estimate_cli.estimate_cmd)
    app.command("plan")(plan.plan_cmd)
    app.command("compare")(compare.compare_cmd)
    app.command("query")(query.query_cmd)
    from commmodel.cli import collective, validate

    app.command("collective")(collective.collective_cmd)
    app.command("sweep")(collective.sweep_cmd)
    app.command("validate")(validate.validate_cmd)
    from commmodel.cli import diagnose

    app.command("diagnose")(diagnose.diagnose_cmd)


_register()


def main() -> None:
    """Console-script entry point."""
    app(prog_name="commmodel")


if __name__ == "__main__":
    main()
    sys.exit(0)
