"""Shared pieces of the ``commmodel plot`` commands: the output options, saving, and the report line.

Imported by :mod:`commmodel.cli.plot` and :mod:`commmodel.cli.plot_step`; imports only :mod:`commmodel.cli.common`.
"""

from pathlib import Path
from typing import Annotated, Any

import typer

from commmodel.cli.common import echo, emit_json
from commmodel.errors import CommModelError
from commmodel.io.outpath import FIGURE_MARK, check_figure_replace, check_out_option
from commmodel.io.text_table import format_table

PLOT_HELP = "Draw figures (PNG, SVG or PDF): collective sweeps, scaling, step breakdowns, timelines, what-if, calibration."
"""Help text of the ``commmodel plot`` group."""

_FORMATS = {".png", ".svg", ".pdf", ".jpg", ".jpeg"}



class PlotOutputError(CommModelError):
    """An output path the figure cannot be written to."""


def check_figure_out(value: Path | None) -> Path | None:
    """``--out`` of a plot: the path checks every command makes, then the figure format, before anything is priced
    (a bad extension was said only after the figure was computed, up to 4 s later)."""
    value = check_out_option(value)
    if value is not None:
        _check_format(value)
        check_figure_replace(value)
    return value


_MARKED: dict[str, dict[str, Any]] = {
    ".png": {"metadata": {"Software": FIGURE_MARK}}, ".pdf": {"metadata": {"Creator": FIGURE_MARK}},
    ".svg": {"metadata": {"Creator": FIGURE_MARK}}, ".jpg": {"pil_kwargs": {"comment": FIGURE_MARK.encode()}},
    ".jpeg": {"pil_kwargs": {"comment": FIGURE_MARK.encode()}}}
"""savefig arguments that put :data:`~commmodel.io.outpath.FIGURE_MARK` in each format's metadata."""


def _check_format(out: Path) -> None:
    if out.suffix.lower() not in _FORMATS:
        raise PlotOutputError(f"--out {out}: unknown extension {out.suffix or '(none)'!r}; use one of "
                              f"{', '.join(sorted(_FORMATS))}")


OutOpt = Annotated[Path, typer.Option("--out", "-o", callback=check_figure_out,
                                      help="File to write; the extension picks the format (.png, .svg, .pdf, .jpg).")]
DpiOpt = Annotated[int, typer.Option("--dpi", help="Resolution of raster output.", min=30, max=600)]


def save_figure(fig: Any, out: Path, dpi: int) -> Path:
    """Write ``fig`` to ``out``; one-line errors for a bad extension or an unwritable place."""
    _check_format(out)
    if not out.parent.exists():
        raise PlotOutputError(f"--out {out}: folder {out.parent} does not exist; create it first")
    from matplotlib import rc_context  # loaded with the figure, not at start-up

    try:
        # SVG text stays text (searchable, editable on a slide) and PDF fonts are TrueType (Type 3 fonts fail
        # publishing checks)
        with rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):
            fig.savefig(out, dpi=dpi, **_MARKED[out.suffix.lower()])  # the mark lets a later run replace it
    except OSError as err:
        raise PlotOutputError(f"--out {out}: cannot write ({err.strerror or err})") from None
    return out


def report_figure(json_out: bool, kind: str, out: Path, fig: Any, table: Any = None, title: str | None = None,
                  **facts: Any) -> None:
    """``--json``: {"kind", "out", "title", facts..., "rows"}; otherwise a line, the facts and a table. ``title``:
    the figure's title where its suptitle holds something else (the timeline's notes)."""
    title = title or fig.get_suptitle() or (fig.axes[0].get_title() if fig.axes else "")
    if json_out:
        rows = table.to_dict(orient="records") if table is not None else None
        emit_json({"kind": kind, "out": str(out), "title": title, **facts, **({"rows": rows} if rows else {})})
        return
    echo(f"wrote {out}: {title}")
    for key, value in facts.items():
        for item in value if isinstance(value, list) else [value]:
            echo(f"  {key}: {item}")
    if table is not None:
        echo(format_table(table.to_numpy().tolist(), [str(c) for c in table.columns]))
