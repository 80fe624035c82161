r"""Find ``<tag>...</tag>`` fields in model output written to an XML-ish contract.

Agents answer in light XML: a fixed sequence of fields such as
``<solution>...</solution><evaluation>...</evaluation>``. Models wrap that in
Markdown fences, ``<think>`` blocks and chatty preambles, and samplers cut the
text before the closing tag of the last field (the stop string). This module
holds the contract-independent half of parsing such text:

* :func:`normalize` undoes the common wrappers (the debate recipe, "Parser normalization"):
  :func:`strip_think_tags`, :func:`start_at_first_tag`, and the closing fence
  of a fenced answer (:func:`strip_code_fence` for text that starts with one).
* :func:`scan_tags` finds the fields, in contract order, as :class:`TagSpan`.

The extraction rule, in one line: *a field is the first ``<tag>`` after the
previous field, and its content runs to the next ``</tag>``, or to the end of
the text when there is none* (then ``TagSpan.closed`` is ``False``). Tag names
match case-insensitively (ASCII) and tolerate whitespace before ``>``; text
between fields is ignored. Whether a field may be missing or unclosed is the
contract's decision, not this module's: the debate contract
(:mod:`llm_envs.debate.protocol`) allows an unclosed field only for its last
tag, whose closing tag is the sampler's stop string.

This module must never use an XML or HTML parser, and never unescape or
rewrite field content: fields hold free text and code (``a < b && c``) that is
not well-formed XML and must come back verbatim. The one exception is
:func:`strip_think_tags`, which the seed asks for.

Example:
    >>> text = "Sure!\n```xml\n<A>1 < 2</A>\n<b>kept & verbatim"
    >>> spans = scan_tags(normalize(text, ["a", "b"]), ["a", "b"])
    >>> spans["a"].content, spans["b"].content, spans["b"].closed
    ('1 < 2', 'kept & verbatim', False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "TagSpan",
    "find_tag",
    "first_tag_start",
    "normalize",
    "scan_tags",
    "start_at_first_tag",
    "strip_code_fence",
    "strip_think_tags",
]

# ASCII so that tag names and digits mean what they look like: with Unicode
# case folding, "<ſolution>" (long s) would open a <solution> field.
_FLAGS = re.IGNORECASE | re.ASCII

_TAG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_THINK_TAG = re.compile(r"</?think\s*>", _FLAGS)
# A fence is a run of 3+ backticks or tildes (CommonMark). The opener may carry
# an info string ("xml"); "<" ends it, so "```xml<solution>" keeps its tag.
_FENCE = re.compile(r"`{3,}|~{3,}")
_OPENING_FENCE = re.compile(r"\A\s*(?:`{3,}|~{3,})[^\s`<]*[ \t]*(?:\r?\n)?")
# Matched against the *reversed* last line of a preamble: regexes anchored at
# the end of a string are quadratic on long runs, anchored at the start linear.
_REVERSED_OPENING_FENCE = re.compile(r"[^\s`<]*(?:`{3,}|~{3,})")


@dataclass(frozen=True, slots=True)
class TagSpan:
    """Where one field lies in the scanned text.

    Attributes:
        tag: The tag name, as the caller spelled it.
        content: The raw text between the opening tag and the closing tag (or
            the end of the text), not stripped.
        start: Index of the ``<`` of the opening tag.
        end: Index just past the closing tag, or ``len(text)`` if unclosed.
        closed: Whether the closing tag was found.
    """

    tag: str
    content: str
    start: int
    end: int
    closed: bool


def strip_think_tags(text: str) -> str:
    """Remove ``<think>`` and ``</think>`` tags (any case), keeping what they wrap.

    Reasoning models (Qwen-style) wrap their thoughts in ``<think>`` tags; seed
    001 removes the tags and keeps the content, which usually ends up in the
    preamble and is then dropped by :func:`start_at_first_tag`. The tags are
    removed everywhere, including inside fields.

    Example:
        >>> strip_think_tags("<THINK>hmm</think><a>1</a>")
        'hmm<a>1</a>'
    """
    return _THINK_TAG.sub("", text)


def strip_code_fence(text: str) -> str:
    r"""Unwrap text that starts with a Markdown code fence such as ```` ```xml ````.

    The opening fence line is removed. The closing fence is removed only when
    the text ends with one that closes the opener: when the fences after the
    opener are odd in number, the last one is the wrapper's; when they are
    even, they delimit code blocks inside the content and stay. A missing
    closer (the sampler stopped first) is fine. Text that does not start with
    a fence is returned unchanged.

    Example:
        >>> strip_code_fence("```xml\n<a>x</a>\n```\n")
        '<a>x</a>'
        >>> strip_code_fence("```xml\n<a>\n```py\ncode\n```")
        '<a>\n```py\ncode\n```'
    """
    match = _OPENING_FENCE.match(text)
    if match is None:
        return text
    return _strip_closing_fence(text[match.end() :])


def first_tag_start(text: str, tags: Iterable[str]) -> int | None:
    """Index of the first opening tag of any of ``tags`` in ``text``, or ``None``.

    Example:
        >>> first_tag_start("Here: <b>1</b><a>2</a>", ["a", "b"])
        6
    """
    match = _any_open_pattern(tuple(tags)).search(text)
    return None if match is None else match.start()


def start_at_first_tag(text: str, tags: Iterable[str]) -> str:
    """Drop any preamble before the first opening tag of ``tags``.

    Text without any of the tags is returned unchanged.

    Example:
        >>> start_at_first_tag("Let me answer. <a>1</a>", ["a"])
        '<a>1</a>'
    """
    start = first_tag_start(text, tags)
    return text if start is None else text[start:]


def normalize(text: str, tags: Iterable[str]) -> str:
    r"""Undo the wrappers models put around a contract answer (the recipe's "Parser normalization").

    In order: remove ``<think>`` tags keeping their content
    (:func:`strip_think_tags`); drop the preamble before the first structured
    tag (:func:`start_at_first_tag`); and, when that preamble ended with an
    opening code fence (its last line is a fence, and its fences are odd in
    number), remove the matching closing fence at the end (as
    :func:`strip_code_fence` does). Without any of ``tags``, the text is only
    unwrapped of its think tags and fence.

    Args:
        text: The model's raw output.
        tags: The contract's tag names.

    Returns:
        The text from the first structured tag on.

    Example:
        >>> normalize("<think>plan</think>Answer:\n```xml\n<a>1</a>\n```", ["a"])
        '<a>1</a>'
    """
    text = strip_think_tags(text)
    start = first_tag_start(text, tags)
    if start is None:
        return strip_code_fence(text)
    body = text[start:]
    if _ends_with_opening_fence(text[:start]):
        body = _strip_closing_fence(body)
    return body


def find_tag(text: str, tag: str, start: int = 0) -> TagSpan | None:
    """The first ``<tag>`` field at or after ``start``, or ``None`` if there is none.

    The content runs to the first ``</tag>`` after the opening tag or, when
    there is none, to the end of the text (``closed=False``).

    Args:
        text: The text to search.
        tag: A tag name such as ``"solution"`` (matched case-insensitively).
        start: Where to start looking for the opening tag.

    Returns:
        The field's span, or ``None`` if no opening tag follows ``start``.

    Raises:
        ValueError: If ``tag`` is not a valid tag name.

    Example:
        >>> find_tag("<a>1</A>", "a")
        TagSpan(tag='a', content='1', start=0, end=8, closed=True)
    """
    opening = _open_pattern(tag).search(text, start)
    if opening is None:
        return None
    closing = _close_pattern(tag).search(text, opening.end())
    if closing is None:
        return TagSpan(tag, text[opening.end() :], opening.start(), len(text), closed=False)
    return TagSpan(
        tag, text[opening.end() : closing.start()], opening.start(), closing.end(), closed=True
    )


def scan_tags(text: str, tags: Sequence[str]) -> dict[str, TagSpan]:
    """Find the fields of a contract in order: each one after the previous field's end.

    Scanning in order means a tag name quoted inside an earlier field (an
    evaluation that mentions ``<consensus>``) is never taken for a later field.
    A tag that is absent, or that only appears before the previous field,
    is missing from the result. Once a field is unclosed it runs to the end of
    the text, so no field follows it.

    Args:
        text: Normalized text (see :func:`normalize`).
        tags: The contract's tag names, in contract order.

    Returns:
        The spans of the fields found, keyed by tag name, in contract order.

    Example:
        >>> spans = scan_tags("<a>1</a> <c>3</c> <b>2", ["a", "b", "c"])
        >>> {tag: (span.content, span.closed) for tag, span in spans.items()}
        {'a': ('1', True), 'b': ('2', False)}
    """
    spans: dict[str, TagSpan] = {}
    position = 0
    for tag in tags:
        span = find_tag(text, tag, position)
        if span is not None:
            spans[tag] = span
            position = span.end
    return spans


def _ends_with_opening_fence(preamble: str) -> bool:
    # An even number of fences means the last one closed a code block in the preamble.
    if len(_FENCE.findall(preamble)) % 2 == 0:
        return False
    preamble = preamble.rstrip()
    last_line = preamble[preamble.rfind("\n") + 1 :]
    return _REVERSED_OPENING_FENCE.match(last_line[::-1]) is not None


def _strip_closing_fence(body: str) -> str:
    # An odd number of fences means the last one closes the wrapper opened
    # before `body`; an even number are code blocks inside the content.
    if len(_FENCE.findall(body)) % 2 == 0:
        return body
    stripped = body.rstrip()
    for char in "`~":
        before = stripped.rstrip(char)
        if len(stripped) - len(before) >= 3:
            return before.rstrip()
    return body


def _check_tag_name(tag: str) -> str:
    if not isinstance(tag, str) or _TAG_NAME.fullmatch(tag) is None:
        raise ValueError(
            f"invalid tag name {tag!r}: use letters, digits, '_', '.' or '-', "
            "starting with a letter or '_' (e.g. 'solution')"
        )
    return tag


# Contracts have a handful of tags; caching keeps every parse free of regex compiles.
@lru_cache(maxsize=256)
def _open_pattern(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<{re.escape(_check_tag_name(tag))}\s*>", _FLAGS)


@lru_cache(maxsize=256)
def _close_pattern(tag: str) -> re.Pattern[str]:
    return re.compile(rf"</{re.escape(_check_tag_name(tag))}\s*>", _FLAGS)


@lru_cache(maxsize=64)
def _any_open_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    if not tags:
        raise ValueError("tags must name at least one tag, got none")
    names = "|".join(re.escape(_check_tag_name(tag)) for tag in tags)
    # "\s*>" after the alternation rules out prefixes: <consensus_reason> is not <consensus>.
    return re.compile(rf"<(?:{names})\s*>", _FLAGS)
