"""MAGRPO training step: a node's G completions with their shared prompt run once, or G times.

Run from the repository root::

    python bench/magrpo_shared_prompt.py                  # SmolLM2-135M-Instruct, P=400 G=4 C=64
    python bench/magrpo_shared_prompt.py --prompt 250 --completions 2 --model tiny

At a tree node each agent samples G completions of one prompt, and in code
collaboration the prompt (problem, history, feedback) is most of each
sequence. The trainer's default (``share_prompts``) runs the prompt through the
model once and repeats its key/value cache for the G completions
(:func:`baselines.training.forward.shared_prompt_logprobs`); the alternative runs G padded
rows of prompt + completion (:func:`baselines.training.forward.forward_logprobs`). Both are
timed side by side (forward, MAGRPO's loss, backward), alternating, best of
``--repeat``; the script checks that the two give the same loss.

Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from baselines.magrpo.passes import completion_datum
from baselines.models import resolve_model
from baselines.samplers.base import Completion
from baselines.training.forward import forward_logprobs, shared_prompt_logprobs
from baselines.training.losses import reinforce_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompt", type=int, default=400, help="P: prompt tokens")
    parser.add_argument("--completions", type=int, default=4, help="G: completions per node")
    parser.add_argument("--length", type=int, default=64, help="C: tokens per completion")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(resolve_model(args.model), dtype=torch.float32)
    vocab = model.config.vocab_size
    prompt = tuple(torch.randint(0, vocab, (args.prompt,)).tolist())
    completions = [
        tuple(torch.randint(0, vocab, (args.length,)).tolist()) for _ in range(args.completions)
    ]
    advantages = [(-1.0) ** g * (1 + g) / args.completions for g in range(args.completions)]
    device = torch.device("cpu")

    def shared() -> float:
        logprobs, mask = shared_prompt_logprobs(model, prompt, completions, device)
        weighted = torch.tensor(advantages)[:, None] * mask
        loss = reinforce_loss(logprobs, weighted, mask, len(completions))
        loss.backward()
        return float(loss.detach())

    def separate() -> float:
        data = [
            completion_datum(Completion(prompt, c, (0.0,) * len(c), "", "eos"), a)
            for c, a in zip(completions, advantages, strict=True)
        ]
        logprobs, _, batch = forward_logprobs(model, data, "padded", device, actions_only=True)
        loss = reinforce_loss(logprobs, batch["advantages"], batch["weights"], len(completions))
        loss.backward()
        return float(loss.detach())

    layouts: dict[str, Callable[[], float]] = {"separate rows": separate, "shared prompt": shared}
    best = dict.fromkeys(layouts, float("inf"))
    losses: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, step in layouts.items():
            model.zero_grad(set_to_none=True)
            start = time.perf_counter()
            losses[name] = step()
            best[name] = min(best[name], time.perf_counter() - start)
    if abs(losses["separate rows"] - losses["shared prompt"]) > 1e-4:
        raise SystemExit(f"the two layouts disagree: {losses}")

    p, g, c = args.prompt, args.completions, args.length
    print(f"{args.model}: P={p} prompt tokens, G={g} completions of C={c} tokens, CPU")
    print(f"  {'layout':15s} {'tokens run':>10s} {'seconds':>8s}")
    print(f"  {'separate rows':15s} {g * (p + c):10d} {best['separate rows']:8.2f}")
    print(f"  {'shared prompt':15s} {p + g * c:10d} {best['shared prompt']:8.2f}")
    print(f"  speed-up: {best['separate rows'] / best['shared prompt']:.1f}x (same loss)")


if __name__ == "__main__":
    main()
