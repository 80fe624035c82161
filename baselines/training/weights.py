"""The full weights of a model trained under ``accelerate``: shards gathered once, LoRA merged.

A sampler that holds its own copy of the weights (an in-process vLLM engine,
a vLLM server, a ``generate`` copy under sharding) needs, after every optimizer
step, the whole model under the base model's names. How they are obtained
depends on how ``accelerate`` holds the parameters:

==========================  ==================================================
one process, DDP, ZeRO-1/2  every process already has every weight: its own
                            ``state_dict()``, no communication
FSDP (1 or 2)               gathered from the shards: to the main process
                            only (``accelerate``'s ``get_state_dict``), or to
                            every process at once when each one's sampler
                            needs them (one all-gather,
                            ``torch.distributed.checkpoint``'s full state dict)
DeepSpeed ZeRO-3            consolidated on the main process by DeepSpeed,
                            then sent to the others when they need them
==========================  ==================================================

Then LoRA adapters are merged in (:func:`baselines.training.lora.merged_weights`).
Every process must call :func:`gather_full_state` when the weights are sharded:
the gathering is collective.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from baselines.training.lora import merged_weights

__all__ = ["gather_full_state", "is_sharded", "loading_whole_models"]


@contextlib.contextmanager
def loading_whole_models(accelerator: Any) -> Iterator[None]:
    """Inside, ``from_pretrained`` loads whole models, even under DeepSpeed ZeRO-3.

    While ``accelerate``'s DeepSpeed config is active, transformers builds
    every model it loads inside ZeRO-3's ``zero.Init``: each process holds a
    slice of every parameter, and nothing can run the model until DeepSpeed's
    engine wraps it. The trainer's packing probe runs its model before
    ``prepare``, and the sampler's copy is never prepared, so both must load
    whole; ``prepare`` then partitions the trained model. The config is
    switched back on at the end. Without ZeRO-3 this does nothing.
    """
    from accelerate.utils import DistributedType  # type: ignore[import-untyped]
    from transformers.integrations import unset_hf_deepspeed_config

    if accelerator.distributed_type != DistributedType.DEEPSPEED or not is_sharded(accelerator):
        yield
        return

    unset_hf_deepspeed_config()
    try:
        yield
    finally:
        accelerator.state.deepspeed_plugin.set_deepspeed_weakref()


def is_sharded(accelerator: Any) -> bool:
    """Whether ``accelerator`` keeps each parameter in pieces across processes (FSDP, ZeRO-3)."""
    from accelerate.utils import DistributedType

    kind = accelerator.distributed_type
    if kind == DistributedType.FSDP:
        return True
    if kind == DistributedType.DEEPSPEED:
        stage = accelerator.state.deepspeed_plugin.deepspeed_config["zero_optimization"]["stage"]
        return int(stage) == 3
    return False


def gather_full_state(accelerator: Any, model: Any, *, everywhere: bool) -> dict[str, Any] | None:
    """The model's full weights, LoRA merged, under the base model's names.

    Args:
        accelerator: the run's ``accelerate.Accelerator``.
        model: the prepared (possibly wrapped and sharded) model.
        everywhere: every process needs the weights (each refreshes its own
            sampler); otherwise only the main process does, and the others get None
            when the weights are sharded.

    Returns:
        ``{name: tensor}``; None on a process other than the main one when
        ``everywhere`` is False and the weights were gathered to the main process.
    """
    unwrapped = accelerator.unwrap_model(model)
    if not is_sharded(accelerator):
        return merged_weights(unwrapped)
    import torch
    from accelerate.utils import DistributedType

    if everywhere and accelerator.distributed_type == DistributedType.FSDP:
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=False)
        return merged_weights(unwrapped, get_model_state_dict(model, options=options))
    state = accelerator.get_state_dict(model)  # collective: the full weights on the main process
    if everywhere:
        box = [state if accelerator.is_main_process else None]
        torch.distributed.broadcast_object_list(box, src=0)
        state = box[0]
    elif not accelerator.is_main_process:
        return None
    return merged_weights(unwrapped, state)
