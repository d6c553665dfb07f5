"""Human quantities in, SI floats inside, human strings out (DESIGN §2).

Rules, applied everywhere a person types a number:

* Case matters. ``b`` is a bit and ``B`` a byte; ``k``/``K`` is 10³, ``Ki`` is 2¹⁰;
  ``M``/``G``/``T``/``P`` are 10⁶…10¹⁵ and ``Mi``/``Gi``/``Ti``/``Pi`` their binary cousins.
* A size ("4GiB", "512 MB", "8 Gb") becomes bytes. A bare number is bytes only where the caller
  allows it (``allow_bare=True``, the CLI's nccl-tests habit); profiles always need a unit.
* A count ("1B params", "7e9", "175B", "70 M") becomes a plain number: after a count, ``B``
  means billion (``1B params`` is 10⁹ parameters, not a byte).
* A rate ("400 Gbps", "50 GB/s", "3.2 Tb/s") becomes bytes per second; a time ("1.5 us")
  seconds; a compute rate ("989 TFLOP/s", "312 TFLOPS") FLOP per second.
* Numbers may use ``1_000`` or ``1,024`` digit grouping (groups of three after a comma) and
  exponents (``1e3 kB``). Negative, NaN and infinite values are rejected.
* Anything ambiguous (``"16G"``: GB or GiB? ``"gbps"``: bit or byte?) or unknown raises
  :class:`~commmodel.errors.UnitError` naming the input and the accepted forms. Nothing is guessed.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

from commmodel.errors import UnitError

_DECIMAL_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY_PREFIX = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
_PREFIX = {**_DECIMAL_PREFIX, **_BINARY_PREFIX}

# Digits, optionally grouped as 1,024,000 or 1_000_000; a fraction; an exponent.
_NUMBER = r"(?P<num>[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+(?:_\d+)*)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
# The unit starts with something that cannot continue a number, and has no inner spaces.
_QUANTITY_RE = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>[^\d\s.,_+\-]\S*)?\s*$")
_NON_FINITE_RE = re.compile(r"^\s*[+-]?(?:nan|inf|infinity)\b", re.IGNORECASE)

_SIZE_FORMS = "8B, 4KiB, 512 MiB, 1GB, 1.5 TB, 8 Gb (bits), or a bare byte count where allowed"
_RATE_FORMS = "400 Gbps, 400 Gb/s, 50 GB/s, 50 GBps, 25 GiB/s, 3.2 Tb/s"
_TIME_FORMS = "1.5 us, 1.5 µs, 800 ns, 2 ms, 0.1 s"
_COUNT_FORMS = "7e9, 1B, 1.5B params, 175B, 70M, 8k, 1,024, 7 billion"
_FLOPS_FORMS = "989 TFLOP/s, 989 TFLOPS, 1.98 PFLOP/s, 312e12 FLOP/s"
_CASE_HINT = " (units are case-sensitive: B is byte, b is bit; k, Ki, M, Mi, G, Gi, T, Ti, P, Pi, E, Ei)"


def _split(text: object, what: str, forms: str) -> tuple[float, str]:
    """Split "400 Gbps" into (400.0, "Gbps"); a number passes through with unit ""."""
    if isinstance(text, bool):
        raise UnitError(f"{what} {text!r} is a boolean; use a number with a unit, e.g. {forms}")
    if isinstance(text, numbers.Real):
        value, unit = float(text), ""
    elif isinstance(text, str):
        match = _QUANTITY_RE.match(text)
        if not match:
            if _NON_FINITE_RE.match(text):
                raise UnitError(f"{what} {text!r} is not a finite number; accepted forms: {forms}")
            raise UnitError(f"cannot read {what} {text!r}; accepted forms: {forms}")
        value = float(match.group("num").replace(",", ""))  # float() itself accepts 1_000
        unit = match.group("unit") or ""
    else:
        raise UnitError(f"{what} {text!r} is a {type(text).__name__}, not a string or number; "
                        f"accepted forms: {forms}")
    return value, unit


def _checked(value: float, text: object, what: str, forms: str) -> float:
    """The final value must be finite (``1e308 PB`` overflows) and non-negative."""
    if not math.isfinite(value):
        raise UnitError(f"{what} {text!r} is not a finite number; accepted forms: {forms}")
    if value < 0:
        raise UnitError(f"{what} {text!r} is negative; it must be ≥ 0, e.g. {forms}")
    return value + 0.0  # -0.0 becomes 0.0


def _prefixed(unit: str, base_units: dict[str, float]) -> float | None:
    """Multiplier for ``unit`` = prefix + one of ``base_units`` (exact, case-sensitive)."""
    for base, base_factor in base_units.items():
        if unit.endswith(base):
            prefix = unit[: len(unit) - len(base)]
            if prefix in _PREFIX:
                return _PREFIX[prefix] * base_factor
    return None


def _parse_with_bases(text: str | float | int, what: str, forms: str, bases: dict[str, float], allow_bare: bool,
                      hint: Callable[[str], str] = lambda unit: "",
                      refuse: Callable[[str], bool] = lambda unit: False) -> float:
    """Shared reader of sizes, rates and compute rates: a number, then prefix + one of ``bases``.

    A bare number passes only with ``allow_bare``; an unknown (or ``refuse``d) unit is an error that adds
    ``hint(unit)`` and lists ``forms``; the result is checked finite and non-negative.
    """
    value, unit = _split(text, what, forms)
    if unit == "":
        if not allow_bare:
            raise UnitError(f"{what} {text!r} has no unit; write it as e.g. {forms}")
        return _checked(value, text, what, forms)
    factor = _prefixed(unit, bases)
    if factor is None or refuse(unit):
        raise UnitError(f"unknown {what.replace(' ', '-')} unit {unit!r} in {text!r}{hint(unit)}; "
                        f"accepted forms: {forms}")
    return _checked(value * factor, text, what, forms)


# ---------------------------------------------------------------- sizes (bytes)

_SIZE_BASES = {"B": 1.0, "byte": 1.0, "bytes": 1.0, "b": 0.125, "bit": 0.125, "bits": 0.125}


def parse_size_bytes(text: str | float | int, *, allow_bare: bool = False) -> float:
    """Read a size such as ``"4GiB"`` (4·2³⁰ B) or ``"8 Gb"`` (10⁹ B) and return bytes.

    A bare number is accepted as bytes only with ``allow_bare`` (the CLI's ``--size 1024``).
    """
    return _parse_with_bases(text, "size", _SIZE_FORMS, _SIZE_BASES, allow_bare, hint=_size_hint)


def _size_hint(unit: str) -> str:
    if unit in _PREFIX:
        decimal = unit.rstrip("i")
        return f" ('{unit}' alone is ambiguous: write {decimal.upper()}iB for binary or {decimal}B for decimal)"
    if _prefixed(unit, _RATE_BASES) is not None:
        return " (that is a rate, not a size: drop the /s)"
    return _CASE_HINT


# ---------------------------------------------------------------- counts

_COUNT_WORDS = {
    "": 1.0, "k": 1e3, "K": 1e3, "thousand": 1e3, "M": 1e6, "million": 1e6, "m": 1e6,
    "B": 1e9, "b": 1e9, "G": 1e9, "billion": 1e9, "T": 1e12, "trillion": 1e12,
}
_COUNT_NOUNS = re.compile(r"\s*(params|parameters|param|tokens|samples|gpus|GPUs)\s*$")


def parse_count(text: str | float | int) -> float:
    """Read a count such as ``"1.5B params"`` (1.5·10⁹), ``"70M"``, ``"7e9"`` or ``"1,024"``.

    After a count ``B`` means billion and ``T`` trillion (the model-size habit); a lower-case
    ``m`` is million (there are no milli-parameters).
    """
    bare = _COUNT_NOUNS.sub("", text) if isinstance(text, str) else text
    try:
        value, unit = _split(bare, "count", _COUNT_FORMS)
    except UnitError as err:  # report what the user typed, not the text without its noun
        raise UnitError(str(err).replace(repr(bare), repr(text), 1)) from None
    if unit not in _COUNT_WORDS:
        hint = " (a count has no byte or binary unit: B after a number means billion)" if (
            _prefixed(unit, _SIZE_BASES) is not None or unit in _BINARY_PREFIX) else ""
        raise UnitError(f"unknown count suffix {unit!r} in {text!r}{hint}; accepted forms: {_COUNT_FORMS}")
    return _checked(value * _COUNT_WORDS[unit], text, "count", _COUNT_FORMS)


def parse_int_count(text: str | float | int) -> int:
    """:func:`parse_count` that must come out as a whole number (GPUs, layers, batch)."""
    value = parse_count(text)
    if not value.is_integer():
        raise UnitError(f"count {text!r} = {value:g} is not a whole number; accepted forms: {_COUNT_FORMS}")
    return int(value)


# ---------------------------------------------------------------- times (seconds)

# (multiplier, divisor): dividing by the exact 1e9 keeps "800 ns" == 800e-9 (× 1e-9 would not).
_TIME_UNITS = {
    "s": (1.0, 1.0), "sec": (1.0, 1.0), "ms": (1.0, 1e3), "us": (1.0, 1e6), "µs": (1.0, 1e6),
    "μs": (1.0, 1e6), "usec": (1.0, 1e6), "ns": (1.0, 1e9), "min": (60.0, 1.0), "h": (3600.0, 1.0),
}


def parse_time_s(text: str | float | int, *, allow_bare: bool = False) -> float:
    """Read a duration such as ``"1.5 us"`` and return seconds (bare numbers are seconds if allowed)."""
    value, unit = _split(text, "time", _TIME_FORMS)
    if unit == "" and not allow_bare:
        raise UnitError(f"time {text!r} has no unit; write it as e.g. {_TIME_FORMS}")
    if unit not in _TIME_UNITS and unit != "":
        raise UnitError(f"unknown time unit {unit!r} in {text!r}; accepted forms: {_TIME_FORMS}")
    multiplier, divisor = _TIME_UNITS.get(unit, (1.0, 1.0))
    return _checked(value * multiplier / divisor, text, "time", _TIME_FORMS)


# ---------------------------------------------------------------- rates (bytes per second)

_RATE_BASES = {
    "B/s": 1.0, "Bps": 1.0, "byte/s": 1.0, "bytes/s": 1.0,
    "b/s": 0.125, "bps": 0.125, "bit/s": 0.125, "bits/s": 0.125, "bit": 0.125,
}


def parse_rate_bytes_per_s(text: str | float | int, *, allow_bare: bool = False) -> float:
    """Read a bandwidth such as ``"400 Gbps"`` (5·10¹⁰ B/s) or ``"50 GB/s"`` and return bytes/s."""
    return _parse_with_bases(text, "rate", _RATE_FORMS, _RATE_BASES, allow_bare, hint=lambda unit: (
        " (that is a size, not a rate: add /s, e.g. 50 GB/s)" if _prefixed(unit, _SIZE_BASES) is not None
        else _CASE_HINT))


# ---------------------------------------------------------------- compute rates (FLOP per second)

_FLOPS_BASES = {"FLOP/s": 1.0, "FLOPS": 1.0, "FLOPs/s": 1.0, "flop/s": 1.0}


def parse_flops_per_s(text: str | float | int, *, allow_bare: bool = False) -> float:
    """Read a compute rate such as ``"989 TFLOP/s"`` and return FLOP/s (decimal prefixes only)."""
    return _parse_with_bases(text, "compute rate", _FLOPS_FORMS, _FLOPS_BASES, allow_bare,
                             refuse=lambda unit: any(unit.startswith(p) for p in _BINARY_PREFIX))


# ---------------------------------------------------------------- fractions

def parse_fraction(text: str | float | int) -> float:
    """Read an efficiency such as ``0.82`` or ``"82%"``; it must lie in (0, 1.5]."""
    value, unit = _split(text, "fraction", "0.82 or 82%")
    if unit == "%":
        value /= 100.0
    elif unit != "":
        raise UnitError(f"unknown fraction unit {unit!r} in {text!r}; write 0.82 or 82%")
    if not 0.0 < value <= 1.5:
        raise UnitError(f"fraction {text!r} must lie in (0, 1.5] (1.5 allows in-network reduction gains); "
                        "write 0.82 or 82%")
    return value


# ---------------------------------------------------------------- formatting

def _scaled(value: float, ladder: tuple[tuple[str, float], ...], unit: str, digits: int) -> str:
    """``value`` in the largest step of ``ladder`` (largest first) whose rounded mantissa is ≥ 1.

    Rounding is applied before choosing, so 999.96e9 with 4 digits is "1 TB/s", not "1000 GB/s".
    """
    if not math.isfinite(value):
        return f"{value} {unit}".strip()
    for prefix, factor in ladder:
        mantissa = float(f"{abs(value) / factor:.{digits}g}")
        if mantissa >= 1.0:
            return f"{math.copysign(mantissa, value):.{digits}g} {prefix}{unit}".strip()
    prefix, factor = ladder[-1]
    return f"{value / factor:.{digits}g} {prefix}{unit}".strip()


_SIZE_LADDER = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))
_TIME_LADDER = (("", 1.0), ("m", 1e-3), ("u", 1e-6), ("n", 1e-9))
_FLOPS_LADDER = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("", 1.0))
_COUNT_LADDER = (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3), ("", 1.0))


def format_size(size_bytes: float, digits: int = 4) -> str:
    """``4294967296`` → ``"4 GiB"``; sizes that are not whole binary multiples use SI (``"80 GB"``)."""
    magnitude = abs(size_bytes)
    for prefix in ("Pi", "Ti", "Gi", "Mi", "Ki"):
        mantissa = magnitude / _BINARY_PREFIX[prefix]
        if 1 <= mantissa < 1000 and mantissa.is_integer():
            return f"{math.copysign(mantissa, size_bytes):.{digits}g} {prefix}B"
    return _scaled(size_bytes, _SIZE_LADDER, "B", digits)


def format_size_si(size_bytes: float, digits: int = 4) -> str:
    """``3.8e11`` → ``"380 GB"``: always decimal (1 GB = 10⁹ B), for outputs that compare sizes with a
    device capacity (an H100's 81559 MiB prints as "85.52 GB") so one output never mixes GiB and GB."""
    return _scaled(size_bytes, _SIZE_LADDER, "B", digits)


def format_time(time_s: float, digits: int = 4) -> str:
    """``1.5e-6`` → ``"1.5 us"``; zero is ``"0 s"``."""
    if time_s == 0:
        return "0 s"
    return _scaled(time_s, _TIME_LADDER, "s", digits)


def format_duration(time_s: float) -> str:
    """A wall-clock span for people: ``2.4e6`` → ``"27.8 days"``, ``5000`` → ``"1.39 hours"``, below an hour
    :func:`format_time`."""
    for unit_s, name in ((86400.0, "days"), (3600.0, "hours")):
        if time_s >= unit_s:
            return f"{time_s / unit_s:.3g} {name}"
    return format_time(time_s)


def format_rate(bw_bytes_per_s: float, digits: int = 4) -> str:
    """``5e10`` → ``"50 GB/s"`` (decimal, bytes: the nccl-tests convention)."""
    return _scaled(bw_bytes_per_s, _SIZE_LADDER, "B/s", digits)


def format_flops(flops_per_s: float, digits: int = 4) -> str:
    """``9.89e14`` → ``"989 TFLOP/s"``."""
    return _scaled(flops_per_s, _FLOPS_LADDER, "FLOP/s", digits)


def format_count(count: float, digits: int = 4) -> str:
    """``1.5e9`` → ``"1.5B"`` (model-size habit: K, M, B, T)."""
    return _scaled(count, _COUNT_LADDER, "", digits).replace(" ", "")


# ---------------------------------------------------------------- pydantic annotated types
# Profiles and configs declare fields with these; YAML strings are parsed once, at load time,
# and the model holds plain SI floats. Serialisation writes the human form back with 12
# significant digits, so that a dumped profile (e.g. a calibrated one) reloads to the same floats.

_SERIAL_DIGITS = 12


def _human(parse, fmt, forms: str) -> tuple:
    """Annotated metadata: parse on the way in, format on the way out, a string in the JSON schema."""
    return (BeforeValidator(parse), PlainSerializer(lambda v: fmt(v, _SERIAL_DIGITS), return_type=str),
            WithJsonSchema({"type": "string", "description": f"A quantity with its unit: {forms}."}))


SizeBytes = Annotated[(float, *_human(parse_size_bytes, format_size, _SIZE_FORMS.split(", or")[0]))]
"""Bytes, read from "80 GiB"-style strings (a unit is required)."""
TimeSeconds = Annotated[(float, *_human(parse_time_s, format_time, _TIME_FORMS))]
"""Seconds, read from "1.5 us"-style strings (a unit is required)."""
RateBytesPerS = Annotated[(float, *_human(parse_rate_bytes_per_s, format_rate, _RATE_FORMS))]
"""Bytes per second, read from "400 Gbps" / "50 GB/s" strings (a unit is required)."""
FlopsPerS = Annotated[(float, *_human(parse_flops_per_s, format_flops, _FLOPS_FORMS))]
"""FLOP per second, read from "989 TFLOP/s" strings (a unit is required)."""
Fraction = Annotated[float, BeforeValidator(parse_fraction), WithJsonSchema(
    {"anyOf": [{"type": "number"}, {"type": "string"}], "description": "0.82 or 82%, in (0, 1.5]."},
    mode="validation")]
"""A dimensionless efficiency in (0, 1.5], read from 0.82 or "82%"."""
Count = Annotated[float, BeforeValidator(parse_count), WithJsonSchema(
    {"anyOf": [{"type": "number"}, {"type": "string"}], "description": f"A count: {_COUNT_FORMS}."},
    mode="validation")]
"""A count, read from "1.5B", "70M", "7e9"."""
