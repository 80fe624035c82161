"""The IS trainer's model and optimizer, each built by one function from the settings it reads.

:func:`load_policy_model` resolves the model (a hub id, a folder, or a built-in
name), loads it in fp32 on the process's device, picks the batch layout with
the start-up probe, and adds LoRA adapters when asked; :func:`make_optimizer`
builds AdamW over what is trained. Neither touches the trainer: the trainer
keeps what they return.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from baselines.is_trainer.config import ISTrainerConfig
from baselines.models import resolve_model
from baselines.samplers.base import ChatRenderer
from baselines.training.checkpoints import save_adapters_only
from baselines.training.forward import Layout, supports_logits_to_keep
from baselines.training.layout import choose_layout
from baselines.training.lora import add_lora, is_lora
from baselines.training.weights import loading_whole_models

__all__ = ["PolicyModel", "load_policy_model", "make_optimizer"]


@dataclass(frozen=True)
class PolicyModel:
    """The trained model and what was learned about it while loading.

    Attributes:
        model: the causal LM on the process's device (with LoRA adapters when
            ``lora_r > 0``), not yet prepared by ``accelerate``.
        tokenizer: its tokenizer.
        renderer: its chat template as a renderer of messages to token ids.
        path: the local folder it was loaded from.
        layout: ``packed`` or ``padded`` batches, as the probe chose.
        packing_probe: the probe's largest logprob error (NaN when it did not run).
        actions_only: the model projects to the vocabulary at chosen positions only.
        max_model_len: the longest sequence the sampler is built for.
        pad_token_id: the tokenizer's padding id (0 when it has none).
    """

    model: Any
    tokenizer: Any
    renderer: ChatRenderer
    path: str
    layout: Layout
    packing_probe: float
    actions_only: bool
    max_model_len: int
    pad_token_id: int


def load_policy_model(config: ISTrainerConfig, accelerator: Any) -> PolicyModel:
    """Load ``config.model`` for training on ``accelerator``'s device (see the module docstring).

    Reads ``model``, ``gradient_checkpointing``, ``packing`` and the LoRA
    settings of ``config``. The offline model is converted once, by the main
    process, before the others read it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with accelerator.main_process_first():  # converts the offline model once
        path = resolve_model(config.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    with loading_whole_models(accelerator):  # prepare() partitions it under ZeRO-3
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.to(accelerator.device)
    choice = choose_layout(model, accelerator.device, config.packing)
    if choice.reason:
        warnings.warn(f"{choice.reason}; falling back to padded batches", stacklevel=2)
    if choice.probe is not None and accelerator.is_main_process:
        print(f"is_trainer: packing probe: {choice.probe}", flush=True)
    actions_only = supports_logits_to_keep(model)  # before LoRA wraps the model
    max_model_len = min(int(getattr(model.config, "max_position_embeddings", 4096)), 8192)
    if config.lora_r > 0:
        if config.gradient_checkpointing:
            model.enable_input_require_grads()  # frozen embeddings: keep the graph
        model = add_lora(model, config)
    if is_lora(model):
        save_adapters_only(accelerator)  # checkpoints hold the adapter, not the base
    pad = tokenizer.pad_token_id
    return PolicyModel(
        model=model,
        tokenizer=tokenizer,
        renderer=ChatRenderer(tokenizer),
        path=str(path),
        layout=choice.layout,
        packing_probe=math.nan if choice.probe is None else choice.probe.error,
        actions_only=actions_only,
        max_model_len=max_model_len,
        pad_token_id=int(pad if pad is not None else 0),
    )


def make_optimizer(model: Any, config: ISTrainerConfig) -> torch.optim.Optimizer:
    """AdamW over the parameters that train (the adapter's alone with LoRA).

    Reads ``learning_rate``, ``adam_betas``, ``adam_eps`` and ``weight_decay``.
    """
    return torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=config.learning_rate,
        betas=config.adam_betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
    )
