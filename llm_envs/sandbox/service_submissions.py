"""Deprecated: :mod:`llm_envs.sandbox.service.submissions` (this name goes in the next release)."""

import sys
import warnings

from llm_envs.sandbox.service import submissions

warnings.warn(
    "llm_envs.sandbox.service_submissions is deprecated: import from "
    "llm_envs.sandbox.service.submissions",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = submissions
