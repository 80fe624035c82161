"""Sampling with Hugging Face transformers' ``generate``: batched, left-padded, CPU or GPU.

The policy can share its model object with the trainer: then the sampler
always sees the current weights and needs no refresh. Logprobs come from the
processed scores (temperature and top-p applied), i.e. the distribution each
token was drawn from.

A call is a :func:`~baselines.progress.phase` named ``generate`` that counts
completions: a row counts once it has stopped (its first end-of-sequence or
padding token: ``generate`` pads the rows that are done, whatever stopped
them), the rest when its batch ends; the note says which token of at most
``max_tokens`` the batch is at. A long batch shows progress in a run's
heartbeat lines instead of a count that sits still for minutes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from baselines.progress import Phase, phase
from baselines.samplers.base import (
    ChatRenderer,
    Completion,
    SampleRequest,
    SamplingParams,
    StopReason,
    cut_at_stop,
)

__all__ = ["TransformersPolicy"]


class TransformersPolicy:
    """A :class:`~baselines.samplers.base.Policy` over a transformers causal LM.

    Requests are grouped by their stop strings (``generate`` applies one set per
    call) and sampled in batches of ``batch_size`` rows with left padding.

    Args:
        model: a causal LM (``AutoModelForCausalLM``).
        tokenizer: its tokenizer, with a chat template.
        batch_size: most rows per ``generate`` call.
    """

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.renderer = ChatRenderer(tokenizer)
        self.batch_size = batch_size
        self._eos = sorted(self.renderer.eos_token_ids)
        pad = tokenizer.pad_token_id
        self._pad = int(pad if pad is not None else self._eos[0])

    @classmethod
    def from_pretrained(
        cls, name_or_path: str, *, dtype: str = "float32", device: str = "cpu", **kwargs: Any
    ) -> TransformersPolicy:
        """Load a model and tokenizer by Hugging Face id or local path."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model: Any = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=getattr(torch, dtype))
        return cls(model.to(device), tokenizer, **kwargs)

    def update_weights(self, state_dict: Any) -> None:
        """Load new weights (not needed when the trainer shares :attr:`model`)."""
        self.model.load_state_dict(state_dict)

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        """Sample one completion per request."""
        prompts = [self.renderer(r.messages) for r in requests]
        by_stop: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            by_stop[tuple(r.stop)].append(i)
        batches = [
            (stop, indices[start : start + self.batch_size])
            for stop, indices in by_stop.items()
            for start in range(0, len(indices), self.batch_size)
        ]
        results: list[Completion | None] = [None] * len(requests)
        with phase("generate", len(requests), "completions", bar=None) as made:
            for number, (stop, chunk) in enumerate(batches, 1):
                seed = None if params.seed is None else params.seed + chunk[0]
                where = f"batch {number}/{len(batches)}, " if len(batches) > 1 else ""
                ends = {*self._eos, self._pad}
                rows = _StoppedRows(made, len(chunk), ends, where, params.max_tokens)
                done = self._generate([prompts[i] for i in chunk], stop, params, seed, rows)
                made.advance(rows.running())
                for i, completion in zip(chunk, done, strict=True):
                    results[i] = completion
        return [c for c in results if c is not None]

    def _generate(
        self,
        prompts: list[tuple[int, ...]],
        stop: tuple[str, ...],
        params: SamplingParams,
        seed: int | None,
        streamer: Any = None,
    ) -> list[Completion]:
        import torch

        device = next(self.model.parameters()).device
        width = max(map(len, prompts))
        input_ids = torch.full((len(prompts), width), self._pad, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            input_ids[row, width - len(p) :] = torch.tensor(p)
            attention[row, width - len(p) :] = 1
        if seed is not None:
            torch.manual_seed(seed)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=input_ids.to(device),
                    attention_mask=attention.to(device),
                    do_sample=True,
                    temperature=params.temperature,
                    top_p=params.top_p,
                    top_k=0,
                    max_new_tokens=params.max_tokens,
                    eos_token_id=self._eos,
                    pad_token_id=self._pad,
                    stop_strings=list(stop) or None,
                    tokenizer=self.tokenizer if stop else None,
                    output_scores=True,
                    return_dict_in_generate=True,
                    streamer=streamer,
                    # Its model is always whole (sharded training samples with a
                    # copy): processes never wait on each other to generate, which
                    # transformers would make them do while a ZeRO-3 config is active.
                    synced_gpus=False,
                )
        finally:
            self.model.train(was_training)
        generated = out.sequences[:, width:].tolist()
        # scores: one (rows, vocab) tensor per generated position, processors applied.
        logprobs_T = torch.stack(out.scores, dim=1).float().log_softmax(dim=-1)
        sampled = torch.tensor(generated, device=logprobs_T.device).unsqueeze(-1)
        token_logprobs = logprobs_T.gather(-1, sampled).squeeze(-1).tolist()
        return [
            self._finish(prompt, tokens, lps, stop)
            for prompt, tokens, lps in zip(prompts, generated, token_logprobs, strict=True)
        ]

    def _finish(
        self,
        prompt: tuple[int, ...],
        tokens: list[int],
        logprobs: list[float],
        stop: tuple[str, ...],
    ) -> Completion:
        eos = set(self._eos)
        end = next((i + 1 for i, t in enumerate(tokens) if t in eos), len(tokens))
        reason: StopReason = "eos" if end <= len(tokens) and tokens[end - 1] in eos else "length"
        tokens, logprobs = tokens[:end], logprobs[:end]
        text, found = cut_at_stop(self.renderer.decode(tokens), stop)
        if found:
            # The shortest token prefix whose text holds the stop string: in a batch,
            # rows that stopped early are padded until the longest row ends.
            lo, hi = 1, len(tokens)
            while lo < hi:
                mid = (lo + hi) // 2
                if cut_at_stop(self.renderer.decode(tokens[:mid]), stop)[1]:
                    hi = mid
                else:
                    lo = mid + 1
            tokens, logprobs, reason = tokens[:lo], logprobs[:lo], "stop"
        return Completion(tuple(prompt), tuple(tokens), tuple(logprobs), text, reason)


class _StoppedRows:
    """A ``generate`` streamer that counts a batch's rows into ``progress`` as they stop.

    ``generate`` hands it the prompts (one 2-D tensor), then each step's new
    token of every row (1-D). A row has stopped at its first token in ``ends``
    (end of sequence, or the padding that follows any stop); rows that run to
    ``max_tokens`` are counted by the caller (:meth:`running`) when the batch
    ends. The note is ``where`` (the batch) and the step.
    """

    def __init__(
        self, progress: Phase, rows: int, ends: set[int], where: str, max_tokens: int
    ) -> None:
        self.progress, self.ends, self.where, self.max_tokens = progress, ends, where, max_tokens
        self.rows, self.stopped, self.steps = rows, set[int](), 0

    def put(self, value: Any) -> None:
        if value.dim() != 1:
            return  # the prompts
        self.steps += 1
        new = {i for i, t in enumerate(value.tolist()) if t in self.ends} - self.stopped
        self.stopped |= new
        self.progress.advance(len(new))
        self.progress.note = f"{self.where}token {self.steps}/{self.max_tokens}"

    def end(self) -> None:
        """``generate`` is done with the batch: nothing to flush."""

    def running(self) -> int:
        """Rows not counted yet."""
        return self.rows - len(self.stopped)
