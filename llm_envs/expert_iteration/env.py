r"""Expert iteration: one problem, a search strategy, and a training context for every turn.

This is the expert-iteration plan as a PettingZoo AEC environment. Expert iteration samples with
help (extra instructions, a hint, feedback on a first attempt) and trains the
model to produce the result without the help. Every turn therefore has two
contexts: the observation, which the model is sampled on, and
``info["training_messages"]``, which its completion is trained on. The
completion itself is never altered (the expert-iteration plan, "Invariants").

Agents
    ``"solver"`` answers the problem. With ``feedback_source="critic"`` a
    second agent, ``"critic"``, reviews attempt 1 of ``two_turn_feedback``
    episodes and writes the feedback; in episodes of other strategies it never
    acts and is not among ``agents``.

Turn order
    One turn (``iid``, ``prompt_augmentation``, ``answer_hint``); or attempt 1,
    (the critic's review,) attempt 2 (``two_turn_feedback``). With
    ``on_first_correct="stop"`` a correct attempt 1 ends the episode.

Observation
    ``{"messages": [...]}``: the sampling context of the strategy (see
    :mod:`llm_envs.expert_iteration.strategies` for each strategy's sampling
    and training contexts). Between its turns and after the end, an agent
    observes the conversation so far, its own last answer included. The
    critic observes a system message and one user message holding the problem
    and attempt 1 (and the reference answer with ``critic_sees_reference``).

Action
    Raw text. The solver's final answer is extracted from it (math:
    ``\boxed{}``, ``####``, "answer:", last number) or its program is taken from
    its last fenced code block (code). Any string is legal: text without an
    answer is a wrong answer with its reward.

Reward
    For the solver, once, for the final attempt: its score (math: 1.0 when
    correct; code: the fraction of tests passed, or 1/0 with
    ``code_reward="all_or_nothing"``), plus ``format_reward`` when it is
    formatted (a closed ``\boxed{}``; a fenced code block). Attempt 1 of a
    two-turn episode that goes on gets no reward; its would-be reward is in
    its infos. The critic gets the improvement it brought about: the score of
    attempt 2 minus the score of attempt 1 (in [-1, 1]; 0 when it never acted).

Termination
    After the final attempt (``terminations``). Episodes have at most three turns.

Infos
    Context (for the upcoming turn): ``stop`` (the configured stop strings),
    ``strategy``, ``round`` (the attempt the turn produces or, for the critic,
    reviews: 1 or 2), ``turn`` (0-based index of the turn in the episode), and
    ``training_messages`` when the training context differs from the
    observation (never for ``iid`` nor for attempt 1 of ``two_turn_feedback``).
    Outcome (of the agent's previous turn), solver: ``loss_weight`` (1.0 for
    the final attempt; ``attempt1_loss_weight``, default 0.0, for an attempt 1
    that is followed by attempt 2), ``attempt``, ``correct``, ``score``,
    ``formatted``, ``attempt_reward`` (the reward the attempt earns if it is
    final), ``task_id``; math also ``extracted_answer``; code also
    ``tests_passed``, ``tests_total``, ``program_status``; the final attempt of
    a two-turn episode also ``first_attempt_correct``, ``num_attempts``,
    ``fixed`` (wrong, then right) and ``broken`` (right, then wrong). Critic:
    ``loss_weight`` 1.0 and, at the end, ``improvement``.

Attempt 1 already correct
    ``on_first_correct="continue"`` (the default): the feedback says the answer
    is correct and attempt 2 still happens, so every two-turn episode has the
    same shape and the trainer also sees attempt 2 keep a right answer rather
    than "fix" it into a wrong one. ``"stop"``: the episode ends; attempt 1 is
    then the final attempt, rewarded and trained on (``loss_weight`` 1.0, its
    context is the plain problem, so the sample is on-policy like ``iid``).

Records
    ``record()`` returns the episode as an :class:`~llm_envs.records.EpisodeRecord`:
    every turn's prompt, text, verdict, ``loss_weight`` and training context.

Arguments:
    Give an :class:`ExpertIterationConfig`, its fields as keywords, or both
    (the keywords replace those fields of the config), and ``render_mode``.
    ``reset(options={"problem": p})`` poses
    ``p`` (a :class:`~llm_envs.tasks.MathProblem` or
    :class:`~llm_envs.tasks.CodeProblem`) instead of drawing one from
    ``problems``; ``options={"strategy": s}`` runs that episode with strategy
    ``s`` (the group helpers of :mod:`llm_envs.expert_iteration.groups` use both).

Version history
    v0: initial release.
"""

from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass
from typing import Any, Literal, Self

from pettingzoo import AECEnv

from llm_envs.contract import (
    LOSS_WEIGHT,
    ROUND,
    STOP,
    STRATEGY,
    TRAINING_MESSAGES,
    TURN,
    Message,
    Observation,
    copy_messages,
)
from llm_envs.expert_iteration.config import ExpertIterationConfig, OnFirstCorrect
from llm_envs.expert_iteration.prompts import CRITIC_SYSTEM_PROMPT, Problem, critic_user_message
from llm_envs.expert_iteration.strategies import (
    Strategy,
    TurnContext,
    as_strategy,
    first_attempt_context,
    problem_messages,
    second_attempt_context,
)
from llm_envs.expert_iteration.verifier import (
    CodeRunner,
    Verdict,
    reference_program,
    verify_code,
    verify_math,
)
from llm_envs.factories import aec_factories
from llm_envs.records import EpisodeRecord, turn_record
from llm_envs.tasks.problems import CodeProblem, MathProblem
from llm_envs.text_env import TextEnvMixin, env_metadata, resolve_config

__all__ = [
    "CRITIC",
    "SOLVER",
    "ExpertIterationConfig",
    "ExpertIterationEnv",
    "OnFirstCorrect",
    "env",
    "raw_env",
]

SOLVER = "solver"
"""The agent that answers the problem."""
CRITIC = "critic"
"""The agent that reviews attempt 1 when ``feedback_source="critic"``."""

_KNOWN_OPTIONS = frozenset({"problem", "strategy"})
_Phase = Literal["attempt1", "critic", "attempt2", "done"]


@dataclass(frozen=True)
class _Attempt:
    number: int
    text: str
    verdict: Verdict
    context: TurnContext


def _default_code_runner() -> CodeRunner:
    # Imported on first use: math-only users never load the sandbox.
    try:
        runner = importlib.import_module("llm_envs.sandbox").run_tests
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(
            "code problems are scored by llm_envs.sandbox.run_tests, which is not available "
            f"({exc}); pass code_runner=... to the environment"
        ) from exc
    return runner


class ExpertIterationEnv(TextEnvMixin, AECEnv[str, Observation, str]):
    r"""The expert-iteration environment of the expert-iteration plan; see the module docstring for the contract.

    Args:
        config: an :class:`ExpertIterationConfig`; None builds one from ``overrides``.
        render_mode: ``"ansi"`` (``render()`` returns the transcript), ``"human"``
            (prints it), or ``None``.
        **overrides: :class:`ExpertIterationConfig` fields (``strategy=...``),
            applied on top of ``config`` (see :func:`~llm_envs.text_env.resolve_config`).

    Example:
        >>> from llm_envs.tasks import MathProblem
        >>> ei = ExpertIterationEnv(strategy="answer_hint")
        >>> ei.reset(seed=0, options={"problem": MathProblem("demo", "What is 2 + 3?", "5")})
        >>> ei.observe("solver")["messages"][-1]["content"].splitlines()[-1]
        'Hint (for you only: solve the problem yourself and do not mention this hint): the correct final answer is 5.'
        >>> ei.infos["solver"]["training_messages"][-1]["content"].splitlines()[0]
        'What is 2 + 3?'
        >>> ei.step("2 + 3 = \\boxed{5}")
        >>> ei.last()[1:4]
        (1.0, True, False)
    """  # noqa: E501 (a doctest output line cannot be wrapped)

    metadata = env_metadata("expert_iteration_v0", is_parallelizable=False)

    def __init__(
        self,
        config: ExpertIterationConfig | None = None,
        *,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__()
        self.config = resolve_config(
            ExpertIterationConfig, config, overrides, owner="ExpertIterationEnv"
        )
        self._settings = self.config.prompt_settings
        self.possible_agents = (
            [SOLVER, CRITIC] if self.config.feedback_source == "critic" else [SOLVER]
        )
        self._init_text_env(self.possible_agents, render_mode)
        self._runner: CodeRunner | None = self.config.code_runner
        self.problem: Problem = self.config.problems[0]
        self.strategy: Strategy = self.config.strategy
        self.attempts: list[_Attempt] = []
        self.critic_feedback: str | None = None
        self._phase: _Phase = "done"
        self._schedule: tuple[str, ...] = ()
        self._turn = 0
        self._context: TurnContext = TurnContext([])
        self._outcomes: dict[str, dict[str, Any]] = {}

    # ----------------------------------------------------------------- lifecycle

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode: take ``options["problem"]`` or draw one, and pose its first attempt."""
        options = self._begin_reset(seed, options, _KNOWN_OPTIONS)
        if "problem" in options:
            problem = options["problem"]
            if not isinstance(problem, MathProblem | CodeProblem):
                raise TypeError(
                    "options['problem'] must be a MathProblem or CodeProblem, "
                    f"got {type(problem).__name__}"
                )
        else:
            problems = self.config.problems
            problem = problems[int(self.np_random.integers(len(problems)))]
        strategy = self.config.strategy
        if "strategy" in options:
            strategy = as_strategy(options["strategy"], "options['strategy']")
        if isinstance(problem, CodeProblem) and not problem.tests:
            raise ValueError(
                f"code problem {problem.task_id!r} has no tests, so no attempt can be scored; "
                "give it tests or leave it out"
            )
        self.problem = problem
        self.strategy = strategy
        self._context = first_attempt_context(strategy, problem, self._settings)
        uses_critic = strategy == Strategy.TWO_TURN_FEEDBACK and CRITIC in self.possible_agents
        if strategy != Strategy.TWO_TURN_FEEDBACK:
            self._schedule = (SOLVER,)
        else:
            self._schedule = (SOLVER, CRITIC, SOLVER) if uses_critic else (SOLVER, SOLVER)

        self._start_aec_episode([SOLVER, CRITIC] if uses_critic else [SOLVER])
        self.attempts = []
        self.critic_feedback = None
        self._phase = "attempt1"
        self._turn = 0
        self._outcomes = {a: {} for a in self.agents}
        self.infos = {a: self._context_info(a) for a in self.agents}

    def step(self, action: str | None) -> None:
        """Score the solver's attempt (or record the critic's feedback) and advance the episode."""
        begun = self._begin_step(action)
        if begun is None:
            return
        agent, text = begun
        if agent == SOLVER:
            self._solver_step(text)
        else:
            self._critic_step(text)
        self._turn += 1
        for a in self.agents:
            self.infos[a] = {**self._context_info(a), **self._outcomes[a]}
        self._accumulate_rewards()

    def _verify(self, text: str) -> Verdict:
        problem = self.problem
        if isinstance(problem, MathProblem):
            return verify_math(problem, text)
        if self._runner is None:
            self._runner = _default_code_runner()
        cfg = self.config
        return verify_code(
            problem,
            text,
            self._runner,
            timeout=float(cfg.code_timeout),
            reward_mode=cfg.code_reward,
            max_failures_shown=cfg.max_failures_shown,
        )

    def _solver_step(self, text: str) -> None:
        cfg = self.config
        number = len(self.attempts) + 1
        verdict = self._verify(text)
        self.attempts.append(_Attempt(number, text, verdict, self._context))
        two_turn = self.strategy == Strategy.TWO_TURN_FEEDBACK
        final = not two_turn or number == 2 or (verdict.correct and cfg.on_first_correct == "stop")
        attempt_reward = verdict.score + (cfg.format_reward if verdict.formatted else 0.0)
        outcome: dict[str, Any] = {
            LOSS_WEIGHT: 1.0 if final else float(cfg.attempt1_loss_weight),
            "attempt": number,
            **verdict.info(),
            "attempt_reward": attempt_reward,
            "task_id": self.problem.task_id,
        }
        if not final:
            self._outcomes[SOLVER] = outcome
            if CRITIC in self.agents:
                self._phase = "critic"
                self.agent_selection = CRITIC
            else:
                self._begin_attempt2(verdict.feedback)
            return
        first = self.attempts[0].verdict
        if two_turn:
            outcome.update(
                first_attempt_correct=first.correct,
                num_attempts=number,
                fixed=not first.correct and verdict.correct,
                broken=first.correct and not verdict.correct,
            )
        self._outcomes[SOLVER] = outcome
        self.rewards[SOLVER] = attempt_reward
        if CRITIC in self.agents:
            acted = self.critic_feedback is not None
            improvement = verdict.score - first.score if acted else 0.0
            self.rewards[CRITIC] = improvement
            if acted:
                self._outcomes[CRITIC] = {**self._outcomes[CRITIC], "improvement": improvement}
        self.terminations = dict.fromkeys(self.agents, True)
        self._phase = "done"
        self.agent_selection = SOLVER

    def _critic_step(self, text: str) -> None:
        self.critic_feedback = text
        self._outcomes[CRITIC] = {LOSS_WEIGHT: 1.0}
        self._begin_attempt2(text)

    def _begin_attempt2(self, feedback: str) -> None:
        self._context = second_attempt_context(
            self.problem, self.attempts[0].text, feedback, self._settings
        )
        self._phase = "attempt2"
        self.agent_selection = SOLVER

    @property
    def done(self) -> bool:
        """Whether the episode has ended."""
        return self._phase == "done"

    def fork(self) -> Self:
        """Return an independent copy of this environment, mid-episode included (tree search).

        The configuration (problems, code runner) is shared, not copied: it is
        immutable, and a runner may hold a pool of worker processes.
        """
        return copy.deepcopy(self, {id(self.config): self.config, id(self._runner): self._runner})

    # -------------------------------------------------------------------- infos

    def _context_info(self, agent: str) -> dict[str, Any]:
        upcoming = [i for i in range(self._turn, len(self._schedule)) if self._schedule[i] == agent]
        live = not self.done and upcoming
        turn = upcoming[0] if live else self._turn
        if agent == SOLVER:
            attempts_by_then = self._schedule[: turn + 1].count(SOLVER)
            round_number = attempts_by_then if live else max(len(self.attempts), 1)
        else:
            round_number = 1
        info: dict[str, Any] = {
            STOP: list(self.config.stop),
            STRATEGY: self.strategy.value,
            ROUND: round_number,
            TURN: turn,
        }
        about_to_act = agent == SOLVER and self._phase in ("attempt1", "attempt2")
        if about_to_act and self._context.training is not None:
            info[TRAINING_MESSAGES] = copy_messages(self._context.training)
        return info

    # -------------------------------------------------------------- observation

    def observe(self, agent: str) -> Observation:
        """The chat ``agent``'s model should continue if it acted now (see the module docstring)."""
        self._check_agent(agent)
        if agent == CRITIC:
            return {"messages": self._critic_messages()}
        if self._phase in ("attempt1", "attempt2"):
            return {"messages": copy_messages(self._context.observation)}
        if not self.attempts:  # before the first reset
            return {"messages": problem_messages(self.problem, self._settings.system_prompt)}
        last = self.attempts[-1]
        return {
            "messages": [
                *copy_messages(last.context.observation),
                {"role": "assistant", "content": last.text},
            ]
        }

    def _reference(self) -> str | None:
        if not self.config.critic_sees_reference:
            return None
        if isinstance(self.problem, CodeProblem):
            return reference_program(self.problem)
        return self.problem.answer

    def _critic_prompt(self, attempt: str | None) -> list[Message]:
        return [
            {"role": "system", "content": CRITIC_SYSTEM_PROMPT},
            {
                "role": "user",
                "content": critic_user_message(self.problem, attempt, self._reference()),
            },
        ]

    def _critic_messages(self) -> list[Message]:
        messages = self._critic_prompt(self.attempts[0].text if self.attempts else None)
        if self.critic_feedback is not None:
            messages.append({"role": "assistant", "content": self.critic_feedback})
        return messages

    # ------------------------------------------------------------------ records

    def record(self) -> EpisodeRecord:
        """The episode as a JSON-ready :class:`~llm_envs.records.EpisodeRecord`.

        Each solver turn shows the prompt it was sampled on, its text, the
        verifier's verdict, its ``loss_weight`` and, where the context was
        swapped, the ``training_messages`` it is trained on.
        """
        turns = []
        for attempt in self.attempts:
            if attempt.number == 2 and self.critic_feedback is not None:
                critic_prompt = self._critic_prompt(self.attempts[0].text)
                turns.append(turn_record(CRITIC, 1, critic_prompt, self.critic_feedback))
            final = attempt is self.attempts[-1] and self.done
            details: dict[str, Any] = {
                "attempt": attempt.number,
                **attempt.verdict.info(),
                LOSS_WEIGHT: 1.0 if final else float(self.config.attempt1_loss_weight),
                "verifier_feedback": attempt.verdict.feedback,
            }
            if attempt.context.training is not None:
                details[TRAINING_MESSAGES] = copy_messages(attempt.context.training)
            turns.append(
                turn_record(
                    SOLVER, attempt.number, attempt.context.observation, attempt.text, details
                )
            )
        summary: dict[str, Any] = {
            "task_id": self.problem.task_id,
            "strategy": self.strategy.value,
            "reference_answer": (
                self.problem.answer if isinstance(self.problem, MathProblem) else None
            ),
            "attempts": len(self.attempts),
            "final_correct": self.attempts[-1].verdict.correct if self.attempts else None,
            "final_score": self.attempts[-1].verdict.score if self.attempts else None,
        }
        if self.strategy == Strategy.TWO_TURN_FEEDBACK and self.attempts:
            summary["first_attempt_correct"] = self.attempts[0].verdict.correct
            summary["feedback_source"] = "critic" if CRITIC in self._schedule else "verifier"
        return self._episode_record(
            f"{self.problem.task_id} ({self.strategy.value})", summary, turns
        )

    # ------------------------------------------------------------------- render

    def transcript(self) -> str:
        """The episode as text: the problem, the strategy, every turn verbatim with its verdict."""
        first = self.attempts[0].context if self.attempts else self._context
        lines = [
            f"Problem {self.problem.task_id} (strategy: {self.strategy.value})",
            *(f"{m['role']}: {m['content']}" for m in first.observation),
        ]
        for attempt in self.attempts:
            if attempt.number == 2:
                lines.append(f"--- feedback ---\n{attempt.context.observation[-1]['content']}")
            v = attempt.verdict
            lines.append(f"--- attempt {attempt.number} ---")
            lines.append(attempt.text)
            lines.append(f"(correct: {v.correct}, score: {v.score:g}, formatted: {v.formatted})")
        if self.done:
            lines.append(f"=== ended after {len(self.attempts)} attempt(s) ===")
        return "\n".join(lines)

    def close(self) -> None:
        """Nothing to release (a code runner's pool belongs to whoever made it)."""


raw_env, env = aec_factories(ExpertIterationEnv)
