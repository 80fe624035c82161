"""JudgingDebater: a teacher that writes the contract, judges by its own answer and votes so."""

from __future__ import annotations

import pytest

from llm_envs import debate
from llm_envs.debate import DebateQuestion, JudgingDebater, parse_response
from llm_envs.debate.protocol import contract_score


def play(answers: dict[int, str | None], num_agents: int = 3, max_rounds: int = 2):
    """A debate of JudgingDebaters; agent i answers answers[i]. Returns the record and returns."""
    env = debate.env(num_agents=num_agents, max_rounds=max_rounds)
    env.reset(seed=0, options={"question": DebateQuestion("What is 3 + 4?", answer="7")})
    agents = {
        f"agent_{i}": JudgingDebater(i, num_agents, solver=lambda q, a=a: a)
        for i, a in answers.items()
    }
    returns: dict[str, float] = {}
    for agent in env.agent_iter():
        observation, reward, terminated, truncated, info = env.last()
        returns[agent] = returns.get(agent, 0.0) + reward
        env.step(None if terminated or truncated else agents[agent](observation, info))
    return env.unwrapped.record(), returns


def test_every_answer_follows_the_contract() -> None:
    record, _ = play({0: "7", 1: "8", 2: "7"})
    for turn in record["turns"]:
        assert contract_score(turn["text"]) == 1.0
        assert not turn["details"]["parse_error"]


def test_votes_favour_the_answers_that_agree_with_the_judge() -> None:
    record, returns = play({0: "7", 1: "8", 2: "7"})
    votes = [v for t in record["turns"] for v in t["details"]["votes"]]
    assert "Agent 0 > Agent 1" in votes and "Agent 2 > Agent 1" in votes
    assert not any(v.startswith("Agent 1 >") for v in votes)
    # agent_1 (wrong) loses every vote about it; the two right ones win theirs
    assert returns["agent_1"] == 0.0
    assert returns["agent_0"] > 0.5 and returns["agent_2"] > 0.5


def test_agreement_ends_the_debate_in_round_two() -> None:
    record, _ = play({0: "7", 1: "7", 2: "7"})
    assert record["summary"]["consensus_reached"]
    assert record["summary"]["rounds"] == 2  # round 1: not everyone has answered yet
    ties = [v for t in record["turns"] for v in t["details"]["votes"]]
    assert ties and all(" = " in v for v in ties)


def test_a_judge_without_an_answer_votes_for_nobody() -> None:
    record, _ = play({0: None, 1: "7", 2: "7"})
    first = parse_response(record["turns"][0]["text"], author=0)
    assert first.solution == "I cannot work this out." and not first.consensus
    later = parse_response(record["turns"][3]["text"], author=0)
    assert later.comparisons == ((1, "=", 2),)  # neither agrees with "no answer"


def test_an_answer_that_broke_the_contract_ranks_below_wrong_ones() -> None:
    env = debate.env(num_agents=4, max_rounds=1, on_parse_error="mask")
    env.reset(seed=0, options={"question": DebateQuestion("What is 3 + 4?", answer="7")})
    for text in ("<solution>7</solution>", "I think it is 8.", "<solution>8</solution>"):
        env.step(
            text
            if "<" not in text
            else text + "<evaluation>N/A</evaluation><comparison>N/A</comparison>"
            "<consensus>NO</consensus><consensus_reason>first</consensus_reason>"
        )
    judge = JudgingDebater(3, 4, solver=lambda q: "7", max_votes=6)
    reply = parse_response(judge(env.observe("agent_3"), env.unwrapped.infos["agent_3"]), author=3)
    assert "Agent 1 gave no valid answer" in reply.evaluation
    # agrees (0) > differs (2) > broke the contract (1)
    assert reply.comparisons == ((0, ">", 2), (0, ">", 1), (2, ">", 1))


@pytest.mark.parametrize("bad", [{"agent_id": 3}, {"num_agents": 1}, {"max_votes": -1}])
def test_bad_arguments_are_clear_errors(bad: dict[str, int]) -> None:
    kwargs = {"agent_id": 0, "num_agents": 3, **bad}
    with pytest.raises(ValueError, match=next(iter(bad))):
        JudgingDebater(kwargs.pop("agent_id"), kwargs.pop("num_agents"), solver=str, **kwargs)
