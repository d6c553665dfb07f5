"""Units (DESIGN §2): a table of strings with exact values, round trips, properties, rejections.

Expected values are written as the arithmetic a person would do by hand (2**30, 400e9 / 8), so a
table row is its own derivation. Equality is exact: the parser multiplies by exact prefixes
(10^k for k ≥ 0, 2^k, 1/8) and divides by exact powers of ten for sub-second units, so each
result is the correctly rounded value of the decimal the user typed.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from commmodel.errors import CommModelError, UnitError
from commmodel.units import (
    Count, FlopsPerS, Fraction, RateBytesPerS, SizeBytes, TimeSeconds, format_count, format_flops,
    format_rate, format_size, format_time, parse_count, parse_flops_per_s, parse_fraction,
    parse_int_count, parse_rate_bytes_per_s, parse_size_bytes, parse_time_s,
)

KiB, MiB, GiB, TiB, PiB = (2.0**k for k in (10, 20, 30, 40, 50))

ACCEPTED = [
    # sizes: SI, IEC, bits vs bytes, spacing, digit grouping, exponents
    (parse_size_bytes, "8B", 8), (parse_size_bytes, "4KiB", 4 * KiB), (parse_size_bytes, "4GiB", 4 * GiB),
    (parse_size_bytes, " 4 GiB ", 4 * GiB), (parse_size_bytes, "512 MiB", 512 * MiB),
    (parse_size_bytes, "2 TiB", 2 * TiB), (parse_size_bytes, "1 PiB", PiB), (parse_size_bytes, "1GB", 1e9),
    (parse_size_bytes, "1.5 TB", 1.5e12), (parse_size_bytes, "1 PB", 1e15), (parse_size_bytes, "1 kB", 1e3),
    (parse_size_bytes, "1 KB", 1e3), (parse_size_bytes, "1e3 kB", 1e6), (parse_size_bytes, "1_000 B", 1000),
    (parse_size_bytes, "1,024 B", 1024), (parse_size_bytes, "1,024,000.5 B", 1_024_000.5),
    (parse_size_bytes, ".5 GB", 0.5e9), (parse_size_bytes, "0 B", 0), (parse_size_bytes, "8 Gb", 1e9),
    (parse_size_bytes, "1 Mb", 1e6 / 8), (parse_size_bytes, "1 Kib", KiB / 8), (parse_size_bytes, "16 bits", 2),
    (parse_size_bytes, "1 Gbit", 1e9 / 8), (parse_size_bytes, "3 bytes", 3), (parse_size_bytes, "1.5e3 MiB", 1500 * MiB),
    # counts: "B" after a count is billion
    (parse_count, "1B params", 1e9), (parse_count, "7e9", 7e9), (parse_count, "175B", 175e9),
    (parse_count, "70M", 70e6), (parse_count, "70 M", 70e6), (parse_count, "1,024", 1024),
    (parse_count, "1.5B params", 1.5e9), (parse_count, "8k", 8e3), (parse_count, "7 billion", 7e9),
    (parse_count, "1T tokens", 1e12), (parse_count, "13b", 13e9), (parse_count, "1_000_000", 1e6),
    (parse_count, "512 GPUs", 512), (parse_count, 2048, 2048),
    # times
    (parse_time_s, "1.5 us", 1.5e-6), (parse_time_s, "1.5 µs", 1.5e-6), (parse_time_s, "1.5 μs", 1.5e-6),
    (parse_time_s, "800 ns", 800e-9), (parse_time_s, "2 ms", 2e-3), (parse_time_s, "0.1 s", 0.1),
    (parse_time_s, "3 usec", 3e-6), (parse_time_s, "1 min", 60), (parse_time_s, "2 h", 7200),
    # rates: bits per second vs bytes per second
    (parse_rate_bytes_per_s, "400 Gbps", 400e9 / 8), (parse_rate_bytes_per_s, "400 Gb/s", 400e9 / 8),
    (parse_rate_bytes_per_s, "50 GB/s", 50e9), (parse_rate_bytes_per_s, "50 GBps", 50e9),
    (parse_rate_bytes_per_s, "25 GiB/s", 25 * GiB), (parse_rate_bytes_per_s, "3.2 Tb/s", 3.2e12 / 8),
    (parse_rate_bytes_per_s, "100 Mbps", 100e6 / 8), (parse_rate_bytes_per_s, "1 Gbit/s", 1e9 / 8),
    (parse_rate_bytes_per_s, "900 GB/s", 900e9), (parse_rate_bytes_per_s, "1 kB/s", 1e3),
    # compute rates and fractions
    (parse_flops_per_s, "989 TFLOP/s", 989e12), (parse_flops_per_s, "989 TFLOPS", 989e12),
    (parse_flops_per_s, "1.98 PFLOP/s", 1.98e15), (parse_flops_per_s, "312e12 FLOP/s", 312e12),
    (parse_flops_per_s, "19.5 TFLOPs/s", 19.5e12), (parse_flops_per_s, "1 GFLOP/s", 1e9),
    (parse_fraction, "82%", 0.82), (parse_fraction, 0.8, 0.8), (parse_fraction, "1.07", 1.07),
]


@pytest.mark.parametrize("parse, text, expected", ACCEPTED, ids=[repr(row[1]) for row in ACCEPTED])
def test_accepted_strings_have_exact_values(parse, text, expected):
    assert parse(text) == expected


def test_bare_numbers_only_where_allowed():
    assert parse_size_bytes("1024", allow_bare=True) == 1024
    assert parse_size_bytes(1024, allow_bare=True) == 1024
    assert parse_time_s(2, allow_bare=True) == 2
    assert parse_rate_bytes_per_s("5e10", allow_bare=True) == 5e10
    assert parse_int_count("1,024") == 1024 and isinstance(parse_int_count("8k"), int)


# (parser, input, an accepted form the message must show)
REJECTED = [
    (parse_size_bytes, "16G", "GiB"), (parse_size_bytes, "16k", "KiB"), (parse_size_bytes, "4 gb", "4KiB"),
    (parse_size_bytes, "-1 GB", "4KiB"), (parse_size_bytes, "nan GB", "4KiB"), (parse_size_bytes, "inf GB", "4KiB"),
    (parse_size_bytes, float("nan"), "4KiB"), (parse_size_bytes, float("inf"), "4KiB"), (parse_size_bytes, "", "4KiB"),
    (parse_size_bytes, "   ", "4KiB"), (parse_size_bytes, True, "4KiB"), (parse_size_bytes, "1.2.3 GB", "4KiB"),
    (parse_size_bytes, "4 ZB", "4KiB"), (parse_size_bytes, "1,2 GB", "4KiB"), (parse_size_bytes, "1__0 B", "4KiB"),
    (parse_size_bytes, "1e308 PB", "4KiB"), (parse_size_bytes, "4 KIB", "4KiB"), (parse_size_bytes, "1 kiB", "4KiB"),
    (parse_size_bytes, "1 GB/s", "4KiB"), (parse_size_bytes, "1024", "4KiB"), (parse_size_bytes, None, "4KiB"),
    (parse_size_bytes, [1], "4KiB"), (parse_size_bytes, "1 B B", "4KiB"),
    (parse_rate_bytes_per_s, "gbps", "400 Gbps"), (parse_rate_bytes_per_s, "400 gbps", "400 Gbps"),
    (parse_rate_bytes_per_s, "400 GB", "50 GB/s"), (parse_rate_bytes_per_s, "400 G", "400 Gbps"),
    (parse_rate_bytes_per_s, "1 GB/S", "50 GB/s"), (parse_rate_bytes_per_s, "-inf Gbps", "400 Gbps"),
    (parse_time_s, "1 S", "1.5 us"), (parse_time_s, "5 m", "1.5 us"), (parse_time_s, "1 ps", "800 ns"),
    (parse_time_s, "-1 us", "1.5 us"), (parse_time_s, "1.5", "1.5 us"),
    (parse_flops_per_s, "1 TiFLOP/s", "989 TFLOP/s"), (parse_flops_per_s, "1 tflops", "989 TFLOP/s"),
    (parse_flops_per_s, "989 TFLOPs", "989 TFLOP/s"),
    (parse_count, "1 GiB", "1.5B params"), (parse_count, "1 GB", "1.5B params"), (parse_count, "params", "7e9"),
    (parse_count, "-7B", "7e9"), (parse_count, "1 Mi", "70M"), (parse_count, False, "7e9"),
    (parse_int_count, "1.5", "7e9"), (parse_fraction, "0", "82%"), (parse_fraction, "82 pct", "82%"),
]


@pytest.mark.parametrize("parse, text, form", REJECTED, ids=[f"{r[0].__name__}-{r[1]!r}" for r in REJECTED])
def test_rejected_inputs_name_the_input_and_the_accepted_forms(parse, text, form):
    with pytest.raises(UnitError) as err:
        parse(text)
    message = str(err.value)
    assert repr(text) in message
    assert form in message
    assert "\n" not in message
    assert isinstance(err.value, CommModelError)


def test_rejections_explain_the_rule():
    def message(parse, text):
        with pytest.raises(UnitError) as err:
            parse(text)
        return str(err.value)

    assert "ambiguous" in message(parse_size_bytes, "16G")
    assert "case-sensitive" in message(parse_size_bytes, "4 gb")
    assert "case-sensitive" in message(parse_rate_bytes_per_s, "400 gbps")
    assert "negative" in message(parse_size_bytes, "-1 GB")
    assert "finite" in message(parse_size_bytes, "nan GB")
    assert "finite" in message(parse_size_bytes, "1e308 PB")
    assert "no unit" in message(parse_size_bytes, "1024")
    assert "that is a rate" in message(parse_size_bytes, "1 GB/s")
    assert "that is a size" in message(parse_rate_bytes_per_s, "400 GB")
    assert "billion" in message(parse_count, "1 GB")


# ------------------------------------------------------------------ formatting

FORMATTED = [
    (format_size, 4 * GiB, "4 GiB"), (format_size, 80e9, "80 GB"), (format_size, 1536, "1.536 kB"),
    (format_size, 999, "999 B"), (format_size, 999.96e3, "1 MB"), (format_size, -5000, "-5 kB"),
    (format_size, 0, "0 B"), (format_size, math.inf, "inf B"), (format_size, 1000 * GiB, "1.074 TB"),
    (format_time, 1.5e-6, "1.5 us"), (format_time, 0, "0 s"), (format_time, 0.99996, "1 s"),
    (format_time, 800e-9, "800 ns"), (format_time, 120, "120 s"), (format_time, -2e-3, "-2 ms"),
    (format_rate, 50e9, "50 GB/s"), (format_rate, 999.96e9, "1 TB/s"), (format_rate, 0, "0 B/s"),
    (format_flops, 989e12, "989 TFLOP/s"), (format_flops, 1.979e15, "1.979 PFLOP/s"),
    (format_count, 1.5e9, "1.5B"), (format_count, 999_999, "1M"), (format_count, 999, "999"),
]


@pytest.mark.parametrize("fmt, value, text", FORMATTED, ids=[f"{r[0].__name__}-{r[1]!r}" for r in FORMATTED])
def test_format(fmt, value, text):
    assert fmt(value) == text


def _printed_tolerance(digits: int) -> float:
    """Largest relative error of a number printed with ``digits`` significant digits (+ float noise)."""
    return 0.5 * 10.0 ** (1 - digits) + 1e-15


DIGITS = st.integers(min_value=3, max_value=12)
ROUND_TRIPS = [
    (format_size, parse_size_bytes, 1e-3, 1e18), (format_time, parse_time_s, 1e-12, 1e5),
    (format_rate, parse_rate_bytes_per_s, 1e-3, 1e16), (format_flops, parse_flops_per_s, 1e-3, 1e19),
    (format_count, parse_count, 1e-3, 1e16),
]


@pytest.mark.parametrize("fmt, parse, low, high", ROUND_TRIPS, ids=[r[0].__name__ for r in ROUND_TRIPS])
def test_format_then_parse_round_trips_within_the_printed_digits(fmt, parse, low, high):
    @given(st.floats(min_value=low, max_value=high), DIGITS)
    def check(value, digits):
        assert math.isclose(parse(fmt(value, digits)), value, rel_tol=_printed_tolerance(digits))

    check()


@given(st.integers(min_value=1, max_value=999), st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi"]))
def test_whole_binary_sizes_print_and_parse_exactly(count, prefix):
    size_bytes = count * 2.0 ** (10 * (["Ki", "Mi", "Gi", "Ti", "Pi"].index(prefix) + 1))
    assert format_size(size_bytes) == f"{count} {prefix}B"
    assert parse_size_bytes(format_size(size_bytes)) == size_bytes


# ------------------------------------------------------------------ properties

POSITIVE = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


@given(POSITIVE)
def test_prefixes_scale_exactly(x):
    assert parse_size_bytes(f"{x} GB") == x * 1e9
    assert parse_size_bytes(f"{x} KiB") == x * 1024
    assert parse_size_bytes(f"{x} Gb") * 8 == parse_size_bytes(f"{x} GB")
    assert parse_rate_bytes_per_s(f"{x} Gbps") == parse_rate_bytes_per_s(f"{x} Gb/s") == x * 1e9 / 8
    assert parse_rate_bytes_per_s(f"{x} GB/s") == parse_rate_bytes_per_s(f"{x} GBps") == x * 1e9
    assert parse_time_s(f"{x} ns") == x / 1e9 and parse_time_s(f"{x} us") == parse_time_s(f"{x} µs")
    assert parse_count(f"{x}B") == parse_count(f"{x} B params") == x * 1e9
    assert parse_flops_per_s(f"{x} TFLOP/s") == parse_flops_per_s(f"{x} TFLOPS") == x * 1e12


@given(POSITIVE, POSITIVE, st.sampled_from(["B", "kB", "KiB", "MB", "GiB", "Tb"]))
def test_parsing_is_monotone_in_the_number(a, b, unit):
    low, high = sorted((a, b))
    assert parse_size_bytes(f"{low} {unit}") <= parse_size_bytes(f"{high} {unit}")


def test_units_are_ordered():
    ladder = ["1 b", "1 B", "1 kB", "1 KiB", "1 MB", "1 MiB", "1 GB", "1 GiB", "1 TB", "1 TiB", "1 PB", "1 PiB"]
    values = [parse_size_bytes(text) for text in ladder]
    assert values == sorted(values) and len(set(values)) == len(values)


@given(st.integers(min_value=0, max_value=10**15),
       st.sampled_from(["{:,} B", "{:_} B", "{:,}", "{:_}"]), st.sampled_from(["", " ", "\t"]))
def test_digit_grouping_and_whitespace(n, pattern, pad):
    text = pad + pattern.format(n) + pad
    if text.strip().endswith("B"):
        assert parse_size_bytes(text) == n
    else:
        assert parse_count(text) == n


# ------------------------------------------------------------------ pydantic types

class _Link(BaseModel):
    size: SizeBytes
    latency: TimeSeconds
    bw: RateBytesPerS
    peak: FlopsPerS
    efficiency: Fraction
    params: Count


@given(st.floats(min_value=1e-3, max_value=1e18))
def test_annotated_types_serialise_and_reload_without_loss(value):
    link = _Link(size=format_size(value, 17), latency="1 us", bw="1 GB/s", peak="1 TFLOP/s", efficiency=0.9,
                 params="1B")
    dumped = link.model_dump(mode="json")
    assert math.isclose(_Link.model_validate(dumped).size, link.size, rel_tol=1e-11)


def test_annotated_types_parse_and_reject_through_pydantic():
    link = _Link(size="4 GiB", latency="1.5 us", bw="400 Gbps", peak="989 TFLOP/s", efficiency="82%", params="7B")
    assert (link.size, link.latency, link.bw, link.peak, link.efficiency, link.params) == (
        4 * GiB, 1.5e-6, 50e9, 989e12, 0.82, 7e9)
    assert link.model_dump(mode="json")["bw"] == "50 GB/s"
    with pytest.raises(ValidationError, match="ambiguous"):
        _Link(size="16G", latency="1 us", bw="1 GB/s", peak="1 TFLOP/s", efficiency=0.9, params=1)
    schema = _Link.model_json_schema()["properties"]
    assert schema["size"]["type"] == "string" and schema["bw"]["type"] == "string"


def test_exabytes_parse_as_the_size_bound_names_them():
    """The size bound is printed as 1 EB (commmodel/limits.py), so EB and EiB read."""
    from commmodel.units import parse_size_bytes

    assert parse_size_bytes("1EB") == 1e18 and parse_size_bytes("1 EiB") == 2.0**60
