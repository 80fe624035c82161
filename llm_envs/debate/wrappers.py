"""Reward wrappers that turn a vote ledger into final group rewards (the debate recipe).

A wrapped environment must expose its votes on ``env.unwrapped.votes``: a
sequence of :class:`~llm_envs.debate.rewards.Vote` whose agent ids index
``env.unwrapped.possible_agents``. When the episode ends (every agent
terminated or truncated), the wrapper computes the pairwise reward once and
adds it to each agent's reward, so each agent's final ``last()`` returns its
step rewards plus the group reward. It also writes the reward diagnostics into
each agent's infos.

The wrappers never change the environment's dynamics and do nothing before
the episode ends.

One pairwise reward per environment: wrapping an environment that already
carries one (``WinMinusLossReward(debate.env())``, since ``debate.env()``
applies ``WinRateReward``) is a ``ValueError``, never a second reward added on
top of the first. Wrap the bare environment (``debate.raw_env()`` or
``debate.env(reward=None)``), or let ``debate.env(reward="win_minus_loss")``
choose the reward.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pettingzoo import AECEnv
from pettingzoo.utils import BaseWrapper

from llm_envs.debate.rewards import PAIRWISE_REWARDS, RewardMode

__all__ = ["REWARD_WRAPPERS", "PairwiseRewardWrapper", "WinMinusLossReward", "WinRateReward"]


class PairwiseRewardWrapper(BaseWrapper[str, Any, Any]):
    """Adds a pairwise group reward, computed from ``env.unwrapped.votes``, when the episode ends.

    Subclasses choose the reward function; use :class:`WinRateReward` or
    :class:`WinMinusLossReward`.

    Infos written for every agent at the end: ``pairwise_reward``,
    ``pairwise_reward_is_win_rate``, ``pairwise_reward_is_win_minus_loss``,
    ``pairwise_total_votes``, ``pairwise_malformed``, ``pairwise_any_votes``.

    Args:
        env: an AEC environment (possibly wrapped) whose unwrapped form has a
            ``votes`` ledger, and which carries no pairwise reward yet.

    Raises:
        TypeError: if the environment has no vote ledger.
        ValueError: if the environment already carries a pairwise reward wrapper
            (``debate.env()`` applies ``WinRateReward``): the two rewards would be
            added up. Wrap ``debate.raw_env()`` or ``debate.env(reward=None)``.
    """

    mode: ClassVar[RewardMode]

    def __init__(self, env: AECEnv[str, Any, Any]) -> None:
        if not hasattr(env.unwrapped, "votes"):
            raise TypeError(
                f"{type(self).__name__} needs an environment with a vote ledger "
                f"(env.unwrapped.votes), and {type(env.unwrapped).__name__} has none"
            )
        existing = _pairwise_wrapper_in(env)
        if existing is not None:
            raise ValueError(
                f"{type(self).__name__} would add a second pairwise reward: the environment "
                f"already carries {type(existing).__name__} (debate.env() applies win_rate "
                "unless told otherwise). Wrap the bare environment, debate.raw_env() or "
                f"debate.env(reward=None), or pick the reward with "
                f"debate.env(reward={self.mode!r})"
            )
        super().__init__(env)
        self._granted = True

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset the environment and arm the end-of-episode reward."""
        self.env.reset(seed=seed, options=options)
        self._granted = False

    def step(self, action: Any) -> None:
        """Step the environment; when this step ends the episode, add the group reward."""
        self.env.step(action)
        if self._granted:
            return
        base = self.env.unwrapped
        if base.agents and all(base.terminations[a] or base.truncations[a] for a in base.agents):
            self._granted = True
            self._grant(base)

    def _grant(self, base: Any) -> None:
        result = PAIRWISE_REWARDS[self.mode](base.votes, len(base.possible_agents))
        for agent_id, agent in enumerate(base.possible_agents):
            if agent not in base.agents:
                continue
            reward = result.rewards[agent_id]
            base.rewards[agent] += reward
            base._cumulative_rewards[agent] += reward
            base.infos[agent] = {
                **base.infos[agent],
                "pairwise_reward": reward,
                "pairwise_reward_is_win_rate": self.mode == "win_rate",
                "pairwise_reward_is_win_minus_loss": self.mode == "win_minus_loss",
                "pairwise_total_votes": result.total_votes,
                "pairwise_malformed": result.malformed,
                "pairwise_any_votes": result.any_votes,
            }


def _pairwise_wrapper_in(env: Any) -> PairwiseRewardWrapper | None:
    """The first pairwise reward wrapper in ``env``'s chain of wrappers, or None."""
    seen: set[int] = set()
    while env is not None and id(env) not in seen:
        if isinstance(env, PairwiseRewardWrapper):
            return env
        seen.add(id(env))
        env = getattr(env, "env", None)
    return None


class WinRateReward(PairwiseRewardWrapper):
    """Final reward: each agent's leave-one-out win rate in ``[0, 1]`` (ties count 1/2).

    Example:
        >>> from llm_envs.debate import DebateEnv
        >>> env = WinRateReward(DebateEnv(num_agents=2, max_rounds=1))
        >>> env.reset(seed=0)
    """

    mode = "win_rate"


class WinMinusLossReward(PairwiseRewardWrapper):
    """Final reward: each agent's leave-one-out (wins - losses) / matchups in ``[-1, 1]``.

    Wrap the bare environment: ``debate.env()`` already carries ``WinRateReward``.

    Example:
        >>> from llm_envs import debate
        >>> env = WinMinusLossReward(debate.raw_env(num_agents=2))
        >>> WinMinusLossReward(debate.env())
        Traceback (most recent call last):
        ValueError: WinMinusLossReward would add a second pairwise reward: ...
    """

    mode = "win_minus_loss"


REWARD_WRAPPERS: dict[RewardMode, type[PairwiseRewardWrapper]] = {
    "win_rate": WinRateReward,
    "win_minus_loss": WinMinusLossReward,
}
"""The wrapper for each reward mode."""
