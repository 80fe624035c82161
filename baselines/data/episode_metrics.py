"""Episode statistics of a batch of trajectory groups (the debate recipe, "Metrics and Artifacts").

:func:`episode_metrics` reads only what the rollout recorded: token counts,
rewards, the numeric values of each turn's ``info`` and each trajectory's final
metrics, both read through :func:`numeric_info` (the one rule for which info
values are logged). Names follow the seed (and tinker-cookbook), with an *episode* meaning
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
                                            (``parse_error``, ``correct``...)
==========================================  ===============================================

When trajectories carry a strategy tag (expert iteration), every metric is
also reported per strategy as ``env/{strategy}/...``.

Never imports torch; never parses environment text.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np

from baselines.data.advantages import group_returns, is_constant_group
from baselines.types import Trajectory, TrajectoryGroup
from llm_envs.contract import CONTEXT_KEYS, LOSS_WEIGHT, RESERVED_INFO_KEYS

__all__ = [
    "SKIPPED_INFO_KEYS",
    "episode_metrics",
    "numeric_info",
    "warn_reserved_info_keys",
    "warned_reserved_keys",
]

SKIPPED_INFO_KEYS: Final = CONTEXT_KEYS | {LOSS_WEIGHT}
"""Info keys that are never logged as outcomes: the context of a turn and its loss weight."""


def numeric_info(info: Mapping[str, object]) -> dict[str, float]:
    """The numeric outcome values of an ``info`` dict, as floats: what every trainer logs.

    The one rule, shared by the rollouts' per-trajectory metrics, the episode
    metrics, the GRPO adapters and the trainers:

    * keys: every key except :data:`SKIPPED_INFO_KEYS` (the context keys of
      :data:`llm_envs.contract.CONTEXT_KEYS`, such as ``stop``, ``round`` and
      ``turn``, which describe the turn rather than its outcome, and
      ``loss_weight``, which is training bookkeeping);
    * values: real numbers (``int``, ``float``, ``numpy`` integers and floats,
      any :class:`numbers.Real`) and booleans (Python or numpy; ``True`` is 1,
      so their mean is a fraction), converted to ``float``; NaN and infinities
      are left out (one would poison a mean), as is an ``int`` too large for a
      float. Strings, lists, ``None``, complex numbers and ``Decimal`` are left out.

    Keys keep their order in ``info``.

    Example:
        >>> numeric_info({"correct": True, "turn": 3, "round": 1, "text": "x", "loss_weight": 0})
        {'correct': 1.0}
    """
    out = {}
    for key, value in info.items():
        if key in SKIPPED_INFO_KEYS or not isinstance(value, numbers.Real | np.bool_):
            continue
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            continue
        if math.isfinite(number):
            out[key] = number
    return out


warned_reserved_keys: set[str] = set()
"""The reserved keys already warned about in this process: a warning per key, not per step."""


def warn_reserved_info_keys(info: Mapping[str, object], env: Any) -> None:
    """Warn, once per key per process, when ``env``'s info holds a key a trainer reserves.

    The trainers log metrics of their own under the names of
    :data:`llm_envs.contract.RESERVED_INFO_KEYS` (MAGRPO's ``solved``...): an
    environment's info of that name is dropped, or replaces the trainer's
    number, without a word. Every trainer's rollout calls this on the outcome
    infos it reads, so the first episode says so, naming the key, who reserves
    it and the fix.
    """
    if RESERVED_INFO_KEYS.keys().isdisjoint(info):
        return
    for key in info:
        if key in RESERVED_INFO_KEYS and key not in warned_reserved_keys:
            warned_reserved_keys.add(key)
            unwrapped = getattr(env, "unwrapped", env)
            name = getattr(unwrapped, "metadata", {}).get("name") or type(unwrapped).__name__
            warnings.warn(
                f"env {name!r} has an info {key!r}, a name reserved by "
                f"{RESERVED_INFO_KEYS[key]} (llm_envs.contract.RESERVED_INFO_KEYS); rename "
                f"the info, e.g. {name.partition('_v')[0] + '_' + key!r}",
                stacklevel=2,
            )


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
        for key, value in numeric_info(trajectory_metrics).items():
            per_trajectory[key].append(value)
    for key, values in per_trajectory.items():
        metrics[f"{prefix}/{key}"] = _mean(values)
    per_turn: dict[str, list[float]] = defaultdict(list)
    for t in transitions:
        for key, value in numeric_info(t.info).items():
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
