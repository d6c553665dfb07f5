"""Workload: transformer shapes, presets, FLOP and memory counts."""

from commmodel.workload.model import DTYPE_BYTES, TransformerModel
from commmodel.workload.presets import PRESETS, get_model, shape_for_params

__all__ = ["DTYPE_BYTES", "PRESETS", "TransformerModel", "get_model", "shape_for_params"]
