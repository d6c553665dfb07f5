"""The link catalogue and how terse system YAML becomes a fully resolved :class:`System`.

A system file names catalogue entries (``gpu: h100-sxm-80gb``, ``scale_up: {link: nvlink4, ...}``,
``scale_out: {link: ib-ndr, nics_per_node: 8}``); :func:`resolve_system` merges the catalogue's
sourced numbers under the system's own fields (the system wins) and validates the result.
Pure: dictionaries in, models out; reading files is :mod:`commmodel.io.profiles`' job.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError

from commmodel.errors import ProfileError
from commmodel.hardware.models import (
    Frozen,
    InNetworkReduction,
    ScaleOutKind,
    ScaleOutTier,
    ScaleUpKind,
    ScaleUpTier,
    Sourced,
    System,
)
from commmodel.units import Fraction, RateBytesPerS, TimeSeconds


class LinkSpec(Frozen):
    """One catalogue link: a line rate, its achievable fraction and its latency, with sources."""

    name: str = Field(min_length=1)
    """Catalogue name used by ``--network`` and system files (nvlink4, ib-ndr, eth-100g, ...)."""
    tier: Literal["scale_up", "scale_out"]
    """Whether the link joins GPUs inside a domain or nodes across the network."""
    kind: ScaleUpKind | ScaleOutKind
    """Tier kind the link produces (nvswitch, pcie_p2p, infiniband, ethernet, efa, ...)."""
    description: str = ""
    """What the link is, in words."""
    bw_bytes_per_s: Sourced[RateBytesPerS]
    """Unidirectional line rate: per GPU for scale-up links, per NIC/port for scale-out links."""
    efficiency: Sourced[Fraction]
    """Achievable fraction of the line rate for large NCCL transfers over this link kind."""
    latency_s: Sourced[TimeSeconds]
    """Per-step latency α of one collective step over this link."""
    in_network_reduction: InNetworkReduction | None = None
    """Switch reduction (NVLS, SHARP) where this link's switches offer it."""


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` on top of ``base``; nested dicts merge, ``None`` removes a key."""
    merged = dict(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict) and "value" not in value:
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _tier_dict(raw: dict[str, Any], links: dict[str, LinkSpec], tier: str, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}.{tier} must be a mapping with at least 'link', got {type(raw).__name__}")
    link_name = raw.get("link")
    if link_name is None:
        raise ProfileError(f"{where}.{tier}.link is missing; name a catalogue link, e.g. nvlink4 or ib-ndr")
    if link_name not in links:
        raise ProfileError(
            f"{where}.{tier}.link {link_name!r} is not in the link catalogue; known: {', '.join(sorted(links))}"
        )
    spec = links[link_name]
    if spec.tier != tier:
        raise ProfileError(f"{where}.{tier}.link {link_name!r} is a {spec.tier} link; pick a {tier} link")
    base = spec.model_dump(mode="json", exclude={"name", "tier", "description", "bw_bytes_per_s"}, exclude_none=True)
    bw_field = "bw_bytes_per_s" if tier == "scale_up" else "nic_bw_bytes_per_s"
    base[bw_field] = spec.bw_bytes_per_s.model_dump(mode="json")
    return _merge(base, raw)


def resolve_system(raw: dict[str, Any], links: dict[str, LinkSpec], gpus: dict[str, dict[str, Any]],
                   where: str = "system") -> System:
    """Build a :class:`System` from terse YAML data plus the link and GPU catalogues.

    ``gpu`` may be a catalogue name or a full mapping (``{base: NAME, ...overrides}`` merges);
    ``scale_up``/``scale_out`` take their numbers from ``link`` unless given explicitly.
    """
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: a system file must be a YAML mapping, got {type(raw).__name__}")
    data = dict(raw)
    gpu = data.get("gpu")
    if isinstance(gpu, str):
        if gpu not in gpus:
            raise ProfileError(f"{where}.gpu {gpu!r} is not in the GPU catalogue; known: {', '.join(sorted(gpus))}")
        data["gpu"] = gpus[gpu]
    elif isinstance(gpu, dict) and "base" in gpu:
        base_name = gpu["base"]
        if base_name not in gpus:
            raise ProfileError(f"{where}.gpu.base {base_name!r} is not in the GPU catalogue; known: {', '.join(sorted(gpus))}")
        data["gpu"] = _merge(gpus[base_name], {k: v for k, v in gpu.items() if k != "base"})
    if "scale_up" in data:
        data["scale_up"] = _tier_dict(data["scale_up"], links, "scale_up", where)
    if data.get("scale_out") is not None:
        data["scale_out"] = _tier_dict(data["scale_out"], links, "scale_out", where)
    try:
        return System.model_validate(data)
    except ValidationError as err:
        raise ProfileError(describe_validation_error(err, where)) from None


def with_network(system: System, link: LinkSpec, nics_per_node: int | None = None) -> System:
    """``system`` with its scale-out tier replaced by ``nics_per_node`` NICs of catalogue ``link``.

    ``nics_per_node`` defaults to the system's own NIC count (or one NIC per GPU if it had none).
    """
    if link.tier != "scale_out":
        raise ProfileError(f"--network {link.name!r} is a scale-up link; pick a network link such as ib-ndr or eth-100g")
    if nics_per_node is None:
        nics_per_node = system.scale_out.nics_per_node if system.scale_out else system.gpus_per_node
    if nics_per_node < 1:
        raise ProfileError(f"--network {link.name}:{nics_per_node}: the NIC count must be ≥ 1")
    tier = ScaleOutTier(
        kind=link.kind,  # type: ignore[arg-type]
        link=link.name,
        nics_per_node=nics_per_node,
        nic_bw_bytes_per_s=link.bw_bytes_per_s,
        efficiency=link.efficiency,
        latency_s=link.latency_s,
        in_network_reduction=link.in_network_reduction,
    )
    return system.model_copy(update={"scale_out": tier, "name": f"{system.name}+{link.name}:{nics_per_node}"})


def scale_up_from_link(link: LinkSpec, domain_size: int) -> ScaleUpTier:
    """A scale-up tier of ``domain_size`` GPUs built from a catalogue link."""
    if link.tier != "scale_up":
        raise ProfileError(f"link {link.name!r} is a network link; pick a scale-up link such as nvlink4 or pcie4")
    return ScaleUpTier(
        kind=link.kind,  # type: ignore[arg-type]
        link=link.name,
        bw_bytes_per_s=link.bw_bytes_per_s,
        efficiency=link.efficiency,
        latency_s=link.latency_s,
        domain_size=domain_size,
        in_network_reduction=link.in_network_reduction,
    )


def describe_validation_error(err: ValidationError, where: str) -> str:
    """One line per pydantic error folded into one message: ``where: field.path: problem (got X)``."""
    parts = []
    for item in err.errors():
        path = ".".join(str(p) for p in item["loc"])
        msg = item["msg"].removeprefix("Value error, ")
        got = item.get("input")
        shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
        if item["type"] == "extra_forbidden":
            msg = "unknown key; remove it or check its spelling against `commmodel profiles schema`"
        elif item["type"] == "missing":
            msg = "required field is missing"
        parts.append(f"{path}: {msg}{shown}")
    return f"{where}: " + "; ".join(parts)
