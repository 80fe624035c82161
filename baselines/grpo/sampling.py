"""The sampler of a TRL rollout: the trainer's current weights, and a record of what it saw.

:func:`trainer_policy` samples with ``trl.GRPOTrainer``'s current weights
(TRL's colocated vLLM engine, or ``generate`` on the unwrapped model); the
rollout functions of :mod:`baselines.grpo.adapters` wrap it in a recorder that
keeps each turn's chat and text for the completion assembler.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from baselines.policies.base import (
    ChatRenderer,
    Completion,
    Policy,
    SampleRequest,
    SamplingParams,
    StopReason,
)
from baselines.policies.vllm_policy import VLLMPolicy
from baselines.types import Tokens

__all__ = ["RecordingPolicy", "SeenTurn", "trainer_policy"]


@contextlib.contextmanager
def trainer_policy(trainer: Any, *, batch_size: int = 32) -> Iterator[Policy]:
    """A sampler with the trainer's current weights, for the duration of one rollout.

    * Without vLLM: a :class:`~baselines.policies.TransformersPolicy` over the
      trainer's model, unwrapped by TRL's ``unwrap_model_for_generation`` (which
      gathers DeepSpeed ZeRO-3 weights and pauses gradient checkpointing), with
      ``trainer.processing_class`` as tokenizer.
    * With ``use_vllm=True, vllm_mode="colocate"``: TRL's own engine
      (``trainer.vllm_generation.llm``), whose weights TRL syncs before it calls
      the rollout function, sampled through :class:`~baselines.policies.VLLMPolicy`'s
      request logic (processed logprobs, stop strings, token prompts).
    * ``vllm_mode="server"``: not supported (TRL's server speaks its own
      protocol); an error says so.

    Args:
        trainer: a ``trl.GRPOTrainer``.
        batch_size: rows per ``generate`` call of the transformers sampler.
    """
    tokenizer = trainer.processing_class
    if getattr(trainer, "use_vllm", False):
        if trainer.vllm_mode != "colocate":
            raise ValueError(
                f"the llm_envs rollout functions sample with vllm_mode='colocate' only, got "
                f"{trainer.vllm_mode!r}: TRL's vLLM server speaks its own protocol. Use "
                "vllm_mode='colocate', or pass policy=OpenAIPolicy(...) against a `vllm serve` "
                "endpoint whose weights you refresh yourself"
            )
        if getattr(trainer.args, "vllm_enable_sleep_mode", False):
            raise ValueError(
                "vllm_enable_sleep_mode=True puts TRL's engine to sleep between its own "
                "generate calls, and a rollout function samples outside them; set it to False"
            )
        yield _EnginePolicy(trainer.vllm_generation.llm, tokenizer)
        return
    from trl.models import unwrap_model_for_generation

    with unwrap_model_for_generation(
        trainer.model_wrapped,
        trainer.accelerator,
        gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
        gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
    ) as model:
        from baselines.policies.transformers_policy import TransformersPolicy

        yield TransformersPolicy(model, tokenizer, batch_size=batch_size)


class _EnginePolicy(VLLMPolicy):
    """:class:`VLLMPolicy` over an engine that someone else built and keeps in sync (TRL's)."""

    def __init__(self, llm: Any, tokenizer: Any) -> None:
        # VLLMPolicy.__init__ would build a second engine; this one exists already.
        self.llm = llm
        self.tokenizer = tokenizer
        self.renderer = ChatRenderer(tokenizer)


@dataclass(frozen=True)
class SeenTurn:
    """A sampled turn's chat, text and stop reason."""

    messages: list[dict[str, str]]
    text: str
    stop_reason: StopReason


class RecordingPolicy:
    """Remembers each sampled turn's chat and text: the assembler's text fallback needs them."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.seen: dict[tuple[Tokens, Tokens], SeenTurn] = {}

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        """Sample with the inner policy; remember each turn's chat, text and stop reason."""
        completions = self.inner.sample(requests, params)
        for request, c in zip(requests, completions, strict=True):
            messages = [dict(m) for m in request.messages]
            self.seen[(c.prompt_tokens, c.tokens)] = SeenTurn(messages, c.text, c.stop_reason)
        return completions
