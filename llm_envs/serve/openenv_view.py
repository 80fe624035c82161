"""Deprecated alias of :mod:`llm_envs.bridges.openenv` for one release: import that instead."""

import sys
import warnings

import llm_envs.bridges.openenv

warnings.warn(
    "llm_envs.serve.openenv_view is deprecated: import llm_envs.bridges.openenv instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = llm_envs.bridges.openenv
