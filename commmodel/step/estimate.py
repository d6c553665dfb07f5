"""Single-layout estimate: the vectorised evaluator on arrays of length 1, plus diagnosis and advice."""

from __future__ import annotations

from typing import Any

from commmodel.hardware.models import System
from commmodel.step.evaluate import evaluate_layouts
from commmodel.step.layout import Layout, LayoutArrays, check_layout
from commmodel.step.options import StepOptions
from commmodel.workload.model import TransformerModel


def evaluate_single(model: TransformerModel, system: System, num_gpus: int, layout: Layout,
                    options: StepOptions | None = None) -> dict[str, Any]:
    """Every column of :func:`evaluate_layouts` for one checked layout, as Python scalars."""
    check_layout(model, num_gpus, layout)
    return evaluate_layouts(model, system, num_gpus, LayoutArrays.from_layouts([layout]), options).row(0)
