"""Hardware description: GPUs, interconnect tiers, systems, clusters and the link catalogue."""

from commmodel.hardware.catalogue import (
    LinkSpec,
    compose_system,
    resolve_system,
    scale_up_from_link,
    with_network,
)
from commmodel.hardware.cluster import Cluster
from commmodel.hardware.models import (
    GPU,
    InNetworkReduction,
    ScaleOutTier,
    ScaleUpTier,
    Sourced,
    System,
)

__all__ = [
    "GPU",
    "Cluster",
    "InNetworkReduction",
    "LinkSpec",
    "ScaleOutTier",
    "ScaleUpTier",
    "Sourced",
    "System",
    "compose_system",
    "resolve_system",
    "scale_up_from_link",
    "with_network",
]
