"""Layout planner: enumerate, prune, evaluate in one vectorised pass, rank, explain, compare (DESIGN §6).

The names below are loaded from their module on first use (PEP 562), so importing one submodule
(``commmodel.planner.search`` for ``plan``/``query``) does not import the what-if and explanation modules
too (issue 17: start-up imports).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"Comparison": "whatif", "compare": "whatif", "PlanResult": "search", "default_global_batch": "search",
          "plan": "search", "SearchSpace": "space", "explain_pair": "explain", "explain_plan": "explain"}
"""Public name -> the submodule that defines it."""

__all__ = ["Comparison", "PlanResult", "SearchSpace", "compare", "default_global_batch", "explain_pair",
           "explain_plan", "plan"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
