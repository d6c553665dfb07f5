"""Reading hardware profiles from YAML: the shipped library and user files.

Layout of a profile directory::

    links.yaml          # link catalogue: name -> LinkSpec fields
    gpus.yaml           # GPU catalogue: name -> GPU fields
    systems/NAME.yaml   # one system per file, naming catalogue entries

The shipped directory is ``commmodel/hardware_profiles`` inside an installed wheel, or the
repository's top-level ``hardware_profiles/`` in a source checkout. Only ``yaml.safe_load``
is used. Every error names the file, the field path and the fix.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from commmodel.errors import ProfileError
from commmodel.hardware.catalogue import LinkSpec, describe_validation_error, resolve_system, with_network
from commmodel.hardware.models import GPU, System


def profiles_dir() -> Path:
    """The shipped profile library (installed package data first, then the source checkout)."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "hardware_profiles", here.parent / "hardware_profiles"):
        if (candidate / "links.yaml").is_file():
            return candidate
    raise ProfileError(
        f"the hardware profile library is missing (looked in {here / 'hardware_profiles'} and "
        f"{here.parent / 'hardware_profiles'}); reinstall commmodel"
    )


def read_yaml(path: Path) -> Any:
    """Parse one YAML file safely, turning syntax errors into a one-line ProfileError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file; give a profile name (see `commmodel profiles list`) or a YAML path") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(f"{path}: cannot read ({err})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ProfileError(f"{path}:{where}: malformed YAML ({problem}); fix the syntax") from None
    if data is None:
        raise ProfileError(f"{path}: the file is empty; a profile needs at least name, gpu, gpus_per_node and scale_up")
    return data


@functools.lru_cache(maxsize=8)
def load_links(directory: Path | None = None) -> dict[str, LinkSpec]:
    """The link catalogue, name -> :class:`LinkSpec`."""
    path = (directory or profiles_dir()) / "links.yaml"
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: must map link names to link specs")
    links = {}
    for name, spec in raw.items():
        try:
            links[name] = LinkSpec.model_validate({"name": name, **(spec or {})})
        except ValidationError as err:
            raise ProfileError(describe_validation_error(err, f"{path}: {name}")) from None
    return links


@functools.lru_cache(maxsize=8)
def load_gpus(directory: Path | None = None) -> dict[str, dict[str, Any]]:
    """The GPU catalogue as raw mappings (validated here, merged into systems later)."""
    path = (directory or profiles_dir()) / "gpus.yaml"
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: must map GPU names to GPU specs")
    gpus = {}
    for name, spec in raw.items():
        data = {"name": name, **(spec or {})}
        try:
            GPU.model_validate(data)
        except ValidationError as err:
            raise ProfileError(describe_validation_error(err, f"{path}: {name}")) from None
        gpus[name] = data
    return gpus


def system_paths(directory: Path | None = None) -> dict[str, Path]:
    """Shipped system names -> files."""
    root = (directory or profiles_dir()) / "systems"
    return {p.stem: p for p in sorted(root.glob("*.yaml"))}


def load_system_file(path: Path) -> System:
    """Read and resolve one system YAML file (shipped or user-written)."""
    raw = read_yaml(path)
    if isinstance(raw, dict) and "name" not in raw:
        raw = {"name": path.stem, **raw}
    return resolve_system(raw, load_links(), load_gpus(), where=str(path))


@functools.lru_cache(maxsize=64)
def _load_named(name: str) -> System:
    return load_system_file(system_paths()[name])


def load_system(name_or_path: str) -> System:
    """A system by library name (``dgx-h100``) or by path to a YAML file."""
    known = system_paths()
    if name_or_path in known:
        return _load_named(name_or_path)
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"} or path.exists():
        return load_system_file(path)
    close = [n for n in known if name_or_path.lower().replace("_", "-") in n or n in name_or_path.lower()]
    hint = f" (did you mean {', '.join(close[:3])}?)" if close else ""
    raise ProfileError(
        f"unknown system {name_or_path!r}{hint}; run `commmodel profiles list` for names or pass a YAML path"
    )


def list_systems() -> list[System]:
    """Every shipped system, resolved."""
    return [_load_named(name) for name in system_paths()]


def parse_network(spec: str) -> tuple[LinkSpec, int | None]:
    """Read ``--network LINK[:N]`` (``ib-ndr:8``) into a catalogue link and an optional NIC count."""
    name, _, count = spec.partition(":")
    links = load_links()
    if name not in links:
        raise ProfileError(f"--network {spec!r}: unknown link {name!r}; known: {', '.join(sorted(links))}")
    nics = None
    if count:
        if not count.isdigit() or int(count) < 1:
            raise ProfileError(f"--network {spec!r}: NIC count {count!r} must be a whole number ≥ 1, e.g. ib-ndr:8")
        nics = int(count)
    return links[name], nics


def load_system_with_network(name_or_path: str, network: str | None = None) -> System:
    """:func:`load_system`, then replace its scale-out tier when ``--network`` was given."""
    system = load_system(name_or_path)
    if network:
        link, nics = parse_network(network)
        system = with_network(system, link, nics)
    return system
