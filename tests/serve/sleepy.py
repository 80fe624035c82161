"""A test family whose steps do what their action says: sleep, raise, or spoil the record.

Two agents take turns, ``rounds`` turns each; every action pays its agent 1.
The action ``"sleep"`` blocks its step until :data:`WAKE` is set (at most
:data:`SLEEP_CAP` seconds), as a judged program that sleeps holds a
``code_collab`` step; ``"raise"`` makes the step raise; ``"spoil"`` makes
the episode's ``record()`` raise; ``"whoami"`` appends the client the step
runs as to :data:`CLIENTS`. Any other text is a quick step.

Registered for the tests that use it only (:func:`registered`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

from gymnasium import spaces
from pettingzoo import AECEnv

from llm_envs import registration
from llm_envs.family import EpisodePlan, FamilyBase
from llm_envs.records import EpisodeRecord, episode_record, turn_record
from llm_envs.sandbox.fair import current_client

NAME = "sleepy"
WAKE = threading.Event()
"""Set it to end every sleeping step now (a test's teardown does)."""
SLEEP_CAP = 60.0
"""The longest a ``"sleep"`` step blocks, whatever happens to the test."""
CLIENTS: list[str] = []
"""The clients ``"whoami"`` steps ran as, in order (a sandbox run there would wait as that one)."""


class SleepyEnv(AECEnv):
    """Two agents, ``rounds`` turns each; an action pays its agent 1 (see the module)."""

    metadata: ClassVar[dict[str, Any]] = {"name": "sleepy_v0", "is_parallelizable": False}

    def __init__(self, rounds: int = 1) -> None:
        super().__init__()
        self.rounds = rounds
        self.possible_agents = ["agent_0", "agent_1"]
        self.observation_spaces = {a: spaces.Text(100) for a in self.possible_agents}
        self.action_spaces = {a: spaces.Text(100) for a in self.possible_agents}
        self.closed = threading.Event()

    def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agent_selection = "agent_0"
        self.texts: list[tuple[str, str]] = []
        self.spoilt = False

    def observe(self, agent: str) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": f"turn {len(self.texts)}: say anything"}]}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if action == "sleep":
            WAKE.wait(SLEEP_CAP)
        elif action == "raise":
            raise RuntimeError("the sleepy env was told to raise")
        elif action == "whoami":
            CLIENTS.append(current_client())
        self.spoilt = self.spoilt or action == "spoil"
        self._cumulative_rewards[agent] = 0.0
        self.texts.append((agent, action))
        self.rewards = {a: float(a == agent) for a in self.agents}
        if len(self.texts) == self.rounds * len(self.agents):
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = "agent_1" if agent == "agent_0" else "agent_0"
        self._accumulate_rewards()

    def record(self) -> EpisodeRecord:
        if self.spoilt:
            raise ValueError("the sleepy env's record was spoilt")
        turns = [
            turn_record(agent, 1 + i // 2, [], text) for i, (agent, text) in enumerate(self.texts)
        ]
        return episode_record("sleepy_v0", "a sleepy episode", {}, turns)

    def close(self) -> None:
        self.closed.set()


def env(rounds: int = 1) -> SleepyEnv:
    """A sleepy env."""
    return SleepyEnv(rounds)


class SleepyFamily(FamilyBase):
    """One evaluation episode per problem index; ``rounds`` the only env setting."""

    name: ClassVar[str] = NAME

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        task: str = "default",
        seed: int = 0,
        task_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.env_kwargs = dict(env_kwargs)
        self.agents = ("agent_0", "agent_1")
        self.max_agent_turns = int(self.env_kwargs.get("rounds", 1))

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        return env(**self.env_kwargs), seed, {}

    def training(self, group_indices: Any, seed: int) -> EpisodePlan:
        raise NotImplementedError

    def evaluation(self, group_indices: Any, seed: int) -> EpisodePlan:
        raise NotImplementedError

    def reference_players(self) -> dict[str, Any]:
        return {a: (lambda observation, info: "ok") for a in self.agents}


@contextmanager
def registered() -> Iterator[None]:
    """The sleepy family in the registry while the block runs; its sleepers woken after."""
    WAKE.clear()
    registration.register(NAME, SleepyFamily, aec=env, env_id="tests/Sleepy-v0")
    try:
        yield
    finally:
        WAKE.set()
        registration.unregister(NAME)
