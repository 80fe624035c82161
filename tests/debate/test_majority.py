"""The majority vote of independent answers: its tie rule, its scoring, the family's numbers."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.debate import DebateQuestion, format_answer, question_in
from llm_envs.debate.majority import answer_key, majority, majority_vote, vote_on
from llm_envs.registration import make_family

SUMS = {"max_digits": 1, "operations": ["+"]}
BROKEN = "I think it is five."  # no tags: a parse error, which does not vote

keys = st.lists(st.one_of(st.none(), st.sampled_from("abcd")), max_size=12)


@pytest.mark.parametrize(
    ("keys", "index"),
    [
        (["5", "6", "6"], 1),  # two of three
        (["5", "6", "7"], 0),  # all differ: the first
        (["6", "5", "5", "6"], 0),  # two against two: the one seen first
        ([None, "6", "5", "5"], 2),  # a broken answer does not vote
        (["a"], 0),
        ([None, None], None),
        ([], None),
    ],
)
def test_the_majority_and_its_tie_rule(keys, index):
    assert majority(keys) == index


@given(keys)
def test_the_majority_is_a_most_common_key_seen_first(given_keys):
    index = majority(given_keys)
    counts = {k: given_keys.count(k) for k in given_keys if k is not None}
    if not counts:
        assert index is None
        return
    assert index is not None
    winner = given_keys[index]
    assert counts[winner] == max(counts.values())
    assert given_keys.index(winner) == index  # its first occurrence
    tied = [k for k in counts if counts[k] == counts[winner]]
    assert index == min(given_keys.index(k) for k in tied)


@given(keys, st.permutations("abcd"))
def test_renaming_the_answers_or_adding_broken_ones_keeps_the_majority(given_keys, names):
    renamed = [None if k is None else names["abcd".index(k)] for k in given_keys]
    assert majority(renamed) == majority(given_keys)
    assert majority([*given_keys, None]) == majority(given_keys)


@pytest.mark.parametrize(
    ("solution", "key"),
    [
        ("1,000", "1000"),
        ("1000.0", "1000"),
        ("0.5", "1/2"),
        (r"\frac{1}{2}", "1/2"),
        ("The answer is 7.", "7"),
        (" New York. ", "newyork"),
        ("", None),
        ("  ", None),
    ],
)
def test_what_makes_two_answers_the_same(solution, key):
    assert answer_key(solution) == key


FIVE = DebateQuestion("What is 2 + 3?", answer="5")


@pytest.mark.parametrize(
    ("solutions", "majority_correct", "share"),
    [
        (["5", "5", "6"], True, Fraction(2, 3)),
        (["6", "6", "5"], False, Fraction(1, 3)),
        (["5", "6", "7"], True, Fraction(1, 3)),  # a tie: the first sampled
        (["6", "5", "7"], False, Fraction(1, 3)),
        ([None, None, "5"], True, Fraction(1, 3)),  # the only vote decides
        ([None, None, None], False, Fraction(0)),  # no vote: no majority, wrong
        (["6", "5", "5.0"], True, Fraction(2, 3)),  # 5.0 is 5
        (["", "6", "5"], False, Fraction(1, 3)),  # an empty solution does not vote
    ],
)
def test_a_vote_scored_by_hand(solutions, majority_correct, share):
    texts = [BROKEN if s is None else format_answer(s) for s in solutions]
    won, correct = vote_on(FIVE, texts)
    assert won is majority_correct
    assert correct == pytest.approx(float(share))


def test_a_vote_needs_a_reference_and_texts():
    with pytest.raises(ValueError, match="reference answer"):
        vote_on(DebateQuestion("Why?"), ["x"])
    with pytest.raises(ValueError, match="0 texts"):
        vote_on(FIVE, [])


def sums_family(**env_kwargs):
    settings = {"num_agents": 3, "max_rounds": 2, "shuffle_labels": True, **env_kwargs}
    return make_family("debate", settings, task="arithmetic", seed=3, task_kwargs=SUMS)


def test_the_family_scores_a_scripted_sampler_exactly():
    family = sums_family()
    problems, seed = range(4), 11
    questions = [family.eval_questions[p] for p in problems]

    def wrong(answer):
        return str(int(answer) + 1)

    # Per question, its three answers: right right wrong (majority right, 2/3);
    # wrong wrong right (0, 1/3); broken right other-wrong (a tie, right first: 1, 1/3);
    # broken thrice (0, 0). Majority: 2/4; single answers: (2/3 + 1/3 + 1/3 + 0) / 4.
    scripts = [
        lambda a: [a, a, wrong(a)],
        lambda a: [wrong(a), wrong(a), a],
        lambda a: [None, a, str(int(a) + 2)],
        lambda a: [None, None, None],
    ]
    asked = []

    def sample(turns):
        asked.extend(turns)
        texts = []
        for p, script in enumerate(scripts):  # the turns come three per problem, in order
            assert question_in(turns[3 * p][1]) == questions[p].text
            solutions = script(questions[p].answer)
            texts += [BROKEN if s is None else format_answer(s) for s in solutions]
        return texts

    found = family.independent_answers(sample, problems, seed)
    assert found == pytest.approx({"majority_vote/correct": 0.5, "single_answer/correct": 1 / 3})
    # Every answer was asked of the prompt the evaluation's first agent reads, alone.
    for p in problems:
        plan = family.evaluation([p], seed)
        debate = plan.envs[0]
        debate.reset(seed=plan.seeds[0], options=plan.options[0])
        first = debate.observe("agent_0")
        assert [t[1] for t in asked[3 * p : 3 * p + 3]] == [first] * 3
        assert {t[0] for t in asked} == {"agent_0"}
        assert "Agent 1" not in first["messages"][-1]["content"]


def test_questions_without_a_reference_are_left_out():
    calls = []

    def sample(turns):
        calls.append(len(turns))
        return [format_answer("5")] * len(turns)

    unanswered = [DebateQuestion("Tea or coffee?")]
    assert majority_vote(sample, unanswered, [0], {"num_agents": 2}, 2) == {}
    assert calls == []
    found = majority_vote(sample, [*unanswered, FIVE], [0, 0], {"num_agents": 2}, 2)
    assert found == {"majority_vote/correct": 1.0, "single_answer/correct": 1.0}
    assert calls == [2]


def test_bad_arguments_and_a_short_sampler_are_refused():
    def short(turns):
        return ["x"]

    with pytest.raises(ValueError, match="answers=0"):
        majority_vote(short, [FIVE], [0], {}, 0)
    with pytest.raises(ValueError, match="1 questions and 2 seeds"):
        majority_vote(short, [FIVE], [0, 1], {}, 3)
    with pytest.raises(ValueError, match="returned 1 texts for 3 turns"):
        majority_vote(short, [FIVE], [0], {}, 3)
