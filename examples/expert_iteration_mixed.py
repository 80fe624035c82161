r"""Expert iteration with mixed search strategies: sample with help, train without it.

An expert-iteration plan for the Tinker Cookbook with the
importance-sampling trainer. Every problem is one group, played once per slot
of the strategy mix:

- ``iid``: the plain problem; sampled and trained on the same chat.
- ``answer_hint``: the reference answer is shown while sampling, removed for training.
- ``prompt_augmentation``: extra instructions while sampling, none for training.
- ``two_turn_feedback``: attempt 1, the verifier's feedback, attempt 2;
  attempt 2 is trained without the feedback, attempt 1 gets loss weight 0.

The completion is kept verbatim; only its context is swapped
(``info["training_messages"]``), and the importance ratio corrects for the
help it was sampled with. Rewards are centred within each problem's group,
then each trajectory's advantage is scaled by ``w_s / n_s`` (``--weights``), so
each strategy weighs in by its weight however many samples it has. After
training the script prints one context-swapping episode as the trainer saw
it, and writes the report.

CPU, SmolLM2-135M-Instruct on one-digit sums with a 32-token budget (the
defaults: 4 iterations of 8 problems x 4 episodes, learning rate 5e-5):

    python examples/expert_iteration_mixed.py

It learns: the initial model often explains at length and runs out of tokens
before its answer; the reward for a correct final answer teaches it to answer
briefly. Measured on 2 cores with vLLM's CPU build (seed 0, about 3.5 minutes):
``iid`` reward 0.19 -> 0.88 over the four iterations, all strategies 0.25 -> 0.75,
held-out ``iid`` accuracy 0/4 -> 4/4.

GPU, GSM8K with a bigger model (the data must be available, see docs/tasks.md):

    python examples/expert_iteration_mixed.py --model Qwen/Qwen2.5-1.5B-Instruct \
        --task gsm8k --iterations 50 --groups 32 --max-tokens 512 --eval-groups 64 \
        --mix iid=4 prompt_augmentation=2 answer_hint=2 two_turn_feedback=2 \
        --learning-rate 1e-6 --output-dir runs/expert_iteration_qwen

What to look at: ``env/{strategy}/reward/total`` (help raises it while sampling),
``eval/correct`` (held-out ``iid`` accuracy, the number that has to rise),
``strategy/{strategy}/mean_log_ratio`` (how far the training context moves the
likelihood of a completion), and the transcripts (each turn shows the prompt it
was sampled on and, where swapped, the ``training_messages``).
"""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from baselines.is_trainer.config import ISTrainerConfig
from baselines.is_trainer.trainer import train
from baselines.models import DEFAULT_MODEL
from baselines.report import EPISODES_DIR, first_and_last, load_metrics, write_report
from llm_envs.command_line import CommandParser

DEFAULT_MIX = {"iid": 2, "answer_hint": 1, "two_turn_feedback": 1}
# Help makes samples less like what the model does alone: hinted ones weigh half.
DEFAULT_WEIGHTS = {
    "iid": 1.0,
    "prompt_augmentation": 0.5,
    "answer_hint": 0.5,
    "two_turn_feedback": 1.0,
}


def strategy_setting(cast: Callable[[str], Any]) -> Callable[[str], tuple[str, Any]]:
    """The argparse type of ``--mix`` and ``--weights``: ``"iid=2"`` -> ``("iid", cast("2"))``."""

    def parse(text: str) -> tuple[str, Any]:
        name, _, value = text.partition("=")
        try:
            return name, cast(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected strategy={cast.__name__}, e.g. iid=2, got {text!r}"
            ) from None

    return parse


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="HF id, folder, or 'tiny'")
    parser.add_argument("--task", choices=["arithmetic", "gsm8k"], default="arithmetic")
    parser.add_argument("--max-digits", type=int, default=1, help="arithmetic operand digits")
    parser.add_argument(
        "--operations", nargs="+", default=["+"], help="arithmetic operations, e.g. + - *"
    )
    parser.add_argument("--iterations", type=int, default=4, help="training iterations")
    parser.add_argument("--groups", type=int, default=8, help="problems per iteration")
    parser.add_argument("--max-tokens", type=int, default=32, help="most tokens per attempt")
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument(
        "--mix",
        nargs="+",
        type=strategy_setting(int),
        default=list(DEFAULT_MIX.items()),
        help="episodes per strategy in every group, e.g. iid=2 answer_hint=1",
    )
    parser.add_argument(
        "--weights",
        nargs="+",
        type=strategy_setting(float),
        default=list(DEFAULT_WEIGHTS.items()),
        help="mixture weight w_s per strategy, e.g. iid=1 answer_hint=0.5",
    )
    parser.add_argument("--eval-groups", type=int, default=4, help="held-out iid problems")
    parser.add_argument("--sampler", choices=["auto", "vllm", "transformers"], default="auto")
    parser.add_argument("--output-dir", default="runs/expert_iteration_mixed")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> ISTrainerConfig:
    """The run as an :class:`ISTrainerConfig`: every field is documented there."""
    mix = dict(args.mix)
    return ISTrainerConfig(
        model=args.model,
        env="expert_iteration",
        task=args.task,
        task_kwargs=(
            {"max_digits": args.max_digits, "operations": list(args.operations)}
            if args.task == "arithmetic"
            else {}
        ),
        strategy_mix=mix,
        strategy_weights=dict(args.weights),
        groups_per_batch=args.groups,
        num_iterations=args.iterations,
        max_tokens=args.max_tokens,
        learning_rate=args.learning_rate,
        sampler=args.sampler,
        # Evaluating every `iterations` iterations means: before the first and after the last.
        eval_every=args.iterations if args.eval_groups else 0,
        eval_groups=args.eval_groups,
        save_every=0,  # one checkpoint, after the last iteration
        save_episodes=args.groups * sum(mix.values()),  # every episode goes into the report
        seed=args.seed,
        output_dir=args.output_dir,
    )


def short(text: str, width: int = 150) -> str:
    return textwrap.shorten(" / ".join(text.splitlines()), width, placeholder=" ...") or "''"


def show_messages(label: str, messages: list[dict[str, str]] | None) -> None:
    print(f"    {label}:")
    if messages is None:
        print("      (the same messages)")
    for message in messages or []:
        print(f"      {message['role']}: {short(message['content'])}")


def show_context_swap(run_dir: Path, iteration: int = 0) -> None:
    """Print one episode of the iteration whose context was swapped, turn by turn."""
    path = run_dir / EPISODES_DIR / f"iter_{iteration:05d}.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def swaps(record: dict[str, Any]) -> bool:
        return any("training_messages" in turn["details"] for turn in record["turns"])

    # two_turn_feedback first: it shows both a swapped turn and a zero-weight one.
    candidates = sorted(
        filter(swaps, records), key=lambda r: r["summary"]["strategy"] != "two_turn_feedback"
    )
    if not candidates:
        print("no episode with a context swap: put a strategy other than iid in --mix")
        return
    record = candidates[0]
    print(f"\nContext swap in one episode of iteration {iteration}: {record['title']}")
    for turn in record["turns"]:
        details = turn["details"]
        print(f"  {turn['agent']} attempt {turn['round']}, loss_weight {details['loss_weight']}")
        show_messages("sampled on", turn["prompt"])
        show_messages("trained on", details.get("training_messages"))
        print(f"    completion (the same in both): {short(turn['text'])}")


def main(argv: Sequence[str] | None = None) -> None:
    config = build_config(parse_args(argv))
    metrics_path = train(config)
    rows = load_metrics(metrics_path)
    index = write_report(config.output_dir)

    show_context_swap(Path(config.output_dir))
    # The plan's stratified average: each trajectory's advantage is scaled by w_s / n_s.
    weights = config.strategy_weights or {}
    print("\nadvantage scale w_s / n_s per strategy (n_s: its trajectories in a batch):")
    for strategy, count in config.strategy_mix.items():
        n_s = count * config.groups_per_batch
        if n_s:
            print(
                f"  {strategy:20s} {weights[strategy]:.2f} / {n_s} = {weights[strategy] / n_s:.3f}"
            )
    print("\nreward curves, first -> last iteration:")
    for strategy in config.strategy_mix:
        print(f"  {strategy:20s} {first_and_last(rows, f'env/{strategy}/reward/total')}")
    print(f"  {'all':20s} {first_and_last(rows, 'env/all/reward/total')}")
    if config.eval_every:
        print(f"held-out iid accuracy (eval/correct): {first_and_last(rows, 'eval/correct')}")
    print(f"report: {index}")


if __name__ == "__main__":
    main()
