"""Deprecated: :mod:`llm_envs.sandbox.service.shapes` (this name goes in the next release)."""

import sys
import warnings

from llm_envs.sandbox.service import shapes

warnings.warn(
    "llm_envs.sandbox.service_shapes is deprecated: import from llm_envs.sandbox.service.shapes",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = shapes
