"""The configuration of code collaboration: every setting, validated at construction.

:class:`CodeCollabConfig` is what ``CodeCollabEnv(config)`` takes; its fields
are also the environment's keyword arguments (``CodeCollabEnv(num_turns=3)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_envs.code_collab.feedback import (
    EXTERNAL_MODES,
    ExternalMode,
    SandboxSlice,
    validate_sandbox_slice,
)
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
        if isinstance(self.problems, str):
            object.__setattr__(self, "problems", load_code_problems(self.problems))
        if not all(isinstance(p, CodeProblem) for p in self.problems):
            raise TypeError(
                "problems must be CodeProblem records (e.g. llm_envs.tasks.load_mbpp()) "
                f"or a data set name in {CODE_DATASETS}"
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
