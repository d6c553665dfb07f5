"""Where a collective prediction's inputs come from: ``calibrated``, ``sourced`` or ``extrapolated``.

A collective is priced on one tier's numbers: the scale-out tier when the group spans more than one
scale-up domain, else the scale-up tier (the same split :func:`~commmodel.collectives.topology.group_topology`
makes). A tier that ``calibrate fit`` wrote records the message sizes it measured (``calibrated_sizes``):

- ``calibrated``: the tier was calibrated and S lies inside the measured sizes;
- ``extrapolated``: the tier was calibrated but S lies outside them (e.g. 10× the largest measured size);
- ``sourced``: the tier carries no calibration, so its numbers are the profile's sourced facts.
"""

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from commmodel.collectives.topology import group_topology
from commmodel.hardware.models import HOST_LIBRARY_KEYS, MeasuredSizes, System

PROVENANCE_KINDS = ("calibrated", "sourced", "extrapolated")
"""The three answers, in the vocabulary of ``--json``'s ``"provenance"``."""


class Provenance(NamedTuple):
    """The provenance of one predicted size, with the tier and range it was judged by."""

    kind: str
    """calibrated, sourced or extrapolated."""
    tier: str
    """scale_up or scale_out: the tier whose numbers price this group (host_libraries.<library> for gloo, MPI)."""
    calibrated_sizes: MeasuredSizes | None
    """That tier's measured sizes (None when it was not calibrated)."""

    def record(self) -> dict:
        """The ``"provenance"`` value of ``--json``."""
        sizes = self.calibrated_sizes
        return {"kind": self.kind, "tier": self.tier,
                "calibrated_min_bytes": sizes.min_bytes if sizes else None,
                "calibrated_max_bytes": sizes.max_bytes if sizes else None,
                "source": sizes.source if sizes else None}


def prediction_provenance(system: System, size_bytes: ArrayLike, num_ranks: int,
                          ranks_per_node: int | None = None, library: str | None = None) -> list[Provenance]:
    """One :class:`Provenance` per size in ``size_bytes`` for a group of ``num_ranks`` on ``system`` priced in
    ``library``. A host library (gloo, MPI) is judged by its own ``host_libraries`` calibration, never by the device
    tiers' (an NCCL fit does not calibrate gloo, nor a gloo fit NCCL)."""
    sizes = np.atleast_1d(np.asarray(size_bytes, dtype=float))
    if library in HOST_LIBRARY_KEYS:
        fit = (system.host_libraries or {}).get(library)
        return _judged(sizes, f"host_libraries.{library}", fit.calibrated_sizes if fit is not None else None)
    topo = group_topology(system, num_ranks, ranks_per_node)
    crosses = bool(np.any(np.asarray(topo.num_domains) > 1))
    tier_name = "scale_out" if crosses and system.scale_out is not None else "scale_up"
    tier = system.scale_out if tier_name == "scale_out" else system.scale_up
    return _judged(sizes, tier_name, tier.calibrated_sizes if tier is not None else None)


def _judged(sizes: np.ndarray, tier_name: str, measured: MeasuredSizes | None) -> list[Provenance]:
    """Each size against the sizes ``tier_name`` was calibrated at (sourced where it was not calibrated)."""
    if measured is None:
        return [Provenance("sourced", tier_name, None) for _ in sizes]
    inside = (sizes >= measured.min_bytes) & (sizes <= measured.max_bytes)
    return [Provenance("calibrated" if ok else "extrapolated", tier_name, measured) for ok in inside]
