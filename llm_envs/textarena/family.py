"""TextArena games as a family (:mod:`llm_envs.family`): what trainers and the evaluator play.

* Training: one self-play episode per group index; the group is that episode
  (its agents' returns are centred against each other), every seat is
  trained, and the reset seed is ``derive_seed(seed, g)``. An agent takes at
  most ``max_turns`` turns (the episode's cap on all actions).
* Evaluation: each group is played once per seat, with the trained policy in
  that seat alone and a fixed opponent in the others (``fixed_opponent``), on
  the same game seed: seat advantages (moving first in Tic Tac Toe) average out.
* The evaluator's problem ``p`` is one game on the seed it is given.
* Reference players: :class:`~llm_envs.textarena.players.MinimaxTicTacToePlayer`
  in every seat of Tic Tac Toe, a Nash equilibrium
  (:func:`~llm_envs.textarena.players.kuhn_player`) in Kuhn Poker; other games have none.
* A warm-start teacher in Kuhn Poker (:meth:`TextArenaFamily.demonstrations`):
  a Nash player that makes mistakes at ``mistake_rate``.
* The meter (:meth:`TextArenaFamily.measure`): Kuhn Poker's exploitability
  (:mod:`llm_envs.textarena.kuhn_meter`), under the payoff the game pays
  (``env_kwargs["payoff"]``: ``game``, TextArena's win or loss, or ``chips``);
  Tic Tac Toe's (:mod:`llm_envs.textarena.tictactoe_meter`).

There is one task, ``default``: the game (``env_kwargs["game"]``) is the task,
and its seeds are the problems.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Unpack

from llm_envs.client_settings import ClientSettings, Number, OneOf, Whole
from llm_envs.family import Agent, EpisodePlan, FamilyBase, RunSettings, Sampler
from llm_envs.seeding import derive_seed
from llm_envs.textarena.config import PAYOFFS
from llm_envs.textarena.env import env, raw_env
from llm_envs.textarena.game import DOCUMENTED_GAMES
from llm_envs.textarena.kuhn import nash_policy
from llm_envs.textarena.players import (
    KuhnPolicyPlayer,
    game_name,
    kuhn_player,
    random_player,
    strong_player,
)

__all__ = ["TextArenaFamily"]

# Seeds the reference players' draws apart from the deal (the rule of Family.scripted_players).
_REFERENCE_SALT = 0x4B55
_TEACHER_SALT = 0x7EAC


class TextArenaFamily(FamilyBase):
    """Any TextArena game: self-play training, seat-by-seat evaluation against a fixed opponent.

    Args:
        env_kwargs: :class:`~llm_envs.textarena.TextArenaEnv` arguments
            (``game``, ``num_players``, ``game_kwargs``, ``max_turns``);
            checked here, so a bad one fails before a model is loaded.
        task: ``"default"`` (the only task: the game is the task).
        seed: the run's seed (unused: the plans' seeds come from the seeds
            their callers pass).
        task_kwargs: must be empty: a game's settings go in ``env_kwargs``.

    Raises:
        ValueError: another task, task_kwargs, or arguments the environment refuses.

    Example:
        >>> family = TextArenaFamily({"game": "TicTacToe-v0"}, task="default", seed=0)
        >>> plan = family.evaluation([0], seed=1)
        >>> plan.group_keys, [sorted(seats) for seats in plan.trained_agents]
        ([0, 0], [['agent_0'], ['agent_1']])
    """

    name: ClassVar[str] = "textarena"
    tasks: ClassVar[tuple[str, ...]] = ("default",)
    headline_metrics: ClassVar[tuple[str, ...]] = ("win", "draw", "loss", "invalid_moves")
    fixed_opponent: ClassVar[bool] = True
    # Kuhn Poker's teacher (a Nash player) takes mistake_rate; other games have none and say so.
    teacher_options: ClassVar[tuple[str, ...] | None] = ("mistake_rate",)
    # TextArena's set_winner / set_draw pay +1, -1 and 0 (the games the docs name);
    # a game that pays otherwise shows as a failed range in `llm-envs check`.
    reward_range: tuple[float, float] | None = (-1.0, 1.0)
    # The documented games only: TextArena registers hundreds, some of which call a model
    # over the network. game_kwargs (any keyword of textarena.make) stay the server's.
    client_settings: ClassVar[ClientSettings] = ClientSettings(
        env_kwargs={
            "game": OneOf(DOCUMENTED_GAMES),
            "num_players": Whole(1, 4),
            "max_turns": Whole(1, 400),
            "payoff": OneOf(PAYOFFS),
            "invalid_move_penalty": Number(0.0, 1.0),
        }
    )

    def __init__(self, env_kwargs: Mapping[str, Any], **run: Unpack[RunSettings]) -> None:
        super().__init__(env_kwargs, **run)
        if self.task not in self.tasks:
            raise ValueError(
                f"--env textarena takes --task default (the game is the task), got {self.task!r}; "
                'choose the game with --env-kwargs \'{"game": "KuhnPoker-v0"}\''
            )
        if self.task_kwargs:
            raise ValueError(
                f"--env textarena takes no task_kwargs, got {self.task_kwargs}; pass the "
                "game's settings in env_kwargs: game, num_players, game_kwargs, max_turns"
            )
        probe = raw_env(**self.env_kwargs)  # a bad argument fails here, before a model is loaded
        self.agents = tuple(probe.possible_agents)
        self.game: str = probe.config.game
        self.max_agent_turns = probe.config.max_turns  # a bound: the cap on every agent's actions
        self.kuhn = game_name(self.game) == "KuhnPoker"
        most = probe.kuhn_rules().max_payoff if probe.config.payoff == "chips" else 1.0
        # Each of an agent's turns may be an invalid move that costs the penalty.
        penalties = probe.config.invalid_move_penalty * self.max_agent_turns
        self.reward_range = (-most - penalties, most)

    def _plan(self, keys: list[int], seeds: list[int], seats: list[frozenset[str]]) -> EpisodePlan:
        return EpisodePlan(
            envs=[env(**self.env_kwargs) for _ in keys],
            seeds=seeds,
            options=[{} for _ in keys],
            group_keys=list(keys),
            trained_agents=seats,
            titles=[self.game] * len(keys),
        )

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """One self-play game per group index, every seat trained."""
        keys = [int(g) for g in group_indices]
        everyone = frozenset(self.agents)
        return self._plan(keys, [derive_seed(seed, g) for g in keys], [everyone] * len(keys))

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """Each group's game once per seat, the trained policy in that seat alone."""
        keys: list[int] = []
        seeds: list[int] = []
        seats: list[frozenset[str]] = []
        for g in map(int, group_indices):
            for agent in self.agents:
                keys.append(g)
                seeds.append(derive_seed(seed, g))  # the same game for every seat
                seats.append(frozenset({agent}))
        return self._plan(keys, seeds, seats)

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        """A fresh game, reset with ``seed`` (the evaluator derives it from the problem)."""
        return env(**self.env_kwargs), seed, {}

    def demonstrations(
        self, group_indices: Sequence[int], seed: int, mistake_rate: float = 0.25
    ) -> tuple[EpisodePlan, dict[str, Agent]]:
        """Kuhn Poker: training games and a teacher per seat, for a warm start in the format.

        The teacher is a Nash equilibrium (alpha 1/6) that, with probability
        ``mistake_rate``, plays a move of the uniform policy instead: it bets
        or calls with ``(1 - m) nash + m / 2`` at each information set, so its
        games hold every move a model must learn to write.

        Raises:
            ValueError: another game (it has no teacher), or ``mistake_rate``
                outside [0, 1].
        """
        if not self.kuhn:
            raise ValueError(
                f"--env textarena has a warm-start teacher for Kuhn Poker only, and the game is "
                f"{self.game!r}; use --warm-start-steps 0"
            )
        if not 0 <= mistake_rate <= 1:
            raise ValueError(f"mistake_rate must be in [0, 1], got {mistake_rate}")
        nash = nash_policy(1 / 6)
        bets = {name: (1 - mistake_rate) * m.bet + mistake_rate / 2 for name, m in nash.items()}
        teachers: dict[str, Agent] = {
            agent: KuhnPolicyPlayer(bets, derive_seed(seed, _TEACHER_SALT, i))
            for i, agent in enumerate(self.agents)
        }
        return self.training(group_indices, seed), teachers

    def default_seating(self, num_models: int) -> str:
        """``rotations`` for several models (each plays every seat), ``self`` for one."""
        return "rotations" if num_models > 1 else "self"

    def reference_players(self) -> dict[str, Agent]:
        """The minimax player in every seat of Tic Tac Toe, a Nash equilibrium in Kuhn Poker's.

        Raises:
            ValueError: another game (it has no strong scripted player).
        """
        if game_name(self.game) not in ("TicTacToe", "KuhnPoker"):
            raise ValueError(
                f"--env textarena has reference players for TicTacToe and KuhnPoker only, and "
                f"the game is {self.game!r}: name a model for every seat, or pass --env-kwargs "
                '\'{"game": "TicTacToe-v0"}\''
            )
        return {
            agent: strong_player(self.game, derive_seed(self.seed, _REFERENCE_SALT, i))
            for i, agent in enumerate(self.agents)
        }

    def scripted_players(self, seed: int) -> dict[str, dict[str, Agent]]:
        """``random`` where the game has one, ``reference`` (TicTacToe, Kuhn Poker), ``always_bet``.

        ``random`` plays random legal moves; ``reference`` is the game's strong
        player; ``always_bet`` (Kuhn Poker) bets or calls, always.

        Example:
            >>> sets = TextArenaFamily({"game": "TicTacToe-v0"}).scripted_players(seed=0)
            >>> sorted(sets), sorted(sets["random"])
            (['random', 'reference'], ['agent_0', 'agent_1'])
        """
        sets = super().scripted_players(seed)
        with contextlib.suppress(ValueError):  # a game without a random player has none
            sets["random"] = {
                agent: random_player(self.game, derive_seed(seed, i))
                for i, agent in enumerate(self.agents)
            }
        if self.kuhn:
            sets["always_bet"] = {agent: kuhn_player("always_bet") for agent in self.agents}
        return sets

    def measure(self, sample: Sampler, *, samples: int, seed: int) -> dict[str, float]:
        """The exploitability of the policy ``sample`` plays by in Kuhn Poker or Tic Tac Toe.

        Returns:
            Kuhn Poker: ``exploitability`` under the game's payoff with its interval
            (``exploitability_low``, ``exploitability_high``), the same under
            Kuhn Poker's chips (``exploitability_chips...``: one round, the
            uniform policy's 11/24) and the share of invalid texts
            (``exploitability_invalid``): see :mod:`llm_envs.textarena.kuhn_meter`.
            Tic Tac Toe: ``exploitability`` with its interval, the share of
            invalid texts and the positions asked (``exploitability_positions``),
            or ``{}`` with a warning past the meter's bound on positions: see
            :mod:`llm_envs.textarena.tictactoe_meter`. Other games: ``{}``.
        """
        if samples <= 0:
            return {}
        if game_name(self.game) == "TicTacToe":
            from llm_envs.textarena import tictactoe_meter

            found = tictactoe_meter.measure(sample, self.env_kwargs, samples=samples, seed=seed)
            if found.reason:
                warnings.warn(f"no Tic Tac Toe exploitability: {found.reason}", stacklevel=2)
            return found.metrics()
        if not self.kuhn:
            return {}
        from llm_envs.textarena.kuhn_meter import measure

        return measure(sample, self.env_kwargs, samples=samples, seed=seed).metrics()
