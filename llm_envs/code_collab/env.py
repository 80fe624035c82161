"""Code collaboration: a helper and a main agent write one program together (the MAGRPO paper).

This is the MAGRPO setting of the MAGRPO paper as a PettingZoo ``ParallelEnv``
(:func:`parallel_env`), with its AEC form (:func:`env`) built by PettingZoo's
``parallel_to_aec`` conversion.

Agents
    ``"helper"`` writes a function ``aux``; ``"main"`` writes the problem's entry
    point and may call ``aux``. With ``num_agents=1`` only ``"main"`` plays: plain
    single-agent code generation on the same problems and reward.

Turn order
    Simultaneous: every turn is one joint action (both texts at once). The AEC
    form asks ``helper`` then ``main`` and steps the parallel env after ``main``.

Observation
    ``{"messages": [...]}``, a growing chat per agent: its turn-1 prompt, then for
    each later turn its own previous answer (assistant) and a new user message
    with the feedback of ``external_mode`` and the revise instruction. An agent
    never sees the other agent's prompts or answers (the MAGRPO paper, "History"). Each
    observation extends the previous one plus the agent's answer, so a trainer
    can merge a trajectory into one sequence.

Action
    The agent's raw text. Any string is legal: fences and prose are cleaned
    away, and whatever is left is scored (see :mod:`llm_envs.code_collab.rewards`).

Reward
    Every turn, every agent gets the team reward of the joint action
    (:func:`llm_envs.code_collab.rewards.team_reward`, at most 4.0) plus ``reward_shift``.

Termination
    ``terminations`` when a turn's reward (shift included) exceeds
    ``termination_threshold``; ``truncations`` after ``num_turns`` turns.

Infos
    Context (for the upcoming turn): ``stop`` (``[]``), ``turn`` (0-based index of
    the next turn). Outcome (of the last joint action, the same for every agent):
    the reward breakdown ``level1``, ``level2``, ``level3``, ``bonus``, ``total``
    (unshifted), ``passed``, ``total_tests``, ``pass_rate``; the diagnostics
    ``aux_defined``, ``main_defined``, ``syntax_ok``, ``calls_aux``,
    ``thin_wrapper``, ``discarded_aux_call``, ``sandbox_status``; the combined
    ``program`` and the ``task_id``.

Arguments:
    Give a :class:`CodeCollabConfig`, its fields as keywords, or both (the
    keywords replace those fields of the config); besides it, ``expert`` (the
    callable of the ``expert_edits`` mode), ``sandbox`` (a shared
    :class:`~llm_envs.sandbox.Sandbox`; default: the process-wide pool) and
    ``render_mode``.
    ``reset(options={"problem": p})`` poses ``p`` (a :class:`CodeProblem`, an index
    into ``problems`` or a ``task_id``) instead of drawing one.

Version history
    v0: initial release.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Self

from pettingzoo import ParallelEnv

from llm_envs.code_collab.config import CodeCollabConfig
from llm_envs.code_collab.experts import Expert
from llm_envs.code_collab.feedback import (
    ExpertEdits,
    expert_feedback,
    level_feedback,
    plain_feedback,
)
from llm_envs.code_collab.prompts import HELPER, MAIN, Role, first_prompt
from llm_envs.code_collab.rewards import CodeEvaluation, clean_code, evaluate_many
from llm_envs.contract import STOP, TURN, Message, Observation, copy_messages
from llm_envs.factories import parallel_factories
from llm_envs.parallel_aec import ParallelAECView
from llm_envs.records import EpisodeRecord, turn_record
from llm_envs.sandbox import Sandbox, TestReport, TestStatus
from llm_envs.tasks.code_datasets import CODE_DATASETS, CodeDatasetName, load_code_problems
from llm_envs.tasks.problems import CodeProblem
from llm_envs.text_env import TextEnvMixin, env_metadata, resolve_config

__all__ = [
    "DATASETS",
    "DEFAULT_DATASET",
    "CodeCollabAECEnv",
    "CodeCollabConfig",
    "CodeCollabEnv",
    "TurnRecord",
    "env",
    "load_problems",
    "parallel_env",
    "raw_env",
    "step_batch",
]

DatasetName = CodeDatasetName
DATASETS = CODE_DATASETS
"""The data set names ``problems`` takes (:data:`llm_envs.tasks.CODE_DATASETS`)."""
load_problems = load_code_problems
"""The problems of a data set by name (:func:`llm_envs.tasks.load_code_problems`)."""
DEFAULT_DATASET: Final[CodeDatasetName] = "coophumaneval"
"""The problems of an environment built without ``problems`` or a config."""
_KNOWN_OPTIONS = frozenset({"problem"})

StepResult = tuple[
    dict[str, Observation],
    dict[str, float],
    dict[str, bool],
    dict[str, bool],
    dict[str, dict[str, Any]],
]


@dataclass(frozen=True)
class TurnRecord:
    """One joint action of an episode, for the transcript.

    Attributes:
        turn: 0-based index.
        actions: each agent's raw text.
        evaluation: the evaluated program, test report and reward breakdown.
        reward: what each agent received (shift included).
        feedback: each agent's next prompt (empty when the episode ended).
    """

    turn: int
    actions: Mapping[str, str]
    evaluation: CodeEvaluation
    reward: float
    feedback: Mapping[str, str] = field(default_factory=dict)


class CodeCollabEnv(TextEnvMixin, ParallelEnv[str, Observation, str]):
    r"""The code-collaboration environment of the MAGRPO paper; see the module docstring.

    Args:
        config: a :class:`CodeCollabConfig`; None builds one from ``overrides``
            (with ``problems="coophumaneval"`` unless given).
        expert: ``expert(problem, helper_code, main_code) -> edits`` (a str, or
            a str per role), required by and only used with ``"expert_edits"``;
            e.g. :class:`~llm_envs.code_collab.experts.OpenAIChatExpert`.
        sandbox: the pool that runs the tests; forks share it. Default: the
            process-wide pool, started at the first test run.
        render_mode: ``"ansi"`` (``render()`` returns the transcript), ``"human"``
            (prints it) or None.
        **overrides: :class:`CodeCollabConfig` fields (``problems="mbpp"``,
            ``num_turns=3``...), applied on top of ``config`` (see
            :func:`~llm_envs.text_env.resolve_config`).

    Example:
        >>> from llm_envs.tasks import CodeProblem
        >>> p = CodeProblem("demo/0", "def double(x):\n", "double", ("assert double(2) == 4",))
        >>> game = CodeCollabEnv(problems=[p], num_turns=1)
        >>> observations, infos = game.reset(seed=0)
        >>> game.agents, infos["main"]
        (['helper', 'main'], {'stop': [], 'turn': 0})
        >>> helper, main = "def aux(x):\n    return x + x", "def double(x):\n    return aux(x)"
        >>> _, rewards, _, truncations, infos = game.step({"helper": helper, "main": main})
        >>> rewards, truncations["main"], infos["main"]["passed"]
        ({'helper': 3.0, 'main': 3.0}, True, 1)
    """

    metadata = env_metadata("code_collab_v0", is_parallelizable=True)

    def __init__(
        self,
        config: CodeCollabConfig | None = None,
        *,
        expert: Expert | None = None,
        sandbox: Sandbox | None = None,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        self.config = resolve_config(
            CodeCollabConfig,
            config,
            overrides,
            owner="CodeCollabEnv",
            defaults={"problems": DEFAULT_DATASET},
            other_arguments=("expert", "sandbox", "render_mode"),
        )
        external_mode = self.config.external_mode
        if external_mode == "expert_edits" and not callable(expert):
            raise ValueError(
                "external_mode='expert_edits' needs expert=: a callable "
                "(problem, helper_code, main_code) -> edits, e.g. "
                "llm_envs.code_collab.OpenAIChatExpert(model=..., base_url=...)"
            )
        if external_mode != "expert_edits" and expert is not None:
            raise ValueError(
                f"expert is only used with external_mode='expert_edits', got "
                f"external_mode={external_mode!r}; drop expert= or change the mode"
            )
        if sandbox is not None and not isinstance(sandbox, Sandbox):
            raise TypeError(
                f"sandbox must be an llm_envs.sandbox.Sandbox or None, got {type(sandbox).__name__}"
            )
        self.expert = expert
        self.sandbox = sandbox
        self.possible_agents: list[str] = [HELPER, MAIN] if self.config.num_agents == 2 else [MAIN]
        self._init_text_env(self.possible_agents, render_mode)
        self._task_index = {p.task_id: i for i, p in enumerate(self.config.problems)}
        self.agents: list[str] = []
        self.problem: CodeProblem = self.config.problems[0]
        self.turn = 0
        self.history: list[TurnRecord] = []
        self._chats: dict[str, list[Message]] = {}
        self.infos: dict[str, dict[str, Any]] = {}

    # --------------------------------------------------------------- lifecycle

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Observation], dict[str, dict[str, Any]]]:
        """Pose a problem (drawn, or ``options["problem"]``) and clear the state."""
        options = self._begin_reset(seed, options, _KNOWN_OPTIONS)
        if "problem" in options:
            self.problem = self._resolve_problem(options["problem"])
        else:
            problems = self.config.problems
            self.problem = problems[int(self.np_random.integers(len(problems)))]
        self.agents = list(self.possible_agents)
        self.turn = 0
        self.history = []
        n = self.config.num_agents
        self._chats = {
            a: [{"role": "user", "content": first_prompt(self.problem, _role(a), n)}]
            for a in self.agents
        }
        self.infos = {a: self._context_info() for a in self.agents}
        return self._observations(), {a: dict(i) for a, i in self.infos.items()}

    def _resolve_problem(self, value: Any) -> CodeProblem:
        problems = self.config.problems
        if isinstance(value, CodeProblem):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            if not -len(problems) <= value < len(problems):
                raise IndexError(
                    f"options['problem'] index {value} is out of range for {len(problems)} problems"
                )
            return problems[value]
        if isinstance(value, str):
            if value not in self._task_index:
                raise KeyError(
                    f"options['problem'] names task {value!r}, which is not among the "
                    f"env's {len(problems)} problems; pass the CodeProblem itself"
                )
            return problems[self._task_index[value]]
        raise TypeError(
            "options['problem'] must be a CodeProblem, an index into problems or a task_id, "
            f"got {type(value).__name__}"
        )

    def step(self, actions: Mapping[str, str]) -> StepResult:
        """Evaluate the joint action, reward every agent, and prompt the next turn."""
        return step_batch([self], [actions])[0]

    def _prepare(self, actions: Mapping[str, str]) -> tuple[CodeProblem, str, str]:
        """Check a joint action; return what :func:`evaluate_many` needs."""
        if not self.agents:
            raise RuntimeError(
                "step() before reset() or after the episode ended; call reset() to start one"
            )
        if not isinstance(actions, Mapping):
            raise TypeError(
                "a parallel step takes a dict {agent: text} for every live agent, got "
                f"{type(actions).__name__}"
            )
        missing = [a for a in self.agents if a not in actions]
        unknown = [a for a in actions if a not in self.agents]
        if missing or unknown:
            raise ValueError(
                f"actions must hold one text for each live agent {self.agents}; "
                f"missing {missing}, unknown {unknown}"
            )
        for agent, text in actions.items():
            if not isinstance(text, str):
                raise TypeError(f"the action of {agent} must be its text (a str), got {text!r:.80}")
        return self.problem, actions.get(HELPER, ""), actions[MAIN]

    def _finish(self, actions: Mapping[str, str], evaluation: CodeEvaluation) -> StepResult:
        """Apply an evaluated joint action: rewards, the end test, histories and next prompts."""
        cfg = self.config
        reward = evaluation.reward.total + cfg.reward_shift
        self.turn += 1
        solved = cfg.termination_threshold is not None and reward > cfg.termination_threshold
        out_of_turns = self.turn >= cfg.num_turns
        acting = list(self.agents)
        for agent in acting:
            self._chats[agent] = [
                *self._chats[agent],
                {"role": "assistant", "content": actions[agent]},
            ]
        feedback: dict[str, str] = {}
        if not (solved or out_of_turns):
            feedback = self._feedback(actions, evaluation)
            for agent in acting:
                self._chats[agent] = [
                    *self._chats[agent],
                    {"role": "user", "content": feedback[agent]},
                ]
        self.history.append(TurnRecord(self.turn - 1, dict(actions), evaluation, reward, feedback))

        outcome = _outcome_info(evaluation)
        self.infos = {a: {**self._context_info(), **outcome} for a in acting}
        observations = self._observations()
        rewards = dict.fromkeys(acting, reward)
        terminations = dict.fromkeys(acting, solved)
        truncations = dict.fromkeys(acting, out_of_turns and not solved)
        if solved or out_of_turns:
            self.agents = []
        infos = {a: dict(i) for a, i in self.infos.items()}
        return observations, rewards, terminations, truncations, infos

    def _feedback(self, actions: Mapping[str, str], evaluation: CodeEvaluation) -> dict[str, str]:
        cfg = self.config
        if cfg.external_mode == "plain":
            return {a: plain_feedback(self.problem, _role(a)) for a in self.agents}
        if cfg.external_mode == "expert_edits":
            assert self.expert is not None
            edits: ExpertEdits = self.expert(
                self.problem,
                clean_code(actions.get(HELPER, "")),
                clean_code(actions[MAIN]),
            )
            return {a: expert_feedback(self.problem, _role(a), edits) for a in self.agents}
        return {
            a: level_feedback(
                evaluation, _role(a), num_agents=cfg.num_agents, sandbox_slice=cfg.sandbox_slice
            )
            for a in self.agents
        }

    def _context_info(self) -> dict[str, Any]:
        return {STOP: [], TURN: self.turn}

    def _observations(self) -> dict[str, Observation]:
        # Fresh lists and dicts: a caller editing an observation must not edit the env.
        return {a: self.observe(a) for a in self._chats}

    def observe(self, agent: str) -> Observation:
        """The chat ``agent``'s model continues next (after the end: the whole conversation)."""
        self._check_agent(agent)
        return {"messages": copy_messages(self._chats[agent])}

    @property
    def done(self) -> bool:
        """Whether the episode has ended (or not started)."""
        return not self.agents

    # -------------------------------------------------------------------- fork

    @staticmethod
    def step_batch(
        envs: Sequence[CodeCollabEnv], actions: Sequence[Mapping[str, str]]
    ) -> list[StepResult]:
        """Step many forks at once (:func:`step_batch`): tree search's fast path."""
        return step_batch(envs, actions)

    def fork(self) -> Self:
        """An independent copy of this environment mid-episode, for tree search.

        Cheap: histories are copied as lists (their messages and records are never
        mutated in place); the problems, the expert and the sandbox pool are
        shared, not copied. ``copy.deepcopy(env)`` does the same.
        """
        clone = copy.copy(self)
        clone.agents = list(self.agents)
        clone.history = list(self.history)
        clone._chats = {a: list(chat) for a, chat in self._chats.items()}
        clone.infos = {a: dict(info) for a, info in self.infos.items()}
        if self._np_random_ready:
            clone.np_random = copy.deepcopy(self.np_random)
        return clone

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self.fork()

    # ----------------------------------------------------------------- records

    def record(self) -> EpisodeRecord:
        """The episode as a JSON-ready :class:`~llm_envs.records.EpisodeRecord`.

        One entry per agent and turn (round = 1-based turn): the chat the agent
        was shown, its raw text and, in ``details``, the code the env took from
        it (``code``, with its ``syntax_error``) and the ``feedback`` it got for
        the next turn. The joint action's outcome sits on the ``main`` agent's
        entry: the assembled ``program``, ``tests`` (passed / total), one line
        per test in ``test_results``, the ``sandbox_status`` and its error, and
        the ``reward`` (shift included) with its parts.
        """
        turns = []
        for record in self.history:
            evaluation = record.evaluation
            program, report, parts = evaluation.program, evaluation.report, evaluation.reward
            for agent in self.possible_agents:
                function = program.aux if agent == HELPER else program.main
                details: dict[str, Any] = {
                    "code": function.source or None,
                    "syntax_error": (
                        function.syntax_error.describe() if function.syntax_error else None
                    ),
                }
                if agent == MAIN:
                    details |= {
                        "program": program.source or None,
                        "tests": f"{parts.passed}/{parts.total_tests} passed",
                        "test_results": _test_lines(self.problem, report),
                        "sandbox_status": report.status.value if report else "not_run",
                        "sandbox_error": report.error if report else None,
                        "reward": record.reward,
                        "reward_parts": (
                            f"level1 {parts.level1:g}, level2 {parts.level2:g}, "
                            f"level3 {parts.level3:g}, bonus {parts.bonus:g}"
                        ),
                        "calls_aux": bool(program.aux_usage and program.aux_usage.calls_aux),
                    }
                details["feedback"] = record.feedback.get(agent)
                # The chat alternates user and assistant: turn t was sampled on its
                # first 2t + 1 messages.
                prompt = self._chats[agent][: 2 * record.turn + 1]
                text = record.actions.get(agent, "")
                turns.append(turn_record(agent, record.turn + 1, prompt, text, details))
        last = self.history[-1].evaluation.reward if self.history else None
        summary: dict[str, Any] = {
            "task_id": self.problem.task_id,
            "entry_point": self.problem.entry_point,
            "external_mode": self.config.external_mode,
            "turns": len(self.history),
            "rewards": [r.reward for r in self.history],
            "pass_rates": [r.evaluation.reward.pass_rate for r in self.history],
            "final_pass_rate": last.pass_rate if last else None,
            "solved": bool(last and last.total_tests and last.passed == last.total_tests),
        }
        title = f"{self.problem.task_id} ({self.problem.entry_point})"
        return self._episode_record(title, summary, turns)

    # ------------------------------------------------------------------ render

    def transcript(self) -> str:
        """The episode as text: the problem, then each turn's code, reward and feedback."""
        lines = [f"Problem {self.problem.task_id} (entry point {self.problem.entry_point})"]
        for record in self.history:
            reward = record.evaluation.reward
            lines.append(f"\n=== Turn {record.turn + 1} ===")
            for agent in self.possible_agents:
                lines += [f"--- {agent} ---", record.actions.get(agent, "")]
            lines.append(
                f"--- reward {record.reward:g}: level1 {reward.level1:g}, level2 "
                f"{reward.level2:g}, level3 {reward.level3:g} ({reward.passed}/"
                f"{reward.total_tests} tests), bonus {reward.bonus:g} ---"
            )
            for agent, text in record.feedback.items():
                lines += [f"--- feedback to {agent} ---", text]
        if self.history and not self.agents:
            lines.append(f"\n=== ended after {len(self.history)} turn(s) ===")
        return "\n".join(lines)

    def close(self) -> None:
        """Nothing to release: a shared sandbox belongs to its creator."""


def _role(agent: str) -> Role:
    return HELPER if agent == HELPER else MAIN


def _test_lines(problem: CodeProblem, report: TestReport | None) -> list[str]:
    # One line per test: its outcome, the error of a failure, and the test itself.
    # No report: the program did not compile or had no entry point, so nothing ran.
    if report is None:
        return [f"{TestStatus.NOT_RUN.value}: {test}" for test in problem.tests]
    lines = []
    for test, outcome in zip(problem.tests, report.outcomes, strict=False):
        error = f" ({outcome.error_type}: {outcome.message})" if outcome.error_type else ""
        lines.append(f"{outcome.status.value}{error}: {test}")
    return lines


def _outcome_info(evaluation: CodeEvaluation) -> dict[str, Any]:
    program, report, reward = evaluation.program, evaluation.report, evaluation.reward
    usage = program.aux_usage
    return {
        **reward.as_dict(),
        "pass_rate": reward.pass_rate,
        "aux_defined": program.aux.found,
        "main_defined": program.main.found,
        "syntax_ok": program.runnable,
        "calls_aux": bool(usage and usage.calls_aux),
        "thin_wrapper": bool(usage and usage.calls_aux and usage.thin_wrapper),
        "discarded_aux_call": bool(usage and usage.calls_aux and usage.discards_result),
        "sandbox_status": report.status.value if report is not None else "not_run",
        "program": program.source,
        "task_id": program.problem.task_id,
    }


def step_batch(
    envs: Sequence[CodeCollabEnv], actions: Sequence[Mapping[str, str]]
) -> list[StepResult]:
    """Step many environments at once, their programs run in one sandbox batch.

    Equivalent to ``[e.step(a) for e, a in zip(envs, actions)]`` but the test
    runs of every environment sharing a sandbox (and timeout) go to
    :meth:`~llm_envs.sandbox.Sandbox.run_tests_many` together, over all its
    workers: the way to expand a MAGRPO node's G (align) or G^N (cross) joint
    actions from ``fork()`` copies.

    Raises:
        ValueError: ``envs`` and ``actions`` differ in length, or an env appears twice.
    """
    if len(envs) != len(actions):
        raise ValueError(f"got {len(envs)} envs and {len(actions)} joint actions; give one each")
    if len({id(e) for e in envs}) != len(envs):
        raise ValueError("an environment appears twice in one step_batch; fork() it instead")
    items = [e._prepare(a) for e, a in zip(envs, actions, strict=True)]
    groups: dict[tuple[int, float | None, str], list[int]] = {}
    for i, e in enumerate(envs):
        key = (id(e.sandbox), e.config.timeout, e.config.aux_bonus)
        groups.setdefault(key, []).append(i)
    evaluations: list[CodeEvaluation | None] = [None] * len(envs)
    for members in groups.values():
        first = envs[members[0]]
        done = evaluate_many(
            [items[i] for i in members],
            first.sandbox,
            timeout=first.config.timeout,
            aux_bonus=first.config.aux_bonus,
        )
        for i, evaluation in zip(members, done, strict=True):
            evaluations[i] = evaluation
    results = []
    for e, a, maybe in zip(envs, actions, evaluations, strict=True):
        assert maybe is not None
        results.append(e._finish(a, maybe))
    return results


# ------------------------------------------------------------------------- the AEC form


class CodeCollabAECEnv(ParallelAECView[CodeCollabEnv]):
    """The AEC form: PettingZoo's ``parallel_to_aec`` conversion of :class:`CodeCollabEnv`.

    ``helper`` then ``main`` act, and the parallel env steps after ``main``;
    :attr:`parallel_env` is the :class:`CodeCollabEnv` underneath (its problem,
    history and transcript). See :class:`~llm_envs.parallel_aec.ParallelAECView`.
    """


parallel_env, raw_env, env = parallel_factories(CodeCollabEnv, CodeCollabAECEnv)
