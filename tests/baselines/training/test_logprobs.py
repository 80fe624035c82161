"""The taken tokens' logprobs, chunk by chunk, equal the full logits' in value and gradient."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from baselines.data.datums import trajectory_to_data  # noqa: E402
from baselines.training.forward import forward_logprobs, target_logprobs  # noqa: E402
from baselines.training.logprobs import (  # noqa: E402
    supports_selective_logprobs,
    token_logprobs,
)
from baselines.types import Trajectory, Transition  # noqa: E402

CPU = torch.device("cpu")


@settings(max_examples=40, deadline=None)
@given(
    tokens=st.integers(1, 40),
    hidden_size=st.integers(1, 12),
    vocab=st.integers(2, 30),
    chunk=st.integers(1, 50),
    temperature=st.sampled_from([1.0, 0.7, 1.3]),
    seed=st.integers(0, 2**16),
)
def test_chunks_give_the_full_logits_values_and_gradients(
    tokens, hidden_size, vocab, chunk, temperature, seed
):
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(tokens, hidden_size, dtype=torch.float64, generator=generator)
    weight = torch.randn(vocab, hidden_size, dtype=torch.float64, generator=generator)
    targets = torch.randint(0, vocab, (tokens,), generator=generator)
    upstream = torch.randn(tokens, dtype=torch.float64, generator=generator)
    hidden.requires_grad_(True)
    weight.requires_grad_(True)

    full = target_logprobs(hidden @ weight.t(), targets, temperature=temperature)
    full_grads = torch.autograd.grad((full * upstream).sum(), (hidden, weight))
    chunked = token_logprobs(hidden, weight, targets, temperature=temperature, chunk=chunk)
    chunked_grads = torch.autograd.grad((chunked * upstream).sum(), (hidden, weight))

    # (Both compute the logits in fp32, as the trainer does.)
    torch.testing.assert_close(chunked.double(), full.double(), atol=1e-5, rtol=0)
    for ours, theirs in zip(chunked_grads, full_grads, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_under_cpu_autocast_the_backward_makes_the_forwards_logits():
    # The backward pass makes the logits again; under bf16 autocast it must make the
    # forward's bf16 logits, or the softmax it forms against the kept logsumexp does
    # not sum to 1. With a projection column of ones, d logprob / d hidden along it
    # is 1 - sum(softmax) = 0 exactly when the two agree (up to bf16's rounding of
    # the gradient: 0.002 here); fp32 logits against a bf16 logsumexp left 0.35.
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(64, 32, generator=generator) * 4
    weight = torch.randn(500, 32, generator=generator)
    weight[:, 0] = 1.0
    targets = torch.randint(0, 500, (64,), generator=generator)
    hidden.requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logprobs = token_logprobs(hidden, weight, targets, chunk=16)
    (grad_hidden,) = torch.autograd.grad(logprobs.sum(), (hidden,))
    assert grad_hidden[:, 0].abs().max() < 5e-3, grad_hidden[:, 0].abs().max()


def test_a_hand_computed_case():
    # logits [[1, 0, 0], [0, 2, 0]]: softmax of the targets 0 and 1.
    hidden = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    weight = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    logprobs = token_logprobs(hidden, weight, torch.tensor([0, 1]), chunk=1)
    expected = [1 - np.log(np.e + 2), 2 - np.log(np.e**2 + 2)]
    np.testing.assert_allclose(logprobs.numpy(), expected, rtol=1e-6)


def test_a_bad_chunk_names_the_value():
    with pytest.raises(ValueError, match="chunk must be >= 1, got 0"):
        token_logprobs(torch.zeros(1, 1), torch.zeros(2, 1), torch.tensor([0]), chunk=0)


def _data(vocab, lengths, seed):
    rng = np.random.default_rng(seed)
    data = []
    for length in lengths:
        prompt = rng.integers(0, vocab, size=max(1, length // 2)).tolist()
        action = rng.integers(0, vocab, size=length + 1 - len(prompt)).tolist()
        turn = Transition(prompt, action, [-1.0] * len(action))
        data.extend(trajectory_to_data(Trajectory([turn]), advantage=float(rng.normal())))
    return data


@pytest.mark.slow  # loads the tiny model
@pytest.mark.parametrize("layout", ["packed", "padded"])
@pytest.mark.parametrize("actions_only", [False, True])
def test_the_trainers_forward_is_the_same_with_chunks(tiny_model_dir, layout, actions_only):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    assert supports_selective_logprobs(model)
    data = _data(model.config.vocab_size, [5, 17, 9, 30], seed=3)
    results = {}
    for chunk in (0, 7):
        model.zero_grad(set_to_none=True)
        logprobs, _, inputs = forward_logprobs(
            model, data, layout, CPU, actions_only=actions_only, temperature=0.9, chunk=chunk
        )
        (logprobs * inputs["weights"] * inputs["advantages"]).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results[chunk] = (logprobs.detach(), grads)
    (full, full_grads), (chunked, chunked_grads) = results[0], results[7]
    torch.testing.assert_close(chunked, full, atol=1e-5, rtol=0)
    assert full_grads.keys() == chunked_grads.keys()
    for name, grad in full_grads.items():
        torch.testing.assert_close(chunked_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.slow  # loads the tiny model
def test_models_it_cannot_run_keep_their_own_logits(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)

    class Wrapped(torch.nn.Module):  # a DDP-like wrapper: hooks run through its forward
        def __init__(self, module):
            super().__init__()
            self.module = module

    assert not supports_selective_logprobs(Wrapped(model))
    model.config.final_logit_softcapping = 30.0
    assert not supports_selective_logprobs(model)
    model.config.final_logit_softcapping = None
    head = model.get_output_embeddings()
    model.set_output_embeddings(torch.nn.Linear(head.in_features, head.out_features, bias=True))
    assert not supports_selective_logprobs(model)
