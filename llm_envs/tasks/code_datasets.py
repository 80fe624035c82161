"""The code data sets by name: one call from ``"mbpp"`` to its :class:`CodeProblem` records.

Environments and trainers take a data set name where they take problems
(``parallel_env(problems="humaneval")``); this module is the one place that
maps the names to the loaders. It parses data, never executes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

from llm_envs.tasks.coophumaneval import load_coophumaneval
from llm_envs.tasks.humaneval import load_humaneval
from llm_envs.tasks.mbpp import load_mbpp
from llm_envs.tasks.problems import CodeProblem

__all__ = ["CODE_DATASETS", "CodeDatasetName", "code_problems", "load_code_problems"]

CodeDatasetName = Literal["coophumaneval", "humaneval", "mbpp"]
"""The name of a code data set."""

CODE_DATASETS: tuple[CodeDatasetName, ...] = get_args(CodeDatasetName)
"""Every code data set name: ``("coophumaneval", "humaneval", "mbpp")``."""

_LOADERS: dict[str, Callable[[], tuple[CodeProblem, ...]]] = {
    "coophumaneval": load_coophumaneval,
    "humaneval": load_humaneval,
    "mbpp": lambda: load_mbpp("test"),
}


def load_code_problems(name: CodeDatasetName) -> tuple[CodeProblem, ...]:
    """The problems of a code data set: ``"coophumaneval"``, ``"humaneval"``, ``"mbpp"`` (test).

    Raises:
        ValueError: an unknown name.
        llm_envs.tasks.TaskDataNotFoundError: the data is nowhere to be found.

    Example:
        >>> load_code_problems("coophumaneval")[0].task_id  # doctest: +SKIP
        'CoopHumanEval/0'
    """
    if name not in _LOADERS:
        raise ValueError(
            f"unknown code data set {name!r}: give CodeProblem records or one of {CODE_DATASETS}"
        )
    return _LOADERS[name]()


def code_problems(name: str, split: Literal["train", "eval"]) -> tuple[CodeProblem, ...]:
    """The problems of a code data set to train or to evaluate on.

    MBPP trains on its ``train`` split (120 problems) and is evaluated on its
    ``test`` split; HumanEval and CoopHumanEval have one split, so both are
    the whole data set.

    Raises:
        ValueError: an unknown name.
        llm_envs.tasks.TaskDataNotFoundError: the data is nowhere to be found.
    """
    if name == "mbpp" and split == "train":
        return load_mbpp("train")
    return load_code_problems(name)  # type: ignore[arg-type]  # an unknown name raises there
