"""The AEC form of a parallel text environment: PettingZoo's ``parallel_to_aec`` conversion.

A parallel environment (every live agent acts at once) is also offered as an
AEC environment, so that AEC tools (``api_test``, rollouts that step one agent
at a time) work on it. PettingZoo's ``parallel_to_aec_wrapper`` does the
conversion: the agents act in turn and the parallel env steps after the last
one. :class:`ParallelAECView` wraps that conversion because the conversion
alone reports the *parallel* env as ``unwrapped``, which has no
``observe``/``agent_selection``, and ``api_test`` rejects a conversion wrapper
as ``unwrapped``. The view is its own ``unwrapped`` and adds ``fork()`` and
``record()``.

This module knows nothing of any family's rules; subclass the view to give it
an environment's name and documentation.
"""

from __future__ import annotations

import copy
from typing import Any, Generic, Self, TypeVar

from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec_wrapper

from llm_envs.contract import Observation
from llm_envs.records import EpisodeRecord
from llm_envs.text_env import check_aec_step

__all__ = ["ParallelAECView"]

_T = TypeVar("_T")
ParallelT = TypeVar("ParallelT", bound=ParallelEnv[Any, Any, Any])


class _Forwarded(Generic[_T]):
    """An attribute that lives on the wrapped PettingZoo conversion."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> _T:
        if obj is None:
            return self  # type: ignore[return-value]
        value: _T = getattr(obj._conversion, self.name)
        return value

    def __set__(self, obj: Any, value: _T) -> None:
        setattr(obj._conversion, self.name, value)


class ParallelAECView(AECEnv[str, Observation, str | None], Generic[ParallelT]):
    """The AEC form of a parallel environment, through PettingZoo's ``parallel_to_aec_wrapper``.

    Every call goes to the conversion: the live agents act in turn (in
    ``possible_agents`` order) and the parallel env steps after the last one.

    Args:
        parallel: the parallel environment to view.
    """

    agents: _Forwarded[list[str]] = _Forwarded()
    agent_selection: _Forwarded[str] = _Forwarded()
    rewards: _Forwarded[dict[str, float]] = _Forwarded()
    _cumulative_rewards: _Forwarded[dict[str, float]] = _Forwarded()
    terminations: _Forwarded[dict[str, bool]] = _Forwarded()
    truncations: _Forwarded[dict[str, bool]] = _Forwarded()
    infos: _Forwarded[dict[str, dict[str, Any]]] = _Forwarded()

    def __init__(self, parallel: ParallelT) -> None:
        super().__init__()
        self._conversion = parallel_to_aec_wrapper(parallel)
        self.metadata = dict(self._conversion.metadata)
        self.possible_agents = list(parallel.possible_agents)
        self.render_mode = parallel.render_mode

    @property
    def parallel_env(self) -> ParallelT:
        """The parallel environment underneath (its state, history and transcript)."""
        env: ParallelT = self._conversion.env
        return env

    def observation_space(self, agent: str) -> Any:
        """The parallel env's observation space."""
        return self._conversion.observation_space(agent)

    def action_space(self, agent: str) -> Any:
        """The parallel env's action space."""
        return self._conversion.action_space(agent)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset the parallel env."""
        self._conversion.reset(seed=seed, options=options)

    def step(self, action: str | None) -> None:
        """Record the selected agent's text; after the last live agent, step the parallel env.

        Checked first, as in every llm-envs AEC env: a step before ``reset()`` or
        after the end is a ``RuntimeError``, a live agent's non-``str`` action a
        ``TypeError`` (raised at once, not when the joint action is complete).
        """
        episode = self._conversion if hasattr(self._conversion, "agents") else None
        check_aec_step(episode, action, owner=type(self).__name__)
        self._conversion.step(action)

    def observe(self, agent: str) -> Observation:
        """The chat ``agent``'s model continues next."""
        if agent not in self.possible_agents:
            raise KeyError(
                f"unknown agent {agent!r}; this environment's agents are {self.possible_agents}"
            )
        observation: Observation = self._conversion.observe(agent)
        return observation

    def fork(self) -> Self:
        """An independent copy mid-episode (the parallel env's own ``__deepcopy__`` applies)."""
        return copy.deepcopy(self)

    def record(self) -> EpisodeRecord:
        """The parallel env's ``record()``: every llm-envs env has one on its unwrapped form."""
        record: EpisodeRecord = getattr(self.parallel_env, "record")()  # noqa: B009 (not on ParallelEnv)
        return record

    def render(self) -> str | None:
        """The parallel env's ``render()``."""
        result: str | None = self.parallel_env.render()
        return result

    def close(self) -> None:
        """The parallel env's ``close()``."""
        self.parallel_env.close()

    def __str__(self) -> str:
        return str(self.metadata.get("name", type(self).__name__))
