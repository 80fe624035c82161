"""What each debater reads: its prompt, the order of the answers, and its labels.

:class:`DebateViews` is the part of :class:`~llm_envs.debate.env.DebateEnv` that turns
the debate's state into one agent's observation (``"prompt"`` or ``"chat"`` mode),
through the pure functions of :mod:`llm_envs.debate.prompts`, and keeps the numbers
under which each agent knows the others (``shuffle_labels``,
:mod:`llm_envs.debate.labels`). It reads the environment's state and writes only
its own caches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import numpy as np

from llm_envs.contract import Message
from llm_envs.debate.config import DebateConfig
from llm_envs.debate.labels import Renaming, seats_by_label, seats_of, shown_labels
from llm_envs.debate.prompts import (
    RecordedTurn,
    format_turn,
    format_turns_by_round,
    round_instruction,
    shuffled_within_rounds,
    system_prompt,
)
from llm_envs.debate.protocol import DebateResponse
from llm_envs.debate.questions import DebateQuestion

__all__ = ["DebateViews"]


class DebateViews:
    """Observations and labels of a debate; mixed into :class:`~llm_envs.debate.env.DebateEnv`."""

    # The debate's state, set by DebateEnv.
    config: DebateConfig
    agents: list[str]
    question: DebateQuestion
    turns: list[RecordedTurn]
    _index: dict[str, int]
    _round: int
    _position: int
    _chat: dict[str, list[Message]]
    _seen: dict[str, int]
    _order_key: int
    _label_key: int
    # This part's caches: system prompts by agent, and each reader's labels and inverse.
    _system_prompts: dict[int, str]
    _labels: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]

    @property
    def done(self) -> bool:
        """Whether the debate has ended (DebateEnv's rule)."""
        raise NotImplementedError

    def _labels_of(self, reader: int) -> tuple[int, ...] | None:
        """``labels[seat]``: the numbers under which ``reader`` knows the agents (shuffled only)."""
        return self._drawn_labels(reader)[0] if self.config.shuffle_labels else None

    def _drawn_labels(self, reader: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``reader``'s labels and their inverse, drawn from the reset seed when first read."""
        drawn = self._labels.get(reader)
        if drawn is None:
            rng = np.random.default_rng((self._label_key, reader))
            labels = shown_labels(reader, self.config.num_agents, rng)
            drawn = self._labels[reader] = (labels, seats_by_label(labels))
        return drawn

    def _votes_by_seat(self, response: DebateResponse) -> DebateResponse:
        """``response`` with its comparisons moved from its author's labels to seats."""
        seats = self._drawn_labels(response.author)[1]
        return dataclasses.replace(response, comparisons=seats_of(response.comparisons, seats))

    def _render_for(self, reader: int) -> Callable[[RecordedTurn], str]:
        """How ``reader``'s prompt renders one answer: as written, or in its own labels."""
        max_chars = self.config.max_chars_per_field
        labels = self._labels_of(reader)
        if labels is None:
            return partial(format_turn, max_chars=max_chars)

        def render(turn: RecordedTurn) -> str:
            rename = Renaming(self._drawn_labels(turn.agent)[1], labels)
            return format_turn(turn, max_chars, rename=rename, label=labels[turn.agent])

        return render

    def _build_observation(self, agent: str) -> list[Message]:
        if self.config.observation_mode == "chat":
            return self._chat_prefix(agent)
        i = self._index[agent]
        return [
            {"role": "system", "content": self._system_prompt(i)},
            {"role": "user", "content": self._prompt_user_message(i)},
        ]

    def _system_prompt(self, agent_index: int) -> str:
        prompt = self._system_prompts.get(agent_index)
        if prompt is None:
            prompt = system_prompt(agent_index, self.config.num_agents)
            self._system_prompts[agent_index] = prompt
        return prompt

    def _spoken_this_round(self, agent_index: int) -> list[int]:
        # Answers of the round in which `agent_index` acts next (empty for a later round).
        if self._position > agent_index:
            return []
        return [t.agent for t in self.turns[len(self.turns) - self._position :]]

    def _instruction(self, agent_index: int) -> str:
        if self.agents and self.done:
            return "The debate has ended."
        round_number = self._round if agent_index >= self._position else self._round + 1
        spoken = self._spoken_this_round(agent_index)
        labels = self._labels_of(agent_index)
        if labels is not None:
            spoken = sorted(labels[seat] for seat in spoken)
        return round_instruction(
            agent_index, self.config.num_agents, round_number, self.config.max_rounds, spoken
        )

    def _prompt_user_message(self, agent_index: int) -> str:
        cfg = self.config
        current_start = len(self.turns) - self._position
        completed, current = self.turns[:current_start], self.turns[current_start:]
        if cfg.history_rounds >= 0:
            first_round = self._round - cfg.history_rounds
            completed = [t for t in completed if t.round >= first_round]
        shown = self._in_shown_order([*completed, *current], agent_index)
        in_progress = None if (self.agents and self.done) else self._round
        parts = [f"Question: {self.question.text}"]
        if shown:
            render = self._render_for(agent_index)
            history = format_turns_by_round(shown, cfg.max_chars_per_field, in_progress, render)
            parts.append(f"Debate so far:\n\n{history}")
        parts.append(self._instruction(agent_index))
        return "\n\n".join(parts)

    def _in_shown_order(self, turns: list[RecordedTurn], reader: int) -> list[RecordedTurn]:
        """``turns`` as ``reader``'s prompt shows them: by seat, by label, or shuffled in rounds."""
        labels = self._labels_of(reader)
        if labels is not None:  # each round's answers by label, so position says no more
            turns = sorted(turns, key=lambda t: (t.round, labels[t.agent]))
        if not self.config.shuffle_answers:
            return turns
        rng = np.random.default_rng((self._order_key, len(self.turns), reader))
        return shuffled_within_rounds(turns, rng)

    def _chat_prefix(self, agent: str) -> list[Message]:
        i = self._index[agent]
        history = self._chat[agent]
        if not history:
            history = [{"role": "system", "content": self._system_prompt(i)}]
        new_turns = self._in_shown_order(
            [t for t in self.turns[self._seen[agent] :] if t.agent != i], i
        )
        parts = [] if self._seen[agent] else [f"Question: {self.question.text}"]
        if new_turns:
            heading = "Since your last answer:" if self._seen[agent] else "Answers so far:"
            render = self._render_for(i)
            body = "\n\n".join(render(t) for t in new_turns)
            parts.append(f"{heading}\n\n{body}")
        parts.append(self._instruction(i))
        return [*history, {"role": "user", "content": "\n\n".join(parts)}]
