"""The link catalogue and how terse system YAML becomes a fully resolved :class:`System`.

A system file names catalogue entries (``gpu: h100-sxm-80gb``, ``scale_up: {link: nvlink4, ...}``,
``scale_out: {link: ib-ndr, nics_per_node: 8}``); :func:`resolve_system` merges the catalogue's
sourced numbers under the system's own fields (the system wins) and validates the result.
Pure: dictionaries in, models out; reading files is :mod:`commmodel.io.profiles`' job.
"""

from typing import Any, Literal, get_args

from pydantic import Field, ValidationError, model_validator

from commmodel.errors import ProfileError
from commmodel.hardware.messages import describe_validation_error, did_you_mean
from commmodel.hardware.models import (
    GPU,
    Frozen,
    InNetworkReduction,
    NcclProtocol,
    ScaleOutKind,
    ScaleOutTier,
    ScaleUpKind,
    ScaleUpTier,
    Sourced,
    System,
)
from commmodel.units import Fraction, RateBytesPerS, SizeBytes, TimeSeconds

_SCALE_UP_KINDS: tuple[str, ...] = get_args(ScaleUpKind)
_SCALE_OUT_KINDS: tuple[str, ...] = get_args(ScaleOutKind)


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
    links_per_gpu: int | None = Field(default=None, ge=1)
    """Scale-up meshes only (xgmi): point links per GPU; ``bw_bytes_per_s`` = links × ``link_bw_bytes_per_s``."""
    link_bw_bytes_per_s: Sourced[RateBytesPerS] | None = None
    """Scale-up meshes only: unidirectional rate of one point link (what a single ring hop can use)."""
    nccl_protocols: Sourced[tuple[NcclProtocol, ...]] | None = None
    """Scale-out links only: the NCCL protocols a communicator may use across this fabric when its software stack
    restricts them (``NCCL_PROTO`` set by the network plugin or the vendor's NCCL environment); absent: all three."""
    nccl_buffsize_bytes: Sourced[SizeBytes] | None = None
    """Scale-out links only: ``NCCL_BUFFSIZE`` the fabric's software stack sets; absent: NCCL's default (4 MiB)."""

    @model_validator(mode="after")
    def _check(self) -> "LinkSpec":
        if self.tier == "scale_out" and (self.links_per_gpu is not None or self.link_bw_bytes_per_s is not None):
            raise ProfileError("links_per_gpu / link_bw_bytes_per_s describe a scale-up mesh; remove them from a scale_out link")
        if self.tier == "scale_up" and (self.nccl_protocols is not None or self.nccl_buffsize_bytes is not None):
            raise ProfileError("nccl_protocols / nccl_buffsize_bytes describe what crosses a network; remove them from a "
                               "scale_up link")
        kinds = _SCALE_UP_KINDS if self.tier == "scale_up" else _SCALE_OUT_KINDS
        if self.kind not in kinds:
            raise ProfileError(
                f"kind {self.kind!r} is not a {self.tier} kind; use one of {', '.join(kinds)} "
                f"(or change tier)"
            )
        # Build the tier once so a catalogue entry obeys the same rules as a system's tier.
        try:
            if self.tier == "scale_up":
                scale_up_from_link(self, domain_size=1)
            else:
                _scale_out_from_link(self, nics_per_node=1)
        except ValidationError as err:
            first = err.errors()[0]["msg"].removeprefix("Value error, ")
            raise ProfileError(first.replace(f"{self.tier}.", "", 1)) from None
        return self


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


_EXAMPLE_LINK = {"scale_up": "nvlink4", "scale_out": "ib-ndr"}


def _links_of_tier(links: dict[str, LinkSpec], tier: str) -> list[str]:
    return sorted(name for name, spec in links.items() if spec.tier == tier)


def _tier_dict(raw: dict[str, Any], links: dict[str, LinkSpec], tier: str, where: str) -> dict[str, Any]:
    example = _EXAMPLE_LINK[tier]
    if not isinstance(raw, dict):
        raise ProfileError(
            f"{where}: {tier} must be a mapping with at least 'link' (e.g. {tier}: {{link: {example}}}), "
            f"got {type(raw).__name__} {raw!r}"
        )
    link_name = raw.get("link")
    if link_name is None:
        raise ProfileError(f"{where}: {tier}.link is missing; name a catalogue link, e.g. link: {example}")
    if not isinstance(link_name, str) or link_name not in links:
        raise ProfileError(
            f"{where}: {tier}.link {link_name!r} is not in the link catalogue{did_you_mean(str(link_name), links)}; "
            f"{tier} links: {', '.join(_links_of_tier(links, tier))}"
        )
    spec = links[link_name]
    if spec.tier != tier:
        raise ProfileError(
            f"{where}: {tier}.link {link_name!r} is a {spec.tier} link; pick a {tier} link: "
            f"{', '.join(_links_of_tier(links, tier))}"
        )
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
        raise ProfileError(
            f"{where}: a system file must be a YAML mapping (name:, gpu:, gpus_per_node:, scale_up:, ...), "
            f"got {type(raw).__name__}"
        )
    keys = set(map(str, raw)) - {"name"}  # the loader names a file by its stem
    if keys and not keys & set(System.model_fields):  # "-s /etc/passwd": each of its lines read as a key
        raise ProfileError(f"{where}: not a system profile: none of its {len(keys):,} keys is a field of one (gpu, "
                           f"gpus_per_node, scale_up, ...); pass a profile YAML or a shipped name")
    data = dict(raw)
    gpu = data.get("gpu")
    known_gpus = ", ".join(sorted(gpus))
    if isinstance(gpu, str):
        if gpu not in gpus:
            raise ProfileError(
                f"{where}: gpu {gpu!r} is not in the GPU catalogue{did_you_mean(gpu, gpus)}; known: {known_gpus}"
            )
        data["gpu"] = gpus[gpu]
    elif isinstance(gpu, dict) and "base" in gpu:
        base_name = gpu["base"]
        if not isinstance(base_name, str) or base_name not in gpus:
            raise ProfileError(
                f"{where}: gpu.base {base_name!r} is not in the GPU catalogue"
                f"{did_you_mean(str(base_name), gpus)}; known: {known_gpus}"
            )
        data["gpu"] = _merge(gpus[base_name], {k: v for k, v in gpu.items() if k != "base"})
    if "scale_up" in data:
        data["scale_up"] = _tier_dict(data["scale_up"], links, "scale_up", where)
    if data.get("scale_out") is not None:
        data["scale_out"] = _tier_dict(data["scale_out"], links, "scale_out", where)
    try:
        return System.model_validate(data)
    except ValidationError as err:
        raise ProfileError(describe_validation_error(err, where, System)) from None


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
    tier = _scale_out_from_link(link, nics_per_node)
    return system.model_copy(update={"scale_out": tier, "name": f"{system.name}+{link.name}:{nics_per_node}"})


def _scale_out_from_link(link: LinkSpec, nics_per_node: int) -> ScaleOutTier:
    return ScaleOutTier(
        kind=link.kind,  # type: ignore[arg-type]
        link=link.name,
        nics_per_node=nics_per_node,
        nic_bw_bytes_per_s=link.bw_bytes_per_s,
        efficiency=link.efficiency,
        latency_s=link.latency_s,
        in_network_reduction=link.in_network_reduction,
        nccl_protocols=link.nccl_protocols,
        nccl_buffsize_bytes=link.nccl_buffsize_bytes,
    )


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
        links_per_gpu=link.links_per_gpu,
        link_bw_bytes_per_s=link.link_bw_bytes_per_s,
    )


def compose_system(
    name: str,
    gpu: dict[str, Any] | GPU,
    gpus_per_node: int,
    scale_up: LinkSpec,
    scale_out: LinkSpec | None = None,
    nics_per_node: int | None = None,
    *,
    domain_size: int | None = None,
    description: str = "",
) -> System:
    """A :class:`System` built from catalogue pieces, without YAML ("64 H100 over 400GbE").

    ``scale_up`` joins the ``gpus_per_node`` GPUs of a node (``domain_size`` defaults to
    ``gpus_per_node``; give 72 for an NVL72-style rack). ``scale_out`` adds ``nics_per_node``
    NICs of that link per node; the default is one NIC per GPU (the rail-optimised layout of
    DGX/HGX nodes and the cloud instances in the library). ``scale_out=None`` is a single box.
    """
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise ProfileError(f"gpus_per_node {gpus_per_node!r} must be a whole number ≥ 1, e.g. 8")
    if scale_up.tier != "scale_up":
        raise ProfileError(
            f"scale-up link {scale_up.name!r} is a network link; "
            f"pick one of the scale_up links such as nvlink4 or pcie4"
        )
    if scale_out is not None and scale_out.tier != "scale_out":
        raise ProfileError(
            f"scale-out link {scale_out.name!r} joins GPUs inside a node; "
            f"pick a network link such as ib-ndr or eth-100g"
        )
    if nics_per_node is not None and scale_out is None:
        raise ProfileError(f"nics_per_node {nics_per_node} given without a scale-out link; name one, e.g. ib-ndr")
    nics = gpus_per_node if nics_per_node is None else nics_per_node
    if isinstance(nics, bool) or not isinstance(nics, int) or nics < 1:
        raise ProfileError(f"nics_per_node {nics_per_node!r} must be a whole number ≥ 1, e.g. 8 (one per GPU)")
    gpu_model = gpu if isinstance(gpu, GPU) else None
    if gpu_model is None:
        try:
            gpu_model = GPU.model_validate(gpu)
        except ValidationError as err:
            raise ProfileError(describe_validation_error(err, "gpu", GPU)) from None
    try:
        return System(
            name=name,
            description=description
            or f"{gpus_per_node}x {gpu_model.name} over {scale_up.name}"
            + (f", {nics}x {scale_out.name} per node" if scale_out else ", single box"),
            gpu=gpu_model,
            gpus_per_node=gpus_per_node,
            scale_up=scale_up_from_link(scale_up, domain_size or gpus_per_node),
            scale_out=_scale_out_from_link(scale_out, nics) if scale_out else None,
            sources=[f"composed from the link catalogue: {scale_up.name}"
                     + (f" + {nics}x {scale_out.name}" if scale_out else "") + f", gpu {gpu_model.name}"],
        )
    except ValidationError as err:
        raise ProfileError(describe_validation_error(err, f"system {name}", System)) from None
