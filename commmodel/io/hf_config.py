"""A Hugging Face ``config.json`` (local file, or a folder holding one) as a :class:`TransformerModel`.

Field names are those of ``transformers`` (``LlamaConfig``, ``MistralConfig``, ``Qwen2Config``,
``MixtralConfig`` in ``src/transformers/models/*/configuration_*.py`` @ v4.44.0): ``hidden_size``,
``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads`` (absent = multi-head),
``intermediate_size``, ``vocab_size``, ``max_position_embeddings``, ``hidden_act``,
``tie_word_embeddings``, ``num_local_experts``/``num_experts_per_tok`` (Mixtral). GPT-2-style configs
(``n_embd``, ``n_layer``, ``n_head``, ``n_positions``) are read too. Gated MLP: the SiLU/GELU-gated
architectures (``*ForCausalLM`` of Llama, Mistral, Mixtral, Qwen2, Gemma) or ``hidden_act`` silu/swiglu.
Approximation stated: Qwen2's q/k/v biases (h + 2·kv per layer, < 0.01% of the total) are not counted.
Local attention: ``sliding_window`` with ``layer_types`` / ``sliding_window_pattern`` / ``use_sliding_window``
(Mistral, Gemma 2/3, gpt-oss, Qwen2 configuration_*.py) sets ``attention_window`` and the share of local blocks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from commmodel.errors import WorkloadError
from commmodel.workload.model import TransformerModel

GATED_ARCHITECTURES = ("Llama", "Mistral", "Mixtral", "Qwen2", "Gemma", "Phi3", "Olmo")
"""Architecture name prefixes whose MLP is gated (three matrices): their modeling_*.py MLP classes."""

_ALIASES = {"hidden_size": ("hidden_size", "n_embd", "d_model"),
            "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
            "num_heads": ("num_attention_heads", "n_head"),
            "vocab_size": ("vocab_size",)}
"""Required fields and the names configs use for them."""

_CONFIG_NAMES = {"num_kv_heads": "num_key_value_heads", "ffn_hidden_size": "intermediate_size",
                 "seq_len": "max_position_embeddings", "num_experts": "num_local_experts",
                 "experts_per_token": "num_experts_per_tok"}
"""The other model fields read from a config.json, by the name the file gives them (for error messages)."""


def config_path(path: Path) -> Path:
    """``path`` itself, or ``path/config.json`` when it is a folder."""
    return path / "config.json" if os.path.isdir(path) else path  # os.path: no OSError for a name too long


def is_hf_config(spec: str) -> bool:
    """``--model`` names a JSON file or a folder with a config.json."""
    # os.path's tests answer False where Path's raise (a name too long: a 5000-digit size); the reader says why
    return spec.endswith(".json") or (os.path.isdir(spec) and os.path.isfile(os.path.join(spec, "config.json")))


_GIVE = "give a Hugging Face config.json or the folder holding it"


def _no_constant(name: str) -> None:
    raise WorkloadError(f"{name} is not a number a config.json may hold")  # json.loads accepts NaN/Infinity


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's fields, each key once: json.loads keeps the last of two ``hidden_size`` silently (a config
    edited by hand, two models merged), so a repeated key is refused, as the YAML reader refuses it."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise WorkloadError(f"the field {key!r} is given twice ({seen[key]!r}, then {value!r}): keep one")
        seen[key] = value
    return seen


def _read(file: Path) -> dict[str, Any]:
    from commmodel.io.yaml_read import read_user_bytes, too_many_digits

    raw = read_user_bytes(file, WorkloadError, _GIVE)  # missing, a folder, a device, or too large: one line
    try:
        text = raw.decode("utf-8")
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, WorkloadError) as err:
        why = "nested too deep" if isinstance(err, RecursionError) else err
        raise WorkloadError(f"{file}: not JSON ({why}); expected a Hugging Face config.json") from None
    except ValueError as err:  # int() of a 5000-digit number
        raise too_many_digits(file, text, WorkloadError) or WorkloadError(f"{file}: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise WorkloadError(f"{file}: a config.json is a JSON object of fields (hidden_size, ...)")
    return data


QK_NORM_MODEL_TYPES = frozenset({"qwen3", "qwen3_moe", "olmo2", "gemma3_text", "gemma3"})
"""Hugging Face ``model_type``s whose attention norms each query and key head (transformers: ``Qwen3Attention``,
``Qwen3MoeAttention``, ``Olmo2Attention`` and ``Gemma3Attention`` build ``q_norm``/``k_norm``); the config has no
field for it, so the architecture decides (:attr:`~commmodel.workload.model.TransformerModel.qk_layernorm`)."""


def _pick(data: dict, names: tuple[str, ...]) -> Any:
    return next((data[n] for n in names if data.get(n) is not None), None)


def _gated(data: dict) -> bool:
    archs = " ".join(data.get("architectures") or []) + " " + str(data.get("model_type", "")).capitalize()
    act = str(data.get("hidden_act", data.get("activation_function", ""))).lower()
    return any(a in archs for a in GATED_ARCHITECTURES) or act in ("silu", "swiglu", "swish")


def model_from_hf(spec: str | Path, seq_len: int | None = None) -> TransformerModel:
    """Read a config.json into a model; an unreadable or incomplete file is one :class:`WorkloadError`."""
    file = config_path(Path(spec))
    data = _read(file)
    found = {field: _pick(data, names) for field, names in _ALIASES.items()}
    missing = [names[0] for field, names in _ALIASES.items() if found[field] is None]
    if missing:
        raise WorkloadError(f"{file}: config.json is missing {', '.join(missing)}; a decoder config needs "
                            "hidden_size, num_hidden_layers, num_attention_heads and vocab_size")
    flags = [f"{names[0]} {json.dumps(found[field])}" for field, names in _ALIASES.items() if isinstance(found[field], bool)]
    if flags:  # pydantic would read true as 1
        raise WorkloadError(f"{file}: {', '.join(flags)}: a count, not true/false; write a whole number")
    gated = _gated(data)
    positions = _pick(data, ("max_position_embeddings", "n_positions"))
    is_gpt2 = "n_embd" in data
    fields = {**found, "name": data.get("_name_or_path") or data.get("model_type") or file.parent.name or "hf-model",
              "num_kv_heads": data.get("num_key_value_heads") or found["num_heads"],
              "seq_len": seq_len or positions or 2048, "gated_mlp": gated,
              "bias": bool(is_gpt2 or data.get("attention_bias", False) or data.get("mlp_bias", False)),
              "norm": "layernorm" if is_gpt2 else "rmsnorm",
              "position_embedding": "learned" if is_gpt2 else "rope",
              "tied_embeddings": bool(data.get("tie_word_embeddings", is_gpt2))}
    inner = _pick(data, ("intermediate_size", "n_inner", "ffn_dim"))
    if inner is not None:
        fields["ffn_hidden_size"] = inner
    fields.update(_local_attention(data))
    if str(data.get("model_type", "")) in QK_NORM_MODEL_TYPES:
        fields["qk_layernorm"] = True
    if data.get("num_local_experts"):
        fields["num_experts"] = data["num_local_experts"]
        fields["experts_per_token"] = data.get("num_experts_per_tok") or 1
    elif data.get("num_experts") or data.get("n_routed_experts"):
        raise WorkloadError(f"{file}: this MoE layout (num_experts/n_routed_experts, shared experts) is not "
                            "modelled yet; only Mixtral-style num_local_experts/num_experts_per_tok is")
    return _validated(fields, file)


def _local_attention(data: dict) -> dict[str, Any]:
    """``attention_window`` and ``local_attention_fraction`` from a config's sliding window: ``layer_types`` (gpt-oss,
    Gemma 2/3: the share of "sliding_attention" blocks), else Gemma 3's ``sliding_window_pattern`` p (p − 1 local
    blocks in p), else every block (Mistral 7B v0.1); none where ``use_sliding_window`` is false (Qwen2's default) or
    the window is null (Mixtral)."""
    window = data.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or window < 1 or data.get("use_sliding_window") is False:
        return {}
    types = data.get("layer_types")
    if isinstance(types, list) and types:
        share = sum("sliding" in str(t) for t in types) / len(types)
    elif isinstance(data.get("sliding_window_pattern"), int) and data["sliding_window_pattern"] >= 1:
        share = (data["sliding_window_pattern"] - 1) / data["sliding_window_pattern"]
    else:
        share = 1.0
    return {"attention_window": window, "local_attention_fraction": share} if share > 0 else {}


def _validated(fields: dict[str, Any], file: Path) -> TransformerModel:
    """The model, or one line naming the file and the first bad field (its config.json name where it has one)."""
    from pydantic import ValidationError

    from commmodel.io.models import check_model_size

    try:
        model = TransformerModel(**fields)
    except ValidationError as err:
        first = err.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        field = ".".join(str(p) for p in first["loc"])
        field = _CONFIG_NAMES.get(field) or _ALIASES.get(field, (field,))[0] if field else ""
        got = first.get("input")
        shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
        raise WorkloadError(f"{file}: {field + ': ' if field else ''}{message}{shown}; fix the config.json") from None
    return check_model_size(model, str(file))
