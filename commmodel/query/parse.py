"""Read a free-text request ("64 H100 over 400GbE, llama3-70b, batch 1024") into a :class:`ParsedQuery`.

Pure and token based: regular expressions from :mod:`commmodel.query.vocab` are matched against a
lower-cased copy of the text, each match is blanked out so that nothing is read twice, and the
words left at the end must all be filler ("on", "with", "train" ...). Anything else is reported
by :class:`~commmodel.errors.QueryError` together with what was understood and example phrasings.
Parts can come in any order. Sizes follow DESIGN §2 where the case says it ("Gb" is gigabits,
"GB" gigabytes); an all-lower-case "gb" is read as bytes and noted.
"""

from __future__ import annotations

import difflib
import re

from commmodel.errors import QueryError
from commmodel.limits import MAX_GPUS, MAX_GPUS_PER_NODE, MAX_NUM_PARAMS
from commmodel.query import vocab
from commmodel.query.models import merge_family_and_size, pick_preset
from commmodel.query.mentions import (  # noqa: F401  (re-exported)
    GpuMention, ModelMention, NetworkMention, ParsedQuery, SystemMention, describe,
)

_NUM = r"(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)"
_WORD_NUMBERS = {"one": 1, "single": 1, "a": 1, "two": 2, "three": 3, "four": 4, "eight": 8, "sixteen": 16,
                 "thirty-two": 32, "sixty-four": 64}
_WORD_NUM = r"(one|single|two|three|four|eight|sixteen|thirty-two|sixty-four)"
_MAX_GPUS = MAX_GPUS
_MAX_BATCH = 100_000_000
_MAX_SEQ = 100_000_000


def _b(pattern: str) -> str:
    """``pattern`` delimited by non-alphanumerics on both sides (safer than \\b next to digits)."""
    return rf"(?<![a-z0-9.]){pattern}(?![a-z0-9])"


def _alt(table: dict[str, str]) -> str:
    return "(?:" + "|".join(f"(?:{p})" for p in table) + ")"


_GPU_ALT = _alt(vocab.GPU_FAMILIES)
_GPU_PHRASE = (rf"(?P<fam>{_GPU_ALT})(?:[ -]?(?P<mem1>\d{{2,3}})[ -]?gb)?(?:[ -]?(?P<form>sxm\d?|pcie|nvl))?"
               rf"(?:[ -]?(?P<mem2>\d{{2,3}})[ -]?gb)?s?(?:[ -]?gpus?)?")


class _Scanner:
    """The query lower-cased (same length as the original), with matched parts blanked out."""

    def __init__(self, text: str) -> None:
        self.original = text
        self.work = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)

    def scan(self, pattern: str) -> list[re.Match[str]]:
        """Every match of ``pattern`` in what is left, consumed."""
        matches = list(re.finditer(pattern, self.work))
        for m in matches:
            self.work = self.work[: m.start()] + " " * (m.end() - m.start()) + self.work[m.end():]
        return matches

    def leftover(self) -> list[str]:
        """Words not consumed and not filler."""
        words = re.findall(r"[^\s,;:!?()\[\]{}\"'`=+/|&]+", self.work)
        out = []
        for word in words:
            word = word.strip(".-_*#~<>")
            if word and word not in vocab.FILLER_WORDS and not re.fullmatch(r"[\W_]+", word):
                out.append(word)
        return out


def _number(text: str, what: str, maximum: float) -> float:
    value = float(text.replace(",", ""))
    if not 0 < value <= maximum:
        raise QueryError(f"{what} {text!r} in the query must lie between 1 and {maximum:g}")
    return value


def _integer(text: str, what: str, maximum: float) -> int:
    value = _number(text, what, maximum)
    if value != int(value):
        raise QueryError(f"{what} {text!r} in the query must be a whole number")
    return int(value)


def _with_suffix(number: str, suffix: str | None, what: str, maximum: float) -> int:
    scale = {"k": 1e3, "m": 1e6, None: 1, "": 1}[suffix]
    value = _number(number, what, maximum) * scale
    if value != int(value) or not 0 < value <= maximum:
        raise QueryError(f"{what} {number}{suffix or ''} in the query must be a whole number between 1 and {maximum:g}")
    return int(value)


def _one(values: list, what: str):
    distinct = list(dict.fromkeys(values))
    if len(distinct) > 1:
        shown = ", ".join(str(getattr(v, "text", v)) for v in distinct)
        raise QueryError(f"the query gives {len(distinct)} different {what} ({shown}); give one")
    return distinct[0] if distinct else None


def _gpu(m: re.Match[str]) -> GpuMention:
    family = next(v for p, v in vocab.GPU_FAMILIES.items() if re.fullmatch(p, m.group("fam")))
    mem = m.group("mem1") or m.group("mem2")
    form = m.group("form")
    return GpuMention(family=family, memory_gb=int(mem) if mem else None,
                      form=("sxm" if form and form.startswith("sxm") else form), position=m.start())


def _scan_what_if(sc: _Scanner, found: dict) -> None:
    for pattern in vocab.WHAT_IF_WORDS:
        for m in sc.scan(_b(pattern)):
            found["what_if"] = True
            if m.group(0).startswith("instead"):
                found["baseline_after_instead_of"] = m.start()


_VENDOR_PREFIXES = ("aws-", "gcp-", "azure-", "oci-")


def _system_pattern(name: str) -> str:
    """``dgx-a100`` -> ``dgx[ -]?a100``; a cloud name also matches without its vendor (``p4d``)."""
    body = name
    vendor = ""
    for prefix in _VENDOR_PREFIXES:
        if name.startswith(prefix):
            vendor, body = prefix[:-1], name[len(prefix):]
    words = [re.escape(w) for w in re.split(r"[-_ ]", body) if w]
    core = r"[ -]?".join(words)
    return rf"(?:{vendor}[ -]?)?{core}" if vendor else core


def _scan_systems(sc: _Scanner, found: dict, system_names: tuple[str, ...]) -> None:
    mentions: list[SystemMention] = []
    nodes: list[int] = []
    gpus: list[int] = []
    node_word = r"(?:[ ]*(?:nodes?|boxes|box|servers?|machines?|hosts?|instances?|vms?))?"
    for name in sorted(system_names, key=len, reverse=True):
        pattern = _system_pattern(name.lower())
        names_gpu = re.match(_GPU_ALT, name.lower()) is not None  # "72 GB200 NVL72" counts GPUs
        for m in sc.scan(_b(rf"(?:(?P<n>\d+)[ ]*(?:x[ ]*)?)?{pattern}s?(?P<unit>{node_word})")):
            mentions.append(SystemMention(name=name, position=m.start()))
            if m.group("n"):
                count = _integer(m.group("n"), "count", _MAX_GPUS)
                (gpus if names_gpu and not m.group("unit").strip() else nodes).append(count)
    found["systems"] = tuple(sorted(mentions, key=lambda x: x.position))
    found["_system_nodes"] = nodes
    found["_system_gpus"] = gpus


def _scan_gpus(sc: _Scanner, found: dict) -> None:
    counts: list[int] = []
    nodes: list[int] = []
    per_node: list[int] = []
    gpus: list[GpuMention] = []
    node_word = r"(?:nodes?|boxes|box|servers?|machines?|hosts?|instances?)"
    for m in sc.scan(_b(rf"{_NUM}[ -]?{node_word}[ ]?(?:of|with|x|×|each with)[ ]?{_NUM}[ ]?(?:x[ ]?)?(?:{_GPU_PHRASE}|gpus?)")):
        nodes.append(_integer(m.group(1), "node count", _MAX_GPUS))
        per_node.append(_integer(m.group(2), "GPUs per node", MAX_GPUS_PER_NODE))
        found["notes"] = (*found.get("notes", ()), f"read {' '.join(m.group(0).split())} as {per_node[-1]} GPUs per "
                          f"node ({nodes[-1] * per_node[-1]} in all); write '{per_node[-1]} GPUs across {nodes[-1]} "
                          f"nodes' for {per_node[-1]} in all")
        if m.group("fam"):
            gpus.append(_gpu(m))
    for m in sc.scan(_b(rf"{_NUM}[ ]?(?:x[ ]?)?(?:{_GPU_PHRASE}|gpus?)?[ ]?(?:per|/|a|each|in each|in a)[ ]?(?:node|box|server|machine|host)")):
        per_node.append(_integer(m.group(1), "GPUs per node", MAX_GPUS_PER_NODE))
        if m.group("fam"):
            gpus.append(_gpu(m))
    for m in sc.scan(_b(rf"{_NUM}(?P<k>k)?[ ]?(?:x|×|\*)?[ ]?{_GPU_PHRASE}")):
        counts.append(_gpu_count(m, found))
        gpus.append(_gpu(m))
    for m in sc.scan(_b(rf"{_GPU_PHRASE}[ ]?(?:x|×)[ ]?(?P<count>\d+)")):
        counts.append(_integer(m.group("count"), "GPU count", _MAX_GPUS))
        gpus.append(_gpu(m))
    for m in sc.scan(_b(rf"{_NUM}(?P<k>k)?[ ]?(?:x[ ]?)?gpus?")):
        counts.append(_gpu_count(m, found))
    for m in sc.scan(_b(rf"(?:{_NUM}|{_WORD_NUM})[ -]*{node_word}")):
        nodes.append(_integer(m.group(1), "node count", _MAX_GPUS) if m.group(1) else _WORD_NUMBERS[m.group(2)])
    for m in sc.scan(_b(_GPU_PHRASE)):
        gpus.append(_gpu(m))
    found["num_gpus"] = _one(counts + found.pop("_system_gpus", []), "GPU counts")
    found["num_nodes"] = _one(nodes + found.pop("_system_nodes", []), "node counts")
    found["gpus_per_node"] = _one(per_node, "GPUs-per-node counts")
    found["gpus"] = tuple(sorted(gpus, key=lambda g: g.position))


def _gpu_count(m: re.Match[str], found: dict) -> int:
    """A GPU count, "16k" included: k is 1024 here (clusters come in powers of two: Llama 3's "16K H100" were
    16,384, arXiv:2407.21783 §3.3), said in the notes."""
    count = _integer(m.group(1), "GPU count", _MAX_GPUS)
    if m.group("k"):
        count *= 1024
        if count > _MAX_GPUS:
            raise QueryError(f"GPU count {m.group(1)}k in the query must lie between 1 and {_MAX_GPUS:,}")
        found["notes"] = (*found.get("notes", ()), f"read {m.group(1)}k GPUs as {count:,} (k = 1024; write "
                          f"{int(m.group(1)) * 1000} for exactly that)")
    return count


def _scan_networks(sc: _Scanner, found: dict) -> None:
    nets: list[NetworkMention] = []
    nic = r"(?:(?P<nics>\d{1,3})[ ]?[x×][ ]?)?"
    rate_unit = r"(?:g|gb|gbit|gbps|gb/s|gbit/s|gig)"

    def add(m: re.Match[str], family: str, link: str | None, rate: float | None) -> None:
        nics = m.groupdict().get("nics")
        nets.append(NetworkMention(family=family, link=link, rate_gbps=rate,
                                   nics_per_node=int(nics) if nics else None, position=m.start()))

    for m in sc.scan(_b(r"(\d+(?:\.\d+)?)[ ]?(?:x|×|times)[ ]?(?:more|as many)[ ]?(?:nics?|hcas?|rails?|network cards?)")):
        factor = _number(m.group(1), "NIC multiplier", 64)
        found["what_if"] = True
        nets.append(NetworkMention(family=f"{factor:g}x NICs", link=None, rate_gbps=None, nics_per_node=None,
                                   position=m.start(), nic_multiplier=factor))
    ib = r"(?:infiniband|ib)"
    for m in sc.scan(_b(rf"{nic}(?:{ib}[ -]?)?(?P<gen>edr|hdr|ndr|xdr)(?:[ -]?(?:100|200|400|800))?(?:[ -]?{ib})?")):
        link, rate = vocab.IB_GENERATIONS[m.group("gen")]
        add(m, "infiniband", link, rate)
    for m in sc.scan(_b(rf"{nic}(?:(?P<rate>\d{{2,3}})[ -]?(?:{rate_unit}[ -]?)?(?:ethernet|eth|gbe|gige)|(?P<rate2>\d{{2,3}})ge|(?:ethernet|eth)[ -]?(?P<rate3>\d{{2,3}})[ -]?{rate_unit}?)")):
        rate = float(m.group("rate") or m.group("rate2") or m.group("rate3"))
        link = f"eth-{int(rate)}g" if int(rate) in vocab.ETHERNET_SPEEDS_GBPS else None
        if link is None:
            raise QueryError(f"Ethernet speed {int(rate)} Gb/s is not in the link catalogue; "
                             f"known: {', '.join(f'{s}GbE' for s in vocab.ETHERNET_SPEEDS_GBPS)}")
        add(m, "ethernet", link, rate)
    for m in sc.scan(_b(rf"{nic}(?:(?P<rate>\d{{3}})[ -]?(?:{rate_unit}[ -]?)?roce(?:[ -]?v2)?|roce(?:[ -]?v2)?[ -]?(?P<rate2>\d{{3}})[ -]?{rate_unit}?)")):
        rate = float(m.group("rate") or m.group("rate2"))
        if int(rate) not in vocab.ROCE_SPEEDS_GBPS:
            raise QueryError(f"RoCE speed {int(rate)} Gb/s is not in the link catalogue; "
                             f"known: {', '.join(f'{s}G' for s in vocab.ROCE_SPEEDS_GBPS)}")
        add(m, "roce", f"roce-{int(rate)}g", rate)
    for pattern, (family, link) in vocab.NETWORK_WORDS.items():
        for m in sc.scan(_b(rf"{nic}(?:{pattern})")):
            add(m, family, link, None)
    for m in sc.scan(_b(rf"{nic}(?P<rate>\d+(?:\.\d+)?)[ ]?(?P<unit>gbps|gb/s|gbit/s|gbit|tbps|tb/s|g)")):
        unit_scale = 1000.0 if m.group("unit").startswith("t") else 1.0
        add(m, "rate", None, float(m.group("rate")) * unit_scale)
    nets = _merge_rate_with_family(nets)
    nic_counts = [int(m.group(1)) for m in sc.scan(_b(r"(\d{1,3})[ ]?(?:x[ ]?)?(?:nics?|hcas?|rails?|network cards?|ports?)(?:[ ]?per[ ]?node)?"))]
    found["nics_per_node"] = _one(nic_counts, "NIC counts")
    found["networks"] = tuple(sorted(nets, key=lambda n: n.position))
    scale_up = [kind for pattern, kind in vocab.SCALE_UP_WORDS.items() for _ in sc.scan(_b(pattern))]
    if "pcie_host" in scale_up:  # "PCIe without P2P" names one interconnect, not two
        scale_up = [k for k in scale_up if k != "pcie"]
    found["scale_up"] = _one(scale_up, "scale-up interconnects")
    found["provider"] = _one([prefix for pattern, prefix in vocab.PROVIDERS.items() for _ in sc.scan(_b(pattern))],
                             "cloud providers")


def _link_for(family: str, rate_gbps: float) -> str | None:
    """Catalogue link of a fabric family at a line rate ("infiniband", 200 -> "ib-hdr"), None if none."""
    rate = int(rate_gbps)
    if family == "infiniband":
        return next((link for link, r in vocab.IB_GENERATIONS.values() if r == rate), None)
    if family == "ethernet" and rate in vocab.ETHERNET_SPEEDS_GBPS:
        return f"eth-{rate}g"
    if family == "roce" and rate in vocab.ROCE_SPEEDS_GBPS:
        return f"roce-{rate}g"
    return None


def _merge_rate_with_family(nets: list[NetworkMention]) -> list[NetworkMention]:
    """"200 Gbps InfiniBand" is one network: a bare speed plus a fabric word without speed join up."""
    rates = [n for n in nets if n.family == "rate"]
    families = [n for n in nets if n.family != "rate" and n.link is None]
    if len(rates) != 1 or len(families) != 1:
        return nets
    rate, fam = rates[0], families[0]
    link = _link_for(fam.family, rate.rate_gbps or 0)
    if link is None:
        raise QueryError(f"{fam.family} at {rate.rate_gbps:g} Gb/s is not in the link catalogue; "
                         f"run `commmodel profiles show` for the links, or name one such as ib-ndr or eth-100g")
    merged = NetworkMention(family=fam.family, link=link, rate_gbps=rate.rate_gbps,
                            nics_per_node=rate.nics_per_node or fam.nics_per_node, position=min(rate.position, fam.position))
    return [n for n in nets if n is not rate and n is not fam] + [merged]


def _scan_collective_and_size(sc: _Scanner, found: dict) -> None:
    ops = [op for pattern, op in vocab.COLLECTIVES.items() for _ in sc.scan(_b(pattern))]
    found["collective"] = _one(ops, "collectives")
    notes = list(found.get("notes", ()))
    sizes = []
    for m in sc.scan(_b(rf"{_NUM}[ ]?(?P<unit>[kmgtp]i?b|bytes?|[kmgtp]i?bytes?)")):
        unit = m.group("unit")
        start = m.start("unit")
        as_written = sc.original[start:start + len(unit)]
        value = _number(m.group(1), "size", 1e18)
        if unit.startswith("byte"):
            sizes.append(value)
            continue
        prefix = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}[unit[0]]
        if "i" in unit[:2]:
            prefix = {"k": 2.0**10, "m": 2.0**20, "g": 2.0**30, "t": 2.0**40, "p": 2.0**50}[unit[0]]
        bits = as_written[-1] == "b" and as_written[0].isupper() and "i" not in unit[:2]
        said = sc.original[m.start():m.end()].strip()
        if bits:
            notes.append(f"read {said!r} as bits (b = bit); write {as_written[:-1]}B for bytes")
            value /= 8.0
        elif as_written[-1] == "b":
            notes.append(f"read {said!r} as bytes (write GB or Gb to be explicit)")
        sizes.append(value * prefix)
    found["size_bytes"] = _one(sizes, "message sizes")
    found["notes"] = tuple(notes)


def _scan_model(sc: _Scanner, found: dict) -> None:
    size = r"(?:(?P<experts>\d+)x)?(?P<size>\d+(?:\.\d+)?)[ ]?(?P<suffix>[kmbt])(?:[ ]?(?:params|parameters|param))?"
    models: list[ModelMention] = []
    fam_alt = _alt(vocab.MODEL_FAMILIES)
    for m in sc.scan(_b(rf"(?P<fam>{fam_alt})(?:[ -]?(?:{size}))?")):
        family = next(v for p, v in vocab.MODEL_FAMILIES.items() if re.fullmatch(p, m.group("fam")))
        models.append(_model_mention(m, family))
    for m in sc.scan(_b(rf"{size}|(?P<sci>\d+(?:\.\d+)?e\d+)[ ]?(?:params|parameters|param)|(?P<plain>\d{{1,3}}(?:,\d{{3}}){{2,}})[ ]?(?:params|parameters|param)")):
        models.append(_model_mention(m, None))
    model = _one(merge_family_and_size(models, sc.original), "models")
    if model is not None:
        model, note = pick_preset(model)
        if note:
            found["notes"] = (*found.get("notes", ()), note)
    found["model"] = model


def _model_mention(m: re.Match[str], family: str | None) -> ModelMention:
    groups = m.groupdict()
    if groups.get("sci") or groups.get("plain"):
        num = _number(groups.get("sci") or groups["plain"], "parameter count", MAX_NUM_PARAMS)
        return ModelMention(text=m.group(0).strip(), family=None, num_params=num, size_text=None)
    if groups.get("size") is None:
        return ModelMention(text=m.group(0).strip(), family=family, num_params=None, size_text=None)
    scale = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}[groups["suffix"]]
    num = _number(groups["size"], "parameter count", 1e5) * scale
    experts = groups.get("experts")
    if experts:  # "8x7B": a mixture of experts, about experts × size in total (a preset gives it exactly)
        num *= _integer(experts, "expert count", 1024)
    prefix = f"{experts}x" if experts else ""
    return ModelMention(text=m.group(0).strip(), family=family, num_params=num,
                        size_text=f"{prefix}{groups['size']}{groups['suffix']}")


def _scan_training(sc: _Scanner, found: dict) -> None:
    k = r"[ ]?(k|m)?"
    sep = r"[ ]?(?:=|:|of|is)?[ ]?"
    micro = [_with_suffix(m.group(1), m.group(2), "micro-batch", _MAX_BATCH)
             for m in sc.scan(_b(rf"(?:micro[ -]?batch(?:[ -]?size)?|mbs){sep}(\d+){k}"))]
    tokens = [_number(m.group(1), "batch tokens", 1e12) * {"k": 1e3, "m": 1e6, None: 1}[m.group(2)]
              for m in sc.scan(_b(rf"(?:global[ -]?)?batch(?:[ -]?size)?{sep}(\d+(?:\.\d+)?){k}[ ]?tokens"))]
    batch = [_with_suffix(m.group(1), m.group(2), "global batch", _MAX_BATCH)
             for m in sc.scan(_b(rf"(?:global[ -]?batch(?:[ -]?size)?|batch(?:[ -]?size)?|gbs|bs){sep}(\d[\d,]*){k}"))]
    batch += [_with_suffix(m.group(1), m.group(2), "global batch", _MAX_BATCH)
              for m in sc.scan(_b(rf"(\d[\d,]*){k}[ ]?(?:sequences?|samples?)(?:[ ]?per[ ]?(?:step|batch|iteration))?"))]
    # Context lengths count k as 1024 (an "8k context" is 8192 tokens).
    seq = [_integer(m.group(1), "sequence length", _MAX_SEQ) * (1024 if m.group(2) else 1)
           for m in sc.scan(_b(rf"(?:seq(?:uence)?[ _-]?(?:len(?:gth)?)?|context(?:[ -]length)?|ctx){sep}(\d+)[ ]?(k)?"))]
    seq += [_integer(m.group(1), "sequence length", _MAX_SEQ) * (1024 if m.group(2) else 1)
            for m in sc.scan(_b(rf"(\d+)[ ]?(k)?[ ]?(?:tokens?[ ]?)?(?:context|ctx|seq(?:uence)?(?:[ -]?len(?:gth)?)?)"))]
    accum = [_integer(m.group(1) or m.group(2), "gradient accumulation steps", _MAX_BATCH) for m in sc.scan(_b(
        rf"(?:gradient|grad)[ -]?(?:accumulation|accum|acc)(?:[ -]?steps?)?{sep}(\d+)|(\d+)[ ]?(?:gradient|grad)[ -]?"
        rf"(?:accumulation|accum)(?:[ -]?steps?)?"))]
    found["grad_accum_steps"] = _one(accum, "gradient accumulation counts")
    if accum:  # global batch = micro-batch x dp x accumulation: the planner keeps only layouts with that count
        found["notes"] = (*found.get("notes", ()), f"read gradient accumulation {accum[0]}: only layouts with "
                          f"{accum[0]} micro-batches per step (global batch = micro-batch x dp x {accum[0]}) are ranked")
    found["micro_batch"] = _one(micro, "micro-batch sizes")
    found["batch_tokens"] = _one(tokens, "batch token counts")
    found["global_batch"] = _one(batch, "global batch sizes")
    found["seq_len"] = _one(seq, "sequence lengths")
    found["dtype"] = _one([d for p, d in vocab.DTYPES.items() for _ in sc.scan(_b(p))], "dtypes")
    found["stack"] = _one([s for p, s in vocab.STACK_WORDS.items() for _ in sc.scan(_b(p))], "training stacks")
    for key, pattern, limit in (("tp", r"(?:tp|tensor[ -]parallel(?:ism)?)", 1024),
                                ("pp", r"(?:pp|pipeline[ -]parallel(?:ism)?)", 4096)):
        found[key] = _one([_integer(m.group(1), key, limit) for m in sc.scan(_b(rf"{pattern}{sep}(\d+)"))], f"{key} degrees")
    zero = [int(m.group(1)) for m in sc.scan(_b(r"zero[ -]?(?:stage[ ]?)?([0-3])"))]
    found["zero"] = _one(zero, "ZeRO stages")
    found["recompute"] = _one([r for p, r in vocab.RECOMPUTE_WORDS.items() for _ in sc.scan(_b(p))], "recompute policies")
    sp = [False for _ in sc.scan(_b(r"(?:no|without)[ -]sequence[ -]parallel(?:ism)?"))]
    sp += [True for _ in sc.scan(_b(r"sequence[ -]parallel(?:ism)?|sp"))]
    found["sequence_parallel"] = _one(sp, "sequence-parallel settings")


def _unread(word: str) -> str:
    """``'alreduce' (did you mean all_reduce?)``: the word, and the closest known word when one is close."""
    close = difflib.get_close_matches(word, list(vocab.KNOWN_WORDS), n=1, cutoff=0.8)
    return repr(word) + (f" (did you mean {vocab.KNOWN_WORDS[close[0]]}?)" if close else "")


def parse_query(text: str, system_names: tuple[str, ...] | list[str] = ()) -> ParsedQuery:
    """Read ``text``; raise :class:`QueryError` naming every part that could not be read.

    ``system_names`` are the shipped profile names the query may mention ("on 4 DGX H100").
    """
    if not isinstance(text, str) or not text.strip():
        raise QueryError(f"the query is empty; try e.g. {'; '.join(vocab.EXAMPLES)}")
    if len(text) > 2000:
        raise QueryError(f"the query is {len(text)} characters long; keep it under 2000")
    if not re.search(r"[^\W_]", text):  # control characters or punctuation only: nothing to read
        raise QueryError(f"found nothing to read in the query (no letters or digits); try e.g. {'; '.join(vocab.EXAMPLES)}")
    sc = _Scanner(text)
    found: dict = {"notes": ()}
    _scan_what_if(sc, found)
    _scan_systems(sc, found, tuple(system_names))
    _scan_gpus(sc, found)
    _scan_networks(sc, found)
    found["library"] = _one([lib for p, lib in vocab.LIBRARY_WORDS.items() for _ in sc.scan(_b(rf"(?:{p})"))],
                            "communication libraries")
    _scan_collective_and_size(sc, found)
    _scan_training(sc, found)
    _scan_model(sc, found)
    unread = sc.leftover()
    parsed = ParsedQuery(text=text, **found)
    if unread:
        understood = describe(parsed) or "nothing"
        raise QueryError(
            f"could not read {', '.join(_unread(w) for w in dict.fromkeys(unread))} in the query "
            f"(understood: {understood}); phrase it like {'; '.join(vocab.EXAMPLES)}"
        )
    return parsed
