"""Segment-aware attention: packed rows give exactly what separate rows give, and only that.

Tolerances (fp32, the tiny two-layer model): logprobs within 1e-5 absolute of
separate forwards (they come out bit-identical, since each Datum runs the same
SDPA kernel on the same numbers), gradients within 1e-5 absolute + 1e-4 relative
(the packed backward sums parameter gradients in another order).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from baselines.data.datums import trajectory_to_data  # noqa: E402
from baselines.training import layout as layout_module  # noqa: E402
from baselines.training.attention import (  # noqa: E402
    FLEX_SEGMENT_ATTENTION,
    SEGMENT_ATTENTION,
    flex_attention_available,
    register_segment_attention,
    segment_attention,
    segment_lengths,
)
from baselines.training.forward import (  # noqa: E402
    forward_logprobs,
)
from baselines.training.layout import (  # noqa: E402
    PackingProbe,
    choose_layout,
)
from baselines.types import Trajectory, Transition  # noqa: E402

CPU = torch.device("cpu")
LOGPROB_ATOL = 1e-5
GRAD_ATOL, GRAD_RTOL = 1e-5, 1e-4


@pytest.mark.parametrize(
    ("positions", "lengths"),
    [
        ([[0, 1, 2, 3]], [4]),
        ([[0, 1, 2, 0, 1, 0]], [3, 2, 1]),
        ([[0, 0, 0]], [1, 1, 1]),
        ([[5, 6, 0, 1]], [2, 2]),  # a row that starts mid-sequence, like transformers reads it
        ([[0, 1], [0, 1]], None),  # several rows: not a packed row
    ],
)
def test_segment_lengths_from_restarting_positions(positions, lengths):
    assert segment_lengths(torch.tensor(positions)) == lengths


def test_segment_lengths_prefer_the_cumulative_lengths():
    cu = torch.tensor([0, 2, 7], dtype=torch.int32)
    assert segment_lengths(torch.tensor([[0, 1, 2, 3, 4, 5, 6]]), cu) == [2, 5]


def _data(vocab: int, lengths: list[int], seed: int):
    rng = np.random.default_rng(seed)
    data = []
    for length in lengths:
        prompt = rng.integers(0, vocab, size=max(1, length // 2)).tolist()
        action = rng.integers(0, vocab, size=length + 1 - len(prompt)).tolist()
        turn = Transition(prompt, action, [-1.0] * len(action))
        data.extend(trajectory_to_data(Trajectory([turn]), advantage=float(rng.normal())))
    return data


@pytest.fixture(scope="module")
def segment_model(tiny_model_dir):
    """A tiny model of its own (the session's is shared), switched to segment attention."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    assert segment_attention(model) == SEGMENT_ATTENTION
    return model


def _gradients(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 48), min_size=1, max_size=7),
    seed=st.integers(0, 2**16),
    actions_only=st.booleans(),
)
def test_packed_rows_equal_separate_rows_in_logprobs_and_gradients(
    segment_model, lengths, seed, actions_only
):
    model = segment_model
    data = _data(model.config.vocab_size, lengths, seed)
    weights_D = [torch.tensor(d.weights) * (i + 1) for i, d in enumerate(data)]

    _, packed_D, _ = forward_logprobs(model, data, "packed", CPU, actions_only=actions_only)
    packed_loss = sum((lp * w).sum() for lp, w in zip(packed_D, weights_D, strict=True))
    separate_D = [
        forward_logprobs(model, [d], "packed", CPU, actions_only=actions_only)[0] for d in data
    ]
    separate_loss = sum((lp * w).sum() for lp, w in zip(separate_D, weights_D, strict=True))
    for together, alone in zip(packed_D, separate_D, strict=True):
        torch.testing.assert_close(together, alone, atol=LOGPROB_ATOL, rtol=0)

    packed_grads = _gradients(model, packed_loss)
    separate_grads = _gradients(model, separate_loss)
    assert packed_grads.keys() == separate_grads.keys() and len(packed_grads) > 10
    for name, grad in separate_grads.items():
        torch.testing.assert_close(packed_grads[name], grad, atol=GRAD_ATOL, rtol=GRAD_RTOL)


@pytest.mark.slow
def test_segment_attention_changes_nothing_but_packed_rows(tiny_model_dir, segment_model):
    # Padded rows (an attention mask), and generation with a cache and left padding,
    # go through transformers' own sdpa: the same numbers as a model never switched.
    from transformers import AutoModelForCausalLM, AutoTokenizer

    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    data = _data(plain.config.vocab_size, [9, 30, 4], seed=1)
    with torch.no_grad():
        expected = forward_logprobs(plain, data, "padded", CPU)[0]
        got = forward_logprobs(segment_model, data, "padded", CPU)[0]
    torch.testing.assert_close(got, expected, atol=LOGPROB_ATOL, rtol=0)

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"
    prompts = tokenizer(["x_or_y returns", "a"], return_tensors="pt", padding=True)
    kwargs = {"max_new_tokens": 6, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    assert torch.equal(
        segment_model.generate(**prompts, **kwargs), plain.generate(**prompts, **kwargs)
    )


@pytest.mark.slow
def test_auto_packs_with_segment_attention(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    choice = choose_layout(model, CPU, "auto")
    assert choice.layout == "packed" and choice.reason == ""
    assert choice.probe is not None and choice.probe.attention == SEGMENT_ATTENTION
    assert choice.probe.error <= LOGPROB_ATOL
    assert choice.probe.packed_s > 0 and choice.probe.separate_s > 0
    assert choose_layout(model, CPU, "padded").probe is None  # padded skips the probe


def _probe(attention="segment_sdpa", error=0.0, packed_s=1.0, separate_s=1.0):
    return lambda *args, **kwargs: PackingProbe(attention, error, packed_s, separate_s)


@pytest.mark.parametrize(
    ("packing", "probe", "layout", "reason"),
    [
        ("auto", _probe(), "packed", ""),
        ("auto", _probe(packed_s=1.1), "packed", ""),  # within timing noise
        ("auto", _probe(packed_s=1.3), "padded", "packed forward took 1.3 s"),
        ("auto", _probe(attention="sdpa"), "padded", "row x row score matrix"),
        ("auto", _probe(error=0.5), "padded", "differs from separate forwards by 0.5"),
        ("packed", _probe(attention="sdpa", packed_s=9.0), "packed", ""),  # as asked
        ("packed", _probe(error=0.5), ValueError, "use --packing padded or auto"),
    ],
)
def test_choose_layout_pads_when_packing_is_wrong_or_slow(
    monkeypatch, packing, probe, layout, reason
):
    # The probe's verdicts, without a model: packed only when right, segment-aware and fast.
    monkeypatch.setattr(layout_module, "segment_attention", lambda model: "sdpa")
    monkeypatch.setattr(layout_module, "probe_packing", probe)
    model = torch.nn.Linear(1, 1)
    if layout is ValueError:
        with pytest.raises(ValueError, match=reason):
            choose_layout(model, CPU, packing)
        return
    choice = choose_layout(model, CPU, packing)
    assert choice.layout == layout
    assert reason in choice.reason if reason else choice.reason == ""


def test_probe_text_says_what_was_measured():
    assert str(PackingProbe("segment_sdpa", 0.0, 0.5, 0.75)) == (
        "segment_sdpa attention, packing error 0.0e+00, packed 0.5 s vs one per row 0.75 s"
    )
    assert str(PackingProbe("sdpa", 2e-6, math.nan, math.nan)) == (
        "sdpa attention, packing error 2.0e-06"
    )


@pytest.mark.parametrize(
    ("attention", "packing", "layout", "probed"),
    [
        (SEGMENT_ATTENTION, "auto", "padded", False),  # one SDPA call per Datum: launch-bound
        ("flash_attention_2", "auto", "packed", True),  # varlen kernels: packing pays
        (FLEX_SEGMENT_ATTENTION, "auto", "packed", True),  # one call per layer: the probe decides
        (SEGMENT_ATTENTION, "packed", "packed", True),  # as asked, after the error check
    ],
)
def test_cuda_pads_unless_flash_attention_packs(monkeypatch, attention, packing, layout, probed):
    calls = []

    def probe(*args, **kwargs):
        calls.append(args)
        return _probe(attention)()

    monkeypatch.setattr(layout_module, "segment_attention", lambda model: attention)
    monkeypatch.setattr(layout_module, "probe_packing", probe)
    choice = choose_layout(torch.nn.Linear(1, 1), torch.device("cuda"), packing)
    assert choice.layout == layout
    assert bool(calls) == probed
    if not probed:
        assert choice.probe is None and "install flash-attn" in choice.reason


@pytest.mark.slow  # loads the tiny model
@pytest.mark.skipif(not flex_attention_available(), reason="torch without FlexAttention")
@pytest.mark.parametrize("lengths", [[5], [17, 3, 40, 1], [64, 64], [200, 900, 30]])
def test_flex_document_attention_equals_segment_sdpa(tiny_model_dir, lengths):
    # On a CPU FlexAttention has no backward, so the trainer never picks it there;
    # its forward (eager: exact, scores materialized) checks the document mask,
    # the padding to a bucket and the head layout against segment_sdpa.
    from transformers import AutoModelForCausalLM

    results = {}
    for attention in (SEGMENT_ATTENTION, FLEX_SEGMENT_ATTENTION):
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        register_segment_attention()
        model.set_attn_implementation(attention)
        data = _data(model.config.vocab_size, lengths, seed=len(lengths))
        with torch.no_grad():
            results[attention] = forward_logprobs(model, data, "packed", CPU)[0]
    torch.testing.assert_close(
        results[FLEX_SEGMENT_ATTENTION], results[SEGMENT_ATTENTION], atol=LOGPROB_ATOL, rtol=0
    )
