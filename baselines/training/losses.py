"""Policy-gradient losses over action tokens, and the sampler-vs-trainer diagnostics.

Every loss compares the training policy ``p`` (logprobs from the trainer's
forward pass, with gradient) with the sampling policy ``q`` (logprobs the
sampler returned, stored in :attr:`baselines.types.Datum.logprobs`) through the
per-token ratio ``r = exp(lp_train - lp_sample)``, and sums over tokens with each
token's loss weight ``w`` (0 on observation tokens and on ``loss_weight`` 0 turns):

==========================  ===================================================================
``importance_sampling``     ``-sum(w * r * A)``  (the debate recipe's "RL Objective"; the default)
``ppo``                     ``-sum(w * min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A))``
``cispo``                   ``-sum(w * stopgrad(clip(r, clip_low, clip_high)) * lp_train * A)``
==========================  ===================================================================

The gradient of the importance-sampling term is ``d/d lp_train (-w r A) = -w r A``:
the REINFORCE gradient ``-A * grad log p`` reweighted by ``p / q``. When
sampling and training contexts differ (the expert-iteration plan's context swap), ``r`` is the
ratio between the training context and the sampling context, which is exactly
the correction the off-policy estimator needs.

MAGRPO (the MAGRPO paper) trains on-policy, without a ratio: :func:`reinforce_loss`
is ``-(1/C) * sum_c A_c * sum_t lp_train``, the mean over a batch's C
completions of each one's advantage times its summed token logprobs.

Losses are sums, not means, as in the debate recipe: how to normalize (by tokens, by
Datums, by a constant) is the trainer's decision. They work on any shape
(packed ``_N`` or padded ``_B_T``) because every operation is elementwise.
Non-action positions are safe: their sampling logprob is 0 and a training
logprob is <= 0, so ``r <= 1`` there and ``w = 0`` removes the term.

This is the only module of the data pipeline that imports torch. It must never
see text, tokens or trajectories: only per-token tensors.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, get_args

import numpy as np
import torch

from baselines.config import LossName
from baselines.data.advantages import strategy_key
from baselines.types import Datum

__all__ = [
    "LOSSES",
    "LossFn",
    "LossName",
    "cispo_loss",
    "get_loss",
    "importance_sampling_loss",
    "kl_sample_train",
    "per_strategy_metrics",
    "ppo_loss",
    "reinforce_loss",
]


class LossFn(Protocol):
    """A loss: per-token tensors of one shape in, a scalar tensor out."""

    def __call__(
        self,
        training_logprobs: torch.Tensor,
        sampling_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        weights: torch.Tensor,
    ) -> torch.Tensor:
        """Return the summed loss."""
        ...


def importance_sampling_loss(
    training_logprobs: torch.Tensor,
    sampling_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    """``-sum(w * r * A)``, ``r = exp(lp_train - lp_sample)`` (the debate recipe's objective).

    Args:
        training_logprobs: logprob of each target under the model being trained
            (requires grad).
        sampling_logprobs: logprob of each target under the sampler.
        advantages: advantage of each target.
        weights: loss weight of each target (0 removes the token).

    Example:
        >>> lp = torch.tensor([-1.0])
        >>> importance_sampling_loss(lp, lp, torch.tensor([2.0]), torch.tensor([1.0]))
        tensor(-2.)
    """
    ratio = torch.exp(training_logprobs - sampling_logprobs)
    return -(weights * ratio * advantages).sum()


def ppo_loss(
    training_logprobs: torch.Tensor,
    sampling_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
) -> torch.Tensor:
    """``-sum(w * min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A))``: the PPO clipped objective.

    The ``min`` makes the objective pessimistic: once the ratio has moved past
    the clip range in the direction the advantage favours, the token's gradient
    is zero.

    Args:
        training_logprobs: see :func:`importance_sampling_loss`.
        sampling_logprobs: see :func:`importance_sampling_loss`.
        advantages: see :func:`importance_sampling_loss`.
        weights: see :func:`importance_sampling_loss`.
        eps_low: the ratio is clipped below at ``1 - eps_low``.
        eps_high: the ratio is clipped above at ``1 + eps_high`` (DAPO's
            "clip-higher" uses a larger value, e.g. 0.28).
    """
    ratio = torch.exp(training_logprobs - sampling_logprobs)
    clipped_ratio = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    objective = torch.minimum(ratio * advantages, clipped_ratio * advantages)
    return -(weights * objective).sum()


def cispo_loss(
    training_logprobs: torch.Tensor,
    sampling_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    *,
    clip_low: float = 0.0,
    clip_high: float = 4.0,
) -> torch.Tensor:
    """``-sum(w * stopgrad(clip(r, clip_low, clip_high)) * lp_train * A)``: CISPO.

    The clipped ratio is a constant coefficient on the log-likelihood (MiniMax-M1,
    arXiv:2506.13585), so no token's gradient is ever zeroed, only bounded. The
    defaults (no lower bound, upper bound 4) are Tinker's.

    Args:
        training_logprobs: see :func:`importance_sampling_loss`.
        sampling_logprobs: see :func:`importance_sampling_loss`.
        advantages: see :func:`importance_sampling_loss`.
        weights: see :func:`importance_sampling_loss`.
        clip_low: lower bound of the ratio coefficient.
        clip_high: upper bound of the ratio coefficient.
    """
    ratio = torch.exp(training_logprobs - sampling_logprobs)
    coefficient = torch.clamp(ratio, clip_low, clip_high).detach()
    return -(weights * coefficient * training_logprobs * advantages).sum()


def reinforce_loss(
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    num_completions: int,
) -> torch.Tensor:
    """``-(1/C) * sum_c A_c * sum_t lp_ct``: MAGRPO's on-policy loss (the MAGRPO paper).

    ``advantages`` holds each completion's advantage on its tokens, ``weights``
    1 on completion tokens and 0 on prompt and padding; any shape (rows of
    completions, or packed). ``num_completions`` is C, every completion of the
    agent in the batch (those with A = 0 included), so the losses of a batch's
    microbatches add up to the batch's loss.

    Example:
        >>> lp = torch.tensor([[-9.0, -1.0, -2.0], [-9.0, -0.5, 0.0]])  # prompt token first
        >>> adv = torch.tensor([[0.0, 2.0, 2.0], [0.0, -1.0, 0.0]])  # row 2 is padded
        >>> w = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
        >>> reinforce_loss(lp, adv, w, num_completions=2)  # -(2*(-3) + -1*(-0.5)) / 2
        tensor(2.7500)
    """
    if num_completions < 1:
        raise ValueError(f"num_completions must be >= 1, got {num_completions}")
    return -(advantages * weights * logprobs).sum() / num_completions


LOSSES: Mapping[LossName, Callable[..., torch.Tensor]] = {
    "importance_sampling": importance_sampling_loss,
    "ppo": ppo_loss,
    "cispo": cispo_loss,
}
"""Every loss by name; :func:`get_loss` binds their keyword settings."""


def get_loss(name: LossName, **config: float) -> LossFn:
    """Return the loss called ``name`` with its keyword settings bound.

    Args:
        name: one of :data:`LossName`.
        **config: the loss's keyword settings (``eps_low``/``eps_high`` for
            ``ppo``, ``clip_low``/``clip_high`` for ``cispo``).

    Raises:
        ValueError: unknown name, or a setting the loss does not take.

    Example:
        >>> loss_fn = get_loss("ppo", eps_high=0.28)
        >>> lp = torch.zeros(2)
        >>> loss_fn(lp, lp, torch.tensor([1.0, -1.0]), torch.ones(2))
        tensor(-0.)
    """
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of {list(get_args(LossName))}")
    fn = LOSSES[name]
    settings = [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    unknown = sorted(set(config) - set(settings))
    if unknown:
        raise ValueError(f"loss {name!r} takes settings {settings}, got unknown {unknown}")

    def loss(
        training_logprobs: torch.Tensor,
        sampling_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        weights: torch.Tensor,
    ) -> torch.Tensor:
        return fn(training_logprobs, sampling_logprobs, advantages, weights, **config)

    return loss


@torch.no_grad()
def kl_sample_train(
    sampling_logprobs: torch.Tensor,
    training_logprobs: torch.Tensor,
    mask: torch.Tensor,
) -> dict[str, float]:
    """Sampler-vs-trainer diagnostics over action tokens (the debate recipe, "Mask handling").

    With ``d = lp_sample - lp_train`` over tokens where ``mask == 1``:

    * ``optim/kl_sample_train_v1 = mean(d)``: the plain estimate of KL(q || p);
    * ``optim/kl_sample_train_v2 = 0.5 * mean(d ** 2)``: always >= 0, lower variance;
    * ``optim/entropy = -mean(lp_sample)``: the sampler's per-token entropy estimate.

    Args:
        sampling_logprobs: sampler logprobs, any shape.
        training_logprobs: trainer logprobs, same shape (gradient ignored).
        mask: 1 on action tokens, same shape.

    Raises:
        ValueError: the mask selects no token.

    Example:
        >>> sampling, training = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -1.5])
        >>> m = kl_sample_train(sampling, training, torch.ones(2))
        >>> m["optim/kl_sample_train_v1"], m["optim/kl_sample_train_v2"], m["optim/entropy"]
        (0.0, 0.125, 1.5)
    """
    selected = mask.reshape(-1) == 1
    if not bool(selected.any()):
        raise ValueError("mask selects no action token; KL and entropy need at least one")
    sampling = sampling_logprobs.reshape(-1)[selected].double()
    training = training_logprobs.detach().reshape(-1)[selected].double()
    difference = sampling - training
    return {
        "optim/kl_sample_train_v1": difference.mean().item(),
        "optim/kl_sample_train_v2": (0.5 * difference.square().mean()).item(),
        "optim/entropy": (-sampling.mean()).item(),
    }


@torch.no_grad()
def per_strategy_metrics(
    data_D: Sequence[Datum],
    training_logprobs_D: Sequence[torch.Tensor],
) -> dict[str, float]:
    """Counts and the mean log ratio ``lp_train - lp_sample`` per strategy (expert iteration).

    For each strategy s (None logged as ``untagged``):

    * ``strategy/{s}/num_datums`` and ``strategy/{s}/num_action_tokens``;
    * ``strategy/{s}/frac_action_tokens``: action tokens over all tokens (should
      be stable across steps for a strategy);
    * ``strategy/{s}/mean_log_ratio``: mean of ``lp_train - lp_sample`` over its
      action tokens; near 0 on-policy, and the size of the context-swap effect
      for strategies that train on another context.

    Args:
        data_D: the Datums of a batch.
        training_logprobs_D: trainer logprobs of each Datum's targets, aligned
            with ``data_D`` (split a packed result with ``torch.split(lp_N,
            packed.lengths_D.tolist())``).
    """
    if len(data_D) != len(training_logprobs_D):
        raise ValueError(
            f"got {len(data_D)} Datums but {len(training_logprobs_D)} training logprob tensors"
        )
    totals: dict[str, list[float]] = {}  # key -> [datums, tokens, action tokens, log-ratio sum]
    for datum, training in zip(data_D, training_logprobs_D, strict=True):
        if training.numel() != len(datum):
            raise ValueError(
                f"training logprobs have {training.numel()} values for a Datum of {len(datum)}"
            )
        mask = datum.mask == 1
        training_T = training.detach().reshape(-1).double().cpu().numpy()
        log_ratio_T = training_T - datum.logprobs.astype(np.float64)
        row = totals.setdefault(strategy_key(datum.strategy), [0.0, 0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += len(datum)
        row[2] += int(np.count_nonzero(mask))
        row[3] += float(log_ratio_T[mask].sum())
    metrics: dict[str, float] = {}
    for key, (datums, tokens, action_tokens, log_ratio_sum) in totals.items():
        metrics[f"strategy/{key}/num_datums"] = datums
        metrics[f"strategy/{key}/num_action_tokens"] = action_tokens
        metrics[f"strategy/{key}/frac_action_tokens"] = action_tokens / tokens if tokens else 0.0
        metrics[f"strategy/{key}/mean_log_ratio"] = (
            log_ratio_sum / action_tokens if action_tokens else 0.0
        )
    return metrics
