"""Train in llm-envs environments with TRL"s ``GRPOTrainer``.

* :mod:`baselines.grpo.adapters`: TRL rollout functions that play our environments.
* :mod:`baselines.grpo.assembly`: multi-turn completions as one token sequence,
  with the environment"s tokens masked out of the loss.
* :mod:`baselines.grpo.config`: :class:`GRPORunConfig`.
* :mod:`baselines.grpo.run`: building TRL's trainer from it, and the command line.

``python -m baselines.grpo --help`` lists the flags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baselines._lazy import lazy_attributes

if TYPE_CHECKING:
    from baselines.grpo.adapters import (
        DebateRollout,
        EnvRollout,
        SingleAgentRollout,
        code_collab_rollout,
        env_reward,
        expert_iteration_rollout,
        trainer_policy,
    )
    from baselines.grpo.config import GRPORunConfig
    from baselines.grpo.run import (
        build_rollout,
        build_trainer,
        grpo_config,
        grpo_config_kwargs,
        main,
    )
    from baselines.grpo.sampling import use_servers

__all__ = [
    "DebateRollout",
    "EnvRollout",
    "GRPORunConfig",
    "SingleAgentRollout",
    "build_rollout",
    "build_trainer",
    "code_collab_rollout",
    "env_reward",
    "expert_iteration_rollout",
    "grpo_config",
    "grpo_config_kwargs",
    "main",
    "trainer_policy",
    "use_servers",
]

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "DebateRollout": ".adapters",
        "EnvRollout": ".adapters",
        "GRPORunConfig": ".config",
        "SingleAgentRollout": ".adapters",
        "build_rollout": ".run",
        "build_trainer": ".run",
        "code_collab_rollout": ".adapters",
        "env_reward": ".adapters",
        "expert_iteration_rollout": ".adapters",
        "grpo_config": ".run",
        "grpo_config_kwargs": ".run",
        "main": ".run",
        "trainer_policy": ".adapters",
        "use_servers": ".sampling",
    },
)
