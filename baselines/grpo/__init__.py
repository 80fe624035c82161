"""Train in llm-envs environments with TRL's ``GRPOTrainer``.

* :mod:`baselines.grpo.rollout_func`: TRL's ``rollout_func`` for any registered
  family (the token-level bridge to TRL); the reward function that reads its
  returns is :mod:`baselines.grpo.reward`.
* :mod:`baselines.grpo.assembly`: multi-turn completions as one token sequence,
  with the environment's tokens masked out of the loss.
* TRL's ``environment_factory`` (one seat of any family as a tool-using
  environment, in process or on an episode server) is text-level, so it is
  a bridge of its own: :mod:`llm_envs.bridges.trl`.
* :mod:`baselines.grpo.config`: :class:`GRPORunConfig`.
* :mod:`baselines.grpo.run`: building TRL's trainer from it, and the command line.

``python -m baselines.grpo --help`` lists the flags.
"""

from __future__ import annotations

from baselines.grpo.config import GRPORunConfig
from llm_envs.bridges.trl import SeatEnvironmentFactory

__all__ = ["GRPORunConfig", "SeatEnvironmentFactory"]
