"""Collective primitives × algorithms: α-β costs on a topology, auto choice, lower bounds."""

from commmodel.collectives.api import CollectiveCost, all_algorithm_costs, bytes_moved_per_rank, collective_cost
from commmodel.collectives.primitives import PRIMITIVES, busbw_factor, get_primitive, lower_bound_s

__all__ = [
    "PRIMITIVES",
    "CollectiveCost",
    "all_algorithm_costs",
    "bytes_moved_per_rank",
    "busbw_factor",
    "collective_cost",
    "get_primitive",
    "lower_bound_s",
]
