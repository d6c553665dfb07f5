"""Domain errors.

Every error a user can cause derives from :class:`CommModelError`. Its message is one line
that names what was wrong (field, value, rule) and how to fix it; ``cli`` prints exactly that
line and exits 1. ``assert`` is reserved for internal invariants.
"""

from __future__ import annotations


class CommModelError(ValueError):
    """A user-facing error: bad input or a request the model cannot answer."""


class UnitError(CommModelError):
    """A human quantity string ("400 Gbps", "4GiB") that could not be read."""


class ProfileError(CommModelError):
    """A hardware profile that is malformed, unknown or inconsistent."""


class LayoutError(CommModelError):
    """A parallel layout that does not divide the GPUs, layers, heads or batch."""


class CollectiveError(CommModelError):
    """An unknown collective, an algorithm that does not apply, or a nonsense size/group."""


class WorkloadError(CommModelError):
    """An unknown model preset or an inconsistent model shape."""


class CalibrationError(CommModelError):
    """A benchmark or fit that could not complete (dead rank, timeout, degenerate data)."""


class QueryError(CommModelError):
    """A natural-language query with parts that could not be read."""
