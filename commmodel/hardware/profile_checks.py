"""The range checks every hardware profile passes (:mod:`.models` validators call them): each names the field,
the value, the rule and a fix in one :class:`~commmodel.errors.ProfileError`."""

from typing import TYPE_CHECKING, Any

from commmodel.errors import ProfileError

if TYPE_CHECKING:
    from commmodel.hardware.models import InNetworkReduction


def check_positive(value: float, field: str) -> None:
    """``value`` is above zero (a rate, a size, a peak)."""
    if not value > 0:
        raise ProfileError(f"{field} = {value!r} must be > 0; write a positive number with its unit")


MAX_STEP_LATENCY_S = 1e-3
"""Largest per-step α a profile may state. NCCL's slowest published floors are ~0.2 ms for a whole
small all-reduce (2x p4de over EFA: 161-165 µs, validation/hardware_facts.md §6); 1 ms per step
can only be a unit slip ("5 ms" for "5 us")."""


def check_fraction_of_line_rate(value: float, field: str) -> None:
    """An efficiency is at most 1 of its line rate."""
    if value > 1.0:
        raise ProfileError(
            f"{field} = {value:g} exceeds 1: it is the achievable fraction of the line rate; "
            f"write a value in (0, 1] (only in_network_reduction.busbw_efficiency may exceed 1)"
        )


def check_step_latency(value: float, field: str) -> None:
    """A per-step α is microseconds, not milliseconds (:data:`MAX_STEP_LATENCY_S`)."""
    if value > MAX_STEP_LATENCY_S:
        raise ProfileError(
            f"{field} = {value * 1e3:g} ms is above {MAX_STEP_LATENCY_S * 1e3:g} ms; per-step latencies are "
            f"microseconds (did you mean {value * 1e3:g} us?)"
        )


def check_link_terms(tier: str, bw_field: str, bw: Any, efficiency: Any, latency: Any) -> None:
    """A tier's line rate is positive, its efficiency a fraction of it, its per-step α microseconds."""
    check_positive(bw.value, f"{tier}.{bw_field}")
    check_fraction_of_line_rate(efficiency.value, f"{tier}.efficiency")
    check_step_latency(latency.value, f"{tier}.latency_s")


def check_reduction(tier: str, inr: "InNetworkReduction | None", expected_name: str, wrong_name_fix: str) -> None:
    """The tier's in-network reduction (if any) is the one its switches can do, with a sane latency."""
    if inr is None:
        return
    if inr.name != expected_name:
        raise ProfileError(f"{tier}.in_network_reduction.name {inr.name!r}: {wrong_name_fix}")
    check_step_latency(inr.latency_s.value, f"{tier}.in_network_reduction.latency_s")


def check_mesh_links(total: float, links: int | None, per_link: Any) -> None:
    """A mesh tier's per-GPU rate is its link count × the per-link rate (both given, or neither)."""
    if (links is None) != (per_link is None):
        raise ProfileError(
            "scale_up.links_per_gpu and scale_up.link_bw_bytes_per_s go together: give both "
            "(e.g. links_per_gpu: 7, link_bw_bytes_per_s: {value: 64 GB/s, source: ...}) or neither"
        )
    if links is not None and per_link is not None and abs(links * per_link.value - total) > 0.01 * total:
        raise ProfileError(
            f"scale_up.bw_bytes_per_s {total / 1e9:g} GB/s is not links_per_gpu {links} x link_bw_bytes_per_s "
            f"{per_link.value / 1e9:g} GB/s = {links * per_link.value / 1e9:g} GB/s; make them agree"
        )


def check_protocols(stated: Any) -> None:
    """``nccl_protocols`` names at least one protocol and none twice."""
    if stated is not None and (not stated.value or len(set(stated.value)) != len(stated.value)):
        raise ProfileError(f"scale_out.nccl_protocols {list(stated.value)} must name each of LL, LL128, Simple at most "
                           f"once and at least one of them; e.g. value: [Simple]")
