"""What every llm-envs environment shares: text spaces, checked resets, transcript rendering.

:class:`TextEnvMixin` sits beside PettingZoo's ``AECEnv`` or ``ParallelEnv``
in an environment's bases. It holds the parts that must behave identically in
every family, so that they are written (and fixed) once:

* spaces built once per agent and returned from a dict (PettingZoo requires
  ``observation_space(a) is observation_space(a)``);
* ``render_mode`` checked at construction;
* the reset preamble: reseed only when a seed is given (or on the first
  reset), and warn about option keys the environment does not know (PettingZoo's
  ``api_test`` passes ``{"options": 1}``, so unknown keys must not raise);
* the AEC step preamble: a clear error after the episode ended, PettingZoo's
  dead step for an agent whose episode is over, and a type check of the action;
* ``render()`` from the environment's ``transcript()``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from gymnasium.utils import seeding

from llm_envs.spaces import UnicodeText, chat_observation_space

__all__ = ["RENDER_MODES", "TextEnvMixin"]

RENDER_MODES: tuple[str, ...] = ("ansi", "human")
"""``"ansi"``: ``render()`` returns the transcript; ``"human"``: it prints it."""


class TextEnvMixin:
    """Shared plumbing of llm-envs environments; see the module docstring.

    Subclasses call :meth:`_init_text_env` in ``__init__``, :meth:`_begin_reset`
    at the top of ``reset``, :meth:`_begin_step` at the top of an AEC ``step``,
    and implement :meth:`transcript`.
    """

    render_mode: str | None
    np_random: Any
    np_random_seed: Any
    _observation_spaces: dict[str, Any]
    _action_spaces: dict[str, Any]
    _np_random_ready: bool

    def _init_text_env(self, agents: Iterable[str], render_mode: str | None) -> None:
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(
                f"render_mode must be one of {RENDER_MODES} or None, got {render_mode!r}"
            )
        self.render_mode = render_mode
        agents = list(agents)
        self._observation_spaces = {a: chat_observation_space() for a in agents}
        self._action_spaces = {a: UnicodeText() for a in agents}
        self._np_random_ready = False

    def observation_space(self, agent: str) -> Any:
        """``Dict({"messages": ChatMessages})``, the same object on every call."""
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> Any:
        """:class:`~llm_envs.spaces.UnicodeText`: any string."""
        return self._action_spaces[agent]

    def _begin_reset(
        self, seed: int | None, options: Mapping[str, Any] | None, known: frozenset[str]
    ) -> dict[str, Any]:
        """Reseed if asked (or never seeded) and return the options, warning about unknown keys."""
        if seed is not None or not self._np_random_ready:
            self.np_random, self.np_random_seed = seeding.np_random(seed)
            self._np_random_ready = True
        options = dict(options or {})
        unknown = set(options) - known
        if unknown:
            warnings.warn(
                f"{type(self).__name__}.reset ignores unknown option(s) {sorted(unknown)}; "
                f"known options: {sorted(known)}",
                stacklevel=3,
            )
        return options

    def _begin_step(self, action: str | None) -> tuple[str, str] | None:
        """Check an AEC step; return ``(agent, text)``, or ``None`` when the step is done already.

        Before the first ``reset()``, and after the episode has ended (no agents
        left), stepping is an error that says to reset. An agent whose episode is
        over takes PettingZoo's dead step (its action must be ``None``), after
        which there is nothing left to do. Any other agent must act with a string.
        """
        env: Any = self
        if getattr(env, "agents", None) is None:
            raise RuntimeError(
                f"step() before reset(): {type(self).__name__} has no episode yet; "
                "call reset() first"
            )
        if not env.agents:
            raise RuntimeError(
                "step() after the episode ended: every agent has taken its final step; "
                "call reset() to start a new episode"
            )
        agent: str = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env._was_dead_step(action)
            return None
        if not isinstance(action, str):
            raise TypeError(
                f"the action of {agent} must be its text (a str), got {type(action).__name__}; "
                "only agents whose episode has ended step with None"
            )
        return agent, action

    def transcript(self) -> str:
        """The episode so far as text."""
        raise NotImplementedError

    def render(self) -> str | None:
        """``"ansi"``: return the transcript; ``"human"``: print it."""
        if self.render_mode is None:
            warnings.warn("render() called without a render_mode; pass one", stacklevel=2)
            return None
        text = self.transcript()
        if self.render_mode == "human":
            print(text)
            return None
        return text
