"""Training-step model: the layout schema, options, the vectorised evaluator, the single-layout
estimate's inputs and the gradient traffic people draw and quote (the public results shells use)."""

from commmodel.step.evaluate import (BOUND_NAMES, BREAKDOWN_TERMS, COMM_TERMS, EXPOSED_COMM_FLAG, StepColumns,
                                     evaluate_layouts)
from commmodel.step.gradients import StepTimeline, gradient_all_reduce, overlap_timeline, step_timeline
from commmodel.step.layout import (
    LAYOUT_FIELDS,
    LAYOUT_SCHEMA,
    RECOMPUTE_CODES,
    RECOMPUTE_NAMES,
    RECORD_FIELDS,
    Layout,
    LayoutArrays,
)
from commmodel.step.layout_rules import LAYOUT_RULES, check_layout, layout_divisibility_masks
from commmodel.step.options import DDP_BUCKET_CAP_BYTES, StepOptions
from commmodel.step.placement import Placement

__all__ = [
    "BOUND_NAMES",
    "BREAKDOWN_TERMS",
    "COMM_TERMS",
    "DDP_BUCKET_CAP_BYTES",
    "EXPOSED_COMM_FLAG",
    "LAYOUT_FIELDS",
    "LAYOUT_RULES",
    "LAYOUT_SCHEMA",
    "Layout",
    "LayoutArrays",
    "Placement",
    "RECOMPUTE_CODES",
    "RECOMPUTE_NAMES",
    "RECORD_FIELDS",
    "StepColumns",
    "StepOptions",
    "StepTimeline",
    "check_layout",
    "evaluate_layouts",
    "gradient_all_reduce",
    "layout_divisibility_masks",
    "overlap_timeline",
    "step_timeline",
]
