"""Deprecated alias of :mod:`baselines.grpo.rollout_func` for one release: import that instead."""

import sys
import warnings

import baselines.grpo.rollout_func

warnings.warn(
    "baselines.grpo.family_rollout is deprecated: import baselines.grpo.rollout_func instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = baselines.grpo.rollout_func
