"""A cooperative game ``baselines`` has never heard of: two agents, one team reward, parallel turns.

*Match lengths*: each turn both agents write a word at once, and the team is
paid ``-|len(word_0) - len(word_1)| / 10`` (0 when the lengths match), every
agent the same. Then each agent is told its partner's length and both try
again, for ``num_turns`` turns. The env declares its horizon as
``config.num_turns``, as MAGRPO's trees read it.

Its family, :class:`TeamGameFamily`, exists only inside the tests that register
it (:data:`ENTRIES`, registered with :func:`llm_envs.registration.register`):
``baselines`` must take it by its registered name alone, as a user's new
family. :class:`TeamGameAECFamily` plays the same game as an AEC env (agents
take turns), which MAGRPO must refuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from llm_envs.contract import Message
from llm_envs.family import EpisodePlan, FamilyBase
from llm_envs.records import EpisodeRecord, episode_record, turn_record
from llm_envs.registration import EnvEntry
from llm_envs.seeding import derive_seed, ordered

AGENTS = ("agent_0", "agent_1")
TOPICS = ("apples", "rivers", "music", "winter")
"""The training topics."""
EVAL_TOPICS = ("stars", "bread")
"""The evaluation topics: held out from training by construction."""


@dataclass(frozen=True)
class TeamGameConfig:
    """The game's settings.

    Attributes:
        num_turns: turns of an episode (its horizon).
    """

    num_turns: int = 2


class TeamGameEnv(ParallelEnv):
    """Match lengths (see the module docstring) as a PettingZoo ``ParallelEnv``."""

    metadata: ClassVar[dict[str, Any]] = {"name": "team_game_v0", "is_parallelizable": True}

    def __init__(self, num_turns: int = 2, render_mode: str | None = None) -> None:
        if isinstance(num_turns, bool) or not isinstance(num_turns, int) or num_turns < 1:
            raise ValueError(f"num_turns must be an int >= 1, got {num_turns!r}")
        self.config = TeamGameConfig(num_turns)
        self.render_mode = render_mode
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.topic = TOPICS[0]
        self.turn = 0
        self.chats: dict[str, list[Message]] = {}
        self.history: list[tuple[dict[str, str], float]] = []

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Pose ``options["topic"]`` and clear the state."""
        self.topic = str((options or {}).get("topic", TOPICS[0]))
        self.turn = 0
        self.history = []
        self.agents = list(self.possible_agents)
        prompt = (
            f"Write one word about {self.topic}. Your partner writes one at the same time; "
            "your team scores when the two words are equally long."
        )
        self.chats = {a: [{"role": "user", "content": prompt}] for a in self.agents}
        return self._observations(), {a: self._context() for a in self.agents}

    def step(self, actions: Mapping[str, str]) -> tuple[dict[str, Any], ...]:
        """Both words at once: the team's reward, then each agent hears its partner's length."""
        words = {a: str(actions[a]) for a in self.agents}
        gap = abs(len(words[AGENTS[0]]) - len(words[AGENTS[1]]))
        reward = -gap / 10
        self.turn += 1
        done = self.turn >= self.config.num_turns
        for agent, partner in zip(AGENTS, reversed(AGENTS), strict=True):
            self.chats[agent] = [*self.chats[agent], {"role": "assistant", "content": words[agent]}]
            if not done:
                told = f"Your partner wrote {len(words[partner])} characters. Again."
                self.chats[agent] = [*self.chats[agent], {"role": "user", "content": told}]
        self.history.append((words, reward))
        acting = list(self.agents)
        infos = {a: {**self._context(), "length_gap": gap} for a in acting}
        observations = self._observations()
        if done:
            self.agents = []
        return (
            observations,
            dict.fromkeys(acting, reward),
            dict.fromkeys(acting, False),
            dict.fromkeys(acting, done),
            infos,
        )

    def _observations(self) -> dict[str, Any]:
        return {
            a: {"messages": [dict(m) for m in self.chats[a]]} for a in AGENTS if a in self.chats
        }

    def _context(self) -> dict[str, Any]:
        return {"stop": [], "turn": self.turn}

    def record(self) -> EpisodeRecord:
        """The episode: each agent's word per turn, with the team's reward."""
        turns = [
            turn_record(agent, t + 1, self.chats[agent][: 2 * t + 1], words[agent], {"reward": r})
            for t, (words, r) in enumerate(self.history)
            for agent in AGENTS
        ]
        total = sum(r for _, r in self.history)
        summary = {"rewards": dict.fromkeys(AGENTS, total), "turns": len(self.history)}
        return episode_record(self.metadata["name"], f"match lengths: {self.topic}", summary, turns)

    def close(self) -> None:
        """Nothing to release."""


def parallel_env(**kwargs: Any) -> TeamGameEnv:
    """The game's factory (its registry entry point)."""
    return TeamGameEnv(**kwargs)


class TeamGameFamily(FamilyBase):
    """Match lengths as a family: a group per topic, one episode each, every seat trained."""

    name: ClassVar[str] = "team_game"
    team_reward: ClassVar[bool] = True
    headline_metrics: ClassVar[tuple[str, ...]] = ("length_gap",)

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        task: str = "default",
        seed: int = 0,
        task_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.env_kwargs = dict(env_kwargs)
        self.agents = tuple(parallel_env(**self.env_kwargs).possible_agents)  # checks env_kwargs
        self.seed = seed
        self.num_eval_problems = len(EVAL_TOPICS)

    def _env(self) -> Any:
        return parallel_env(**self.env_kwargs)

    def _plan(self, topics: Sequence[str], seeds: list[int], keys: list[int]) -> EpisodePlan:
        return EpisodePlan(
            envs=[self._env() for _ in topics],
            seeds=seeds,
            options=[{"topic": t} for t in topics],
            group_keys=list(keys),
            trained_agents=[frozenset(self.agents)] * len(topics),
        )

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """One episode per group: a training topic in a seeded order."""
        topics = [ordered(TOPICS, g, self.seed) for g in group_indices]
        return self._plan(
            topics, [derive_seed(seed, g) for g in group_indices], list(group_indices)
        )

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """One episode per evaluation topic."""
        topics = [EVAL_TOPICS[g % len(EVAL_TOPICS)] for g in group_indices]
        return self._plan(
            topics, [derive_seed(seed, g) for g in group_indices], list(group_indices)
        )

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        """Evaluation topic ``problem``."""
        return self._env(), seed, {"topic": EVAL_TOPICS[problem % len(EVAL_TOPICS)]}


class TeamGameAECFamily(TeamGameFamily):
    """The same game played as an AEC env: one agent at a time."""

    name: ClassVar[str] = "team_game_aec"

    def _env(self) -> Any:
        return parallel_to_aec(parallel_env(**self.env_kwargs))


ENTRIES = (
    EnvEntry(
        "parallel",
        "tests/TeamGame-v0",
        "tests.baselines.magrpo.team_game:parallel_env",
        "team_game",
        "tests.baselines.magrpo.team_game:TeamGameFamily",
    ),
    EnvEntry(
        "parallel",
        "tests/TeamGameAEC-v0",
        "tests.baselines.magrpo.team_game:parallel_env",
        "team_game_aec",
        "tests.baselines.magrpo.team_game:TeamGameAECFamily",
    ),
)
"""The registry entries the tests register (and take out again)."""
