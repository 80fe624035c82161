"""baselines: train language models in the :mod:`llm_envs` environments.

The environments speak text (chat messages in, raw text out); this package
speaks tokens. It samples episodes with a model, records every agent turn as
token-level :class:`~baselines.types.Transition` objects, centres returns within
groups (:mod:`baselines.data.advantages`), turns trajectories into
:class:`~baselines.types.Datum` training rows (:mod:`baselines.data.datums`) and
optimizes a policy-gradient loss on them (:mod:`baselines.training.losses`).

The direction of imports is one way: ``baselines`` imports the public API of
:mod:`llm_envs`, and nothing in :mod:`llm_envs` ever imports ``baselines``. A
trainer here never parses XML or reads an environment's internals: what it
needs from an environment arrives in ``infos`` (``loss_weight``,
``training_messages``, ``strategy``, ``stop``).

Importing ``baselines`` or its data modules (:mod:`baselines.types`,
:mod:`baselines.data.advantages`, :mod:`baselines.data.datums`) does not import torch; only
:mod:`baselines.training.losses` and the trainers do.
"""

from __future__ import annotations

from baselines.types import Datum, Trajectory, TrajectoryGroup, Transition

__all__ = ["Datum", "Trajectory", "TrajectoryGroup", "Transition"]
