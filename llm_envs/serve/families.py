"""Which episode a request names, and the families that build it, built once.

An episode is named by an :class:`EpisodeSpec`: a registered family, its
settings, an evaluation problem and a seed. The family is
``make_family(env, env_kwargs, task=task, seed=<the server's seed>,
task_kwargs=task_kwargs)``, and the episode its ``eval_episode(problem,
seed)``: the server's seed fixes which problems there are (``problem 3`` is
the same question all the server's life), the request's seed the episode.

:class:`Families` builds each family once (building one can load a data set)
and its reference players once (the evaluator shares them across episodes
too), for any thread. Refusals are :mod:`llm_envs.serve.errors` with the
family's own message.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from llm_envs.capabilities import ReferencePlayers, require
from llm_envs.client_settings import refusal
from llm_envs.registration import family_class, family_names, make_family
from llm_envs.serve.errors import Invalid, NotFound

if TYPE_CHECKING:
    from llm_envs.family import Agent, Family
    from llm_envs.serve.protocol import EpisodeRequest

__all__ = ["Defaults", "EpisodeSpec", "Families", "resolve"]


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode, fully named: the family's settings, the problem and the seed."""

    env: str
    env_kwargs: Mapping[str, Any]
    task: str
    task_kwargs: Mapping[str, Any]
    problem: int
    seed: int

    def as_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready fields (what a record and a status show)."""
        return asdict(self)

    def family_key(self) -> str:
        """What tells two families apart: everything but the problem and the seed."""
        return json.dumps(
            [self.env, self.env_kwargs, self.task, self.task_kwargs], sort_keys=True, default=str
        )


@dataclass(frozen=True)
class Defaults:
    """The server's defaults for what a request leaves out (``--env``, ``--task``...)."""

    env: str | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    task: str | None = None
    task_kwargs: Mapping[str, Any] = field(default_factory=dict)


def resolve(request: EpisodeRequest, defaults: Defaults, *, bounded: bool = True) -> EpisodeSpec:
    """The episode a request names, its left-out fields taken from the server's defaults.

    The defaults' ``env_kwargs`` apply to the default env, and its
    ``task_kwargs`` to the default env's default task: a request naming
    another env (or task) starts from that one's own defaults. The settings
    a request gives are laid over them, one by one, and must be those its
    family declares a client may set, within their bounds
    (:attr:`FamilyBase.client_settings <llm_envs.family.FamilyBase.client_settings>`);
    the defaults themselves are the operator's, and not bounded.

    Args:
        request: the client's request.
        defaults: the server's defaults (``--env``, ``--env-kwargs``...).
        bounded: False trusts the request's settings as the operator's own (an
            in-process rendezvous, where the caller is the operator).

    Raises:
        NotFound: an env that is not registered (the message lists those that are).
        Invalid: no env (and no default), a task the family does not take, or
            settings a client may not set (the message names the bound and the fix).
    """
    env = request.env if request.env is not None else defaults.env
    if env is None:
        raise Invalid(
            f'name the env: {{"env": "debate"}}, one of {", ".join(family_names())} '
            "(this server has no default --env)"
        )
    if env not in family_names():
        raise NotFound(f"unknown env {env!r}; the registered ones are: {', '.join(family_names())}")
    own = env == defaults.env
    cls = family_class(env)
    tasks = cls.tasks
    task = request.task or (defaults.task if own else None) or tasks[0]
    if task not in tasks:
        raise Invalid(f"env {env!r} takes task {' | '.join(tasks)}, got {task!r}")
    if bounded:
        why = refusal(
            getattr(cls, "client_settings", None), env, request.env_kwargs, request.task_kwargs
        )
        if why is not None:
            raise Invalid(why)
    own_task = own and task == (defaults.task or tasks[0])
    return EpisodeSpec(
        env=env,
        env_kwargs={**(defaults.env_kwargs if own else {}), **request.env_kwargs},
        task=task,
        task_kwargs={**(defaults.task_kwargs if own_task else {}), **request.task_kwargs},
        problem=request.problem,
        seed=request.seed,
    )


class _Entry:
    """One family and its reference players, each built at most once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.family: Family | None = None
        self.players: dict[str, Agent] | None = None


class Families:
    """Families and their reference players, built once per settings, for any thread.

    Args:
        seed: the families' seed (which problems there are; ``--seed``).
        capacity: how many families to keep; the least recently used goes first.

    Example:
        >>> families = Families()
        >>> spec = EpisodeSpec("debate", {"num_agents": 3}, "default", {}, 0, 7)
        >>> env, seed, options = families.episode(spec)
        >>> env.possible_agents, seed, families.family(spec) is families.family(spec)
        (['agent_0', 'agent_1', 'agent_2'], 7, True)
    """

    def __init__(self, seed: int = 0, capacity: int = 32) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.seed = seed
        self.capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def family(self, spec: EpisodeSpec) -> Family:
        """The family of ``spec``.

        Raises:
            Invalid: settings the family refuses (its message).
        """
        entry = self._entry(spec.family_key())
        with entry.lock:
            if entry.family is None:
                entry.family = self._build(spec)
            return entry.family

    def reference_players(self, spec: EpisodeSpec) -> dict[str, Agent]:
        """The family's reference players (a player per seat), built once and shared.

        Raises:
            Invalid: the family has none for these settings (its message says why).
        """
        family = self.family(spec)
        entry = self._entry(spec.family_key())
        with entry.lock:
            if entry.players is None:
                try:
                    seated = require(family, ReferencePlayers, by="the other seats")
                    entry.players = seated.reference_players()
                except ValueError as exc:
                    raise Invalid(f"env {spec.env!r} cannot fill the other seats: {exc}") from exc
            return entry.players

    def episode(self, spec: EpisodeSpec) -> tuple[Any, int, dict[str, Any]]:
        """A fresh environment of ``spec``'s problem, its reset seed and options."""
        env, seed, options = self.family(spec).eval_episode(spec.problem, spec.seed)
        return env, seed, options

    def _entry(self, key: str) -> _Entry:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
            return entry

    def _build(self, spec: EpisodeSpec) -> Family:
        try:
            return make_family(
                spec.env,
                dict(spec.env_kwargs),
                task=spec.task,
                seed=self.seed,
                task_kwargs=dict(spec.task_kwargs),
            )
        except (ValueError, TypeError) as exc:
            raise Invalid(
                f"env {spec.env!r} refused env_kwargs {dict(spec.env_kwargs)} with task "
                f"{spec.task!r} and task_kwargs {dict(spec.task_kwargs)}: {exc}"
            ) from exc
