"""What a remote client may set of a family's settings, within which bounds: declared, not open.

An episode server (:mod:`llm_envs.serve`) builds episodes from the
``env_kwargs`` and ``task_kwargs`` a client sends. Those settings size the
episode (a debate of 100,000 agents), or spend the server's resources (a
sandbox timeout of an hour), so a client may set only what the family
declares here, each setting within its bound; the server's own settings
(``--env-kwargs``, ``--task-kwargs``) are the operator's and unbounded.

A family declares them with the optional class attribute
``client_settings`` (:class:`ClientSettings`); one that declares nothing lets
a client set nothing, so an outside family is closed until its author opens
it. A declaration names game settings (agents, rounds, game options) only:
a setting that spends resources (a sandbox's timeout, memory or workers, a
path, a data directory) stays the server's.

The bounds are plain data and their checks pure functions: nothing here knows
a server, a family or the network.

Example:
    >>> declared = ClientSettings(env_kwargs={"num_agents": Whole(2, 8)})
    >>> print(refusal(declared, "debate", {"num_agents": 3}, {}))
    None
    >>> print(refusal(declared, "debate", {"num_agents": 100000}, {}))  # doctest: +ELLIPSIS
    env_kwargs num_agents=100000 is out of bounds for a client of env 'debate': it takes ...
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from llm_envs.arguments import describe

__all__ = [
    "ARITHMETIC_SETTINGS",
    "Bound",
    "ClientSettings",
    "Fields",
    "Flag",
    "Number",
    "OneOf",
    "SubsetOf",
    "Text",
    "Whole",
    "refusal",
]


class Bound(Protocol):
    """What values one client setting takes: ``value in bound``, and ``str(bound)`` in words.

    Example:
        >>> 3 in Whole(2, 8), True in Whole(2, 8), str(Whole(2, 8))
        (True, False, 'an int in [2, 8]')
    """

    def __contains__(self, value: Any) -> bool: ...

    def __str__(self) -> str: ...


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Whole:
    """An int in ``[low, high]`` (never a bool or a float)."""

    low: int
    high: int

    def __contains__(self, value: Any) -> bool:
        return _is_int(value) and self.low <= value <= self.high

    def __str__(self) -> str:
        return f"an int in [{self.low}, {self.high}]"


@dataclass(frozen=True)
class Number:
    """A finite int or float in ``[low, high]``; also None when ``nullable``."""

    low: float
    high: float
    nullable: bool = False

    def __contains__(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return math.isfinite(value) and self.low <= value <= self.high

    def __str__(self) -> str:
        return f"a number in [{self.low:g}, {self.high:g}]" + (" or null" if self.nullable else "")


@dataclass(frozen=True)
class OneOf:
    """One of ``values`` (compared by type and value: ``1`` is not ``True``)."""

    values: tuple[Any, ...]

    def __contains__(self, value: Any) -> bool:
        return any(type(value) is type(v) and value == v for v in self.values)

    def __str__(self) -> str:
        return "one of " + ", ".join(json.dumps(v) for v in self.values)


@dataclass(frozen=True)
class Flag:
    """``true`` or ``false``."""

    def __contains__(self, value: Any) -> bool:
        return isinstance(value, bool)

    def __str__(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Text:
    """A string of at most ``max_chars`` characters; also None when ``nullable``."""

    max_chars: int
    nullable: bool = False

    def __contains__(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        return isinstance(value, str) and len(value) <= self.max_chars

    def __str__(self) -> str:
        return f"a string of at most {self.max_chars} characters" + (
            " or null" if self.nullable else ""
        )


@dataclass(frozen=True)
class SubsetOf:
    """A non-empty list of distinct items of ``values``."""

    values: tuple[Any, ...]

    def __contains__(self, value: Any) -> bool:
        if not isinstance(value, list | tuple) or not value or len(value) > len(self.values):
            return False
        return len(set(map(repr, value))) == len(value) and all(
            item in OneOf(self.values) for item in value
        )

    def __str__(self) -> str:
        return "a list of distinct items of " + json.dumps(list(self.values))


@dataclass(frozen=True)
class Fields:
    """A JSON object whose keys are among ``fields``, each value within its bound."""

    fields: Mapping[str, Bound]

    def __contains__(self, value: Any) -> bool:
        return isinstance(value, Mapping) and all(
            key in self.fields and item in self.fields[key] for key, item in value.items()
        )

    def __str__(self) -> str:
        return (
            "an object of "
            + ", ".join(f"{k} ({b})" for k, b in self.fields.items())
            + ", each optional"
        )


@dataclass(frozen=True)
class ClientSettings:
    """The settings a remote client may pass to a family, each with its bound.

    Attributes:
        env_kwargs: setting name -> bound, of the env's arguments.
        task_kwargs: setting name -> bound, of the task's settings (for any
            task: the family still refuses settings its task does not take).
    """

    env_kwargs: Mapping[str, Bound] = field(default_factory=dict)
    task_kwargs: Mapping[str, Bound] = field(default_factory=dict)


ARITHMETIC_SETTINGS: Mapping[str, Bound] = {
    "num_problems": Whole(1, 1_000_000),
    "seed": Whole(0, 2**31 - 1),
    "num_operands": Whole(2, 16),
    "max_digits": Whole(1, 18),
    "operations": SubsetOf(("+", "-", "*", "/")),
}
"""The arithmetic task's settings (:class:`~llm_envs.tasks.ArithmeticTask`), for the
``task_kwargs`` of the families that take it: its own bounds (problems are
drawn lazily, so a million cost nothing until played)."""


def refusal(
    declared: ClientSettings | None,
    env: str,
    env_kwargs: Mapping[str, Any],
    task_kwargs: Mapping[str, Any],
) -> str | None:
    """Why a client may not send these settings to env ``env``, or None when it may.

    ``declared`` None (a family that declares nothing) allows nothing. The
    message names the setting, its bound and the fix; the first refused
    setting is named, ``env_kwargs`` before ``task_kwargs``.

    Example:
        >>> declared = ClientSettings(task_kwargs={"max_digits": Whole(1, 18)})
        >>> print(refusal(declared, "debate", {"timeout": 3600}, {}))  # doctest: +ELLIPSIS
        env_kwargs 'timeout' is not a setting a client may pass to env 'debate' ...
    """
    declared = declared or ClientSettings()
    for part, given, bounds in (
        ("env_kwargs", env_kwargs, declared.env_kwargs),
        ("task_kwargs", task_kwargs, declared.task_kwargs),
    ):
        flag = f"--{part.replace('_', '-')}"
        for name, value in given.items():
            bound = bounds.get(name)
            server = (
                f"start the server with --env {env} {flag} '{{{json.dumps(name[:80])}: ...}}' "
                "(its own settings are not bounded)"
            )
            if bound is None:
                takes = (
                    "a client may set " + ", ".join(f"{k} ({b})" for k, b in bounds.items())
                    if bounds
                    else f"env {env!r} lets a client set no {part}"
                )
                return (
                    f"{part} {describe(name)} is not a setting a client may pass to env "
                    f"{env!r} ({takes}); leave it out, or {server}"
                )
            if value not in bound:
                return (
                    f"{part} {name[:80]}={describe(value)} is out of bounds for a client of env "
                    f"{env!r}: it takes {bound}; send such a value, or {server}"
                )
    return None
