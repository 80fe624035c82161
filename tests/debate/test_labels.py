"""Shuffled labels (``shuffle_labels=True``): each agent knows the others under its own numbers.

What must hold: a judge that votes for a number favours no seat; a judge that votes
by content casts the same votes by seat with or without labels; every mention of
an agent in an answer shown to another agent names the same seat; the labels are
the reset seed's and recorded.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_envs import debate
from llm_envs.debate import DebateQuestion, JudgingDebater
from llm_envs.debate.labels import (
    Renaming,
    relabel_mentions,
    seats_by_label,
    seats_of,
    shown_labels,
)
from llm_envs.debate.protocol import format_response
from llm_envs.judgements import Vote, lower_seat_wins
from llm_envs.testing.conformance import play_aec

QUESTION = DebateQuestion("What is 2 + 3?", answer="5")


def _me(prompt: str) -> int:
    match = re.search(r"You are Agent (\d+)", prompt)
    assert match is not None
    return int(match.group(1))


def _number_judge(observation, info) -> str:
    """Votes the lower number above the higher one among the others shown (a judge by label)."""
    prompt = observation["messages"][-1]["content"]
    me = _me(prompt)
    shown = sorted({int(n) for n in re.findall(r"^\[Agent (\d+)\]", prompt, flags=re.M)} - {me})
    vote = f"Agent {shown[0]} > Agent {shown[1]}" if len(shown) >= 2 else "N/A"
    return format_response(solution="5", comparison=vote, consensus=False)


def _play(judge, seed: int, **kwargs):
    env = debate.env(num_agents=3, max_rounds=2, questions=[QUESTION], **kwargs)
    env.reset(seed=seed)
    seen = []
    for _agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        seen.append(info)
        env.step(None if terminated or truncated else judge(observation, info))
    return env.unwrapped, seen


def _lower_seat_share(shuffle_labels: bool) -> float:
    lower = strict = 0
    for seed in range(40):
        env, _ = _play(_number_judge, seed, shuffle_labels=shuffle_labels)
        won, counted = lower_seat_wins(env.votes, 3)
        lower, strict = lower + won, strict + counted
    return lower / strict


def test_a_judge_that_votes_for_a_number_favours_no_seat() -> None:
    assert _lower_seat_share(False) == 1.0  # numbered by seat: the number is the seat
    assert 0.35 < _lower_seat_share(True) < 0.65


def test_the_judges_habit_shows_in_the_labels_it_read() -> None:
    _, infos = _play(_number_judge, 0, shuffle_labels=True)
    habits = [i["vote_lower_label"] for i in infos if "vote_lower_label" in i]
    assert habits and set(habits) == {1.0}  # it always voted its lower number first
    _, plain = _play(_number_judge, 0)
    assert not any("vote_lower_label" in i for i in plain)  # only with shuffled labels


def _normal(votes) -> set[tuple[int, object]]:
    """Each judge's strict votes, and the groups its ties join.

    The teacher ties the answers of one level in a chain through the order it
    reads them (0 = 1, 1 = 2), so which pairs tie depends on the labels; the
    groups they join do not.
    """
    out: set[tuple[int, object]] = {(v.author, (v.a, v.b)) for v in votes if v.op == ">"}
    for author in {v.author for v in votes}:
        groups: list[set[int]] = []
        for v in votes:
            if v.author == author and v.op == "=":
                joined = [g for g in groups if v.a in g or v.b in g]
                groups = [g for g in groups if g not in joined]
                groups.append({v.a, v.b}.union(*joined))
        out |= {(author, frozenset(g)) for g in groups}
    return out


@settings(max_examples=40, deadline=None)
@given(
    num_agents=st.integers(3, 5),
    answers=st.lists(st.sampled_from(["5", "6", "7"]), min_size=5, max_size=5),
    seed=st.integers(0, 2**16),
)
def test_a_judge_by_content_casts_the_same_votes_by_seat_under_any_labels(
    num_agents: int, answers: list[str], seed: int
) -> None:
    def votes(shuffle_labels: bool) -> set[tuple[int, object]]:
        env = debate.env(
            num_agents=num_agents, max_rounds=2, questions=[QUESTION], shuffle_labels=shuffle_labels
        )
        agents = {
            f"agent_{i}": JudgingDebater(
                i, num_agents, solver=lambda q, i=i: answers[i], max_votes=num_agents**2
            )
            for i in range(num_agents)
        }
        play_aec(env, lambda a, o, i: agents[a](o, i), seed=seed)
        return _normal(env.unwrapped.votes)

    assert votes(True) == votes(False)


def test_an_agent_named_in_an_answer_is_the_same_seat_in_every_readers_prompt() -> None:
    env = debate.env(num_agents=4, max_rounds=2, questions=[QUESTION], shuffle_labels=True)
    env.reset(seed=5)
    raw = env.unwrapped
    # Round 1: each agent names, in its evaluation, every agent under the number it knows.
    for seat in range(4):
        labels = raw._labels_of(seat)
        named = "; ".join(f"Agent {labels[s]} is seat {s}" for s in range(4))
        env.step(format_response(solution="5", evaluation=named, consensus=False))
    for reader in range(4):
        prompt = env.unwrapped.observe(f"agent_{reader}")["messages"][-1]["content"]
        labels = raw._labels_of(reader)
        pairs = re.findall(r"Agent (\d+) is seat (\d+)", prompt)
        assert pairs  # the others' answers are shown
        assert all(int(label) == labels[int(seat)] for label, seat in pairs)
        headers = [int(h) for h in re.findall(r"^\[Agent (\d+)\]", prompt, flags=re.M)]
        assert headers == sorted(headers)  # each round in label order
        assert headers == [0, 1, 2, 3] and _me(prompt) == reader  # its own answer too


def test_labels_are_the_seeds_recorded_and_keep_each_agents_own_number() -> None:
    def run(seed: int, shuffle_labels: bool):
        env, _ = _play(_number_judge, seed, shuffle_labels=shuffle_labels)
        return env.record()

    first, again = run(7, True), run(7, True)
    assert first == again
    assert first["summary"]["shuffle_labels"] is True
    for turn in first["turns"]:
        labels = turn["details"]["labels"]
        assert labels[turn["agent"]] == f"Agent {turn['agent'].rsplit('_', 1)[1]}"
        assert sorted(labels.values()) == ["Agent 0", "Agent 1", "Agent 2"]
        # the votes recorded are by seat: the text's numbers mapped through the labels
        seat_of = {int(v.rsplit(" ", 1)[1]): int(k.rsplit("_", 1)[1]) for k, v in labels.items()}
        written = re.findall(r"Agent (\d) > Agent (\d)", turn["details"]["comparison"])
        assert turn["details"]["votes"] == [
            f"Agent {seat_of[int(a)]} > Agent {seat_of[int(b)]}" for a, b in written
        ]
    assert any(
        turn["details"]["labels"] != {f"agent_{i}": f"Agent {i}" for i in range(3)}
        for seed in range(5)
        for turn in run(seed, True)["turns"]
    )
    plain = run(7, False)
    assert "shuffle_labels" not in plain["summary"]
    assert all("labels" not in turn["details"] for turn in plain["turns"])
    # the labels are drawn after the question: the seed's question either way
    assert first["summary"]["question"] == plain["summary"]["question"]


def test_chat_observations_stay_prefixes_under_labels() -> None:
    env = debate.env(
        num_agents=3,
        max_rounds=3,
        observation_mode="chat",
        shuffle_labels=True,
        questions=[QUESTION],
    )
    env.reset(seed=1)
    last: dict[str, list] = {}
    for agent in env.agent_iter():
        observation, _, terminated, truncated, _ = env.last()
        messages = observation["messages"]
        if agent in last:
            assert messages[: len(last[agent])] == last[agent]
        answer = None if terminated or truncated else _number_judge(observation, {})
        if answer is not None:
            last[agent] = [*messages, {"role": "assistant", "content": answer}]
        env.step(answer)


def test_the_round_instruction_names_the_labels_of_who_answered() -> None:
    env = debate.env(num_agents=3, max_rounds=1, questions=[QUESTION], shuffle_labels=True)
    for seed in range(6):
        env.reset(seed=seed)
        env.step(format_response(solution="5", consensus=False))
        labels = env.unwrapped._labels_of(1)
        prompt = env.unwrapped.observe("agent_1")["messages"][-1]["content"]
        assert f"Evaluate the answer of Agent {labels[0]} in" in prompt


@given(rename=st.permutations(range(6)), text=st.text(alphabet="Agent_ 0123456789>=x\n*`"))
def test_relabelling_with_the_inverse_gives_the_text_back(rename: list[int], text: str) -> None:
    inverse = [0] * len(rename)
    for k, label in enumerate(rename):
        inverse[label] = k
    assert relabel_mentions(relabel_mentions(text, rename), inverse) == text


@pytest.mark.parametrize(
    ("text", "rename", "expected"),
    [
        ("Agent 0 > Agent 1", [1, 0], "Agent 1 > Agent 0"),
        ("**agent_1** = Agent2", [2, 0, 1], "**agent_0** = Agent1"),
        ("Agent 12 and Agent 1", [0, 2, 1], "Agent 12 and Agent 2"),  # 12: out of range, kept
        ("XAgent 1, Agent 10x", [0, 2, 1], "XAgent 1, Agent 10x"),  # not a name: kept
    ],
)
def test_relabel_mentions_table(text: str, rename: list[int], expected: str) -> None:
    assert relabel_mentions(text, rename) == expected


@given(reader=st.integers(0, 7), extra=st.integers(1, 8), seed=st.integers(0, 2**32))
def test_shown_labels_is_a_permutation_that_keeps_the_reader(
    reader: int, extra: int, seed: int
) -> None:
    n = reader + extra
    labels = shown_labels(reader, n, np.random.default_rng(seed))
    assert sorted(labels) == list(range(n)) and labels[reader] == reader


def test_shuffle_labels_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="shuffle_labels must be True or False"):
        debate.env(shuffle_labels=1)


def test_votes_in_the_ledger_are_by_seat() -> None:
    env = debate.env(num_agents=3, max_rounds=1, questions=[QUESTION], shuffle_labels=True)
    env.reset(seed=2)
    raw = env.unwrapped
    env.step(format_response(solution="5", consensus=False))
    env.step(format_response(solution="6", consensus=False))
    labels = raw._labels_of(2)
    seat_of = {label: seat for seat, label in enumerate(labels)}
    env.step(format_response(solution="5", comparison="Agent 0 > Agent 1", consensus=False))
    assert raw.votes == [Vote(2, seat_of[0], ">", seat_of[1])]


@given(
    st.integers(2, 9).flatmap(
        lambda n: st.tuples(st.permutations(range(n)), st.permutations(range(n)))
    )
)
def test_a_renaming_names_the_seat_the_author_meant(labels) -> None:
    author, reader = labels
    seats = seats_by_label(author)
    assert [author[seat] for seat in seats] == list(range(len(author)))  # the inverse
    rename = Renaming(seats, reader)
    # The author's "Agent k" is the seat it labels k; the reader knows that seat as reader[seat].
    assert [rename[k] for k in range(len(rename))] == [reader[seats[k]] for k in range(len(seats))]
    assert seats_of([(0, ">", 1), (1, "=", 99)], seats) == (
        (seats[0], ">", seats[1]),
        (seats[1], "=", 99),
    )
