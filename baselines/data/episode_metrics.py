"""Episode statistics of a batch of trajectory groups (seed 001, "Metrics and Artifacts").

:func:`episode_metrics` reads only what the rollout recorded: token counts,
rewards, the numeric values of each turn's ``info`` and each trajectory's final
metrics. Names follow the seed (and tinker-cookbook), with an *episode* meaning
one agent's trajectory:

==========================================  ===============================================
``env/all/total_episodes``                  trajectories in the batch
``env/all/total_turns``                     transitions in the batch
``env/all/turns_per_episode``               mean transitions per trajectory
``env/all/ac_tokens_per_turn``              mean sampled tokens per transition
``env/all/ob_tokens_per_turn``              mean observation tokens per transition
``env/all/reward/total``                    mean return (step rewards + final reward)
``env/all/reward/final``                    mean final (group) reward
``env/all/by_group/frac_mixed``             groups whose returns are not all equal
``env/all/{key}``                           mean of a per-trajectory metric (the final
                                            info: ``pairwise_reward``, ``parse_error``...)
``env/all/turn/{key}``                      mean of a per-turn numeric info value
                                            (``parse_error``, ``round``, ``correct``...)
==========================================  ===============================================

When trajectories carry a strategy tag (expert iteration), every metric is
also reported per strategy as ``env/{strategy}/...``.

Never imports torch; never parses environment text.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from baselines.data.advantages import group_returns, is_constant_group
from baselines.types import Trajectory, TrajectoryGroup
from llm_envs.contract import CONTEXT_KEYS

__all__ = ["episode_metrics", "numeric_info"]

# Per-turn info values that are identifiers or context, not outcomes worth averaging.
_SKIP_TURN_KEYS = frozenset({"loss_weight", "turn"}) | (CONTEXT_KEYS - {"round"})


def numeric_info(info: Mapping[str, object]) -> Iterable[tuple[str, float]]:
    """The finite numeric outcome values of an ``info`` dict (no context keys, no ``loss_weight``).

    Example:
        >>> dict(numeric_info({"correct": True, "turn": 3, "round": 1, "text": "x"}))
        {'correct': 1.0, 'round': 1.0}
    """
    for key, value in info.items():
        if isinstance(value, bool | int | float) and key not in _SKIP_TURN_KEYS:
            number = float(value)
            if math.isfinite(number):
                yield key, number


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def _stats(
    entries: Sequence[tuple[Trajectory, float, float, Mapping[str, float]]], prefix: str
) -> dict[str, float]:
    transitions = [t for trajectory, *_ in entries for t in trajectory.transitions]
    metrics = {
        f"{prefix}/total_episodes": float(len(entries)),
        f"{prefix}/total_turns": float(len(transitions)),
        f"{prefix}/turns_per_episode": len(transitions) / len(entries) if entries else 0.0,
        f"{prefix}/ac_tokens_per_turn": _mean([len(t.action) for t in transitions]),
        f"{prefix}/ob_tokens_per_turn": _mean([len(t.observation) for t in transitions]),
        f"{prefix}/reward/total": _mean([ret for _, ret, _, _ in entries]),
        f"{prefix}/reward/final": _mean([final for _, _, final, _ in entries]),
    }
    per_trajectory: dict[str, list[float]] = defaultdict(list)
    for *_, trajectory_metrics in entries:
        for key, value in numeric_info(trajectory_metrics):
            per_trajectory[key].append(value)
    for key, values in per_trajectory.items():
        metrics[f"{prefix}/{key}"] = _mean(values)
    per_turn: dict[str, list[float]] = defaultdict(list)
    for t in transitions:
        for key, value in numeric_info(t.info):
            per_turn[key].append(value)
    for key, values in per_turn.items():
        metrics[f"{prefix}/turn/{key}"] = _mean(values)
    return metrics


def episode_metrics(groups_P: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """Token, turn, reward and env-info statistics of a batch (see the module docstring).

    Example:
        >>> from baselines.types import Transition
        >>> turn = Transition([1, 2, 3], [4, 5], [-0.1, -0.2], reward=1.0, info={"correct": True})
        >>> group = TrajectoryGroup([Trajectory([turn]), Trajectory([])], final_rewards_G=[0, 1])
        >>> m = episode_metrics([group])
        >>> m["env/all/reward/total"], m["env/all/turn/correct"], m["env/all/ac_tokens_per_turn"]
        (1.0, 1.0, 2.0)
    """
    entries = []
    mixed = []
    for group in groups_P:
        returns_G = group_returns(group)
        mixed.append(not is_constant_group(returns_G))
        for trajectory, ret, final, metrics in zip(
            group.trajectories_G, returns_G, group.final_rewards_G, group.metrics_G, strict=True
        ):
            entries.append((trajectory, float(ret), float(final), metrics))
    out = _stats(entries, "env/all")
    out["env/all/by_group/frac_mixed"] = _mean([float(m) for m in mixed])
    strategies = sorted({t.strategy for t, *_ in entries if t.strategy is not None})
    for strategy in strategies:
        out.update(_stats([e for e in entries if e[0].strategy == strategy], f"env/{strategy}"))
    return out
