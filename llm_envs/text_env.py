"""What every llm-envs environment shares, so that an environment writes only its own rules.

:class:`TextEnvMixin` sits beside PettingZoo's ``AECEnv`` or ``ParallelEnv``
in an environment's bases. It holds the parts that must behave identically in
every family, so that they are written (and fixed) once:

* the constructor convention ``Env(config=None, *, render_mode=None, **overrides)``
  (:func:`resolve_config`): a frozen config dataclass, keyword overrides of its
  fields, or both (the overrides are applied on top of the config and the
  result is validated again);
* spaces built once per agent, when first asked for, and returned from a dict
  (PettingZoo requires ``observation_space(a) is observation_space(a)``);
* ``render_mode`` checked at construction;
* the reset preamble: reseed only when a seed is given (or on the first
  reset), and warn about option keys the environment does not know (PettingZoo's
  ``api_test`` passes ``{"options": 1}``, so unknown keys must not raise);
* the AEC reset bookkeeping (:meth:`TextEnvMixin._start_aec_episode`): agents,
  rewards, cumulative rewards, terminations, truncations, infos, the first agent;
* the AEC step preamble: a clear error after the episode ended, PettingZoo's
  dead step for an agent whose episode is over, a type check of the action,
  and the reward reset of the acting agent;
* the envelope of ``record()`` (:meth:`TextEnvMixin._episode_record`);
* ``render()`` from the environment's ``transcript()``.

The module-level ``raw_env``/``env``/``parallel_env`` functions come from
:mod:`llm_envs.factories`. This module never knows a family's rules.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from gymnasium.utils import seeding

from llm_envs.records import EpisodeRecord, TurnRecord, episode_record
from llm_envs.spaces import SAMPLE_FRAGMENTS, UnicodeText, chat_observation_space

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "RENDER_MODES",
    "TextEnvMixin",
    "check_aec_step",
    "env_metadata",
    "numbered_agents",
    "resolve_config",
]

RENDER_MODES: tuple[str, ...] = ("ansi", "human")
"""``"ansi"``: ``render()`` returns the transcript; ``"human"``: it prints it."""

ConfigT = TypeVar("ConfigT", bound="DataclassInstance")


def resolve_config(
    config_type: type[ConfigT],
    config: ConfigT | None,
    overrides: Mapping[str, Any],
    *,
    owner: str,
    defaults: Mapping[str, Any] | None = None,
    other_arguments: Sequence[str] = ("render_mode",),
) -> ConfigT:
    """An environment's configuration: ``config``, keyword overrides of its fields, or both.

    Giving both *merges*: the overrides replace those fields of ``config`` and
    the config's own checks run again on the result, so
    ``DebateEnv(base, max_rounds=5)`` is ``base`` with five rounds.

    Args:
        config_type: the environment's frozen config dataclass.
        config: a ``config_type`` instance, or None to build one from the overrides.
        overrides: keyword arguments, each a field of ``config_type``.
        owner: the environment's name, for error messages.
        defaults: values for fields the environment defaults differently from
            ``config_type`` (or that ``config_type`` requires); used only
            without ``config``.
        other_arguments: the environment's keyword arguments that are not
            config fields, listed in the error for an unknown keyword.

    Raises:
        TypeError: an override that is no field of ``config_type`` (the error
            lists the valid names), or a ``config`` of another type.

    Example:
        >>> from llm_envs.debate import DebateConfig
        >>> resolve_config(DebateConfig, None, {"num_agents": 2}, owner="DebateEnv").num_agents
        2
        >>> base = DebateConfig(num_agents=4)
        >>> merged = resolve_config(DebateConfig, base, {"max_rounds": 5}, owner="DebateEnv")
        >>> merged.num_agents, merged.max_rounds
        (4, 5)
    """
    fields = [f.name for f in dataclasses.fields(config_type) if f.init]
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise TypeError(
            f"{owner}() got unknown keyword argument(s) {unknown}; the valid ones are the "
            f"{config_type.__name__} fields {fields} and {list(other_arguments)}"
        )
    if config is None:
        return config_type(**{**(defaults or {}), **overrides})
    if not isinstance(config, config_type):
        raise TypeError(
            f"{owner}(config) takes a {config_type.__name__}, got {type(config).__name__} "
            f"{config!r:.80}; pass single settings by keyword instead, e.g. "
            f"{owner}({fields[0]}=...)"
        )
    return dataclasses.replace(config, **overrides) if overrides else config


def env_metadata(name: str, *, is_parallelizable: bool) -> dict[str, Any]:
    """PettingZoo's class-level ``metadata`` of a text environment.

    Args:
        name: the versioned name, e.g. ``"debate_v0"`` (records and reports use it).
        is_parallelizable: whether the env is also a ``ParallelEnv`` (PettingZoo's flag).

    Example:
        >>> env_metadata("demo_v0", is_parallelizable=False)["render_modes"]
        ['ansi', 'human']
    """
    return {
        "name": name,
        "render_modes": list(RENDER_MODES),
        "is_parallelizable": is_parallelizable,
    }


def numbered_agents(num_agents: int) -> list[str]:
    """The agent names of an environment whose agents are peers: ``agent_0 ... agent_{N-1}``.

    Example:
        >>> numbered_agents(3)
        ['agent_0', 'agent_1', 'agent_2']
    """
    return [f"agent_{i}" for i in range(num_agents)]


def check_aec_step(env: Any, action: object, *, owner: str) -> str:
    """The acting agent of an AEC ``step(action)``, or the error a misuse deserves.

    Before the first ``reset()``, and after the episode has ended (no agents
    left), stepping is an error that says to reset. A live agent must act with a
    string: any string is a valid action (garbage text is an outcome with its
    reward), anything else is a programming error. An agent whose episode is over
    takes PettingZoo's dead step, with ``None``; that is left to the caller.

    Raises:
        RuntimeError: no episode, or the episode ended.
        TypeError: a live agent's action is not a ``str``.
    """
    if getattr(env, "agents", None) is None:
        raise RuntimeError(f"step() before reset(): {owner} has no episode yet; call reset() first")
    if not env.agents:
        raise RuntimeError(
            "step() after the episode ended: every agent has taken its final step; "
            "call reset() to start a new episode"
        )
    agent: str = env.agent_selection
    live = not (env.terminations[agent] or env.truncations[agent])
    if live and not isinstance(action, str):
        raise TypeError(
            f"the action of {agent} must be its text (a str), got {type(action).__name__}; "
            "only agents whose episode has ended step with None"
        )
    return agent


class TextEnvMixin:
    """Shared plumbing of llm-envs environments; see the module docstring.

    Subclasses build ``self.config`` with :func:`resolve_config` and call
    :meth:`_init_text_env` in ``__init__``; call :meth:`_begin_reset` at the top
    of ``reset`` and, for an AEC env, :meth:`_start_aec_episode` once they know
    the episode's agents; call :meth:`_begin_step` at the top of an AEC ``step``
    and PettingZoo's ``_accumulate_rewards()`` at its end; build ``record()``
    with :meth:`_episode_record`; and implement :meth:`transcript`.
    """

    sample_fragments: ClassVar[tuple[str, ...]] = SAMPLE_FRAGMENTS
    """The pieces the spaces' ``sample()`` mixes into random text: an environment
    whose agents write a format of their own puts its pieces first."""

    render_mode: str | None
    np_random: Any
    np_random_seed: Any
    _observation_spaces: dict[str, Any]
    _action_spaces: dict[str, Any]
    _space_agents: tuple[str, ...]
    _space_agent_set: frozenset[str]
    _np_random_ready: bool
    metadata: dict[str, Any]

    def _init_text_env(self, agents: Iterable[str], render_mode: str | None) -> None:
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(
                f"render_mode must be one of {RENDER_MODES} or None, got {render_mode!r}"
            )
        self.render_mode = render_mode
        # Spaces are built when first asked for (a space costs ~0.1 ms: 10,000 agents
        # would pay a second at construction), then kept: the same object every call.
        self._space_agents = tuple(agents)
        self._space_agent_set = frozenset(self._space_agents)
        self._observation_spaces = {}
        self._action_spaces = {}
        self._np_random_ready = False

    def observation_space(self, agent: str) -> Any:
        """``Dict({"messages": ChatMessages})``, the same object on every call."""
        space = self._observation_spaces.get(agent)
        if space is None:
            self._check_agent(agent)
            space = self._observation_spaces[agent] = chat_observation_space(self.sample_fragments)
        return space

    def action_space(self, agent: str) -> Any:
        """:class:`~llm_envs.spaces.UnicodeText`: any string."""
        space = self._action_spaces.get(agent)
        if space is None:
            self._check_agent(agent)
            space = self._action_spaces[agent] = UnicodeText(fragments=self.sample_fragments)
        return space

    def _check_agent(self, agent: str) -> None:
        if agent not in self._space_agent_set:
            names = list(self._space_agents)
            shown = names if len(names) <= 6 else [*names[:3], "...", *names[-2:]]
            raise KeyError(f"unknown agent {agent!r}; this environment's agents are {shown}")

    def _begin_reset(
        self, seed: int | None, options: Mapping[str, Any] | None, known: frozenset[str]
    ) -> dict[str, Any]:
        """Reseed if asked (or never seeded) and return the options, warning about unknown keys."""
        if seed is not None or not self._np_random_ready:
            self.np_random, self.np_random_seed = seeding.np_random(seed)
            self._np_random_ready = True
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(
                f"{type(self).__name__}.reset(options=...) takes a dict of options (known: "
                f"{sorted(known)}), got {type(options).__name__} {options!r:.80}"
            )
        options = dict(options or {})
        unknown = set(options) - known
        if unknown:
            warnings.warn(
                f"{type(self).__name__}.reset ignores unknown option(s) {sorted(unknown)}; "
                f"known options: {sorted(known)}",
                stacklevel=3,
            )
        return options

    def _start_aec_episode(self, agents: Sequence[str]) -> None:
        """PettingZoo's per-episode AEC state, fresh: the first of ``agents`` acts.

        Every agent is live, with zero rewards and empty infos; the environment
        then sets its own state and fills ``infos``.
        """
        if not agents:
            raise ValueError("an episode needs at least one agent, got none")
        env: Any = self
        env.agents = list(agents)
        env.rewards = dict.fromkeys(env.agents, 0.0)
        env._cumulative_rewards = dict.fromkeys(env.agents, 0.0)
        env.terminations = dict.fromkeys(env.agents, False)
        env.truncations = dict.fromkeys(env.agents, False)
        env.infos = {a: {} for a in env.agents}
        env.agent_selection = env.agents[0]

    def _begin_step(self, action: str | None) -> tuple[str, str] | None:
        """Check and open an AEC step; return ``(agent, text)``, or ``None`` when it is done.

        Before the first ``reset()``, and after the episode has ended (no agents
        left), stepping is an error that says to reset. An agent whose episode is
        over takes PettingZoo's dead step (its action must be ``None``), after
        which there is nothing left to do. Any other agent must act with a string.
        An opened step has zeroed the acting agent's cumulative reward (``last()``
        returned it) and every step reward: the environment sets this step's
        rewards and ends with ``self._accumulate_rewards()``.
        """
        env: Any = self
        agent = check_aec_step(env, action, owner=type(self).__name__)
        if env.terminations[agent] or env.truncations[agent]:
            env._was_dead_step(action)
            return None
        assert isinstance(action, str)  # check_aec_step refused anything else
        env._cumulative_rewards[agent] = 0.0
        env._clear_rewards()
        return agent, action

    def _episode_record(
        self, title: str, summary: Mapping[str, Any], turns: Iterable[TurnRecord]
    ) -> EpisodeRecord:
        """The ``record()`` envelope with ``metadata["name"]`` (see :mod:`llm_envs.records`)."""
        return episode_record(self.metadata["name"], title, summary, turns)

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
