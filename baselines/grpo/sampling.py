"""The sampler of a TRL rollout: the trainer's current weights, and a record of what it saw.

:func:`trainer_policy` samples with ``trl.GRPOTrainer``'s current weights
(TRL's colocated vLLM engine, ``generate`` on the unwrapped model, or
``vllm serve`` processes that :func:`use_servers` keeps in sync); the
rollout functions (:class:`~baselines.grpo.rollout_func.EnvRollout`) wrap it in a recorder that
keeps each turn's chat and text for the completion assembler.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from baselines.grpo.config import GRPORunConfig
from baselines.samplers.base import (
    ChatRenderer,
    Completion,
    Policy,
    SampleRequest,
    SamplingParams,
    StopReason,
)
from baselines.samplers.build import TrainerSampler, build_sampler
from baselines.samplers.vllm_policy import VLLMPolicy
from baselines.training.weights import gather_full_state, is_sharded
from baselines.types import Tokens

__all__ = [
    "RecordingPolicy",
    "SeenTurn",
    "ServerSampling",
    "trainer_policy",
    "use_servers",
]

_SERVERS = "llm_envs_servers"
"""The trainer attribute that holds its :class:`ServerSampling` (set by :func:`use_servers`)."""


class ServerSampling:
    """A trainer's ``vllm serve`` sampler, and the optimizer step whose weights it holds.

    Built by :func:`use_servers`. TRL samples before each optimizer step, and may
    call the rollout function several times per step (several generation
    batches, evaluation): :meth:`policy` pushes the weights only when
    ``trainer.state.global_step`` moved since the last push, so the servers get
    each step's weights once, before the first rollout that needs them.

    Attributes:
        sampler: the policy over this process's servers and its weight push
            (:func:`baselines.samplers.build.build_sampler`); ``refresh`` is None
            when the servers keep their weights (no ``sampler_weights_dir``).
        pushed_step: the optimizer step whose weights the servers hold (0: the
            initial model they were started with).
        pushes: weight pushes so far.
    """

    def __init__(self, sampler: TrainerSampler) -> None:
        self.sampler = sampler
        self.pushed_step = 0
        self.pushes = 0

    def policy(self, trainer: Any) -> Policy:
        """The servers' policy, after pushing the trainer's weights if a step was taken since."""
        step = int(trainer.state.global_step)
        if step != self.pushed_step and self.sampler.refresh is not None:
            # Every process gets here at the same step: gathering shards is collective.
            weights = gather_full_state(
                trainer.accelerator, trainer.model_wrapped, everywhere=self.sampler.every_process
            )
            if weights is not None:
                self.sampler.refresh(weights)
            self.pushes += 1
        self.pushed_step = step
        return self.sampler.policy


def use_servers(trainer: Any, settings: GRPORunConfig, *, model_path: str) -> ServerSampling:
    """Make :func:`trainer_policy` sample ``trainer``'s rollouts from ``vllm serve`` servers.

    The servers, routing and weight transfer come from ``settings``
    (``sampler_url``, ``sampler_routing``, ``sampler_weight_transfer``,
    ``sampler_weights_dir``), through the importance-sampling trainer's
    :func:`~baselines.samplers.build.build_sampler`: this process's share of the
    URLs, one :class:`~baselines.samplers.OpenAIPolicy` each (the served model
    name asked from the server, else ``model_path``), a
    :class:`~baselines.samplers.server_pool.ServerPool` over several.

    Args:
        trainer: a ``trl.GRPOTrainer`` with ``use_vllm=False``.
        settings: the run's config; its ``sampler_*`` fields are read.
        model_path: the checkpoint the servers and the trainer started from.

    Raises:
        ValueError: ``settings.sampler_url`` is empty, or the trainer runs TRL's vLLM.
    """
    if not settings.sampler_url:
        raise ValueError("use_servers needs sampler_url (the servers' /v1 base URLs)")
    if getattr(trainer, "use_vllm", False):
        raise ValueError(
            "this trainer samples with TRL's own vLLM engine (use_vllm=True); servers at "
            f"sampler_url={settings.sampler_url!r} replace it: build it with use_vllm=False"
        )
    acc = trainer.accelerator
    model = acc.unwrap_model(trainer.model)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT
    sampler = build_sampler(
        "openai",
        model=base,
        tokenizer=trainer.processing_class,
        model_path=model_path,
        cuda=acc.device.type == "cuda",
        seed=0,  # each request carries its own seed
        process_index=acc.process_index,
        max_model_len=0,  # for in-process engines only
        config=settings,
        sharded=is_sharded(acc),
        num_processes=acc.num_processes,
    )
    servers = ServerSampling(sampler)
    setattr(trainer, _SERVERS, servers)
    return servers


@contextlib.contextmanager
def trainer_policy(trainer: Any, *, batch_size: int = 32) -> Iterator[Policy]:
    """A sampler with the trainer's current weights, for the duration of one rollout.

    * Without vLLM: a :class:`~baselines.samplers.TransformersPolicy` over the
      trainer's model, unwrapped by TRL's ``unwrap_model_for_generation`` (which
      gathers DeepSpeed ZeRO-3 weights and pauses gradient checkpointing), with
      ``trainer.processing_class`` as tokenizer.
    * With ``use_vllm=True, vllm_mode="colocate"``: TRL's own engine
      (``trainer.vllm_generation.llm``), whose weights TRL syncs before it calls
      the rollout function, sampled through :class:`~baselines.samplers.VLLMPolicy`'s
      request logic (processed logprobs, stop strings, token prompts).
    * After :func:`use_servers`: the ``vllm serve`` servers of ``sampler_url``
      (:meth:`ServerSampling.policy`: the trainer's weights pushed to them once
      after each optimizer step).
    * ``vllm_mode="server"``: not supported (TRL's server speaks its own
      protocol); an error says so.

    Args:
        trainer: a ``trl.GRPOTrainer``.
        batch_size: rows per ``generate`` call of the transformers sampler.
    """
    servers = getattr(trainer, _SERVERS, None)
    if servers is not None:
        yield servers.policy(trainer)
        return
    tokenizer = trainer.processing_class
    if getattr(trainer, "use_vllm", False):
        if trainer.vllm_mode != "colocate":
            raise ValueError(
                f"the llm_envs rollout functions sample with vllm_mode='colocate' only, got "
                f"{trainer.vllm_mode!r}: TRL's vLLM server speaks its own protocol. Use "
                "vllm_mode='colocate', or use_vllm=False with `vllm serve` servers at "
                "sampler_url (use_servers), which get the new weights after every step"
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
        from baselines.samplers.transformers_policy import TransformersPolicy

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
