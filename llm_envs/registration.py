"""Registers every llm-envs environment with PettingZoo's registry.

Importing :mod:`llm_envs` runs :func:`register_all`, after which
``pettingzoo.make("aec", "llm_envs/Debate-v0", num_agents=3)`` builds an
environment. Entry points are ``"module:attr"`` strings, so registering imports
nothing heavy.

An entry also names the environment's *family* (:mod:`llm_envs.family`): the
name a trainer's ``--env`` takes and the import path of its family class, so
one line is all a new environment adds for every trainer, the evaluator and
the report to take it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import pettingzoo

if TYPE_CHECKING:
    from llm_envs.family import Family

__all__ = [
    "ENVIRONMENTS",
    "EnvEntry",
    "family_class",
    "family_names",
    "make_family",
    "metric_title",
    "register_all",
]


class EnvEntry(NamedTuple):
    """One registry entry: the API flavour, the id, the factory's import path, its family.

    ``family`` is the family's name (``--env``) and ``family_entry_point`` the
    ``"module:attr"`` of its :class:`~llm_envs.family.Family` class; entries
    of one family (an AEC and a parallel form) repeat both.
    """

    env_type: Literal["aec", "parallel"]
    id: str
    entry_point: str
    family: str = ""
    family_entry_point: str = ""


ENVIRONMENTS: tuple[EnvEntry, ...] = (
    EnvEntry(
        "aec",
        "llm_envs/Debate-v0",
        "llm_envs.debate.env:env",
        "debate",
        "llm_envs.debate.family:DebateFamily",
    ),
    EnvEntry(
        "aec",
        "llm_envs/ExpertIteration-v0",
        "llm_envs.expert_iteration.env:env",
        "expert_iteration",
        "llm_envs.expert_iteration.family:ExpertIterationFamily",
    ),
    EnvEntry(
        "aec",
        "llm_envs/CodeCollab-v0",
        "llm_envs.code_collab.env:env",
        "code_collab",
        "llm_envs.code_collab.family:CodeCollabFamily",
    ),
    EnvEntry(
        "parallel",
        "llm_envs/CodeCollab-v0",
        "llm_envs.code_collab.env:parallel_env",
        "code_collab",
        "llm_envs.code_collab.family:CodeCollabFamily",
    ),
    EnvEntry(
        "aec",
        "llm_envs/TextArena-v0",
        "llm_envs.textarena.env:env",
        "textarena",
        "llm_envs.textarena.family:TextArenaFamily",
    ),
)
"""Every registered environment, in the order the docs list them."""


def register_all() -> None:
    """Register every entry of :data:`ENVIRONMENTS` that is not registered yet."""
    from pettingzoo.env_registry.registration import aec_registry, parallel_registry

    for entry in ENVIRONMENTS:
        registry = aec_registry if entry.env_type == "aec" else parallel_registry
        if entry.id not in registry:
            pettingzoo.register(entry.env_type, entry.id, entry_point=entry.entry_point)


def family_names() -> tuple[str, ...]:
    """The registered families' names, in registry order (what ``--env`` accepts)."""
    return tuple(dict.fromkeys(e.family for e in ENVIRONMENTS if e.family))


def family_class(name: str) -> type[Family]:
    """The family class registered as ``name``.

    Raises:
        ValueError: an unknown name; the message lists the registered ones.
    """
    for entry in ENVIRONMENTS:
        if entry.family == name and entry.family_entry_point:
            module, _, attr = entry.family_entry_point.partition(":")
            cls: type[Family] = getattr(importlib.import_module(module), attr)
            return cls
    known = ", ".join(family_names())
    raise ValueError(f"unknown env {name!r}; the registered ones are: {known}")


def metric_title(env: str, metric: str) -> str:
    """The column title of a headline metric of ``env``: its family's title, else its name.

    Example:
        >>> metric_title("code_collab", "pass_rate"), metric_title("unknown", "win_rate")
        ('pass rate', 'win rate')
    """
    titles = family_class(env).metric_titles if env in family_names() else {}
    return titles.get(metric, metric.replace("_", " "))


def make_family(
    name: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    task: str = "default",
    seed: int = 0,
    task_kwargs: dict[str, Any] | None = None,
    **options: Any,
) -> Family:
    """The family ``name`` built from a run's settings (see :class:`~llm_envs.family.Family`).

    ``options`` may hold any run setting: the family takes those it names in
    ``run_options`` and ignores the rest, so a trainer passes its settings
    without knowing which family reads which.

    Raises:
        ValueError: an unknown name, a task the family does not take, or a
            bad setting (the family's own message).
    """
    cls = family_class(name)
    if task not in cls.tasks:
        raise ValueError(f"--env {name} takes --task {' | '.join(cls.tasks)}, got {task!r}")
    taken = {k: v for k, v in options.items() if k in cls.run_options}
    family: Family = cls(  # type: ignore[call-arg]
        dict(env_kwargs or {}), task=task, seed=seed, task_kwargs=dict(task_kwargs or {}), **taken
    )
    return family
