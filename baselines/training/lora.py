"""LoRA adapters (PEFT) for every trainer: build, save, load, and the merged weights for a sampler.

With ``lora_r > 0`` (:class:`baselines.config.RunConfig`) a trainer trains
LoRA adapters instead of the full model: :func:`add_lora` wraps the model in a
``peft.PeftModel`` with one adapter per name (MAGRPO: one per agent, on one
shared base model; the other trainers: ``"default"``). The base weights stay
frozen, and the optimizer holds the adapters' parameters only.

A sampler that holds its own copy of the weights (vLLM, a server) gets
:func:`merged_weights`: the base weights with ``lora_alpha / r * B @ A`` added,
under the base model's parameter names, so it loads them like a full
fine-tune's. ``generate`` on the trained model itself (the transformers
sampler) runs the adapters as they are and needs nothing.

Checkpoints hold the adapters only, in PEFT's own format (:func:`save_adapter`:
``adapter_model.safetensors`` and ``adapter_config.json``, which
``peft.PeftModel.from_pretrained(base, folder)`` loads). Adapter dropout is
fixed at 0: a dropout mask would make the trainer's logprobs differ from the
sampler's, and the importance ratio would no longer be 1 on-policy.

Only linear layers take adapters here (``all-linear`` or named linear
modules): :func:`merged_weights` merges ``B @ A`` into a weight matrix.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.samplers.base import Completion, Policy, SampleRequest, SamplingParams

__all__ = [
    "ADAPTER_DIR",
    "AdapterPolicy",
    "adapter_parameters",
    "add_lora",
    "is_lora",
    "load_adapter",
    "lora_config",
    "merged_weights",
    "require_peft",
    "save_adapter",
]

ADAPTER_DIR = "adapter"
"""The adapter's folder inside a checkpoint of the importance-sampling trainer."""

_WEIGHTS = "adapter_model.safetensors"


def require_peft(lora_r: int) -> None:
    """Raise when ``lora_r > 0`` and peft is missing, naming the extra that installs it.

    Raises:
        ImportError: ``lora_r=8 needs the peft package: pip install "llm-envs[peft]"...``
    """
    if lora_r > 0 and importlib.util.find_spec("peft") is None:
        raise ImportError(
            f'lora_r={lora_r} needs the peft package: pip install "llm-envs[peft]" '
            "(or --lora-r 0 to train every weight)"
        )


def lora_config(config: Any) -> Any:
    """The ``peft.LoraConfig`` of a run config's ``lora_*`` fields (adapter dropout 0)."""
    require_peft(config.lora_r)
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        target_modules=config.lora_modules,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )


def add_lora(model: Any, config: Any, adapters: Sequence[str] = ("default",)) -> Any:
    """Wrap ``model`` in a ``PeftModel`` with one LoRA adapter per name; the first is active.

    Args:
        model: a transformers causal language model (its weights get frozen).
        config: a run config with ``lora_r``, ``lora_alpha``, ``lora_target_modules``.
        adapters: the adapters' names (MAGRPO: the agents).

    Raises:
        ImportError: peft is not installed.
        ValueError: a target module is not a linear layer, or no module matches.
    """
    require_peft(config.lora_r)
    from peft import get_peft_model
    from peft.tuners.lora import Linear, LoraLayer

    try:
        peft_model = get_peft_model(model, lora_config(config), adapter_name=adapters[0])
    except ValueError as exc:  # PEFT: "Target modules {...} not found in the base model"
        raise ValueError(
            f"lora_target_modules={config.lora_target_modules!r}: {exc}. Name linear layers "
            "of the model (e.g. q_proj,v_proj) or use all-linear"
        ) from exc
    for name in adapters[1:]:
        peft_model.add_adapter(name, lora_config(config))
    not_linear = sorted(
        name
        for name, module in peft_model.named_modules()
        if isinstance(module, LoraLayer) and not isinstance(module, Linear)
    )
    if not_linear:
        raise ValueError(
            f"lora_target_modules={config.lora_target_modules!r} puts adapters on layers that "
            f"are not linear ({not_linear[:3]}...); name linear layers only, or use all-linear"
        )
    peft_model.set_adapter(adapters[0])
    return peft_model


def is_lora(model: Any) -> bool:
    """Whether ``model`` (unwrapped from DDP) is a ``PeftModel``."""
    if importlib.util.find_spec("peft") is None:
        return False
    from peft import PeftModel

    return isinstance(getattr(model, "module", model), PeftModel)


def adapter_parameters(model: Any, adapter: str) -> list[Any]:
    """The trainable parameters of one adapter (its ``lora_A`` and ``lora_B`` matrices)."""
    from peft.tuners.lora import LoraLayer

    parameters: list[Any] = []
    for module in model.modules():
        if isinstance(module, LoraLayer) and adapter in module.lora_A:
            parameters.extend(module.lora_A[adapter].parameters())
            parameters.extend(module.lora_B[adapter].parameters())
    if not parameters:
        raise ValueError(f"the model has no adapter {adapter!r}")
    return parameters


_WRAPPERS = frozenset({"_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"})


def _unwrapped_name(name: str) -> str:
    """A module's name without the segments FSDP, activation checkpointing or compile add."""
    return ".".join(part for part in name.split(".") if part not in _WRAPPERS)


def _base_name(name: str) -> str:
    """A PEFT parameter name as the base model names it."""
    name = _unwrapped_name(name).removeprefix("base_model.model.")
    return name.replace(".base_layer.", ".")


def merged_weights(
    model: Any, state_dict: Mapping[str, Any] | None = None, *, adapter: str | None = None
) -> dict[str, Any]:
    """The weights a sampler loads: a plain model's state dict, or a LoRA model's merged one.

    Args:
        model: the trained model, unwrapped (its modules give each adapter's scale).
        state_dict: its state dict when already at hand (e.g. gathered from the
            shards of an FSDP run); default ``model.state_dict()``.
        adapter: which adapter to merge; default the active one.

    Returns:
        ``{name: tensor}`` under the base model's names (``model.layers.0...``),
        each adapted weight ``W + lora_alpha / r * B @ A`` (in ``W``'s dtype).
    """
    state = dict(model.state_dict() if state_dict is None else state_dict)
    if not is_lora(model):
        return state
    import torch
    from peft.tuners.lora import LoraLayer

    active = adapter or model.active_adapter
    merged: dict[str, Any] = {}
    for name, tensor in state.items():
        if not any(part.startswith("lora_") for part in name.split(".")):
            merged[_base_name(name)] = tensor
    with torch.no_grad():
        for name, module in model.named_modules():
            if not isinstance(module, LoraLayer) or active not in module.lora_A:
                continue
            name = _unwrapped_name(name)
            a = state[f"{name}.lora_A.{active}.weight"].float()
            b = state[f"{name}.lora_B.{active}.weight"].float()
            delta = (b @ a) * module.scaling[active]
            if getattr(module, "fan_in_fan_out", False):  # Conv1D-style (GPT-2) weights
                delta = delta.T
            key = _base_name(f"{name}.base_layer.weight")
            base = merged[key]
            merged[key] = (base.float() + delta.to(base.device)).to(base.dtype)
    return merged


def save_adapter(model: Any, folder: str | Path, adapter: str = "default") -> None:
    """Write one adapter as PEFT does: ``adapter_model.safetensors``, ``adapter_config.json``."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = get_peft_model_state_dict(model, adapter_name=adapter)
    save_file({k: v.detach().cpu().contiguous() for k, v in state.items()}, str(folder / _WEIGHTS))
    model.peft_config[adapter].save_pretrained(str(folder))


def load_adapter(model: Any, folder: str | Path, adapter: str = "default") -> None:
    """Load the weights :func:`save_adapter` wrote into ``model``'s adapter ``adapter``.

    Raises:
        FileNotFoundError: the folder holds no adapter (a checkpoint of a full
            fine-tune: resume it without ``--lora-r``).
    """
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(folder) / _WEIGHTS
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: this checkpoint holds no LoRA adapter (was the run "
            "started without --lora-r? resume it with the settings it started with)"
        )
    result = set_peft_model_state_dict(model, load_file(str(path)), adapter_name=adapter)
    unexpected = getattr(result, "unexpected_keys", None)
    if unexpected:
        raise ValueError(
            f"{path}: weights {unexpected[:3]} fit no adapter of this model; resume with "
            "the lora_r and lora_target_modules the run started with"
        )


class AdapterPolicy:
    """A policy that samples with one adapter of a shared ``PeftModel`` switched on.

    MAGRPO's agents share one base model, each with its own adapter: every
    agent's sampler switches the model to its adapter before sampling.

    Args:
        policy: samples with ``model`` (e.g. a ``TransformersPolicy`` on it).
        model: the shared ``PeftModel``.
        adapter: the adapter to switch on.
    """

    def __init__(self, policy: Policy, model: Any, adapter: str) -> None:
        self.policy = policy
        self.model = model
        self.adapter = adapter

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        """Switch the adapter on, then sample."""
        self.model.set_adapter(self.adapter)
        return self.policy.sample(requests, params)
