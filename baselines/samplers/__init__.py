"""Samplers: chat observations in, sampled tokens, logprobs and text out.

:class:`TransformersPolicy` and :class:`VLLMPolicy` import their backends only
when built, so importing this package needs neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baselines.samplers.base import (
    ChatRenderer,
    Completion,
    Policy,
    SampleRequest,
    SamplingParams,
    StopReason,
    cut_at_stop,
)

if TYPE_CHECKING:
    from baselines.samplers.openai_policy import OpenAIPolicy
    from baselines.samplers.scripted import ScriptedPolicy
    from baselines.samplers.transformers_policy import TransformersPolicy
    from baselines.samplers.vllm_policy import VLLMPolicy

__all__ = [
    "ChatRenderer",
    "Completion",
    "OpenAIPolicy",
    "Policy",
    "SampleRequest",
    "SamplingParams",
    "ScriptedPolicy",
    "StopReason",
    "TransformersPolicy",
    "VLLMPolicy",
    "cut_at_stop",
]

_LAZY = {
    "OpenAIPolicy": "baselines.samplers.openai_policy",
    "ScriptedPolicy": "baselines.samplers.scripted",
    "TransformersPolicy": "baselines.samplers.transformers_policy",
    "VLLMPolicy": "baselines.samplers.vllm_policy",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
