"""Code collaboration: a helper and a main agent write one program together (seed 004).

This is the MAGRPO setting of seed 004 as a PettingZoo ``ParallelEnv``
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
    never sees the other agent's prompts or answers (seed 004, "History"). Each
    observation extends the previous one plus the agent's answer, so a trainer
    can merge a trajectory into one sequence.

Action
    The agent's raw text. Any string is legal: fences and prose are cleaned
    away, and whatever is left is scored (see :mod:`llm_envs.rewards.code`).

Reward
    Every turn, every agent gets the team reward of the joint action
    (:func:`llm_envs.rewards.code.team_reward`, at most 4.0) plus ``reward_shift``.

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
    See :class:`CodeCollabConfig`; besides it, ``expert`` (the callable of the
    ``expert_edits`` mode), ``sandbox`` (a shared :class:`~llm_envs.sandbox.Sandbox`;
    default: the process-wide pool) and ``render_mode``.
    ``reset(options={"problem": p})`` poses ``p`` (a :class:`CodeProblem`, an index
    into ``problems`` or a ``task_id``) instead of drawing one.

Version history
    v0: initial release.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Self, TypeVar

from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from llm_envs.code_collab.experts import Expert
from llm_envs.code_collab.feedback import (
    EXTERNAL_MODES,
    ExpertEdits,
    ExternalMode,
    SandboxSlice,
    expert_feedback,
    level_feedback,
    plain_feedback,
    validate_sandbox_slice,
)
from llm_envs.code_collab.prompts import HELPER, MAIN, Role, first_prompt
from llm_envs.contract import STOP, TURN, Message, Observation
from llm_envs.records import EpisodeRecord
from llm_envs.records import TurnRecord as RecordTurn
from llm_envs.rewards.code import CodeEvaluation, clean_code, evaluate_many
from llm_envs.sandbox import Sandbox, TestReport, TestStatus
from llm_envs.tasks.problems import CodeProblem
from llm_envs.text_env import RENDER_MODES, TextEnvMixin

__all__ = [
    "DATASETS",
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

DatasetName = Literal["coophumaneval", "humaneval", "mbpp"]
DATASETS: tuple[DatasetName, ...] = ("coophumaneval", "humaneval", "mbpp")
_KNOWN_OPTIONS = frozenset({"problem"})

StepResult = tuple[
    dict[str, Observation],
    dict[str, float],
    dict[str, bool],
    dict[str, bool],
    dict[str, dict[str, Any]],
]


def load_problems(name: DatasetName) -> tuple[CodeProblem, ...]:
    """The problems of a data set by name: ``"coophumaneval"``, ``"humaneval"``, ``"mbpp"`` (test).

    Raises:
        ValueError: an unknown name.
        llm_envs.tasks.TaskDataNotFoundError: the data is nowhere to be found.
    """
    from llm_envs.tasks import load_coophumaneval, load_humaneval, load_mbpp

    loaders: dict[str, Callable[[], tuple[CodeProblem, ...]]] = {
        "coophumaneval": load_coophumaneval,
        "humaneval": load_humaneval,
        "mbpp": lambda: load_mbpp("test"),
    }
    if name not in loaders:
        raise ValueError(
            f"problems must be a sequence of CodeProblem or one of {DATASETS}, got {name!r}"
        )
    return loaders[name]()


@dataclass(frozen=True)
class CodeCollabConfig:
    """Configuration of code collaboration; validated at construction.

    Attributes:
        problems: the problems drawn (uniformly, from the reset seed) at each reset.
        num_agents: 2 (``helper`` and ``main``) or 1 (``main`` alone).
        num_turns: joint actions per episode, at least 1.
        external_mode: ``"level_feedback"``, ``"plain"`` or ``"expert_edits"``
            (see :mod:`llm_envs.code_collab.feedback`).
        sandbox_slice: the tests ``level_feedback`` shows: ``n > 0`` the first
            ``n``, ``n < 0`` the last ``|n|``, ``0``/``None``/``"all"`` every
            test. The reward always uses every test.
        termination_threshold: end the episode (terminated) once a turn's
            reward, shift included, exceeds it; None never ends early.
        reward_shift: added to the team reward (e.g. -4.0: a perfect team scores 0).
        timeout: wall-clock seconds of one program's test run (None: the pool's).
    """

    problems: tuple[CodeProblem, ...]
    num_agents: int = 2
    num_turns: int = 2
    external_mode: ExternalMode = "level_feedback"
    sandbox_slice: SandboxSlice = 1
    termination_threshold: float | None = None
    reward_shift: float = 0.0
    timeout: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.problems, str) or not all(
            isinstance(p, CodeProblem) for p in self.problems
        ):
            raise TypeError(
                "problems must be CodeProblem records (e.g. llm_envs.tasks.load_mbpp()) "
                f"or a data set name in {DATASETS}"
            )
        if not self.problems:
            raise ValueError("problems must not be empty")
        if self.num_agents not in (1, 2) or isinstance(self.num_agents, bool):
            raise ValueError(
                f"num_agents must be 2 (helper and main) or 1 (main alone), got {self.num_agents!r}"
            )
        if not isinstance(self.num_turns, int) or self.num_turns < 1:
            raise ValueError(f"num_turns must be an int >= 1, got {self.num_turns!r}")
        if self.external_mode not in EXTERNAL_MODES:
            raise ValueError(
                f"external_mode must be one of {EXTERNAL_MODES}, got {self.external_mode!r}"
            )
        validate_sandbox_slice(self.sandbox_slice)
        for name in ("termination_threshold", "reward_shift", "timeout"):
            value = getattr(self, name)
            if value is None and name != "reward_shift":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, got {value!r}")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds or None, got {self.timeout!r}")
        object.__setattr__(self, "problems", tuple(self.problems))


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
    r"""The code-collaboration environment of seed 004; see the module docstring.

    Args:
        problems: :class:`~llm_envs.tasks.CodeProblem` records, or a data set name
            (``"coophumaneval"``, the default; ``"humaneval"``; ``"mbpp"``: its
            test split).
        num_agents: see :class:`CodeCollabConfig` (and the other config arguments).
        num_turns: see :class:`CodeCollabConfig`.
        external_mode: see :class:`CodeCollabConfig`.
        sandbox_slice: see :class:`CodeCollabConfig`.
        termination_threshold: see :class:`CodeCollabConfig`.
        reward_shift: see :class:`CodeCollabConfig`.
        timeout: see :class:`CodeCollabConfig`.
        expert: ``expert(problem, helper_code, main_code) -> edits`` (a str, or
            a str per role), required by and only used with ``"expert_edits"``;
            e.g. :class:`~llm_envs.code_collab.experts.OpenAIChatExpert`.
        sandbox: the pool that runs the tests; forks share it. Default: the
            process-wide pool, started at the first test run.
        render_mode: ``"ansi"`` (``render()`` returns the transcript), ``"human"``
            (prints it) or None.

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

    metadata: dict[str, Any] = {  # noqa: RUF012 (PettingZoo's convention: a class-level dict)
        "name": "code_collab_v0",
        "render_modes": list(RENDER_MODES),
        "is_parallelizable": True,
    }

    def __init__(
        self,
        problems: Sequence[CodeProblem] | DatasetName = "coophumaneval",
        num_agents: int = 2,
        num_turns: int = 2,
        external_mode: ExternalMode = "level_feedback",
        sandbox_slice: SandboxSlice = 1,
        termination_threshold: float | None = None,
        reward_shift: float = 0.0,
        timeout: float | None = None,
        expert: Expert | None = None,
        sandbox: Sandbox | None = None,
        render_mode: str | None = None,
    ) -> None:
        if isinstance(problems, str):
            problems = load_problems(problems)
        self.config = CodeCollabConfig(
            problems=tuple(problems),
            num_agents=num_agents,
            num_turns=num_turns,
            external_mode=external_mode,
            sandbox_slice=sandbox_slice,
            termination_threshold=termination_threshold,
            reward_shift=reward_shift,
            timeout=timeout,
        )
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
        self.possible_agents: list[str] = [HELPER, MAIN] if num_agents == 2 else [MAIN]
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
        return {"messages": [_copy_message(m) for m in self._chats[agent]]}

    @property
    def done(self) -> bool:
        """Whether the episode has ended (or not started)."""
        return not self.agents

    # -------------------------------------------------------------------- fork

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
        turns: list[RecordTurn] = []
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
                turns.append(
                    {
                        "agent": agent,
                        "round": record.turn + 1,
                        # The chat alternates user and assistant: turn t was sampled
                        # on its first 2t + 1 messages.
                        "prompt": [
                            _copy_message(m) for m in self._chats[agent][: 2 * record.turn + 1]
                        ],
                        "text": record.actions.get(agent, ""),
                        "details": details,
                    }
                )
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
        return {
            "env": self.metadata["name"],
            "title": f"{self.problem.task_id} ({self.problem.entry_point})",
            "summary": summary,
            "turns": turns,
        }

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


def _copy_message(message: Message) -> Message:
    return {"role": message["role"], "content": message["content"]}


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
    groups: dict[tuple[int, float | None], list[int]] = {}
    for i, e in enumerate(envs):
        groups.setdefault((id(e.sandbox), e.config.timeout), []).append(i)
    evaluations: list[CodeEvaluation | None] = [None] * len(envs)
    for members in groups.values():
        first = envs[members[0]]
        done = evaluate_many(
            [items[i] for i in members], first.sandbox, timeout=first.config.timeout
        )
        for i, evaluation in zip(members, done, strict=True):
            evaluations[i] = evaluation
    results = []
    for e, a, maybe in zip(envs, actions, evaluations, strict=True):
        assert maybe is not None
        results.append(e._finish(a, maybe))
    return results


# ------------------------------------------------------------------------- the AEC form

_T = TypeVar("_T")


class _Forwarded(Generic[_T]):
    """An attribute that lives on the wrapped PettingZoo conversion."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> _T:
        if obj is None:
            return self  # type: ignore[return-value]
        value: _T = getattr(obj._conversion, self.name)
        return value

    def __set__(self, obj: Any, value: _T) -> None:
        setattr(obj._conversion, self.name, value)


class CodeCollabAECEnv(AECEnv[str, Observation, str | None]):
    """The AEC form: PettingZoo's ``parallel_to_aec`` conversion of :class:`CodeCollabEnv`.

    Every call goes to PettingZoo's ``parallel_to_aec_wrapper``: ``helper`` then
    ``main`` act, and the parallel env steps after ``main``. This class exists
    because the conversion alone reports the *parallel* env as ``unwrapped``,
    which has no ``observe``/``agent_selection``, and ``api_test`` rejects a
    conversion wrapper as ``unwrapped``; this class is its own ``unwrapped``
    and adds :meth:`fork` (a deep copy that shares the sandbox).
    """

    agents: _Forwarded[list[str]] = _Forwarded()
    agent_selection: _Forwarded[str] = _Forwarded()
    rewards: _Forwarded[dict[str, float]] = _Forwarded()
    _cumulative_rewards: _Forwarded[dict[str, float]] = _Forwarded()
    terminations: _Forwarded[dict[str, bool]] = _Forwarded()
    truncations: _Forwarded[dict[str, bool]] = _Forwarded()
    infos: _Forwarded[dict[str, dict[str, Any]]] = _Forwarded()

    def __init__(self, parallel: CodeCollabEnv) -> None:
        super().__init__()
        self._conversion = parallel_to_aec_wrapper(parallel)
        self.metadata = dict(self._conversion.metadata)
        self.possible_agents = list(parallel.possible_agents)
        self.render_mode = parallel.render_mode

    @property
    def parallel_env(self) -> CodeCollabEnv:
        """The parallel environment underneath (its problem, history and transcript)."""
        env: CodeCollabEnv = self._conversion.env
        return env

    def observation_space(self, agent: str) -> Any:
        """The parallel env's observation space."""
        return self._conversion.observation_space(agent)

    def action_space(self, agent: str) -> Any:
        """The parallel env's action space."""
        return self._conversion.action_space(agent)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset the parallel env (see :meth:`CodeCollabEnv.reset`)."""
        self._conversion.reset(seed=seed, options=options)

    def step(self, action: str | None) -> None:
        """Record the selected agent's text; after ``main``, step the parallel env."""
        self._conversion.step(action)

    def observe(self, agent: str) -> Observation:
        """The chat ``agent``'s model continues next."""
        observation: Observation = self._conversion.observe(agent)
        return observation

    def fork(self) -> Self:
        """An independent copy mid-episode (the parallel env inside forks cheaply)."""
        return copy.deepcopy(self)

    def render(self) -> str | None:
        """See :meth:`CodeCollabEnv.render`."""
        return self.parallel_env.render()

    def close(self) -> None:
        """See :meth:`CodeCollabEnv.close`."""
        self.parallel_env.close()

    def __str__(self) -> str:
        return "code_collab_v0"


def parallel_env(**kwargs: Any) -> CodeCollabEnv:
    """The parallel environment (joint actions): :class:`CodeCollabEnv` with ``kwargs``."""
    return CodeCollabEnv(**kwargs)


def raw_env(**kwargs: Any) -> CodeCollabAECEnv:
    """The AEC form without lifecycle checks."""
    return CodeCollabAECEnv(CodeCollabEnv(**kwargs))


def env(**kwargs: Any) -> AECEnv[str, Observation, str | None]:
    """The AEC form as most users want it: with PettingZoo's order enforcement."""
    return OrderEnforcingWrapper(raw_env(**kwargs))
