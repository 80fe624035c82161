"""Conformance checks for text environments: PettingZoo's own tests plus the llm-envs contract.

Run :func:`check_aec_env` (or :func:`check_parallel_env`) on any environment
factory, yours included::

    from llm_envs.testing.conformance import check_aec_env
    check_aec_env(lambda: my_env(num_agents=3))

Besides PettingZoo's ``api_test`` and ``seed_test``, the checks enforce what
a trainer relies on: observations are ``{"messages": [...]}`` chats, any
string (garbage included) is a legal action while anything else is a
``TypeError``, a step before ``reset()`` or after the end is a
``RuntimeError``, infos are deterministic and
hold stop strings, the episode ends within a bounded number of steps,
``record()`` (where the env has one) is a JSON-ready
:class:`~llm_envs.records.EpisodeRecord`, and ``fork()`` gives an independent copy.
"""

from __future__ import annotations

import copy
import functools
import json
import warnings
from collections.abc import Callable
from typing import Any

from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

from llm_envs.contract import STOP

__all__ = ["check_aec_env", "check_parallel_env", "play_aec", "registered_env_factories"]

AECFactory = Callable[[], AECEnv[Any, Any, Any]]
ParallelFactory = Callable[[], ParallelEnv[Any, Any, Any]]


def _pettingzoo_tests(
    api: Callable[..., None], seeding: Callable[..., None], factory: Any, num_cycles: int
) -> None:
    # PettingZoo's tests pass reset(options={"options": 1}); envs warn about the unknown key.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        api(factory(), num_cycles=num_cycles)
        seeding(factory, num_cycles=num_cycles)


def _check_observation(observation: Any, where: str) -> None:
    assert isinstance(observation, dict) and "messages" in observation, (
        f"{where}: an observation must be a dict with a 'messages' chat, got {observation!r:.200}"
    )
    messages = observation["messages"]
    assert isinstance(messages, list) and messages, f"{where}: 'messages' must be a non-empty list"
    for m in messages:
        assert set(m) == {"role", "content"}, f"{where}: bad message keys {sorted(m)}"
        assert isinstance(m["content"], str), f"{where}: message content must be str"


def play_aec(
    env: AECEnv[Any, Any, Any],
    policy: Callable[[str, Any, dict[str, Any]], Any],
    *,
    seed: int | None = 0,
    options: dict[str, Any] | None = None,
    max_steps: int = 100_000,
) -> list[tuple[str, Any, float, bool, bool, dict[str, Any]]]:
    """Play one episode with ``policy(agent, observation, info) -> action``.

    Returns every ``(agent, observation, reward, terminated, truncated, info)``
    seen from ``last()``, dead steps included.

    Raises:
        AssertionError: if the episode does not end within ``max_steps`` steps.
    """
    env.reset(seed=seed, options=options)
    seen = []
    for steps, agent in enumerate(env.agent_iter()):
        assert steps < max_steps, f"the episode did not end within {max_steps} steps"
        observation, reward, terminated, truncated, info = env.last()
        seen.append((agent, observation, reward, terminated, truncated, info))
        env.step(None if terminated or truncated else policy(agent, observation, info))
    return seen


def check_aec_env(factory: AECFactory, *, num_cycles: int = 200, max_steps: int = 10_000) -> None:
    """Run PettingZoo's ``api_test`` and ``seed_test`` and the llm-envs contract checks.

    Args:
        factory: builds a fresh environment on each call.
        num_cycles: cycles for PettingZoo's tests.
        max_steps: bound on the length of an episode of random actions.

    Raises:
        AssertionError: naming the first broken rule.
    """
    _pettingzoo_tests(api_test, seed_test, factory, num_cycles)
    env = factory()

    def garbage(agent: str, observation: Any, info: dict[str, Any]) -> Any:
        _check_observation(observation, f"observation of {agent}")
        assert isinstance(info.get(STOP, []), list), f"infos[{agent!r}]['stop'] must be a list"
        return env.action_space(agent).sample()

    for seed in range(3):
        env.action_space(env.possible_agents[0]).seed(seed)
        first = play_aec(env, garbage, seed=seed, max_steps=max_steps)
        assert first, "an episode must have at least one step"

    # Infos are deterministic: replaying the same actions gives equal infos.
    actions = {"i": 0}
    # Any text is a legal action: tag-like text, empty, garbage (no family's tags needed).
    texts = ["<solution>1</solution>", "", "garbage ü <", "<consensus>YES</consensus>"]

    def replay(agent: str, observation: Any, info: dict[str, Any]) -> Any:
        actions["i"] += 1
        return texts[actions["i"] % len(texts)]

    a = play_aec(factory(), replay, seed=7, max_steps=max_steps)
    actions["i"] = 0
    b = play_aec(factory(), replay, seed=7, max_steps=max_steps)
    assert a == b, "two runs with the same seed and actions must see identical last() values"

    _check_record(env.unwrapped)
    _check_fork(factory)
    _check_misuse(factory)


def _raises(error: type[Exception], call: Callable[[], Any], what: str) -> None:
    try:
        call()
    except error:
        return
    except Exception as other:  # the wrong kind of error is as bad as none
        raise AssertionError(f"{what} must raise {error.__name__}, not {other!r:.200}") from other
    raise AssertionError(f"{what} must raise {error.__name__}, and raised nothing")


def _check_misuse(factory: AECFactory) -> None:
    # The strict lifecycle, on the unwrapped env (PettingZoo's OrderEnforcingWrapper
    # has rules of its own): a misuse is a clear error that changes nothing.
    base = factory().unwrapped
    _raises(RuntimeError, lambda: base.step(""), "step() before reset()")
    base.reset(seed=0)
    agent = base.agent_selection
    _raises(TypeError, lambda: base.step(b"bytes"), f"a non-str action of the live {agent!r}")
    assert base.agent_selection == agent, "a refused action must not move the turn on"
    play_aec(base, lambda agent, observation, info: "", seed=0)
    _raises(RuntimeError, lambda: base.step(""), "step() after the episode ended")


def _check_record(base: Any) -> None:
    # Every llm-envs env has record(); an env of someone else's may not.
    record = getattr(base, "record", None)
    if not callable(record):
        return
    episode = record()
    assert set(episode) == {"env", "title", "summary", "turns"}, (
        f"record() must have the keys env, title, summary, turns, got {sorted(episode)}"
    )
    for turn in episode["turns"]:
        assert set(turn) == {"agent", "round", "prompt", "text", "details"}, (
            f"a turn of record() has the keys {sorted(turn)}; see llm_envs.records.TurnRecord"
        )
    assert json.loads(json.dumps(episode)) == episode, "record() must hold plain JSON values"


def _check_fork(factory: AECFactory) -> None:
    env = factory()
    env.reset(seed=3)
    base = env.unwrapped
    fork = getattr(base, "fork", None)
    clone = fork() if callable(fork) else copy.deepcopy(base)
    before = clone.observe(clone.agent_selection)
    agent = base.agent_selection
    if not (base.terminations[agent] or base.truncations[agent]):
        base.step(base.action_space(agent).sample())
    after = clone.observe(clone.agent_selection)
    assert before == after, "stepping the original must not change its fork"


def check_parallel_env(factory: ParallelFactory, *, num_cycles: int = 200) -> None:
    """Run PettingZoo's ``parallel_api_test`` and ``parallel_seed_test`` and the observation check.

    Raises:
        AssertionError: naming the first broken rule.
    """
    _pettingzoo_tests(parallel_api_test, parallel_seed_test, factory, num_cycles)
    env = factory()
    observations, _ = env.reset(seed=0)
    for agent, observation in observations.items():
        _check_observation(observation, f"observation of {agent}")
    _check_record(env)


def registered_env_factories() -> dict[str, Callable[[], Any]]:
    """A default-argument factory for every environment registered by llm-envs, by id."""
    import pettingzoo

    from llm_envs.registration import entries

    return {
        f"{entry.env_type}:{entry.id}": functools.partial(pettingzoo.make, entry.env_type, entry.id)
        for entry in entries()
        if entry.id
    }
