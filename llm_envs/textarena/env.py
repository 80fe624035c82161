"""Any TextArena game as a PettingZoo AEC environment: language models play it in text.

`TextArena <https://github.com/LeonGuertler/TextArena>`_ is a collection of
text games (board games, card games, negotiations, word games...) with a
gym-like interface of its own. :class:`TextArenaEnv` plays any of its
registered ids (``TextArenaConfig.game``) under the llm-envs contract.

Agents
    ``"agent_0" ... "agent_{N-1}"``; ``agent_i`` is TextArena's player ``i``
    ("Player i" in the game's text). All agents stay in the episode until it ends.

Turn order
    The game's: after every step, ``agent_selection`` is the game's current
    player. After an invalid move the same agent usually acts again (the
    game's retry).

Observation
    ``{"messages": [...]}``: the agent's conversation with the game. A user
    message holds what the game sent this agent since its last move, oldest
    first, one per line as ``[GAME] ...`` or ``[Player k] ...`` (the format of
    TextArena's ``LLMObservationWrapper``): the rules prompt, boards, the
    moves it may see, its private cards, warnings about its invalid moves; an
    assistant message holds each of its own moves. So each observation extends
    the agent's previous one by its move and what followed (a trainer can
    train a whole game as one growing sequence). An agent sees only what the
    game sends it (Kuhn Poker's cards stay private). The text is rebuilt from
    the episode, so it is the same for the same seed and actions. The
    observation wrapper an id registers is not used: one format for every game.

Action
    The agent's raw text; any string is accepted. It passes through the
    *action* wrappers the id registers (``"TicTacToe-v0"`` brackets a bare
    move: ``4`` -> ``[4]``; a ``-raw`` id sends it verbatim) and goes to the
    game. A move the game refuses is an *invalid move*, handled by TextArena's
    own rules: in two-player games a first invalid move earns a warning and a
    retry, a second one in a row loses the game (reward -1, the opponent +1).
    Never an exception.

Reward
    0 during the game. When the game ends, every agent gets the game's own
    reward (win +1, draw 0, loss -1 in most games) on that final step, so it
    reaches each agent at its final ``last()``, before its dead step. A game
    cut off at ``max_turns`` gives every agent 0. With ``payoff="chips"``
    (Kuhn Poker) the final reward is instead the chips the agent won as Kuhn
    Poker counts them (:class:`~llm_envs.textarena.kuhn.ChipLedger`: a bet
    and a call cost a chip, which TextArena's own count leaves out); the
    game's text is TextArena's either way.

Termination
    The game over (``terminations``), or ``max_turns`` actions taken without
    an end (``truncations``).

Infos
    Context (for the upcoming turn): ``stop`` (``[]``: the games have no stop
    strings), ``turn`` (actions taken in the episode so far: the 0-based index
    of the acting agent's upcoming turn). Outcome (of the agent's previous
    action): ``invalid_move`` (``True`` when the game refused it). At the end,
    for every agent: ``win``, ``draw``, ``loss`` (``1.0`` or ``0.0``: a *win*
    is the highest reward when not all rewards are equal, a *draw* all rewards
    equal, a *loss* a reward below the highest; all ``0.0`` for a game cut
    off), ``invalid_moves`` (the agent's count in the episode) and
    ``game_reward``.

Randomness
    ``reset(seed=s)`` draws the *game seed* from ``s`` and builds a fresh game
    (``textarena.make``) reset with it, so an episode depends on ``s`` alone
    (never on earlier episodes). TextArena games draw from Python's global
    ``random`` (and a few from ``np.random``); every call into the game runs
    with the game's private state of those generators swapped in
    (:class:`~llm_envs.textarena.game.PrivateRandom`), so environments stepped
    in turn never share a stream and the caller's random state is left as it was.

Arguments:
    Give a :class:`~llm_envs.textarena.config.TextArenaConfig`, its fields as
    keywords, or both (the keywords replace those fields of the config), and
    ``render_mode``. An unknown game id, or a game that refuses
    ``num_players`` or ``game_kwargs``, raises at construction.

Version history
    v0: initial release.
"""

from __future__ import annotations

import copy
import json
import numbers
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from pettingzoo import AECEnv

from llm_envs.contract import STOP, TURN, Message, Observation
from llm_envs.factories import aec_factories
from llm_envs.records import EpisodeRecord, turn_record
from llm_envs.spaces import SAMPLE_FRAGMENTS
from llm_envs.text_env import TextEnvMixin, env_metadata, numbered_agents, resolve_config
from llm_envs.textarena.bounded import game_text, harden
from llm_envs.textarena.config import TextArenaConfig
from llm_envs.textarena.game import PrivateRandom, check_game, textarena
from llm_envs.textarena.kuhn import CARDS, ChipLedger, KuhnRules
from llm_envs.textarena.players import game_name

__all__ = [
    "INVALID_MOVE",
    "METRICS",
    "MOVE_FRAGMENTS",
    "Outcome",
    "TextArenaConfig",
    "TextArenaEnv",
    "env",
    "outcomes",
    "raw_env",
]

INVALID_MOVE = "invalid_move"
"""Info key (outcome): whether the game refused the agent's previous action."""

METRICS: tuple[str, ...] = ("win", "draw", "loss", "invalid_moves", "game_reward")
"""Info keys every agent gets when the episode ends (numbers)."""

Outcome = Literal["win", "draw", "loss", "cut off", "running"]

MOVE_FRAGMENTS: tuple[str, ...] = (
    *(f"[{cell}]" for cell in range(9)),
    "[check]",
    "[bet]",
    "[call]",
    "[fold]",
    "[Accept]",
    "[Deny]",
    "[Offer: 1 Wheat -> 1 Wood]",
    "[Cooperate]",
    "[Defect]",
    "[",
    "]",
)
"""Moves of the tested games, mixed into the random text of the action space's ``sample()``
(before the generic fragments), so that random actions play games rather than only break them."""

_GAME_ID = -1  # TextArena's sender id of the game's own messages (textarena.GAME_ID)
_KUHN_MOVE = re.compile(r"Player (\d+), submitted move: '\[(check|bet|call|fold)\]'")
_SEED_BOUND = 2**31 - 1


@dataclass(frozen=True)
class _Turn:
    agent: str
    text: str
    prompt: tuple[Message, ...]
    invalid: bool


def _unwrapped(game: Any) -> Any:
    # The game under TextArena's wrappers (they forward attributes, but not all methods).
    wrapper = textarena().Wrapper
    while isinstance(game, wrapper):
        game = game.env
    return game


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))


def outcomes(rewards: dict[str, float]) -> dict[str, Outcome]:
    """Each agent's outcome of a finished game from its rewards.

    A *win* is the highest reward when not all rewards are equal, a *draw* all
    rewards equal, a *loss* a reward below the highest.

    Example:
        >>> outcomes({"agent_0": 1.0, "agent_1": -1.0})
        {'agent_0': 'win', 'agent_1': 'loss'}
        >>> outcomes({"agent_0": 0.0, "agent_1": 0.0})
        {'agent_0': 'draw', 'agent_1': 'draw'}
    """
    if not rewards:
        return {}
    best, worst = max(rewards.values()), min(rewards.values())
    return {
        agent: "draw" if best == worst else "win" if reward == best else "loss"
        for agent, reward in rewards.items()
    }


class TextArenaEnv(TextEnvMixin, AECEnv[str, Observation, str]):
    """A TextArena game under the llm-envs contract; see the module docstring.

    Args:
        config: a :class:`~llm_envs.textarena.config.TextArenaConfig`; None
            builds one from ``overrides``.
        render_mode: ``"ansi"`` (``render()`` returns the transcript) or
            ``"human"`` (prints it), or ``None``.
        **overrides: :class:`~llm_envs.textarena.config.TextArenaConfig`
            fields (``game="KuhnPoker-v0"``...), applied on top of ``config``.

    Raises:
        ValueError: an id TextArena does not register (the message lists
            close ids), or a game that cannot be built and reset with
            ``num_players`` and ``game_kwargs`` (the message holds TextArena's error).

    Attributes:
        game: the TextArena environment of the current episode (with its
            wrappers); read it, never step it.
        game_seed: the seed the current game was reset with.

    Example:
        >>> env = TextArenaEnv(game="TicTacToe-v0")
        >>> env.reset(seed=0)
        >>> env.agent_selection
        'agent_0'
        >>> env.observe("agent_0")["messages"][0]["content"].splitlines()[0]
        '[GAME] You are Player 0 in Tic Tac Toe.'
        >>> env.step("[4]")
        >>> env.agent_selection, env.infos["agent_0"]["invalid_move"]
        ('agent_1', False)
    """

    metadata = env_metadata("textarena_v0", is_parallelizable=False)
    sample_fragments: ClassVar[tuple[str, ...]] = (*MOVE_FRAGMENTS, *SAMPLE_FRAGMENTS)

    def __init__(
        self,
        config: TextArenaConfig | None = None,
        *,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__()
        self.config = resolve_config(TextArenaConfig, config, overrides, owner="TextArenaEnv")
        self.possible_agents = numbered_agents(self.config.num_players)
        self._index = {agent: i for i, agent in enumerate(self.possible_agents)}
        self._init_text_env(self.possible_agents, render_mode)
        check_game(self.config.game)
        self._kuhn = game_name(self.config.game) == "KuhnPoker"
        if self.config.payoff == "chips" and not self._kuhn:
            raise ValueError(
                f"payoff='chips' is Kuhn Poker's, and the game is {self.config.game!r}; "
                "use payoff='game' (the game's own reward) or game='KuhnPoker-v0'"
            )
        self.game: Any = None
        self.game_seed = 0
        self._base: Any = None
        self._random = PrivateRandom(0)
        self._build_game()  # a game refusing num_players or game_kwargs fails here
        built: Any = self._base
        # What the game's rules say about rounds and retries (Kuhn Poker's meter needs them).
        self._rounds = int(getattr(built, "max_rounds", 1))
        self._error_allowance = int(getattr(built.state, "error_allowance", 1) or 0)
        self._chips: ChipLedger | None = None
        self.game = self._base = None
        self.turns: list[_Turn] = []
        self._lines: dict[str, list[str]] = {a: [] for a in self.possible_agents}
        # Per agent, each of its moves: (how many lines it had seen, the move's text).
        self._moves: dict[str, list[tuple[int, str]]] = {a: [] for a in self.possible_agents}
        self._observations: dict[str, tuple[tuple[int, int], list[Message]]] = {}
        self._invalid = dict.fromkeys(self.possible_agents, 0)
        self._game_rewards: dict[str, float] | None = None
        self._outcome: dict[str, Outcome] = dict.fromkeys(self.possible_agents, "running")
        self.reason = ""

    def _build_game(self) -> None:
        cfg = self.config
        try:
            with self._random.active():
                game = textarena().make(cfg.game, **cfg.game_kwargs)
                game.reset(num_players=cfg.num_players, seed=self.game_seed)
        except Exception as error:
            raise ValueError(
                f"TextArena could not build {cfg.game!r} with num_players={cfg.num_players} and "
                f"game_kwargs={cfg.game_kwargs!r}: {type(error).__name__}: {error!s:.300}; "
                "pass the number of players the game takes (most take 2) and keyword "
                "arguments of its constructor"
            ) from error
        self.game, self._base = game, _unwrapped(game)
        harden(self._base)

    # ----------------------------------------------------------------- lifecycle

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a fresh game, seeded from ``seed`` (see the module docstring)."""
        self._begin_reset(seed, options, frozenset())
        self.game_seed = int(self.np_random.integers(_SEED_BOUND))
        self._random = PrivateRandom(self.game_seed)
        self._build_game()
        self._start_aec_episode(self.possible_agents)
        self.turns = []
        self._lines = {a: [] for a in self.possible_agents}
        self._moves = {a: [] for a in self.possible_agents}
        self._observations = {}
        self._invalid = dict.fromkeys(self.possible_agents, 0)
        self._game_rewards = None
        self._outcome = dict.fromkeys(self.possible_agents, "running")
        self.reason = ""
        self._chips = ChipLedger() if self.config.payoff == "chips" else None
        self._collect()
        self.agent_selection = self._current_agent()
        self.infos = {a: {STOP: [], TURN: 0} for a in self.agents}

    def step(self, action: str | None) -> None:
        """Send the acting agent's text to the game and advance to its next player."""
        begun = self._begin_step(action)
        if begun is None:
            return
        agent, text = begun
        player = self._index[agent]
        prompt = tuple(self.observe(agent)["messages"])
        self._moves[agent].append((len(self._lines[agent]), text))
        state = self._base.state
        flagged = bool(state.game_info.get(player, {}).get("invalid_move", False))
        deal = self._kuhn_deal() if self._chips is not None else None
        with self._random.active():
            done, _ = self.game.step(action=game_text(text))  # the record keeps all of it
            done = bool(done) or bool(getattr(self._base.state, "done", False))
            closed = self.game.close() if done else None
        received = self._collect()
        state = self._base.state
        invalid = (
            not flagged and bool(state.game_info.get(player, {}).get("invalid_move", False))
        ) or any(_is_invalid_move_notice(kind, message) for kind, message in received[player])
        self._invalid[agent] += invalid
        self.turns.append(_Turn(agent, text, prompt, invalid))
        if self._chips is not None and deal is not None:
            self._count_chips(self._chips, player, received[player], deal, done and invalid)

        if done:
            self._finish(closed)
        elif len(self.turns) >= self.config.max_turns:
            self.truncations = dict.fromkeys(self.agents, True)
            self._outcome = dict.fromkeys(self.possible_agents, "cut off")
            self.reason = f"cut off after max_turns={self.config.max_turns} actions"
        else:
            self.agent_selection = self._current_agent()

        if invalid and self.config.invalid_move_penalty:
            self.rewards[agent] -= self.config.invalid_move_penalty  # after the game's own

        ended = self.done
        for a in self.agents:
            info = {**self.infos[a], STOP: [], TURN: len(self.turns)}
            if a == agent:
                info[INVALID_MOVE] = invalid
            if ended:
                info |= self._end_metrics(a)
            self.infos[a] = info
        self._accumulate_rewards()

    def _finish(self, closed: Any) -> None:
        rewards, game_info = (
            closed if isinstance(closed, tuple) and len(closed) == 2 else (closed, {})
        )
        rewards = rewards or {}
        self._game_rewards = {
            agent: self._game_reward(rewards.get(i, 0.0), agent)
            for i, agent in enumerate(self.possible_agents)
        }
        if self._chips is not None:
            chips = map(float, self._chips.totals)
            self._game_rewards = dict(zip(self.possible_agents, chips, strict=True))
        self._outcome = dict(outcomes(self._game_rewards))
        reasons = [
            info.get("reason") for info in (game_info or {}).values() if isinstance(info, dict)
        ]
        self.reason = str(next((r for r in reasons if r), ""))
        for agent in self.agents:
            self.rewards[agent] = self._game_rewards[agent]
        self.terminations = dict.fromkeys(self.agents, True)

    def _game_reward(self, value: Any, agent: str) -> float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise RuntimeError(
                f"TextArena's {self.config.game!r} ended with the reward {value!r} for {agent} "
                "(not a number): a bug of the game, not of the agent's text; play another game "
                "or fix the game's set_outcome/set_invalid_move call"
            )
        return float(value)

    def _kuhn_deal(self) -> tuple[int, tuple[str, str]]:
        """The current round's first mover and cards (read before a move deals the next round)."""
        game_state = self._base.state.game_state
        cards = game_state["player_cards"]
        return int(game_state["starting_player"]), (CARDS[cards[0]], CARDS[cards[1]])

    @staticmethod
    def _count_chips(
        ledger: ChipLedger,
        player: int,
        received: list[tuple[str, str]],
        deal: tuple[int, tuple[str, str]],
        forfeited: bool,
    ) -> None:
        if forfeited:
            ledger.forfeit(player)
            return
        for _, message in received:
            found = _KUHN_MOVE.search(message)
            if found and int(found.group(1)) == player:
                ledger.move(found.group(2), *deal)
                return

    def kuhn_rules(self) -> KuhnRules:
        """What this Kuhn Poker game pays, for :mod:`llm_envs.textarena.kuhn`'s exploitability.

        ``payoff="game"``: TextArena's win or loss over its rounds, a bet
        costing nothing; ``payoff="chips"``: the chips, a bet costing one.

        Raises:
            ValueError: the game is not Kuhn Poker.
        """
        if not self._kuhn:
            raise ValueError(
                f"exploitability is measured for Kuhn Poker, and the game is {self.config.game!r}"
            )
        chips = self.config.payoff == "chips"
        return KuhnRules(
            bet_cost=1 if chips else 0,
            rounds=self._rounds,
            payoff="chips" if chips else "win_loss",
            retries=self._error_allowance,
        )

    def _end_metrics(self, agent: str) -> dict[str, Any]:
        outcome = self._outcome[agent]
        return {
            "win": float(outcome == "win"),
            "draw": float(outcome == "draw"),
            "loss": float(outcome == "loss"),
            "invalid_moves": self._invalid[agent],
            "game_reward": (self._game_rewards or {}).get(agent, 0.0),
        }

    def _current_agent(self) -> str:
        return self.possible_agents[int(self._base.state.current_player_id)]

    def _collect(self) -> dict[int, list[tuple[str, str]]]:
        """Move the messages the game has queued into each agent's history.

        While the game runs, its current player's queue is read through the
        game's own ``get_observation()`` (some games add a status there), as
        TextArena's play loop does; the other queues are read directly.
        """
        state = self._base.state
        received: dict[int, list[Any]] = {i: [] for i in range(len(self.possible_agents))}
        if not getattr(state, "done", False):
            with self._random.active():
                player, messages = self._base.get_observation()
            received[int(player)].extend(messages)
        for player, queue in state.observations.items():
            if queue and player in received:
                received[player].extend(queue)
                state.observations[player] = []
        names = state.role_mapping
        out: dict[int, list[tuple[str, str]]] = {}
        for player, messages in received.items():
            lines = self._lines[self.possible_agents[player]]
            out[player] = []
            for message in messages:
                sender, text, kind = (*message, None)[:3]
                name = "GAME" if sender == _GAME_ID else names.get(sender, f"Player {sender}")
                lines.append(f"[{name}] {text}")
                out[player].append((getattr(kind, "name", ""), str(text)))
        return out

    @property
    def done(self) -> bool:
        """Whether the episode has ended (every agent terminated or truncated)."""
        return bool(self.agents) and all(
            self.terminations[a] or self.truncations[a] for a in self.agents
        )

    def outcome(self) -> dict[str, Outcome]:
        """Each agent's outcome so far: ``win``, ``draw``, ``loss``, ``cut off`` or ``running``."""
        return dict(self._outcome)

    def fork(self) -> Self:
        """Return an independent copy of this environment, mid-episode included (tree search)."""
        return copy.deepcopy(self)

    # -------------------------------------------------------------- observation

    def observe(self, agent: str) -> Observation:
        """The chat ``agent``'s model should continue if it acted now: the game's messages to it."""
        lines = self._lines.get(agent)
        if lines is None:
            self._check_agent(agent)
            lines = []
        moves = self._moves.get(agent, [])
        key = (len(lines), len(moves))
        cached = self._observations.get(agent)
        if cached is None or cached[0] != key:
            messages: list[Message] = []
            start = 0
            for seen, move in moves:
                messages.append({"role": "user", "content": "\n".join(lines[start:seen])})
                messages.append({"role": "assistant", "content": move})
                start = seen
            messages.append({"role": "user", "content": "\n".join(lines[start:])})
            cached = (key, messages)
            self._observations[agent] = cached
        return {"messages": [{"role": m["role"], "content": m["content"]} for m in cached[1]]}

    # ------------------------------------------------------------------ records

    def record(self) -> EpisodeRecord:
        """The episode as a JSON-ready :class:`~llm_envs.records.EpisodeRecord`.

        The summary holds ``rewards`` (agent -> the game's reward, 0 until it
        ends), the ``game`` id, each agent's ``outcome`` and ``invalid_moves``,
        the game's ``reason`` for its end, the ``game_seed`` and the ``turns``.
        """
        turns = [
            turn_record(
                t.agent,
                i + 1,
                t.prompt,
                t.text,
                {"player": self._index[t.agent], INVALID_MOVE: t.invalid},
            )
            for i, t in enumerate(self.turns)
        ]
        rewards = self._game_rewards or dict.fromkeys(self.possible_agents, 0.0)
        summary: dict[str, Any] = {
            "game": self.config.game,
            "num_players": self.config.num_players,
            "game_kwargs": _jsonable(self.config.game_kwargs),
            "game_seed": self.game_seed,
            "turns": len(self.turns),
            "rewards": dict(rewards),
            "outcome": dict(self._outcome),
            "invalid_moves": dict(self._invalid),
            "reason": self.reason,
        }
        return self._episode_record(self.config.game, summary, turns)

    # ------------------------------------------------------------------- render

    def transcript(self) -> str:
        """The whole game as text: every message the game logged (private ones too), the end."""
        lines = [f"TextArena {self.config.game} ({self.config.num_players} players)"]
        if self._base is None:
            return "\n".join([*lines, "(no episode yet: call reset())"])
        state = self._base.state
        names = state.role_mapping
        for sender, text in state.logs:
            name = "GAME" if sender == _GAME_ID else names.get(sender, f"Player {sender}")
            lines.append(f"[{name}] {text}")
        if set(self._outcome.values()) != {"running"}:
            results = ", ".join(
                f"{a}: {self._outcome[a]} ({(self._game_rewards or {}).get(a, 0.0):g})"
                for a in self.possible_agents
            )
            lines.append(f"=== {self.reason or 'game over'} === {results}")
        return "\n".join(lines)

    def close(self) -> None:
        """Nothing to release."""


def _is_invalid_move_notice(kind: str, message: str) -> bool:
    # TextArena's set_invalid_move tells the player "... attempted an invalid move ...".
    return kind == "GAME_ADMIN" and "invalid move" in message.lower()


raw_env, env = aec_factories(TextArenaEnv)
