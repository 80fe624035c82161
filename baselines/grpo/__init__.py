"""Train in llm-envs environments with TRL's ``GRPOTrainer``.

* :mod:`baselines.grpo.adapters`: TRL rollout functions that play our environments.
* :mod:`baselines.grpo.assembly`: multi-turn completions as one token sequence,
  with the environment's tokens masked out of the loss.
* :mod:`baselines.grpo.config`: :class:`GRPORunConfig`.
* :mod:`baselines.grpo.run`: building TRL's trainer from it, and the command line.

``python -m baselines.grpo --help`` lists the flags.
"""

from __future__ import annotations

from baselines.grpo.config import GRPORunConfig

__all__ = ["GRPORunConfig"]
