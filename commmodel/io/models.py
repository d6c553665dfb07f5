"""Reading model shapes from YAML files.

A model file holds the fields of :class:`commmodel.workload.model.TransformerModel`, optionally on top
of a preset::

    name: my-13b
    preset: llama2-13b        # optional: start from a preset and override the fields below
    num_layers: 48
    seq_len: 8192

Only a safe YAML loader is used (:mod:`commmodel.io.yaml_read`); every error names the file, the field
and the fix.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from pydantic import ValidationError

from commmodel.errors import WorkloadError
from commmodel.io.yaml_read import read_yaml_file
from commmodel.workload.model import TransformerModel

_GIVE = "give a preset name, a parameter count (1B) or a YAML path"
_KEYS = tuple(dict.fromkeys(("name", "preset", *TransformerModel.model_fields)))
_SYNONYMS = {"base": "preset", "extends": "preset", "layers": "num_layers", "hidden": "hidden_size", "heads": "num_heads"}


def _check_keys(data: dict, where: str) -> None:
    """Unknown keys are errors with a did-you-mean (a typo must not fall back to a default); a file with no model
    field at all ("-m /etc/passwd.yaml") is named as not a model, without quoting its lines."""
    if data and not set(map(str, data)) & set(_KEYS):
        fields = ", ".join(_KEYS[:6])
        raise WorkloadError(f"{where}: not a model: none of its {len(data):,} keys is a model field ({fields}, ...); "
                            f"{_GIVE}")
    for key in data:
        if key not in _KEYS:
            close = [_SYNONYMS[key]] if key in _SYNONYMS else difflib.get_close_matches(str(key), _KEYS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise WorkloadError(f"{where}: unknown field {key!r}{hint}; fields are {', '.join(_KEYS)}")


def _check_whole_numbers(data: dict, where: str) -> None:
    """A whole-number field given as text that is not one ("5120 units") is one line naming the field; the model's
    validators would otherwise fail on it with Python's own words and no field."""
    for key, value in data.items():
        field = TransformerModel.model_fields.get(key)
        if field is None or field.annotation is not int or not isinstance(value, str):
            continue
        try:
            int(value)
        except ValueError:
            raise WorkloadError(f"{where}: {key}: {value!r} is not a whole number; write a bare count, e.g. "
                                f"{key}: 5120") from None


def model_from_mapping(data: dict, where: str) -> TransformerModel:
    """A model from a dictionary of fields (``preset`` names a base preset); errors say ``where``."""
    from commmodel.workload.presets import ALIASES, PRESETS

    _check_keys(data, where)
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
    _check_whole_numbers(data, where)
    try:
        model = TransformerModel(**data)
    except ValidationError as err:
        first = err.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        if not first["loc"]:  # a rule across fields: its message already names them and the fix
            raise WorkloadError(message if message.startswith(where) else f"{where}: {message}") from None
        field = ".".join(str(p) for p in first["loc"])
        got = first.get("input")
        shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
        if field == "dtype":  # the list of every field says nothing about a misspelt dtype
            raise WorkloadError(f"{where}: dtype: {message}{shown}") from None
        raise WorkloadError(f"{where}: field {field}: {message}{shown}; fields are {', '.join(_KEYS)}") from None
    except TypeError as err:
        raise WorkloadError(f"{where}: {err}; give the model fields as a mapping") from None
    return check_model_size(model, where)


def check_model_size(model: TransformerModel, where: str) -> TransformerModel:
    """``model`` when it has at most :data:`~commmodel.limits.MAX_NUM_PARAMS` parameters; an extra zero in
    ``--layers``/``--hidden``/``--vocab`` or a config.json is one line, not a priced answer."""
    from commmodel.limits import MAX_NUM_PARAMS

    if model.num_params > MAX_NUM_PARAMS:
        raise WorkloadError(f"{where}: {model.num_params:.3g} parameters with num_layers {model.num_layers}, hidden_size "
                            f"{model.hidden_size}, ffn_hidden_size {model.ffn_hidden_size}, vocab_size {model.vocab_size}, "
                            f"seq_len {model.seq_len}: too large, at most {MAX_NUM_PARAMS:.0e}; check the shape")
    return model


def load_model(path: str | Path) -> TransformerModel:
    """The model described by the YAML file at ``path``."""
    file = Path(path)
    data = read_yaml_file(file, WorkloadError, _GIVE)
    if not isinstance(data, dict):
        raise WorkloadError(f"{file}: a model file must be a mapping of fields (num_layers, hidden_size, ...)")
    return model_from_mapping(data, str(file))


def resolve_model(spec: str) -> TransformerModel:
    """``--model``: a model YAML path (ends in .yaml/.yml, or an existing path with a "/"), else a preset
    name or a parameter count (:func:`commmodel.workload.presets.get_model`)."""
    from commmodel.workload.presets import get_model

    text = spec.strip()
    from commmodel.io.hf_config import is_hf_config, model_from_hf

    if is_hf_config(text):
        return model_from_hf(text)
    if text.endswith((".yaml", ".yml")) or ("/" in text and os.path.exists(text)):  # False, not OSError, if too long
        return load_model(text)
    return get_model(text)
