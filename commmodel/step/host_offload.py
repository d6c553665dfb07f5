"""Activation offloading's copies over the GPU <-> host link (:mod:`commmodel.workload.offload` says which bytes).

Megatron-Core copies each offloaded group to pinned host memory on its own ``d2h_stream`` right after the module's
forward, and back on its own ``h2d_stream`` before the module's backward, the compute stream waiting only for the
reload (NVIDIA/Megatron-LM @d98e8a6 docs/user-guide/features/fine_grained_activation_offloading.md "Offload/Reload
Flow"; the last group of each chunk is reloaded early, ``pre_reload_last_layer``). So per micro-batch on the busiest
stage, with B the bytes its blocks offload and W the pinned copy rate in one direction
(:func:`commmodel.hardware.host_copy.pinned_copy_bw`: the host link × 0.88, the rate gloo's and Open MPI's staging use
too; the two directions run at once):

    link    = 2·B/W                                          (D2H in the forward, H2D in the backward)
    exposed = max(0, B/W − forward) + max(0, B/W − (backward + recompute))

the copy hiding behind the compute of the same pass and only what it outlasts holding the stage. Assumption: the
copies take no HBM bandwidth or SMs from the compute they overlap (copy engines; a slowdown is not sourced, so not
priced).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commmodel.hardware.host_copy import pinned_copy_bw


def offload_transfer_s(offloaded_bytes: np.ndarray, host_link_bw_bytes_per_s: float, forward_s: np.ndarray,
                       backward_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(link, exposed) seconds of one micro-batch's offload copies (module docstring's closed form); ``backward_s``
    includes what recompute redoes in the backward."""
    one_way_s = np.asarray(offloaded_bytes, dtype=float) / host_link_bw_bytes_per_s
    exposed = np.maximum(one_way_s - forward_s, 0.0) + np.maximum(one_way_s - backward_s, 0.0)
    return 2.0 * one_way_s, exposed


def offload_line(system: Any = None) -> str:
    """How activation offloading's host copies are priced: at the system's GPU-host bandwidth, or not at all."""
    what = ("activation offload: each module's saved input leaves the GPU in every in-flight layer-micro-batch but "
            "one (Megatron-Core's margin); expert_fc1's input is the routed token copies, k·h per token")
    bw = None if system is None else pinned_copy_bw(system)
    if bw is None:
        where = "" if system is None else f"{system.name} and its GPU state no host_link_bw_bytes_per_s: "
        return f"{what}; {where}the copies are priced only on a system with a GPU-host bandwidth"
    return (f"{what}; copies priced at {bw.value / 1e9:.3g} GB/s each way per GPU, hidden behind the same pass's "
            f"compute ({bw.source})")
