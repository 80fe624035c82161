"""Info keys the trainers reserve: listed in ``llm_envs.contract``, warned about at first use.

A trainer logs metrics of its own beside an environment's infos; an info of
the same name was dropped (MAGRPO's ``solved``) or replaced the trainer's
number (``total_turns``) without a word. The list is checked against what each
trainer computes, and a rollout that reads such an info warns once per key.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import pytest
from pettingzoo import AECEnv, ParallelEnv

from baselines.data.episode_metrics import episode_metrics, warn_reserved_info_keys
from baselines.grpo.assembly import AssembledCompletion
from baselines.grpo.rollout_func import completion_metrics
from baselines.is_trainer.evaluation import eval_metrics
from baselines.magrpo.tree import TREE_METRICS, grow_trees
from baselines.rollouts import rollout
from baselines.samplers import SamplingParams, ScriptedPolicy
from baselines.types import Trajectory, TrajectoryGroup, Transition
from llm_envs.contract import RESERVED_INFO_KEYS, STOP, Observation
from llm_envs.factories import aec_factories
from llm_envs.text_env import TextEnvMixin, env_metadata, numbered_agents


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test starts as a fresh process would: no key warned about yet."""
    module = importlib.import_module("baselines.data.episode_metrics")  # the package shadows it
    monkeypatch.setattr(module, "warned_reserved_keys", set())


def _names(metrics: dict[str, float], prefix: str) -> set[str]:
    """The trainer's own metric names under ``prefix``: one level, no info involved."""
    return {k.removeprefix(prefix) for k in metrics if k.startswith(prefix)} - {""}


def _own_names() -> dict[str, set[str]]:
    """What each trainer logs of its own, computed from episodes without any info."""
    turn = Transition([1, 2], [3], [-0.1], reward=1.0, info={})
    group = TrajectoryGroup([Trajectory([turn]), Trajectory([turn])], final_rewards_G=[0, 1])
    episode = {k for k in _names(episode_metrics([group]), "env/all/") if "/" not in k}
    evaluation = {k for k in _names(eval_metrics([(True, 1.0, {})], "eval", None), "eval/")}
    grpo = set(completion_metrics(Trajectory([turn]), AssembledCompletion(prompt_ids=[1])))
    return {
        "episode": episode,
        "evaluation": {k for k in evaluation if "/" not in k},
        "grpo": grpo,
        "tree": set(TREE_METRICS),
    }


def test_every_name_a_trainer_logs_of_its_own_is_reserved_and_nothing_else():
    own = _own_names()
    assert own["episode"] == {
        "total_episodes",
        "total_turns",
        "turns_per_episode",
        "ac_tokens_per_turn",
        "ob_tokens_per_turn",
    }
    assert own["evaluation"] == {"num_episodes"}
    assert "solved" in own["tree"]
    assert set().union(*own.values()) == set(RESERVED_INFO_KEYS)


@pytest.mark.parametrize("key", ["total_turns", "ac_tokens_per_turn"])
def test_why_an_info_of_a_reserved_name_is_a_bug(key):
    # The info's mean replaces the trainer's own number under that name.
    turn = Transition([1, 2], [3], [-0.1], reward=1.0, info={})
    group = TrajectoryGroup([Trajectory([turn])], final_rewards_G=[0], metrics_G=[{key: 99.0}])
    assert episode_metrics([group])[f"env/all/{key}"] == 99.0


class InfoEnv(TextEnvMixin, AECEnv[str, Observation, str]):
    """Two agents, one turn each; every info holds the outcome keys it is given."""

    metadata = env_metadata("reserved_demo_v0", is_parallelizable=False)

    def __init__(self, config: Any = None, *, outcome: dict[str, float] | None = None) -> None:
        super().__init__()
        self.possible_agents = numbered_agents(2)
        self._init_text_env(self.possible_agents, None)
        self.outcome = dict(outcome or {})
        self.steps = 0

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._begin_reset(seed, options, known=frozenset())
        self._start_aec_episode(self.possible_agents)
        self.steps = 0
        self.infos = {a: {STOP: []} for a in self.agents}

    def step(self, action: str | None) -> None:
        begun = self._begin_step(action)
        if begun is None:
            return
        agent, _ = begun
        self.steps += 1
        self.infos[agent] = {STOP: [], **self.outcome}
        if self.steps == 2:
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = self.possible_agents[self.steps % 2]
        self._accumulate_rewards()

    def observe(self, agent: str) -> Observation:
        return {"messages": [{"role": "user", "content": "Say anything."}]}


_, info_env = aec_factories(InfoEnv)


def _play(outcome: dict[str, float], episodes: int = 3) -> list[warnings.WarningMessage]:
    policy = ScriptedPolicy({a: (lambda o, i: "hi") for a in ("agent_0", "agent_1")})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rollout([info_env(outcome=outcome) for _ in range(episodes)], policy, seeds=range(3))
    return [w for w in caught if "RESERVED_INFO_KEYS" in str(w.message)]


def test_a_rollout_warns_once_per_reserved_key_naming_who_reserves_it_and_the_fix():
    caught = _play({"solved": 1.0, "total_turns": 2.0, "score": 1.0})
    messages = sorted(str(w.message) for w in caught)
    assert messages == [
        "env 'reserved_demo_v0' has an info 'solved', a name reserved by MAGRPO's tree "
        "metrics (env/turn_T/solved): an info of that name is not logged "
        "(llm_envs.contract.RESERVED_INFO_KEYS); rename the info, e.g. 'reserved_demo_solved'",
        "env 'reserved_demo_v0' has an info 'total_turns', a name reserved by the "
        "importance-sampling trainer's episode metrics (env/all/total_turns): the info's mean "
        "would replace its own count (llm_envs.contract.RESERVED_INFO_KEYS); rename the info, "
        "e.g. 'reserved_demo_total_turns'",
    ]
    assert _play({"solved": 1.0}) == []  # once per key per process: not again


def test_infos_of_names_of_their_own_and_the_contract_s_keys_are_not_warned_about():
    assert _play({"score": 1.0, "win": 0.0, "loss_weight": 1.0}) == []


class InfoParallelEnv(ParallelEnv):
    """Two agents acting at once for one turn; every info holds the outcome keys it is given."""

    metadata = env_metadata("reserved_team_v0", is_parallelizable=True)

    def __init__(self, outcome: dict[str, float]) -> None:
        self.possible_agents = ["helper", "main"]
        self.outcome = outcome

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {a: self.observe(a) for a in self.agents}, {a: {STOP: []} for a in self.agents}

    def observe(self, agent):
        return {"messages": [{"role": "user", "content": "Say anything."}]}

    def step(self, actions):
        done = dict.fromkeys(self.agents, True)
        infos = {a: {STOP: [], **self.outcome} for a in self.agents}
        observations = {a: self.observe(a) for a in self.agents}
        self.agents = []
        return observations, dict.fromkeys(actions, 1.0), done, dict.fromkeys(done, False), infos


def test_magrpo_s_tree_warns_about_a_joint_action_s_info():
    env = InfoParallelEnv({"solved": 1.0, "pass_rate": 1.0})
    env.reset()
    policy = ScriptedPolicy({a: (lambda o, i: "hi") for a in env.possible_agents})
    samplers = dict.fromkeys(env.possible_agents, policy)
    with pytest.warns(UserWarning, match="has an info 'solved', a name reserved by MAGRPO"):
        grow_trees([env], samplers, SamplingParams(max_tokens=4), group_size=2, num_turns=1)


def test_a_non_env_is_named_by_its_type():
    with pytest.warns(UserWarning, match="env 'dict' has an info 'nodes'"):
        warn_reserved_info_keys({"nodes": 1}, {})
