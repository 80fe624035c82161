"""Attention over packed rows that never computes the blocks between Datums.

A packed row holds several Datums one after the other, ``position_ids``
restarting at 0 for each. Stock transformers turns the restarting positions
into a full ``row x row`` block-diagonal mask, and the CPU kernels of
``scaled_dot_product_attention`` then score every query against every key of
the row: the cross-Datum blocks (most of the matrix when a row holds many
Datums) are computed and thrown away, and the causal skip is lost with them.
On SmolLM2-135M, one layer's attention forward and backward over 3,000 tokens
of 8 Datums took 3.5 s with the mask and 0.3 s as eight causal calls.

:data:`SEGMENT_ATTENTION` (``"segment_sdpa"``) is a transformers attention
function (registered with ``AttentionInterface`` and ``AttentionMaskInterface``)
that splits a packed row at the Datum boundaries and runs causal SDPA on each
Datum alone, so its cost is ``sum(length**2)``, not ``row**2``. Anything else
(padded rows with an attention mask, a key/value cache, several rows) goes to
transformers' own ``sdpa`` unchanged, so a model switched to it generates and
scores padded batches exactly as before.

The boundaries come from ``cu_seq_lens_q`` (cumulative lengths, the keyword
that flash-attention's varlen kernels read too) when the caller passes it, and
otherwise from restarting ``position_ids``. On CUDA with flash-attn installed,
:func:`segment_attention` picks ``flash_attention_2`` instead, whose varlen
kernels skip the cross-Datum blocks themselves.

This module changes how attention is computed, never what: a packed forward
with it equals separate forwards up to float rounding (about 1e-6 in fp32,
tested).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch

__all__ = [
    "FLEX_BUCKET_TOKENS",
    "FLEX_SEGMENT_ATTENTION",
    "SEGMENT_ATTENTION",
    "SEGMENT_AWARE",
    "attention_implementation",
    "flex_attention_available",
    "register_segment_attention",
    "segment_attention",
    "segment_flex_forward",
    "segment_lengths",
    "segment_sdpa_forward",
]

SEGMENT_ATTENTION = "segment_sdpa"
"""The name :func:`register_segment_attention` registers with transformers."""

FLEX_SEGMENT_ATTENTION = "segment_flex"
"""FlexAttention with a document mask: one call per layer for a packed row (CUDA)."""

SEGMENT_AWARE = frozenset(
    {SEGMENT_ATTENTION, FLEX_SEGMENT_ATTENTION, "flash_attention_2", "flash_attention_3"}
)
"""Attention implementations that never compute the blocks between packed Datums."""

FLEX_BUCKET_TOKENS = 1024
"""A packed row runs FlexAttention padded to a multiple of this: one compilation per bucket."""


def attention_implementation(model: Any) -> str:
    """The attention implementation a (possibly DDP-wrapped) transformers model runs."""
    config = getattr(getattr(model, "module", model), "config", None)
    return str(getattr(config, "_attn_implementation", None))


def segment_lengths(
    position_ids: torch.Tensor | None = None, cu_seq_lens: torch.Tensor | None = None
) -> list[int] | None:
    """The lengths of the sequences packed in one row, or ``None`` when that is not known.

    From cumulative lengths ``[0, l1, l1 + l2, ...]`` when given, else from
    ``position_ids`` of shape ``(1, T)``: a sequence starts wherever the
    position is not the previous one plus 1 (the rule transformers applies).

    Example:
        >>> segment_lengths(torch.tensor([[0, 1, 2, 0, 1, 0]]))
        [3, 2, 1]
        >>> segment_lengths(cu_seq_lens=torch.tensor([0, 3, 5, 6], dtype=torch.int32))
        [3, 2, 1]
    """
    if cu_seq_lens is not None:
        return torch.diff(cu_seq_lens.flatten()).tolist()
    if position_ids is None or position_ids.dim() != 2 or position_ids.shape[0] != 1:
        return None
    row = position_ids[0]
    starts = torch.ones(row.shape, dtype=torch.bool, device=row.device)
    starts[1:] = row[1:] != row[:-1] + 1
    bounds = torch.cat([torch.nonzero(starts).flatten(), torch.tensor([row.shape[0]])])
    return torch.diff(bounds).tolist()


def _packed_lengths(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | None,
    kwargs: dict[str, Any],
) -> list[int] | None:
    """The sequence lengths of one causal row without a mask or cache; None for anything else."""
    plain_row = (
        attention_mask is None
        and query.shape[0] == 1
        and query.shape[2] == key.shape[2]
        and getattr(module, "is_causal", True)
        and kwargs.get("is_causal", True) is not False
    )
    if not plain_row:
        return None
    lengths = segment_lengths(kwargs.get("position_ids"), kwargs.get("cu_seq_lens_q"))
    if lengths is None:
        return [query.shape[2]]
    if sum(lengths) != query.shape[2]:
        raise ValueError(
            f"packed sequence lengths sum to {sum(lengths)}; the row has {query.shape[2]} tokens"
        )
    return lengths


def segment_sdpa_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal SDPA on each packed sequence of a row alone; transformers' ``sdpa`` otherwise.

    ``query`` is ``(1, heads, T, head_dim)`` for a packed row. The output is
    ``(1, T, heads, head_dim)``, as every transformers attention function returns.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    lengths = _packed_lengths(module, query, key, attention_mask, kwargs)
    if lengths is None or len(lengths) < 2:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    kwargs["is_causal"] = True
    # torch.split has one backward node that concatenates the gradients; slicing
    # in a loop would allocate a row-sized gradient per Datum.
    outputs = [
        sdpa_attention_forward(module, q, k, v, None, **kwargs)[0]
        for q, k, v in zip(
            torch.split(query, lengths, dim=2),
            torch.split(key, lengths, dim=2),
            torch.split(value, lengths, dim=2),
            strict=True,
        )
    ]
    return torch.cat(outputs, dim=1), None


def flex_attention_available() -> bool:
    """Whether torch has FlexAttention (``torch.nn.attention.flex_attention``, torch >= 2.5)."""
    return importlib.util.find_spec("torch.nn.attention.flex_attention") is not None


# The block mask of the latest packed row, shared by its layers: (key, mask).
_flex_masks: dict[str, Any] = {}
_flex_compiled: dict[str, Any] = {}


def _flex_call() -> Any:
    """``flex_attention``, compiled on CUDA (once; then once per shape bucket), eager elsewhere.

    Eager FlexAttention is exact but materializes the scores, and has no
    backward on a CPU: the CPU path is for checking the masks, not training.
    """
    from torch.nn.attention.flex_attention import flex_attention

    if "call" not in _flex_compiled:
        _flex_compiled["call"] = torch.compile(flex_attention, dynamic=False)
    return _flex_compiled["call"]


def _document_mask(lengths: list[int], padded: int, device: torch.device) -> Any:
    """The block mask of packed sequences ``lengths`` in a row padded to ``padded`` tokens."""
    from torch.nn.attention.flex_attention import create_block_mask

    key = f"{device}:{padded}:{','.join(map(str, lengths))}"
    cached = _flex_masks.get("key")
    if cached == key:
        return _flex_masks["mask"]
    documents = torch.full((padded,), -1, dtype=torch.int32, device=device)
    documents[: sum(lengths)] = torch.repeat_interleave(
        torch.arange(len(lengths), dtype=torch.int32, device=device),
        torch.tensor(lengths, device=device),
    )

    def same_document_causal(batch: Any, head: Any, query: Any, key_index: Any) -> Any:
        return (
            (documents[query] == documents[key_index])
            & (documents[query] >= 0)
            & (query >= key_index)
        )

    mask = create_block_mask(same_document_causal, None, None, padded, padded, device=device)
    _flex_masks.update(key=key, mask=mask)
    return mask


def segment_flex_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """FlexAttention over a packed row with a document mask; transformers' ``sdpa`` otherwise.

    One call per layer whatever the number of Datums (``segment_sdpa`` makes one
    per Datum, kernel launches a GPU pays for), skipping the blocks between
    Datums and above the diagonal. The row is padded to a multiple of
    :data:`FLEX_BUCKET_TOKENS`, so the compiled kernel is reused across rows.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    dropout = module.training and float(getattr(module, "attention_dropout", 0) or 0) > 0
    lengths = None if dropout else _packed_lengths(module, query, key, attention_mask, kwargs)
    if lengths is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    total = query.shape[2]
    padded = -(-total // FLEX_BUCKET_TOKENS) * FLEX_BUCKET_TOKENS
    if padded != total:
        pad = (0, 0, 0, padded - total)
        query, key, value = (torch.nn.functional.pad(t, pad) for t in (query, key, value))
    mask = _document_mask(lengths, padded, query.device)
    if query.device.type == "cuda":
        call = _flex_call()
    else:
        from torch.nn.attention.flex_attention import flex_attention as call
    output = call(
        query,
        key,
        value,
        block_mask=mask,
        scale=getattr(module, "scaling", None),
        enable_gqa=query.shape[1] != key.shape[1],
    )
    return output[:, :, :total].transpose(1, 2).contiguous(), None


def _segment_sdpa_mask(*args: Any, **kwargs: Any) -> Any:
    """Transformers' sdpa mask, except none at all for one unpadded row without a cache.

    That row is either one sequence (causal) or packed sequences, which
    :func:`segment_sdpa_forward` splits itself: building their ``row x row``
    block-diagonal mask would cost memory and time for nothing.
    """
    from transformers.masking_utils import sdpa_mask

    names = ("batch_size", "q_length", "kv_length", "q_offset", "kv_offset")
    values = dict(zip(names, args, strict=False)) | kwargs
    plain_row = (
        values.get("attention_mask") is None
        and values["batch_size"] == 1
        and values["q_length"] == values["kv_length"]
        and isinstance(values.get("q_offset", 0), int)
        and values.get("q_offset", 0) == 0
        and values.get("kv_offset", 0) == 0
    )
    return None if plain_row else sdpa_mask(*args, **kwargs)


def register_segment_attention() -> None:
    """Register :data:`SEGMENT_ATTENTION` with transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(SEGMENT_ATTENTION, segment_sdpa_forward)
    AttentionMaskInterface.register(SEGMENT_ATTENTION, _segment_sdpa_mask)
    AttentionInterface.register(FLEX_SEGMENT_ATTENTION, segment_flex_forward)
    AttentionMaskInterface.register(FLEX_SEGMENT_ATTENTION, _segment_sdpa_mask)


def segment_attention(model: Any) -> str:
    """Switch ``model`` to an attention that skips the blocks between packed Datums.

    ``flash_attention_2`` on CUDA when the flash-attn package is installed,
    else :data:`SEGMENT_ATTENTION` when the model's attention is transformers'
    ``sdpa`` or ``eager`` (Qwen2, Llama and most decoder families); otherwise the
    model is left as it is. Returns the implementation the model now uses:
    :data:`SEGMENT_AWARE` tells whether packing is cheap with it.
    """
    model = getattr(model, "module", model)
    current = attention_implementation(model)
    if current in SEGMENT_AWARE or not hasattr(model, "set_attn_implementation"):
        return current
    if "sliding_attention" in (getattr(model.config, "layer_types", None) or ()):
        return current  # a window is a mask of its own: keep the model's attention
    device = next(model.parameters()).device
    if device.type == "cuda" and importlib.util.find_spec("flash_attn") is not None:
        # Not exercised by the tests (no GPU there): transformers' own varlen path,
        # fed by the cu_seq_lens_* keywords that forward_packed passes.
        target = "flash_attention_2"
    elif device.type == "cuda" and current in ("sdpa", "eager") and flex_attention_available():
        # One FlexAttention call per layer with a document mask (on a CPU it has
        # no backward, and segment_sdpa's per-Datum calls are cheap there).
        register_segment_attention()
        target = FLEX_SEGMENT_ATTENTION
    elif current in ("sdpa", "eager"):
        register_segment_attention()
        target = SEGMENT_ATTENTION
    else:
        return current
    try:
        model.set_attn_implementation(target)
    except (ValueError, ImportError) as error:  # a family that cannot switch: keep its own
        import warnings

        warnings.warn(
            f"{type(model).__name__}: cannot use {target} attention ({error}); "
            f"packed rows keep {current}'s block-diagonal mask",
            stacklevel=2,
        )
    return attention_implementation(model)
