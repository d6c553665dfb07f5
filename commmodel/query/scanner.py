"""The query scanner and number readers every query reader shares.

:class:`Scanner` holds the query lower-cased with the parts already read blanked out, so nothing is read
twice (:mod:`commmodel.query.parse` explains the reading); the readers turn matched digits into bounded
numbers and raise one :class:`~commmodel.errors.QueryError` line naming what was wrong.
"""

from __future__ import annotations

import re

from commmodel.errors import QueryError
from commmodel.query import vocab
from commmodel.query.needles import PHRASE_NEEDLES

NUM = r"(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)"
WORD_NUMBERS = {"one": 1, "single": 1, "a": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "nine": 9, "ten": 10, "twelve": 12, "sixteen": 16, "twenty-four": 24, "thirty-two": 32,
                "forty-eight": 48, "sixty-four": 64}
"""Counts said in words ("eight H100s", "a single node"); "a" counts only where a reader's pattern says so."""
_WORD_COUNTS = (r"single|one|two|three|four|five|six|seven|eight|nine|ten|twelve|sixteen|twenty[ -]four|"
                r"thirty[ -]two|forty[ -]eight|sixty[ -]four")
WORD_NUM = rf"(?:an?[ ]|one[ ])?({_WORD_COUNTS})"
"""One count in words, its word the group ("a single", "one single" read as single)."""
COUNT = rf"(?:(?P<n>\d+)|(?:an?[ ]|one[ ])?(?P<w>{_WORD_COUNTS}))"
"""A count in digits (group ``n``) or in words (group ``w``): :func:`said_count` reads either."""


def said_count(m: re.Match[str], what: str, maximum: float) -> int:
    """The count a :data:`COUNT` match said, in digits or in words."""
    return read_integer(m.group("n"), what, maximum) if m.group("n") else word_number(m.group("w"))


def word_number(word: str) -> int:
    """The count a :data:`WORD_NUM` group said ("twenty four" and "twenty-four" alike)."""
    return WORD_NUMBERS[word.replace(" ", "-")]


def bounded(pattern: str) -> str:
    """``pattern`` delimited by non-alphanumerics on both sides (safer than \\b next to digits); grouped, so every
    branch of an alternation is delimited (ungrouped, "7B on 8 MI250X" read "8 m" as a model size)."""
    return rf"(?<![a-z0-9.])(?:{pattern})(?![a-z0-9])"


def alternation(table: dict[str, str]) -> str:
    """One regular-expression alternation of every pattern key of ``table``."""
    return "(?:" + "|".join(f"(?:{p})" for p in table) + ")"


class Scanner:
    """The query lower-cased (same length as the original), with matched parts blanked out."""

    def __init__(self, text: str) -> None:
        self.original = text
        self.work = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)

    def scan(self, pattern: str, needles: tuple[str, ...] | None = None) -> list[re.Match[str]]:
        """Every match of ``pattern`` in what is left, consumed.

        ``needles``: literals one of which every match of ``pattern`` contains (:mod:`commmodel.query.needles`;
        when not given, the reader phrases' table ``PHRASE_NEEDLES`` is looked up by the pattern itself);
        when what is left holds none, there is no match and the pattern is not compiled (issue 17)."""
        if needles is None:
            needles = PHRASE_NEEDLES.get(pattern)
        if needles is not None and not any(needle in self.work for needle in needles):
            return []
        matches = list(re.finditer(pattern, self.work))
        for m in matches:
            self.consume(m)
        return matches

    def consume(self, m: re.Match[str]) -> None:
        """Blank out what ``m`` matched in what is left (a reader that matched by other means than :meth:`scan`)."""
        self.work = self.work[: m.start()] + " " * (m.end() - m.start()) + self.work[m.end():]

    def leftover(self) -> list[str]:
        """Words not consumed and not filler."""
        work = re.sub(r"(?<=[a-z])['’](?:s|re|ll|ve|d|t|m)\b", " ", self.work)  # "what's", "we're", "don't"
        words = re.findall(r"[^\s,;:!?()\[\]{}\"'`=+/|&]+", work)
        out = []
        for word in words:
            word = word.strip(".-_*#~<>")
            if word and word not in vocab.FILLER_WORDS and not re.fullmatch(r"[\W_]+", word):
                out.append(word)
        return out


def read_number(text: str, what: str, maximum: float) -> float:
    """A number as written ("1,024", "2.5") in (0, maximum], or a QueryError naming ``what``."""
    value = float(text.replace(",", ""))
    if not 0 < value <= maximum:
        raise QueryError(f"{what} {text!r} in the query must lie between 1 and {maximum:,.0f}")
    return value


def read_integer(text: str, what: str, maximum: float) -> int:
    """A whole number in [1, maximum], or a QueryError naming ``what``."""
    value = read_number(text, what, maximum)
    if value != int(value):
        raise QueryError(f"{what} {text!r} in the query must be a whole number")
    return int(value)


COUNT_SCALE: dict[str | None, float] = {None: 1.0, "": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12,
                                         "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
"""Suffixes and words of a count ("4M tokens", "70B params", "15 trillion tokens"); each reader's pattern says which
it accepts."""


def read_with_suffix(number: str, suffix: str | None, what: str, maximum: float) -> int:
    """A whole number with an optional k (10³) or m (10⁶) suffix, in [1, maximum]."""
    scale = COUNT_SCALE[suffix]
    value = read_number(number, what, maximum) * scale
    if value != int(value) or not 0 < value <= maximum:
        raise QueryError(f"{what} {number}{suffix or ''} in the query must be a whole number between 1 and {maximum:g}")
    return int(value)


def one_of(values: list, what: str):
    """The one distinct value of ``values`` (None if empty), or a QueryError when the query gives several."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) > 1:
        shown = ", ".join(str(getattr(v, "text", v)) for v in distinct)
        raise QueryError(f"the query gives {len(distinct)} different {what} ({shown}); give one")
    return distinct[0] if distinct else None
