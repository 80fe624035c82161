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
    "SEGMENT_ATTENTION",
    "SEGMENT_AWARE",
    "attention_implementation",
    "register_segment_attention",
    "segment_attention",
    "segment_lengths",
    "segment_sdpa_forward",
]

SEGMENT_ATTENTION = "segment_sdpa"
"""The name :func:`register_segment_attention` registers with transformers."""

SEGMENT_AWARE = frozenset({SEGMENT_ATTENTION, "flash_attention_2", "flash_attention_3"})
"""Attention implementations that never compute the blocks between packed Datums."""


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

    lengths = None
    packed = (
        attention_mask is None
        and query.shape[0] == 1
        and query.shape[2] == key.shape[2]
        and getattr(module, "is_causal", True)
        and kwargs.get("is_causal", True) is not False
    )
    if packed:
        lengths = segment_lengths(kwargs.get("position_ids"), kwargs.get("cu_seq_lens_q"))
    if lengths is None or len(lengths) < 2:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if sum(lengths) != query.shape[2]:
        raise ValueError(
            f"packed sequence lengths sum to {sum(lengths)}; the row has {query.shape[2]} tokens"
        )
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
