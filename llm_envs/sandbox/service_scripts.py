"""Deprecated: :mod:`llm_envs.sandbox.service.scripts` (this name goes in the next release)."""

import sys
import warnings

from llm_envs.sandbox.service import scripts

warnings.warn(
    "llm_envs.sandbox.service_scripts is deprecated: import from llm_envs.sandbox.service.scripts",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = scripts
