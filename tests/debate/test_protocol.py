"""The debate contract: every normalization and rule of parse_response, as tables, plus fuzzing."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.debate import Vote
from llm_envs.debate.protocol import (
    STOP,
    TAGS,
    DebateResponse,
    ParseError,
    format_response,
    parse_comparisons,
    parse_response,
)


def answer(
    solution: str = "x = 4",
    evaluation: str = "Agent 0 is right.",
    comparison: str | None = "Agent 0 > Agent 2",
    consensus: str = "YES",
    reason: str = "We agree.",
    *,
    close_last: bool = True,
) -> str:
    """An answer in the contract's layout; comparison=None leaves the tag out."""
    parts = [f"<solution>{solution}</solution>", f"<evaluation>{evaluation}</evaluation>"]
    if comparison is not None:
        parts.append(f"<comparison>{comparison}</comparison>")
    parts.append(f"<consensus>{consensus}</consensus>")
    parts.append(f"<consensus_reason>{reason}" + (STOP if close_last else ""))
    return "\n".join(parts)


def test_constants() -> None:
    assert TAGS == ("solution", "evaluation", "comparison", "consensus", "consensus_reason")
    assert STOP == "</consensus_reason>"


def test_plain_answer() -> None:
    r = parse_response(answer(), author=1)
    assert r == DebateResponse(
        author=1,
        solution="x = 4",
        evaluation="Agent 0 is right.",
        comparison_text="Agent 0 > Agent 2",
        comparisons=((0, ">", 2),),
        consensus=True,
        consensus_reason="We agree.",
        self_comparisons_dropped=0,
        unparsed_comparison_lines=0,
    )
    assert r.votes == (Vote(1, 0, ">", 2),)


# ---------------------------------------------------------------- fields

FIELDS = {
    "solution": "x = 4",
    "evaluation": "Agent 0 is right.",
    "consensus_reason": "We agree.",
}

# (id, text, expected solution, evaluation, consensus_reason)
FIELD_CASES = [
    pytest.param(answer(), FIELDS, id="plain"),
    pytest.param(answer(close_last=False), FIELDS, id="unclosed-last-field-stop-string-cut"),
    pytest.param(
        answer(reason="We agree.\n\n  ", close_last=False), FIELDS, id="unclosed-trailing-ws"
    ),
    pytest.param(
        answer()
        .upper()
        .replace("X = 4", "x = 4")
        .replace("AGENT 0 IS RIGHT.", "Agent 0 is right.")
        .replace("WE AGREE.", "We agree.")
        .replace("AGENT 0 > AGENT 2", "Agent 0 > Agent 2"),
        FIELDS,
        id="upper-case-tags",
    ),
    pytest.param(
        answer()
        .replace("<solution>", "<Solution >")
        .replace("</consensus_reason>", "</Consensus_Reason>"),
        FIELDS,
        id="mixed-case-and-space-in-tags",
    ),
    pytest.param("```xml\n" + answer() + "\n```", FIELDS, id="code-fence"),
    pytest.param("~~~\n" + answer() + "\n~~~\n", FIELDS, id="tilde-fence"),
    pytest.param(
        "Sure! Here it is:\n```xml\n" + answer() + "\n```", FIELDS, id="preamble-and-fence"
    ),
    pytest.param(
        "```xml\n" + answer(close_last=False) + "\n```", FIELDS, id="fence-around-unclosed"
    ),
    pytest.param("Here is my answer.\n\n" + answer(), FIELDS, id="preamble"),
    pytest.param("<think>Let me check 2+2.</think>\n" + answer(), FIELDS, id="think-before"),
    pytest.param("<THINK>\n" + answer() + "\n</Think>", FIELDS, id="think-around"),
    pytest.param("Let me check.\n</think>\n\n" + answer(), FIELDS, id="think-closer-only"),
    pytest.param(answer(solution="x <think>=</think> 4"), FIELDS, id="think-tags-in-field-removed"),
    pytest.param(
        answer(solution="\n\n   x = 4 \n", evaluation="  Agent 0 is right.\t"),
        FIELDS,
        id="surrounding-whitespace-stripped",
    ),
    pytest.param(
        answer().replace("\n", "\nsome chatter between fields\n"), FIELDS, id="text-between-fields"
    ),
    pytest.param(
        answer(evaluation="Agent 0 is right.", reason="We agree.")
        + "\nP.S. <solution>no</solution>",
        FIELDS,
        id="text-after-the-end",
    ),
]


@pytest.mark.parametrize(("text", "expected"), FIELD_CASES)
def test_fields(text: str, expected: dict[str, str]) -> None:
    r = parse_response(text, author=1)
    assert {name: getattr(r, name) for name in expected} == expected
    assert r.comparisons == ((0, ">", 2),)
    assert r.consensus is True


VERBATIM = [
    "if a < b and c > d: print('<br>')",
    "x &amp; y &lt; z && w",
    "```python\ndef f(x):\n    return x < 3\n```",
    "<b>bold</b> and <i>italic</i> and <evaluation without a bracket",
    "Ünïcödé ✓ 中文 🙂",
    "CDATA <![CDATA[ x ]]> and <!-- comment -->",
]


@pytest.mark.parametrize("content", VERBATIM)
def test_field_text_is_verbatim(content: str) -> None:
    r = parse_response(answer(solution=content, evaluation=content, reason=content), author=1)
    assert r.solution == r.evaluation == r.consensus_reason == content


@pytest.mark.parametrize("content", VERBATIM)
def test_verbatim_in_unclosed_last_field(content: str) -> None:
    r = parse_response(answer(reason=content, close_last=False), author=1)
    assert r.consensus_reason == content


def test_tag_names_quoted_in_earlier_fields_are_content() -> None:
    text = answer(
        solution="Write <evaluation> after this, then <consensus>.",
        evaluation="I would answer <consensus>NO</consensus> here.",
    )
    r = parse_response(text, author=1)
    assert r.solution == "Write <evaluation> after this, then <consensus>."
    assert r.evaluation == "I would answer <consensus>NO</consensus> here."
    assert r.consensus is True


def test_empty_fields_are_allowed_except_consensus() -> None:
    r = parse_response(answer(solution="", evaluation="", comparison="", reason=""), author=0)
    assert (r.solution, r.evaluation, r.comparison_text, r.consensus_reason) == ("", "", "", "")


# ---------------------------------------------------------------- consensus


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("YES", True),
        ("yes", True),
        ("Yes.", True),
        (" YES! ", True),
        ("**Yes**", True),
        ("`YES`", True),
        ('"yes"', True),
        ("NO", False),
        ("no.", False),
        ("No", False),
        ("\n  NO\n", False),
        ("*no*.", False),
    ],
)
def test_consensus_values(value: str, expected: bool) -> None:
    assert parse_response(answer(consensus=value), author=1).consensus is expected


@pytest.mark.parametrize(
    "value", ["", "maybe", "YES, mostly", "Y", "N", "true", "YES NO", "yes yes", "YES.."]
)
def test_other_consensus_values_are_parse_errors(value: str) -> None:
    with pytest.raises(ParseError, match=r"<consensus> must be YES or NO, got") as info:
        parse_response(answer(consensus=value), author=1)
    assert info.value.tag == "consensus"
    assert repr(value.strip()) in str(info.value)


def test_long_consensus_value_is_shortened_in_the_message() -> None:
    with pytest.raises(ParseError) as info:
        parse_response(answer(consensus="no " * 100), author=1)
    assert len(str(info.value)) < 200


# ---------------------------------------------------------------- comparisons

# (comparison text, author, comparisons, self-comparisons dropped, unparsed lines)
COMPARISON_CASES = [
    ("Agent 0 > Agent 2", 1, [(0, ">", 2)], 0, 0),
    ("agent 0 > AGENT 2", 1, [(0, ">", 2)], 0, 0),
    ("Agent0 > Agent2", 1, [(0, ">", 2)], 0, 0),
    ("Agent_0 > Agent_2", 1, [(0, ">", 2)], 0, 0),
    ("agent_0 > agent_2", 1, [(0, ">", 2)], 0, 0),
    ("Agent 0>Agent 2", 1, [(0, ">", 2)], 0, 0),
    ("Agent 2 < Agent 0", 1, [(0, ">", 2)], 0, 0),  # mirrored
    ("Agent 0 = Agent 2", 1, [(0, "=", 2)], 0, 0),
    ("Agent 2 = Agent 0", 1, [(2, "=", 0)], 0, 0),  # kept as written
    ("Agent 0 == Agent 2", 1, [(0, "=", 2)], 0, 0),
    ("Agent 0 &gt; Agent 2", 1, [(0, ">", 2)], 0, 0),
    ("Agent 2 &lt; Agent 0", 1, [(0, ">", 2)], 0, 0),
    ("- Agent 0 > Agent 2", 1, [(0, ">", 2)], 0, 0),
    ("* Agent 0 > Agent 2", 1, [(0, ">", 2)], 0, 0),
    ("• Agent 0 > Agent 2", 1, [(0, ">", 2)], 0, 0),
    ("1. Agent 0 > Agent 2", 1, [(0, ">", 2)], 0, 0),
    ("2) Agent 0 > Agent 2", 1, [(0, ">", 2)], 0, 0),
    ("**Agent 0** > **Agent 2**", 1, [(0, ">", 2)], 0, 0),
    ("`Agent 0` > `Agent 2`", 1, [(0, ">", 2)], 0, 0),
    ("Ranking: Agent 0 > Agent 2", 1, [(0, ">", 2)], 0, 0),
    ("Agent 0 > Agent 2 because Agent 2 forgot a case.", 1, [(0, ">", 2)], 0, 0),
    ("Agent 0 > Agent 2 (Agent 2 < Agent 3 too)", 1, [(0, ">", 2)], 0, 0),
    ("Agent 0 > Agent 2, Agent 3 > Agent 2", 1, [(0, ">", 2)], 0, 0),  # one per line
    ("Agent 0 > Agent 2 > Agent 3", 1, [(0, ">", 2), (2, ">", 3)], 0, 0),  # chain
    ("Agent 3 < Agent 2 < Agent 0", 1, [(2, ">", 3), (0, ">", 2)], 0, 0),
    ("Agent 0 > Agent 2 = Agent 3", 1, [(0, ">", 2), (2, "=", 3)], 0, 0),
    ("Agent 0 > Agent 2 > Agent 3", 2, [], 2, 0),  # both links name the author
    ("Agent 1 > Agent 0", 1, [], 1, 0),
    ("Agent 0 > Agent 1", 1, [], 1, 0),
    ("Agent 1 = Agent 1", 1, [], 1, 0),
    ("Agent 2 = Agent 2", 1, [(2, "=", 2)], 0, 0),  # kept: the reward counts it malformed
    ("Agent 7 > Agent 0", 1, [(7, ">", 0)], 0, 0),  # out of range: kept
    ("Agent 02 > Agent 0", 1, [(2, ">", 0)], 0, 0),
    ("Agent 0 > Agent " + "9" * 18, 1, [(0, ">", 10**18 - 1)], 0, 0),
    ("Agent 0 > Agent " + "9" * 19, 1, [], 0, 1),
    (
        "Agent 0 > Agent 2\nAgent 3 < Agent 0\n\nAgent 2 = Agent 3",
        1,
        [(0, ">", 2), (0, ">", 3), (2, "=", 3)],
        0,
        0,
    ),
    ("Agent 0 > Agent 2\r\nAgent 3 > Agent 2", 1, [(0, ">", 2), (3, ">", 2)], 0, 0),
    ("", 1, [], 0, 0),
    ("N/A", 1, [], 0, 0),
    ("n/a", 1, [], 0, 0),
    ("None.", 1, [], 0, 0),
    ("N/A (first round: nobody to compare)", 1, [], 0, 0),
    ("- N/A", 1, [], 0, 0),
    ("\n\n   \n", 1, [], 0, 0),
    ("---\n```\n...", 1, [], 0, 0),
    ("Agent 0 is the best.", 1, [], 0, 1),
    ("0 > 2", 1, [], 0, 1),
    ("Agent 0 >= Agent 2", 1, [], 0, 1),
    ("Agent 0 => Agent 2", 1, [], 0, 1),
    ("Agent 0 >> Agent 2", 1, [], 0, 1),
    ("Agent 0 beats Agent 2", 1, [], 0, 1),
    ("subagent 0 > Agent 2", 1, [], 0, 1),
    ("Agent -1 > Agent 0", 1, [], 0, 1),
    ("Agent ３ > Agent 0", 1, [], 0, 1),  # full-width digit: ASCII digits only
    ("Agent 0 > Agent 2\nI am unsure about Agent 3.\nN/A", 1, [(0, ">", 2)], 0, 1),
]


@pytest.mark.parametrize(("text", "author", "expected", "dropped", "unparsed"), COMPARISON_CASES)
def test_comparisons(
    text: str, author: int, expected: list[tuple[int, str, int]], dropped: int, unparsed: int
) -> None:
    r = parse_response(answer(comparison=text), author=author)
    assert r.comparisons == tuple(expected)
    assert (r.self_comparisons_dropped, r.unparsed_comparison_lines) == (dropped, unparsed)
    assert r.comparison_text == text.strip()
    assert r.votes == tuple(Vote(author, a, op, b) for a, op, b in expected)
    assert parse_comparisons(text, author) == (tuple(expected), dropped, unparsed)


def test_missing_comparison_tag_means_no_votes() -> None:
    r = parse_response(answer(comparison=None), author=0)
    assert (r.comparison_text, r.comparisons, r.votes) == ("", (), ())
    assert (r.self_comparisons_dropped, r.unparsed_comparison_lines) == (0, 0)


def test_parse_comparisons_without_author_keeps_everything() -> None:
    assert parse_comparisons("Agent 1 > Agent 0").comparisons == ((1, ">", 0),)


# ---------------------------------------------------------------- errors

# (text, tag at fault, message fragment)
ERROR_CASES = [
    pytest.param("", "solution", "missing <solution>", id="empty-text"),
    pytest.param("just prose, no tags at all", "solution", "missing <solution>", id="prose"),
    pytest.param(
        answer().replace("<solution>x = 4</solution>", ""), "solution", "missing", id="no-solution"
    ),
    pytest.param(
        answer().replace("<evaluation>Agent 0 is right.</evaluation>", ""),
        "evaluation",
        "missing <evaluation>",
        id="no-evaluation",
    ),
    pytest.param(
        answer().replace("<consensus>YES</consensus>", ""),
        "consensus",
        "missing <consensus>",
        id="no-consensus",
    ),
    pytest.param(
        answer().split("<consensus_reason>")[0],
        "consensus_reason",
        "missing <consensus_reason>",
        id="no-consensus-reason",
    ),
    pytest.param(
        answer().replace("</solution>", ""),
        "solution",
        "<solution> is never closed: end it with </solution> before <evaluation>",
        id="solution-unclosed",
    ),
    pytest.param(
        answer().replace("</evaluation>", ""),
        "evaluation",
        "never closed",
        id="evaluation-unclosed",
    ),
    pytest.param(
        answer().replace("</comparison>", ""),
        "comparison",
        "never closed",
        id="comparison-unclosed",
    ),
    pytest.param(
        answer().replace("</consensus>", ""), "consensus", "never closed", id="consensus-unclosed"
    ),
    pytest.param("<solution>4", "solution", "never closed", id="cut-in-the-first-field"),
    pytest.param(
        "<evaluation>e</evaluation><solution>4</solution><consensus>NO</consensus>"
        "<consensus_reason>r",
        "evaluation",
        "<evaluation> is out of order",
        id="out-of-order",
    ),
    pytest.param(answer(consensus="perhaps"), "consensus", "must be YES or NO", id="bad-consensus"),
]


@pytest.mark.parametrize(("text", "tag", "message"), ERROR_CASES)
def test_parse_errors_name_the_tag(text: str, tag: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as info:
        parse_response(text, author=0)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.tag == tag
    assert f"<{tag}>" in str(error)
    for clone in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error)):
        assert (type(clone), clone.tag, str(clone)) == (ParseError, tag, str(error))


def test_non_str_text_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        parse_response(b"<solution>", author=0)  # type: ignore[arg-type]


def test_response_is_frozen_and_has_an_empty_form() -> None:
    r = parse_response(answer(), author=1)
    with pytest.raises(AttributeError):
        r.consensus = False  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(r)) == r
    empty = DebateResponse.empty(author=2)
    assert (empty.author, empty.comparisons, empty.votes, empty.consensus) == (2, (), (), False)


# ---------------------------------------------------------------- properties

FRAGMENTS = [
    *(f"<{t}>" for t in TAGS),
    *(f"</{t}>" for t in TAGS),
    "<SOLUTION>",
    "</Consensus_Reason>",
    "<consensus",
    "</",
    "<",
    ">",
    "=",
    "&lt;",
    "&gt;",
    "Agent 1",
    "agent_2",
    "Agent",
    " > ",
    " < ",
    " == ",
    "YES",
    "no.",
    "N/A",
    "\n",
    "- ",
    "1. ",
    "```",
    "```xml\n",
    "~~~",
    "<think>",
    "</think>",
    "9" * 25,
]
_any_char = st.characters(codec=None, categories=None)
fuzz_text = st.one_of(
    st.text(_any_char, max_size=300),
    st.lists(
        st.one_of(st.sampled_from(FRAGMENTS), st.text(_any_char, max_size=6)), max_size=60
    ).map("".join),
)


@given(fuzz_text, st.integers(-2, 6))
def test_any_text_parses_or_raises_parse_error(text: str, author: int) -> None:
    try:
        r = parse_response(text, author)
    except ParseError as error:
        failed_tag = error.tag
    else:
        failed_tag = None
    if failed_tag is not None:
        assert failed_tag in TAGS
        return
    assert r.author == author
    for a, op, b in r.comparisons:
        assert op in {">", "="}
        assert author not in (a, b)
    for name in ("solution", "evaluation", "comparison_text", "consensus_reason"):
        value = getattr(r, name)
        assert value == value.strip()
    assert r.self_comparisons_dropped >= 0
    assert r.unparsed_comparison_lines >= 0


# Field text that cannot end its own field or start a tag: "<" only as "< " or "<=".
_field_text = st.text(st.characters(codec="utf-8", exclude_characters="<"), max_size=80)
_comparison = st.tuples(
    st.integers(0, 4), st.sampled_from([">", "=", "<", "=="]), st.integers(0, 4)
)
_style = st.tuples(
    st.sampled_from(["Agent {}", "agent_{}", "Agent{}", "AGENT {}", "**Agent {}**"]),
    st.sampled_from(["", "- ", "* ", "1. "]),
    st.sampled_from(["", " because it is right", ".", "  "]),
)


@given(
    _field_text,
    _field_text,
    _field_text,
    st.booleans(),
    st.lists(st.tuples(_comparison, _style), max_size=6),
    st.integers(0, 4),
    st.booleans(),
)
def test_round_trip(
    solution: str,
    evaluation: str,
    reason: str,
    consensus: bool,
    comparisons: list[tuple[tuple[int, str, int], tuple[str, str, str]]],
    author: int,
    close_last: bool,
) -> None:
    lines = []
    expected = []
    dropped = 0
    for (a, op, b), (agent, bullet, tail) in comparisons:
        lines.append(f"{bullet}{agent.format(a)} {op} {agent.format(b)}{tail}")
        if author in (a, b):
            dropped += 1
        elif op == "<":
            expected.append((b, ">", a))
        else:
            expected.append((a, "=" if op == "==" else op, b))
    text = format_response(
        solution=solution,
        evaluation=evaluation,
        comparison="\n".join(lines) or "N/A",
        consensus=consensus,
        consensus_reason=reason,
        close_last=close_last,
    )
    r = parse_response(text, author)
    assert (r.solution, r.evaluation, r.consensus_reason) == (
        solution.strip(),
        evaluation.strip(),
        reason.strip(),
    )
    assert r.consensus is consensus
    assert r.comparisons == tuple(expected)
    assert (r.self_comparisons_dropped, r.unparsed_comparison_lines) == (dropped, 0)

    # Wrapping the answer as models do changes nothing (fields with fences of their
    # own are left out: a closing fence after an unclosed last field is ambiguous).
    if "```" in text or "~~~" in text:
        return
    for wrapped in (
        f"```xml\n{text}\n```",
        f"Here you go.\n```xml\n{text}",
        f"Here you go.\n```xml\n{text}\n```\n",
        # A draft of the answer in a think block: its fields come first, and are equal.
        f"<think>hmm, {text}</think>\n{text}" if close_last else text,
        f"<THINK>\n{text}\n</THINK>",
    ):
        assert parse_response(wrapped, author) == r
