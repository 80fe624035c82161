"""HTML for the report: every value is text, escaped, unless it is markup the report built.

A run's files are not trusted: a record, a metric name, an entrant's name or a
file name may hold ``<script>``. So no page is built by pasting strings:

* :func:`markup` fills a literal template, and escapes every value it puts in
  (``markup("<td>{}</td>", name)``), after its format spec (``{:.1f}``); a
  value it built before (a :class:`Markup`) goes in as it is, in text;
* :func:`join` joins values, escaping each;
* :func:`href` is the only value a link (``href``/``src``) takes: a relative,
  percent-encoded path, so a file named ``javascript:alert(1).html`` is a
  file, not a script;
* ``Markup("<hr>")`` of a literal is the report's own markup, trusted.

A template is checked once (cached) for where its fields stand: in text or in
a quoted attribute value, never in a tag or attribute name, an unquoted value,
an event handler, a style sheet or a script; a ``style`` attribute takes
numbers only. Anything else raises, naming the template: a mistake in the
report's code, found by its tests, not a hostile file.

The same API as :mod:`markupsafe` (``Markup``, ``escape``, ``__html__``), kept
to the standard library: the report runs on the base install, and markupsafe
is not a dependency of it.
"""

from __future__ import annotations

import html
import string
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, LiteralString
from urllib.parse import quote

__all__ = ["Markup", "Url", "escape", "href", "join", "markup"]


class Markup(str):
    """HTML the report built: a literal of its own, or what :func:`markup` returned."""

    __slots__ = ()

    def __html__(self) -> Markup:
        return self

    def __add__(self, other: str) -> Markup:
        return Markup(str.__add__(self, escape(other)))

    def __radd__(self, other: str) -> Markup:
        return Markup(str.__add__(escape(other), self))


class Url(Markup):
    """A link :func:`href` built: a relative, percent-encoded path and fragment."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """``value`` as HTML text (``&``, ``<``, ``>``, both quotes escaped); a Markup as it is."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def join(separator: str, items: Iterable[object]) -> Markup:
    """``items`` joined by ``separator``, each escaped unless it is :class:`Markup`."""
    return Markup(str(escape(separator)).join(escape(item) for item in items))


def href(path: str = "", fragment: str = "") -> Url:
    """A link to a file beside the page (``path``) and an anchor in it (``fragment``).

    Every character but letters, digits and ``_.-~`` is percent-encoded, the
    slash and the colon too: the link is relative whatever the name holds.

    Example:
        >>> href("javascript:alert(1).html"), href("", "e1")
        ('javascript%3Aalert%281%29.html', '#e1')
    """
    link = quote(path, safe="")
    return Url(f"{link}#{quote(fragment, safe='')}" if fragment else link)


# Where a template's field stands.
_TEXT, _VALUE, _URL, _NUMBER = "text", "value", "url", "number"
_LINKS = frozenset({"href", "src", "action", "formaction", "xlink:href", "background", "poster"})
_RAW = frozenset({"script", "style"})  # their content is not HTML: escaping protects nothing


# A template's piece: the literal text before a field, then the field: its argument (an index,
# a keyword, or None for the tail), format spec, conversion and context.
_Field = tuple[str, int | str | None, str, str | None, str]


class _Scanner:
    """Where each character of a template stands: text, a tag, an attribute value, raw text."""

    def __init__(self, template: str) -> None:
        self.template = template
        # _TEXT; in a tag: "name" (its name), "tag" (between attributes), "eq" (after a name's
        # "="), "unquoted", _VALUE (quoted); "raw" (inside <style> or <script>); "comment" (<!...>)
        self.state = _TEXT
        self.quote = ""
        self.tag = ""
        self.attribute = ""
        self.name_ended = True
        self.value = ""
        self.raw = ""

    def feed(self, text: str) -> None:
        for char in text:
            self._step(char)

    def _step(self, char: str) -> None:
        state = self.state
        if state == _TEXT:
            if char == "<":
                self.state, self.tag = "name", ""
        elif state == "name":
            if char == ">":
                self._close_tag()
            elif char.isspace():
                self._attributes()
            elif char == "!" and not self.tag:
                self.state = "comment"
            else:
                self.tag += char.lower()
        elif state == "tag":
            if char == ">":
                self._close_tag()
            elif char == "=":
                self.state = "eq"
            elif char.isspace() or char == "/":
                self.name_ended = True
            elif self.name_ended:
                self.attribute, self.name_ended = char.lower(), False
            else:
                self.attribute += char.lower()
        elif state == "eq":
            if char in "\"'":
                self.state, self.quote, self.value = _VALUE, char, ""
            elif not char.isspace():
                self.state = "unquoted"
        elif state == "unquoted":
            if char == ">":
                self._close_tag()
            elif char.isspace():
                self._attributes()
        elif state == _VALUE:
            if char == self.quote:
                self._attributes()
            else:
                self.value += char
        elif state == "raw":
            self.raw += char.lower()
            if self.raw.endswith(f"</{self.tag}"):
                self.tag = "/" + self.tag
                self._attributes()
        elif state == "comment" and char == ">":
            self.state = _TEXT

    def _attributes(self) -> None:
        """Inside a tag, past its name or an attribute: the next word names an attribute."""
        self.state, self.attribute, self.name_ended = "tag", "", True

    def _close_tag(self) -> None:
        self.state, self.raw = ("raw" if self.tag in _RAW else _TEXT), ""

    def context(self) -> str:
        """What a field here may hold; ValueError where no escaping makes a value safe."""
        attribute = self.attribute
        if self.state == _TEXT:
            return _TEXT
        if self.state == _VALUE and attribute.startswith("on"):
            self._refuse(f"an event handler ({attribute}=...), which runs as a script")
        if self.state == _VALUE and attribute == "style":
            return _NUMBER
        if self.state == _VALUE and attribute in _LINKS:
            if self.value:
                self._refuse(f"part of a link ({attribute}=...): the field is the whole href")
            return _URL
        if self.state == _VALUE:
            return _VALUE
        if self.state in ("eq", "unquoted"):
            self._refuse("an unquoted attribute value: quote it")
        if self.state == "raw":
            self._refuse(f"the content of <{self.tag}>, which is not HTML")
        if self.state == "comment":
            self._refuse("a comment or a declaration")
        self._refuse("a tag or an attribute name")
        raise AssertionError  # unreachable: _refuse raises

    def _refuse(self, where: str) -> None:
        raise ValueError(f"the template {self.template!r} puts a field in {where}")


@lru_cache(maxsize=1024)
def _fields(template: str) -> tuple[_Field, ...]:
    """The template's pieces, each field's context checked once; numbering resolved."""
    scanner, position = _Scanner(template), 0
    fields: list[_Field] = []
    parts = list(string.Formatter().parse(template))
    for i, (literal, name, spec, conversion) in enumerate(parts):
        scanner.feed(literal)
        if name is None:
            fields.append((literal, None, "", None, _TEXT))
            continue
        if not (name == "" or name.isdigit() or name.isidentifier()) or "{" in (spec or ""):
            raise ValueError(
                f"the template {template!r} has the field {{{name}:{spec}}}: use {{}}, {{0}} or "
                "{name} with a plain format spec"
            )
        key: int | str = name
        if name == "":
            key, position = position, position + 1
        elif name.isdigit():
            key = int(name)
        context = scanner.context()
        after = parts[i + 1][0] if i + 1 < len(parts) else ""
        if context == _URL and not after.startswith(scanner.quote):
            raise ValueError(
                f"the template {template!r} puts a field in part of an href: the field is the "
                "whole link (build it with href(path, fragment))"
            )
        fields.append((literal, key, spec or "", conversion, context))
    return tuple(fields)


_CONVERSIONS: dict[str, Callable[[object], str]] = {"r": repr, "s": str, "a": ascii}


def markup(template: LiteralString, /, *args: Any, **kwargs: Any) -> Markup:
    """``template`` (a literal: the report's own markup) with its fields filled, escaped.

    A field in text takes a :class:`Markup` as it is and escapes anything
    else; a field in an attribute value escapes even a Markup; an ``href``
    takes only an :func:`href` value, a ``style`` only numbers.

    Raises:
        ValueError: a field where escaping protects nothing (see the module's docs).
        TypeError: a link that :func:`href` did not build, a style that is not a number.

    Example:
        >>> markup('<td title="{}">{:.1f}</td>', 'a"b', 0.25)
        '<td title="a&quot;b">0.2</td>'
    """
    out = []
    for before, key, spec, conversion, context in _fields(template):
        out.append(before)
        if key is None:
            continue
        value = args[key] if isinstance(key, int) else kwargs[key]
        if conversion is not None:
            value = _CONVERSIONS[conversion](value)
        if context == _TEXT and not spec and isinstance(value, Markup):
            out.append(value)
        elif context == _URL:
            if not isinstance(value, Url):
                raise TypeError(
                    f"the template {template!r} links to {value!r}: an href takes href(...) only"
                )
            out.append(value)
        elif context == _NUMBER:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"the template {template!r} styles with {value!r}: numbers only")
            out.append(format(value, spec))
        else:  # text; an attribute's value is text even when built: its quotes would end it
            out.append(html.escape(format(value, spec) if spec else str(value)))
    return Markup("".join(out))
