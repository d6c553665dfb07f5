"""``repr(float)`` of a whole float64 column at numpy speed (issue 17: ``plan --json`` of 100k layouts).

``float.__repr__`` (what :mod:`json` writes) runs David Gay's shortest-digit search per value, ~0.3-0.7 µs
each, most of ``plan --json``'s output time. Here the same text comes from array arithmetic:

* the value's 17 significant digits ``D17 = round(x·10^(16-E))`` are computed exactly: ``10^k`` is exact
  for k ≤ 22 and Dekker's error-free product gives ``x·10^k`` as ``hi + lo`` with no rounding;
* the shortest digits are the first precision p whose correctly rounded p-digit decimal reads back as
  x (Steele & White / Gay: the shortest round-tripping string, nearest x among those), checked with
  Clinger's exact fast path (a p-digit integer below 2^53 times or over an exact power of ten is one
  correctly rounded operation);
* the characters are gathered from a digit matrix with one index template per (sign, exponent,
  precision) group, in Python's positional ``repr`` layout (``E`` in [-4, 15]).

Zero is written directly. Values the exact arithmetic cannot settle (non-finite, powers of two outside
[2^-4, 2^53] whose rounding interval is lopsided, exponents outside [-4, 15], decimal ties, a 16-digit
candidate at or above 2^53) go through ``float.__repr__`` itself,
so the output equals ``repr`` for every value (``tests/test_float_text.py`` checks that).
"""

from __future__ import annotations

import numpy as np

_POW10_F = np.array([float(10**i) for i in range(23)])
"""10^0 .. 10^22 as float64: every one exact (5^22 < 2^53)."""
_POW10_I = np.array([10**i for i in range(19)], dtype=np.int64)
_SPLIT = float(2**27 + 1)
"""Veltkamp's splitter for float64 (Dekker 1971, "A floating-point technique for extending the available
precision", §5): splits a double into two 26-bit halves whose products are exact."""
_MAX_EXACT = 2**53
_MIN_E, _MAX_E = -4, 15
"""Decimal exponents Python writes positionally (repr switches to 1e-05 / 1e+16 outside)."""


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(hi, lo)`` with ``hi = fl(a·b)`` and ``hi + lo == a·b`` exactly (Dekker's TwoProduct)."""
    hi = a * b
    ca, cb = _SPLIT * a, _SPLIT * b
    a_hi, b_hi = ca - (ca - a), cb - (cb - b)
    a_lo, b_lo = a - a_hi, b - b_hi
    return hi, ((a_hi * b_hi - hi) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def _digits17(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(D17, E, side, unsure)``: ``a`` (positive, finite)·10^(16-E) rounded to the 17-digit integer D17
    exactly; ``side`` is the sign of the exact ``a·10^(16-E) - D17`` (0: D17 is exact)."""
    exp10 = np.floor(np.log10(a)).astype(np.int64)
    for _ in range(2):  # log10 may be one off next to a power of ten
        scaled = a * _POW10_F[np.clip(16 - exp10, 0, 22)]
        exp10 += (scaled >= 1e17).astype(np.int64) - (scaled < 1e16).astype(np.int64)
    unsure = (exp10 < _MIN_E) | (exp10 > _MAX_E)
    hi, lo = _two_product(a, _POW10_F[np.clip(16 - exp10, 0, 22)])
    floor_lo = np.floor(lo)
    frac = lo - floor_lo
    d17 = hi.astype(np.int64) + floor_lo.astype(np.int64) + (frac > 0.5)
    unsure |= (frac == 0.5) | (hi < _MAX_EXACT) | (d17 < 10**16) | (d17 >= 10**17)
    side = np.where(frac > 0.5, -1, np.where(frac > 0, 1, 0))
    return d17, exp10, side, unsure


def _round_to(d17: np.ndarray, side: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """``(candidate, tie)``: the exact value (``d17`` + a part of sign ``side``) correctly rounded to ``p``
    digits, and where it lies exactly halfway (left to ``repr``)."""
    unit = _POW10_I[17 - p]
    quotient, rest = np.divmod(d17, unit)
    half = rest == unit // 2
    return quotient + ((rest > unit // 2) | (half & (side > 0))), half & (side == 0)


def _reads_back(a: np.ndarray, candidate: np.ndarray, p: int, exp10: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(same, checkable)``: whether the p-digit ``candidate``·10^(E-p+1) reads back as ``a``; exact where
    ``checkable`` (Clinger's fast path: candidate < 2^53, an exact power of ten, one rounding)."""
    fraction_digits = p - 1 - exp10
    scale = _POW10_F[np.clip(np.abs(fraction_digits), 0, 22)]
    value = np.where(fraction_digits >= 0, candidate / scale, candidate * scale)
    return value == a, candidate < _MAX_EXACT


def _shortest(a: np.ndarray, d17: np.ndarray, side: np.ndarray,
              exp10: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(digits, precision, unsure)``: the fewest correctly rounded digits that read back as ``a``.

    Reading back is monotone in p (a p-digit string is a (p+1)-digit one), and a string of p ≤ 15 digits
    reads back only if the correctly rounded 15-digit one does (it is at least as close), so 15 and 16
    are tried on every value and 1..15 only on those 15 digits already hold."""
    digits, precision = d17.copy(), np.full(a.size, 17)
    d15, tie15 = _round_to(d17, side, 15)
    short = _reads_back(a, d15, 15, exp10)[0] & ~tie15
    d16, tie16 = _round_to(d17, side, 16)
    same16, checkable16 = _reads_back(a, d16, 16, exp10)
    unsure = ~short & (tie15 | tie16 | ~checkable16)
    at16 = ~short & same16
    digits[at16], precision[at16] = d16[at16], 16
    few = np.flatnonzero(short)
    chosen = np.zeros(few.size, bool)
    for p in range(1, 16):
        candidate, tie = _round_to(d17[few], side[few], p)
        found = ~chosen & _reads_back(a[few], candidate, p, exp10[few])[0]
        unsure[few[~chosen & tie]] = True
        digits[few[found]], precision[few[found]] = candidate[found], p
        chosen |= found
    unsure |= digits >= _POW10_I[np.minimum(precision, 18)]  # rounding carried into a new digit
    return digits, precision, unsure


_CHUNK = np.arange(10_000)
_CHUNK_CHARS = (np.stack([_CHUNK // 1000, _CHUNK // 100 % 10, _CHUNK // 10 % 10, _CHUNK % 10], axis=1) + ord("0")
                ).astype(np.uint8).view(np.uint32).ravel()
"""The four ASCII digits of 0000..9999, each as one 4-byte word (gathered a word at a time)."""


def _digit_chars(padded: np.ndarray) -> np.ndarray:
    """The 17 ASCII digits of each 17-digit integer (n × 17 view), from a 4-digit lookup: five word gathers."""
    words = np.empty((padded.size, 5), np.uint32)
    high, low = np.divmod(padded, _POW10_I[8])  # 9 and 8 digits: the rest in 32-bit arithmetic
    high, low = high.astype(np.uint32), low.astype(np.uint32)
    words[:, 0] = _CHUNK_CHARS[high // 100_000_000]
    words[:, 1] = _CHUNK_CHARS[high // 10_000 % 10_000]
    words[:, 2] = _CHUNK_CHARS[high % 10_000]
    words[:, 3] = _CHUNK_CHARS[low // 10_000]
    words[:, 4] = _CHUNK_CHARS[low % 10_000]
    return words.view(np.uint8).reshape(padded.size, 20)[:, 3:]


_WIDTH = 24
"""Longest repr of a float64: sign, 17 digits, the point and "e-308" (24 characters)."""


def _render(values: np.ndarray, digits: np.ndarray, precision: np.ndarray, exp10: np.ndarray) -> np.ndarray:
    """The repr text of each value from its shortest digits as NUL-padded rows of ASCII (n × 24).

    Per decimal exponent E (a column has a few), by slices of the 17 padded digits: ``E ≥ 0`` the point
    after digit E; ``E < 0`` "0." and −E−1 zeros before the digits. Every row is then cut after its last
    significant digit (or after the one "0" an integral value shows after the point)."""
    digit_chars = _digit_chars(digits * _POW10_I[17 - precision])
    out = np.zeros((values.size, _WIDTH), np.uint8)
    out[:, 0] = np.where(values < 0, ord("-"), 0)
    ordered = np.sort(exp10)  # np.unique's values, without its first-call import of numpy.ma (~4 ms, issue 17)
    exponents = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))].tolist() if ordered.size else []
    for exponent in exponents:
        rows = slice(None) if len(exponents) == 1 else np.flatnonzero(exp10 == exponent)
        if exponent >= 0:
            out[rows, 1:exponent + 2] = digit_chars[rows, :exponent + 1]
            out[rows, exponent + 2] = ord(".")
            out[rows, exponent + 3:19] = digit_chars[rows, exponent + 1:]
        else:
            zeros = -exponent - 1
            out[rows, 1:3 + zeros] = ord("0")
            out[rows, 2] = ord(".")
            out[rows, 3 + zeros:20 + zeros] = digit_chars[rows]
    # last column of the text: the sign column, the digits, the point, the fraction (at least one digit)
    end = np.where(exp10 >= 0, exp10 + 2 + np.maximum(precision - exp10 - 1, 1), 1 - exp10 + precision)
    out[:, 1:] *= np.arange(1, _WIDTH) <= end[:, None]
    return out


def int_matrix(column: np.ndarray) -> np.ndarray | None:
    """``repr(int(v))`` of each value of a 1-D integer array as ASCII rows (n × 18: sign, 17 digits) with
    NULs in place of the sign of a non-negative value and of leading zeros (a reader drops every NUL);
    None when a value has more than 17 digits (the caller writes those with ``int.__repr__``)."""
    if column.size and (int(column.min()) <= -_POW10_I[17] or int(column.max()) >= _POW10_I[17]):
        return None
    values = column.astype(np.int64)
    magnitude = np.abs(values)
    chars = np.zeros((values.size, 18), np.uint8)
    chars[:, 0] = np.where(values < 0, ord("-"), 0)
    chars[:, 1:] = _digit_chars(magnitude)
    num_digits = 1 + np.searchsorted(_POW10_I[1:17], magnitude, side="right")  # 10^k ≤ |v| for k = 1..16
    chars[:, 1:] *= np.arange(17, 0, -1) <= num_digits[:, None]  # digit j of 17 shows when 17 - j ≤ its digits
    return chars


def put_rows(chars: np.ndarray, rows: np.ndarray, texts: list[str]) -> None:
    """Write ASCII ``texts`` (each at most ``chars.shape[1]`` long) into ``rows`` of ``chars``, NUL-padded."""
    if len(texts):
        block = np.array([text.encode("ascii") for text in texts], dtype=f"S{chars.shape[1]}")
        chars[rows] = block.view(np.uint8).reshape(len(texts), chars.shape[1])


def text_rows(chars: np.ndarray, prefix: str = "") -> list[str]:
    """``prefix`` + each NUL-padded ASCII row of ``chars``, as strings (one decode, NULs dropped; the
    prefix may hold any ASCII but NUL and \\x01, the row separator used here)."""
    head = np.frombuffer(prefix.encode("ascii"), np.uint8)
    lines = np.zeros((chars.shape[0], head.size + chars.shape[1] + 1), np.uint8)
    lines[:, :head.size], lines[:, head.size:-1], lines[:, -1] = head, chars, 1
    return lines[lines != 0].tobytes().decode("ascii").split("\x01")[:-1]


def repr_matrix(column: np.ndarray, nan: str = "nan", inf: str = "inf",
                minus_inf: str = "-inf") -> tuple[np.ndarray, np.ndarray]:
    """``(chars, rest)``: ``repr(float(v))`` of each value of a 1-D float array as NUL-padded ASCII rows
    (n × 24), computed column-wise (``nan``, ``inf`` and ``minus_inf`` for the non-finite values: a
    writer's own words), except rows ``rest`` (not settled exactly), left empty for the caller to fill."""
    values = np.asarray(column, dtype=np.float64).ravel()
    magnitude = np.abs(values)
    mantissa, exponent = np.frexp(magnitude)
    easy = np.isfinite(values) & (magnitude > 0) & ((mantissa != 0.5) | ((exponent >= -3) & (exponent <= 54)))
    chars = np.zeros((values.size, _WIDTH), np.uint8)
    zero = np.flatnonzero(values == 0)
    chars[zero, :4] = np.where(np.signbit(values[zero])[:, None], np.frombuffer(b"-0.0", np.uint8),
                               np.frombuffer(b"0.0\0", np.uint8))
    easy[zero] = True
    for word, rows in ((nan, np.isnan(values)), (inf, values == np.inf), (minus_inf, values == -np.inf)):
        chars[rows, :len(word)] = np.frombuffer(word.encode("ascii"), np.uint8)
        easy[rows] = True
    index = np.flatnonzero(easy & (magnitude > 0) & (magnitude < np.inf))
    if index.size:
        a = magnitude[index]
        with np.errstate(all="ignore"):
            d17, exp10, side, unsure17 = _digits17(a)
            digits, precision, unsure = _shortest(a, d17, side, exp10)
        sure = ~(unsure | unsure17)
        chars[index[sure]] = _render(values[index[sure]], digits[sure], precision[sure], exp10[sure])
        easy[index[~sure]] = False
    return chars, np.flatnonzero(~easy)


def float_reprs(column: np.ndarray) -> list[str]:
    """``[repr(float(v)) for v in column]`` for a 1-D float array, computed column-wise."""
    values = np.asarray(column, dtype=np.float64).ravel()
    chars, rest = repr_matrix(values)
    put_rows(chars, rest, list(map(float.__repr__, values[rest].tolist())))
    return text_rows(chars)


__all__ = ["float_reprs", "int_matrix", "put_rows", "repr_matrix", "text_rows"]
