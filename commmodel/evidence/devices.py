"""The GPUs a profiler trace names (its ``deviceProperties``) against the system it is priced on.

Kineto writes one ``deviceProperties`` entry per GPU the process saw (``name``, memory, compute capability): the
trace says which GPU ran it, though not which fabric. A trace from one vendor's GPUs priced on the other's is
refused; otherwise the note says both, and whether the GPU differs from the system's.
"""

from typing import Any

from commmodel.errors import CommModelError
from commmodel.hardware.models import System

VENDOR_WORDS = {"nvidia": ("nvidia",), "amd": ("amd", "instinct", "radeon")}
"""Words of a ``deviceProperties`` name that say its vendor (NVIDIA's "NVIDIA A100-SXM4-80GB"; ROCm's
"AMD Instinct MI300X" or "AMD Radeon Graphics")."""
LIBRARY_VENDOR = {"nccl": "nvidia", "rccl": "amd", "gloo": "cpu"}
"""A system's own library (:func:`commmodel.collectives.libraries.default_library`) -> the vendor of its ranks."""


def _vendor(name: str) -> str | None:
    lowered = name.lower()
    return next((vendor for vendor, words in VENDOR_WORDS.items() if any(w in lowered for w in words)), None)


def _family(gpu_name: str) -> str:
    """The catalogue GPU's family word ("a100" of a100-sxm-80gb, "mi300x" of mi300x), matched in a trace's name."""
    return gpu_name.split("-")[0].lower()


def devices_note(traces: list[Any], system: System) -> str | None:
    """One line naming the GPUs the traces ran on against ``system``'s GPU (None where no trace names its devices);
    a :class:`CommModelError` when they are the other vendor's (or GPUs priced on CPU ranks)."""
    from commmodel.collectives.libraries import default_library

    names = [name for trace in traces for name in getattr(trace, "devices", [])[:1]]
    if not names:
        return None
    name = max(set(names), key=names.count)
    count = max(len(getattr(t, "devices", [])) for t in traces)
    ran_on, priced_on = _vendor(name), LIBRARY_VENDOR.get(default_library(system)[0])
    if ran_on is not None and ran_on != priced_on:
        raise CommModelError(f"the traces ran on {name} GPUs (their deviceProperties), and {system.name} has "
                             f"{'CPU ranks' if priced_on == 'cpu' else system.gpu.name + ' GPUs'}; pass the system "
                             f"the job ran on (--system)")
    same = _family(system.gpu.name) in name.lower().replace(" ", "")
    return (f"the traces' processes saw {count} × {name} (deviceProperties); priced on {system.name}'s "
            f"{system.gpu.name}" + ("" if same else ": a different GPU, so compute and link rates are the system's"))
