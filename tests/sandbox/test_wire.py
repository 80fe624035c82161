"""The values that cross between judge and run: exact round trips, and a decoder that only says no.

Property tests: every plain value survives ``decode(encode(value))`` with its
exact types; any bytes at all either decode to plain data or raise
:class:`WireError` (never another exception, never an object of another type).
"""

from __future__ import annotations

import collections
import marshal
import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_envs.sandbox._wire import (
    MAX_DEPTH,
    MatchSnapshot,
    Unsupported,
    WireError,
    decode,
    encode,
    untag,
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**400), max_value=2**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.complex_numbers(allow_nan=False)
    | st.text()
    | st.binary()
)
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=4), max_leaves=8
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
    ),
    max_leaves=20,
)


# What a decoded value may be made of: plain types, and the judge's own rebuilt containers.
DECODED_TYPES = (
    type(None), bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset,
    collections.Counter, collections.OrderedDict, collections.defaultdict, collections.deque,
    Decimal, Fraction, range, bytearray, MatchSnapshot,
)  # fmt: skip


def shape(value: Any) -> Any:
    """``value`` with every node's exact type, nan made comparable; fails on any other type."""
    kind = type(value)
    assert kind in DECODED_TYPES, f"decoded to a {kind.__name__}"
    if kind is float and math.isnan(value):
        return (float, "nan")
    if kind is complex:
        return (complex, repr(value))
    if kind in (list, tuple):
        return (kind, [shape(item) for item in value])
    if kind is dict:
        return (dict, [(shape(k), shape(v)) for k, v in value.items()])
    if kind in (set, frozenset):
        return (kind, sorted(repr(shape(item)) for item in value))
    return (kind, value)


@settings(max_examples=300, deadline=None)
@given(values)
def test_plain_values_round_trip_with_exact_types(value: Any) -> None:
    data, tagged = encode(value)
    assert not tagged
    assert shape(decode(data)) == shape(value)
    exact, _ = encode(value, exact=True)
    assert shape(decode(exact)) == shape(value)


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_decode_to_plain_data_or_raise_wire_error(data: bytes) -> None:
    try:
        value = decode(data)
    except WireError:
        return
    shape(value)  # only the types above, at every level (shape() asserts it)


@settings(max_examples=300, deadline=None)
@given(values, st.integers(min_value=0, max_value=200))
def test_truncated_or_extended_bytes_are_refused(value: Any, cut: int) -> None:
    data, _ = encode(value)
    if cut < len(data):
        with pytest.raises(WireError):
            decode(data[:cut])
    with pytest.raises(WireError):
        decode(data + b"N")


@pytest.mark.parametrize(
    "value",
    [
        collections.Counter("abca"),
        collections.OrderedDict([("b", 1), ("a", 2)]),
        collections.deque([1, (2, 3)], maxlen=5),
        Decimal("-1.50"),
        Fraction(-3, 7),
        range(3, -9, -2),
        bytearray(b"xy"),
        [collections.Counter(x=1), {Fraction(1, 2): range(2)}],
    ],
    ids=["counter", "ordered", "deque", "decimal", "fraction", "range", "bytearray", "nested"],
)
def test_standard_containers_cross_as_the_judges_own(value: Any) -> None:
    data, tagged = encode(value, exact=True)
    assert tagged
    decoded = decode(data)
    assert decoded == value and type(decoded) is type(value)
    assert untag(marshal.loads(data)) == value


def test_a_defaultdict_keeps_a_builtin_factory_only() -> None:
    kept = decode(encode(collections.defaultdict(list, a=[1]))[0])
    assert type(kept) is collections.defaultdict and kept.default_factory is list
    dropped = decode(encode(collections.defaultdict(lambda: 0, a=1))[0])
    assert dropped == {"a": 1} and dropped.default_factory is None


def test_a_match_becomes_a_snapshot_of_its_groups() -> None:
    match = re.search(r"(?P<word>[a-z]+)(\d)?", "12abc")
    assert match is not None
    snapshot = decode(encode(match)[0])
    assert isinstance(snapshot, MatchSnapshot) and snapshot
    assert snapshot.group() == "abc" and snapshot.span("word") == (2, 5)
    assert snapshot.groups() == ("abc", None) and snapshot.groupdict() == {"word": "abc"}
    assert snapshot[1] == "abc" and snapshot.lastindex == 1


@pytest.mark.parametrize(
    "value",
    [
        type("L", (list,), {})([1]),
        type("I", (int,), {})(6),
        object(),
        iter([1]),
        (x for x in [1]),
        len,
        Ellipsis,
        (Ellipsis, "Decimal", "6"),  # shaped like a tag: still refused, never a Decimal
        [1, (Ellipsis, "range", (0, 6, 1))],
    ],
    ids=[
        "list-subclass",
        "int-subclass",
        "object",
        "iterator",
        "generator",
        "function",
        "ellipsis",
        "tag-shaped",
        "nested-tag-shaped",
    ],
)
def test_values_that_are_not_plain_data_are_refused_when_encoded(value: Any) -> None:
    with pytest.raises((Unsupported, WireError)):
        decode(encode(value)[0])


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (marshal.dumps(compile("1", "", "eval")), "not plain data"),
        (b"l" + (10**6).to_bytes(4, "little"), "out of range"),
        (b"[" + (10**7).to_bytes(4, "little"), "out of range"),
        (b"[\x01\x00\x00\x00" * (MAX_DEPTH + 1) + b"N", "levels deep"),
        (b"<\x01\x00\x00\x00[\x00\x00\x00\x00", "unhashable"),
        (b"u\x01\x00\x00\x00\xff", "UTF-8"),
        (b"(\x03\x00\x00\x00.u\x03\x00\x00\x00BADN", "malformed"),
        (b"r\x00\x00\x00\x00", "not plain data"),
    ],
    ids=["code", "huge-int", "huge-list", "too-deep", "unhashable", "bad-utf8", "bad-tag", "ref"],
)
def test_malformed_or_oversized_bytes_name_the_problem(data: bytes, why: str) -> None:
    with pytest.raises(WireError, match=why):
        decode(data)
