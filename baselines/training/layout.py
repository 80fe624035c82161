"""Choosing how the trainer lays out Datums: packed rows when a probe finds them right and cheap.

:func:`choose_layout` switches the model to an attention that skips the blocks
between packed Datums (:func:`~baselines.training.attention.segment_attention`)
and runs :func:`probe_packing`: random sequences, packed and separate, through
:func:`~baselines.training.forward.forward_logprobs`, compared for their
logprobs and their time. See :mod:`baselines.training.forward` for the layouts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from baselines.training.attention import (
    SEGMENT_ATTENTION,
    SEGMENT_AWARE,
    attention_implementation,
    segment_attention,
)
from baselines.training.forward import Layout, forward_logprobs
from baselines.types import Datum

__all__ = [
    "PACKING_SLOWDOWN",
    "PACKING_TOLERANCE",
    "LayoutChoice",
    "PackingProbe",
    "choose_layout",
    "packing_error",
    "probe_packing",
]


def _probe_data(model: Any, lengths: Sequence[int]) -> list[Datum]:
    """Random token sequences of ``lengths`` (the same for every call), all targets actions."""
    vocab = int(model.get_input_embeddings().weight.shape[0])
    generator = torch.Generator().manual_seed(0)
    data = []
    for length in lengths:
        tokens = torch.randint(0, vocab, (length + 1,), generator=generator).numpy()
        zeros = np.zeros(length, dtype=np.float32)
        data.append(Datum(tokens[:-1], tokens[1:], zeros, zeros, zeros + 1, zeros + 1))
    return data


@torch.no_grad()
def packing_error(model: Any, device: torch.device, *, lengths: Sequence[int] = (5, 9, 4)) -> float:
    """Largest logprob difference between a packed forward and separate forwards.

    Random token sequences of ``lengths`` are scored one by one and packed in
    one row; a model whose attention keeps packed sequences apart gives the
    same logprobs up to float noise (in fp32: exactly with segment attention,
    about 1e-5 with a block-diagonal mask). The model's training mode and the
    global random state are left untouched.
    """
    return probe_packing(model, device, lengths=lengths, repeats=0).error


PROBE_LENGTHS = (40, 24, 56, 32, 48, 16, 40)
"""The probe's sequences: 256 tokens, long enough for a packed row's attention
to show in its time, short enough for a forward of about a second (SmolLM2, one thread)."""

PACKING_TOLERANCE = 1e-3
"""Largest packed-vs-separate logprob difference a packed layout may show (fp32
noise is 1e-5 at most; a model that lets Datums attend to each other is off by whole nats)."""

PACKING_SLOWDOWN = 1.2
"""How much slower than one Datum per row a packed forward may be (timing noise on a
shared CPU) before ``packing="auto"`` pads instead."""


@dataclass(frozen=True)
class PackingProbe:
    """What :func:`probe_packing` measured: packed vs separate forwards of the same sequences.

    Attributes:
        attention: the model's attention implementation.
        error: largest absolute logprob difference.
        packed_s: seconds of one forward of the packed row (best of the repeats).
        separate_s: seconds of the forwards of one sequence per row (best of the repeats).
    """

    attention: str
    error: float
    packed_s: float
    separate_s: float

    def __str__(self) -> str:
        text = f"{self.attention} attention, packing error {self.error:.1e}"
        if math.isnan(self.packed_s):
            return text
        return f"{text}, packed {self.packed_s:.3g} s vs one per row {self.separate_s:.3g} s"


@torch.no_grad()
def probe_packing(
    model: Any,
    device: torch.device,
    *,
    lengths: Sequence[int] = PROBE_LENGTHS,
    repeats: int = 2,
) -> PackingProbe:
    """Compare a packed forward with one forward per sequence: logprobs and time.

    Both layouts run ``max(repeats, 1)`` times, interleaved and with gradients
    off; the first round gives the error, and the times are the best of the
    rounds (NaN with ``repeats=0``). The model's training mode and the global
    random state are left untouched.
    """
    data = _probe_data(model, lengths)
    was_training = model.training
    model.eval()  # no dropout, so that the two passes are comparable
    packed_s = separate_s = math.inf if repeats > 0 else math.nan
    try:
        for round_ in range(max(repeats, 1)):
            start = time.perf_counter()
            separate = [forward_logprobs(model, [d], "packed", device)[0] for d in data]
            middle = time.perf_counter()
            packed = forward_logprobs(model, data, "packed", device)[1]
            end = time.perf_counter()
            if round_ == 0:
                packed_D, separate_D = packed, separate
            if repeats > 0:
                separate_s, packed_s = min(separate_s, middle - start), min(packed_s, end - middle)
    finally:
        model.train(was_training)
    error = max(float((p - s).abs().max()) for p, s in zip(packed_D, separate_D, strict=True))
    return PackingProbe(attention_implementation(model), error, packed_s, separate_s)


@dataclass(frozen=True)
class LayoutChoice:
    """The layout :func:`choose_layout` picked, the probe behind it and why.

    Attributes:
        layout: ``"packed"`` or ``"padded"``.
        probe: the measurements (``None`` for ``packing="padded"``, which skips the probe).
        reason: why ``packing="auto"`` padded; empty when nothing was given up.
    """

    layout: Layout
    probe: PackingProbe | None
    reason: str = ""


def choose_layout(
    model: Any, device: torch.device, packing: Literal["auto", "packed", "padded"]
) -> LayoutChoice:
    """Pick how the trainer lays out Datums for ``model``, switching its attention if that helps.

    ``padded`` is taken as asked. Otherwise the model gets an attention that
    skips the blocks between packed Datums
    (:func:`~baselines.training.attention.segment_attention`), and a probe
    (:func:`probe_packing`) compares packed and separate forwards. ``auto``
    packs only when all three hold, else pads (one Datum per row):

    * the attention is segment-aware: with a block-diagonal mask instead,
      a packed row costs ``row**2`` attention (3.5x one Datum per row on 3,000
      tokens of SmolLM2), and more so the larger the row;
    * the error is at most :data:`PACKING_TOLERANCE`;
    * the packed forward is at most :data:`PACKING_SLOWDOWN` times slower
      (measured again before a verdict against it).

    ``packed`` packs unless the error is too large, which raises ``ValueError``.

    On CUDA the attention is flash-attention's (flash-attn installed) or
    FlexAttention with a document mask (``segment_flex``, torch >= 2.5), one
    call per layer, and the probe decides as on a CPU. With neither, ``auto``
    pads without a probe: ``segment_sdpa`` runs one attention call per Datum
    and layer, and a GPU spends those calls launching kernels. On an H100 a
    packed step of 64 Datums ran at 0.48x to 0.84x the tokens/s of TRL's padded
    one (``bench/trl_step.py --device cuda``).
    """
    if packing == "padded":
        return LayoutChoice("padded", None)
    attention = segment_attention(model)
    if packing == "auto" and device.type == "cuda" and attention == SEGMENT_ATTENTION:
        return LayoutChoice(
            "padded",
            None,
            f"{SEGMENT_ATTENTION} attention makes one call per Datum and layer, slow on CUDA; "
            "install flash-attn (or torch >= 2.5, for FlexAttention) to pack",
        )
    probe = probe_packing(model, device, repeats=2 if packing == "auto" else 0)
    name = type(getattr(model, "module", model)).__name__
    if probe.error > PACKING_TOLERANCE:
        message = (
            f"{name}: a packed forward differs from separate forwards by {probe.error:.3g} "
            f"nats ({probe.attention} attention lets packed Datums attend to each other)"
        )
        if packing == "packed":
            raise ValueError(f"{message}; use --packing padded or auto")
        return LayoutChoice("padded", probe, message)
    if packing == "packed":
        return LayoutChoice("packed", probe)
    if probe.attention not in SEGMENT_AWARE:
        return LayoutChoice(
            "padded",
            probe,
            f"{name}: {probe.attention} attention computes the whole row x row score matrix "
            "of a packed row; one Datum per row is faster",
        )
    if probe.packed_s > PACKING_SLOWDOWN * probe.separate_s:
        # Another job on a shared CPU can stall either measurement: measure
        # again, keeping each layout's best time, before giving packing up.
        again = probe_packing(model, device, repeats=3)
        probe = PackingProbe(
            probe.attention,
            probe.error,
            min(probe.packed_s, again.packed_s),
            min(probe.separate_s, again.separate_s),
        )
    if probe.packed_s > PACKING_SLOWDOWN * probe.separate_s:
        return LayoutChoice(
            "padded",
            probe,
            f"{name}: a packed forward took {probe.packed_s:.3g} s, one Datum per row "
            f"{probe.separate_s:.3g} s",
        )
    return LayoutChoice("packed", probe)
