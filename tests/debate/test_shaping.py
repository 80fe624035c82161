"""Opt-in debate shaping: contract_score's rules and properties, and the DebateShaping wrapper."""

from __future__ import annotations

import math
import re

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
from llm_envs.debate.shaping import OthersSeen, judging_info, visible_correctness
from llm_envs.judgements import Vote, lower_seat_wins

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


# ------------------------------------------------------------------- judging infos and vote


def test_each_answer_says_whether_it_voted_how_well_and_for_which_seat() -> None:
    env = debate.env(
        num_agents=3, max_rounds=2, questions=[DebateQuestion("What is 2 + 2?", answer="4")]
    )
    answers = [_answer("4"), _answer("5"), _answer("4", "Agent 1 > Agent 0")]
    answers += [_answer("4", "Agent 1 > Agent 2"), _answer("4"), _answer("4")]
    env.reset(seed=0)
    per_turn = []
    for answer in answers:
        agent = env.agent_selection
        env.step(answer)
        per_turn.append(
            {
                k: env.unwrapped.infos[agent].get(k)
                for k in ("voted", "vote_agreement", "vote_lower_seat")
            }
        )
    none = {"voted": None, "vote_agreement": None, "vote_lower_seat": None}
    assert per_turn[:2] == [none, none]  # fewer than two answers to compare: no judging infos
    # agent_2 put the wrong answer (agent_1's 5) first, and the higher seat first.
    assert per_turn[2] == {"voted": 1.0, "vote_agreement": 0.0, "vote_lower_seat": 0.0}
    # agent_0 saw agent_1 (5) and agent_2 (4): wrong first again, but the lower seat.
    assert per_turn[3] == {"voted": 1.0, "vote_agreement": 0.0, "vote_lower_seat": 1.0}
    # agent_1 cast nothing: no agreement and no seat share, and nothing left from earlier.
    assert per_turn[4] == {"voted": 0.0, "vote_agreement": None, "vote_lower_seat": None}


def test_an_answer_without_votes_shows_no_earlier_answers_judging() -> None:
    env = debate.env(
        num_agents=3, max_rounds=2, questions=[DebateQuestion("What is 2 + 2?", answer="4")]
    )
    answers = [_answer("4"), _answer("4"), _answer("4", "Agent 0 = Agent 1")]
    answers += [_answer("4"), _answer("4"), _answer("4")]
    _, infos = _play(env, answers)
    assert infos["agent_2"]["voted"] == 0.0
    assert "vote_agreement" not in infos["agent_2"] and "vote_lower_seat" not in infos["agent_2"]


def test_vote_pays_an_answer_that_casts_a_valid_vote() -> None:
    shaping = {"vote": 0.25}
    cast = _play(
        _debate(shaping=shaping), [_answer("4"), _answer("5"), _answer("5", "Agent 1 > Agent 0")]
    )
    silent = _play(_debate(shaping=shaping), [_answer("4"), _answer("5"), _answer("5")])
    assert (
        cast[1]["agent_2"]["shaping/vote"] == 1.0 and cast[1]["agent_2"]["shaping/reward"] == 0.25
    )
    assert silent[1]["agent_2"]["shaping/vote"] == 0.0
    assert "shaping/vote" not in cast[1]["agent_1"]  # one other answer: nothing to compare
    assert cast[0]["agent_2"] - silent[0]["agent_2"] == pytest.approx(0.25)  # the voter's pay
    assert cast[0]["agent_1"] - silent[0]["agent_1"] == 1.0  # the win goes to the one voted up


@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.sampled_from([">", "="]), st.integers(0, 4)), max_size=6
    ),
    st.dictionaries(st.integers(0, 4), st.booleans(), max_size=5),
    st.booleans(),
)
def test_judging_info_is_what_its_votes_say(comparisons, seen, reference) -> None:
    author = 3
    seen.pop(author, None)
    votes = [Vote(author, a, op, b) for a, op, b in comparisons]
    info = judging_info(comparisons, votes, seen, 5, reference=reference)
    if len(seen) < 2:
        assert info == {}
        return
    valid = [v for v in votes if v.a != v.b]
    assert info["voted"] == float(bool(valid))
    strict = [v for v in valid if v.op == ">"]
    if strict:
        assert info["vote_lower_seat"] == sum(v.a < v.b for v in strict) / len(strict)
    else:
        assert "vote_lower_seat" not in info
    if reference and comparisons:
        assert info["vote_agreement"] == judge_score(comparisons, seen)
    else:
        assert "vote_agreement" not in info


def test_others_seen_is_the_latest_answers_but_the_voters() -> None:
    latest = {0: True, 1: False, 2: True}
    seen = OthersSeen(latest, voter=1)
    assert dict(seen) == {0: True, 2: True} and len(seen) == 2
    assert 1 not in seen and 0 in seen
    with pytest.raises(KeyError):
        seen[1]
    assert len(OthersSeen(latest, voter=7)) == 3


# ------------------------------------------------------------------------ shuffled answers


def _positional_judge(observation, info) -> str:
    """Votes the first answer shown above the second, whatever they say (a judge by position)."""
    prompt = observation["messages"][-1]["content"]
    shown = [int(n) for n in re.findall(r"^\[Agent (\d+)\]", prompt, flags=re.M)]
    me = int(re.search(r"You are Agent (\d+)", prompt).group(1))
    others = list(dict.fromkeys(a for a in shown if a != me))
    vote = f"Agent {others[0]} > Agent {others[1]}" if len(others) >= 2 else "N/A"
    return format_response(solution="4", comparison=vote, consensus=False)


def _lower_seat_share(shuffle: bool, seeds: range) -> float:
    lower = strict = 0
    for seed in seeds:
        env = debate.env(
            num_agents=3,
            max_rounds=2,
            questions=[DebateQuestion("What is 2 + 2?", answer="4")],
            shuffle_answers=shuffle,
        )
        env.reset(seed=seed)
        for agent in env.agent_iter():
            _, _, terminated, truncated, info = env.last()
            env.step(
                None if terminated or truncated else _positional_judge(env.observe(agent), info)
            )
        won, counted = lower_seat_wins(env.unwrapped.votes, 3)
        lower, strict = lower + won, strict + counted
    return lower / strict


def test_shuffled_answers_take_the_seat_out_of_a_positional_judges_votes() -> None:
    assert _lower_seat_share(False, range(40)) == 1.0  # seat order: position is the seat
    assert 0.35 < _lower_seat_share(True, range(40)) < 0.65


def test_shuffled_prompts_are_the_seeds_and_keep_the_rounds() -> None:
    def prompts(seed: int, shuffle: bool) -> list[str]:
        env = debate.env(num_agents=4, max_rounds=2, shuffle_answers=shuffle)
        env.reset(seed=seed)
        seen = []
        for _agent in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            seen.append(observation["messages"][-1]["content"])
            env.step(None if terminated or truncated else _answer("4"))
        return seen

    assert prompts(3, True) == prompts(3, True)  # the reset seed fixes every order
    assert any(prompts(s, True) != prompts(s, False) for s in range(5))
    # the question drawn is the seed's either way: shuffling draws after it
    assert [p.split("\n")[0] for p in prompts(3, True)] == [
        p.split("\n")[0] for p in prompts(3, False)
    ]
    last = prompts(3, True)[7]
    assert last.index("=== Round 1") < last.index("=== Round 2")
    assert sorted(re.findall(r"\[Agent (\d)\]", last.split("=== Round 2")[0])) == [
        "0",
        "1",
        "2",
        "3",
    ]


def test_shuffle_answers_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="shuffle_answers must be True or False"):
        debate.env(shuffle_answers="yes")
