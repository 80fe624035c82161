"""The registry of environment families: this project's, yours, and installed packages'.

A *family* (:mod:`llm_envs.family`) is what a trainer's ``--env`` names: every
trainer, the evaluator, the report and the server take any registered one.
Three ways in:

* this project's own families: :data:`BUILTIN_ENVIRONMENTS`, registered with
  PettingZoo when :mod:`llm_envs` is imported (``pettingzoo.make("aec",
  "llm_envs/Debate-v0", num_agents=3)``);
* :func:`register`, called by your package: the family is seen by every reader
  of the registry from then on;
* an installed package's entry point in the group ``llm_envs.families``
  (:data:`ENTRY_POINT_GROUP`), loaded lazily the first time its name is looked
  up, so ``pip install my-env`` is all ``--env my_env`` needs; and
  ``--env package.module:name`` imports the module, whose import registers ``name``.

Factories and family classes may be ``"module:attr"`` strings, so registering
imports nothing heavy.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import pettingzoo

if TYPE_CHECKING:
    from llm_envs.family import Family

__all__ = [
    "BUILTIN_ENVIRONMENTS",
    "ENTRY_POINT_GROUP",
    "EnvEntry",
    "entries",
    "family_class",
    "family_names",
    "is_family",
    "make_family",
    "metric_title",
    "register",
    "register_all",
    "unregister",
]


class EnvEntry(NamedTuple):
    """One registry entry: the API flavour, the PettingZoo id, the factory, its family.

    ``family`` is the family's name (``--env``) and ``family_entry_point`` its
    :class:`~llm_envs.family.Family` class or the class's ``"module:attr"``;
    entries of one family (an AEC and a parallel form) repeat both. A family
    registered without a PettingZoo factory has an empty ``id``.
    """

    env_type: Literal["aec", "parallel"]
    id: str
    entry_point: str | Callable[..., Any]
    family: str = ""
    family_entry_point: str | type[Family] = ""


BUILTIN_ENVIRONMENTS: tuple[EnvEntry, ...] = (
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
"""This project's own environments, in the order the docs list them."""

ENTRY_POINT_GROUP: Final = "llm_envs.families"
"""The entry-point group an installed package declares its families in (``pip install my-env``)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
_lock = threading.RLock()
_entries: list[EnvEntry] = list(BUILTIN_ENVIRONMENTS)
_pending: dict[str, importlib.metadata.EntryPoint] | None = None
"""Installed entry points not loaded yet, by name (None: the group not read yet)."""


def register(
    name: str,
    family: str | type[Family],
    *,
    aec: str | Callable[..., Any] | None = None,
    parallel: str | Callable[..., Any] | None = None,
    env_id: str | None = None,
) -> None:
    """Register the family ``name`` for every trainer, the evaluator, the report and the server.

    Call it from your package (its ``__init__`` or the function its
    ``llm_envs.families`` entry point names); every reader of the registry
    sees the family from then on. Registering the same entry again is a no-op,
    so a module imported twice does no harm.

    Args:
        name: what ``--env`` takes: letters, digits, ``_``, ``.`` and ``-``.
        family: the :class:`~llm_envs.family.Family` class, or its ``"module:Class"``
            (imported when the family is first used).
        aec: the AEC environment's factory, or its ``"module:attr"``, for
            ``pettingzoo.make("aec", env_id)``.
        parallel: the parallel environment's factory, or its ``"module:attr"``.
        env_id: the PettingZoo id of the factories, ``"namespace/Name-v0"``;
            needed with ``aec`` or ``parallel``.

    Raises:
        ValueError: a malformed name, a name another entry holds, or factories
            without an ``env_id``.

    Example:
        >>> register("shout_demo", "llm_envs.debate.family:DebateFamily")
        >>> family_class("shout_demo").__name__
        'DebateFamily'
        >>> unregister("shout_demo")
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"a family name is letters, digits, '_', '.' and '-' (starting with a letter or '_'), "
            f"got {name!r}: it is what --env takes"
        )
    if (aec is not None or parallel is not None) and not env_id:
        raise ValueError(
            f"register({name!r}, ...) with an aec or parallel factory needs env_id, the id "
            "pettingzoo.make takes: env_id='my_pkg/MyGame-v0'"
        )
    new = [EnvEntry("aec", env_id or "", aec, name, family)] if aec else []
    if parallel:
        new.append(EnvEntry("parallel", env_id or "", parallel, name, family))
    new = new or [EnvEntry("aec", "", "", name, family)]  # a family without PettingZoo factories
    with _lock:
        held = [e for e in _entries if e.family == name]
        if held:
            if held == new:
                return
            raise ValueError(
                f"the env name {name!r} is taken (by {_described(held[0].family_entry_point)}); "
                "register yours under another name, or unregister() the other first"
            )
        _entries.extend(new)
        for entry in new:
            if entry.id:
                _register_with_pettingzoo(entry)


def unregister(name: str) -> None:
    """Take the family ``name`` out of the registry, and its ids out of PettingZoo's.

    For tests and notebooks that register a family for a while.

    Raises:
        ValueError: no family of that name is registered.
    """
    from pettingzoo.env_registry.registration import aec_registry, parallel_registry

    with _lock:
        gone = [e for e in _entries if e.family == name]
        if not gone:
            raise ValueError(
                f"no env {name!r} is registered; the registered ones are: "
                f"{', '.join(family_names())}"
            )
        _entries[:] = [e for e in _entries if e.family != name]
        for entry in gone:
            registry = aec_registry if entry.env_type == "aec" else parallel_registry
            registry.pop(entry.id, None)


def entries() -> tuple[EnvEntry, ...]:
    """Every registry entry: this project's, then those registered since, installed ones loaded."""
    _load_installed()
    with _lock:
        return tuple(_entries)


def register_all() -> None:
    """Register every entry with PettingZoo's registry that is not registered there yet.

    Importing :mod:`llm_envs` runs it for this project's environments; an
    installed package's environments join when the package is loaded (its
    import, or the first lookup of a name, see :func:`family_class`).
    """
    with _lock:
        for entry in _entries:
            if entry.id:
                _register_with_pettingzoo(entry)


def family_names() -> tuple[str, ...]:
    """The registered families' names, in registry order (what ``--env`` accepts).

    Installed packages' families (entry-point group :data:`ENTRY_POINT_GROUP`) included.
    """
    return tuple(dict.fromkeys(e.family for e in entries() if e.family))


def is_family(name: str) -> bool:
    """Whether ``name`` names a family: a registered name, or a loadable ``"module:name"``."""
    try:
        family_class(name)
    except ValueError:
        return False
    return True


def family_class(name: str) -> type[Family]:
    """The family class registered as ``name``.

    ``name`` is a registered name, found among this project's families, those
    registered since, and installed packages' (an entry point of the group
    :data:`ENTRY_POINT_GROUP` is loaded the first time its name is looked
    up); or ``"package.module:name"`` (Gymnasium's convention): the module is
    imported, and its import registers ``name``.

    Raises:
        ValueError: an unknown name (the message lists the registered ones and
            says how to register one), or a module that cannot be imported.
    """
    module, colon, short = name.rpartition(":")
    if colon:
        _import_spec(name, module, short)
        name = short
    entry = _entry_of(name)
    if entry is None:
        _load_installed(first=name)
        entry = _entry_of(name)
    if entry is None:
        _load_installed()
        entry = _entry_of(name)
    if entry is None:
        raise ValueError(_unknown(name, imported=module if colon else None))
    return _resolved(entry)


def metric_title(env: str, metric: str) -> str:
    """The column title of a headline metric of ``env``: its family's title, else its name.

    Example:
        >>> metric_title("code_collab", "pass_rate"), metric_title("unknown", "win_rate")
        ('pass rate', 'win rate')
    """
    titles = getattr(family_class(env), "metric_titles", {}) if is_family(env) else {}
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


def _entry_of(name: str) -> EnvEntry | None:
    with _lock:
        return next((e for e in _entries if e.family == name and e.family_entry_point), None)


def _resolved(entry: EnvEntry) -> type[Family]:
    target = entry.family_entry_point
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    cls: type[Family] = getattr(importlib.import_module(module), attr)
    return cls


def _import_spec(spec: str, module: str, short: str) -> None:
    """Import the module of ``--env module:name``: its import registers ``name``."""
    if not module or not short:
        raise ValueError(f"--env {spec!r}: write it as package.module:name (Gymnasium's form)")
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(
            f"--env {spec!r}: cannot import {module!r} ({exc}); install its package, or put "
            "its folder on PYTHONPATH"
        ) from exc


def _load_installed(first: str | None = None) -> None:
    """Load installed packages' entry points: the one named ``first``, or every one.

    A package that fails to load is skipped with a warning when every one is
    loaded (one broken package must not break the others' commands); the one
    a lookup names raises, saying which package broke.
    """
    global _pending
    with _lock:
        if _pending is None:
            found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
            _pending = {point.name: point for point in found}
        names = [first] if first is not None else list(_pending)
        points = [_pending.pop(n) for n in names if n in _pending]
    for point in points:
        try:
            _load(point)
        except Exception as exc:
            message = (
                f"the installed package that declares env {point.name!r} ({point.value}, "
                f"entry-point group {ENTRY_POINT_GROUP}) failed to load: "
                f"{type(exc).__name__}: {exc}"
            )
            if first is not None:
                raise ValueError(message) from exc
            warnings.warn(message, stacklevel=3)


def _load(point: importlib.metadata.EntryPoint) -> None:
    """Load one entry point: a family class (registered under the point's name), or a function."""
    target = point.load()
    if isinstance(target, type):
        register(point.name, target)
    elif callable(target):
        target()
    # a module: its import registered what it registers


def _register_with_pettingzoo(entry: EnvEntry) -> None:
    from pettingzoo.env_registry.registration import aec_registry, parallel_registry

    registry = aec_registry if entry.env_type == "aec" else parallel_registry
    if entry.id not in registry:
        pettingzoo.register(entry.env_type, entry.id, entry_point=entry.entry_point)


def _described(target: str | type) -> str:
    return target if isinstance(target, str) else f"{target.__module__}:{target.__qualname__}"


def _unknown(name: str, imported: str | None) -> str:
    known = ", ".join(family_names())
    if imported is not None:
        return (
            f"importing {imported!r} registered no env {name!r}; the registered ones are: "
            f"{known}. Its import must call llm_envs.register({name!r}, ...)"
        )
    return (
        f"unknown env {name!r}; the registered ones are: {known}. To add yours: call "
        f"llm_envs.register({name!r}, YourFamily) in your package and declare it in the "
        f"{ENTRY_POINT_GROUP!r} entry-point group, or pass --env your.module:{name} "
        "(docs/your_own_environment.md)"
    )


def __getattr__(name: str) -> Any:
    # The registry was a module-level tuple; a copy taken at import missed later entries.
    if name == "ENVIRONMENTS":
        warnings.warn(
            "llm_envs.registration.ENVIRONMENTS is deprecated: call "
            "llm_envs.registration.entries() (it sees every registered family)",
            DeprecationWarning,
            stacklevel=2,
        )
        return entries()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
