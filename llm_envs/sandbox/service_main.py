"""Deprecated: :mod:`llm_envs.sandbox.service.server` (this name goes in the next release)."""

import sys
import warnings

from llm_envs.sandbox.service import server

warnings.warn(
    "llm_envs.sandbox.service_main is deprecated: import from llm_envs.sandbox.service.server",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = server
