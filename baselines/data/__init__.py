"""Trajectories to training rows, without torch: advantages, Datums, episode metrics.

* :mod:`baselines.data.advantages`: returns, group-centred advantages and
  stratified strategy weights (pure functions).
* :mod:`baselines.data.credit`: multi-agent credit assignment, the schemes a
  trainer picks by name (group mean, role baselines, per-agent normalization,
  agent- and turn-wise groups).
* :mod:`baselines.data.datums`: trajectories to token-level
  :class:`~baselines.types.Datum` rows, packing and padding them for a forward pass.
* :mod:`baselines.data.episode_metrics`: the ``env/...`` metrics of a batch of
  episodes, from rewards and infos.

Nothing here imports torch: the data a trainer optimizes on can be built,
inspected and tested on any machine.
"""

from __future__ import annotations

from baselines.data.advantages import (
    UNTAGGED,
    center_advantages,
    drop_constant_groups,
    group_returns,
    is_constant_group,
    strategy_counts,
    strategy_key,
    stratified_scales,
    trajectory_return,
)
from baselines.data.credit import (
    CREDIT_NAMES,
    Credit,
    CreditName,
    RoleBaselines,
    assign_credit,
)
from baselines.data.datums import (
    assemble_training_data,
    pack_data,
    pad_data,
    training_context_transform,
    trajectory_to_data,
    unpack_data,
)
from baselines.data.episode_metrics import episode_metrics, numeric_info

__all__ = [
    "CREDIT_NAMES",
    "UNTAGGED",
    "Credit",
    "CreditName",
    "RoleBaselines",
    "assemble_training_data",
    "assign_credit",
    "center_advantages",
    "drop_constant_groups",
    "episode_metrics",
    "group_returns",
    "is_constant_group",
    "numeric_info",
    "pack_data",
    "pad_data",
    "strategy_counts",
    "strategy_key",
    "stratified_scales",
    "training_context_transform",
    "trajectory_return",
    "trajectory_to_data",
    "unpack_data",
]
