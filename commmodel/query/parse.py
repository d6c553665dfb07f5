"""Read a free-text request ("64 H100 over 400GbE, llama3-70b, batch 1024") into a :class:`ParsedQuery`.

Pure and token based: regular expressions from :mod:`commmodel.query.vocab` are matched against a
lower-cased copy of the text, each match is blanked out so that nothing is read twice, and the
words left at the end must all be filler ("on", "with", "train" ...). Anything else is reported
by :class:`~commmodel.errors.QueryError` together with what was understood and example phrasings.
Parts can come in any order. Sizes follow DESIGN §2 where the case says it ("Gb" is gigabits,
"GB" gigabytes); an all-lower-case "gb" is read as bytes and noted. The scanner and number readers are
:mod:`commmodel.query.scanner`; systems, GPUs and networks are read by :mod:`commmodel.query.hardware_words`.
"""

from __future__ import annotations

import difflib
import re

from commmodel.errors import QueryError
from commmodel.limits import MAX_BATCH, MAX_NUM_PARAMS, MAX_SEQ_LEN, MAX_SIZE_BYTES
from commmodel.query import vocab
from commmodel.query.hardware_words import scan_gpus, scan_networks, scan_systems
from commmodel.query.mentions import ModelMention, ParsedQuery, describe
from commmodel.query.models import merge_family_and_size, named_preset_pattern, pick_preset
from commmodel.query.needles import NEEDLES
from commmodel.query.scanner import (
    COUNT_SCALE, NUM, Scanner, alternation, bounded, one_of, read_integer, read_number, read_with_suffix,
)

_MAX_BATCH = MAX_BATCH
_MAX_SEQ = MAX_SEQ_LEN


def _scan_what_if(sc: Scanner, found: dict) -> None:
    for pattern in vocab.WHAT_IF_WORDS:
        for m in sc.scan(bounded(pattern), NEEDLES.get(pattern)):
            found["what_if"] = True
            if m.group(0).startswith("instead"):
                found["baseline_after_instead_of"] = m.start()


def _one_or_compared(said: list[tuple[int, str]], found: dict, what: str) -> tuple[str | None, tuple[str, ...]]:
    """(the one value said, ()) or, in a what-if, (None, every value in the order compared: "gloo vs nccl" makes gloo
    the baseline, "gloo instead of nccl" nccl); several values outside a what-if are a QueryError."""
    said = sorted(said)
    values = list(dict.fromkeys(v for _, v in said))
    if len(values) > 1 and not found.get("what_if"):
        raise QueryError(f"the query gives {len(values)} {what} ({', '.join(values)}); give one, or compare them: "
                         f"'{' vs '.join(values)}'")
    if len(values) < 2:
        return (values[0] if values else None), ()
    instead = found.get("baseline_after_instead_of")
    if instead is not None:
        said = [x for x in said if x[0] > instead] + [x for x in said if x[0] <= instead]
    return None, tuple(dict.fromkeys(v for _, v in said))


def _scan_libraries(sc: Scanner, found: dict) -> None:
    """One library ("with gloo"), or in a what-if several ("gloo vs nccl")."""
    said = [(m.start(), lib) for p, lib in vocab.LIBRARY_WORDS.items()
            for m in sc.scan(bounded(rf"(?:under[ ]+)?(?:{p})"), NEEDLES.get(p))]  # "under RCCL": the word goes too
    found["library"], found["libraries"] = _one_or_compared(said, found, "communication libraries")


def _scan_dtypes(sc: Scanner, found: dict) -> None:
    """One training dtype ("fp8"), or in a what-if several ("fp8 vs bf16")."""
    said = [(m.start(), d) for p, d in vocab.DTYPES.items() for m in sc.scan(bounded(p), NEEDLES.get(p))]
    found["dtype"], found["dtypes"] = _one_or_compared(said, found, "dtypes")


_BYTES_AFTER_OP = re.compile(rf"[ ]*(?:of[ ]*)?{NUM}[ ]?b(?![\w-])"
                             r"(?![ ]*(?:params?|parameters?|models?|fp\d+|bf16|gradients?|grads?|weights?))")
""""N B" after a collective's name, not followed by what says a model ("params", "fp32 gradients", "model")."""


def _bytes_after_op(sc: Scanner, op_ends: list[int], notes: list[str]) -> list[float]:
    """A size said as "N B" right after a collective ("all_reduce 8B", "all-gather of 64 B"): bytes, as nccl-tests
    prints its first rows, where elsewhere "8B" is a model's 8 billion parameters (it priced the gradients of an 8B
    model, 16 GB, for an 8-byte all-reduce). Consumed from the scanner, with a note."""
    out = []
    for end in op_ends:
        m = _BYTES_AFTER_OP.match(sc.work, end)
        if m:
            said = sc.original[m.start(1):m.end()].strip()
            notes.append(f"read {said!r} after the collective as {said.rstrip('bB ').strip()} bytes (say '{said} "
                         f"params' for a model)")
            out.append(read_number(m.group(1), "size", MAX_SIZE_BYTES))
            sc.consume(m)
    return out


def _scan_collective_and_size(sc: Scanner, found: dict) -> None:
    algos = [a for pattern, a in vocab.ALGORITHM_WORDS.items() for _ in sc.scan(bounded(pattern), NEEDLES.get(pattern))]
    found["algorithm"] = one_of(algos, "collective algorithms")
    op_matches = [(op, m) for pattern, op in vocab.COLLECTIVES.items()
                  for m in sc.scan(bounded(pattern), NEEDLES.get(pattern))]
    found["collective"] = one_of([op for op, _ in op_matches], "collectives")
    if found["collective"] and sc.scan(bounded(r"(?:from|to|at)?[ ]?(?:rank|root)[ ]?\d+")):  # "bcast from rank 0"
        found["notes"] = (*found.get("notes", ()), "read the root rank and left it: which rank is the root does not "
                          "change the modelled time")
    if found["algorithm"] and not found["collective"]:
        raise QueryError(f"{found['algorithm']!r} names a collective algorithm; ask about a collective, e.g. "
                         f"'{found['algorithm'].replace('_', ' ')} all-reduce 1GB on 16 A100'")
    notes = list(found.get("notes", ()))
    sizes = []
    for m in sc.scan(bounded(rf"{NUM}[ ]?(?P<unit>[kmgtp]i?b|bytes?|[kmgtp]i?bytes?)")):
        unit = m.group("unit")
        start = m.start("unit")
        as_written = sc.original[start:start + len(unit)]
        value = read_number(m.group(1), "size", MAX_SIZE_BYTES)
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
    if found["collective"] and not sizes:  # "all_reduce 8B": bytes right after the op, not an 8B-parameter model
        sizes += _bytes_after_op(sc, [m.end() for _, m in op_matches], notes)
    if found["collective"] and not sizes:  # nccl-tests' own sizes: "all_reduce 256M" (K, M, G are powers of 1024)
        for m in sc.scan(bounded(rf"{NUM}[ ]?(?P<unit>[kmg])(?![ -]?(?:params?|parameters?|models?))")):
            value = read_number(m.group(1), "size", MAX_SIZE_BYTES) * 1024 ** ("kmg".index(m.group("unit")) + 1)
            notes.append(f"read {sc.original[m.start():m.end()].strip()!r} as {value:.0f} bytes (nccl-tests' "
                         f"-b/-e notation: K, M, G are powers of 1024)")
            sizes.append(value)
    found["size_bytes"] = one_of(sizes, "message sizes")
    found["notes"] = tuple(notes)


def _scan_model(sc: Scanner, found: dict) -> None:
    size = (r"(?:(?P<experts>\d+)x)?(?P<size>\d+(?:\.\d+)?)[ ]?(?P<suffix>[kmbt]|million|billion|trillion)"
            r"(?:[ -]?(?:params?|parameters?))?")
    models: list[ModelMention] = []
    fam_alt = alternation(vocab.MODEL_FAMILIES)
    family_and_size = rf"(?P<fam>{fam_alt})(?:[ -]?(?:{size}))?"
    whole, keys, needles = named_preset_pattern(family_and_size)
    for m in sc.scan(bounded(whole), needles):
        models.append(ModelMention(text=m.group(0).strip(), family=keys[re.sub(r"[ -]", "", m.group(0))],
                                   num_params=None, size_text=None))
    for m in sc.scan(bounded(family_and_size)):
        family = next(v for p, v in vocab.MODEL_FAMILIES.items() if re.fullmatch(p, m.group("fam")))
        models.append(_model_mention(m, family))
    for m in sc.scan(bounded(rf"{size}|(?P<sci>\d+(?:\.\d+)?e\d+)[ ]?(?:params|parameters|param)|(?P<plain>\d{{1,3}}(?:,\d{{3}}){{2,}})[ ]?(?:params|parameters|param)")):
        models.append(_model_mention(m, None))
    model = one_of(merge_family_and_size(models, sc.original), "models")
    if model is not None:
        model, note = pick_preset(model)
        if note:
            found["notes"] = (*found.get("notes", ()), note)
    found["model"] = model


def _model_mention(m: re.Match[str], family: str | None) -> ModelMention:
    groups = m.groupdict()
    if groups.get("sci") or groups.get("plain"):
        num = read_number(groups.get("sci") or groups["plain"], "parameter count", MAX_NUM_PARAMS)
        return ModelMention(text=m.group(0).strip(), family=None, num_params=num, size_text=None)
    if groups.get("size") is None:
        return ModelMention(text=m.group(0).strip(), family=family, num_params=None, size_text=None)
    suffix = groups["suffix"][0]  # "billion" as "b"
    num = read_number(groups["size"], "parameter count", 1e5) * COUNT_SCALE[suffix]
    experts = groups.get("experts")
    if experts:  # "8x7B": a mixture of experts, about experts × size in total (a preset gives it exactly)
        num *= read_integer(experts, "expert count", 1024)
    prefix = f"{experts}x" if experts else ""
    return ModelMention(text=m.group(0).strip(), family=family, num_params=num,
                        size_text=f"{prefix}{groups['size']}{suffix}")


SEQ_PATTERNS = (
    r"(?:seq(?:uence)?[ _-]?(?:len(?:gth)?)?|context(?:[ -](?:length|window))?|ctx)[ ]?(?:=|:|of|is)?[ ]?(\d+)[ ]?(k)?",
    r"(\d+)[ ]?(k)?[ -]?(?:tokens?[ ]?)?(?:context|ctx|seq(?:uence)?(?:[ -]?len(?:gth)?)?)(?:[ -]?window)?",
    r"(\d+)[ ]?(k)?[ -]?tokens?[ ]?(?:long[ ]?)?(?:sequences?|samples?)",  # "32k-token sequences"
    r"(?:sequences?|samples?)[ ]?of[ ]?(\d+)[ ]?(k)?[ ]?tokens?",  # "1024 sequences of 4096 tokens"
    r"sequences?[ ]?of[ ]?(\d+)[ ]?(k)\b",  # "with sequences of 8k"
    r"(?<![\w.])at[ ](\d+)[ ]?(k)\b(?![ ]?(?:tokens?|gpus?|nodes?|steps?|gb|tb|[a-z]+\d))",  # "70b on 64 H100 at 16k"
)
"""Phrasings of a sequence length, read before the batch and token counts that share their words (a "32k sequence
length" is not a batch of 32k sequences, "32k tokens context" not 32k training tokens). k is 1024 here (an "8k
context" is 8192 tokens)."""


def _scan_seq(sc: Scanner) -> list[int]:
    return [read_integer(m.group(1), "sequence length", _MAX_SEQ) * (1024 if m.group(2) else 1)
            for pattern in SEQ_PATTERNS for m in sc.scan(bounded(pattern))]


def _scan_training(sc: Scanner, found: dict) -> None:
    k = r"[ ]?(k|m)?"
    sep = r"[ ]?(?:=|:|of|is)?[ ]?"
    seq = _scan_seq(sc)
    micro = [read_with_suffix(m.group(1), m.group(2), "micro-batch", _MAX_BATCH)
             for m in sc.scan(bounded(rf"(?:micro[ -]?batch(?:[ -]?size)?|mbs){sep}(\d+){k}"))]
    tokens = [read_number(m.group(1) or m.group(3), "batch tokens", 1e12) * COUNT_SCALE[m.group(2) or m.group(4)]
              for m in sc.scan(bounded(rf"(?:global[ -]?)?batch(?:[ -]?size)?{sep}(\d+(?:\.\d+)?){k}[ ]?tokens"
                                       rf"|(\d+(?:\.\d+)?){k}[ -]?tokens?[ ]?(?:global[ -]?)?batch(?:[ -]?size)?"))]
    for per_step in (rf"(\d+(?:\.\d+)?){k}[ -]?tokens?[ ]?(?:/|per|each|an?)[ ]?(?:step|batch|iteration|iter)",
                     rf"gbs{sep}(\d+(?:\.\d+)?){k}[ ]?tokens"):  # tokens a step, not a training run
        tokens += [read_number(m.group(1), "batch tokens", 1e12) * COUNT_SCALE[m.group(2)]
                   for m in sc.scan(bounded(per_step))]
    train = [read_number(m.group(1), "training tokens", 1e16) * COUNT_SCALE[m.group(2)] for m in sc.scan(bounded(
        r"(\d+(?:\.\d+)?)[ ]?(k|m|b|t|thousand|million|billion|trillion)[ ]?tokens"))]  # after "batch of 4M tokens"
    found["train_tokens"] = one_of(train, "training token counts")
    batch = [read_with_suffix(m.group(1), m.group(2), "global batch", _MAX_BATCH)
             for m in sc.scan(bounded(rf"(?:global[ -]?batch(?:[ -]?size)?|batch(?:[ -]?size)?|gbs|bs){sep}(\d[\d,]*){k}"))]
    batch += [read_with_suffix(m.group(1), m.group(2), "global batch", _MAX_BATCH)
              for m in sc.scan(bounded(rf"(\d[\d,]*){k}[ ]?(?:sequences?|samples?)(?:[ ]?per[ ]?(?:step|batch|iteration))?"))]
    accum = [read_integer(m.group(1) or m.group(2), "gradient accumulation steps", _MAX_BATCH) for m in sc.scan(bounded(
        rf"(?:gradient|grad)[ -]?(?:accumulation|accum|acc)(?:[ -]?steps?)?{sep}(\d+)|(\d+)[ ]?(?:gradient|grad)[ -]?"
        rf"(?:accumulation|accum)(?:[ -]?steps?)?"))]
    found["grad_accum_steps"] = one_of(accum, "gradient accumulation counts")
    if accum:  # global batch = micro-batch x dp x accumulation: the planner keeps only layouts with that count
        found["notes"] = (*found.get("notes", ()), f"read gradient accumulation {accum[0]}: only layouts with "
                          f"{accum[0]} micro-batches per step (global batch = micro-batch x dp x {accum[0]}) are ranked")
    found["micro_batch"] = one_of(micro, "micro-batch sizes")
    found["batch_tokens"] = one_of(tokens, "batch token counts")
    found["global_batch"] = one_of(batch, "global batch sizes")
    found["seq_len"] = one_of(seq, "sequence lengths")
    _scan_dtypes(sc, found)
    said = [(m.start(), s) for p, s in vocab.STACK_WORDS.items() for m in sc.scan(bounded(p), NEEDLES.get(p))]
    found["stack"], found["stacks"] = _one_or_compared(said, found, "training stacks")
    found["flash_attention"] = one_of([on for p, on in vocab.ATTENTION_WORDS.items()
                                       for _ in sc.scan(bounded(p), NEEDLES.get(p))], "attention settings")
    for key, pattern, limit in (("tp", r"(?:tp|tensor[ -]parallel(?:ism)?)", 1024),
                                ("pp", r"(?:pp|pipeline[ -]parallel(?:ism)?)", 4096),
                                ("cp", r"(?:cp|context[ -]parallel(?:ism)?)", 1024),
                                ("ep", r"(?:ep|expert[ -]parallel(?:ism)?)", 1024)):
        found[key] = one_of([read_integer(m.group(1), key, limit) for m in sc.scan(bounded(rf"{pattern}{sep}(\d+)"))], f"{key} degrees")
    found["dp"] = one_of([read_integer(m.group(1), "dp", 16_777_216) for m in sc.scan(  # needles: its words, not "d"
        bounded(rf"(?:dp|data[ -]parallel(?:ism)?){sep}(\d+)"), ("dp", "data"))], "dp degrees")
    zero = [int(m.group(1)) for m in sc.scan(bounded(r"zero[ -]?(?:stage[ ]?)?([0-3])"))]
    found["zero"] = one_of(zero, "ZeRO stages")
    found["recompute"] = one_of([r for p, r in vocab.RECOMPUTE_WORDS.items() for _ in sc.scan(bounded(p), NEEDLES.get(p))], "recompute policies")
    sp = [False for _ in sc.scan(bounded(r"(?:no|without)[ -]sequence[ -]parallel(?:ism)?"))]
    sp += [True for _ in sc.scan(bounded(r"sequence[ -]parallel(?:ism)?|sp"))]
    found["sequence_parallel"] = one_of(sp, "sequence-parallel settings")


UNKNOWN_GPU = r"(?:a|h|l|t|v|p|k|b|gb|gh|mi|rtx|gtx|tesla)[ -]?\d{1,4}[a-z]{0,3}"
"""A leftover word shaped like an accelerator's name ("a10g", "l4", "mi250x", "rtx6000"): said as a GPU the catalogue
lacks, not as a typo."""


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
    negative = re.search(r"(?<![\w.\-−])[-−]\d[\w.,]*", text)  # "-4MiB", "-8 GPUs"; not "llama3-8b" or "8-16"
    if negative:
        raise QueryError(f"the query has a negative number {negative.group(0)!r}; counts and sizes are positive, "
                         "drop the minus sign")
    sc = Scanner(text)
    found: dict = {"notes": ()}
    sc.scan(rf"(?<![a-z0-9.]){vocab.HF_ORGS}/(?:meta-)?", ("/",))  # "meta-llama/Meta-Llama-3-70B"
    _scan_what_if(sc, found)
    found["how_many"] = bool(sc.scan(bounded(r"how many"), ("how many",)))
    scan_systems(sc, found, tuple(system_names))
    scan_gpus(sc, found)
    scan_networks(sc, found)
    _scan_libraries(sc, found)
    _scan_collective_and_size(sc, found)
    _scan_training(sc, found)
    _scan_model(sc, found)
    unread = sc.leftover()
    parsed = ParsedQuery(text=text, **found)
    unknown_gpu = next((w for w in unread if re.fullmatch(UNKNOWN_GPU, w)), None)
    if unknown_gpu:
        known = ", ".join(dict.fromkeys(v.upper() for v in vocab.GPU_FAMILIES.values()))
        raise QueryError(f"GPU {unknown_gpu!r} is not in the catalogue (hardware_profiles/gpus.yaml); the query knows "
                         f"{known}: name one, or pass --system with a profile of your own (docs/profiles.md)")
    if unread:
        understood = describe(parsed) or "nothing"
        raise QueryError(
            f"could not read {', '.join(_unread(w) for w in dict.fromkeys(unread))} in the query "
            f"(understood: {understood}); phrase it like {'; '.join(vocab.EXAMPLES)}"
        )
    return parsed
