"""Train in llm-envs environments with TRL's ``GRPOTrainer``.

* :mod:`baselines.grpo.family_rollout`: the TRL rollout function of any registered
  family (its base class, the reward function and the context-swap check in
  :mod:`baselines.grpo.adapters`).
* :mod:`baselines.grpo.assembly`: multi-turn completions as one token sequence,
  with the environment's tokens masked out of the loss.
* :mod:`baselines.grpo.environment`: one seat of any family as TRL's
  ``environment_factory`` (a tool-using environment); :mod:`baselines.grpo.remote`:
  the same for a seat served by an episode server, over OpenEnv's client.
* :mod:`baselines.grpo.config`: :class:`GRPORunConfig`.
* :mod:`baselines.grpo.run`: building TRL's trainer from it, and the command line.

``python -m baselines.grpo --help`` lists the flags.
"""

from __future__ import annotations

from baselines.grpo.config import GRPORunConfig
from baselines.grpo.environment import SeatEnvironmentFactory

__all__ = ["GRPORunConfig", "SeatEnvironmentFactory"]
