"""Losses, their gradients and the KL / entropy metrics against hand-computed numbers."""

from __future__ import annotations

import doctest
import math
from typing import Any

import numpy as np
import pytest
import torch

import baselines.training.losses
from baselines.training.losses import (
    LOSSES,
    cispo_loss,
    get_loss,
    importance_sampling_loss,
    kl_sample_train,
    per_strategy_metrics,
    ppo_loss,
    reinforce_loss,
)
from baselines.types import Datum

LN2 = math.log(2.0)


def _training(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64, requires_grad=True)


def _t(values: list[Any]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


# Shared example: sampling logprobs and training logprobs chosen so that
# r = exp(lp_train - lp_sample) = [1, 2, 0.5].
SAMPLING = [-1.0, -2.0, -0.5]
TRAINING = [-1.0, -2.0 + LN2, -0.5 - LN2]
ADVANTAGES = [1.0, -1.0, 2.0]
WEIGHTS = [1.0, 1.0, 0.5]


def test_importance_sampling_loss_value_and_gradient() -> None:
    lp_train = _training(TRAINING)
    loss = importance_sampling_loss(lp_train, _t(SAMPLING), _t(ADVANTAGES), _t(WEIGHTS))
    # -sum(w r A) = -(1*1*1 + 1*2*(-1) + 0.5*0.5*2) = -(1 - 2 + 0.5) = 0.5
    assert loss.item() == pytest.approx(0.5)
    loss.backward()
    # d/d lp_train of -w r A = -w r A (since dr/dlp_train = r): [-1, 2, -0.5]
    assert lp_train.grad is not None
    np.testing.assert_allclose(lp_train.grad.numpy(), [-1.0, 2.0, -0.5], rtol=1e-12)


def test_importance_sampling_on_policy_is_the_reinforce_gradient() -> None:
    # r = 1 on-policy: loss = -sum(w A), gradient = -w A (REINFORCE with baseline-centred A)
    lp = [-0.3, -1.7]
    lp_train = _training(lp)
    loss = importance_sampling_loss(lp_train, _t(lp), _t([0.5, -0.25]), _t([1.0, 1.0]))
    assert loss.item() == pytest.approx(-(0.5 - 0.25))
    loss.backward()
    assert lp_train.grad is not None
    np.testing.assert_allclose(lp_train.grad.numpy(), [-0.5, 0.25], rtol=1e-12)


def test_zero_weight_removes_a_token_from_loss_and_gradient() -> None:
    lp_train = _training([-1.0, -3.0])
    loss = importance_sampling_loss(lp_train, _t([-1.0, -1.0]), _t([1.0, 5.0]), _t([1.0, 0.0]))
    assert loss.item() == pytest.approx(-1.0)
    loss.backward()
    assert lp_train.grad is not None
    assert lp_train.grad[1].item() == 0.0


def test_ppo_loss_value_and_gradient_with_clipping() -> None:
    # r = [1, 2, 2, 0.5, 0.5], A = [1, 1, -1, 1, -1], eps = 0.2, clip(r) = [1, 1.2, 1.2, 0.8, 0.8]
    # min(rA, clip(r) A):
    #   t0: min(1, 1)       = 1     unclipped
    #   t1: min(2, 1.2)     = 1.2   clipped   -> no gradient
    #   t2: min(-2, -1.2)   = -2    unclipped -> gradient -rA = 2
    #   t3: min(0.5, 0.8)   = 0.5   unclipped -> gradient -0.5
    #   t4: min(-0.5, -0.8) = -0.8  clipped   -> no gradient
    # loss = -(1 + 1.2 - 2 + 0.5 - 0.8) = 0.1
    sampling = [-1.0] * 5
    lp_train = _training([-1.0, -1.0 + LN2, -1.0 + LN2, -1.0 - LN2, -1.0 - LN2])
    advantages = _t([1.0, 1.0, -1.0, 1.0, -1.0])
    loss = ppo_loss(lp_train, _t(sampling), advantages, torch.ones(5, dtype=torch.float64))
    assert loss.item() == pytest.approx(0.1)
    loss.backward()
    assert lp_train.grad is not None
    np.testing.assert_allclose(lp_train.grad.numpy(), [-1.0, 0.0, 2.0, -0.5, 0.0], atol=1e-12)


def test_ppo_asymmetric_clip_range() -> None:
    # r = 2, A = 1: eps_high = 0.5 -> min(2, 1.5) = 1.5 -> loss -1.5, no gradient
    lp_train = _training([LN2])
    loss = ppo_loss(lp_train, _t([0.0]), _t([1.0]), _t([1.0]), eps_low=0.1, eps_high=0.5)
    assert loss.item() == pytest.approx(-1.5)
    # r = 0.5, A = -1: eps_low = 0.1 -> min(-0.5, -0.9) = -0.9 -> loss 0.9
    loss = ppo_loss(_training([-LN2]), _t([0.0]), _t([-1.0]), _t([1.0]), eps_low=0.1)
    assert loss.item() == pytest.approx(0.9)


def test_ppo_equals_importance_sampling_inside_the_clip_range() -> None:
    sampling, training = [-1.0, -2.0], [-1.05, -1.95]  # r = exp(-0.05), exp(0.05)
    args = (_t(training), _t(sampling), _t([1.0, -2.0]), _t([1.0, 1.0]))
    assert ppo_loss(*args).item() == pytest.approx(importance_sampling_loss(*args).item())


def test_cispo_loss_value_and_gradient() -> None:
    # r = [1, 2, 0.5], clip to [0, 1.5] -> coefficient c = [1, 1.5, 0.5], treated as constant
    # loss = -sum(w c lp_train A)
    #      = -(1*1*(-1)*1 + 1*1.5*(-2 + ln2)*(-1) + 0.5*0.5*(-0.5 - ln2)*2)
    #      = -(-1 + 3 - 1.5 ln2 - 0.25 - 0.5 ln2) = 2 ln2 - 1.75
    lp_train = _training(TRAINING)
    loss = cispo_loss(
        lp_train, _t(SAMPLING), _t(ADVANTAGES), _t(WEIGHTS), clip_low=0.0, clip_high=1.5
    )
    assert loss.item() == pytest.approx(2 * LN2 - 1.75)
    loss.backward()
    # stop-gradient on c: d/d lp_train = -w c A = [-1, 1.5, -0.5]; the clipped token (r = 2)
    # keeps a bounded gradient, unlike PPO
    assert lp_train.grad is not None
    np.testing.assert_allclose(lp_train.grad.numpy(), [-1.0, 1.5, -0.5], rtol=1e-12)


def test_cispo_default_clip_is_zero_to_four() -> None:
    # r = e^2 ~ 7.39 is clipped to 4: loss = -(4 * lp_train * A) = -(4 * -1 * 1) = 4
    loss = cispo_loss(_training([-1.0]), _t([-3.0]), _t([1.0]), _t([1.0]))
    assert loss.item() == pytest.approx(4.0)


def test_losses_work_on_padded_2d_tensors() -> None:
    lp_train = _training([-1.0, -1.0]).reshape(1, 2)
    args = (lp_train, _t([[-1.0, 0.0]]), _t([[2.0, 0.0]]), _t([[1.0, 0.0]]))
    for loss_fn in LOSSES.values():
        assert loss_fn(*args).shape == ()


# --- registry -------------------------------------------------------------------------


def test_registry_has_every_loss_name() -> None:
    assert set(LOSSES) == {"importance_sampling", "ppo", "cispo"}


def test_get_loss_binds_settings() -> None:
    lp_train = _training([LN2])  # r = 2, A = 1
    args = (lp_train, _t([0.0]), _t([1.0]), _t([1.0]))
    assert get_loss("importance_sampling")(*args).item() == pytest.approx(-2.0)
    assert get_loss("ppo")(*args).item() == pytest.approx(-1.2)
    assert get_loss("ppo", eps_high=0.5)(*args).item() == pytest.approx(-1.5)
    assert get_loss("cispo", clip_high=1.5)(*args).item() == pytest.approx(-1.5 * LN2)


def test_get_loss_errors_name_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown loss 'dapo'; choose one of \['importance"):
        get_loss("dapo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"loss 'ppo' takes settings \['eps_low', 'eps_high'\]"):
        get_loss("ppo", clip_high=2.0)
    with pytest.raises(ValueError, match=r"takes settings \[\], got unknown \['eps_low'\]"):
        get_loss("importance_sampling", eps_low=0.1)


# --- metrics --------------------------------------------------------------------------


def test_kl_sample_train_over_action_tokens_only() -> None:
    # action tokens: lp_sample [-1, -2, -0.5], lp_train [-1.5, -1.5, -1]
    #   d = lp_sample - lp_train = [0.5, -0.5, 0.5]
    #   v1 = mean(d) = 0.5 / 3 = 1/6
    #   v2 = 0.5 * mean(d^2) = 0.5 * (0.25 + 0.25 + 0.25) / 3 = 1/8
    #   entropy = -mean(lp_sample) = 3.5 / 3 = 7/6 (the sampler's, not the trainer's 4/3)
    # the 4th token (mask 0, a huge difference) must not count
    metrics = kl_sample_train(
        _t([-1.0, -2.0, -0.5, 0.0]), _training([-1.5, -1.5, -1.0, -9.0]), _t([1, 1, 1, 0])
    )
    assert metrics["optim/kl_sample_train_v1"] == pytest.approx(1 / 6)
    assert metrics["optim/kl_sample_train_v2"] == pytest.approx(1 / 8)
    assert metrics["optim/entropy"] == pytest.approx(7 / 6)


def test_kl_sample_train_v1_sign() -> None:
    # the trainer gives the sampled token less mass than the sampler: v1 > 0
    metrics = kl_sample_train(_t([-1.0]), _t([-1.25]), _t([1.0]))
    assert metrics["optim/kl_sample_train_v1"] == pytest.approx(0.25)
    assert metrics["optim/kl_sample_train_v2"] == pytest.approx(0.5 * 0.25**2)


def test_kl_sample_train_needs_an_action_token() -> None:
    with pytest.raises(ValueError, match="mask selects no action token"):
        kl_sample_train(_t([-1.0]), _t([-1.0]), _t([0.0]))


def _datum(strategy: str | None, logprobs: list[float], mask: list[float]) -> Datum:
    n = len(mask)
    return Datum(
        model_input=list(range(n)),
        target_tokens=list(range(1, n + 1)),
        logprobs=logprobs,
        advantages=[0.0] * n,
        mask=mask,
        weights=mask,
        strategy=strategy,
    )


def test_per_strategy_metrics() -> None:
    data = [
        _datum("iid", [0.0, -1.0, -2.0], [0, 1, 1]),
        _datum("hint", [0.0, -1.0], [0, 1]),
        _datum("iid", [-1.0], [1]),
    ]
    training = [_t([-7.0, -1.5, -1.5]), _t([0.0, -0.5]), _t([-1.0])]
    metrics = per_strategy_metrics(data, training)
    # iid: action tokens 3 of 4; log ratios lp_train - lp_sample = [-0.5, 0.5, 0] -> mean 0
    assert metrics["strategy/iid/num_datums"] == 2
    assert metrics["strategy/iid/num_action_tokens"] == 3
    assert metrics["strategy/iid/frac_action_tokens"] == pytest.approx(0.75)
    assert metrics["strategy/iid/mean_log_ratio"] == pytest.approx(0.0)
    # hint: 1 of 2 action tokens; log ratio -0.5 - (-1) = 0.5 (the masked -7 vs 0 is ignored)
    assert metrics["strategy/hint/num_action_tokens"] == 1
    assert metrics["strategy/hint/frac_action_tokens"] == pytest.approx(0.5)
    assert metrics["strategy/hint/mean_log_ratio"] == pytest.approx(0.5)


def test_per_strategy_metrics_checks_alignment() -> None:
    data = [_datum(None, [-1.0, -1.0], [1, 1])]
    with pytest.raises(ValueError, match="got 1 Datums but 2 training logprob tensors"):
        per_strategy_metrics(data, [_t([-1.0, -1.0]), _t([-1.0])])
    with pytest.raises(ValueError, match="have 1 values for a Datum of 2"):
        per_strategy_metrics(data, [_t([-1.0])])
    assert "strategy/untagged/num_datums" in per_strategy_metrics(data, [_t([-1.0, -1.0])])


def test_docstring_examples_run() -> None:
    result = doctest.testmod(baselines.training.losses)
    assert result.attempted > 0
    assert result.failed == 0


def test_reinforce_loss_is_minus_mean_advantage_times_logprob_sum():
    # Two completions: A = 2 with logprobs (-1, -2); A = -1 with (-0.5) then padding.
    logprobs = torch.tensor([[-7.0, -1.0, -2.0], [-7.0, -0.5, -3.0]], requires_grad=True)
    advantages = torch.tensor([[0.0, 2.0, 2.0], [0.0, -1.0, 0.0]])
    weights = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    loss = reinforce_loss(logprobs, advantages, weights, num_completions=4)
    # -(2 * (-3) + (-1) * (-0.5)) / 4 = 5.5 / 4; prompt (-7) and padding (-3) excluded
    assert float(loss.detach()) == pytest.approx(5.5 / 4)
    loss.backward()
    assert logprobs.grad.tolist() == [[0.0, -0.5, -0.5], [0.0, 0.25, 0.0]]
    with pytest.raises(ValueError, match="num_completions must be >= 1"):
        reinforce_loss(logprobs, advantages, weights, num_completions=0)
