"""commmodel: communication cost models and a layout planner for distributed deep-learning training.

The core (units, hardware, collectives, workload, step model, planner) is pure; ``commmodel.io``
reads and writes files, ``commmodel.plots`` draws, ``commmodel.cli`` wires the command line and
``commmodel.calibrate`` (the only torch user) measures real clusters.

From a notebook, the names below are one import away, each loaded on first use (``import commmodel`` itself
loads nothing): ``commmodel.load_system("dgx-h100")``, ``commmodel.get_model("llama3-8b")``,
``commmodel.collective_cost(...)``, ``commmodel.estimate(...)``, ``commmodel.plan(...)``, ``commmodel.compare(...)``,
``commmodel.Layout``, ``commmodel.stack_options(...)``, ``commmodel.CommModelError``. Called without options they
answer as the commands do (docs/planner.md, README "From Python").
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "load_system": "commmodel.io.profiles", "get_model": "commmodel.workload.presets",
    "resolve_model": "commmodel.io.models", "collective_cost": "commmodel.collectives",
    "estimate": "commmodel.step.estimate", "plan": "commmodel.planner.search", "compare": "commmodel.planner.whatif",
    "Layout": "commmodel.step.layout", "StepOptions": "commmodel.step.options",
    "stack_options": "commmodel.step.stacks",
    "SearchSpace": "commmodel.planner.space", "CommModelError": "commmodel.errors",
}
"""Name -> the module that owns it (PEP 562: imported when the name is first read)."""

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'commmodel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
