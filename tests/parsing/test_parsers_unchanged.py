"""The linear rewrites answer as the parsers they replaced, on well-formed and near-misses.

The old parsers (:mod:`tests.parsing.reference_parsers`) are the reference on
texts short enough for their quadratic paths to stay cheap. Texts are drawn
from the pieces each parser treats specially, as whole answers ("Agent 0 >
Agent 2") and as shuffles of those pieces (an unclosed tag, a run of
emphasis, a number glued to a word).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from llm_envs.debate.labels import relabel_mentions
from llm_envs.debate.protocol import format_response, parse_comparisons, parse_response
from llm_envs.expert_iteration.agents import evaluate_arithmetic
from llm_envs.expert_iteration.verifier import extract_code
from llm_envs.parsing.python_code import clean_code
from llm_envs.tasks.math_answers import check_answer, extract_answer, parse_number
from tests.parsing import reference_parsers as old


def pieces(*atoms: str, max_size: int = 16) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(atoms), max_size=max_size).map("".join)


# ------------------------------------------------------------------------ comparisons

AGENT_SPELLINGS = (
    "Agent ",
    "agent",
    "AGENT_",
    "Agent _ ",
    "**Agent ",
    "`agent ",
    "_Agent",
    "subagent ",
)
OPS = (" > ", "<", " = ", "==", " &gt; ", "&lt;", " >= ", " ")
COMPARISON_ATOMS = (
    *AGENT_SPELLINGS, *OPS, "0", "1", "2", "12", "0000000000000000001", "**", "*", "_", "`",
    " ", "\t", "\n", "x", "-", "1.", "N/A", "None", "na", "because", "•", "ſ", "K", "Ä",
)  # fmt: skip


@st.composite
def comparison_line(draw: st.DrawFn) -> str:
    """A line that states a comparison (or a chain), decorated as models do."""
    parts = [draw(st.sampled_from(("", "- ", "* ", "1. ", "x", "**")))]
    for index in range(draw(st.integers(2, 4))):
        if index:
            parts.append(draw(st.sampled_from(OPS)))
        parts.append(draw(st.sampled_from(AGENT_SPELLINGS)))
        parts.append(str(draw(st.integers(0, 12))))
        parts.append(draw(st.sampled_from(("", "**", "`", "*", "_"))))
    parts.append(draw(st.sampled_from(("", " because it is right", "*", " Agent 3"))))
    return "".join(parts)


comparison_texts = st.lists(
    st.one_of(comparison_line(), pieces(*COMPARISON_ATOMS, max_size=10)), max_size=6
).map("\n".join)


@given(text=comparison_texts, author=st.one_of(st.none(), st.integers(0, 3)))
@example("x*Agent 0 > Agent 1\n**Agent 1** < `agent_2`\nsubagent 1 > Agent 2", 1)
@example("***Agent 0 >** Agent 1 > agent 2 = Agent 3", None)
def test_comparisons_are_read_as_before(text: str, author: int | None) -> None:
    assert parse_comparisons(text, author) == old.parse_comparisons(text, author)
    answer = parse_response(format_response(solution="4", comparison=text), author or 0)
    assert answer.comparisons == old.parse_comparisons(text.strip(), author or 0).comparisons


renames = st.integers(1, 13).flatmap(lambda size: st.permutations(list(range(size))))


@given(text=comparison_texts, rename=renames)
@example("**Agent 1** and agent_0; Agent  _ 2 x*agent 1", [2, 0, 1])
def test_mentions_are_relabelled_as_before(text: str, rename: list[int]) -> None:
    assert relabel_mentions(text, rename) == old.relabel_mentions(text, rename)


# ------------------------------------------------------------------------------ code

FENCE_ATOMS = (
    "```", "```python", "```py", "```Python3", "```c++", "``` py", "```\tpython x", "\n",
    " ", "\t", "x = 1", "def f():", "\n    return 1", "`", "``", "~~~", "a", "é",
)  # fmt: skip


@given(text=pieces(*FENCE_ATOMS, max_size=14))
@example("a```\n```\nx\n```python\ny\n")
@example("```py\nx = 1\n  ```\n```")
def test_code_is_extracted_as_before(text: str) -> None:
    assert extract_code(text) == old.extract_code(text)


# Whole tokens only: the old regex's result then has no block left for the new
# scan to remove, so clean_code of it is what the old clean_code returned.
THINK_TOKENS = (
    "<think>", "</think>", "x = 1\n", "Some prose.\n", "```\n", "\n", "def f():\n    return 1\n",
)  # fmt: skip


@given(text=pieces(*THINK_TOKENS, max_size=12))
@example("<think>a</think>x = 1\n<think>")
def test_think_blocks_are_dropped_as_before(text: str) -> None:
    assert clean_code(text) == clean_code(old.strip_think_blocks(text))


# ------------------------------------------------------------------------------ math

MATH_ATOMS = (
    "\\frac", "\\dfrac", "{", "}", " ", "\n", "\t", "1", "23", "1,000", ",", ".", "5", "-",
    "+", "\u2212", "/", "x", "$", "\\$", "answer", "Answer", " is", ":", "**", "=", "would be",
    "####", "\\boxed{", "\\fbox{", "\\boxed ", "\\text{ cm}", "\\mbox{m}", "%", "\\(", "\\)",
    "^", "\u00d7", "0.5", ".5", "\u3000", "\uff1a",
)  # fmt: skip


@st.composite
def nested_boxes(draw: st.DrawFn) -> str:
    depth = draw(st.integers(1, 6))
    inner = draw(pieces("1", "{x}", "}", "{", " ", "\\frac{1}{2}", max_size=4))
    opens = [
        draw(st.sampled_from(("\\boxed{", "\\fbox{", "\\boxed {", " \\boxed{")))
        for _ in range(depth)
    ]
    closes = [draw(st.sampled_from(("}", " }", "} ", "}}"))) for _ in range(depth)]
    return draw(pieces(*MATH_ATOMS, max_size=3)) + "".join(opens) + inner + "".join(closes)


math_texts = st.one_of(pieces(*MATH_ATOMS), nested_boxes())


@given(text=math_texts, reference=st.sampled_from(["12", "1/2", "\\frac{1}{2}", "-3", "x", "5"]))
@example("\\frac{ - 1 }{  2 }", "-1/2")
@example("The answer is **  - 5 ** dollars", "-5")
def test_math_answers_are_read_as_before(text: str, reference: str) -> None:
    assert extract_answer(text) == old.extract_answer(text)
    assert parse_number(text) == old.parse_number(text)
    assert check_answer(text, reference) == old.check_answer(text, reference)


# ------------------------------------------------------------------------- questions


@given(text=pieces("What is ", "?", "\n", "1 + 2", " ", "x", "??", "What is", "-3", max_size=10))
@pytest.mark.parametrize("prefix", ["", "Problem:\n"])
def test_questions_are_read_as_before(prefix: str, text: str) -> None:
    assert evaluate_arithmetic(prefix + text) == old.evaluate_arithmetic(prefix + text)
