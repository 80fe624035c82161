"""One seat of a multi-agent episode, seen as a single-agent environment.

Single-agent engines (OpenEnv, TRL's ``environment_factory``, ``verifiers``)
drive one actor through ``reset`` and ``step``. :class:`SeatView` gives them
one seat of any llm-envs environment, AEC or parallel: the other seats are
played by scripted :class:`~llm_envs.family.Agent` players (a family's
reference players by default, see :func:`family_seat`), the environment keeps
its own turn order and rewards, and the view only stops where its seat must
act. Nothing is parsed here: observations and rewards are the environment's.

The view's reward at a step is everything the environment paid its seat since
the seat's previous action, the others' moves and the episode's settlement
included (the first step's also holds what was paid before the seat's first
turn), so a seat's rewards over an episode add up to its return,
:attr:`SeatView.episode_return`.

Example:
    >>> from llm_envs.debate import env
    >>> from llm_envs.debate.agents import scripted_debaters
    >>> view = SeatView(env(num_agents=3, max_rounds=1), "agent_0", scripted_debaters(3))
    >>> observation, info = view.reset(seed=0)
    >>> _, reward, terminated, truncated, _ = view.step("no tags at all")
    >>> terminated, reward  # a broken answer costs -1
    (True, -1.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pettingzoo import AECEnv, ParallelEnv

from llm_envs.capabilities import ReferencePlayers, require

if TYPE_CHECKING:
    from llm_envs.family import Agent, Family

__all__ = ["SeatView", "chat_messages", "family_seat", "unseen_messages"]


class SeatView:
    """One seat of an AEC or parallel environment; scripted players take the others.

    Args:
        env: the environment (not yet reset).
        seat: the agent this view acts for (one of ``env.possible_agents``).
        others: a player for every other agent that acts in an episode.

    Raises:
        ValueError: a seat the environment does not have, or another seat
            without a player (the message names them).
    """

    def __init__(
        self,
        env: AECEnv[Any, Any, Any] | ParallelEnv[Any, Any, Any],
        seat: str,
        others: Mapping[str, Agent],
    ) -> None:
        agents = list(env.possible_agents)
        if seat not in agents:
            raise ValueError(f"seat {seat!r} is not an agent of this env; it has {agents}")
        missing = [a for a in agents if a != seat and a not in others]
        if missing:
            raise ValueError(
                f"no player for {missing}: give `others` a player for every seat but {seat!r}"
            )
        self.env = env
        self.seat = seat
        self.others = dict(others)
        self._parallel = isinstance(env, ParallelEnv)
        self._observation: Any = None
        self._info: dict[str, Any] = {}
        self._done = True
        self._started = False
        self._terminated = self._truncated = False
        self._unpaid = 0.0  # paid before the seat's first turn: goes into its first step
        self._return = 0.0

    @property
    def done(self) -> bool:
        """Whether the seat's episode is over (``step`` then raises)."""
        return self._done

    @property
    def episode_return(self) -> float:
        """Everything the seat was paid this episode so far (before its first turn included)."""
        return self._return

    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode; play the others until the seat must act.

        Returns:
            The seat's first observation and info. When the episode ends
            before the seat ever acts, the view is :attr:`done` at once.
        """
        self._started = True
        self._return = self._unpaid = 0.0
        opts = dict(options) if options is not None else None
        if self._parallel:
            observations, infos = self.env.reset(seed=seed, options=opts)
            self._observations, self._infos = observations, infos
            self._done = self.seat not in self.env.agents
            self._observation, self._info = observations.get(self.seat), infos.get(self.seat, {})
        else:
            self.env.reset(seed=seed, options=opts)
            self._done = False
            self._unpaid = self._advance_aec()
            self._return = self._unpaid
        return self._observation, dict(self._info)

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Act for the seat; play the others until the seat acts again or its episode ends.

        Returns:
            ``(observation, reward, terminated, truncated, info)`` of the seat,
            Gymnasium's order; ``reward`` is what the seat was paid since its
            previous action.

        Raises:
            RuntimeError: before :meth:`reset`, or after the seat's episode ended.
        """
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the seat's episode is over; call reset() to start another")
        if not isinstance(action, str):
            raise TypeError(f"a seat's action is its text (str), got {type(action).__name__}")
        if self._parallel:
            return self._step_parallel(action)
        self.env.step(action)
        paid = self._advance_aec()
        reward, self._unpaid = self._unpaid + paid, 0.0
        self._return += paid
        return self._observation, reward, self._terminated, self._truncated, dict(self._info)

    def record(self) -> Any:
        """The environment's record of the episode (llm-envs environments keep one)."""
        return self.env.unwrapped.record()

    # ------------------------------------------------------------------ helpers

    def _advance_aec(self) -> float:
        """Play the others (and dead steps) until the seat must act or is out; return its pay.

        The pay is what ``last()`` reports when the seat is next selected:
        PettingZoo's reward accumulated since the seat's previous action.
        """
        env, paid = self.env, 0.0
        self._terminated = self._truncated = False
        while env.agents:
            agent = env.agent_selection
            observation, reward, terminated, truncated, info = env.last()
            if agent == self.seat:
                paid += float(reward)
                self._observation, self._info = observation, info
                if not (terminated or truncated):
                    return paid
                self._terminated, self._truncated = bool(terminated), bool(truncated)
                self._done = True
            env.step(None if terminated or truncated else self.others[agent](observation, info))
        self._done = True
        return paid

    def _step_parallel(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        env = self.env
        joint = {
            agent: action
            if agent == self.seat
            else self.others[agent](self._observations[agent], self._infos.get(agent, {}))
            for agent in env.agents
        }
        observations, rewards, terminations, truncations, infos = env.step(joint)
        self._observations, self._infos = observations, infos
        self._observation = observations.get(self.seat, self._observation)
        self._info = infos.get(self.seat, self._info)
        self._terminated = bool(terminations.get(self.seat, True))
        self._truncated = bool(truncations.get(self.seat, False))
        self._done = self._terminated or self._truncated or self.seat not in env.agents
        reward = float(rewards.get(self.seat, 0.0))
        self._return += reward
        while self._done and env.agents:  # the others play on; the seat's record completes
            joint = {
                agent: self.others[agent](observations[agent], infos.get(agent, {}))
                for agent in env.agents
            }
            observations, _, _, _, infos = env.step(joint)
        return self._observation, reward, self._terminated, self._truncated, dict(self._info)


def family_seat(
    family: Family,
    seat: str,
    *,
    problem: int = 0,
    seed: int = 0,
    others: Mapping[str, Agent] | None = None,
) -> tuple[SeatView, int, dict[str, Any]]:
    """A seat of the family's evaluation episode ``problem``, with its reset seed and options.

    Args:
        family: the family (:func:`~llm_envs.registration.make_family`).
        seat: the agent to act for.
        problem: the evaluation problem (``Family.eval_episode``).
        seed: the seed the family derives the episode's seed from.
        others: players for the other seats; default the family's reference players.

    Returns:
        ``(view, reset_seed, reset_options)``: call ``view.reset(seed=reset_seed,
        options=reset_options)`` to play the problem.

    Raises:
        ValueError: the family has no reference players and ``others`` is None
            (the family's message says why), or a bad seat.
    """
    env, reset_seed, options = family.eval_episode(problem, seed)
    if others is None:
        seated = require(family, ReferencePlayers, by="the other seats", otherwise="pass others")
        others = seated.reference_players()
    return SeatView(env, seat, dict(others)), reset_seed, options


def chat_messages(observation: Any) -> list[dict[str, str]]:
    """An observation's chat as plain ``{"role", "content"}`` dicts (what an engine sends on).

    Raises:
        TypeError: an observation that is not an llm-envs chat, ``{"messages": [...]}``.
    """
    if not isinstance(observation, Mapping) or not isinstance(observation.get("messages"), list):
        raise TypeError(
            "a seat's observation must be an llm-envs chat, {'messages': [...]}, got "
            f"{type(observation).__name__}"
        )
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in observation["messages"]]


def unseen_messages(
    before: list[dict[str, str]], after: list[dict[str, str]]
) -> list[dict[str, str]]:
    """The messages of ``after`` past the longest prefix it shares with ``before``.

    ``before`` is the seat's last observation plus its move: an environment
    whose chat grows (one chat per episode) shares all of it, and one that
    rebuilds its prompt each turn shares the system message; either way what
    is left is what the seat has not seen. Engines that keep one conversation
    per seat (TRL's tools, verifiers) send it as the next turn.

    Example:
        >>> s, u1, a, u2 = ({"role": r, "content": c} for r, c in
        ...                 [("system", "S"), ("user", "1"), ("assistant", "A"), ("user", "2")])
        >>> unseen_messages([s, u1, a], [s, u1, a, u2])  # a growing chat
        [{'role': 'user', 'content': '2'}]
        >>> unseen_messages([s, u1, a], [s, u2])  # a prompt rebuilt each turn
        [{'role': 'user', 'content': '2'}]
    """
    shared = 0
    for old, new in zip(before, after, strict=False):
        if old != new:
            break
        shared += 1
    return after[shared:]
