"""MAGRPO's models and optimizers: a model per agent, or one base with an adapter per agent.

Functions that take the settings they use and return what they build, so the
trainer's constructor reads as a list of what a run holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from baselines.magrpo.config import MAGRPOConfig
from baselines.models import resolve_model
from baselines.training.forward import supports_logits_to_keep
from baselines.training.lora import adapter_parameters, add_lora, load_adapter

__all__ = ["AgentModels", "load_agent_models", "make_optimizers"]


@dataclass(frozen=True)
class AgentModels:
    """What :func:`load_agent_models` builds.

    Attributes:
        models: agent -> its model (with LoRA, the same object for every agent).
        tokenizer: the agents' tokenizer.
        actions_only: whether a forward pass may project the action tokens
            alone to the vocabulary (``logits_to_keep``).
    """

    models: dict[str, Any]
    tokenizer: Any
    actions_only: bool


def load_agent_models(
    config: MAGRPOConfig,
    agents: Sequence[str],
    models: Mapping[str, Any] | None = None,
    tokenizer: Any | None = None,
    checkpoint: Path | None = None,
) -> AgentModels:
    """The agents' models: given, or loaded from ``config.model``; a checkpoint's weights loaded.

    With ``config.lora_r > 0`` the agents share one base model, each with a
    LoRA adapter of its own; otherwise each agent has a model of its own.

    Raises:
        ValueError: ``models`` without ``tokenizer``, or models that do not
            match the agents (one distinct model each; one shared base with LoRA).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    agents = list(agents)
    if models is not None and tokenizer is None:
        raise ValueError("pass tokenizer= together with models=")
    path = resolve_model(config.model) if models is None else ""  # "": the models are given
    tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
    if config.lora_r > 0:
        if models is None:
            base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        else:
            bases = {id(m) for m in models.values()}
            if sorted(models) != sorted(agents) or len(bases) != 1:
                raise ValueError(
                    f"with lora_r > 0 the agents {agents} share one base model: give the "
                    f"same model object for each, got {sorted(models)} ({len(bases)} objects)"
                )
            base = next(iter(models.values()))
        # Before wrapping: PEFT's forward hides the base model's logits_to_keep argument.
        actions_only = supports_logits_to_keep(base)
        shared = add_lora(base, config, adapters=tuple(agents))
        if checkpoint is not None:
            for agent in agents:
                load_adapter(shared, checkpoint / agent, agent)
        return AgentModels(dict.fromkeys(agents, shared), tokenizer, actions_only)
    if models is None:
        models = {
            agent: AutoModelForCausalLM.from_pretrained(
                checkpoint / agent if checkpoint else path, dtype=torch.float32
            )
            for agent in agents
        }
    elif checkpoint is not None:
        for agent, model in models.items():
            model.load_state_dict(
                AutoModelForCausalLM.from_pretrained(checkpoint / agent).state_dict()
            )
    distinct = len({id(m) for m in models.values()}) == len(models)
    if sorted(models) != sorted(agents) or not distinct:
        raise ValueError(f"give one distinct model per agent {agents}, got {sorted(models)}")
    actions_only = all(supports_logits_to_keep(m) for m in models.values())
    return AgentModels(dict(models), tokenizer, actions_only)


def make_optimizers(
    config: MAGRPOConfig,
    models: Mapping[str, Any],
    checkpoint: Path | None = None,
    device: Any = "cpu",
) -> dict[str, torch.optim.Optimizer]:
    """An AdamW per agent over what it trains (its adapter, with LoRA); a checkpoint's state."""
    optimizers: dict[str, torch.optim.Optimizer] = {
        agent: torch.optim.AdamW(
            adapter_parameters(model, agent) if config.lora_r > 0 else model.parameters(),
            lr=config.learning_rate,
            weight_decay=config.weight_decay,
        )
        for agent, model in models.items()
    }
    if checkpoint is not None:
        for agent, optimizer in optimizers.items():
            optimizer.load_state_dict(
                torch.load(checkpoint / agent / "optimizer.pt", map_location=device)
            )
    return optimizers
