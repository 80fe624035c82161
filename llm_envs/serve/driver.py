"""One episode whose seats are played by separate clients: turn order, rewards, returns.

An :class:`EpisodeDriver` runs an AEC or a parallel environment for seats
that act when they are told to. It says which seats must act now
(:attr:`~EpisodeDriver.pending`): in an AEC env the selected agent
(``agent_selection``), in a parallel env every live agent that has not acted
in the current joint step, which runs once the last of them acts. After each
change it reports, per seat, a :class:`SeatUpdate`: a new turn (observation,
info, and the reward paid since the seat's previous action, PettingZoo's
``last()`` reward) or the end of its episode. Dead steps are the driver's
own; seats marked abandoned are played with ``""`` whenever they must act.

Synchronous and unaware of the network: the caller serialises the calls (the
hub holds one lock per episode) and runs them off its event loop, because a
step can be slow (code runs in a sandbox).

Example:
    >>> from llm_envs.debate import env
    >>> driver = EpisodeDriver(env(num_agents=3, max_rounds=1))
    >>> [u.kind for u in driver.start(seed=0, options=None).values()], driver.pending
    (['turn'], frozenset({'agent_0'}))
    >>> updates = driver.act("agent_0", "no tags", abandoned=frozenset())
    >>> sorted((seat, update.kind) for seat, update in updates.items())
    [('agent_0', 'end'), ('agent_1', 'end'), ('agent_2', 'end')]
    >>> driver.done, driver.returns["agent_0"]  # a broken answer costs -1 and ends the debate
    (True, -1.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pettingzoo import ParallelEnv

__all__ = ["EpisodeDriver", "SeatUpdate"]


@dataclass(frozen=True)
class SeatUpdate:
    """What changed for one seat: it must act (``turn``), or its episode is over (``end``).

    Attributes:
        kind: ``"turn"`` or ``"end"``.
        observation: the environment's observation for the seat.
        info: the environment's info for the seat.
        reward: what the seat was paid since its previous action.
        terminated: (``end``) the episode terminated for the seat.
        truncated: (``end``) the episode was cut short for the seat.
    """

    kind: Literal["turn", "end"]
    observation: Any
    info: Mapping[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False


class EpisodeDriver:
    """The server's side of one episode: who must act, what each seat is told, returns.

    Args:
        env: a fresh AEC or parallel environment (not yet reset).
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.parallel = isinstance(env, ParallelEnv)
        self.agents: tuple[str, ...] = tuple(env.possible_agents)
        self.returns: dict[str, float] = dict.fromkeys(self.agents, 0.0)
        self.pending: frozenset[str] = frozenset()
        self.done = False
        self._unpaid = dict.fromkeys(self.agents, 0.0)  # AEC: paid since the seat last acted
        self._joint: dict[str, str] = {}  # parallel: the actions of this joint step so far

    def start(self, seed: int, options: Mapping[str, Any] | None) -> dict[str, SeatUpdate]:
        """Reset the environment; return each seat's first update."""
        options = dict(options) if options is not None else None
        if not self.parallel:
            self.env.reset(seed=seed, options=options)
            return self._advance(frozenset())
        observations, infos = self.env.reset(seed=seed, options=options)
        updates = {
            agent: SeatUpdate("turn", observations[agent], infos.get(agent, {}))
            for agent in self.env.agents
        }
        for agent in self.agents:
            if agent not in updates:  # out before it ever acts
                updates[agent] = SeatUpdate("end", observations.get(agent), terminated=True)
        self.pending = frozenset(self.env.agents)
        self.done = not self.env.agents
        return updates

    def act(self, seat: str, text: str, abandoned: frozenset[str]) -> dict[str, SeatUpdate]:
        """Take ``seat``'s text; step as far as the seats that are not abandoned allow.

        Args:
            seat: a seat in :attr:`pending`.
            text: its action, verbatim.
            abandoned: seats played with ``""`` whenever they must act.

        Returns:
            The update of every seat whose situation changed.

        Raises:
            ValueError: ``seat`` is not pending (the hub checks first).
        """
        if seat not in self.pending:
            raise ValueError(
                f"{seat!r} must not act now; the pending seats are {sorted(self.pending)}"
            )
        if not self.parallel:
            self.env.step(text)
            self.pending = frozenset()
            return self._advance(abandoned)
        self._joint[seat] = text
        self.pending = self.pending - {seat}
        return self._step_parallel(abandoned)

    def abandon(self, abandoned: frozenset[str]) -> dict[str, SeatUpdate]:
        """Play ``""`` for the abandoned seats that are pending; step as far as that allows."""
        updates: dict[str, SeatUpdate] = {}
        for seat in sorted(self.pending & abandoned):
            if seat in self.pending:  # an AEC step may have moved on already
                updates.update(self.act(seat, "", abandoned))
        return updates

    def owed(self, seat: str) -> float:
        """What ``seat`` was paid that no update of it has told yet (an episode cut short tells it).

        In an AEC env, the rewards paid since the seat's last turn; in a
        parallel env, where each joint step tells its rewards, 0.
        """
        return self._unpaid[seat]

    def record(self) -> Any:
        """The environment's record of the episode (``env.unwrapped.record()``)."""
        return self.env.unwrapped.record()

    # ------------------------------------------------------------------ helpers

    def _pay(self, agent: str, reward: Any) -> None:
        self.returns[agent] += float(reward)
        self._unpaid[agent] += float(reward)

    def _advance(self, abandoned: frozenset[str]) -> dict[str, SeatUpdate]:
        """AEC: dead steps and abandoned seats' turns, up to the next seat that must act."""
        env, updates = self.env, dict[str, SeatUpdate]()
        while env.agents:
            agent = env.agent_selection
            observation, reward, terminated, truncated, info = env.last()
            self._pay(agent, reward)
            if terminated or truncated:
                updates[agent] = SeatUpdate(
                    "end", observation, info, self._unpaid[agent], bool(terminated), bool(truncated)
                )
                self._unpaid[agent] = 0.0
                env.step(None)
                continue
            if agent in abandoned:
                self._unpaid[agent] = 0.0
                env.step("")
                continue
            updates[agent] = SeatUpdate("turn", observation, info, self._unpaid[agent])
            self._unpaid[agent] = 0.0
            self.pending = frozenset({agent})
            return updates
        self.pending = frozenset()
        self.done = True
        return updates

    def _step_parallel(self, abandoned: frozenset[str]) -> dict[str, SeatUpdate]:
        """Parallel: step once every live seat has acted; again while only abandoned seats are."""
        env, updates = self.env, dict[str, SeatUpdate]()
        while env.agents:
            for agent in self.pending & abandoned:
                self._joint[agent] = ""
            self.pending = self.pending - abandoned
            if self.pending:
                return updates
            joint, self._joint = self._joint, {}
            observations, rewards, terminations, truncations, infos = env.step(joint)
            for agent in joint:
                reward = float(rewards.get(agent, 0.0))
                self.returns[agent] += reward
                terminated = bool(terminations.get(agent, True))
                truncated = bool(truncations.get(agent, False))
                observation, info = observations.get(agent), infos.get(agent, {})
                if terminated or truncated or agent not in env.agents:
                    updates[agent] = SeatUpdate(
                        "end", observation, info, reward, terminated, truncated
                    )
                elif agent not in abandoned:
                    updates[agent] = SeatUpdate("turn", observation, info, reward)
            self.pending = frozenset(env.agents)
        self.pending = frozenset()
        self.done = True
        return updates
