"""The debate's output contract: parse one agent's answer into fields and votes.

The debate recipe ("Output Contract (XML Schema) and Parsing Details") asks every
debater to answer with five tags, in this order (:data:`TAGS`)::

    <solution>...</solution>
    <evaluation>...</evaluation>
    <comparison>Agent 0 > Agent 2</comparison>      (may be missing, empty or N/A)
    <consensus>YES or NO</consensus>
    <consensus_reason>...</consensus_reason>

:func:`parse_response` turns raw text into a frozen :class:`DebateResponse`, or
raises :class:`ParseError` naming the tag at fault. The rules, each one tested
in ``tests/debate/test_protocol.py``:

Fields
    Text is first normalized (:func:`llm_envs.parsing.normalize`): ``<think>``
    tags are removed (their content kept), preamble before the first tag is
    dropped, and a Markdown fence around the answer is removed. The tags are
    then found in contract order, case-insensitively; each field runs to its
    closing tag. Only the last field, ``<consensus_reason>``, may be unclosed
    (its content then runs to the end of the text), because samplers stop on
    :data:`STOP` and vLLM returns the text *without* the stop string. A
    length-truncated last field is accepted the same way. Field text is kept
    verbatim apart from surrounding whitespace: ``<``, ``&`` and code are
    never unescaped or rewritten. Fields other than ``<consensus>`` may be
    empty.

Consensus
    ``YES`` or ``NO`` in any case, optionally with a trailing ``.`` or ``!`` and
    Markdown emphasis or quotes around it (``**Yes.**``). Anything else
    (``maybe``, ``YES, mostly``, an empty tag) is a :class:`ParseError` naming
    the value: the episode's termination depends on it, so it is never guessed.

Comparisons
    One comparison per line, ``Agent a OP Agent b`` with ``OP`` one of ``>``,
    ``<`` (read as the mirrored ``>``), ``=`` or ``==`` (a tie); ``&gt;`` and
    ``&lt;`` are read as ``>`` and ``<``, since models writing XML escape them.
    ``agent`` matches in any case, written ``Agent1``, ``Agent_1`` or
    ``Agent 1``, with Markdown emphasis or backticks around it allowed.

    * Each line yields its *first* comparison; text before and after it is
      ignored, so bullets (``- ``, ``* ``, ``•``), numbering (``1.``, ``2)``),
      labels and trailing explanations (``Agent 0 > Agent 2 because ...``)
      need no special case. A second, separate comparison on the same line is
      ignored: the contract asks for one per line.
    * A chain ``Agent 0 > Agent 1 > Agent 2`` yields its adjacent pairs
      (``0 > 1`` and ``1 > 2``): what it literally states, and no transitive
      ``0 > 2`` that the agent did not write.
    * A line with a letter or digit that yields no comparison (``Agent 0 is
      best``, ``0 > 1``, ``Agent 0 >= Agent 1``) is counted in
      ``unparsed_comparison_lines``. Blank lines, lines of punctuation only
      (``---``, fences) and lines starting with ``N/A``, ``NA`` or ``None``
      are not counted.
    * A comparison with the author on either side is dropped and counted in
      ``self_comparisons_dropped`` (the debate recipe: "no self-comparison").
    * Out-of-range ids (``Agent 7`` among 3 agents) and ``Agent 1 = Agent 1``
      are kept: the parser does not know the number of agents, and the reward
      functions count such votes as malformed. Ids have at most 18 digits;
      a longer number makes its line unparsed. Repeated comparisons are all
      kept (the seed does not deduplicate); the environment's opt-in
      ``vote_counting="once_per_pair"`` counts them once.

This module never sees tokens, never touches an environment, and never raises
anything but :class:`ParseError` for any string it is given, which it reads in
time linear in its length (see the patterns' comments).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, NamedTuple

from llm_envs.judgements import Vote
from llm_envs.parsing.tags import TagSpan, normalize, scan_tags

__all__ = [
    "COMPARISON",
    "CONSENSUS",
    "CONSENSUS_REASON",
    "EVALUATION",
    "OPTIONAL_TAGS",
    "SOLUTION",
    "STOP",
    "TAGS",
    "Comparison",
    "DebateResponse",
    "ParseError",
    "ParsedComparisons",
    "contract_score",
    "format_response",
    "parse_comparisons",
    "parse_response",
]

# The contract's tag names. Every other module (prompts, the env's infos and
# records, scripted agents, the spaces' samples) takes them from here.
SOLUTION: Final = "solution"
"""The answer, with its reasoning."""
EVALUATION: Final = "evaluation"
"""The agent's assessment of the other answers (``N/A`` when there are none)."""
COMPARISON: Final = "comparison"
"""The votes, one pairwise comparison per line (optional)."""
CONSENSUS: Final = "consensus"
"""``YES`` or ``NO``: whether the agent agrees that the debate can end."""
CONSENSUS_REASON: Final = "consensus_reason"
"""Why the agent agrees or not; the last field, whose closing tag is :data:`STOP`."""

TAGS: Final = (SOLUTION, EVALUATION, COMPARISON, CONSENSUS, CONSENSUS_REASON)
"""The contract's tag names, in the order an answer must give them."""

STOP: Final = f"</{CONSENSUS_REASON}>"
"""The stop string for sampling a debate answer: the closing tag of the last field."""

OPTIONAL_TAGS: Final = frozenset({COMPARISON})
"""Tags an answer may leave out; every other tag of :data:`TAGS` is required."""

Comparison = tuple[int, str, int]
"""``(a, op, b)``: agent ``a`` beats (``">"``) or ties (``"="``) agent ``b``."""

_FLAGS = re.IGNORECASE | re.ASCII
# Linear on any line, by two rules: every quantifier is possessive (*+: never
# given back), and the pattern that is searched for starts with a fixed word.
# A search tries every start; a pattern that opened with a run ([*_`]*+agent)
# would read the rest of a run of 1M "*" from each of its 1M starts. Emphasis
# before the first "agent" never changes a match (a "*" is not alphanumeric,
# so "*Agent 1" passes the lookbehind at the "A"), so the searched pattern
# starts at the word itself.
_AGENT_NUMBER = r"agent[ \t]*+_?[ \t]*+([0-9]{1,18})(?![0-9])[*_`]*+"
_AGENT = rf"[*_`]*+{_AGENT_NUMBER}"
_OP = r"[ \t]*+(==|=|>|<|&gt;|&lt;)[ \t]*+"
# The lookbehind keeps "subagent 1" from reading as "agent 1".
_PAIR = re.compile(rf"(?<![A-Za-z0-9]){_AGENT_NUMBER}{_OP}{_AGENT}", _FLAGS)
_LINK = re.compile(rf"{_OP}{_AGENT}", _FLAGS)
_NO_COMPARISON = re.compile(r"[^A-Za-z0-9]*+(?:n/a|n\.a\.|na|none)(?![A-Za-z0-9])", _FLAGS)
# A letter or digit in any script (str.isalnum), found at C speed: a line of 1M
# characters took 0.6 s to check one character at a time in Python.
_ALPHANUMERIC = re.compile(r"[^\W_]")
_CONSENSUS = re.compile(r"""[*_`"']*+(yes|no)[*_`"']*+[.!]?[*_`"']*+""", _FLAGS)
_MIRRORED_OPS = frozenset({"<", "&lt;"})
_TIE_OPS = frozenset({"=", "=="})


class ParseError(ValueError):
    """An answer that breaks the debate contract; ``tag`` names the field at fault.

    The message says what was wrong and how a correct answer looks, e.g.
    ``missing <solution>: ...``. The environment turns it into a parse-error
    outcome (a penalty or a masked turn); it is never raised for a
    well-formed answer.

    Attributes:
        tag: The tag name at fault, one of :data:`TAGS`.
    """

    def __init__(self, message: str, tag: str) -> None:
        super().__init__(message)
        self.tag = tag

    def __reduce__(self) -> tuple[type[ParseError], tuple[str, str]]:
        # Keeps the error picklable and deep-copyable (envs are forked with deepcopy).
        return (type(self), (str(self), self.tag))


class ParsedComparisons(NamedTuple):
    """The votes read from a ``<comparison>`` block, with what was left out.

    Attributes:
        comparisons: The comparisons kept, ``(a, op, b)`` with ``op`` in ``{">", "="}``.
        self_comparisons_dropped: Comparisons dropped because the author was on a side.
        unparsed_comparison_lines: Non-blank, non-N/A lines that yielded no comparison.
    """

    comparisons: tuple[Comparison, ...]
    self_comparisons_dropped: int
    unparsed_comparison_lines: int


@dataclass(frozen=True, slots=True)
class DebateResponse:
    """One agent's parsed answer.

    Attributes:
        author: The id of the agent that wrote it.
        solution: The ``<solution>`` text, stripped.
        evaluation: The ``<evaluation>`` text, stripped.
        comparison_text: The ``<comparison>`` text, stripped (``""`` when the tag is missing).
        comparisons: The votes, ``(a, op, b)`` with ``op`` in ``{">", "="}``, self-comparisons
            removed.
        consensus: Whether the agent answered YES.
        consensus_reason: The ``<consensus_reason>`` text, stripped.
        self_comparisons_dropped: Comparisons dropped because ``author`` was on a side.
        unparsed_comparison_lines: Lines of ``comparison_text`` that carried text but no
            comparison.
    """

    author: int
    solution: str
    evaluation: str
    comparison_text: str
    comparisons: tuple[Comparison, ...]
    consensus: bool
    consensus_reason: str
    self_comparisons_dropped: int = 0
    unparsed_comparison_lines: int = 0

    @property
    def votes(self) -> tuple[Vote, ...]:
        """The comparisons as :class:`~llm_envs.debate.rewards.Vote`, authored by ``author``."""
        return tuple(Vote(self.author, a, op, b) for a, op, b in self.comparisons)

    def fields(self) -> dict[str, str | bool]:
        """The answer's fields by tag name (:data:`TAGS`); ``consensus`` as a bool.

        Example:
            >>> DebateResponse.empty(0).fields()[CONSENSUS]
            False
        """
        return {
            SOLUTION: self.solution,
            EVALUATION: self.evaluation,
            COMPARISON: self.comparison_text,
            CONSENSUS: self.consensus,
            CONSENSUS_REASON: self.consensus_reason,
        }

    @classmethod
    def empty(cls, author: int) -> DebateResponse:
        """A blank answer (no text, no votes, consensus NO), e.g. to record a masked turn."""
        return cls(author, "", "", "", (), consensus=False, consensus_reason="")


def parse_response(text: str, author: int) -> DebateResponse:
    """Parse one debate answer written to the XML contract of the debate recipe.

    The rules (normalization, comparisons, consensus values, the unclosed last
    field) are listed in the module docstring.

    Args:
        text: The agent's raw output, with or without the stop string.
        author: The id of the agent that wrote it; its self-comparisons are dropped.

    Returns:
        The parsed answer.

    Raises:
        ParseError: If a required tag is missing, a tag other than the last is
            never closed, or ``<consensus>`` is neither YES nor NO.
        TypeError: If ``text`` is not a ``str``.

    Example:
        >>> r = parse_response(
        ...     "<solution>4</solution><evaluation>ok</evaluation>"
        ...     "<comparison>agent_2 < Agent 0</comparison>"
        ...     "<consensus>Yes.</consensus><consensus_reason>all agree",
        ...     author=1,
        ... )
        >>> r.comparisons, r.consensus, r.consensus_reason
        (((0, '>', 2),), True, 'all agree')
    """
    body, spans = _scan(text)
    for index, tag in enumerate(TAGS):
        span = spans.get(tag)
        if span is None:
            if tag not in OPTIONAL_TAGS:
                raise _missing_tag_error(tag, body)
        elif not span.closed and index < len(TAGS) - 1:
            raise ParseError(
                f"<{tag}> is never closed: end it with </{tag}> before <{TAGS[index + 1]}>", tag
            )

    def field(tag: str) -> str:
        span = spans.get(tag)
        return "" if span is None else span.content.strip()

    consensus_text = field(CONSENSUS)
    consensus = _CONSENSUS.fullmatch(consensus_text)
    if consensus is None:
        shown = consensus_text if len(consensus_text) <= 60 else consensus_text[:57] + "..."
        raise ParseError(
            f"<{CONSENSUS}> must be YES or NO, got {shown!r}: "
            f"answer <{CONSENSUS}>YES</{CONSENSUS}> or <{CONSENSUS}>NO</{CONSENSUS}>",
            CONSENSUS,
        )
    comparison_text = field(COMPARISON)
    parsed = parse_comparisons(comparison_text, author)
    return DebateResponse(
        author=author,
        solution=field(SOLUTION),
        evaluation=field(EVALUATION),
        comparison_text=comparison_text,
        comparisons=parsed.comparisons,
        consensus=consensus.group(1).lower() == "yes",
        consensus_reason=field(CONSENSUS_REASON),
        self_comparisons_dropped=parsed.self_comparisons_dropped,
        unparsed_comparison_lines=parsed.unparsed_comparison_lines,
    )


def contract_score(text: str) -> float:
    """How much of the five-tag contract ``text`` writes correctly, in ``[0, 1]``.

    Each of the five parts counts one fifth, scanned in contract order (the
    way :func:`parse_response` reads them): a field found after the previous
    one, and closed unless it is the last; ``<consensus>`` must also hold YES
    or NO. The optional ``<comparison>`` counts when it is absent but a later
    field is there (leaving it out is allowed). The score is 1 exactly when
    :func:`parse_response` accepts the text; a text it rejects scores at most
    0.8, however many parts are right.

    This is a *shaping* signal (partial credit that a small model can climb),
    not the debate's reward: see :class:`llm_envs.debate.shaping.DebateShaping`.

    Example:
        >>> contract_score("<solution>4</solution><evaluation>N/A</evaluation>")
        0.4
        >>> contract_score(format_response(solution="4"))
        1.0
        >>> contract_score("The answer is 4.")
        0.0
    """
    _, spans = _scan(text)
    parts = 0
    for index, tag in enumerate(TAGS):
        span = spans.get(tag)
        if span is None:
            later = any(t in spans for t in TAGS[index + 1 :])
            parts += tag in OPTIONAL_TAGS and later
        elif span.closed or index == len(TAGS) - 1:
            parts += tag != CONSENSUS or _CONSENSUS.fullmatch(span.content.strip()) is not None
    # Every part right is exactly what parse_response accepts (the same scan, the
    # same rules; property-tested), so no second parse is needed.
    return parts / len(TAGS)


def _scan(text: str) -> tuple[str, dict[str, TagSpan]]:
    """The normalized text and its contract tags, as both readers of an answer scan them."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}: decode model output first")
    body = normalize(text, TAGS)
    return body, scan_tags(body, TAGS)


def parse_comparisons(text: str, author: int | None = None) -> ParsedComparisons:
    """Read the votes of a ``<comparison>`` block, one comparison (or chain) per line.

    The line rules are listed in the module docstring.

    Args:
        text: The content of the ``<comparison>`` tag.
        author: The agent that wrote it; comparisons naming it are dropped and
            counted. ``None`` keeps every comparison.

    Returns:
        The comparisons and the counters of what was left out.

    Example:
        >>> lines = ["1. Agent 0 > Agent 2 because ...", "Agent 1 = Agent 0", "N/A", "meh"]
        >>> parsed = parse_comparisons(chr(10).join(lines), author=1)
        >>> parsed.comparisons, parsed.self_comparisons_dropped, parsed.unparsed_comparison_lines
        (((0, '>', 2),), 1, 1)
    """
    comparisons: list[Comparison] = []
    dropped = 0
    unparsed = 0
    for raw_line in text.splitlines():
        line = raw_line.strip()
        match = _PAIR.search(line)
        if match is None:
            if _ALPHANUMERIC.search(line) and _NO_COMPARISON.match(line) is None:
                unparsed += 1
            continue
        ids = [int(match.group(1)), int(match.group(3))]
        ops = [match.group(2)]
        position = match.end()
        while (link := _LINK.match(line, position)) is not None:
            ops.append(link.group(1))
            ids.append(int(link.group(2)))
            position = link.end()
        for left, op, right in zip(ids, ops, ids[1:], strict=False):
            comparison = _canonical(left, op.lower(), right)
            if author is not None and author in (left, right):
                dropped += 1
            else:
                comparisons.append(comparison)
    return ParsedComparisons(tuple(comparisons), dropped, unparsed)


def format_response(
    *,
    solution: str,
    evaluation: str = "N/A",
    comparison: str = "N/A",
    consensus: bool = False,
    consensus_reason: str = "",
    close_last: bool = True,
) -> str:
    """Write an answer in the contract's format: what :func:`parse_response` reads back.

    Scripted agents and tests use it; ``close_last=False`` mimics a sampler
    that stopped on :data:`STOP`.

    Example:
        >>> text = format_response(solution="4", comparison="Agent 0 > Agent 1", consensus=True)
        >>> parse_response(text, author=2).comparisons
        ((0, '>', 1),)
    """
    parts = [
        f"<{SOLUTION}>\n{solution}\n</{SOLUTION}>",
        f"<{EVALUATION}>\n{evaluation}\n</{EVALUATION}>",
        f"<{COMPARISON}>\n{comparison}\n</{COMPARISON}>",
        f"<{CONSENSUS}>{'YES' if consensus else 'NO'}</{CONSENSUS}>",
        f"<{CONSENSUS_REASON}>\n{consensus_reason}\n" + (STOP if close_last else ""),
    ]
    return "\n".join(parts)


def _canonical(left: int, op: str, right: int) -> Comparison:
    if op in _TIE_OPS:
        return (left, "=", right)
    if op in _MIRRORED_OPS:
        return (right, ">", left)  # "a < b" says "b > a"
    return (left, ">", right)


def _missing_tag_error(tag: str, body: str) -> ParseError:
    order = ", ".join(f"<{name}>" for name in TAGS)
    if re.search(rf"<{tag}\s*>", body, _FLAGS) is not None:
        # The tag is there, but before a field that must precede it.
        return ParseError(f"<{tag}> is out of order: give the tags in the order {order}", tag)
    return ParseError(
        f"missing <{tag}>: every answer needs <{tag}>...</{tag}> "
        f"(tags in order: {order}; only <{COMPARISON}> may be left out)",
        tag,
    )
