"""Layout planner: enumerate, prune, evaluate in one vectorised pass, rank, explain, compare (DESIGN §6)."""

from commmodel.planner.explain import explain_pair, explain_plan
from commmodel.planner.search import PlanResult, default_global_batch, plan
from commmodel.planner.space import SearchSpace
from commmodel.planner.whatif import Comparison, compare

__all__ = ["Comparison", "PlanResult", "SearchSpace", "compare", "default_global_batch", "explain_pair",
           "explain_plan", "plan"]
