"""A cluster: a system × a number of nodes, and the GPU-count view every command prices on (DESIGN §3)."""

from pydantic import Field, model_validator

from commmodel.errors import ProfileError
from commmodel.hardware.models import Frozen, System


class Cluster(Frozen):
    """A system × a number of nodes: what a collective or a training step runs on."""

    system: System
    """The node type."""
    num_nodes: int = Field(ge=1)
    """Nodes in the cluster."""

    @property
    def num_gpus(self) -> int:
        """All GPUs: nodes × GPUs per node."""
        return self.num_nodes * self.system.gpus_per_node

    @model_validator(mode="after")
    def _check(self) -> "Cluster":
        _check_spannable(self.system, self.num_nodes)
        return self

    @classmethod
    def for_gpus(cls, system: System, num_gpus: int, gpus_per_node: int | None = None) -> "Cluster":
        """The cluster that holds ``num_gpus`` GPUs of ``system`` (optionally with fewer GPUs per node)."""
        node = cls.node_for_gpus(system, num_gpus, gpus_per_node)
        return cls(system=node, num_nodes=num_gpus // node.gpus_per_node)

    @staticmethod
    def node_for_gpus(system: System, num_gpus: int, gpus_per_node: int | None = None) -> System:
        """``Cluster.for_gpus(system, num_gpus, gpus_per_node).system`` (the same checks and errors) without building
        the cluster: the node type as the cluster uses it (``system`` itself when every GPU of a node is used)."""
        if num_gpus < 1:
            raise ProfileError(f"number of GPUs {num_gpus} must be ≥ 1")
        per_node = gpus_per_node or min(num_gpus, system.gpus_per_node)
        if per_node > system.gpus_per_node:
            raise ProfileError(
                f"--gpus-per-node {per_node} exceeds the {system.gpus_per_node} GPUs of a {system.name} node"
            )
        if num_gpus % per_node:
            raise ProfileError(
                f"{num_gpus} GPUs do not fill whole nodes of {per_node} GPUs; "
                f"use a multiple of {per_node} or " + ("another --gpus-per-node" if gpus_per_node else "set --gpus-per-node")
            )
        if per_node != system.gpus_per_node:
            system = _fewer_gpus_per_node(system, per_node)
        _check_spannable(system, num_gpus // per_node)  # a plain ProfileError, not pydantic's wrapper
        return system


_FEWER_PER_NODE: dict[tuple[int, int], tuple[System, System]] = {}
"""(id of a node type, GPUs used per node) -> (that node type, its view): the view is built once per node type, not
once per step evaluation (both are frozen; the node type is kept so that its id stays its own)."""


def _fewer_gpus_per_node(system: System, per_node: int) -> System:
    """``system`` with only ``per_node`` of its GPUs used in each node: the scale-up domain and the NICs shrink with
    them."""
    key = (id(system), per_node)
    cached = _FEWER_PER_NODE.get(key)
    if cached is not None and cached[0] is system:
        return cached[1]
    domain = system.scale_up.domain_size
    new_domain = per_node if domain <= system.gpus_per_node else domain // system.gpus_per_node * per_node
    update: dict = {
        "gpus_per_node": per_node,
        "scale_up": system.scale_up.model_copy(update={"domain_size": new_domain}),
    }
    if system.scale_out is not None:
        # Fewer GPUs per node use only the NICs next to them (one rail per GPU, NCCL's default).
        nics = max(1, system.scale_out.nics_per_node * per_node // system.gpus_per_node)
        update["scale_out"] = system.scale_out.model_copy(update={"nics_per_node": nics})
    view = system.model_copy(update=update)
    if len(_FEWER_PER_NODE) >= 64:  # a bound, not a policy: a process sees a handful of node types
        _FEWER_PER_NODE.clear()
    _FEWER_PER_NODE[key] = (system, view)
    return view


def _check_spannable(system: System, num_nodes: int) -> None:
    if num_nodes > 1 and system.scale_out is None and system.scale_up.domain_size < num_nodes * system.gpus_per_node:
        raise ProfileError(
            f"system {system.name} has no scale_out tier, so it cannot span {num_nodes} nodes; "
            f"use --network LINK:N (e.g. ib-ndr:8) or a single node"
        )
