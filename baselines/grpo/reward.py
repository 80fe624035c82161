"""The TRL reward function of the rollouts: each completion's environment return.

The rollout functions (:mod:`baselines.grpo.rollout_func`) compute every
completion's return while playing (and, with a credit scheme, its advantage);
:func:`env_reward` hands it to TRL and logs the per-completion environment
metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["env_reward"]


def env_reward(
    completions: list[Any], env_reward: list[float], **kwargs: Any
) -> list[float | None]:
    """TRL reward function: each completion's environment return, as the rollout computed it.

    Pass it as ``GRPOTrainer(reward_funcs=[env_reward], rollout_func=...)``. It
    also logs the mean of every per-completion metric of the extra field
    ``env_metrics`` through TRL's ``log_metric`` (as ``env/<name>``). When the
    rollout assigns credit (extra field ``credit_reward``), it returns those
    advantages instead and logs the mean return as ``env/return``.

    Args:
        completions: the decoded completions (unused: the environment scored them).
        env_reward: one return per completion (extra field of the rollout).
        **kwargs: TRL's other reward arguments; ``env_metrics``,
            ``credit_reward`` and ``log_metric`` are read.

    Example:
        >>> env_reward(["a", "b"], env_reward=[1.0, -0.5])
        [1.0, -0.5]
        >>> env_reward(["a", "b"], env_reward=[1.0, -0.5], credit_reward=[0.75, -0.75])
        [0.75, -0.75]
    """
    metrics: Sequence[Mapping[str, float]] | None = kwargs.get("env_metrics")
    credit: Sequence[float] | None = kwargs.get("credit_reward")
    log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
    if metrics and log_metric is not None:
        for name in sorted({k for m in metrics for k in m}):
            values = [m[name] for m in metrics if name in m]
            log_metric(f"env/{name}", math.fsum(values) / len(values))
    for name, given in (("env rewards", env_reward), ("credit rewards", credit)):
        if given is not None and len(given) != len(completions):
            raise ValueError(
                f"got {len(given)} {name} for {len(completions)} completions: the "
                "rollout function must return one per prompt entry"
            )
    if credit is None:
        return [float(r) for r in env_reward]
    if log_metric is not None and env_reward:
        log_metric("env/return", math.fsum(env_reward) / len(env_reward))
    return [float(a) for a in credit]
