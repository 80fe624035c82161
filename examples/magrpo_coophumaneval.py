r"""MAGRPO on CoopHumanEval: a helper and a main model learn to write one program together.

Two copies of the model train side by side with MAGRPO, from the paper "LLM
Collaboration with Multi-Agent Reinforcement Learning": the
``helper`` writes a function ``aux``, the ``main`` agent writes the problem's
entry point and may call it; both get the team reward of the program they make
(definitions, syntax, tests passed, a bonus for really using ``aux``). Each
iteration grows one tree per problem: at every node each agent samples G
completions, joint actions are stepped in forks of the environment, and after
each turn the agents see ``level_feedback`` (diagnostics and the first failing
test) and revise. Returns ``r + 0.9 * mean(child returns)`` minus the sibling
mean are the advantages; each agent takes one policy-gradient step. The run is
evaluated with greedy decoding on held-out problems before the first and after
the last iteration, and :func:`baselines.report.write_report` turns it into
metric plots and a transcript viewer (per turn and agent: prompt, code, test
results, feedback, advantage).

The problems come from ``CoopHumanEval.json`` in the folder named by
``LLM_ENVS_DATA_DIR``, or from the Hugging Face hub when ``datasets`` is
installed (docs/tasks.md).

CPU, SmolLM2-135M-Instruct (the defaults: 2 iterations, 1 problem each, G = 2,
2 turns, 64 tokens, align mode, 2 evaluation problems):

    python examples/magrpo_coophumaneval.py

measured at 3 min 10 s on 2 CPU cores (load average 2.4, torch's default
threads), 11 min 20 s on the same cores shared with other jobs (load average 6
to 9, ``--threads 1``). ``--threads 1`` helps whenever the cores are shared:
torch's threads otherwise wait on each other.

GPU, a real run with a code model (hundreds of iterations, G = 4, cross mode):

    python examples/magrpo_coophumaneval.py --model Qwen/Qwen2.5-Coder-1.5B-Instruct \
        --iterations 300 --problems 4 --group-size 4 --joint-mode cross \
        --max-tokens 256 --eval-problems 16 --eval-every 50 --learning-rate 2e-6 \
        --output-dir runs/magrpo_qwen

What to look at: the per-turn reward and pass rate (turn 2 above turn 1 means
the agents use the feedback), ``env/turn_t/calls_aux`` (the main agent relies
on the helper), the evaluation before and after, and the transcripts. SmolLM2
-135M rarely writes a passing program: on CPU the run shows the loop working,
not learning.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

from baselines.magrpo import MAGRPOConfig
from baselines.magrpo.trainer import train
from baselines.models import DEFAULT_MODEL
from baselines.report import first_and_last, load_metrics, write_report
from llm_envs.command_line import CommandParser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="HF id, folder, or 'tiny'")
    parser.add_argument("--iterations", type=int, default=2, help="training iterations")
    parser.add_argument("--problems", type=int, default=1, help="problems (trees) per iteration")
    parser.add_argument("--group-size", type=int, default=2, help="G: completions per agent, node")
    parser.add_argument("--turns", type=int, default=2, help="turns per episode (tree depth)")
    parser.add_argument("--max-tokens", type=int, default=64, help="most tokens per completion")
    parser.add_argument("--joint-mode", choices=["align", "cross"], default="align")
    parser.add_argument(
        "--eval-problems", type=int, default=2, help="held-out problems evaluated (0: none)"
    )
    parser.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="evaluate every this many iterations (0: before the first and after the last)",
    )
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (0: chosen for the load, printed)"
    )
    parser.add_argument("--output-dir", default="runs/magrpo_coophumaneval")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> MAGRPOConfig:
    """The run as a :class:`MAGRPOConfig`: every field is documented there."""
    return MAGRPOConfig(
        model=args.model,
        env="code_collab",
        task="coophumaneval",
        # helper and main; feedback between turns; the episode as long as the tree
        env_kwargs={"num_agents": 2, "external_mode": "level_feedback", "num_turns": args.turns},
        num_turns=args.turns,
        group_size=args.group_size,
        joint_mode=args.joint_mode,
        problems_per_iteration=args.problems,
        num_iterations=args.iterations,
        max_tokens=args.max_tokens,
        learning_rate=args.learning_rate,
        eval_problems=args.eval_problems,
        eval_every=args.eval_every or max(args.iterations, 1),
        save_episodes=args.problems,  # one root-to-leaf episode of every tree
        num_threads=args.threads,
        seed=args.seed,
        output_dir=args.output_dir,
    )


def turn_summary(row: dict[str, Any], prefix: str, turns: int) -> str:
    """``turn 1: reward 1.15, pass 0.05 | turn 2: ...`` for one metrics row."""
    parts = []
    for turn in range(1, turns + 1):
        reward = row.get(f"{prefix}/turn_{turn}/reward", math.nan)
        passed = row.get(f"{prefix}/turn_{turn}/pass_rate", math.nan)
        parts.append(f"turn {turn}: reward {reward:.3f}, pass rate {passed:.3f}")
    return " | ".join(parts)


def main(argv: Sequence[str] | None = None) -> None:
    config = build_config(parse_args(argv))
    metrics_path = train(config)
    rows = load_metrics(metrics_path)
    index = write_report(config.output_dir)

    trained = [row for row in rows if "env/all/reward/total" in row]
    for row in trained[:1] + trained[1:][-1:]:  # the first and the last
        print(f"iteration {row['iteration']}: {turn_summary(row, 'env', config.num_turns)}")
    evaluated = [row for row in rows if "eval/num_problems" in row]
    for row in evaluated[:1] + evaluated[1:][-1:]:
        done = row["iteration"]
        when = f"after {done} iterations" if done else "before training"
        print(
            f"evaluation {when} ({row['eval/num_problems']:.0f} problems, greedy): "
            f"{turn_summary(row, 'eval', config.num_turns)}; "
            f"solved {row.get('eval/final/solved', math.nan):.3f}"
        )
    print(
        f"mean reward, first -> last iteration: {first_and_last(trained, 'env/all/reward/total')}"
    )
    print(f"report: {index}")


if __name__ == "__main__":
    main()
