"""The IS trainer's optimizer step against TRL GRPOTrainer's, on the same fixed batch.

Run from the repository root::

    python bench/trl_step.py                          # SmolLM2-135M-Instruct, 8 sequences
    python bench/trl_step.py --model tiny --groups 64
    python bench/trl_step.py --threads 1              # one thread (a CPU shared with other jobs)
    python bench/trl_step.py --device cuda --groups 16  # a GPU: both sides under bf16 autocast

The batch is GRPO-shaped: ``--groups`` prompts of random lengths, each with
``--group-size`` completions of random lengths, random tokens, sampling
logprobs and group-centred advantages. Generation is excluded: each side runs
one optimizer step on the batch, timed from its inputs to the end of
``optimizer.step()``, and the two sides alternate for ``--rounds`` rounds
(after one untimed step each), so a disturbance on a shared CPU hits both.

* *IS*: what :class:`~baselines.is_trainer.trainer.ISTrainer` does with its
  default settings: the layout chosen by
  :func:`~baselines.training.layout.choose_layout` (its attention switched),
  one Datum per sequence, microbatches of at most ``max_tokens_per_microbatch``
  tokens, the importance-sampling loss over action tokens with logits there
  only, gradient clipping at 1, AdamW.
* *TRL*: ``GRPOTrainer.compute_loss`` (its default ``dapo`` loss, its fused LM
  head and entropy) on the inputs its ``_generate_and_score_completions``
  would build (prompts left-padded and completions right-padded to the
  batch's longest, ``old_per_token_logps`` = the sampling logprobs), split into
  as many microbatches as the IS step has, then the same clipping and AdamW.
  Its model is a second copy of the same weights (TRL patches the forward).

On ``--device cuda`` both sides keep fp32 weights and run under bf16
autocast, as both trainers do on a GPU by default (the IS trainer's
``precision="auto"``, TRL's ``bf16=True``), and each timed step ends with
``torch.cuda.synchronize()``; peak GPU memory is printed instead of
resident memory.

Tokens per second count real tokens only (prompt + completion of each
sequence), so padding is lost throughput. The ratio IS / TRL is printed last.
``--only is`` (or ``trl``) runs one side alone and prints the process's peak
resident memory against its resident memory once the model is loaded: the
difference is one step's activations, gradients and AdamW state. Not a test:
numbers depend on the machine and its load, which is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from typing import Any, Literal

import numpy as np
import torch

from baselines.data.datums import trajectory_to_data
from baselines.is_trainer.config import ISTrainerConfig
from baselines.models import resolve_model
from baselines.training.forward import (
    Layout,
    forward_logprobs,
    split_microbatches,
    supports_logits_to_keep,
)
from baselines.training.layout import choose_layout
from baselines.training.losses import get_loss
from baselines.types import Datum, Trajectory, Transition

CPU = torch.device("cpu")

Sequence_ = tuple[list[int], list[int], list[float], float]
"""One sampled sequence: prompt tokens, completion tokens, sampling logprobs, advantage."""


def random_batch(
    vocab: int, groups: int, group_size: int, prompt: tuple[int, int], completion: tuple[int, int]
) -> list[Sequence_]:
    """GRPO-shaped random sequences: one prompt per group, ``group_size`` completions each."""
    rng = np.random.default_rng(0)
    batch = []
    for _ in range(groups):
        prompt_tokens = rng.integers(0, vocab, size=int(rng.integers(*prompt, endpoint=True)))
        rewards = rng.normal(size=group_size)
        for reward in rewards - rewards.mean():
            length = int(rng.integers(*completion, endpoint=True))
            tokens = rng.integers(0, vocab, size=length).tolist()
            logprobs = (-rng.exponential(2.0, size=length)).tolist()
            batch.append((prompt_tokens.tolist(), tokens, logprobs, float(reward)))
    return batch


class ISStep:
    """The IS trainer's step with its default settings, outside its run loop."""

    def __init__(
        self,
        model: Any,
        batch: list[Sequence_],
        max_tokens: int | None = None,
        device: torch.device = CPU,
        packing: Literal["auto", "packed", "padded"] | None = None,
        chunk: int | None = None,
    ) -> None:
        config = ISTrainerConfig()
        self.chunk = config.logprob_chunk_tokens if chunk is None else chunk
        self.model, self.device = model, device
        self.choice = choose_layout(model, device, packing or config.packing)
        self.layout: Layout = self.choice.layout
        self.max_tokens = max_tokens or config.max_tokens_per_microbatch
        self.actions_only = supports_logits_to_keep(model)
        self.loss_fn = get_loss(config.loss, **config.loss_kwargs)
        self.max_grad_norm = config.max_grad_norm
        self.optimizer = torch.optim.AdamW(
            model.parameters(),
            lr=config.learning_rate,
            betas=config.adam_betas,
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
        )
        self.data: list[Datum] = []
        for prompt, tokens, logprobs, advantage in batch:
            turn = Transition(prompt, tokens, logprobs)
            self.data.extend(trajectory_to_data(Trajectory([turn]), advantage=advantage))
        self.microbatches = split_microbatches(
            [len(d) for d in self.data],
            self.max_tokens,
            self.layout,
            longest_first=self.layout == "padded",
        )

    def __call__(self) -> None:
        """One optimizer step on the whole batch."""
        model, device = self.model, self.device
        denominator = float(sum(d.weights.sum() for d in self.data))
        for indices in self.microbatches:
            logprobs, _, inputs = forward_logprobs(
                model,
                [self.data[i] for i in indices],
                self.layout,
                device,
                actions_only=self.actions_only,
                chunk=self.chunk,
            )
            loss = self.loss_fn(
                logprobs, inputs["sampling_logprobs"], inputs["advantages"], inputs["weights"]
            )
            (loss / denominator).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


class TRLStep:
    """GRPOTrainer's loss, backward and an AdamW step on TRL-shaped inputs."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        batch: list[Sequence_],
        microbatches: int,
        folder: str,
        device: torch.device = CPU,
    ) -> None:
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        config = ISTrainerConfig()  # the same optimizer settings as the IS side
        args = GRPOConfig(
            output_dir=folder,
            bf16=device.type == "cuda",
            use_cpu=device.type == "cpu",
            report_to="none",
            per_device_train_batch_size=2,
            num_generations=2,
            max_completion_length=max(len(s[1]) for s in batch),
            learning_rate=config.learning_rate,
            save_strategy="no",
            disable_tqdm=True,
        )
        self.trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
            train_dataset=Dataset.from_dict({"prompt": ["."] * 2}),
            args=args,
        )
        trained: Any = self.trainer.model  # with TRL's fused LM head
        trained.train()
        self.model = trained
        self.max_grad_norm = config.max_grad_norm
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=config.learning_rate,
            betas=config.adam_betas,
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
        )
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        rows = len(batch)
        width_p, width_c = max(len(s[0]) for s in batch), max(len(s[1]) for s in batch)
        prompt_ids = torch.full((rows, width_p), pad)
        prompt_mask = torch.zeros((rows, width_p), dtype=torch.long)
        completion_ids = torch.full((rows, width_c), pad)
        completion_mask = torch.zeros((rows, width_c), dtype=torch.long)
        old_logps = torch.zeros((rows, width_c))
        for row, (prompt, tokens, logprobs, _) in enumerate(batch):
            prompt_ids[row, width_p - len(prompt) :] = torch.tensor(prompt)
            prompt_mask[row, width_p - len(prompt) :] = 1
            completion_ids[row, : len(tokens)] = torch.tensor(tokens)
            completion_mask[row, : len(tokens)] = 1
            old_logps[row, : len(tokens)] = torch.tensor(logprobs)
        advantages = torch.tensor([s[3] for s in batch])
        # dapo divides a microbatch's sum by num_items * accumulation steps / steps_per_generation.
        self.trainer.current_gradient_accumulation_steps = microbatches
        items = torch.tensor(float(completion_mask.sum()) / microbatches)
        self.inputs = [
            {
                "prompt_ids": prompt_ids[part],
                "prompt_mask": prompt_mask[part],
                "completion_ids": completion_ids[part],
                "completion_mask": completion_mask[part],
                "advantages": advantages[part],
                "old_per_token_logps": old_logps[part],
                "num_items_in_batch": items,
            }
            for part in np.array_split(np.arange(rows), microbatches)
        ]
        self.inputs = [
            {key: value.to(device) for key, value in inputs.items()} for inputs in self.inputs
        ]
        self.processed = rows * (width_p + width_c)

    def __call__(self) -> None:
        """One optimizer step on the whole batch."""
        for inputs in self.inputs:
            self.trainer.compute_loss(self.model, inputs).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def resident_gib(device: torch.device = CPU) -> tuple[float, float]:
    """Memory now and at its peak, in GiB: the process's resident set, or the GPU's tensors."""
    import resource

    if device.type == "cuda":
        return torch.cuda.memory_allocated(device) / 2**30, (
            torch.cuda.max_memory_allocated(device) / 2**30
        )

    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**30, peak_kib / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--prompt-length", type=int, nargs=2, default=(96, 448))
    parser.add_argument("--completion-length", type=int, nargs=2, default=(32, 224))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch.set_num_threads; 0 (the trainers' default) keeps torch's, one per core",
    )
    parser.add_argument("--only", choices=["is", "trl"], help="one side alone, for its memory")
    parser.add_argument(
        "--packing", choices=["auto", "packed", "padded"], help="IS layout (default: the trainer's)"
    )
    parser.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="cuda: bf16 autocast, fp32 weights"
    )
    parser.add_argument(
        "--max-tokens", type=int, help="IS tokens per microbatch (default: the trainer's)"
    )
    parser.add_argument(
        "--logprob-chunk-tokens",
        type=int,
        help="IS vocabulary projection chunk (default: the trainer's; 0: full logits)",
    )
    args = parser.parse_args()

    import transformers
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    path = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    sides = ["is", "trl"] if args.only is None else [args.only]
    load = AutoModelForCausalLM.from_pretrained
    device = torch.device(args.device)
    models = {side: load(path, dtype=torch.float32).to(device) for side in sides}
    vocab = next(iter(models.values())).config.vocab_size
    batch = random_batch(
        vocab, args.groups, args.group_size, args.prompt_length, args.completion_length
    )
    real = sum(len(p) + len(c) for p, c, _, _ in batch)
    print(
        f"{args.model}: {len(batch)} sequences ({args.groups} groups of {args.group_size}), "
        f"{real} real tokens, "
        + (
            f"fp32 weights under bf16 autocast on {torch.cuda.get_device_name(device)}; "
            if device.type == "cuda"
            else f"fp32, {torch.get_num_threads()} threads; "
        )
        + f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"trl {trl.__version__}"
    )
    # The IS side's microbatch count fixes TRL's; the probe runs even with --only trl.
    is_model = models.get("is") or load(path, dtype=torch.float32).to(device)
    is_step = ISStep(
        is_model, batch, args.max_tokens, device, args.packing, args.logprob_chunk_tokens
    )
    print(
        f"  IS:  {is_step.layout}, {len(is_step.microbatches)} microbatches of at most "
        f"{is_step.max_tokens} tokens, logprob chunks of {is_step.chunk or 'all'} tokens; "
        f"probe: {is_step.choice.probe}"
        + (f" ({is_step.choice.reason})" if is_step.choice.reason else "")
    )
    steps: dict[str, Any] = {}
    if "is" in sides:
        steps["IS"] = is_step
    with tempfile.TemporaryDirectory() as folder:
        if "trl" in sides:
            steps["TRL"] = TRLStep(
                models["trl"], tokenizer, batch, len(is_step.microbatches), folder, device
            )
            print(
                f"  TRL: {len(steps['TRL'].inputs)} microbatches, {steps['TRL'].processed} "
                f"tokens with padding ({steps['TRL'].processed / real:.2f}x the real ones)"
            )
        loaded, _ = resident_gib(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if device.type == "cuda"
            else contextlib.nullcontext()
        )

        def timed(step: Any) -> float:
            start = time.perf_counter()
            with autocast:
                step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            return time.perf_counter() - start

        print(f"  load average before: {os.getloadavg()[0]:.2f}", flush=True)
        for step in steps.values():
            timed(step)  # warm up: first allocations, AdamW's state, kernels
        ratios = []
        for round_ in range(args.rounds):
            order = list(steps.items())
            if round_ % 2:
                order.reverse()  # neither side always runs first
            seconds: dict[str, float] = {}
            for name, step in order:
                seconds[name] = timed(step)
            line = ", ".join(
                f"{name} {real / t:7.1f} tokens/s ({t:.2f} s)" for name, t in seconds.items()
            )
            if len(seconds) == 2:
                ratios.append(seconds["TRL"] / seconds["IS"])
                line += f", IS / TRL {ratios[-1]:.2f}x"
            print(f"  round {round_ + 1}: {line}", flush=True)
    _, peak = resident_gib(device)
    print(f"  load average after: {os.getloadavg()[0]:.2f}")
    print(
        f"  {'GPU' if device.type == 'cuda' else 'resident'} memory: {loaded:.2f} GiB "
        f"with the models loaded, peak {peak:.2f} GiB "
        f"(+{peak - loaded:.2f} GiB: {' and '.join(steps)} steps' activations, gradients, "
        "AdamW state)"
    )
    if ratios:
        spread = f"; {min(ratios):.2f}x to {max(ratios):.2f}x" if len(ratios) > 1 else ""
        median = statistics.median(ratios)
        print(f"IS / TRL tokens/s: {median:.2f}x (median of {len(ratios)} rounds{spread})")


if __name__ == "__main__":
    main()
