"""One seat of a multi-agent episode as a single-agent environment (llm_envs.seats)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from pettingzoo import AECEnv

from llm_envs.code_collab import ScriptedCoder, parallel_env
from llm_envs.code_collab import env as code_env
from llm_envs.debate import env as debate_env
from llm_envs.debate.agents import MalformedDebater, scripted_debaters
from llm_envs.registration import make_family
from llm_envs.seats import SeatView, family_seat
from llm_envs.tasks import load_coophumaneval
from llm_envs.testing.conformance import play_aec
from tests.code_collab.cases import IS_BIG, IS_PRIME, USES_AUX


@pytest.fixture(scope="module")
def x_or_y():
    return next(p for p in load_coophumaneval() if p.task_id == "CoopHumanEval/0")


def _returns(seen):
    """Each agent's return from ``play_aec``'s ``last()`` rewards (accumulated since it acted)."""
    total = defaultdict(float)
    for agent, _, reward, *_ in seen:
        total[agent] += reward
    return dict(total)


def _play_view(view, action_of, **reset):
    observation, info = view.reset(**reset)
    rewards, steps = [], 0
    while not view.done:
        observation, reward, terminated, truncated, info = view.step(action_of(observation, info))
        rewards.append(reward)
        steps += 1
    return rewards, terminated, truncated


@pytest.mark.parametrize("seat", ["agent_0", "agent_1", "agent_2"])
@pytest.mark.parametrize("mine", ["scripted", "malformed"])
def test_aec_seat_is_paid_its_return_and_the_episode_is_the_same(seat, mine):
    def players():
        agents = scripted_debaters(3, seed=1)
        if mine == "malformed":
            agents[seat] = MalformedDebater()
        return agents

    whole = debate_env(num_agents=3, max_rounds=2)
    everyone = players()
    seen = play_aec(whole, lambda agent, obs, info: everyone[agent](obs, info), seed=5)

    agents = players()
    view = SeatView(debate_env(num_agents=3, max_rounds=2), seat, agents)
    rewards, terminated, truncated = _play_view(view, agents[seat], seed=5)

    turns = [t for t in seen if t[0] == seat and not (t[3] or t[4])]
    assert len(rewards) == len(turns)
    if mine == "scripted":
        assert len(turns) == 2  # one answer per round
    assert sum(rewards) == pytest.approx(_returns(seen)[seat])
    assert (terminated, truncated) == (True, False)
    assert view.record()["turns"] == whole.unwrapped.record()["turns"]
    assert not view.env.agents  # the others played their dead steps: the record is whole


def test_aec_rewards_arrive_between_the_seats_turns(x_or_y):
    # The code pair pays each turn's pass rate after both acted: the helper
    # (first seat) is paid turn t at its turn t + 1, and the last at its dead step.
    helper, main = ScriptedCoder([IS_BIG, IS_PRIME]), ScriptedCoder(USES_AUX)
    view = SeatView(code_env(problems=[x_or_y], num_turns=3), "helper", {"main": main})
    rewards, terminated, truncated = _play_view(view, helper, seed=0)
    assert rewards == [pytest.approx(3.4), 4.0, 4.0]
    assert (terminated, truncated) == (False, True)  # the turn limit truncates the episode


def test_parallel_seat_matches_the_joint_play(x_or_y):
    def joint_play():
        game = parallel_env(problems=[x_or_y], num_turns=3)
        helper, main = ScriptedCoder([IS_BIG, IS_PRIME]), ScriptedCoder(USES_AUX)
        observations, infos = game.reset(seed=0)
        paid = []
        while game.agents:
            actions = {"helper": helper(observations["helper"], infos["helper"])}
            actions["main"] = main(observations["main"], infos["main"])
            observations, rewards, *_, infos = game.step(actions)
            paid.append(rewards["main"])
        return paid

    helper, main = ScriptedCoder([IS_BIG, IS_PRIME]), ScriptedCoder(USES_AUX)
    view = SeatView(parallel_env(problems=[x_or_y], num_turns=3), "main", {"helper": helper})
    rewards, terminated, truncated = _play_view(view, main, seed=0)
    assert rewards == joint_play() == [pytest.approx(3.4), 4.0, 4.0]
    assert terminated or truncated


def test_family_seat_plays_a_problem_against_the_reference_players():
    settings = {"num_agents": 3, "max_rounds": 1}
    family = make_family("debate", settings, task="arithmetic", task_kwargs={"max_digits": 1})
    view, seed, options = family_seat(family, "agent_2", problem=3)
    observation, _ = view.reset(seed=seed, options=options)
    assert options["question"].text in str(observation)
    _, reward, terminated, _, _ = view.step("not the contract")
    assert terminated and reward < 0  # a broken answer, voted below the reference answers


def test_family_seat_without_reference_players_says_why():
    family = make_family("debate", {"num_agents": 3})  # the built-in questions have no answers
    with pytest.raises(ValueError, match="reference answer"):
        family_seat(family, "agent_0")


def test_misuse_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="not an agent of this env"):
        SeatView(debate_env(num_agents=3), "agent_7", scripted_debaters(3))
    with pytest.raises(ValueError, match=r"no player for \['agent_2'\]"):
        SeatView(debate_env(num_agents=3), "agent_0", {"agent_1": MalformedDebater()})
    view = SeatView(debate_env(num_agents=3, max_rounds=1), "agent_0", scripted_debaters(3))
    with pytest.raises(RuntimeError, match="reset"):
        view.step("x")
    view.reset(seed=0)
    with pytest.raises(TypeError, match="str"):
        view.step(None)  # type: ignore[arg-type]
    view.step("x")
    with pytest.raises(RuntimeError, match="over"):
        view.step("x")


class _TipJar(AECEnv):
    """Two agents, two turns each; every move pays the *other* agent 1 (a test double)."""

    def __init__(self):
        self.metadata = {"name": "tip_jar"}
        self.possible_agents = ["a", "b"]

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self.agent_selection, self.moves = "a", 0

    def observe(self, agent):
        return f"move {self.moves}"

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: float(a != agent) for a in self.agents}
        self.moves += 1
        if self.moves == 4:
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = "b" if agent == "a" else "a"
        self._accumulate_rewards()


def test_pay_before_the_seats_first_turn_goes_into_its_first_step():
    view = SeatView(_TipJar(), "b", {"a": lambda observation, info: "tip"})
    view.reset()
    assert view.episode_return == 1.0  # a moved first and paid b
    rewards = [view.step("tip")[1]]
    while not view.done:
        rewards.append(view.step("tip")[1])
    # First step: a's first tip (before b's turn) and its second; then nothing is left.
    assert rewards == [2.0, 0.0] and view.episode_return == sum(rewards) == 2.0
