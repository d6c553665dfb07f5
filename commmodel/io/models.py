"""Reading model shapes from YAML files.

A model file holds the fields of :class:`commmodel.workload.model.TransformerModel`, optionally on top
of a preset::

    name: my-13b
    preset: llama2-13b        # optional: start from a preset and override the fields below
    num_layers: 48
    seq_len: 8192

Only ``yaml.safe_load`` is used; every error names the file, the field and the fix.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from commmodel.errors import WorkloadError
from commmodel.workload.model import TransformerModel


def model_from_mapping(data: dict, where: str) -> TransformerModel:
    """A model from a dictionary of fields (``preset`` names a base preset); errors say ``where``."""
    from commmodel.workload.presets import ALIASES, PRESETS

    data = dict(data)
    name = data.pop("name", None) or Path(where).stem
    preset = data.pop("preset", None)
    if preset is not None:
        key = ALIASES.get(str(preset).lower(), str(preset).lower())
        if key not in PRESETS:
            raise WorkloadError(f"{where}: unknown preset {preset!r}; known: {', '.join(PRESETS)}")
        base = PRESETS[key].model_dump()
        # Derived widths follow their parents unless given: new heads re-derive kv-heads, new hidden the ffn.
        if "num_heads" in data and "num_kv_heads" not in data and base["num_kv_heads"] == base["num_heads"]:
            base.pop("num_kv_heads")
        if "hidden_size" in data and "ffn_hidden_size" not in data:
            base.pop("ffn_hidden_size")
        data = {**base, **data}
    data["name"] = name
    try:
        return TransformerModel(**data)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(model)"
        raise WorkloadError(
            f"{where}: field {field}: {first['msg']} (got {first.get('input')!r}); fields are "
            f"{', '.join(TransformerModel.model_fields)}"
        ) from None
    except TypeError as err:
        raise WorkloadError(f"{where}: {err}; give the model fields as a mapping") from None


def load_model(path: str | Path) -> TransformerModel:
    """The model described by the YAML file at ``path``."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkloadError(f"{file}: no such model file; give a preset name, a parameter count (1B) or a YAML path") from None
    except (OSError, UnicodeDecodeError) as err:
        raise WorkloadError(f"{file}: cannot read ({err})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise WorkloadError(f"{file}:{where}: malformed YAML; fix the syntax") from None
    if not isinstance(data, dict):
        raise WorkloadError(f"{file}: a model file must be a mapping of fields (num_layers, hidden_size, ...)")
    return model_from_mapping(data, str(file))


def resolve_model(spec: str) -> TransformerModel:
    """``--model``: a model YAML path (ends in .yaml/.yml, or an existing path with a "/"), else a preset
    name or a parameter count (:func:`commmodel.workload.presets.get_model`)."""
    from commmodel.workload.presets import get_model

    text = spec.strip()
    if text.endswith((".yaml", ".yml")) or ("/" in text and Path(text).exists()):
        return load_model(text)
    return get_model(text)
