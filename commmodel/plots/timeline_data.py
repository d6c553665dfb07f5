"""The overlap timeline's data for plots and notebooks: the step model computes it
(:mod:`commmodel.step.gradients`); this module only turns it into a table."""

from __future__ import annotations

from typing import Any

from commmodel.step.gradients import StepTimeline, overlap_timeline, step_timeline

__all__ = ["StepTimeline", "overlap_timeline", "step_timeline", "timeline_frame"]


def timeline_frame(timeline: StepTimeline) -> Any:
    """The timeline's intervals as a pandas DataFrame (one row per bar)."""
    import pandas as pd

    return pd.DataFrame(list(timeline.intervals))
