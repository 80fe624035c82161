r"""Debate self-play with TRL's GRPOTrainer, then a report with plots and transcripts.

What it shows:

* one debate per group: TRL's ``num_generations`` copies of a data-set row (it
  shows the question) are the debate's agents, and generation ``g`` is
  ``agent_g``'s whole multi-turn trajectory (its answers are trained tokens,
  what the others said in between is masked context);
* the reward is the agent's pairwise reward from the votes (leave-one-out win
  rate; -1 for an answer that breaks the XML contract), centred within the
  debate by TRL with ``scale_rewards="none"`` (the mean baseline of the Tinker
  Cookbook's multi-agent debate recipe);
* the Python API: :class:`~baselines.grpo.GRPORunConfig` ->
  :func:`~baselines.grpo.run.build_trainer` -> ``trainer.train()``, then
  :func:`~baselines.report.write_report` for the plots and the transcript
  viewer (the first debate of every step).

SmolLM2-135M rarely keeps to the debate's XML contract: on CPU most debates
end at the first answer with a parse error (reward -1 for its author, 0 for
the agents who never spoke, so GRPO pushes that answer down), and the
transcripts show why. ``--on-parse-error mask`` lets a debate go on past
broken answers (masked and unrewarded) to see whole debates; a bigger model
debates for real.

CPU, SmolLM2-135M-Instruct (the default)::

    python examples/grpo_debate.py

A real run on a GPU (bf16, and TRL's colocated vLLM engine when vLLM is installed)::

    python examples/grpo_debate.py --model Qwen/Qwen2.5-1.5B-Instruct --steps 200 \
        --questions-per-step 8 --max-tokens 384 --rounds 3 --save-model

Measured: the defaults take about 1.5 minutes on a 2-core CPU (97 s, load average 2.1).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL

from baselines.grpo import GRPORunConfig
from baselines.grpo.run import build_trainer, save_final_model
from baselines.models import DEFAULT_MODEL
from baselines.report import first_and_last, write_report
from llm_envs.command_line import CommandParser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = CommandParser(description="Debate self-play with TRL GRPO.")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model id, folder, or 'tiny'")
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps")
    parser.add_argument("--questions-per-step", type=int, default=1, help="debates per step")
    parser.add_argument("--agents", type=int, default=3, help="debaters (= num_generations)")
    parser.add_argument("--rounds", type=int, default=2, help="most rounds per debate")
    parser.add_argument("--max-tokens", type=int, default=128, help="most tokens per answer")
    parser.add_argument(
        "--on-parse-error",
        default="penalize",
        choices=["penalize", "mask"],
        help="a broken answer ends the debate with -1 (the debate recipe), or is masked",
    )
    parser.add_argument("--output-dir", default="runs/grpo_debate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-model", action="store_true", help="save the trained model too")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    config = GRPORunConfig(
        model=args.model,
        env="debate",
        env_kwargs={
            "num_agents": args.agents,
            "max_rounds": args.rounds,
            "reward": "win_rate",  # leave-one-out win rate of the pairwise votes
            "on_parse_error": args.on_parse_error,
        },
        items_per_step=args.questions_per_step,
        max_steps=args.steps,
        max_tokens=args.max_tokens,
        scale_rewards="none",  # the debate's mean reward is the baseline, no std division
        learning_rate=1e-5,
        temperature=0.7,  # a small model at temperature 1 writes mostly noise
        seed=args.seed,
        output_dir=args.output_dir,
        save_episodes=1,  # the first debate of each step, for the transcript viewer
        save_model=args.save_model,
    )
    trainer = build_trainer(config)
    trainer.train()
    if config.save_model:
        save_final_model(trainer, config.output_dir)

    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    report = write_report(config.output_dir)
    steps = [{"reward": r} for r in rewards]
    print(f"mean reward, first step -> last step: {first_and_last(steps, 'reward')}")
    print(f"report: {report}")


if __name__ == "__main__":
    main()
