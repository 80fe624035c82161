r"""Expert iteration with TRL's GRPOTrainer: attempt, feedback, attempt, in one completion.

What it shows:

* the ``two_turn_feedback`` strategy of an expert-iteration plan for the
  Tinker Cookbook on arithmetic problems: the solver answers, the
  verifier's feedback follows, the solver answers again;
  ``--generations`` episodes per problem form TRL's group (the family's own
  training plan, through the one rollout every family goes through), and the
  reward is attempt 2's score (1.0 when correct);
* how a multi-turn episode becomes one TRL completion, with ``env_mask``
  keeping everything but attempt 2 out of the loss. One completion, with
  SmolLM2's chat template::

      prompt      <|im_start|>system\nYou are a helpful AI assistant named SmolLM,
                  trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2 * 5?
                  \n\nPut your final answer within \boxed{}.<|im_end|>\n
                  <|im_start|>assistant\n
      env_mask 0  The answer is \boxed{3}.<|im_end|>        attempt 1 (loss weight 0)
      env_mask 0  \n<|im_start|>user\nFeedback on your answer:\nYour final
                  answer, 3, is wrong.\n\nReview your answer above and give
                  your final answer ...<|im_end|>\n<|im_start|>assistant\n
      env_mask 1  2 * 5 = 10, so the answer is \boxed{10}.<|im_end|>   attempt 2

  The script prints such a completion from the last step, run by run.

What TRL cannot do here: the context swap. The plan trains attempt 2 *without*
the feedback in its context (``info["training_messages"]``), so the model
learns to get it right unaided. TRL's ``GRPOTrainer`` has one sequence per
completion and trains each token on the context it was sampled on, so here
attempt 2 is trained with the feedback in context (masked, but attended to):
multi-turn RL with feedback, not self-correction without help. Splicing the
training context in would not fix it: without vLLM TRL recomputes the "old"
logprobs on the spliced sequence (ratio 1: an off-policy sample trained as if
on-policy); with vLLM its importance-sampling correction reads the swap as
sampler mismatch and masks exactly the sequences the swap changed most. The
strategies that exist only for the swap (``prompt_augmentation``,
``answer_hint``) are refused by the rollout
(:func:`llm_envs.bridges.trl.refuse_context_swap`: a first turn whose
training context is not its prompt).
For the swap, train with the importance-sampling trainer, which builds its
training data on the training context and weights every token by
``exp(lp_train - lp_sample)`` against the sampler's logprobs:
``examples/expert_iteration_mixed.py``.

CPU, SmolLM2-135M-Instruct (the default)::

    python examples/grpo_expert_iteration.py

A real run on a GPU (bf16, and TRL's colocated vLLM engine when vLLM is installed)::

    python examples/grpo_expert_iteration.py --model Qwen/Qwen2.5-1.5B-Instruct \
        --task gsm8k --steps 200 --problems-per-step 8 --generations 8 --max-tokens 512 --save-model

Measured: the defaults take about 2.5 minutes on a 2-core CPU (144 s, load average 2.7).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL

from baselines.grpo import GRPORunConfig
from baselines.grpo.assembly import format_completion
from baselines.grpo.run import build_rollout, build_trainer, save_final_model
from baselines.models import DEFAULT_MODEL
from baselines.report import first_and_last, write_report
from llm_envs.command_line import CommandParser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = CommandParser(description="Expert iteration (two-turn feedback), TRL GRPO.")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model id, folder, or 'tiny'")
    parser.add_argument("--task", default="arithmetic", choices=["arithmetic", "gsm8k"])
    parser.add_argument("--max-digits", type=int, default=1, help="arithmetic: digits per operand")
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps")
    parser.add_argument("--problems-per-step", type=int, default=1)
    parser.add_argument("--generations", type=int, default=4, help="episodes per problem")
    parser.add_argument("--max-tokens", type=int, default=64, help="most tokens per attempt")
    parser.add_argument("--output-dir", default="runs/grpo_expert_iteration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-model", action="store_true", help="save the trained model too")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    config = GRPORunConfig(
        model=args.model,
        env="expert_iteration",
        strategy="two_turn_feedback",
        env_kwargs={"attempt1_loss_weight": 0.0},  # only attempt 2 is trained (the plan)
        task=args.task,
        task_kwargs={"max_digits": args.max_digits} if args.task == "arithmetic" else {},
        num_generations=args.generations,
        items_per_step=args.problems_per_step,
        max_steps=args.steps,
        max_tokens=args.max_tokens,
        scale_rewards="none",  # the problem's mean reward is the baseline
        learning_rate=1e-5,
        temperature=0.7,  # a small model at temperature 1 writes mostly noise
        seed=args.seed,
        output_dir=args.output_dir,
        save_episodes=args.generations,  # the first problem's whole group, every step
        save_model=args.save_model,
    )
    rollout = build_rollout(config)
    trainer = build_trainer(config, rollout)
    trainer.train()
    if config.save_model:
        save_final_model(trainer, config.output_dir)

    out = rollout.last_output  # what the rollout function handed TRL at the last step
    assert out is not None
    print(f"\nOne episode of the last step as TRL saw it (reward {out['env_reward'][0]:g}):")
    first = [out[key][0] for key in ("prompt_ids", "completion_ids", "env_mask")]
    print(format_completion(trainer.processing_class, *first))

    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    report = write_report(config.output_dir)
    steps = [{"reward": r} for r in rewards]
    print(f"\nmean reward, first step -> last step: {first_and_last(steps, 'reward')}")
    print(f"report: {report}")


if __name__ == "__main__":
    main()
