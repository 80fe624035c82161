"""The trainer's forward pass: logprobs of target tokens from packed or padded Datums.

Packed (:func:`baselines.data.datums.pack_data`): every Datum of a microbatch in one
row, no padding, ``position_ids`` restarting at 0 for each Datum. Packing pays
only when attention computes each Datum's own causal block and nothing else:

* with :func:`baselines.training.attention.segment_attention` (the trainer turns
  it on), a packed row is split at the Datum boundaries inside attention
  (``cu_seq_lens_q``, passed here) and costs what one Datum per row costs,
  without the padding;
* with stock ``sdpa`` or ``eager`` attention, transformers turns the restarting
  positions into a full ``row x row`` block-diagonal mask: still correct, but
  the CPU kernels then score every pair of tokens of the row (a step 3.4x
  slower than one Datum per row on 3,000 tokens of SmolLM2).

Either way the model must be called with ``use_cache=False``: with a cache (the
default of most configs, also in training mode) transformers 5 does not look
for packed sequences at all and lets every Datum attend to the ones before it.
:func:`baselines.training.layout.choose_layout` checks the rest on the model
itself: a tiny probe (random sequences, packed vs separate) compares logprobs
and forward times, and the trainer pads when packing is wrong or slower.

Padded (:func:`baselines.data.datums.pad_data`): rows right-padded to the longest
Datum with an attention mask; every model supports it, at the cost of the
padding's compute.

Logprobs are ``logit[target] - logsumexp(logits)`` in fp32, which avoids
materializing a second vocabulary-sized tensor for ``log_softmax``. The loss
and the KL metrics read action tokens only, so with ``actions_only`` the
vocabulary projection runs on those positions alone (``logits_to_keep``): on a
debate batch, where most tokens are observations, that is most of the
projection's compute and memory saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch

from baselines.data.datums import pack_data, pad_data
from baselines.training.attention import (
    SEGMENT_AWARE,
    attention_implementation,
)
from baselines.training.logprobs import selective_logprobs, supports_selective_logprobs
from baselines.types import Datum, PackedBatch, PaddedBatch

__all__ = [
    "Layout",
    "forward_logprobs",
    "shared_prompt_logprobs",
    "split_microbatches",
    "split_prompt_groups",
    "supports_logits_to_keep",
    "target_logprobs",
]

Layout = Literal["packed", "padded"]
"""How a microbatch's Datums are laid out for the forward pass."""


def target_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, *, temperature: float = 1.0
) -> torch.Tensor:
    """``log softmax(logits / temperature)[target]`` along the last axis, computed in fp32.

    Example:
        >>> logits = torch.tensor([[0.0, 0.0], [2.0, 0.0]])
        >>> target_logprobs(logits, torch.tensor([1, 0])).exp()
        tensor([0.5000, 0.8808])
        >>> target_logprobs(logits, torch.tensor([1, 0]), temperature=2.0).exp()
        tensor([0.5000, 0.7311])
    """
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def _tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(array).to(device)


def supports_logits_to_keep(model: Any) -> bool:
    """Whether the model's forward takes ``logits_to_keep`` (most transformers 5 causal LMs)."""
    import inspect

    forward = getattr(model, "module", model).forward  # DDP keeps the model in .module
    return "logits_to_keep" in inspect.signature(forward).parameters


def _logprobs(
    model: Any,
    input_ids: torch.Tensor,
    targets: torch.Tensor,
    keep: torch.Tensor | None,
    temperature: float = 1.0,
    chunk: int = 0,
    **inputs: Any,
) -> torch.Tensor:
    """Logprobs of ``targets`` (shape ``(B, T)``); with ``keep``, only at those positions.

    ``keep`` holds sequence positions (``logits_to_keep``): the vocabulary
    projection, usually the largest matrix of a small model, then runs on
    action tokens only; every other position gets logprob 0, which the losses
    and metrics never read (their weight and mask are 0). With ``chunk`` (and a
    model :func:`~baselines.training.logprobs.selective_logprobs` can run), the
    logits of at most ``chunk`` tokens exist at once: a longer projection runs
    chunk by chunk.
    """
    # use_cache=False: with a cache, transformers skips the packed-sequence mask.
    kwargs: dict[str, Any] = {"input_ids": input_ids, "use_cache": False, **inputs}
    projected = targets.shape[0] * (targets.shape[1] if keep is None else keep.numel())
    # (Up to one chunk of tokens, the model's own logits are that chunk: no recompute.)
    if chunk and projected > chunk and supports_selective_logprobs(model):
        return selective_logprobs(
            model, targets, keep, temperature=temperature, chunk=chunk, **kwargs
        )
    if keep is None:
        return target_logprobs(model(**kwargs).logits, targets, temperature=temperature)
    logits = model(**kwargs, logits_to_keep=keep).logits
    logprobs = torch.zeros(targets.shape, dtype=torch.float32, device=targets.device)
    logprobs[:, keep] = target_logprobs(logits, targets[:, keep], temperature=temperature)
    return logprobs


def forward_packed(
    model: Any,
    packed: PackedBatch,
    device: torch.device,
    *,
    actions_only: bool = False,
    temperature: float = 1.0,
    chunk: int = 0,
) -> torch.Tensor:
    """Training logprobs of every target of a packed batch, shape ``(N,)``.

    With ``actions_only``, logprobs are computed where ``mask_N == 1`` only (0
    elsewhere); the model must take ``logits_to_keep``.
    """
    keep = _tensor(np.flatnonzero(packed.mask_N), device) if actions_only else None
    inputs: dict[str, Any] = {"position_ids": _tensor(packed.position_ids_N, device).unsqueeze(0)}
    if attention_implementation(model) in SEGMENT_AWARE:
        # The boundaries themselves (flash-attention's varlen keywords), so that
        # attention never looks for them in the positions of every layer.
        cu_seqlens = _tensor(packed.cu_seqlens_D1, device)
        longest = int(np.diff(packed.cu_seqlens_D1).max())
        inputs |= {"cu_seq_lens_q": cu_seqlens, "cu_seq_lens_k": cu_seqlens}
        inputs |= {"max_length_q": longest, "max_length_k": longest}
    logprobs = _logprobs(
        model,
        _tensor(packed.input_ids_N, device).unsqueeze(0),
        _tensor(packed.target_tokens_N, device).unsqueeze(0),
        keep,
        temperature,
        chunk,
        **inputs,
    )
    return logprobs[0]


def forward_padded(
    model: Any,
    padded: PaddedBatch,
    device: torch.device,
    *,
    actions_only: bool = False,
    temperature: float = 1.0,
    chunk: int = 0,
) -> torch.Tensor:
    """Training logprobs of every target of a padded batch, shape ``(B, T)``; 0 on padding.

    With ``actions_only``, logprobs are computed at the positions where some
    row has an action token (0 elsewhere).
    """
    keep = _tensor(np.flatnonzero(padded.mask_B_T.any(axis=0)), device) if actions_only else None
    attention_mask = _tensor(padded.attention_mask_B_T, device)
    logprobs_B_T = _logprobs(
        model,
        _tensor(padded.input_ids_B_T, device),
        _tensor(padded.target_tokens_B_T, device),
        keep,
        temperature,
        chunk,
        attention_mask=attention_mask,
    )
    return logprobs_B_T * attention_mask


def forward_logprobs(
    model: Any,
    data_D: Sequence[Datum],
    layout: Layout,
    device: torch.device,
    *,
    pad_token_id: int = 0,
    actions_only: bool = False,
    temperature: float = 1.0,
    chunk: int = 0,
) -> tuple[torch.Tensor, list[torch.Tensor], dict[str, torch.Tensor]]:
    """Run the model on some Datums and return their targets' training logprobs.

    Args:
        model: a causal LM (possibly wrapped, e.g. by DDP).
        data_D: the microbatch's Datums.
        layout: ``"packed"`` or ``"padded"``.
        device: where the model is.
        pad_token_id: the padding token of the padded layout.
        actions_only: compute logprobs of action targets (``mask == 1``) only,
            through the model's ``logits_to_keep`` (see
            :func:`supports_logits_to_keep`); observation targets get 0.
        temperature: divide the logits by it: the logprobs of the tempered
            distribution a sampler drew from (an on-policy loss without an
            importance ratio needs them).
        chunk: project to the vocabulary this many tokens at a time, never
            holding the microbatch's full logits
            (:mod:`baselines.training.logprobs`); 0: the model's own logits.

    Returns:
        ``(logprobs, logprobs_D, inputs)``: the logprobs in the layout's shape
        (``(N,)`` or ``(B, T)``), with gradient; the same split per Datum
        (views); and the matching per-token tensors of the batch
        (``sampling_logprobs``, ``advantages``, ``weights``, ``mask``), on ``device``.
    """
    if layout == "packed":
        packed = pack_data(data_D)
        logprobs = forward_packed(
            model, packed, device, actions_only=actions_only, temperature=temperature, chunk=chunk
        )
        logprobs_D = list(torch.split(logprobs, packed.lengths_D.tolist()))
        arrays = {
            "sampling_logprobs": packed.logprobs_N,
            "advantages": packed.advantages_N,
            "weights": packed.weights_N,
            "mask": packed.mask_N,
        }
    elif layout == "padded":
        padded = pad_data(data_D, pad_token_id=pad_token_id)
        logprobs = forward_padded(
            model, padded, device, actions_only=actions_only, temperature=temperature, chunk=chunk
        )
        logprobs_D = [logprobs[row, : len(d)] for row, d in enumerate(data_D)]
        arrays = {
            "sampling_logprobs": padded.logprobs_B_T,
            "advantages": padded.advantages_B_T,
            "weights": padded.weights_B_T,
            "mask": padded.mask_B_T,
        }
    else:
        raise ValueError(f"layout must be 'packed' or 'padded', got {layout!r}")
    return logprobs, logprobs_D, {k: _tensor(v, device) for k, v in arrays.items()}


def split_microbatches(
    lengths_D: Sequence[int],
    max_tokens: int,
    layout: Layout = "packed",
    *,
    longest_first: bool = False,
) -> list[list[int]]:
    """Split Datum indices into microbatches of at most ``max_tokens`` tokens.

    Packed microbatches cost the sum of their lengths; padded ones ``rows x
    longest``. A Datum longer than ``max_tokens`` gets a microbatch of its own.
    Datums are taken in order, or with ``longest_first`` from the longest to the
    shortest (padded rows of similar lengths waste little).

    Example:
        >>> split_microbatches([3, 3, 3, 5], max_tokens=6)
        [[0, 1], [2], [3]]
        >>> split_microbatches([2, 2, 5], max_tokens=6, layout="padded")
        [[0, 1], [2]]
        >>> split_microbatches([2, 5, 2, 3], max_tokens=6, layout="padded", longest_first=True)
        [[1], [3, 0], [2]]
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    order: Sequence[int] = range(len(lengths_D))
    if longest_first:
        order = sorted(order, key=lambda i: (-lengths_D[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    total = longest = 0
    for index in order:
        length = lengths_D[index]
        # A packed row costs its tokens; a padded one rows x its longest Datum.
        cost = total + length if layout == "packed" else (len(current) + 1) * max(longest, length)
        if current and cost > max_tokens:
            batches.append(current)
            current, total, longest = [], 0, 0
        current.append(index)
        total += length
        longest = max(longest, length)
    if current:
        batches.append(current)
    return batches


def split_prompt_groups(
    prompts_D: Sequence[tuple[int, ...]], lengths_D: Sequence[int], max_tokens: int
) -> list[list[int]]:
    """Group completion indices by prompt, in chunks for :func:`shared_prompt_logprobs`.

    A chunk of K completions of a P-token prompt, the longest of C tokens,
    costs about ``P + K * C`` tokens; each chunk holds as many completions as
    ``max_tokens`` allows (at least one), longest first. Prompts come in the
    order they first appear.

    Example:
        >>> prompts = [(1, 2), (7,), (1, 2), (1, 2)]
        >>> split_prompt_groups(prompts, [3, 4, 5, 3], max_tokens=12)  # 2 + 2 * 5 <= 12
        [[2, 0], [3], [1]]
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, prompt in enumerate(prompts_D):
        groups.setdefault(tuple(prompt), []).append(index)
    chunks: list[list[int]] = []
    for prompt, members in groups.items():
        members.sort(key=lambda i: (-lengths_D[i], i))
        per_chunk = max(1, (max_tokens - len(prompt)) // max(1, lengths_D[members[0]]))
        chunks.extend(members[i : i + per_chunk] for i in range(0, len(members), per_chunk))
    return chunks


def shared_prompt_logprobs(
    model: Any,
    prompt_tokens: Sequence[int],
    completions_K: Sequence[Sequence[int]],
    device: torch.device,
    *,
    temperature: float = 1.0,
    pad_token_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Training logprobs of K completions of one prompt, the prompt run through the model once.

    The G completions an agent samples at a tree node share their prompt, which
    is most of each sequence (the problem, and at later turns the history and
    the feedback). The prompt goes through the model once; its key/value cache
    is repeated for the K completions, which attend to it. Gradients flow
    through the cache into the prompt's forward pass, so logprobs and gradients
    are those of K separate prompt + completion rows (up to float rounding),
    for about ``P + K * C`` instead of ``K * (P + C)`` tokens.

    Args:
        model: a causal LM whose forward returns a ``past_key_values`` cache with
            ``batch_repeat_interleave`` (any Hugging Face transformers model).
        prompt_tokens: the prompt, P >= 1 tokens.
        completions_K: the completions, each of at least one token.
        device: where the model is.
        temperature: the sampling temperature; logits are divided by it.
        pad_token_id: the token that fills the rows of shorter completions.

    Returns:
        ``(logprobs_K_C, mask_K_C)``: each completion token's logprob (right
        padded to the longest, C, with 0) and 1.0 on real tokens.
    """
    if not prompt_tokens or not completions_K or not all(completions_K):
        raise ValueError("need a non-empty prompt and at least one completion, none empty")
    num, width = len(completions_K), max(len(c) for c in completions_K)
    prompt = torch.tensor([list(prompt_tokens)], device=device)
    length = prompt.shape[1]
    try:
        out = model(input_ids=prompt, use_cache=True, logits_to_keep=1)
    except TypeError:  # a model without logits_to_keep
        out = model(input_ids=prompt, use_cache=True)
    # The prompt's last position predicts every completion's first token.
    logits = out.logits[:, -1:].float().expand(num, -1, -1)
    if width > 1:
        cache = out.past_key_values
        if not hasattr(cache, "batch_repeat_interleave"):
            raise TypeError(
                f"{type(model).__name__} returns no repeatable key/value cache "
                f"({type(cache).__name__}); set share_prompts=False"
            )
        cache.batch_repeat_interleave(num)
        inputs = torch.full((num, width - 1), pad_token_id, dtype=torch.long)
        attention = torch.zeros((num, length + width - 1), dtype=torch.long)
        attention[:, :length] = 1
        for row, tokens in enumerate(completions_K):
            inputs[row, : len(tokens) - 1] = torch.tensor(list(tokens[:-1]))
            attention[row, length : length + len(tokens) - 1] = 1
        positions = torch.arange(length, length + width - 1).expand(num, -1)
        rest = model(
            input_ids=inputs.to(device),
            attention_mask=attention.to(device),
            position_ids=positions.to(device),
            past_key_values=cache,
            use_cache=True,
        ).logits.float()
        logits = torch.cat([logits, rest], dim=1)
    if temperature != 1.0:
        logits = logits / temperature
    targets_K_C = torch.zeros((num, width), dtype=torch.long)
    mask_K_C = torch.zeros((num, width))
    for row, tokens in enumerate(completions_K):
        targets_K_C[row, : len(tokens)] = torch.tensor(list(tokens))
        mask_K_C[row, : len(tokens)] = 1.0
    targets_K_C, mask_K_C = targets_K_C.to(device), mask_K_C.to(device)
    picked = logits.gather(-1, targets_K_C.unsqueeze(-1)).squeeze(-1)
    return (picked - torch.logsumexp(logits, dim=-1)) * mask_K_C, mask_K_C
