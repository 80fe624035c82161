"""Deprecated: TRL's rollout function is :mod:`baselines.grpo.rollout_func` (gone next release).

``env_reward`` is :func:`baselines.grpo.reward.env_reward` and
``trainer_policy`` :func:`baselines.grpo.sampling.trainer_policy`.
"""

import warnings

from baselines.grpo.reward import env_reward
from baselines.grpo.rollout_func import EnvRollout, completion_metrics
from baselines.grpo.sampling import trainer_policy

__all__ = ["EnvRollout", "completion_metrics", "env_reward", "trainer_policy"]

warnings.warn(
    "baselines.grpo.adapters is deprecated: import baselines.grpo.rollout_func (EnvRollout, "
    "completion_metrics), baselines.grpo.reward (env_reward) or baselines.grpo.sampling "
    "(trainer_policy) instead",
    DeprecationWarning,
    stacklevel=2,
)
