"""Deprecated alias of :mod:`llm_envs.bridges.verifiers` for one release: import that instead."""

import sys
import warnings

import llm_envs.bridges.verifiers

warnings.warn(
    "llm_envs.adapters.verifiers_env is deprecated: import llm_envs.bridges.verifiers instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = llm_envs.bridges.verifiers
