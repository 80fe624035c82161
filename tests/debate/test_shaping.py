"""Opt-in debate shaping: contract_score's rules and properties, and the DebateShaping wrapper."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs import debate
from llm_envs.debate import (
    DebateQuestion,
    DebateShaping,
    WinRateReward,
    judge_score,
    shaping_reward,
)
from llm_envs.debate.protocol import TAGS, ParseError, contract_score, format_response
from llm_envs.debate.protocol import parse_response as parse
from llm_envs.debate.shaping import visible_correctness

GOOD = format_response(solution="4", evaluation="N/A", consensus=False, consensus_reason="r")


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("The answer is 4.", 0.0),
        ("", 0.0),
        ("<solution>4", 0.0),  # an unclosed field that is not the last one
        ("<solution>4</solution>", 0.2),
        ("<solution>4</solution><evaluation>ok</evaluation>", 0.4),
        # <comparison> may be left out: it counts once a later field is there
        ("<solution>4</solution><evaluation>ok</evaluation><consensus>NO</consensus>", 0.8),
        ("<solution>4</solution><evaluation>ok</evaluation><consensus>maybe</consensus>", 0.6),
        ("<evaluation>ok</evaluation><consensus>YES</consensus><consensus_reason>r", 0.8),
        (GOOD, 1.0),
        (GOOD.removesuffix("</consensus_reason>"), 1.0),  # the stop string cut off
        ("```xml\n" + GOOD + "\n```", 1.0),  # a fence, as parse_response reads it
    ],
)
def test_contract_score_table(text: str, score: float) -> None:
    assert contract_score(text) == pytest.approx(score)


def test_contract_score_rejects_bytes() -> None:
    with pytest.raises(TypeError, match="decode model output"):
        contract_score(b"<solution>4</solution>")  # type: ignore[arg-type]


_FRAGMENTS = st.sampled_from(
    [f"<{t}>" for t in TAGS]
    + [f"</{t}>" for t in TAGS]
    + ["YES", "NO", "maybe", "Agent 1 > Agent 2", "4", "\n", " ", "```", "N/A"]
)


@given(st.lists(_FRAGMENTS, max_size=14))
def test_score_is_one_exactly_when_the_answer_parses(fragments: list[str]) -> None:
    text = "".join(fragments)
    score = contract_score(text)
    try:
        parse(text, author=0)
        parses = True
    except ParseError:
        parses = False
    assert (score == 1.0) == parses
    assert 0.0 <= score <= 1.0
    assert math.isclose(score * 5, round(score * 5))  # whole parts only


@given(st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=30), st.booleans())
def test_any_well_formed_answer_scores_one(field: str, consensus: bool) -> None:
    text = format_response(
        solution=field, evaluation=field, consensus=consensus, consensus_reason=field
    )
    assert contract_score(text) == 1.0


def test_writing_more_of_the_contract_never_scores_less() -> None:
    parts = GOOD.split("\n<")
    prefixes = ["\n<".join(parts[:k]) for k in range(1, len(parts) + 1)]
    scores = [contract_score(p) for p in prefixes]
    assert scores == sorted(scores)
    assert scores[-1] == 1.0


def _debate(**kwargs: object) -> object:
    question = DebateQuestion("What is 2 + 2?", answer="4")
    return debate.env(num_agents=3, max_rounds=1, questions=[question], **kwargs)


def _play(env: object, answers: list[str]) -> tuple[dict[str, float], dict[str, dict]]:
    """Play the answers in turn order; return each agent's return and its last infos."""
    env.reset(seed=0)  # type: ignore[attr-defined]
    returns: dict[str, float] = {}
    infos: dict[str, dict] = {}
    script = iter(answers)
    for agent in env.agent_iter():  # type: ignore[attr-defined]
        _, reward, terminated, truncated, info = env.last()  # type: ignore[attr-defined]
        returns[agent] = returns.get(agent, 0.0) + reward
        infos[agent] = dict(info)
        env.step(None if terminated or truncated else next(script))  # type: ignore[attr-defined]
    return returns, infos


def _answer(solution: str, vote: str = "N/A") -> str:
    return format_response(solution=solution, comparison=vote, consensus=False)


def test_shaping_adds_to_the_seed_reward_and_names_itself() -> None:
    answers = [
        _answer("The answer is 4."),
        _answer("The answer is 5."),
        _answer("The answer is 4.", "Agent 0 > Agent 1"),
    ]
    plain, _ = _play(_debate(), answers)
    shaped, infos = _play(_debate(shaping={"contract": 0.5, "correct": 1.0}), answers)
    for agent, solution in zip(("agent_0", "agent_1", "agent_2"), ("4", "5", "4"), strict=True):
        bonus = 0.5 * 1.0 + (1.0 if solution == "4" else 0.0)
        assert shaped[agent] == pytest.approx(plain[agent] + bonus)
        info = infos[agent]
        assert info["shaping/reward"] == pytest.approx(bonus)
        assert info["shaping/contract"] == 1.0
        assert "pairwise_reward" in info  # composed with the seed's reward
    assert plain["agent_0"] == 1.0 and plain["agent_1"] == 0.0  # the vote, unchanged


def test_shaping_gives_partial_credit_to_a_broken_answer() -> None:
    returns, infos = _play(_debate(shaping={"contract": 0.5}), ["<solution>4</solution> prose"])
    # the seed's -1 for the parse error, plus 0.5 * 1/5 of the contract
    assert returns["agent_0"] == pytest.approx(-1.0 + 0.1)
    info = infos["agent_0"]
    assert info["shaping/contract"] == pytest.approx(0.2)
    assert info["shaping/correct"] == 0.0
    assert returns["agent_1"] == returns["agent_2"] == 0.0  # never answered: nothing shaped


def test_without_a_reference_answer_correctness_adds_nothing() -> None:
    env = debate.env(num_agents=3, max_rounds=1, questions=["Why?"], shaping={"correct": 1.0})
    env.reset(seed=0)
    env.step(GOOD)
    info = env.unwrapped.infos["agent_0"]
    assert info["shaping/reward"] == 0.0 and "shaping/correct" not in info


def test_the_default_debate_is_not_shaped() -> None:
    env = _debate()
    env.reset(seed=0)
    env.step(GOOD)
    assert not any(k.startswith("shaping/") for k in env.unwrapped.infos["agent_0"])


def test_shaping_reward_matches_the_wrapper() -> None:
    assert shaping_reward(GOOD, True, contract=0.5, correct=2.0) == 2.5
    assert shaping_reward("x", False, contract=0.5, correct=2.0) == 0.0


@pytest.mark.parametrize(
    ("shaping", "error", "match"),
    [
        ({"format": 1.0}, ValueError, "no term 'format'"),
        ({"contract": -1.0}, ValueError, "contract must be"),
        ({"contract": math.nan}, ValueError, "contract must be"),
        ({"contract": 0.0}, ValueError, "adds nothing"),
        ("contract", TypeError, "mapping of term to weight"),
    ],
)
def test_bad_shaping_is_a_clear_error(shaping: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        _debate(shaping=shaping)


def test_shaping_wraps_only_a_debate() -> None:
    from llm_envs import expert_iteration

    with pytest.raises(TypeError, match="not a debate"):
        DebateShaping(expert_iteration.env())
    assert isinstance(DebateShaping(WinRateReward(debate.raw_env())), DebateShaping)


# ----------------------------------------------------------------------- judge


@pytest.mark.parametrize(
    ("comparisons", "correct", "score"),
    [
        ([(0, ">", 1)], {0: True, 1: False}, 1.0),
        ([(1, ">", 0)], {0: True, 1: False}, 0.0),  # the wrong one above the right one
        ([(0, "=", 1)], {0: True, 1: False}, 0.0),
        ([(0, "=", 1)], {0: False, 1: False}, 1.0),  # two wrong answers are equally good
        ([(0, ">", 1)], {0: True, 1: True}, 0.0),  # two right ones are not
        ([(0, ">", 1), (0, ">", 2), (1, "=", 2)], {0: True, 1: False, 2: False}, 1.0),
        ([(0, ">", 1), (2, ">", 1)], {0: True, 1: False, 2: False}, 0.5),
        ([(0, ">", 3)], {0: True, 1: False}, 0.0),  # agent 3 had not answered: agrees with nothing
        ([], {0: True, 1: False}, 0.0),  # N/A with two answers to compare
        ([], {0: True}, None),  # one answer: nothing to judge
        ([(0, ">", 1)], {}, None),
    ],
)
def test_judge_score_table(comparisons, correct, score) -> None:
    assert judge_score(comparisons, correct) == score


_VERDICTS = st.dictionaries(st.integers(0, 5), st.booleans(), max_size=6)


@st.composite
def _votes_on(draw: st.DrawFn) -> tuple[list[tuple[int, str, int]], dict[int, bool]]:
    correct = draw(_VERDICTS)
    agents = st.integers(0, 6)
    votes = draw(
        st.lists(st.tuples(agents, st.sampled_from([">", "="]), agents), max_size=8).map(
            lambda vs: [(a, op, b) for a, op, b in vs if a != b]
        )
    )
    return votes, correct


@given(_votes_on(), st.permutations(range(7)))
def test_judge_score_ignores_the_agents_names(case, permutation) -> None:
    votes, correct = case
    rename = dict(enumerate(permutation))
    renamed_votes = [(rename[a], op, rename[b]) for a, op, b in votes]
    renamed = {rename[a]: ok for a, ok in correct.items()}
    assert judge_score(renamed_votes, renamed) == judge_score(votes, correct)


@given(_votes_on())
def test_judge_score_is_a_share_or_none(case) -> None:
    votes, correct = case
    score = judge_score(votes, correct)
    assert (score is None) == (len(correct) < 2)
    assert score is None or 0.0 <= score <= 1.0


@given(_VERDICTS.filter(lambda c: len(c) >= 2), st.data())
def test_a_referees_votes_score_one_and_turning_one_around_scores_less(correct, data) -> None:
    # The referee ranks every right answer above every wrong one, ties the rest.
    agents = sorted(correct)
    votes = [
        (a, "=", b) if correct[a] == correct[b] else ((a, ">", b) if correct[a] else (b, ">", a))
        for i, a in enumerate(agents)
        for b in agents[i + 1 :]
    ]
    assert judge_score(votes, correct) == 1.0
    strict = [k for k, (_, op, _) in enumerate(votes) if op == ">"]
    if strict:
        k = data.draw(st.sampled_from(strict))
        a, _, b = votes[k]
        flipped = [*votes[:k], (b, ">", a), *votes[k + 1 :]]
        assert judge_score(flipped, correct) == pytest.approx(1 - 1 / len(votes))


def test_visible_correctness_keeps_each_other_agents_latest_answer() -> None:
    turns = [(0, True), (1, False), (2, True), (0, False), (1, True)]
    assert visible_correctness(turns, voter=2) == {0: False, 1: True}
    assert visible_correctness(turns[:1], voter=0) == {}


def _judged(answers: list[str], **kwargs: object) -> dict[str, dict]:
    shaping = {"contract": 0.0, "correct": 0.0, "judge": 1.0}
    env = _debate(shaping=shaping, **kwargs)
    return _play(env, answers)[1]


def test_judge_pays_a_vote_that_agrees_with_the_reference() -> None:
    right = _judged([_answer("4"), _answer("5"), _answer("4", "Agent 0 > Agent 1")])
    wrong = _judged([_answer("4"), _answer("5"), _answer("4", "Agent 1 > Agent 0")])
    silent = _judged([_answer("4"), _answer("5"), _answer("4")])
    assert right["agent_2"]["shaping/judge"] == 1.0 == right["agent_2"]["shaping/reward"]
    assert wrong["agent_2"]["shaping/judge"] == 0.0 == silent["agent_2"]["shaping/judge"]
    # agent_0 saw no answer and agent_1 one: nothing to judge, no term at all
    assert "shaping/judge" not in right["agent_0"] and "shaping/judge" not in right["agent_1"]
    assert right["agent_1"]["shaping/reward"] == 0.0


def test_judge_reads_a_masked_answer_as_wrong() -> None:
    infos = _judged(
        [_answer("5"), "prose", _answer("4", "Agent 0 = Agent 1")], on_parse_error="mask"
    )
    assert infos["agent_2"]["shaping/judge"] == 1.0  # both wrong: a tie agrees


def test_judge_reads_each_agents_latest_answer() -> None:
    # Round 1: agent_1 is wrong. Round 2: agent_1 corrects itself before agent_2 votes.
    env = debate.env(
        num_agents=3,
        max_rounds=2,
        questions=[DebateQuestion("What is 2 + 2?", answer="4")],
        shaping={"judge": 1.0},
    )
    answers = [_answer("4"), _answer("5"), _answer("4", "Agent 0 > Agent 1")]
    answers += [_answer("4"), _answer("4"), _answer("4", "Agent 0 = Agent 1")]
    _, infos = _play(env, answers)
    assert infos["agent_2"]["shaping/judge"] == 1.0
