r"""Debate self-play with the importance-sampling trainer, then a report.

One model plays every debater, as in the Tinker Cookbook's multi-agent debate
recipe. Each iteration it plays ``--groups`` debates with its
current weights; every agent gets its pairwise reward (the leave-one-out win
rate of the votes the others cast, or win minus loss); rewards are centred
within each debate; one importance-sampling step follows.
At the end :func:`baselines.report.write_report` turns the run folder into
metric plots and a transcript viewer (per round and per agent: prompt, parsed
fields, votes, parse errors, raw output).

CPU, SmolLM2-135M-Instruct. On its own it never writes the five-tag answer
format, let alone a vote. So the defaults debate one-digit sums in one round
(3 agents: the third compares the first two), start with 6 supervised steps
imitating a scripted debater that answers wrong half the time and votes
answers that agree with its own above those that do not
(``--warm-start-steps``, ``--warm-start-mistake-rate``), and add opt-in
shaping: partial credit for each part of the format written right, for a
correct sum, for casting a valid vote and for votes that agree with the
reference (``shaping/...`` in the metrics, never mixed into the win rate).
Each debater knows the others under numbers drawn for it per debate
(``--shuffle-labels``), so a judge that votes for a number favours no seat.
Over seeds 0, 1 and 2 the model votes in 42 to 91% of the answers that can
vote at the first iteration and in 25 to 100% later (the untrained model:
never); 56 of its 107 strict votes favour the lower seat (0.52; 0.45, 0.74
and 0.51 per seed); and evaluation parse errors against the untrained model
fall from 1.000 to 0.000 to 0.083. It does not learn to judge the sums: its
votes agree with the reference in 0 to 67% of the answers, with no upward
trend in two seeds of three, and it votes by the numbers it reads (the
labels make that pay no seat). On a CPU with bf16 arithmetic the run trains
and samples in bf16 (``--precision``): 6.5 to 8.5 minutes on 2 quiet cores
with vLLM (docs/results.md has the tables, and the earlier two-round setting).
On a CPU it prints first which precision and sampler it chose, why, and how
long the main job took on such a CPU where that was measured:

    python examples/debate_self_play.py

GPU, a real run (vLLM samples when it is installed; ``--eval-groups`` plays the
trained model against its initial weights in every role, before and after):

    python examples/debate_self_play.py --model Qwen/Qwen2.5-1.5B-Instruct \
        --iterations 50 --groups 32 --rounds 3 --max-tokens 512 --eval-groups 16 \
        --learning-rate 1e-6 --output-dir runs/debate_qwen

What to look at: ``env/all/turn/voted`` (votes cast, of the answers that
could vote), ``env/all/turn/vote_agreement`` (votes that agree with the
reference), ``env/all/turn/vote_lower_seat`` (position bias: 0.5 is none),
``env/all/pairwise_reward`` (the win rate), ``env/all/turn/parse_error``,
``env/all/turn/solution_correct``, ``eval/...`` against the initial model,
and the transcripts. ``--warm-start-steps 0 --shaping 0 0 --shaping-judge 0
--shaping-vote 0 --no-shuffle-labels --rounds 3 --task default`` is the
recipe's debate as it is.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
from collections.abc import Sequence
from typing import Any

from baselines.is_trainer.config import ISTrainerConfig
from baselines.is_trainer.trainer import train
from baselines.models import DEFAULT_MODEL
from baselines.precision import BF16_CPU_FLAGS, cpu_flags, fastest_precision
from baselines.report import first_and_last, load_metrics, write_report
from llm_envs.command_line import CommandParser


def torch_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="HF id, folder, or 'tiny'")
    parser.add_argument("--iterations", type=int, default=5, help="training iterations")
    parser.add_argument(
        "--groups",
        type=int,
        default=12,
        help="questions per iteration, each debated --debates-per-question times",
    )
    parser.add_argument(
        "--debates-per-question",
        type=int,
        default=1,
        help="debates of each question, rewards centred over them all (the later seats of one "
        "debate mostly repeat the first answer, so one debate alone rarely tells a correct sum "
        "from a wrong one)",
    )
    parser.add_argument("--agents", type=int, default=3, help="debaters per debate")
    parser.add_argument("--rounds", type=int, default=1, help="most rounds per debate")
    parser.add_argument("--max-tokens", type=int, default=128, help="most tokens per answer")
    parser.add_argument("--reward", choices=["win_rate", "win_minus_loss"], default="win_rate")
    parser.add_argument(
        "--task",
        choices=["arithmetic", "gsm8k", "default"],
        default="arithmetic",
        help="questions: one-digit sums (arithmetic), GSM8K, or the env's built-in ones",
    )
    parser.add_argument(
        "--shaping",
        type=float,
        nargs=2,
        default=(0.5, 0.5),
        metavar=("CONTRACT", "CORRECT"),
        help="opt-in shaping weights: partial credit for the answer format and for a correct "
        "solution (0 0: the recipe's reward alone)",
    )
    parser.add_argument(
        "--shaping-judge",
        type=float,
        default=0.5,
        metavar="JUDGE",
        help="opt-in shaping weight of the share of an answer's votes that agree with the "
        "reference answer (0: votes earn only what the recipe pays, nothing)",
    )
    parser.add_argument(
        "--shaping-vote",
        type=float,
        default=0.5,
        metavar="VOTE",
        help="opt-in shaping weight of casting a valid vote, for answers that had two others "
        "to compare (0: none)",
    )
    parser.add_argument(
        "--on-parse-error",
        choices=["penalize", "mask"],
        default="penalize",
        help="a broken answer: -1 and the debate ends (penalize, the recipe's), or no reward "
        "and no training weight, the debate going on (mask)",
    )
    parser.add_argument(
        "--shuffle-answers",
        action="store_true",
        help="show the other answers of each round in an order drawn per prompt, not by seat, "
        "so judges cannot learn to vote by position",
    )
    parser.add_argument(
        "--shuffle-labels",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="each debater knows the others under numbers drawn for it per debate, its votes "
        "moved back to seats, so a judge that votes for a number favours no seat",
    )
    parser.add_argument(
        "--warm-start-steps",
        type=int,
        default=6,
        help="supervised steps imitating a scripted debater before training (0: none)",
    )
    parser.add_argument(
        "--warm-start-debates",
        type=int,
        default=4,
        help="debates the scripted debater plays for the warm start (6 answers each at the "
        "defaults; 4 answers make one step)",
    )
    parser.add_argument(
        "--warm-start-broken-rate",
        type=float,
        default=0.0,
        metavar="RATE",
        help="share of warm-start debates with one seat whose answers break the contract, "
        "so the scripted judges show real answers voted above broken ones (0: none)",
    )
    parser.add_argument(
        "--warm-start-mistake-rate",
        type=float,
        default=0.5,
        metavar="RATE",
        help="chance that a scripted debater answers the reference plus one, so warm-start "
        "debates hold answers that differ and votes that are not ties",
    )
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument(
        "--eval-groups",
        type=int,
        default=4,
        help="questions evaluated against the initial model before and after training (0: none)",
    )
    parser.add_argument("--sampler", choices=["auto", "vllm", "transformers"], default="auto")
    parser.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16"],
        default=fastest_precision(),
        help="training and sampling precision (default here: bf16 on a CPU with bf16 "
        "arithmetic, about twice as fast; auto elsewhere: bf16 on a GPU, fp32 on a CPU)",
    )
    parser.add_argument("--output-dir", default="runs/debate_self_play")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> ISTrainerConfig:
    """The run as an :class:`ISTrainerConfig`: every field is documented there."""
    env_kwargs: dict[str, Any] = {
        "num_agents": args.agents,
        "max_rounds": args.rounds,
        "reward": args.reward,  # one group is one debate; the reward wrapper is an env argument
    }
    for option in ("shuffle_answers", "shuffle_labels"):
        if getattr(args, option):
            env_kwargs[option] = True
    if args.on_parse_error != "penalize":
        env_kwargs["on_parse_error"] = args.on_parse_error
    contract, correct = args.shaping
    if contract or correct or args.shaping_judge or args.shaping_vote:
        env_kwargs["shaping"] = {"contract": contract, "correct": correct}
        for term, weight in (("judge", args.shaping_judge), ("vote", args.shaping_vote)):
            if weight:
                env_kwargs["shaping"][term] = weight
    return ISTrainerConfig(
        model=args.model,
        env="debate",
        env_kwargs=env_kwargs,
        task=args.task,
        task_kwargs={"max_digits": 1, "operations": ["+"]} if args.task == "arithmetic" else {},
        groups_per_batch=args.groups,
        debates_per_question=args.debates_per_question,
        num_iterations=args.iterations,
        max_tokens=args.max_tokens,
        learning_rate=args.learning_rate,
        warm_start_steps=args.warm_start_steps,
        warm_start_groups=args.warm_start_debates,
        warm_start_datums=4,
        warm_start_broken_rate=args.warm_start_broken_rate,
        warm_start_mistake_rate=args.warm_start_mistake_rate,
        sampler=args.sampler,
        precision=args.precision,
        # Evaluating every `iterations` iterations means: before the first and after the last.
        eval_every=args.iterations if args.eval_groups else 0,
        eval_groups=args.eval_groups,
        save_every=0,  # one checkpoint, after the last iteration
        # every debate's transcript goes into the report
        save_episodes=args.groups * args.debates_per_question,
        seed=args.seed,
        output_dir=args.output_dir,
    )


# The main job's measured durations (docs/results.md), by training precision and sampler,
# on 2 quiet cores of a CPU of that kind; None where no run measured it.
MEASURED_MINUTES: dict[tuple[str, str], str | None] = {
    ("bf16", "vllm"): "6.5 to 8.5 minutes (2 quiet cores with bf16 arithmetic)",
    (
        "fp32",
        "vllm",
    ): "over 23 minutes (2 quiet AVX2-only cores: stopped at 23 in its last evaluation)",
    ("bf16", "transformers"): None,
    ("fp32", "transformers"): None,
}


MAIN_JOB_SIZE = (
    *("model", "iterations", "groups", "debates_per_question", "agents", "rounds", "max_tokens"),
    "eval_groups",
)
"""The flags that size the main job: its measured durations hold at their defaults."""


def plan(
    precision: str, sampler: str, flags: frozenset[str], vllm: bool, cores: int, sized: bool = True
) -> str:
    """The line the main job prints at start: its precision and sampler, why, and how long.

    ``sized``: the run has the main job's size (:data:`MAIN_JOB_SIZE` at their defaults),
    the only size whose duration was measured.
    """
    bf16 = precision == "bf16"
    has = sorted(flags & BF16_CPU_FLAGS)
    if bf16:
        why = f"this CPU has {', '.join(has)}" if has else "as asked, without bf16 arithmetic: slow"
    else:
        why = "as asked" if has else "no bf16 arithmetic on this CPU (avx512_bf16 or amx_bf16)"
    kind = sampler if sampler != "auto" else ("vllm" if vllm else "transformers")
    if kind == "vllm":
        sampled = "vLLM sampler (installed)"
    elif sampler == "auto":
        sampled = (
            "transformers sampler (vLLM not installed: sampling about 3x slower; see the README)"
        )
    else:
        sampled = "transformers sampler (as asked)"
    expected = MEASURED_MINUTES[("bf16" if bf16 else "fp32", kind)]
    if not sized:
        how_long = "duration not measured for these settings"
    elif expected:
        how_long = f"expected {expected} on {cores} cores"
    else:
        how_long = "duration not measured for this choice"

    return f"main job: {'bf16' if bf16 else 'fp32'} ({why}), {sampled}; {how_long}"


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    config = build_config(args)
    if not torch_cuda():
        vllm = importlib.util.find_spec("vllm") is not None
        defaults = vars(parse_args([]))
        sized = all(getattr(args, k) == defaults[k] for k in MAIN_JOB_SIZE)
        cores = os.cpu_count() or 1
        print(plan(args.precision, args.sampler, cpu_flags(), vllm, cores, sized), flush=True)
    metrics_path = train(config)
    rows = load_metrics(metrics_path)
    index = write_report(config.output_dir)

    # The report's names: turn/voted is the share of answers that could vote and did,
    # turn/vote_agreement the share of their votes that agree with the reference, and
    # turn/vote_lower_seat the share of strict votes for the lower seat (position bias).
    print(
        "\niteration  reward  parse_error  correct  voted  agreement  lower_seat  pairwise_reward"
    )
    for row in rows:
        if "env/all/reward/total" in row:  # the final evaluation line has eval metrics only
            print(
                f"{row['iteration']:9d}  {row['env/all/reward/total']:6.3f}  "
                f"{row.get('env/all/turn/parse_error', math.nan):11.3f}  "
                f"{row.get('env/all/turn/solution_correct', math.nan):7.3f}  "
                f"{row.get('env/all/turn/voted', math.nan):5.3f}  "
                f"{row.get('env/all/turn/vote_agreement', math.nan):9.3f}  "
                f"{row.get('env/all/turn/vote_lower_seat', math.nan):10.3f}  "
                f"{row.get('env/all/pairwise_reward', math.nan):15.3f}"
            )
    print(f"reward curve, first -> last: {first_and_last(rows, 'env/all/reward/total')}")
    print(f"parse errors, first -> last: {first_and_last(rows, 'env/all/turn/parse_error')}")
    if config.eval_every:
        # The trained model in each role against the initial model, before and after.
        for key, what in (("parse_error", "parse errors"), ("solution_correct", "correct")):
            print(f"eval {what} vs the initial model: {first_and_last(rows, 'eval/' + key)}")
        print(f"eval reward vs the initial model: {first_and_last(rows, 'eval/reward/total')}")
        # Its pairwise reward there stays 0: the untrained seats, who would vote on it, never do.
        print(f"eval votes cast (voted): {first_and_last(rows, 'eval/voted')}")
    print(f"report: {index}")


if __name__ == "__main__":
    main()
