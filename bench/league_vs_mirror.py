"""Mirror self-play against a league, same budget, several seeds: win rates against fixed anchors.

    python bench/league_vs_mirror.py                      # SmolLM2-135M-Instruct, TicTacToe, CPU
    python bench/league_vs_mirror.py --seeds 0 1 2 --iterations 4 --out runs/league_vs_mirror
    python bench/league_vs_mirror.py --summarize-only     # the table of runs already done

Each arm trains with the importance-sampling trainer on the same game, for the
same iterations, playing the same number of games per iteration:

* ``mirror``: ``--opponents mirror``, ``2 * G`` self-play games (every seat trained);
* ``league``: ``--opponents league`` (PFSP, the random and minimax anchors,
  snapshots every 2 iterations), ``G / 2`` groups of 4 games, the learner in one seat.

Both evaluate with ``--eval-scripted`` at the same iterations: the same
evaluation games against the random player and the minimax player, whose
win, draw and invalid-move rates are the comparison. A run already finished
(its folder holds the final evaluation) is not run again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

METRICS = (
    ("scripted:random", "win"),
    ("scripted:random", "invalid_move"),
    ("scripted:reference", "draw"),
    ("scripted:reference", "invalid_move"),
)


def arm_flags(arm: str, games: int) -> list[str]:
    """The flags that make an arm: who fills the seats, and how the games are grouped."""
    if arm == "mirror":
        return ["--opponents", "mirror", "--groups-per-batch", str(games)]
    return [
        "--opponents",
        "league",
        "--league-matchmaking",
        "pfsp",
        "--league-snapshot-every",
        "2",
        "--league-group-size",
        "4",
        "--groups-per-batch",
        str(games // 4),
    ]


def run(arm: str, seed: int, args: argparse.Namespace) -> Path:
    """Train one arm with one seed (or find it done); return its metrics file."""
    out = Path(args.out) / f"{arm}_seed{seed}"
    metrics = out / "metrics.jsonl"
    if metrics.exists() and any(
        json.loads(line).get("iteration") == args.iterations and "eval/scripted:random/win" in line
        for line in metrics.read_text().splitlines()
    ):
        return metrics
    command = [
        sys.executable,
        "-m",
        "baselines.is_trainer",
        "--model",
        args.model,
        "--env",
        "textarena",
        "--env-kwargs",
        json.dumps({"game": args.game}),
        "--seed",
        str(seed),
        "--num-iterations",
        str(args.iterations),
        "--eval-every",
        str(args.eval_every),
        "--eval-groups",
        str(args.eval_groups),
        "--eval-scripted",
        "--max-tokens",
        str(args.max_tokens),
        "--learning-rate",
        str(args.learning_rate),
        "--output-dir",
        str(out),
        "--no-progress",
        *arm_flags(arm, args.games),
    ]
    print(f"== {arm} seed {seed}: {' '.join(command[2:])}", flush=True)
    subprocess.run(command, check=True)
    return metrics


def evaluations(metrics: Path) -> dict[int, dict[str, float]]:
    """``iteration -> eval/scripted:... metrics`` of the lines that hold an evaluation."""
    out: dict[int, dict[str, float]] = {}
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        found = {k: v for k, v in row.items() if k.startswith("eval/scripted:")}
        if found:
            out[int(row["iteration"])] = found
    return out


def table(args: argparse.Namespace) -> str:
    """Markdown: per arm and evaluation, each metric's mean and range over the seeds."""
    header = "| arm | iteration | " + " | ".join(f"{a} {m}" for a, m in METRICS) + " |"
    lines = [header, "|" + " --- |" * (2 + len(METRICS))]
    for arm in ("mirror", "league"):
        runs = []
        for seed in args.seeds:
            path = Path(args.out) / f"{arm}_seed{seed}" / "metrics.jsonl"
            if path.exists():
                runs.append(evaluations(path))
        if not runs:
            continue
        for iteration in sorted(set.intersection(*(set(r) for r in runs))):
            cells = []
            for anchor, metric in METRICS:
                values = [r[iteration][f"eval/{anchor}/{metric}"] for r in runs]
                spread = f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else ""
                cells.append(f"{statistics.fmean(values):.2f}{spread}")
            lines.append(f"| {arm} | {iteration} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--game", default="TicTacToe-v0")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--games", type=int, default=8, help="games per iteration, each arm")
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--eval-groups", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--out", default="runs/league_vs_mirror")
    parser.add_argument("--summarize-only", action="store_true")
    args = parser.parse_args()
    if args.games % 4:
        parser.error(f"--games must be a multiple of 4 (the league's groups), got {args.games}")
    if not args.summarize_only:
        for seed in args.seeds:
            for arm in ("mirror", "league"):
                run(arm, seed, args)
    print(table(args))


if __name__ == "__main__":
    main()
