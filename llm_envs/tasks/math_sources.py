"""The math problems of a task by name, for the families that pose questions with answers.

``math_problems("arithmetic", "train", seed)`` is a million procedural
problems that cost nothing until read; the ``eval`` split draws from another
seed, so a trained model is scored on problems it has (almost surely) not
trained on. ``gsm8k`` reads the data set's own train and test splits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

__all__ = ["MATH_TASKS", "LazyMap", "math_problems"]

MATH_TASKS = ("default", "arithmetic", "gsm8k")
"""The task names :func:`math_problems` takes (``default`` is ``arithmetic``)."""


def math_problems(
    task: str,
    split: Literal["train", "eval"],
    seed: int,
    task_kwargs: Mapping[str, Any] | None = None,
) -> Sequence[Any]:
    """The :class:`~llm_envs.tasks.MathProblem` sequence of ``task`` for ``split``.

    Args:
        task: ``default``/``arithmetic`` (procedural) or ``gsm8k``.
        split: ``train`` or ``eval``.
        seed: the run's seed (arithmetic problems; ``eval`` uses ``seed + 1``).
        task_kwargs: :class:`~llm_envs.tasks.ArithmeticTask` settings; a ``seed``
            among them replaces the run's.

    Raises:
        ValueError: an unknown task, or ``task_kwargs`` for a task without settings.
    """
    from llm_envs.tasks import ArithmeticTask, load_gsm8k

    settings = dict(task_kwargs or {})
    if task in ("default", "arithmetic"):
        if "operations" in settings:  # JSON gives a list; the task wants a tuple
            settings["operations"] = tuple(settings["operations"])
        settings.setdefault("num_problems", 1_000_000)
        seed = settings.pop("seed", seed)  # a seed of the task's own
        return ArithmeticTask(seed=seed if split == "train" else seed + 1, **settings)
    if settings:
        raise ValueError(
            f"task_kwargs are settings of the arithmetic task, got {settings} with "
            f"task={task!r}; use task='arithmetic' or drop them"
        )
    if task == "gsm8k":
        return load_gsm8k("train" if split == "train" else "test")
    raise ValueError(f"unknown task {task!r}; choose default, arithmetic or gsm8k")


class LazyMap(Sequence[Any]):
    """``items`` with ``fn`` applied on access (a million-problem task costs nothing).

    Example:
        >>> squares = LazyMap(range(10**9), lambda x: x * x)
        >>> len(squares), squares[3], squares[1:3]
        (1000000000, 9, [1, 4])
    """

    def __init__(self, items: Sequence[Any], fn: Callable[[Any], Any]) -> None:
        self.items, self.fn = items, fn

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self.fn(x) for x in self.items[index]]
        return self.fn(self.items[index])
