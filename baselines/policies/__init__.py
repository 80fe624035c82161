"""Deprecated: the samplers moved to :mod:`baselines.samplers`; removed in the next release.

``import baselines.policies`` and ``from baselines.policies.<module> import X``
keep working (each submodule is the same module object as its
``baselines.samplers`` counterpart), with one :class:`DeprecationWarning`.
"""

from __future__ import annotations

import importlib
import sys
import warnings

import baselines.samplers
from baselines.samplers import *  # noqa: F403
from baselines.samplers import __all__ as __all__

warnings.warn(
    "baselines.policies is deprecated: import from baselines.samplers instead",
    DeprecationWarning,
    stacklevel=2,
)

for _name in (
    "base",
    "build",
    "openai_policy",
    "scripted",
    "server_pool",
    "server_weights",
    "transformers_policy",
    "vllm_policy",
):
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"baselines.samplers.{_name}")


def __getattr__(name: str) -> object:
    return getattr(baselines.samplers, name)
