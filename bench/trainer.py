"""Trainer throughput: forward + backward tokens per second, packed vs padded batches.

Run from the repository root::

    python bench/trainer.py                   # SmolLM2-135M-Instruct, 8 Datums of 32-384 tokens
    python bench/trainer.py --model tiny --datums 64

It builds Datums of random lengths (like the observations and answers of a
debate batch), splits them into microbatches of at most ``--max-tokens`` tokens
the way :class:`baselines.is_trainer.trainer.ISTrainer` does, and times the trainer's
step (:func:`baselines.training.forward.forward_logprobs`, the importance-sampling loss,
backward) with each layout: padded, packed with transformers' block-diagonal
mask, packed with the segment-aware attention of
:mod:`baselines.training.attention`, and that with the vocabulary projection on
action tokens only (``actions_only``): the last is what the trainer runs.
Tokens per second count real tokens only, so padding shows as lost
throughput. The last column says how many tokens each layout makes the model
process.

Not a test: numbers depend on the machine. ``bench/trl_step.py`` compares the
trainer's whole optimizer step with TRL's GRPOTrainer.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from baselines.data.datums import trajectory_to_data
from baselines.models import resolve_model
from baselines.training.attention import segment_attention
from baselines.training.forward import Layout, forward_logprobs, split_microbatches
from baselines.training.losses import importance_sampling_loss
from baselines.types import Datum, Trajectory, Transition


def random_data(vocab: int, count: int, low: int, high: int, seed: int) -> list[Datum]:
    rng = np.random.default_rng(seed)
    data: list[Datum] = []
    for _ in range(count):
        length = int(rng.integers(low, high + 1))
        action = max(1, length // 4)
        prompt = rng.integers(0, vocab, size=length - action).tolist()
        turn = Transition(prompt, rng.integers(0, vocab, size=action).tolist(), [-1.0] * action)
        data.extend(trajectory_to_data(Trajectory([turn]), advantage=float(rng.normal())))
    return data


def step(
    model: torch.nn.Module, data: list[Datum], layout: Layout, max_tokens: int, actions_only: bool
) -> int:
    """One accumulated forward/backward over every microbatch; return tokens processed."""
    processed = 0
    for batch in split_microbatches([len(d) for d in data], max_tokens, layout):
        microbatch = [data[i] for i in batch]
        logprobs, _, inputs = forward_logprobs(
            model, microbatch, layout, torch.device("cpu"), actions_only=actions_only
        )
        loss = importance_sampling_loss(
            logprobs, inputs["sampling_logprobs"], inputs["advantages"], inputs["weights"]
        )
        loss.backward()
        processed += logprobs.numel()
    model.zero_grad(set_to_none=True)
    return processed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--datums", type=int, default=8)
    parser.add_argument("--min-length", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=384)
    parser.add_argument("--max-tokens", type=int, default=2048, help="tokens per microbatch")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(resolve_model(args.model), dtype=torch.float32)
    model.train()
    data = random_data(
        model.config.vocab_size, args.datums, args.min_length, args.max_length, seed=0
    )
    real = sum(len(d) for d in data)
    print(
        f"{args.model}: {len(data)} Datums, {real} tokens, {args.max_tokens} tokens per "
        f"microbatch, {torch.get_num_threads()} threads"
    )
    variants: list[tuple[str, Layout, bool]] = [
        ("padded", "padded", False),
        ("packed, mask", "packed", False),  # transformers' block-diagonal mask
        ("packed", "packed", False),  # segment-aware attention from here on
        ("packed, action logits", "packed", True),  # what the trainer runs
    ]
    results = {}
    for name, layout, actions_only in variants:
        if name == "packed":
            segment_attention(model)
        step(model, data[:2], layout, args.max_tokens, actions_only)  # warm up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            processed = step(model, data, layout, args.max_tokens, actions_only)
            times.append(time.perf_counter() - start)
        best = min(times)
        results[name] = real / best
        print(
            f"  {name:22s} {real / best:8.1f} tokens/s   ({best:.2f} s per step, "
            f"{processed} tokens processed)"
        )
    padded = results["padded"]
    print(
        f"  packed / padded: {results['packed, mask'] / padded:.2f}x with the mask, "
        f"{results['packed'] / padded:.2f}x with segment attention, "
        f"{results['packed, action logits'] / padded:.2f}x with action logits too"
    )


if __name__ == "__main__":
    main()
