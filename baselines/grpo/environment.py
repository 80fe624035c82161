"""Deprecated alias of :mod:`llm_envs.bridges.trl` for one release: import that instead."""

import sys
import warnings

import llm_envs.bridges.trl

warnings.warn(
    "baselines.grpo.environment is deprecated: import llm_envs.bridges.trl instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = llm_envs.bridges.trl
