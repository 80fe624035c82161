"""What each agent earned in an episode, read from its record the way its environment pays."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_envs.family import EpisodeRewards, recorded_rewards
from llm_envs.registration import family_class, is_family

__all__ = ["EpisodeRewards", "episode_rewards"]


def episode_rewards(
    record: Mapping[str, Any], env_kwargs: Mapping[str, Any] | None = None
) -> EpisodeRewards | None:
    """Each agent's reward in an episode, read from its record; None when it does not say.

    A record holds what the environment scored, not the reward stream, so the
    environment's family adds it up the way the environment pays it
    (:meth:`llm_envs.capabilities.RewardAccounting.episode_rewards`): the family whose name
    the record's ``env`` carries (``debate_v0`` is ``debate``'s); a record of
    an environment without a registered family is read by
    :func:`~llm_envs.family.recorded_rewards` (a ``rewards`` mapping of the
    record or its summary, else the ``reward`` of each turn's details).

    Args:
        record: an :class:`~llm_envs.records.EpisodeRecord`.
        env_kwargs: the environment's arguments, as the run's ``config.json``
            holds them (``reward``, ``on_parse_error``, ``format_reward``).

    Example:
        >>> record = {"env": "debate_v0", "turns": [{"agent": "agent_0", "round": 1,
        ...     "details": {"parse_error": "missing <solution>"}}],
        ...     "summary": {"win_rate": [0.0, 0.0, 0.0], "win_minus_loss": [0.0, 0.0, 0.0]}}
        >>> rewards = episode_rewards(record)
        >>> rewards.total
        {'agent_0': -1.0, 'agent_1': 0.0, 'agent_2': 0.0}
        >>> rewards.how["agent_0"]
        'parse-error penalty -1 + win_rate 0'
    """
    name = str(record.get("env", "")).rsplit("_v", 1)[0]
    family = family_class(name) if is_family(name) else None
    reader = getattr(family, "episode_rewards", recorded_rewards)
    try:
        rewards = reader(record, env_kwargs or {})
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None  # a record of another shape: the page shows it without rewards
    return rewards if rewards.total else None
