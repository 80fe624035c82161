"""The configuration of the debate environment: every setting, validated at construction.

:class:`DebateConfig` is what ``DebateEnv(config)`` takes; its fields are also
the environment's keyword arguments (``DebateEnv(num_agents=2)``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, get_args

from llm_envs.arguments import check_int, describe
from llm_envs.debate.questions import DEFAULT_QUESTIONS, DebateQuestion, as_question
from llm_envs.debate.rewards import VoteCounting

__all__ = ["DebateConfig", "ObservationMode", "OnParseError", "VoteCounting"]

OnParseError = Literal["penalize", "mask"]
ObservationMode = Literal["prompt", "chat"]

_ON_PARSE_ERROR: tuple[OnParseError, ...] = get_args(OnParseError)
_OBSERVATION_MODES: tuple[ObservationMode, ...] = get_args(ObservationMode)
_VOTE_COUNTINGS: tuple[VoteCounting, ...] = get_args(VoteCounting)


@dataclass(frozen=True)
class DebateConfig:
    """Configuration of a debate; validated at construction.

    Attributes:
        num_agents: debaters, at least 2; with 2 no vote is ever valid (an agent
            compares two *other* agents), so the win rate is always 0: a
            ``UserWarning`` says so. Three or more for the recipe's rewards.
        max_rounds: rounds before the debate is cut off (truncation), at least 1.
        history_rounds: completed rounds shown in ``"prompt"`` mode: ``-1`` all,
            ``0`` none, ``K`` the last ``K``. The answers already given in the
            current round are always shown, since the round's instruction refers
            to them. ``"chat"`` mode always keeps the whole conversation.
        max_chars_per_field: each field of an answer shown to other agents is
            clipped to this many characters.
        questions: questions drawn (uniformly, from the reset seed) at each reset:
            strings or :class:`~llm_envs.debate.questions.DebateQuestion`; None
            (or left out): a few built-in questions.
        on_parse_error: ``"penalize"`` or ``"mask"``, see :mod:`llm_envs.debate.env`.
        observation_mode: ``"prompt"`` or ``"chat"``, see :mod:`llm_envs.debate.env`.
        vote_counting: ``"as_written"`` (the seed's rule): every comparison an
            agent writes is a vote, repeats included. ``"once_per_pair"``
            (opt-in): an agent's comparisons of one pair of agents count once
            per round, the first one written (a repeat, or a contradiction,
            later in the same answer is dropped); see
            :func:`~llm_envs.debate.rewards.once_per_voter_and_pair`.
        shuffle_answers: show the other agents' answers of each round in an
            order drawn for each prompt (from the reset seed: the same seed
            shows the same orders, and the prompts in the record show them),
            instead of seat order, so a judge cannot learn to vote by the
            position of an answer. Off by default (the seed shows seat order).
        shuffle_labels: each agent knows the others under numbers drawn for it
            once per debate (from the reset seed; it keeps its own): its
            "Agent 0" is any other seat with equal chance. Every answer shown
            to it has its mentions of agents rewritten into its labels, each
            round's answers come in label order, and the votes it writes are
            moved back to seats before they count; each turn's record holds
            the labels it read (``details["labels"]``). A judge that votes for
            a number then favours no seat: ``vote_lower_seat`` is one half in
            expectation and ``vote_lower_label`` shows the judge's own habit.
            Off by default (the seed numbers agents by seat).
    """

    num_agents: int = 3
    max_rounds: int = 3
    history_rounds: int = -1
    max_chars_per_field: int = 1000
    questions: tuple[DebateQuestion, ...] = field(default=DEFAULT_QUESTIONS)
    on_parse_error: OnParseError = "penalize"
    observation_mode: ObservationMode = "prompt"
    vote_counting: VoteCounting = "as_written"
    shuffle_answers: bool = False
    shuffle_labels: bool = False

    def __post_init__(self) -> None:
        check_int("num_agents", self.num_agents, minimum=2)
        if self.num_agents == 2:
            warnings.warn(
                "a debate of 2 agents never has a valid vote (an agent compares two other "
                "agents), so its pairwise reward is always 0; use num_agents=3 or more",
                stacklevel=3,
            )
        check_int("max_rounds", self.max_rounds, minimum=1)
        check_int(
            "history_rounds",
            self.history_rounds,
            minimum=-1,
            meaning=" (-1: all rounds, 0: none, K > 0: the last K)",
        )
        check_int("max_chars_per_field", self.max_chars_per_field, minimum=1)
        if self.on_parse_error not in _ON_PARSE_ERROR:
            raise ValueError(
                f"on_parse_error must be one of {_ON_PARSE_ERROR}, got {self.on_parse_error!r}"
            )
        if self.observation_mode not in _OBSERVATION_MODES:
            raise ValueError(
                f"observation_mode must be one of {_OBSERVATION_MODES}, "
                f"got {self.observation_mode!r}"
            )
        if self.vote_counting not in _VOTE_COUNTINGS:
            raise ValueError(
                f"vote_counting must be one of {_VOTE_COUNTINGS}, "
                f"got {describe(self.vote_counting)}: "
                "leave it out (or 'as_written') to count every comparison as the seed does, or "
                "pass 'once_per_pair' to count each agent's comparison of a pair once per round"
            )
        for name in ("shuffle_answers", "shuffle_labels"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(
                    f"{name} must be True or False, got {describe(getattr(self, name))}"
                )
        if self.observation_mode == "chat" and self.history_rounds != -1:
            raise ValueError(
                "history_rounds applies to observation_mode='prompt' only: a chat observation "
                f"keeps the whole conversation (got history_rounds={self.history_rounds}); "
                "leave it at -1 or use observation_mode='prompt'"
            )
        if self.questions is None:
            object.__setattr__(self, "questions", DEFAULT_QUESTIONS)
        if isinstance(self.questions, str):
            raise TypeError(
                f"questions must be a sequence of questions, got one str ({self.questions!r:.60}); "
                f"wrap it in a list: questions=[{self.questions!r:.60}]"
            )
        if isinstance(self.questions, DebateQuestion) or not isinstance(self.questions, Iterable):
            raise TypeError(
                "questions must be a sequence of str or DebateQuestion, got "
                f"{describe(self.questions)}; pass a list, e.g. questions=['What is 2 + 2?']"
            )
        questions = tuple(as_question(q) for q in self.questions)
        if not questions:
            raise ValueError("questions must not be empty")
        object.__setattr__(self, "questions", questions)
