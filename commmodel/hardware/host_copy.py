"""What a pinned host↔device copy reaches on a GPU's host link: the one rate every priced host copy uses (gloo's and
Open MPI's staging of GPU tensors, activation offload).

Measured: nvbandwidth host→device 55.43 GB/s and device→host 55.06 GB/s on PCIe Gen5 x16, 63 GB/s each way, on an
H200 node (stas00/ml-engineering @744d01e network/README.md; ../shared/validation/hardware_facts.md §2): 88% of the
link.
The same share is applied to every GPU's own host link (PCIe Gen3-Gen5, and the superchips' NVLink-C2C, where it is
unmeasured).
"""

from commmodel.hardware.models import Sourced, System

PINNED_COPY_FRACTION = 55.4 / 63.0
"""Share of the host link's peak a pinned copy reaches, each way (the measurement above, 88%)."""

PCIE5_PINNED_COPY_BW_BYTES_PER_S = 55.4e9
"""The pinned copy rate itself on PCIe Gen5 x16 (the measurement above)."""


def pinned_copy_bw(system: System) -> Sourced[float] | None:
    """Pinned copy rate each way per GPU: its host link (:meth:`System.host_link`) × :data:`PINNED_COPY_FRACTION`;
    None where neither the system nor its GPU states a host link."""
    link = system.host_link()
    if link is None:
        return None
    return Sourced[float](value=link.value * PINNED_COPY_FRACTION,
                          source=f"{link.source}; × {PINNED_COPY_FRACTION:.2f}, a pinned copy's share (nvbandwidth "
                                 "55.4 of 63 GB/s on PCIe Gen5 x16, stas00/ml-engineering @744d01e)")
