"""The query scanner's needles (commmodel.query.needles) are sound: every match of a vocabulary pattern, and
of each phrase pattern the readers scan, contains one of its needles, so skipping a pattern whose needles are
absent changes no reading (issue 17).

Run as a script to print the tables for commmodel/query/needles.py after editing the vocabulary or a reader.
"""

import re
import re._parser as sre_parse
from re._constants import ASSERT, ASSERT_NOT, AT, BRANCH, LITERAL, MAX_REPEAT, MIN_REPEAT, SUBPATTERN

from commmodel.query import vocab
from commmodel.query.needles import NEEDLES, PHRASE_NEEDLES
from commmodel.query.parse import parse_query
from commmodel.query.scanner import Scanner, bounded

TABLES = ("WHAT_IF_WORDS", "COLLECTIVES", "DTYPES", "STACK_WORDS", "RECOMPUTE_WORDS", "ALGORITHM_WORDS",
          "ATTENTION_WORDS", "LIBRARY_WORDS", "NETWORK_WORDS", "SCALE_UP_WORDS", "PROVIDERS")


def _sequence_needles(items: list) -> set[str] | None:
    """Literals one of which every match of the parsed sequence ``items`` contains (None: none known).

    A run of plain characters is a needle; a group, an alternation (the union over its branches, each of
    which must give needles) and a repeat of at least one contribute their own; anything else (classes,
    optional parts, anchors) breaks a run. The candidate whose shortest needle is longest is kept."""
    candidates: list[set[str]] = []
    run = ""
    for op, av in items:
        if op == LITERAL:
            run += chr(av)
            continue
        if run:
            candidates.append({run})
            run = ""
        sub = None
        if op == SUBPATTERN:
            sub = _sequence_needles(list(av[-1]))
        elif op == BRANCH:
            branches = [_sequence_needles(list(b)) for b in av[1]]
            sub = None if any(b is None for b in branches) else set().union(*branches)
        elif op in (MAX_REPEAT, MIN_REPEAT) and av[0] >= 1:
            sub = _sequence_needles(list(av[2]))
        elif op not in (AT, ASSERT, ASSERT_NOT):
            sub = None
        if sub:
            candidates.append(sub)
    if run:
        candidates.append({run})
    return max(candidates, key=lambda s: (min(map(len, s)), -len(s))) if candidates else None


def derived_needles(pattern: str) -> tuple[str, ...] | None:
    found = _sequence_needles(list(sre_parse.parse(pattern)))
    return tuple(sorted(found)) if found else None


def _patterns() -> list[str]:
    return list(dict.fromkeys(p for table in TABLES for p in getattr(vocab, table)))


def _phrase_patterns() -> list[str]:
    """Every pattern the readers scan without needles of their own (each reader scans all its patterns on
    every query, so one query that reads through to the end meets them all)."""
    seen: list[str] = []
    scan = Scanner.scan

    def recording(self, pattern, needles=None):
        if needles is None:
            seen.append(pattern)
        return scan(self, pattern, needles)

    Scanner.scan = recording
    try:
        parse_query("64 H100 over 400GbE, llama3-70b, batch 1024", ("dgx-h100",))
    finally:
        Scanner.scan = scan
    return list(dict.fromkeys(seen))


def _phrase_table() -> dict[str, tuple[str, ...]]:
    return {p: needles for p in _phrase_patterns() if (needles := derived_needles(p)) is not None}


def test_every_phrase_pattern_has_exactly_its_derived_needles():
    assert len(_phrase_patterns()) > 20
    assert _phrase_table() == PHRASE_NEEDLES


def test_phrase_needles_skip_patterns_on_the_benchmark_query():
    work = "8 gpus, 1b params, ib ndr"
    skipped = [p for p, needles in PHRASE_NEEDLES.items() if not any(n in work for n in needles)]
    assert len(skipped) >= len(PHRASE_NEEDLES) - 6


def test_every_vocabulary_pattern_has_exactly_its_derived_needles():
    assert {p: derived_needles(p) for p in _patterns()} == NEEDLES


def test_needles_on_examples():
    assert derived_needles(r"all[ _-]?reduces?|allreduces?") == ("reduce",)
    assert derived_needles(r"(?:gpudirect[ -])?tcpx") == ("tcpx",)
    assert derived_needles(r"a?b") == ("b",)
    assert derived_needles(r"[ab]") is None


def test_a_match_holds_a_needle_on_phrases():
    phrases = ["all-reduce 1GB on 16 A100 over 8x NDR", "bf16 fsdp2 on EFA v2 with aws p5", "no p2p pcie gen4",
               "Megatron-LM 2021 selective recompute with Open MPI", "what if we go from eth to omni-path",
               "compared with a2a, send/recv, broadcast and bcast", "google cloud tcpxo vs oracle", "deep speed ddp"]
    for pattern, needles in NEEDLES.items():
        for phrase in phrases:
            for m in re.finditer(bounded(pattern), phrase.lower()):
                assert any(n in m.group(0) for n in needles), (pattern, phrase)


if __name__ == "__main__":
    for p in _patterns():
        print(f"    {p!r}: {derived_needles(p)!r},")
    print("PHRASE_NEEDLES")
    for p, needles in _phrase_table().items():
        print(f"    {p!r}:\n        {needles!r},")
