"""The module-level factories every environment exports: ``raw_env``, ``env``, ``parallel_env``.

PettingZoo's convention, which the registry (:mod:`llm_envs.registration`)
and :func:`pettingzoo.make` rely on:

* ``raw_env(config=None, **overrides)``: the bare environment;
* ``env(config=None, **overrides)``: the environment with the standard
  wrappers (:func:`wrap_aec`): lifecycle checks, so that a step before
  ``reset()`` or after the end is a clear error;
* for a parallel environment, ``parallel_env(config=None, **overrides)``, and
  ``raw_env``/``env`` build its AEC form (:class:`~llm_envs.parallel_aec.ParallelAECView`).

An environment module writes one line, e.g.
``raw_env, env = aec_factories(DebateEnv)``; every factory passes its
arguments to the environment's constructor (see
:func:`~llm_envs.text_env.resolve_config`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

__all__ = ["AECWrapper", "aec_factories", "parallel_factories", "raw_factory", "wrap_aec"]

AnyAEC: TypeAlias = AECEnv[Any, Any, Any]
AECWrapper = Callable[[AnyAEC], AnyAEC]
"""A wrapper class (or function) that takes an AEC env and returns one."""

EnvT = TypeVar("EnvT", bound=AnyAEC)
ParallelT = TypeVar("ParallelT", bound=ParallelEnv[Any, Any, Any])


def wrap_aec(raw: AnyAEC, *inner: AECWrapper) -> AnyAEC:
    """The standard wrappers around a raw AEC env: ``inner`` (innermost first), then order checks.

    PettingZoo's ``OrderEnforcingWrapper`` is always outermost: it turns a step
    before ``reset()``, or a ``last()`` without an episode, into a clear error.

    Example:
        >>> from llm_envs.debate import raw_env
        >>> type(wrap_aec(raw_env())).__name__
        'OrderEnforcingWrapper'
    """
    wrapped = raw
    for wrapper in inner:
        wrapped = wrapper(wrapped)
    return OrderEnforcingWrapper(wrapped)


def _named(function: Callable[..., Any], owner: type, name: str, doc: str) -> None:
    # The factory reads as a function of the environment's module (docs, reprs, pickling).
    function.__name__ = name
    function.__qualname__ = name
    function.__module__ = owner.__module__
    function.__doc__ = doc


def _ref(cls: type) -> str:
    return f":class:`~{cls.__module__}.{cls.__qualname__}`"


def raw_factory(env_class: Callable[..., EnvT]) -> Callable[..., EnvT]:
    """``raw_env(config=None, **overrides)``: the bare ``env_class``, without wrappers."""

    def raw_env(config: Any = None, **overrides: Any) -> EnvT:
        return env_class(config, **overrides)

    assert isinstance(env_class, type)
    _named(
        raw_env,
        env_class,
        "raw_env",
        f"The bare environment: {_ref(env_class)} (same arguments), without order checks.",
    )
    return raw_env


def aec_factories(
    env_class: Callable[..., EnvT],
) -> tuple[Callable[..., EnvT], Callable[..., AnyAEC]]:
    """``(raw_env, env)`` for an AEC environment class.

    Example:
        >>> from llm_envs.expert_iteration import ExpertIterationEnv
        >>> raw_env, env = aec_factories(ExpertIterationEnv)
        >>> type(raw_env(strategy="answer_hint")).__name__, type(env()).__name__
        ('ExpertIterationEnv', 'OrderEnforcingWrapper')
    """
    raw_env = raw_factory(env_class)

    def env(config: Any = None, **overrides: Any) -> AnyAEC:
        return wrap_aec(raw_env(config, **overrides))

    assert isinstance(env_class, type)
    _named(
        env,
        env_class,
        "env",
        f"The environment as most users want it: {_ref(env_class)} (same arguments) with "
        "PettingZoo's order checks (:func:`~llm_envs.factories.wrap_aec`).",
    )
    return raw_env, env


def parallel_factories(
    parallel_class: Callable[..., ParallelT], aec_class: Callable[[ParallelT], EnvT]
) -> tuple[Callable[..., ParallelT], Callable[..., EnvT], Callable[..., AnyAEC]]:
    """``(parallel_env, raw_env, env)`` for a parallel environment class and its AEC view.

    Args:
        parallel_class: the ``ParallelEnv``.
        aec_class: its AEC form, built from a parallel env (e.g. a
            :class:`~llm_envs.parallel_aec.ParallelAECView` subclass).
    """

    def parallel_env(config: Any = None, **overrides: Any) -> ParallelT:
        return parallel_class(config, **overrides)

    def raw_env(config: Any = None, **overrides: Any) -> EnvT:
        return aec_class(parallel_class(config, **overrides))

    def env(config: Any = None, **overrides: Any) -> AnyAEC:
        return wrap_aec(raw_env(config, **overrides))

    assert isinstance(parallel_class, type) and isinstance(aec_class, type)
    _named(
        parallel_env,
        parallel_class,
        "parallel_env",
        f"The parallel environment (joint actions): {_ref(parallel_class)} (same arguments).",
    )
    _named(
        raw_env,
        parallel_class,
        "raw_env",
        f"The AEC form {_ref(aec_class)} of {_ref(parallel_class)} (same arguments), "
        "without order checks.",
    )
    _named(
        env,
        parallel_class,
        "env",
        f"The AEC form {_ref(aec_class)} of {_ref(parallel_class)} (same arguments) with "
        "PettingZoo's order checks (:func:`~llm_envs.factories.wrap_aec`).",
    )
    return parallel_env, raw_env, env
