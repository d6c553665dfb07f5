"""Reading hardware profiles from YAML: the shipped library and user files.

Layout of a profile directory::

    links.yaml          # link catalogue: name -> LinkSpec fields
    gpus.yaml           # GPU catalogue: name -> GPU fields
    systems/NAME.yaml   # one system per file, naming catalogue entries

The shipped directory is ``commmodel/hardware_profiles`` inside an installed wheel, or the
repository's top-level ``hardware_profiles/`` in a source checkout. Only the safe loader (libyaml's
``CSafeLoader`` when present, ~10× faster)
is used. Every error names the file, the field path and the fix.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from commmodel.errors import ProfileError
from commmodel.hardware.catalogue import LinkSpec, compose_system, resolve_system, with_network
from commmodel.hardware.messages import describe_validation_error, did_you_mean
from commmodel.hardware.models import GPU, System
from commmodel.io.profile_snapshot import snapshot_value
from commmodel.io.yaml_read import read_yaml_file
from commmodel.limits import MAX_NICS_PER_NODE


PROFILES_DIRNAME = "hardware_profiles"
"""Folder name of the library, both in the repository root and inside the installed package
(pyproject's ``[tool.hatch.build.targets.wheel.force-include]`` copies one onto the other)."""


def profiles_dir(package_dir: Path | None = None) -> Path:
    """The shipped profile library: ``commmodel/hardware_profiles`` in an installed wheel, else the
    repository's top-level ``hardware_profiles/`` next to the ``commmodel`` package (source checkout or
    editable install). ``package_dir`` is the ``commmodel`` package folder (default: this install's)."""
    here = (package_dir or Path(__file__).resolve().parent.parent)
    for candidate in (here / PROFILES_DIRNAME, here.parent / PROFILES_DIRNAME):
        if (candidate / "links.yaml").is_file():
            return candidate
    raise ProfileError(
        f"the hardware profile library is missing (looked for links.yaml in {here / PROFILES_DIRNAME} and "
        f"{here.parent / PROFILES_DIRNAME}); reinstall commmodel (pip install .)"
    )


def read_yaml(path: Path) -> Any:
    """Parse one profile YAML file safely; syntax errors and empty files are one-line ProfileErrors.

    A shipped file whose bytes are those the library's snapshot recorded is taken from the snapshot
    (the same value, read ~20× faster: :mod:`commmodel.io.profile_snapshot`); any other file is parsed."""
    shipped = _shipped_dir()
    data = snapshot_value(Path(path), shipped) if shipped is not None else None
    return parse_profile_yaml(path) if data is None else data


def parse_profile_yaml(path: Path) -> Any:
    """:func:`read_yaml` without the snapshot: always the YAML parser (what the snapshot is built from)."""
    data = read_yaml_file(path, ProfileError, "give a profile name (see `commmodel profiles list`) or a YAML path")
    if data is None:
        raise ProfileError(f"{path}: the file is empty; a profile needs at least name, gpu, gpus_per_node and scale_up")
    return data


@functools.lru_cache(maxsize=1)
def _shipped_dir() -> Path | None:
    """:func:`profiles_dir`, or None where the library is missing (then every file is parsed, and the
    loaders that need the library say it is missing)."""
    try:
        return profiles_dir()
    except ProfileError:
        return None


def _library_dir() -> Path:
    """:func:`profiles_dir`, found once per process (each call resolves and stats paths, ~60 µs, and a query
    asks ~20 times: issue 17); the same error where the library is missing."""
    return _shipped_dir() or profiles_dir()


def load_links(directory: Path | None = None) -> dict[str, LinkSpec]:
    """The link catalogue of ``directory`` (default: the shipped library), name -> :class:`LinkSpec`.

    Read once per process and directory: ``load_links()`` and ``load_links(None)`` share one cache entry.
    """
    return _links_in(directory or _library_dir())


@functools.lru_cache(maxsize=8)
def _links_in(directory: Path) -> dict[str, LinkSpec]:
    return read_link_catalogue(directory / "links.yaml")


def _catalogue(path: Path, noun: str, example: str, fields: str, model: Any) -> list[tuple[str, dict, Any]]:
    """(name, raw mapping, validated ``model``) for each entry of a catalogue file; one-line errors."""
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: must map {noun} names to {noun} specs ({example})")
    entries = []
    for name, spec in raw.items():
        if not isinstance(spec, dict):
            raise ProfileError(f"{path}: {name}: a {noun} spec must be a mapping with {fields}, "
                               f"got {type(spec).__name__}")
        data = {"name": str(name), **spec}
        try:
            entries.append((str(name), data, model.model_validate(data)))
        except ValidationError as err:
            raise ProfileError(describe_validation_error(err, f"{path}: {name}", model)) from None
    return entries


def read_link_catalogue(path: Path) -> dict[str, LinkSpec]:
    """Read and validate one ``links.yaml`` (uncached: for ``profiles validate``)."""
    return {name: spec for name, _, spec in _catalogue(
        path, "link", "nvlink4: {tier: scale_up, ...}", "tier, kind, bw_bytes_per_s, efficiency and latency_s",
        LinkSpec)}


def load_gpus(directory: Path | None = None) -> dict[str, dict[str, Any]]:
    """The GPU catalogue of ``directory`` as raw mappings (validated here, merged into systems later; cached)."""
    return _gpus_in(directory or _library_dir())


@functools.lru_cache(maxsize=8)
def _gpus_in(directory: Path) -> dict[str, dict[str, Any]]:
    return read_gpu_catalogue(directory / "gpus.yaml")


def read_gpu_catalogue(path: Path) -> dict[str, dict[str, Any]]:
    """Read and validate one ``gpus.yaml`` (uncached: for ``profiles validate``)."""
    return {name: data for name, data, _ in _catalogue(
        path, "GPU", "h100-sxm-80gb: {peak_flops_per_s: ...}",
        "peak_flops_per_s, hbm_bytes, hbm_bw_bytes_per_s and matmul_efficiency", GPU)}


def system_paths(directory: Path | None = None) -> dict[str, Path]:
    """Shipped system names -> files."""
    root = (directory or _library_dir()) / "systems"
    return {p.stem: p for p in sorted(root.glob("*.yaml"))}


def load_system_file(path: Path, catalogue_dir: Path | None = None) -> System:
    """Read and resolve one system YAML file (shipped or user-written).

    Catalogue names resolve against ``catalogue_dir``'s links.yaml/gpus.yaml (default: the shipped ones).
    """
    return _resolve_file(read_yaml(Path(path)), path, catalogue_dir)


def _resolve_file(raw: Any, path: Path, catalogue_dir: Path | None = None) -> System:
    """:func:`load_system_file` on the already parsed YAML ``raw`` of ``path``."""
    if isinstance(raw, dict) and "name" not in raw:
        raw = {"name": Path(path).stem, **raw}
    return resolve_system(raw, load_links(catalogue_dir), load_gpus(catalogue_dir), where=str(path))


@functools.lru_cache(maxsize=1)
def _shipped_paths() -> dict[str, Path]:
    """:func:`system_paths` of the shipped library, listed once per process (``list_systems`` would
    otherwise list the folder again for each of its ~30 systems)."""
    return system_paths()


@functools.lru_cache(maxsize=64)
def _raw_named(name: str) -> Any:
    """The parsed YAML of a shipped system, read once per process (``ShippedSystems.with_gpus`` looks at it
    before :func:`_load_named` validates it)."""
    return read_yaml(_shipped_paths()[name])


@functools.lru_cache(maxsize=64)
def _load_named(name: str) -> System:
    return _resolve_file(_raw_named(name), _shipped_paths()[name])


SYSTEM_ALIASES: dict[str, str] = {
    "dgx-b200": "hgx-b200", "dgx-b300": "hgx-b300", "dgx-h200": "hgx-h200",
    "dgx-gb200": "gb200-nvl72", "dgx-gb300": "gb300-nvl72",
}
"""Names users type for a shipped system by NVIDIA's DGX name -> the profile that describes the same node: a DGX B200,
B300 or H200 is the HGX board of 8 GPUs with one compute ConnectX NIC per GPU (NVIDIA DGX B200 / B300 / H200
datasheets: 8 ConnectX-7 400 Gb/s, 8 ConnectX-8 800 Gb/s, 8 ConnectX-7 400 Gb/s for compute); DGX GB200 / GB300
are the NVL72 racks. Resolved by :func:`load_system`; the loaded
system keeps the profile's name, so every output says which one priced it."""


PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
"""A profile name a command writes: letters, digits and ``. _ + -`` (it is typed after --system and printed in every
answer; a newline, a slash or a space in it broke both)."""


def check_new_profile_name(name: str, error: type[Exception], said: str) -> str:
    """``name`` for a profile a command writes (``said``: how the user gave it, e.g. "--name X"), or ``error`` when it
    is not a :data:`PROFILE_NAME` or is a shipped system's name or alias (a profile of one's own under it would be
    taken for the catalogue's in every answer that names it)."""
    if not name.strip():
        raise error(f"{said} is blank; give the profile a name, e.g. --name my-cluster")
    if not PROFILE_NAME.fullmatch(name):
        raise error(f"{said}: a profile name is letters, digits and . _ + - (it follows --system and is printed in "
                    f"every answer), e.g. my-cluster")
    if name in _shipped_paths() or name in SYSTEM_ALIASES:
        raise error(f"{said}: {name!r} is a shipped profile's name, and a profile of your own under it would be taken "
                    f"for the catalogue's; give another, e.g. --name {name}-calibrated")
    return name


def load_system(name_or_path: str) -> System:
    """A system by library name (``dgx-h100``) or by path to a YAML file. A named one is parsed once per process and
    each call gets its own deep copy (0.1 ms): the models are frozen but hold dicts, so a notebook's what-if edit of
    one loaded system (``s.gpu.peak_flops_per_s["bf16"] = ...``) must not reach the next load's baseline."""
    known = system_paths()
    name_or_path = SYSTEM_ALIASES.get(name_or_path, name_or_path) if name_or_path not in known else name_or_path
    if name_or_path in known:
        return _load_named(name_or_path).model_copy(deep=True)
    if not str(name_or_path).strip():  # Path("") is the current folder
        raise ProfileError("the system name is empty; run `commmodel profiles list` for names or pass a YAML path")
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"} or os.path.exists(path):  # os.path: False, not OSError, for a name too long
        return load_system_file(path)
    lowered = str(name_or_path).lower()  # "DGX-H100": every shipped name is lower case
    if lowered != name_or_path and (lowered in known or lowered in SYSTEM_ALIASES):
        return load_system(lowered)
    raise ProfileError(
        f"unknown system {name_or_path!r}{did_you_mean(name_or_path, known)}; "
        f"run `commmodel profiles list` for names or pass a YAML path"
    )


def list_systems() -> list[System]:
    """Every shipped system, resolved."""
    return [_load_named(name) for name in system_paths()]


class ShippedSystems(Mapping[str, System]):
    """The shipped systems by name (``{s.name: s for s in list_systems()}``: shipped names are file stems),
    each read and validated on first use: a query needs one or a few of ~30 (issue 17, ~17 ms for all)."""

    def __init__(self) -> None:
        self._paths = _shipped_paths()

    def __getitem__(self, name: str) -> System:
        if name not in self._paths:
            raise KeyError(name)
        return _load_named(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def with_gpus(self, gpu_names: list[str]) -> list[System]:
        """The systems whose GPU is one of ``gpu_names``, in name order: a light pass over the raw YAML
        skips a file whose ``gpu:`` names a catalogue entry of another name; any other file is validated."""
        gpus = load_gpus()
        out = []
        for name in self._paths:
            raw = _raw_named(name)
            gpu = raw.get("gpu") if isinstance(raw, dict) else None
            entry = gpus.get(gpu) if isinstance(gpu, str) else None
            if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"] not in gpu_names:
                continue
            system = self[name]
            if system.gpu.name in gpu_names:
                out.append(system)
        return out


def _network_links(links: dict[str, LinkSpec]) -> str:
    return ", ".join(sorted(n for n, s in links.items() if s.tier == "scale_out"))


def parse_network(spec: str) -> tuple[LinkSpec, int | None]:
    """Read ``--network LINK[:N]`` (``ib-ndr:8``) into a catalogue link and an optional NIC count."""
    name, colon, count = spec.strip().partition(":")
    links = load_links()
    name = name.lower() if name not in links and name.lower() in links else name  # "IB-NDR": names are lower case
    if name not in links:
        raise ProfileError(
            f"--network {spec!r}: unknown link {name!r}{did_you_mean(name, links)}; "
            f"network links: {_network_links(links)}"
        )
    if links[name].tier != "scale_out":
        raise ProfileError(
            f"--network {spec!r}: {name} joins GPUs inside a node, not nodes; "
            f"pick a network link: {_network_links(links)}"
        )
    nics = None
    if colon:
        if not count.strip().isdigit() or not 1 <= int(count) <= MAX_NICS_PER_NODE:
            raise ProfileError(
                f"--network {spec!r}: NIC count {count!r} must be a whole number ≥ 1 (at most {MAX_NICS_PER_NODE}) after the colon, "
                f"e.g. {name}:8 (or drop ':N' to keep the system's NIC count)"
            )
        nics = int(count)
    return links[name], nics


def load_system_with_network(name_or_path: str, network: str | None = None) -> System:
    """:func:`load_system`, then replace its scale-out tier when ``--network`` was given."""
    system = load_system(name_or_path)
    if network is not None and not network.strip():
        raise ProfileError("--network is empty; give a catalogue LINK[:NICS], e.g. ib-ndr:8, or leave it out")
    if network:
        link, nics = parse_network(network)
        system = with_network(system, link, nics)
    return system


def compose_from_names(
    gpu_name: str,
    gpus_per_node: int,
    scale_up_link: str,
    scale_out_link: str | None = None,
    nics_per_node: int | None = None,
    *,
    name: str | None = None,
    domain_size: int | None = None,
) -> System:
    """:func:`~commmodel.hardware.catalogue.compose_system` from catalogue names.

    ``compose_from_names("h100-sxm-80gb", 8, "nvlink4", "eth-400g", 1)`` is an 8x H100 node with one
    400 GbE NIC. Unknown names fail with the closest catalogue names; ``nics_per_node`` defaults to one
    NIC per GPU.
    """
    gpus = load_gpus()
    links = load_links()
    if gpu_name not in gpus:
        raise ProfileError(
            f"gpu {gpu_name!r} is not in the GPU catalogue{did_you_mean(gpu_name, gpus)}; "
            f"known: {', '.join(sorted(gpus))}"
        )
    for role, link_name in (("scale-up", scale_up_link), ("scale-out", scale_out_link)):
        if link_name is not None and link_name not in links:
            raise ProfileError(
                f"{role} link {link_name!r} is not in the link catalogue{did_you_mean(link_name, links)}; "
                f"known: {', '.join(sorted(links))}"
            )
    out = links[scale_out_link] if scale_out_link is not None else None
    label = name or (f"{gpus_per_node}x-{gpu_name}-{scale_up_link}"
                     + (f"+{scale_out_link}:{nics_per_node or gpus_per_node}" if out else ""))
    return compose_system(label, gpus[gpu_name], gpus_per_node, links[scale_up_link], out, nics_per_node,
                          domain_size=domain_size)
