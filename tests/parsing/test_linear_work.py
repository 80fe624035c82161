"""Every parser of agent text does linear work on any input: counted, never timed.

The work of a call is what :class:`tests.parsing.work_meter.WorkMeter` counts:
the steps a backtracking regex engine takes on each of the module's patterns
(replayed, and checked against the real engine's answers) plus the Python
lines run in ``llm_envs``. Each parser gets a budget of ``per_char * len(text)
+ fixed``, measured on the fixed tree with room to spare; a quadratic path
blows it by orders of magnitude on the adversarial texts below (long runs of
``*``, ``_``, backticks, ``<``, spaces, digits, repeated ``Agent``, unclosed
tags and fences, nested boxes...), which is how each of these tests fails on
the tree before the fixes (``_PAIR`` searched from every ``*`` of a run).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from llm_envs.code_collab import experts
from llm_envs.debate import agents as debate_agents
from llm_envs.debate import labels, protocol
from llm_envs.debate.env import DebateEnv
from llm_envs.expert_iteration import agents as expert_agents
from llm_envs.expert_iteration import verifier
from llm_envs.parsing import python_code, quoting, tags
from llm_envs.tasks import math_answers
from llm_envs.tasks.problems import MathProblem
from llm_envs.textarena import players
from tests.parsing.work_meter import OverBudget, WorkMeter, sample_match

PARSER_MODULES = (
    protocol,
    labels,
    tags,
    python_code,
    quoting,
    verifier,
    expert_agents,
    experts,
    math_answers,
    players,
    debate_agents,
)

# Pieces of agent text that parsers treat specially; an adversarial text repeats a few.
ATOMS = (
    "*", "_", "`", "<", ">", "=", "&gt;", " ", "\t", "\n", "0", "7", "-", ",", ".", "/", "$",
    "Agent", "agent", "Agent 1", "Agent_2 ", "N/A", "<comparison>", "</comparison>",
    "<solution>", "<consensus>", "<think>", "</think>", "```", "```py", "~~~", "{", "}",
    "\\boxed{", "\\frac{", "answer is", "####", "What is ", "?", "Current Board:\n\n",
    "def aux(", "'''", "#", "(", '{"a":[', "\\text{",
)  # fmt: skip


def _quiet(parse: Callable[[str], object]) -> Callable[[str], object]:
    # An agent's bad output may raise the contract's own error; the work still counts.
    def call(text: str) -> object:
        try:
            return parse(text)
        except (protocol.ParseError, ValueError):
            return None

    return call


def _debate_turn(text: str) -> None:
    # A whole turn as the env runs it: parse, infos, then every reader's prompt with
    # shuffled labels (each answer relabelled for each reader).
    env = DebateEnv(num_agents=3, max_rounds=2, shuffle_labels=True)
    env.reset(seed=0)
    for action in (protocol.format_response(solution="4", comparison=text), text):
        agent = env.agent_selection
        env.step(None if env.terminations[agent] or env.truncations[agent] else action)
    for agent in env.possible_agents:
        env.observe(agent)


_PROBLEM = MathProblem("t", "What is 2 + 3?", "5")


@dataclass(frozen=True)
class Parser:
    """One parser of agent text and the work it may do: ``per_char * len(text) + fixed``."""

    parse: Callable[[str], object]
    per_char: int
    fixed: int = 5_000


PARSERS: dict[str, Parser] = {
    "parse_response": Parser(_quiet(lambda text: protocol.parse_response(text, 1)), 40),
    "parse_response(comparison)": Parser(
        lambda text: protocol.parse_response(
            protocol.format_response(solution="4", comparison=text), 1
        ),
        40,
    ),
    "contract_score": Parser(protocol.contract_score, 40),
    "parse_comparisons": Parser(lambda text: protocol.parse_comparisons(text, 1), 40),
    "relabel_mentions": Parser(lambda text: labels.relabel_mentions(text, [1, 0, 2]), 40),
    "debate turn": Parser(_debate_turn, 80, 60_000),
    "normalize+scan_tags": Parser(
        lambda text: tags.scan_tags(tags.normalize(text, protocol.TAGS), protocol.TAGS), 40
    ),
    "strip_code_fence": Parser(tags.strip_code_fence, 40),
    "clean_code": Parser(python_code.clean_code, 60),
    "extract_function": Parser(lambda text: python_code.extract_function(text, "aux"), 60),
    "top_level_imports": Parser(python_code.top_level_imports, 60),
    "quote_program_text": Parser(lambda text: quoting.quote_program_text(text, 300), 40),
    "extract_code": Parser(verifier.extract_code, 40),
    "verify_math": Parser(lambda text: verifier.verify_math(_PROBLEM, text), 150),
    "check_answer": Parser(lambda text: math_answers.check_answer(text, "12"), 150),
    "evaluate_arithmetic": Parser(expert_agents.evaluate_arithmetic, 40),
    "critic sections": Parser(expert_agents.ScriptedCritic.sections, 40),
    "is_negative_feedback": Parser(expert_agents.is_negative_feedback, 40),
    "tictactoe_board": Parser(
        _quiet(lambda text: players.tictactoe_board([{"content": text}])), 40
    ),
}


def work(parse: Callable[[str], object], text: str, budget: int) -> WorkMeter:
    """The meter after ``parse(text)``; raises :class:`OverBudget` past ``budget`` steps."""
    meter = WorkMeter(budget=budget)
    with meter.measuring(*PARSER_MODULES):
        parse(text)
    return meter


def assert_linear(name: str, text: str) -> None:
    parser = PARSERS[name]
    budget = parser.per_char * len(text) + parser.fixed
    try:
        meter = work(parser.parse, text, budget)
    except OverBudget:
        # Measured again without a budget cap would take minutes: say where it went.
        meter = WorkMeter(budget=10 * budget)
        try:
            with meter.measuring(*PARSER_MODULES):
                parser.parse(text)
        except OverBudget:
            pass
        pytest.fail(
            f"{name} did more than {budget:,} steps on {len(text):,} characters "
            f"({text[:60]!r}...): {meter.by_pattern.most_common(3)}"
        )
    assert meter.work <= budget


@st.composite
def adversarial_texts(draw: st.DrawFn, size: int = 500) -> str:
    """A few atoms repeated to ``size`` characters, between a short head and tail."""
    unit = "".join(draw(st.lists(st.sampled_from(ATOMS), min_size=1, max_size=3)))
    head = "".join(draw(st.lists(st.sampled_from(ATOMS), max_size=3)))
    tail = "".join(draw(st.lists(st.sampled_from(ATOMS), max_size=3)))
    body = (unit * (size // len(unit) + 1))[:size]
    return head + body + tail


# Each shape found a quadratic path before the fixes, in the parsers named.
SHAPES = {
    "stars": ("*" * 800, ["parse_response(comparison)", "relabel_mentions", "debate turn"]),
    "underscores": ("_" * 800, ["parse_comparisons", "relabel_mentions"]),
    "backticks": ("`" * 800, ["parse_comparisons", "relabel_mentions", "extract_code"]),
    "agent then stars": ("Agent 1" + "*" * 800, ["parse_comparisons", "relabel_mentions"]),
    "agent then spaces": ("Agent" + " " * 800 + "x", ["relabel_mentions", "check_answer"]),
    "think openers": ("<think>" * 120, ["clean_code"]),
    "fences without line breaks": ("```x" * 200, ["extract_code"]),
    "fenced openers without closers": ("a```\n" * 160, ["extract_code"]),
    "nested boxes": ("\\boxed{" * 100 + "1" + "}" * 100, ["check_answer", "verify_math"]),
    "frac then spaces": ("\\frac{" + " " * 800 + "x", ["check_answer", "verify_math"]),
    "answer then spaces": ("answer" + " " * 800 + "x", ["check_answer"]),
    "board headings": ("Current Board:\n\n" * 50, ["tictactoe_board"]),
    "what is": ("What is " * 100, ["evaluate_arithmetic"]),
    "unit then spaces": ("1" + " " * 800 + "\\text{cm}x", ["check_answer"]),
}

# Parsers for the issue's own attack (a debate action): checked on many texts in
# the fast tier; every parser on every text in the slow one.
DEBATE_PARSERS = [
    "parse_response",
    "parse_response(comparison)",
    "contract_score",
    "parse_comparisons",
    "relabel_mentions",
    "normalize+scan_tags",
]


@pytest.mark.parametrize(
    ("shape", "name"), [(shape, name) for shape, (_, names) in SHAPES.items() for name in names]
)
def test_known_quadratic_shapes_cost_linear_work(shape: str, name: str) -> None:
    assert_linear(name, SHAPES[shape][0])


@pytest.mark.slow
@pytest.mark.parametrize("name", PARSERS)
@pytest.mark.parametrize("shape", SHAPES)
def test_every_parser_on_every_known_shape(name: str, shape: str) -> None:
    assert_linear(name, SHAPES[shape][0])


@pytest.mark.parametrize("name", DEBATE_PARSERS)
@settings(max_examples=12, deadline=None)
@given(text=adversarial_texts())
def test_adversarial_texts_cost_linear_work(name: str, text: str) -> None:
    assert_linear(name, text)


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in PARSERS if name not in DEBATE_PARSERS])
@settings(max_examples=12, deadline=None)
@given(text=adversarial_texts())
def test_adversarial_texts_cost_linear_work_in_every_parser(name: str, text: str) -> None:
    assert_linear(name, text)


def _module_patterns() -> dict[str, re.Pattern[str]]:
    found = {}
    for module in PARSER_MODULES:
        for attribute, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found[f"{module.__name__.rsplit('.', 1)[-1]}.{attribute}"] = value
    for tag in protocol.TAGS:
        found[f"tags.open {tag}"] = re.compile(rf"<{tag}\s*+>", re.IGNORECASE | re.ASCII)
    return found


MODULE_PATTERNS = _module_patterns()


@pytest.mark.parametrize("name", MODULE_PATTERNS)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_one_match_attempt_is_linear_in_its_text(name: str, seed: int) -> None:
    # A near-match of the pattern with a run of the character found at one of its
    # positions, then nothing or junk: the attempt must fail (or end) in linear
    # work, not try every split of the run (\s*-?\s* did, "\frac{" + spaces).
    pattern = MODULE_PATTERNS[name]
    rng = random.Random(seed)
    sample = sample_match(pattern, rng) or "x"
    for cut in range(len(sample) + 1):
        unit = sample[min(cut, len(sample) - 1)]
        for tail in ("", "x", sample[cut:]):
            text = sample[:cut] + unit * 150 + tail
            budget = 16 * len(text) + 400
            meter = WorkMeter(budget=budget)
            with meter.measuring(lines=False):
                try:
                    meter.counted(pattern).match(text)
                except OverBudget:
                    pytest.fail(f"{name}: over {budget:,} steps for one match on {text[:80]!r}")


def test_the_meter_counts_a_quadratic_search() -> None:
    # Why a budget can fail: the pattern the debate parser searched with before the fix.
    old_pair = re.compile(
        r"(?<![A-Za-z0-9])[*_`]*+agent[ \t]*+_?[ \t]*+([0-9]{1,18})(?![0-9])[*_`]*+"
        r"[ \t]*+(==|=|>|<|&gt;|&lt;)[ \t]*+[*_`]*+agent[ \t]*+([0-9]{1,18})",
        re.IGNORECASE | re.ASCII,
    )
    steps = []
    for size in (200, 400):
        meter = WorkMeter()
        meter.counted(old_pair).search("*" * size)
        steps.append(meter.regex_steps)
    assert steps[0] >= 200 * 200 / 2
    assert steps[1] >= 3.9 * steps[0]
    meter = work(lambda text: protocol.parse_comparisons(text), "*" * 400, budget=10**6)
    assert meter.regex_steps <= 10 * 400  # the fixed parser: a few steps per character


@settings(max_examples=30)
@given(text=st.lists(st.sampled_from(ATOMS), max_size=12).map("".join))
@example("**Agent 1** > Agent_2")
@example("x*Agent 0 > Agent 1")
def test_the_meter_agrees_with_the_engine(text: str) -> None:
    # The replay raises ReplayMismatch wherever it matches elsewhere than the engine.
    for pattern in MODULE_PATTERNS.values():
        meter = WorkMeter()
        proxy = meter.counted(pattern)
        proxy.search(text)
        proxy.match(text)
        proxy.fullmatch(text)
        list(proxy.finditer(text))


def test_an_expert_reply_nested_past_the_recursion_limit_is_no_edit() -> None:
    reply = '{"a":[' * 1_200  # 2,400 levels: past the interpreter's limit of 1,000
    assert experts.parse_expert_reply(reply) == reply
