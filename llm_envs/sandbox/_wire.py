"""The values that cross between the judge and a run: plain data, and a strict decoder.

A test calls the program through a proxy: the arguments travel from the judge
(the trusted worker) to the run (the program's confined process), and the
result travels back. Only plain data crosses: ``None``, ``bool``, ``int``,
``float`` (nan and inf included), ``complex``, ``str``, ``bytes``, ``list``,
``tuple``, ``dict``, ``set`` and ``frozenset``, nested, plus a few standard
containers that solutions commonly return (``Counter``, ``OrderedDict``,
``defaultdict``, ``deque``, ``Decimal``, ``Fraction``, ``range``, and a
``re.Match``, which arrives as a :class:`MatchSnapshot`). Every value is
rebuilt on the judge's side from the judge's own classes, so nothing the
program defined (a subclass, an ``__eq__``, a generator) ever runs there.

The format is marshal's version 2 (no references, so no cycles or sharing),
which the run's side writes with one C call. The standard containers above are
first turned into tagged tuples ``(Ellipsis, name, payload)``. The judge never
calls ``marshal.loads`` on what a run wrote: :func:`decode` is a parser of its
own that accepts only the types above, within size, depth and integer limits.
Bytes-like objects (``bytearray``, ``memoryview``, ``array``) arrive as ``bytes``.

This module must import only the standard library (it is loaded in the worker
and in every run), must never execute anything while decoding, and must never
return an object whose behavior a run can choose.
"""

from __future__ import annotations

import collections
import decimal
import fractions
import marshal
import re
import struct
from typing import Any

from llm_envs.sandbox._match import MatchSnapshot

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_ITEMS",
    "MAX_SHARED_HASH",
    "MUTABLE",
    "MatchSnapshot",
    "Unsupported",
    "WireError",
    "check_hashes",
    "decode",
    "encode",
    "refresh",
    "untag",
]

#: Arguments whose contents a call may change: sent back after every call.
MUTABLE = frozenset({list, dict, set, bytearray})
#: The deepest nesting of containers a value may have.
MAX_DEPTH = 100
#: The most items (scalars and containers, keys included) one value may hold.
MAX_ITEMS = 1_000_000
#: The largest integer, in marshal's 15-bit digits (about 90,000 decimal digits).
MAX_INT_DIGITS = 20_000

_VERSION = 2
_TAG = Ellipsis
# How marshal writes the start of a tagged tuple: a 3-tuple whose first item is Ellipsis.
_TAG_HEAD = b"(\x03\x00\x00\x00."


class Unsupported(TypeError):
    """A value of a type that cannot cross between the judge and a run."""


class WireError(ValueError):
    """Bytes that are not a well-formed value within the limits."""


# --- encoding (both sides) ----------------------------------------------------------------

_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_BUILTIN_FACTORIES = {
    kind: kind.__name__
    for kind in (int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset)
}


def _tag(value: Any, depth: int, tags: list[str]) -> Any:
    """``value`` with every standard container replaced by its tagged tuple (exact types only).

    Appends the name of each tag it made to ``tags``.
    """
    if depth > MAX_DEPTH:
        raise Unsupported(f"a value nested more than {MAX_DEPTH} levels deep")
    kind = type(value)
    if kind in _PLAIN:
        return value
    if value is _TAG:
        raise Unsupported("Ellipsis")
    depth += 1
    if kind is list:
        return [_tag(item, depth, tags) for item in value]
    if kind is tuple:
        return tuple(_tag(item, depth, tags) for item in value)
    if kind is dict:
        return {_tag(key, depth, tags): _tag(item, depth, tags) for key, item in dict.items(value)}
    if kind is set or kind is frozenset:
        return kind(_tag(item, depth, tags) for item in value)
    name = _TAG_NAMES.get(kind)
    if name is None:
        raise Unsupported(f"a value of type {kind.__name__}")
    tags.append(name)
    if kind is bytearray:
        return (_TAG, name, bytes(value))
    if kind is collections.Counter:
        return (_TAG, name, {_tag(k, depth, tags): _tag(v, depth, tags) for k, v in value.items()})
    if kind is collections.OrderedDict:
        return (
            _TAG,
            name,
            [(_tag(k, depth, tags), _tag(v, depth, tags)) for k, v in value.items()],
        )
    if kind is collections.defaultdict:
        factory = _BUILTIN_FACTORIES.get(value.default_factory)
        items = {_tag(k, depth, tags): _tag(v, depth, tags) for k, v in dict.items(value)}
        return (_TAG, name, (factory, items))
    if kind is collections.deque:
        return (_TAG, name, ([_tag(item, depth, tags) for item in value], value.maxlen))
    if kind is decimal.Decimal:
        return (_TAG, name, str(value))
    if kind is fractions.Fraction:
        return (_TAG, name, (int(value.numerator), int(value.denominator)))
    if kind is range:
        return (_TAG, name, (value.start, value.stop, value.step))
    # re.Match
    pattern = value.re.pattern
    return (
        _TAG,
        name,
        (
            pattern if type(pattern) in (str, bytes) else "",
            value.string,
            value.pos,
            value.endpos,
            [value.span(group) for group in range(value.re.groups + 1)],
            dict(value.re.groupindex),
        ),
    )


_TAG_NAMES: dict[type, str] = {
    bytearray: "bytearray",
    collections.Counter: "Counter",
    collections.OrderedDict: "OrderedDict",
    collections.defaultdict: "defaultdict",
    collections.deque: "deque",
    decimal.Decimal: "Decimal",
    fractions.Fraction: "Fraction",
    range: "range",
    re.Match: "Match",
}


def encode(value: object, *, exact: bool = False) -> tuple[bytes, bool]:
    """``value`` as bytes, and whether it holds tagged containers (see :func:`untag`).

    Args:
        value: plain data.
        exact: keep a ``bytearray`` a ``bytearray`` (marshal alone writes every
            bytes-like object as ``bytes``): the judge's side, for arguments that a
            call may change in place.

    Raises:
        Unsupported: a part of ``value`` has a type that cannot cross, or it
            nests too deeply.
    """
    if not exact:
        try:
            data = marshal.dumps(value, _VERSION)  # type: ignore[arg-type]
        except ValueError:  # an unmarshallable type (or too deep): tag the known ones
            pass
        else:
            # A tuple that looks like a tag must not pass for one: the exact walk
            # refuses Ellipsis. (These bytes inside a string only cost the walk.)
            if _TAG_HEAD not in data:
                return data, False
    tags: list[str] = []
    tagged = _tag(value, 0, tags)
    return marshal.dumps(tagged, _VERSION), bool(tags)


def untag(value: Any) -> Any:
    """The run's side of :func:`encode`: tagged tuples back into containers (trusted input)."""
    kind = type(value)
    if kind is tuple:
        if len(value) == 3 and value[0] is _TAG:
            return _build(value[1], value[2], untag)
        return tuple(untag(item) for item in value)
    if kind is list:
        return [untag(item) for item in value]
    if kind is dict:
        return {untag(key): untag(item) for key, item in value.items()}
    if kind is set or kind is frozenset:
        return kind(untag(item) for item in value)
    return value


# --- the judge's side ---------------------------------------------------------------------


#: Distinct values that may share one hash, in one value, before it is refused.
#: Sets and dicts of values whose hashes collide take time quadratic in their
#: size to build, in C, where no alarm interrupts them: the hashes of ints,
#: tuples and complex numbers are easy to make collide (every multiple of
#: 2**61 - 1 hashes to 0). Honest values hold a handful at most.
MAX_SHARED_HASH = 100
# Containers, and values, of at most this many candidates are not checked: their
# worst case is a few milliseconds.
_CHECK_HASHES_FROM = 1000
# An int with fewer bits hashes to itself: no two distinct ones collide.
_HASH_BITS = 61


def check_hashes(values: list[Any]) -> None:
    """Raise WireError when more than :data:`MAX_SHARED_HASH` distinct ``values`` share one hash."""
    first: dict[int, Any] = {}
    shared: dict[int, int] = {}
    for value in values:
        try:
            code = hash(value)
        except TypeError:
            continue
        seen = first.setdefault(code, value)
        if seen is value or seen == value:
            continue
        count = shared[code] = shared.get(code, 1) + 1
        if count > MAX_SHARED_HASH:
            raise WireError(
                f"more than {MAX_SHARED_HASH} distinct values share one hash (a set or a dict "
                "of them would take quadratic time to build)"
            )


class _Reader:
    """A parser over one value's bytes; each method reads one item and advances."""

    __slots__ = ("collidable", "data", "items", "position")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0
        self.items = 0
        #: The values read whose hashes a run could make collide (big ints, tuples,
        #: complex numbers, frozensets): checked at the end of a large value.
        self.collidable: list[Any] = []

    def take(self, size: int) -> bytes:
        start = self.position
        end = start + size
        if size < 0 or end > len(self.data):
            raise WireError("the value's bytes end early")
        self.position = end
        return self.data[start:end]

    def count(self) -> int:
        (size,) = _INT32.unpack(self.take(4))
        if size < 0 or size > MAX_ITEMS:
            raise WireError(f"a container or string of {size} items is out of range")
        return size

    def value(self, depth: int) -> Any:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise WireError(f"the value holds more than {MAX_ITEMS} items")
        code = self.take(1)
        reader = _READERS.get(code)
        if reader is None:
            raise WireError(f"type code {code!r} is not plain data")
        return reader(self, depth)


_INT32 = struct.Struct("<i")
_DIGIT = struct.Struct("<H")
_DOUBLE = struct.Struct("<d")
_COMPLEX = struct.Struct("<dd")


def _read_long(reader: _Reader, depth: int) -> int:
    (size,) = _INT32.unpack(reader.take(4))
    if abs(size) > MAX_INT_DIGITS:
        raise WireError(f"an integer of more than {MAX_INT_DIGITS * 15} bits is out of range")
    digits = reader.take(2 * abs(size))
    value = 0
    for (digit,) in reversed(list(_DIGIT.iter_unpack(digits))):
        if digit >= 1 << 15:
            raise WireError("an integer digit is out of range")
        value = (value << 15) | digit
    if value.bit_length() >= _HASH_BITS:
        reader.collidable.append(value)
    return -value if size < 0 else value


def _read_complex(reader: _Reader, depth: int) -> complex:
    value = complex(*_COMPLEX.unpack(reader.take(16)))
    reader.collidable.append(value)
    return value


def _read_str(reader: _Reader, depth: int) -> str:
    try:
        return reader.take(reader.count()).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise WireError("a string is not valid UTF-8") from None


_SMALL_INTS = struct.Struct("<xi")


def _read_items(reader: _Reader, depth: int) -> list[Any]:
    if depth >= MAX_DEPTH:
        raise WireError(f"the value is nested more than {MAX_DEPTH} levels deep")
    count = reader.count()
    # The common case, a run of small ints ("i" + 4 bytes each), in one C call.
    start, end = reader.position, reader.position + 5 * count
    data = reader.data
    if count > 4 and end <= len(data) and data[start:end:5] == b"i" * count:
        reader.items += count
        if reader.items > MAX_ITEMS:
            raise WireError(f"the value holds more than {MAX_ITEMS} items")
        reader.position = end
        return [value for (value,) in _SMALL_INTS.iter_unpack(data[start:end])]
    return [reader.value(depth + 1) for _ in range(count)]


def _read_tuple(reader: _Reader, depth: int) -> Any:
    items = _read_items(reader, depth)
    if len(items) == 3 and items[0] is _TAG:
        return _build(items[1], items[2], _checked)
    if any(item is _TAG for item in items):
        raise WireError("Ellipsis is not plain data")
    value = tuple(items)
    reader.collidable.append(value)
    return value


def _read_list(reader: _Reader, depth: int) -> list[Any]:
    items = _read_items(reader, depth)
    if any(item is _TAG for item in items):
        raise WireError("Ellipsis is not plain data")
    return items


def _hashable(values: list[Any]) -> list[Any]:
    for value in values:
        if value is _TAG:
            raise WireError("Ellipsis is not plain data")
    if len(values) > _CHECK_HASHES_FROM:
        check_hashes(values)  # before the set is built
    return values


def _read_set(reader: _Reader, depth: int) -> set[Any]:
    try:
        return set(_hashable(_read_items(reader, depth)))
    except TypeError:
        raise WireError("a set holds an unhashable item") from None


def _read_frozenset(reader: _Reader, depth: int) -> frozenset[Any]:
    try:
        value = frozenset(_hashable(_read_items(reader, depth)))
    except TypeError:
        raise WireError("a set holds an unhashable item") from None
    reader.collidable.append(value)
    return value


def _read_dict(reader: _Reader, depth: int) -> dict[Any, Any]:
    if depth >= MAX_DEPTH:
        raise WireError(f"the value is nested more than {MAX_DEPTH} levels deep")
    keys: list[Any] = []
    items: list[Any] = []
    data = reader.data
    while True:
        if reader.position >= len(data):
            raise WireError("the value's bytes end early")
        if data[reader.position] == 0x30:  # "0": the end of the dict
            reader.position += 1
            break
        key = reader.value(depth + 1)
        item = reader.value(depth + 1)
        if key is _TAG or item is _TAG:
            raise WireError("Ellipsis is not plain data")
        keys.append(key)
        items.append(item)
    if len(keys) > _CHECK_HASHES_FROM:
        check_hashes(keys)  # before the dict is built
    try:
        return dict(zip(keys, items, strict=True))
    except TypeError:
        raise WireError("a dict has an unhashable key") from None


def _read_bytes(reader: _Reader, depth: int) -> bytes:
    return reader.take(reader.count())


_READERS: dict[bytes, Any] = {
    b"N": lambda reader, depth: None,
    b"F": lambda reader, depth: False,
    b"T": lambda reader, depth: True,
    b".": lambda reader, depth: _TAG,
    b"i": lambda reader, depth: _INT32.unpack(reader.take(4))[0],
    b"l": _read_long,
    b"g": lambda reader, depth: _DOUBLE.unpack(reader.take(8))[0],
    b"y": _read_complex,
    b"u": _read_str,
    b"t": _read_str,
    b"s": _read_bytes,
    b"(": _read_tuple,
    b"[": _read_list,
    b"{": _read_dict,
    b"<": _read_set,
    b">": _read_frozenset,
}


def _checked(value: Any) -> Any:
    return value  # decoded values are already plain; _build checks their shapes


def _int(value: object) -> int:
    if type(value) is not int:
        raise WireError("a container's field is not an int")
    return value


def _build(name: object, payload: Any, inner: Any) -> Any:
    """A tagged container from its payload (``inner`` converts the run's nested values)."""
    try:
        if name == "bytearray" and type(payload) is bytes:
            return bytearray(payload)
        if name == "Counter" and type(payload) is dict:
            return collections.Counter({inner(k): inner(v) for k, v in payload.items()})
        if name == "OrderedDict" and type(payload) is list:
            return collections.OrderedDict((inner(k), inner(v)) for k, v in payload)
        if name == "defaultdict" and type(payload) is tuple and len(payload) == 2:
            factory_name, items = payload
            factories = {name: kind for kind, name in _BUILTIN_FACTORIES.items()}
            factory = factories.get(factory_name) if type(factory_name) is str else None
            if type(items) is dict:
                result: collections.defaultdict[Any, Any] = collections.defaultdict(factory)
                result.update({inner(k): inner(v) for k, v in items.items()})
                return result
        if name == "deque" and type(payload) is tuple and len(payload) == 2:
            items, maxlen = payload
            if type(items) is list and (maxlen is None or type(maxlen) is int):
                return collections.deque((inner(item) for item in items), maxlen)
        if name == "Decimal" and type(payload) is str and len(payload) <= 10_000:
            number = decimal.Decimal(payload)
            # (Lazily expanded: `int()` of 1e999999999 would be a billion digits.)
            if number.is_finite() and abs(number.adjusted()) > MAX_INT_DIGITS * 4:
                raise WireError(f"a Decimal of exponent {number.adjusted()} is out of range")
            return number
        if name == "Fraction" and type(payload) is tuple and len(payload) == 2:
            return fractions.Fraction(_int(payload[0]), _int(payload[1]))
        if name == "range" and type(payload) is tuple and len(payload) == 3:
            span = range(_int(payload[0]), _int(payload[1]), _int(payload[2]))
            # (Lazily expanded: a test's list() of it would be a value of that many items.)
            try:
                too_long = len(span) > MAX_ITEMS
            except OverflowError:
                too_long = True
            if too_long:
                raise WireError(f"a range of more than {MAX_ITEMS} items is out of range")
            return span
        if name == "Match" and type(payload) is tuple and len(payload) == 6:
            pattern, string, pos, endpos, spans, names = payload
            if (
                type(pattern) in (str, bytes)
                and type(string) in (str, bytes)
                and type(spans) is list
                and all(
                    type(span) is tuple and len(span) == 2 and all(type(i) is int for i in span)
                    for span in spans
                )
                and spans
                and type(names) is dict
                and all(
                    type(k) is str and type(v) is int and 0 < v < len(spans)
                    for k, v in names.items()
                )
            ):
                return MatchSnapshot(pattern, string, _int(pos), _int(endpos), spans, names)
    except WireError:
        raise
    except (TypeError, ValueError, ArithmeticError, decimal.InvalidOperation):
        pass
    raise WireError(f"a tagged value ({name!r}) is malformed")


def decode(data: bytes) -> Any:
    """The value in ``data``, as the judge's own objects; WireError if anything is off.

    Example:
        >>> decode(encode([1, (2.5, "x"), {3: None}, {True}])[0])
        [1, (2.5, 'x'), {3: None}, {True}]
        >>> decode(b"c")  # a code object: never
        Traceback (most recent call last):
        ...
        llm_envs.sandbox._wire.WireError: type code b'c' is not plain data
    """
    reader = _Reader(data)
    value = reader.value(0)
    if value is _TAG:
        raise WireError("Ellipsis is not plain data")
    if reader.position != len(data):
        raise WireError("extra bytes after the value")
    if len(reader.collidable) > _CHECK_HASHES_FROM:
        # (A test may put them in one set, from however many containers.)
        check_hashes(reader.collidable)
    return value


def refresh(old: Any, new: Any) -> None:
    """Write what a call did to an argument (``new``) into the caller's own object, in place.

    The judge does it for a test's arguments, a run for the arguments it passed
    through the judge to another run's function.
    """
    kind = type(old)
    if kind is list and type(new) is list:
        for index in range(min(len(old), len(new))):
            if type(old[index]) in MUTABLE and type(old[index]) is type(new[index]):
                refresh(old[index], new[index])
            else:
                old[index] = new[index]
        del old[len(new) :]
        old.extend(new[len(old) :])
    elif kind is dict and type(new) is dict:
        for key in [key for key in old if key not in new]:
            del old[key]
        for key, value in new.items():
            current = old.get(key)
            if key in old and type(current) in MUTABLE and type(current) is type(value):
                refresh(current, value)
            else:
                old[key] = value
    elif kind is set and type(new) is set:
        old.intersection_update(new)
        old.update(new)
    elif kind is bytearray and type(new) in (bytes, bytearray):
        old[:] = new
    # A changed type (the program sent something else back) leaves the argument as it was.
