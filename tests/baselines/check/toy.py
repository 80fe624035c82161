"""A toy family for the check's tests, broken on demand: ``env_kwargs={"broken": WHAT}``.

Each agent, in turn, says one word; ``yes`` pays 1, anything else 0. The
family trains groups of ``num_generations`` episodes and evaluates each seat
against the reference players (who say ``yes``). ``broken`` makes it fail one
check:

========================  ==============================================================
``broken``                what goes wrong
========================  ==============================================================
``constant``              every answer pays 0.5: no group's rewards vary
``nondeterministic``      an info holds an unseeded random number
``out_of_range``          ``yes`` pays 2, the family declares [0, 1]
``slow``                  a step sleeps 20 ms
``load``                  ``yes`` pays 1 only in the main thread (a verdict that load changes)
``judge``                 every answer reports a judge that disagrees and favours the lower seat
``bad_observation``       an observation is a string, not a chat
``reference_zero``        the reference players say ``no``
``no_reference``          the family has no reference players
``crash``                 the family's training plan raises
========================  ==============================================================
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pettingzoo import AECEnv

from llm_envs.contract import STOP, TURN, Observation
from llm_envs.factories import aec_factories
from llm_envs.family import Agent, EpisodePlan, FamilyBase
from llm_envs.records import EpisodeRecord, turn_record
from llm_envs.seeding import derive_seed
from llm_envs.text_env import TextEnvMixin, env_metadata, numbered_agents, resolve_config

NAME = "say_check"
ENV_ID = "llm_envs_tests/SayCheck-v0"
BROKEN = (
    "constant",
    "nondeterministic",
    "out_of_range",
    "slow",
    "load",
    "judge",
    "bad_observation",
    "reference_zero",
    "no_reference",
    "crash",
)
_NOISE = random.Random()  # unseeded on purpose: the nondeterministic env's source


@dataclass(frozen=True)
class SayConfig:
    """Each agent says one word; ``broken`` names the fault (module docstring)."""

    num_agents: int = 2
    broken: str = ""

    def __post_init__(self) -> None:
        if self.broken not in ("", *BROKEN):
            raise ValueError(f"broken must be one of {BROKEN} or '', got {self.broken!r}")


class SayEnv(TextEnvMixin, AECEnv[str, Observation, str]):
    metadata = env_metadata("say_check_v0", is_parallelizable=False)

    def __init__(
        self, config: SayConfig | None = None, *, render_mode: str | None = None, **overrides: Any
    ) -> None:
        super().__init__()
        self.config = resolve_config(SayConfig, config, overrides, owner="SayEnv")
        self.possible_agents = numbered_agents(self.config.num_agents)
        self._init_text_env(self.possible_agents, render_mode)
        self.texts: list[tuple[str, str]] = []

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._begin_reset(seed, options, known=frozenset())
        self._start_aec_episode(self.possible_agents)
        self.texts = []
        self.infos = {a: {STOP: [], TURN: 0} for a in self.agents}

    def _reward(self, text: str) -> float:
        broken = self.config.broken
        said_yes = text.strip().lower() == "yes"
        if broken == "constant":
            return 0.5
        if broken == "out_of_range":
            return 2.0 if said_yes else 0.0
        if broken == "load":
            return float(said_yes and threading.current_thread() is threading.main_thread())
        return float(said_yes)

    def step(self, action: str | None) -> None:
        begun = self._begin_step(action)
        if begun is None:
            return
        agent, text = begun
        if self.config.broken == "slow":
            time.sleep(0.02)
        self.texts.append((agent, text))
        self.rewards[agent] = self._reward(text)
        if len(self.texts) == self.config.num_agents:
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = self.possible_agents[len(self.texts) % self.config.num_agents]
        info: dict[str, Any] = {STOP: [], TURN: len(self.texts)}
        if self.config.broken == "nondeterministic":
            info["noise"] = _NOISE.random()
        if self.config.broken == "judge":
            info.update(voted=1.0, vote_agreement=0.2, vote_lower_seat=1.0)
        self.infos = {a: dict(info) for a in self.agents}
        self._accumulate_rewards()

    def observe(self, agent: str) -> Observation:
        if self.config.broken == "bad_observation":
            return "Say yes."  # type: ignore[return-value]
        return {"messages": [{"role": "user", "content": "Say yes."}]}

    def transcript(self) -> str:
        return "\n".join(f"{agent}: {text}" for agent, text in self.texts)

    def record(self) -> EpisodeRecord:
        turns = [
            turn_record(agent, 1, [{"role": "user", "content": "Say yes."}], text)
            for agent, text in self.texts
        ]
        return self._episode_record("say", {"turns": len(self.texts)}, turns)


raw_env, env = aec_factories(SayEnv)


def say(word: str) -> Agent:
    """A player that always says ``word``."""
    return lambda observation, info: word


class SayFamily(FamilyBase):
    """The toy family: groups of ``num_generations`` episodes; each seat evaluated alone."""

    name: ClassVar[str] = NAME
    run_options: ClassVar[tuple[str, ...]] = ("num_generations",)

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        task: str = "default",
        seed: int = 0,
        task_kwargs: Mapping[str, Any] | None = None,
        num_generations: int = 4,
    ) -> None:
        self.env_kwargs = dict(env_kwargs)
        probe = env(**self.env_kwargs)
        self.agents = tuple(probe.possible_agents)
        self.broken = probe.unwrapped.config.broken
        self.num_generations = num_generations
        self.reward_range = (0.0, 1.0)

    def _plan(self, keys: list[int], seeds: list[int], seats: list[frozenset[str]]) -> EpisodePlan:
        return EpisodePlan(
            envs=[env(**self.env_kwargs) for _ in keys],
            seeds=seeds,
            options=[{} for _ in keys],
            group_keys=keys,
            trained_agents=seats,
        )

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        if self.broken == "crash":
            raise RuntimeError("the toy family's training plan is broken")
        keys = [g for g in group_indices for _ in range(self.num_generations)]
        seeds = [
            derive_seed(seed, g, k) for g in group_indices for k in range(self.num_generations)
        ]
        return self._plan(keys, seeds, [frozenset(self.agents)] * len(keys))

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        keys = [g for g in group_indices for _ in self.agents]
        seats = [frozenset({a}) for _ in group_indices for a in self.agents]
        return self._plan(keys, [derive_seed(seed, g) for g in keys], seats)

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        return env(**self.env_kwargs), seed, {}

    def reference_players(self) -> dict[str, Agent]:
        if self.broken == "no_reference":
            raise ValueError("the toy family has no reference players (broken='no_reference')")
        word = "no" if self.broken == "reference_zero" else "yes"
        return {agent: say(word) for agent in self.agents}
