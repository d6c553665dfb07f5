"""Plain aligned text tables (the CLI's human tables and the calibration report share them)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def format_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], align: str | None = None) -> str:
    """A plain aligned text table; ``align`` is one of l/r per column (default: text left, numbers right)."""
    text_rows = [[str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row)]
    if align is None:
        align = "".join(
            "r" if rows and isinstance(rows[0][i], (int, float)) else "l" for i in range(len(headers))
        )

    def line(cells: Iterable[str]) -> str:
        return "  ".join(c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(cells, widths, align)).rstrip()

    out = [line(headers), line("-" * w for w in widths)]
    out.extend(line(row) for row in text_rows)
    return "\n".join(out)
