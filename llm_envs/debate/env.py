"""Multi-agent debate: N agents answer one question in turn, judge each other, and vote.

This is the debate recipe as a PettingZoo AEC environment.

Agents
    ``"agent_0" ... "agent_{N-1}"``; agent ``agent_i`` is "Agent i" in prompts and
    votes (with ``shuffle_labels``, each agent knows the others under numbers drawn
    for it: see :class:`DebateConfig`). All agents stay in the episode until it ends.

Turn order
    Fixed: ``agent_0, agent_1, ..., agent_{N-1}`` make one round; rounds repeat
    until the episode ends.

Observation
    ``{"messages": [...]}``. With ``observation_mode="prompt"`` (the seed's
    behaviour) it is two messages, rebuilt every turn: a system message with the
    XML contract for this agent, and a user message holding the question, the
    debate history (round-based, ``history_rounds``, every field clipped to
    ``max_chars_per_field``) and the round's instruction. With
    ``observation_mode="chat"`` it is a growing conversation: the agent's own
    answers as assistant messages and, before each of its turns, one user
    message with what the others said since its last turn; every observation
    extends the previous one (observation + action) by a prefix, so a trainer
    merges the whole trajectory into one sequence.

Action
    The agent's raw text. It must follow the five-tag XML contract of
    :mod:`llm_envs.debate.protocol`; text that does not is a *parse error*,
    handled by ``on_parse_error``:

    - ``"penalize"`` (the seed's behaviour): step reward -1 for the offender and
      the whole episode ends (terminated).
    - ``"mask"``: reward 0, ``infos[agent]["loss_weight"] = 0.0``, the turn is
      recorded as an answer with no content (it blocks consensus that round)
      and the debate goes on.

Reward
    The base environment gives only the parse-error penalty. The debate's real
    signal is the final group reward from peer votes, added by the wrappers
    :class:`~llm_envs.debate.wrappers.WinRateReward` and
    :class:`~llm_envs.debate.wrappers.WinMinusLossReward` from the vote ledger
    :attr:`DebateEnv.votes` (every valid comparison of every round, with its
    author). :func:`env` applies one of them. With ``vote_counting="once_per_pair"``
    (opt-in, not in the seed) the ledger holds each agent's comparison of a
    pair of agents once per round: the first one it wrote in that round.

Termination
    At the end of a round in which every agent said YES (``terminations``), or
    when ``max_rounds`` rounds are done (``truncations``), or at a parse error
    in ``"penalize"`` mode (``terminations``).

Infos
    Context (for the upcoming turn): ``stop`` (``["</consensus_reason>"]``),
    ``round`` (1-based round of the agent's next turn), ``turn`` (0-based global
    index of that turn), ``consensus_reached``. Outcome (of the agent's previous
    answer): ``parse_error``, ``parse_error_message``, ``loss_weight``, the
    parsed fields ``solution``, ``evaluation``, ``comparison``, ``consensus``,
    ``consensus_reason``, and ``votes_cast``, ``self_comparisons_dropped``,
    ``unparsed_comparison_lines``, ``repeated_votes_dropped`` (comparisons of a
    pair already compared in the answer, left out of the ledger by
    ``vote_counting="once_per_pair"``; always 0 with ``"as_written"``); with a
    reference answer also
    ``solution_correct``, a metric never part of the reward. An answer that had
    two others to compare also has ``voted``, ``vote_agreement`` and
    ``vote_lower_seat`` (:func:`~llm_envs.debate.shaping.judging_info`) and, with
    ``shuffle_labels``, ``vote_lower_label``.

Arguments:
    Give a :class:`DebateConfig`, its fields as keywords, or both (the
    keywords replace those fields of the config), and ``render_mode``.
    ``reset(options={"question": q})`` debates ``q``
    (a ``str`` or :class:`~llm_envs.debate.questions.DebateQuestion`) instead of
    drawing one from ``questions``.

Version history
    v0: initial release.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import partial
from typing import Any, ClassVar, Self

from pettingzoo import AECEnv

from llm_envs.contract import LOSS_WEIGHT, ROUND, STOP, TURN, Message, Observation
from llm_envs.debate.config import DebateConfig, ObservationMode, OnParseError, VoteCounting
from llm_envs.debate.prompts import (
    RecordedTurn,
)
from llm_envs.debate.protocol import CONSENSUS, TAGS, DebateResponse, ParseError, parse_response
from llm_envs.debate.protocol import STOP as STOP_STRING
from llm_envs.debate.questions import DebateQuestion, as_question
from llm_envs.debate.rewards import (
    RewardMode,
    Vote,
    once_per_voter_and_pair,
    win_minus_loss,
    win_rate,
)
from llm_envs.debate.shaping import OthersSeen, judging_info
from llm_envs.debate.views import DebateViews
from llm_envs.factories import AECWrapper, raw_factory, wrap_aec
from llm_envs.judgements import lower_seat_wins
from llm_envs.records import EpisodeRecord, turn_record
from llm_envs.spaces import SAMPLE_FRAGMENTS
from llm_envs.text_env import TextEnvMixin, env_metadata, numbered_agents, resolve_config

__all__ = [
    "DebateConfig",
    "DebateEnv",
    "ObservationMode",
    "OnParseError",
    "VoteCounting",
    "env",
    "raw_env",
]

_KNOWN_OPTIONS = frozenset({"question"})
_ANSWER_INFO = ("voted", "vote_agreement", "vote_lower_seat", "vote_lower_label")
"""Infos of one answer that not every answer has: dropped from the author's infos
before its next answer's are written, so a turn never shows an earlier turn's."""


def _sample_fragments() -> tuple[str, ...]:
    # The contract's tags (YES and NO inside <consensus>), then the generic fragments.
    tags: list[str] = []
    for tag in TAGS:
        tags.append(f"<{tag}>")
        if tag == CONSENSUS:
            tags += ["YES", "NO"]
        tags.append(f"</{tag}>")
    return (*tags, *SAMPLE_FRAGMENTS)


class DebateEnv(DebateViews, TextEnvMixin, AECEnv[str, Observation, str]):
    """The debate environment of the debate recipe; see the module docstring for the full contract.

    Args:
        config: a :class:`DebateConfig`; None builds one from ``overrides``.
        render_mode: ``"ansi"`` (``render()`` returns the transcript) or
            ``"human"`` (prints it), or ``None``.
        **overrides: :class:`DebateConfig` fields (``num_agents=2``...), applied
            on top of ``config`` (see :func:`~llm_envs.text_env.resolve_config`).

    Example:
        >>> env = DebateEnv(num_agents=2, max_rounds=1, questions=["1 + 1?"])
        >>> env.reset(seed=0)
        >>> env.agent_selection
        'agent_0'
        >>> env.observe("agent_0")["messages"][1]["content"].splitlines()[0]
        'Question: 1 + 1?'
    """

    metadata = env_metadata("debate_v0", is_parallelizable=False)
    sample_fragments: ClassVar[tuple[str, ...]] = _sample_fragments()

    def __init__(
        self,
        config: DebateConfig | None = None,
        *,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__()
        self.config = resolve_config(DebateConfig, config, overrides, owner="DebateEnv")
        num_agents = self.config.num_agents
        self.possible_agents = numbered_agents(num_agents)
        self._index = {agent: i for i, agent in enumerate(self.possible_agents)}
        self._init_text_env(self.possible_agents, render_mode)
        # Built when an agent first observes: each prompt is O(1) text, but N of them
        # up front would make a 10,000-agent debate pay for prompts nobody reads yet.
        self._system_prompts: dict[int, str] = {}
        self.question: DebateQuestion = self.config.questions[0]
        self.turns: list[RecordedTurn] = []
        self.votes: list[Vote] = []
        self.consensus_reached = False
        self._observations: dict[str, tuple[int, list[Message]]] = {}

    # ----------------------------------------------------------------- lifecycle

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a debate: draw a question (or take ``options["question"]``) and clear the state."""
        options = self._begin_reset(seed, options, _KNOWN_OPTIONS)
        if "question" in options:
            self.question = as_question(options["question"])
        else:
            questions = self.config.questions
            self.question = questions[int(self.np_random.integers(len(questions)))]

        self._start_aec_episode(self.possible_agents)
        self.turns = []
        self.votes = []
        self.consensus_reached = False
        self._round = 1
        self._position = 0
        self._chat: dict[str, list[Message]] = {a: [] for a in self.agents}
        self._observations = {}
        self._seen: dict[str, int] = dict.fromkeys(self.agents, 0)
        self._latest_correct: dict[int, bool] = {}  # agent -> its latest answer was correct
        self._checked: dict[str, bool] = {}  # solution -> correct, checked once per debate
        # Drawn only when asked for, so the default debate's random stream is the seed's.
        self._order_key = (
            int(self.np_random.integers(1 << 62)) if self.config.shuffle_answers else 0
        )
        self._label_key = int(self.np_random.integers(1 << 62)) if self.config.shuffle_labels else 0
        # reader -> (labels[seat], seats[label]), drawn when first read
        self._labels: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self.infos = {a: self._context_info(a) for a in self.agents}

    def step(self, action: str | None) -> None:
        """Record the acting agent's answer, apply the parse-error rule, and advance the debate."""
        begun = self._begin_step(action)
        if begun is None:
            return
        agent, text = begun
        author = self._index[agent]
        prompt = tuple(self.observe(agent)["messages"])
        if self.config.observation_mode == "chat":
            # What the agent just answered becomes history: its prompt, then its answer.
            self._chat[agent] = [*prompt, {"role": "assistant", "content": text}]

        try:
            response = parse_response(text, author)
            error = None
        except ParseError as exc:
            response, error = None, str(exc)
        as_written = response.comparisons if response is not None else ()
        if response is not None and self.config.shuffle_labels:
            response = self._votes_by_seat(response)
        self.turns.append(RecordedTurn(author, self._round, text, response, error, prompt))
        counted = self._counted_votes(response)
        self.votes.extend(counted)
        self._seen[agent] = len(self.turns)
        judging = judging_info(
            response.comparisons if response is not None else (),
            counted,
            OthersSeen(self._latest_correct, author),
            self.config.num_agents,
            reference=self.question.answer is not None,
        )
        if self.config.shuffle_labels and "voted" in judging:
            # The seat bias is one half by construction here; the judge's own habit shows
            # in the labels it read (its "Agent 0" is a different seat in every debate).
            written = [Vote(author, *c) for c in as_written]
            lower, strict = lower_seat_wins(written, self.config.num_agents)
            if strict:
                judging["vote_lower_label"] = lower / strict
        self._latest_correct[author] = self._is_correct(response)

        penalized = error is not None and self.config.on_parse_error == "penalize"
        if penalized:
            self.rewards[agent] = -1.0
        self._advance(ended_by_error=penalized)

        outcome = {**self._outcome_info(response, error, len(counted)), **judging}
        # Only the acting agent's context moves on (its next turn); at the end, everyone's
        # does. Updating all N infos every step would make a round cost N^2.
        for a in self.agents if self.done else (agent,):
            info = self._context_info(a)
            if a == agent:
                earlier = {k: v for k, v in self.infos[a].items() if k not in _ANSWER_INFO}
                self.infos[a] = {**earlier, **info, **outcome}
            else:
                self.infos[a] = {**self.infos[a], **info}
        self._accumulate_rewards()

    def _is_correct(self, response: DebateResponse | None) -> bool:
        """Whether an answer's solution matches the reference (False without one, or broken)."""
        if response is None or self.question.answer is None:
            return False
        checked = self._checked.get(response.solution)
        if checked is None:
            checked = self._checked[response.solution] = bool(
                self.question.is_correct(response.solution)
            )
        return checked

    def _counted_votes(self, response: DebateResponse | None) -> tuple[Vote, ...]:
        """The votes of one answer that go into the ledger, by ``vote_counting``."""
        if response is None:
            return ()
        if self.config.vote_counting == "once_per_pair":
            # An agent answers once per round, so its answer's votes are all the votes
            # it casts this round: deduplicating them is "once per voter, pair and round".
            return tuple(once_per_voter_and_pair(response.votes, self.config.num_agents))
        return response.votes

    def _advance(self, *, ended_by_error: bool) -> None:
        n = self.config.num_agents
        self._position += 1
        if ended_by_error:
            self.terminations = dict.fromkeys(self.agents, True)
        elif self._position == n:
            round_turns = self.turns[-n:]
            if all(t.response is not None and t.response.consensus for t in round_turns):
                self.consensus_reached = True
                self.terminations = dict.fromkeys(self.agents, True)
            elif self._round == self.config.max_rounds:
                self.truncations = dict.fromkeys(self.agents, True)
            else:
                self._round += 1
                self._position = 0
        self.agent_selection = self.possible_agents[self._position % n]

    @property
    def done(self) -> bool:
        """Whether the debate has ended (every agent terminated or truncated)."""
        return all(self.terminations[a] or self.truncations[a] for a in self.agents)

    def fork(self) -> Self:
        """Return an independent copy of this environment, mid-episode included (tree search)."""
        return copy.deepcopy(self)

    # -------------------------------------------------------------------- infos

    def _context_info(self, agent: str) -> dict[str, Any]:
        n = self.config.num_agents
        i = self._index[agent]
        if self.agents and self.done:
            turn, round_number = len(self.turns), self._round
        else:
            base = (self._round - 1) * n
            turn = base + i if i >= self._position else base + n + i
            round_number = turn // n + 1
        return {
            STOP: [STOP_STRING],
            ROUND: round_number,
            TURN: turn,
            "consensus_reached": self.consensus_reached,
        }

    def _outcome_info(
        self, response: DebateResponse | None, error: str | None, votes_counted: int
    ) -> dict[str, Any]:
        masked = error is not None and self.config.on_parse_error == "mask"
        # A broken answer reads as a blank one: every field empty, consensus NO, no votes.
        parsed = response if response is not None else DebateResponse.empty(0)
        info: dict[str, Any] = {
            "parse_error": error is not None,
            "parse_error_message": error or "",
            LOSS_WEIGHT: 0.0 if masked else 1.0,
            **parsed.fields(),
            "votes_cast": len(parsed.comparisons),
            "self_comparisons_dropped": parsed.self_comparisons_dropped,
            "unparsed_comparison_lines": parsed.unparsed_comparison_lines,
            "repeated_votes_dropped": len(parsed.comparisons) - votes_counted,
        }
        if self.question.answer is not None:
            info["solution_correct"] = self._is_correct(response)
        return info

    # -------------------------------------------------------------- observation

    def observe(self, agent: str) -> Observation:
        """The chat ``agent``'s model should continue if it acted now."""
        # Cached per state (the number of recorded turns): last() and step() both need
        # the acting agent's observation. Callers get their own list.
        cached = self._observations.get(agent)
        if cached is None or cached[0] != len(self.turns):
            self._check_agent(agent)
            cached = (len(self.turns), self._build_observation(agent))
            self._observations[agent] = cached
        return {"messages": list(cached[1])}

    # ------------------------------------------------------------------ records

    def record(self) -> EpisodeRecord:
        """The episode as a JSON-ready :class:`~llm_envs.records.EpisodeRecord`.

        The summary holds both pairwise rewards computed from the vote ledger, so
        a report shows them whichever wrapper the training run used.
        """
        n = self.config.num_agents
        turns = []
        for t in self.turns:
            r = t.response
            details: dict[str, Any] = {"parse_error": t.error}
            if r is not None:
                details |= {
                    **r.fields(),
                    "votes": [f"Agent {a} {op} Agent {b}" for a, op, b in r.comparisons],
                    "self_comparisons_dropped": r.self_comparisons_dropped,
                    "unparsed_comparison_lines": r.unparsed_comparison_lines,
                    "repeated_votes_dropped": len(r.comparisons) - len(self._counted_votes(r)),
                }
                if self.question.answer is not None:
                    details["solution_correct"] = self.question.is_correct(r.solution)
            labels = self._labels_of(t.agent)
            if labels is not None:  # votes above are by seat; the text names these labels
                details["labels"] = {
                    self.possible_agents[seat]: f"Agent {label}"
                    for seat, label in enumerate(labels)
                }
            turns.append(
                turn_record(self.possible_agents[t.agent], t.round, t.prompt, t.text, details)
            )
        summary: dict[str, Any] = {
            "question": self.question.text,
            "reference_answer": self.question.answer,
            "consensus_reached": self.consensus_reached,
            "rounds": self._round,
            "turns": len(self.turns),
            "vote_counting": self.config.vote_counting,
            "valid_votes": win_rate(self.votes, n).total_votes,
            "win_rate": list(win_rate(self.votes, n).rewards),
            "win_minus_loss": list(win_minus_loss(self.votes, n).rewards),
        }
        if self.config.shuffle_answers:  # the prompts show each reader's order
            summary["shuffle_answers"] = True
        if self.config.shuffle_labels:  # each turn's details say which labels it read
            summary["shuffle_labels"] = True
        return self._episode_record(self.question.text, summary, turns)

    # ------------------------------------------------------------------- render

    def transcript(self) -> str:
        """The whole debate as text: the question, then every raw answer by round."""
        lines = [f"Question: {self.question.text}"]
        if self.question.answer is not None:
            lines.append(f"Reference answer: {self.question.answer}")
        current = None
        for t in self.turns:
            if t.round != current:
                lines.append(f"\n=== Round {t.round} ===")
                current = t.round
            lines.append(f"--- Agent {t.agent} ---")
            labels = self._labels_of(t.agent)
            if labels is not None and self.config.num_agents > 2:
                seen = ", ".join(
                    f"Agent {seat} as Agent {label}"
                    for seat, label in enumerate(labels)
                    if seat != t.agent
                )
                lines.append(f"(it read {seen})")
            lines.append(t.text)
            if t.error is not None:
                lines.append(f"(parse error: {t.error})")
        if self.agents and self.done:
            ending = "consensus" if self.consensus_reached else "ended without consensus"
            lines.append(f"\n=== {ending} after {len(self.turns)} turns ===")
        lines.append(f"Votes: {len(self.votes)}")
        return "\n".join(lines)

    def close(self) -> None:
        """Nothing to release."""


raw_env = raw_factory(DebateEnv)


def env(
    config: DebateConfig | None = None,
    *,
    reward: RewardMode | None = "win_rate",
    shaping: Mapping[str, float] | None = None,
    **overrides: Any,
) -> AECEnv[str, Observation, str]:
    """The debate environment as most users want it: pairwise reward and lifecycle checks.

    Args:
        config: see :class:`DebateEnv`.
        reward: ``"win_rate"`` (default) or ``"win_minus_loss"`` adds the final group
            reward through :class:`~llm_envs.debate.wrappers.WinRateReward` or
            :class:`~llm_envs.debate.wrappers.WinMinusLossReward`; ``None`` leaves only
            the parse-error penalty.
        shaping: opt-in partial credit added to every answer's reward by
            :class:`~llm_envs.debate.shaping.DebateShaping`: weights of its terms,
            ``{"contract": 0.5, "correct": 0.5, "judge": 0.5, "vote": 0.5}``
            (a term left out weighs 0).
            None (the default) keeps the seed's reward alone.
        **overrides: :class:`DebateEnv` arguments.
    """
    from llm_envs.debate.shaping import DebateShaping, check_shaping
    from llm_envs.debate.wrappers import REWARD_WRAPPERS

    if reward is not None and reward not in REWARD_WRAPPERS:
        raise ValueError(f"reward must be one of {sorted(REWARD_WRAPPERS)} or None, got {reward!r}")
    weights = check_shaping(shaping)
    inner: list[AECWrapper] = [] if reward is None else [REWARD_WRAPPERS[reward]]
    if weights is not None:
        inner.append(
            partial(
                DebateShaping,
                contract=weights.get("contract", 0.0),
                correct=weights.get("correct", 0.0),
                judge=weights.get("judge", 0.0),
                vote=weights.get("vote", 0.0),
            )
        )
    return wrap_aec(DebateEnv(config, **overrides), *inner)
