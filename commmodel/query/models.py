"""Which preset a model mention names: "llama 70b" is a Llama preset of 70B, never a GPT shape.

Rules (each choice is said in the parsed notes):

- a family word plus a size picks that family's preset of that size. When several generations have
  one ("llama 70b": llama2-70b and llama3-70b) the newest generation wins (the highest version number in
  the preset name) and the note names the others, so the reader can say "llama2-70b" instead;
- a family that has presets but none of that size is an error listing the family's presets (a GPT
  shape would silently be another model);
- "MoE" / "mixture of experts" names the mixture-of-experts presets (mixtral-8x7b today);
- a family without presets (falcon, qwen ...) is left to the answer step, which builds a GPT-style
  shape of the size and says so.
"""

from __future__ import annotations

import re

from commmodel.errors import QueryError
from commmodel.query.mentions import ModelMention

MOE_FAMILY = "moe"
"""Family given to "MoE" / "mixture of experts" (any preset with experts)."""
DEFAULT_MOE_PRESET = "mixtral-8x7b"
"""What a bare "MoE" reads as: the most widely benchmarked open mixture of experts (Jiang et al. 2024,
arXiv:2401.04088), named in the output with the other MoE presets; "newest" would be an arbitrary pick here."""


def _presets() -> dict:
    from commmodel.workload.presets import PRESETS

    return PRESETS


def named_preset_pattern(family_and_size: str) -> tuple[str, dict[str, str], tuple[str, ...]]:
    """(an alternation of the preset names and aliases that a family word and a size cannot spell, longest first,
    any '-' also read as a space or nothing; the written form without separators -> preset key; the scanner's needles,
    each name's part before its first '-', which every match holds as written). ``family_and_size`` is the pattern the
    family scan reads ("llama3-70b", "mixtral 8x7b"): names it already reads are left to it, so "deepseek-v3",
    "qwen3-235b-a22b", "gpt-oss-120b" and "llama4-maverick" are found whole."""
    from commmodel.workload.presets import ALIASES

    names = {name: name for name in _presets()} | {alias: key for alias, key in ALIASES.items()}
    whole = {name: key for name, key in names.items() if not re.fullmatch(family_and_size, name)}
    spelled = sorted(whole, key=len, reverse=True)
    pattern = "(?:" + "|".join(re.escape(n).replace(r"\-", "[ -]?") for n in spelled) + ")"
    needles = tuple(sorted({n.split("-")[0] for n in whole}))
    return pattern, {re.sub(r"[ -]", "", n): key for n, key in whole.items()}, needles


def _split(name: str) -> tuple[str, str]:
    """``llama3-70b`` -> (``llama3``, ``70b``); ``gpt3-1.3b`` -> (``gpt3``, ``1.3b``); a mixture of experts named by
    its total and active sizes by its total: ``qwen3-235b-a22b`` -> (``qwen3``, ``235b``)."""
    moe = re.fullmatch(r"(.+)-(\d+(?:\.\d+)?[kmbt])-a\d+(?:\.\d+)?[kmbt]", name)
    if moe:
        return moe.group(1), moe.group(2)
    family, _, size = name.rpartition("-")
    return family, size


def _generation(family: str) -> float:
    found = re.search(r"(\d+(?:\.\d+)?)$", family)
    return float(found.group(1)) if found else 0.0


def family_presets(family: str) -> list[str]:
    """Preset names of ``family``: exact prefix (``llama3``) or any generation of a bare word (``llama``)."""
    presets = _presets()
    if family == MOE_FAMILY:
        return [n for n, m in presets.items() if m.is_moe]
    exact = [n for n in presets if _split(n)[0] == family]
    if exact:
        return exact
    return [n for n in presets if re.fullmatch(rf"{re.escape(family)}[\d.]+", _split(n)[0])]


def _restated_size(models: list[ModelMention]) -> list[ModelMention] | None:
    """"DeepSeek V3 671B", "mixtral 8x22b 141B": a named preset and a bare size that restates its parameter count
    (:data:`SAME_SIZE_TOLERANCE`) are one model; a size that does not is a QueryError naming both. None when the
    mentions are not one preset and one bare size."""
    named = [x for x in models if x.family is not None]
    bare = [x for x in models if x.family is None and x.num_params is not None]
    if not (len(named) == 1 and len(bare) == 1 and len(models) == 2) or named[0].preset_key not in _presets():
        return None
    preset = _presets()[named[0].preset_key]
    if abs(preset.num_params / bare[0].num_params - 1.0) <= SAME_SIZE_TOLERANCE:
        return named
    raise QueryError(f"{named[0].preset_key} has {preset.num_params / 1e9:.1f}B parameters, not {bare[0].text.upper()}; give "
                     f"the preset alone, or the size alone for a GPT-style shape of that size")


def merge_family_and_size(models: list[ModelMention], text: str) -> list[ModelMention]:
    """"70b llama3": a family without a size and a size without a family are one model said in two places (and a
    preset's name with its own size restated is that preset: :func:`_restated_size`)."""
    restated = _restated_size(models)
    if restated is not None:
        return restated
    families = [x for x in models if x.family and x.size_text is None and x.num_params is None]
    sizes = [x for x in models if x.family is None and x.num_params is not None]
    if not (len(families) == 1 and len(sizes) == 1 and len(models) == 2):
        return models
    fam, size = families[0], sizes[0]
    first, second = sorted((fam, size), key=lambda x: text.lower().find(x.text))
    return [size._replace(family=fam.family, text=f"{first.text} {second.text}")]


def _bare_family_pick(family: str, names: list[str], one_line: bool) -> tuple[str, str]:
    """(preset, why) for a family word without a size: the MoE default, the smallest of a one-generation family,
    else the newest generation."""
    if family == MOE_FAMILY and DEFAULT_MOE_PRESET in names:
        return DEFAULT_MOE_PRESET, "the default"
    if one_line:
        return min(names, key=lambda n: _presets()[n].num_params), "the smallest"
    return max(names, key=lambda n: _generation(_split(n)[0])), "the newest"


def pick_preset(mention: ModelMention) -> tuple[ModelMention, str | None]:
    """``mention`` pointing at the one preset it names (family set to the preset's), and a note when it chose."""
    if mention.family is None:
        return mention, None
    names = family_presets(mention.family)
    if not names:
        return mention, None
    if mention.size_text is None:
        one_line = {_split(n)[0] for n in names} == {mention.family}  # "mixtral": one generation, several sizes
        if mention.family == MOE_FAMILY or len(names) == 1 or one_line:
            chosen, why = _bare_family_pick(mention.family, names, one_line)
            note = f"read {mention.text} as {chosen}" + ("" if len(names) == 1 else
                                                          f" ({why}; also {', '.join(sorted(set(names) - {chosen}))})")
            return _pointing_at(mention, chosen), note
        return mention, None
    sized = [n for n in names if _split(n)[1] == mention.size_text] or _of_size(names, mention.num_params)
    if not sized and mention.family.startswith("gpt"):
        return mention, None  # "GPT 30B" is a GPT shape of that size (the answer step says so)
    if not sized:
        raise QueryError(f"no {mention.family} preset of {mention.size_text.upper()}: the {mention.family} presets "
                         f"are {', '.join(names)}; name one of them, or give the size alone (e.g. "
                         f"{mention.size_text.upper()} params) for a GPT-style shape")
    chosen = max(sized, key=lambda n: _generation(_split(n)[0]))
    others = sorted(set(sized) - {chosen})
    if _split(chosen) == (mention.family, mention.size_text) and not others:
        return mention, None
    note = f"read {mention.text} as {chosen}"
    if others:
        note += f", the newest of {', '.join([chosen, *others])}; name {others[0]} to use it instead"
    return _pointing_at(mention, chosen), note


SAME_SIZE_TOLERANCE = 0.03
"""A size said within 3% of a preset's parameter count names it ("DeepSeek 671B" is deepseek-v3, 671.0e9 parameters;
sizes are quoted to two or three digits)."""


def _of_size(names: list[str], num_params: float | None) -> list[str]:
    """The presets among ``names`` whose parameter count is the said size (:data:`SAME_SIZE_TOLERANCE`)."""
    if not num_params:
        return []
    return [n for n in names if abs(_presets()[n].num_params / num_params - 1.0) <= SAME_SIZE_TOLERANCE]


def _pointing_at(mention: ModelMention, name: str) -> ModelMention:
    family, size = _split(name)
    if f"{family}-{size}" != name:  # "qwen3-235b-a22b", "deepseek-v3": the preset key whole (preset_key reads it)
        family, size = name, None
    model = _presets()[name]
    return mention._replace(family=family, size_text=size, num_params=float(model.num_params))
