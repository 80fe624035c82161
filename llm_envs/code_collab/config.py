"""The configuration of code collaboration: every setting, validated at construction.

:class:`CodeCollabConfig` is what ``CodeCollabEnv(config)`` takes; its fields
are also the environment's keyword arguments (``CodeCollabEnv(num_turns=3)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from llm_envs.arguments import check_int, check_number, check_timeout, describe
from llm_envs.code_collab.feedback import (
    EXTERNAL_MODES,
    ExternalMode,
    SandboxSlice,
    validate_sandbox_slice,
)
from llm_envs.code_collab.rewards import AuxBonus, check_aux_bonus
from llm_envs.tasks.code_datasets import CODE_DATASETS, load_code_problems
from llm_envs.tasks.problems import CodeProblem

__all__ = ["CodeCollabConfig"]


@dataclass(frozen=True)
class CodeCollabConfig:
    """Configuration of code collaboration; validated at construction.

    Attributes:
        problems: the problems drawn (uniformly, from the reset seed) at each reset:
            :class:`~llm_envs.tasks.CodeProblem` records, or a data set name
            (:data:`~llm_envs.tasks.CODE_DATASETS`: ``"coophumaneval"``,
            ``"humaneval"``, ``"mbpp"``, its test split), loaded at construction.
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
        aux_bonus: ``"as_written"`` (the seed's rule, the default): the
            collaboration bonus is read from main's syntax tree, so a call that
            never runs (``if False: aux(n)``) or whose result main ignores
            (``_ = aux(n)`` beside its own answer) earns it. ``"when_called"``
            (opt-in, a deviation from upstream): a program the seed would pay
            runs twice more, split, with aux's true and with varied values, and
            the bonus is the seed's times (tests the true values won - tests
            they lost) / tests passed; the hack above earns 0. It costs two
            more sandbox jobs per such program, in one more batch: about 66 ms
            instead of 12 per HumanEval program evaluated alone on 2 cores
            (``bench/aux_bonus.py``). What it guarantees and what it cannot
            stop: :mod:`llm_envs.code_collab.counterfactual`.
    """

    problems: tuple[CodeProblem, ...]
    num_agents: int = 2
    num_turns: int = 2
    external_mode: ExternalMode = "level_feedback"
    sandbox_slice: SandboxSlice = 1
    termination_threshold: float | None = None
    reward_shift: float = 0.0
    timeout: float | None = None
    aux_bonus: AuxBonus = "as_written"

    def __post_init__(self) -> None:
        object.__setattr__(self, "problems", _as_problems(self.problems))
        check_int(
            "num_agents",
            self.num_agents,
            minimum=1,
            maximum=2,
            meaning=" (2: helper and main, 1: main alone)",
        )
        check_int("num_turns", self.num_turns, minimum=1)
        if self.external_mode not in EXTERNAL_MODES:
            raise ValueError(
                f"external_mode must be one of {EXTERNAL_MODES}, got {self.external_mode!r}"
            )
        validate_sandbox_slice(self.sandbox_slice)
        if self.termination_threshold is not None:
            check_number("termination_threshold", self.termination_threshold)
        check_number("reward_shift", self.reward_shift)
        if self.timeout is not None:
            check_timeout("timeout", self.timeout)
        check_aux_bonus(self.aux_bonus)


def _as_problems(problems: object) -> tuple[CodeProblem, ...]:
    """``problems`` as a tuple of records: a data set name is loaded, anything else checked."""
    if isinstance(problems, str):
        return load_code_problems(problems)  # type: ignore[arg-type]  # the name is checked there
    fix = f"pass CodeProblem records (e.g. llm_envs.tasks.load_mbpp()) or a name in {CODE_DATASETS}"
    if isinstance(problems, CodeProblem):
        raise TypeError(
            f"problems must be a sequence of CodeProblem, got one CodeProblem "
            f"({problems.task_id!r}): wrap it in a list, problems=[problem]"
        )
    if not isinstance(problems, Iterable):
        raise TypeError(
            f"problems must be a sequence of CodeProblem, got {describe(problems)}; {fix}"
        )
    records = tuple(problems)
    for position, problem in enumerate(records):
        if not isinstance(problem, CodeProblem):
            raise TypeError(
                f"problems must be CodeProblem records, but problems[{position}] is "
                f"{describe(problem)} ({type(problem).__name__}); {fix}"
            )
    if not records:
        raise ValueError(f"problems must not be empty; {fix}")
    return records
