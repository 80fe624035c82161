"""Playing a family's plans for the checks: who sits where, what each episode paid, how long.

Episodes are played by :func:`baselines.rollouts.rollout`, the trainers' own
rollout, so returns add up as a trainer adds them: each turn's step reward plus
the final reward. Scripted players are :class:`~baselines.samplers.scripted.ScriptedPolicy`
samplers; a model is any :class:`~baselines.samplers.base.Policy`.

:func:`play_loaded` replays episodes all at once, each in a thread of its own,
beside processes that burn every core: what a loaded batch of a trainer
looks like to a judged program's timeouts.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from baselines.check.players import PlayerSet
from baselines.rollouts import EpisodeResult, rollout
from baselines.samplers.base import Policy, SamplingParams
from baselines.samplers.scripted import ScriptedPolicy
from llm_envs.family import EpisodePlan

__all__ = ["Episode", "Play", "Seating", "burning_cores", "play", "play_loaded"]

Seating = Callable[[int, str], str]
"""``seating(episode_index, agent) -> player name``: who plays each seat of each episode."""

_MOST_THREADS = 32


@dataclass(frozen=True)
class Episode:
    """One played episode, as the checks read it.

    Attributes:
        returns: every agent's return (its step rewards plus its final reward).
        measured: the agents whose returns the check counts: the episode's
            trained seats, or the plan's grouped agents.
        players: agent -> the name of the player in its seat.
        group: the plan's group key.
        turns: agent -> its turns' ``(action tokens, reward, info)``, in order.
        final: agent -> ``(final reward, final info)``.
        record: the environment's ``record()`` where it has one, else None.
    """

    returns: dict[str, float]
    measured: tuple[str, ...]
    players: dict[str, str]
    group: Hashable
    turns: dict[str, list[tuple[tuple[int, ...], float, dict[str, Any]]]]
    final: dict[str, tuple[float, dict[str, Any]]]
    record: Any = None

    def fingerprint(self) -> dict[str, Any]:
        """What two plays of the same seeded episode with the same players must share."""
        return {"turns": self.turns, "final": self.final, "record": self.record}


@dataclass
class Play:
    """Episodes played together, and what stepping their environments cost."""

    episodes: list[Episode] = field(default_factory=list)
    steps: int = 0
    env_seconds: float = 0.0
    policy_seconds: float = 0.0

    def __add__(self, other: Play) -> Play:
        return Play(
            self.episodes + other.episodes,
            self.steps + other.steps,
            self.env_seconds + other.env_seconds,
            self.policy_seconds + other.policy_seconds,
        )


def _record(env: Any) -> Any:
    record = getattr(getattr(env, "unwrapped", env), "record", None)
    return record() if callable(record) else None


def _episode(
    result: EpisodeResult, env: Any, measured: Sequence[str], players: dict[str, str], group: Any
) -> Episode:
    turns = {
        agent: [
            (tuple(int(token) for token in t.action), t.reward, dict(t.info))
            for t in trajectory.transitions
        ]
        for agent, trajectory in result.trajectories.items()
    }
    returns = {
        agent: trajectory.step_reward + result.final_rewards[agent]
        for agent, trajectory in result.trajectories.items()
    }
    final = {a: (result.final_rewards[a], dict(result.final_infos[a])) for a in result.trajectories}
    return Episode(returns, tuple(measured), players, group, turns, final, _record(env))


def _measured(plan: EpisodePlan, index: int, agents: Sequence[str]) -> tuple[str, ...]:
    if plan.grouped_agents is not None:
        return tuple(plan.grouped_agents)
    return tuple(a for a in agents if a in plan.trained_agents[index]) or tuple(agents)


def play(
    plan: EpisodePlan,
    sets: Mapping[str, PlayerSet | Policy],
    seating: Seating,
    params: SamplingParams | None = None,
) -> Play:
    """Play every episode of ``plan``, each seat by the player ``seating`` names.

    Args:
        plan: the family's episodes (training or evaluation).
        sets: players by name: a scripted player set, or a model's policy.
        seating: who plays each seat of each episode.
        params: the model's sampling settings (scripted players ignore them).
    """
    policies = {name: p if isinstance(p, Policy) else ScriptedPolicy(p) for name, p in sets.items()}
    chosen: dict[tuple[int, str], str] = {}

    def assign(index: int, agent: str) -> Policy:
        name = chosen.setdefault((index, agent), seating(index, agent))
        return policies[name]

    timings: dict[str, float] = {}
    results = rollout(
        plan.envs, assign, params, seeds=plan.seeds, options=plan.options, timings=timings
    )
    episodes = []
    for i, (result, env) in enumerate(zip(results, plan.envs, strict=True)):
        agents = list(result.trajectories)
        players = {a: chosen.get((i, a), "") for a in agents}
        episodes.append(
            _episode(result, env, _measured(plan, i, agents), players, plan.group_keys[i])
        )
    steps = sum(len(t) for e in episodes for t in e.turns.values())
    return Play(episodes, steps, timings.get("time/env", 0.0), timings.get("time/policy", 0.0))


@contextlib.contextmanager
def burning_cores(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes that keep a core busy each, for as long as the block runs."""
    burners = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    try:
        yield burners
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()


def play_loaded(
    plan: EpisodePlan, sets: Mapping[str, PlayerSet], seating: Seating, burners: int
) -> Play:
    """Play ``plan``'s episodes all at once, a thread each, beside ``burners`` busy processes.

    ``burners`` 0 means one per core. Threads are capped at 32; the episodes
    beyond wait for a free one.
    """
    count = burners or os.cpu_count() or 1

    def one(index: int) -> Play:
        single = EpisodePlan(
            envs=[plan.envs[index]],
            seeds=[plan.seeds[index]],
            options=[plan.options[index]],
            group_keys=[plan.group_keys[index]],
            trained_agents=[plan.trained_agents[index]],
            grouped_agents=plan.grouped_agents,
        )
        return play(single, sets, lambda _, agent: seating(index, agent))

    with burning_cores(count), ThreadPoolExecutor(min(len(plan), _MOST_THREADS)) as pool:
        played = list(pool.map(one, range(len(plan))))
    total = Play()
    for part in played:
        total = total + part
    return total
