"""Training-step model: layouts, options, the vectorised evaluator and the single-layout estimate."""

from commmodel.step.evaluate import BREAKDOWN_TERMS, StepColumns, evaluate_layouts
from commmodel.step.layout import Layout, LayoutArrays, check_layout, layout_divisibility_masks
from commmodel.step.options import StepOptions

__all__ = [
    "BREAKDOWN_TERMS",
    "Layout",
    "LayoutArrays",
    "StepColumns",
    "StepOptions",
    "check_layout",
    "evaluate_layouts",
    "layout_divisibility_masks",
]
