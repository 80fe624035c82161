"""What every environment shares: the constructor convention, reset bookkeeping, steps, metadata.

The environment below is the minimal one of docs/adding_an_environment.md: its
rules are a few lines, everything else comes from llm_envs.text_env,
llm_envs.records and llm_envs.factories, and it passes the conformance checks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pettingzoo import AECEnv

from llm_envs.code_collab import CodeCollabConfig, CodeCollabEnv
from llm_envs.contract import STOP, TURN, Observation
from llm_envs.debate import DebateConfig, DebateEnv
from llm_envs.expert_iteration import ExpertIterationConfig, ExpertIterationEnv, Strategy
from llm_envs.factories import aec_factories
from llm_envs.records import EpisodeRecord, turn_record
from llm_envs.testing.conformance import check_aec_env
from llm_envs.text_env import (
    RENDER_MODES,
    TextEnvMixin,
    env_metadata,
    numbered_agents,
    resolve_config,
)
from tests.code_collab.cases import F_PROBLEM

# ------------------------------------------------------------------- a minimal environment


@dataclass(frozen=True)
class ShoutConfig:
    """Each agent, in turn, must reply in capital letters, for ``num_rounds`` rounds."""

    num_agents: int = 2
    num_rounds: int = 2

    def __post_init__(self) -> None:
        if self.num_rounds < 1:
            raise ValueError(f"num_rounds must be >= 1, got {self.num_rounds}")


class ShoutEnv(TextEnvMixin, AECEnv[str, Observation, str]):
    metadata = env_metadata("shout_v0", is_parallelizable=False)

    def __init__(
        self, config: ShoutConfig | None = None, *, render_mode: str | None = None, **overrides: Any
    ) -> None:
        super().__init__()
        self.config = resolve_config(ShoutConfig, config, overrides, owner="ShoutEnv")
        self.possible_agents = numbered_agents(self.config.num_agents)
        self._init_text_env(self.possible_agents, render_mode)
        self.texts: list[tuple[str, str]] = []

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._begin_reset(seed, options, known=frozenset())
        self._start_aec_episode(self.possible_agents)
        self.texts = []
        self.infos = {a: {STOP: [], TURN: 0} for a in self.agents}

    def step(self, action: str | None) -> None:
        begun = self._begin_step(action)
        if begun is None:  # a dead step, already taken
            return
        agent, text = begun
        self.texts.append((agent, text))
        self.rewards[agent] = 1.0 if text.isupper() else 0.0
        if len(self.texts) == self.config.num_agents * self.config.num_rounds:
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = self.possible_agents[len(self.texts) % self.config.num_agents]
        self.infos = {a: {STOP: [], TURN: len(self.texts)} for a in self.agents}
        self._accumulate_rewards()

    def observe(self, agent: str) -> Observation:
        return {"messages": [{"role": "user", "content": "Reply in capital letters."}]}

    def transcript(self) -> str:
        return "\n".join(f"{agent}: {text}" for agent, text in self.texts)

    def record(self) -> EpisodeRecord:
        n = self.config.num_agents
        turns = [
            turn_record(agent, i // n + 1, self.observe(agent)["messages"], text)
            for i, (agent, text) in enumerate(self.texts)
        ]
        return self._episode_record("shout", {"turns": len(self.texts)}, turns)


raw_env, env = aec_factories(ShoutEnv)


def test_the_minimal_environment_conforms():
    check_aec_env(lambda: env(num_agents=3))


def test_the_minimal_environment_plays_and_records():
    game = raw_env(num_rounds=1)
    game.reset(seed=0)
    for text in ("HI", "hi"):
        game.step(text)
    assert game._cumulative_rewards == {"agent_0": 1.0, "agent_1": 0.0}
    assert game.terminations == {"agent_0": True, "agent_1": True}
    record = game.record()
    assert (record["env"], record["title"], record["summary"]) == (
        "shout_v0",
        "shout",
        {"turns": 2},
    )
    assert [(t["agent"], t["round"], t["text"]) for t in record["turns"]] == [
        ("agent_0", 1, "HI"),
        ("agent_1", 1, "hi"),
    ]


# ------------------------------------------------------------ the constructor convention

HINT = Strategy.ANSWER_HINT
ENVS = [
    # env class, config class, required fields, an override, its field and value
    (DebateEnv, DebateConfig, {}, {"num_agents": 2}, "num_agents", 2),
    (ExpertIterationEnv, ExpertIterationConfig, {}, {"strategy": "answer_hint"}, "strategy", HINT),
    (CodeCollabEnv, CodeCollabConfig, {"problems": [F_PROBLEM]}, {"num_turns": 3}, "num_turns", 3),
]


@pytest.mark.parametrize(("env_class", "config_class", "base", "override", "field", "value"), ENVS)
def test_config_keywords_and_both_merge(env_class, config_class, base, override, field, value):
    config = config_class(**base)
    by_keyword = env_class(**base, **override)
    by_config = env_class(config_class(**base, **override))
    merged = env_class(config, **override)
    assert getattr(by_keyword.config, field) == value
    assert by_config.config == by_keyword.config == merged.config
    assert getattr(config, field) != value  # the given config is never changed
    assert env_class(config).config is config


@pytest.mark.parametrize(("env_class", "config_class", "base", "override", "field", "value"), ENVS)
def test_unknown_keyword_is_a_type_error_naming_the_valid_fields(
    env_class, config_class, base, override, field, value
):
    with pytest.raises(TypeError, match=rf"{env_class.__name__}\(\) got unknown keyword") as caught:
        env_class(**base, num_agent=2)
    message = str(caught.value)
    assert "['num_agent']" in message
    for name in (f.name for f in dataclasses.fields(config_class)):
        assert name in message
    assert "render_mode" in message


@pytest.mark.parametrize(("env_class", "config_class", "base", "override", "field", "value"), ENVS)
def test_a_config_of_another_type_is_a_type_error(
    env_class, config_class, base, override, field, value
):
    with pytest.raises(TypeError, match=rf"takes a {config_class.__name__}, got int 3; pass"):
        env_class(3)


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"max_rounds": 0}, ValueError, "max_rounds must be an int >= 1"),  # merged, checked again
        ({"questions": []}, ValueError, "questions must not be empty"),
        ({"num_agents": 1}, ValueError, "num_agents must be an int >= 2"),
    ],
)
def test_a_merged_config_is_validated_again(overrides, error, message):
    with pytest.raises(error, match=message):
        DebateEnv(DebateConfig(num_agents=4), **overrides)


def test_defaults_apply_only_without_a_config():
    config, defaults = DebateConfig(num_agents=4), {"num_agents": 5}
    assert resolve_config(DebateConfig, None, {}, owner="X", defaults=defaults).num_agents == 5
    assert resolve_config(DebateConfig, config, {}, owner="X", defaults=defaults) is config


def test_code_collab_problems_default_to_a_named_data_set_only_without_a_config():
    assert len(CodeCollabEnv().config.problems) == 82  # coophumaneval
    config = CodeCollabConfig(problems=(F_PROBLEM,))
    assert CodeCollabEnv(config, num_turns=3).config.problems == (F_PROBLEM,)
    assert CodeCollabConfig(problems="coophumaneval").problems[0].task_id == "CoopHumanEval/0"


def test_none_means_the_default_problems_and_questions():
    assert DebateEnv(questions=None).config.questions == DebateConfig().questions
    assert ExpertIterationEnv(problems=None).config.problems == ExpertIterationConfig().problems


@dataclass(frozen=True)
class _Settings:
    a: int = 0
    b: str = "b"
    c: float = 0.5


_SETTINGS = st.fixed_dictionaries(
    {}, optional={"a": st.integers(), "b": st.text(), "c": st.floats(allow_nan=False)}
)


@given(base=_SETTINGS, overrides=_SETTINGS)
def test_merging_is_the_overrides_on_top_of_the_config(base, overrides):
    # resolve_config(config, overrides) == Settings(**{**fields(config), **overrides}).
    merged = resolve_config(_Settings, _Settings(**base), overrides, owner="S")
    assert dataclasses.asdict(merged) == {**dataclasses.asdict(_Settings(**base)), **overrides}


# ------------------------------------------------------------------ names and metadata


@given(st.integers(min_value=0, max_value=50))
def test_numbered_agents_are_agent_i(n):
    assert numbered_agents(n) == [f"agent_{i}" for i in range(n)]


@pytest.mark.parametrize(("name", "parallel"), [("debate_v0", False), ("code_collab_v0", True)])
def test_env_metadata(name, parallel):
    assert env_metadata(name, is_parallelizable=parallel) == {
        "name": name,
        "render_modes": ["ansi", "human"],
        "is_parallelizable": parallel,
    }
    assert env_metadata(name, is_parallelizable=parallel)["render_modes"] == list(RENDER_MODES)


def test_every_family_uses_the_shared_metadata():
    assert DebateEnv.metadata == env_metadata("debate_v0", is_parallelizable=False)
    assert ExpertIterationEnv.metadata == env_metadata(
        "expert_iteration_v0", is_parallelizable=False
    )
    assert CodeCollabEnv.metadata == env_metadata("code_collab_v0", is_parallelizable=True)


# ------------------------------------------------------------------ reset bookkeeping


@pytest.mark.parametrize(
    ("make", "agents"),
    [
        (lambda: ShoutEnv(num_agents=3), ["agent_0", "agent_1", "agent_2"]),
        (lambda: DebateEnv(num_agents=2), ["agent_0", "agent_1"]),
        (lambda: ExpertIterationEnv(), ["solver"]),
        (
            lambda: ExpertIterationEnv(strategy="two_turn_feedback", feedback_source="critic"),
            ["solver", "critic"],
        ),
    ],
)
def test_reset_starts_every_agent_live_with_zero_rewards(make, agents):
    game = make()
    game.reset(seed=0)
    assert game.agents == agents
    assert game.agent_selection == agents[0]
    assert game.rewards == game._cumulative_rewards == dict.fromkeys(agents, 0.0)
    assert game.terminations == game.truncations == dict.fromkeys(agents, False)
    assert set(game.infos) == set(agents)


def test_reset_after_an_episode_clears_the_bookkeeping():
    game = ShoutEnv(num_agents=2, num_rounds=1)
    game.reset(seed=0)
    game.step("YES")
    game.step("NO")
    assert game.terminations == {"agent_0": True, "agent_1": True}
    game.reset()
    assert game.agents == ["agent_0", "agent_1"]
    assert game.terminations == {"agent_0": False, "agent_1": False}
    assert game._cumulative_rewards == {"agent_0": 0.0, "agent_1": 0.0}


def test_start_aec_episode_needs_an_agent():
    with pytest.raises(ValueError, match="at least one agent"):
        ShoutEnv()._start_aec_episode([])


# ------------------------------------------------------------------------------ steps


def test_a_step_clears_the_previous_step_rewards():
    game = ShoutEnv(num_agents=2, num_rounds=2)
    game.reset(seed=0)
    game.step("LOUD")  # agent_0: 1.0
    assert game.rewards == {"agent_0": 1.0, "agent_1": 0.0}
    game.step("quiet")  # agent_1: 0.0; agent_0's step reward is cleared
    assert game.rewards == {"agent_0": 0.0, "agent_1": 0.0}
    assert game._cumulative_rewards == {"agent_0": 1.0, "agent_1": 0.0}
    game.step("AGAIN")  # agent_0 acts: its cumulative reward was returned by last()
    assert game._cumulative_rewards == {"agent_0": 1.0, "agent_1": 0.0}


@pytest.mark.parametrize(
    ("prepare", "action", "error", "message"),
    [
        (lambda g: None, "HI", RuntimeError, "step\\(\\) before reset\\(\\)"),
        (lambda g: g.reset(), 5, TypeError, "must be its text \\(a str\\), got int"),
    ],
)
def test_bad_steps_are_clear_errors(prepare, action, error, message):
    game = ShoutEnv()
    prepare(game)
    with pytest.raises(error, match=message):
        game.step(action)


@pytest.mark.parametrize(
    "make",
    [
        lambda: DebateEnv(num_agents=2),
        lambda: ExpertIterationEnv(),
        lambda: CodeCollabEnv(problems=[F_PROBLEM]),
    ],
)
def test_observing_an_unknown_agent_names_the_agents(make):
    game = make()
    game.reset(seed=0)
    with pytest.raises(KeyError, match=r"unknown agent 'nobody'; this environment's agents are"):
        game.observe("nobody")
    with pytest.raises(KeyError, match=r"unknown agent 'nobody'"):
        game.observation_space("nobody")


def test_reset_options_that_are_not_a_dict_are_a_type_error():
    with pytest.raises(TypeError, match=r"DebateEnv.reset\(options=...\) takes a dict of options"):
        DebateEnv().reset(seed=0, options="What is 2 + 2?")  # type: ignore[arg-type]
