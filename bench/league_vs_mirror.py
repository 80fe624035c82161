"""Mirror self-play, a fixed opponent and a league, same budget, several seeds: the table.

    python bench/league_vs_mirror.py                      # SmolLM2-135M-Instruct, TicTacToe, CPU
    python bench/league_vs_mirror.py --seeds 0 1 2 --iterations 4 --out runs/league_vs_mirror
    python bench/league_vs_mirror.py --game KuhnPoker-v0 --env-kwargs '{"payoff": "chips",
        "game_kwargs": {"max_rounds": 1}}' --arms mirror random league --out runs/kuhn
    python bench/league_vs_mirror.py --summarize-only     # the table of runs already done
    python bench/league_vs_mirror.py ... --summarize-only --plot docs/images/kuhn.svg

Each arm trains with the importance-sampling trainer on the same game, for the
same iterations, playing the same number of games per iteration:

* ``mirror``: ``--opponents mirror``, ``2 * G`` self-play games (every seat trained);
* ``random``: a fixed opponent, the game's random player (``--opponents league
  --league-matchmaking anchors --league-anchors scripted:random``, no
  snapshots), ``G / 2`` groups of 4 games, the learner in one seat;
* ``league``: ``--opponents league`` (PFSP, the family's scripted anchors,
  snapshots every 2 iterations), ``G / 2`` groups of 4 games, the learner in one seat.

All evaluate at the same iterations, the first before any training. Where the
family has a meter (Kuhn Poker: ``eval/exploitability``, docs/envs/textarena.md)
the table is the meter's: per arm and seed, exploitability with its interval
at each evaluation, then each arm's mean and range over the seeds. Otherwise
(``--eval-scripted``) the win, draw and invalid-move rates against the
family's scripted players. A run already finished (its folder holds the final
evaluation) is not run again. Under the table: the measured seconds per
iteration and per evaluation, and what the whole grid costs at that rate.
``--plot`` writes the meter's curves as a standalone SVG: each arm's mean over
the seeds as a line, each seed as points, uniform play (11/24 in chips) for scale.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

SCRIPTED_METRICS = (
    ("scripted:random", "win"),
    ("scripted:random", "invalid_move"),
    ("scripted:reference", "draw"),
    ("scripted:reference", "invalid_move"),
)
METER = "eval/exploitability"
ARMS = ("mirror", "random", "league")


def arm_flags(arm: str, games: int) -> list[str]:
    """The flags that make an arm: who fills the seats, and how the games are grouped."""
    if arm == "mirror":
        return ["--opponents", "mirror", "--groups-per-batch", str(games)]
    grouped = ["--league-group-size", "4", "--groups-per-batch", str(games // 4)]
    if arm == "random":
        return [
            "--opponents",
            "league",
            "--league-matchmaking",
            "anchors",
            "--league-anchors",
            "scripted:random",
            "--league-snapshot-every",
            "0",
            *grouped,
        ]
    return [
        "--opponents",
        "league",
        "--league-matchmaking",
        "pfsp",
        "--league-snapshot-every",
        "2",
        *grouped,
    ]


def env_kwargs(args: argparse.Namespace) -> dict[str, object]:
    """The game and the extra environment arguments."""
    return {"game": args.game, **json.loads(args.env_kwargs)}


def finished(metrics: Path, iterations: int) -> bool:
    """Whether the run's final evaluation is in its metrics file."""
    return metrics.exists() and any(
        json.loads(line).get("iteration") == iterations and '"eval/' in line
        for line in metrics.read_text().splitlines()
    )


def run(arm: str, seed: int, args: argparse.Namespace) -> Path:
    """Train one arm with one seed (or find it done); return its metrics file."""
    out = Path(args.out) / f"{arm}_seed{seed}"
    metrics = out / "metrics.jsonl"
    if finished(metrics, args.iterations):
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
        json.dumps(env_kwargs(args)),
        "--seed",
        str(seed),
        "--num-iterations",
        str(args.iterations),
        "--eval-every",
        str(args.eval_every),
        "--eval-groups",
        str(args.eval_groups),
        "--eval-meter-samples",
        str(args.meter_samples),
        "--max-tokens",
        str(args.max_tokens),
        "--learning-rate",
        str(args.learning_rate),
        "--output-dir",
        str(out),
        "--no-progress",
        *(["--eval-scripted"] if args.eval_scripted else []),
        *args.extra,
        *arm_flags(arm, args.games),
    ]
    print(f"== {arm} seed {seed}: {' '.join(command[2:])}", flush=True)
    subprocess.run(command, check=True)
    return metrics


def evaluations(metrics: Path) -> dict[int, dict[str, float]]:
    """``iteration -> eval/... metrics`` of the lines that hold an evaluation."""
    out: dict[int, dict[str, float]] = {}
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        found = {k: v for k, v in row.items() if k.startswith("eval/")}
        if found:
            out[int(row["iteration"])] = found
    return out


def runs_of(arm: str, args: argparse.Namespace) -> dict[int, dict[int, dict[str, float]]]:
    """``seed -> evaluations`` of an arm's runs that exist."""
    found = {}
    for seed in args.seeds:
        path = Path(args.out) / f"{arm}_seed{seed}" / "metrics.jsonl"
        if path.exists():
            found[seed] = evaluations(path)
    return found


def _spread(values: list[float]) -> str:
    spread = f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else ""
    return f"{statistics.fmean(values):.2f}{spread}"


def meter_table(args: argparse.Namespace) -> str:
    """Markdown: per arm and seed, exploitability [interval] at each evaluation; each arm's mean."""
    grid = {arm: runs_of(arm, args) for arm in args.arms}
    iterations = sorted({i for runs in grid.values() for r in runs.values() for i in r})
    heads = [f"iteration {i}" + (" (before)" if i == 0 else "") for i in iterations]
    lines = ["| arm | seed | " + " | ".join(heads) + " |", "|" + " --- |" * (2 + len(heads))]
    for arm, runs in grid.items():
        for seed, run_evals in runs.items():
            cells = []
            for i in iterations:
                row = run_evals.get(i, {})
                if METER not in row:
                    cells.append("")
                    continue
                low, high = row.get(f"{METER}_low"), row.get(f"{METER}_high")
                interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high else ""
                cells.append(f"{row[METER]:.3f}{interval}")
            lines.append(f"| {arm} | {seed} | " + " | ".join(cells) + " |")
        if len(runs) > 1:
            cells = []
            for i in iterations:
                values = [r[i][METER] for r in runs.values() if METER in r.get(i, {})]
                cells.append(_spread(values) if values else "")
            lines.append(f"| {arm} | mean (range) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def scripted_table(args: argparse.Namespace) -> str:
    """Markdown: per arm and evaluation, each metric's mean and range over the seeds."""
    header = "| arm | iteration | " + " | ".join(f"{a} {m}" for a, m in SCRIPTED_METRICS) + " |"
    lines = [header, "|" + " --- |" * (2 + len(SCRIPTED_METRICS))]
    for arm in args.arms:
        runs = list(runs_of(arm, args).values())
        if not runs:
            continue
        for iteration in sorted(set.intersection(*(set(r) for r in runs))):
            cells = []
            for anchor, metric in SCRIPTED_METRICS:
                key = f"eval/{anchor}/{metric}"
                values = [r[iteration][key] for r in runs if key in r[iteration]]
                cells.append(_spread(values) if values else "")
            lines.append(f"| {arm} | {iteration} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


_SVG_STYLE = (
    "<style>text { font: 10px sans-serif; fill: #444; } .t { font-size: 11px; fill: #222; } "
    ".g { stroke: #eee; } .a { stroke: #bbb; }</style>"
)


def plot(args: argparse.Namespace, path: Path) -> None:
    """The meter's curves as a standalone SVG file (the report's chart, no plotting library)."""
    from baselines.report.svg import Curve, line_chart

    curves = []
    for colour, arm in zip(("#1f6fb2", "#d9480f", "#2b8a3e"), args.arms, strict=False):
        runs = runs_of(arm, args)
        iterations = sorted({i for r in runs.values() for i in r if METER in r[i]})
        means = [
            statistics.fmean(r[i][METER] for r in runs.values() if METER in r.get(i, {}))
            for i in iterations
        ]
        curves.append(Curve(arm, iterations, means, colour))
        seeds = [
            (i, r[i][METER]) for r in runs.values() for i in iterations if METER in r.get(i, {})
        ]
        curves.append(
            Curve(
                f"{arm} seeds",
                [i for i, _ in seeds],
                [v for _, v in seeds],
                colour,
                points_only=True,
            )
        )
    last = max((max(c.xs) for c in curves if c.xs), default=0)
    curves.append(Curve("uniform play", [0, last], [11 / 24, 11 / 24], "#999999"))
    chart = line_chart(curves, width=760, height=300, title=f"{args.game}: {METER}, chips")
    svg = str(chart).replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(svg.replace(">", ">" + _SVG_STYLE, 1) + "\n")


def timing(args: argparse.Namespace) -> str:
    """Seconds per training iteration and per evaluation measured, and the grid at that rate."""
    iteration_s, eval_s = [], []
    for arm in args.arms:
        for seed in args.seeds:
            path = Path(args.out) / f"{arm}_seed{seed}" / "metrics.jsonl"
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                row = json.loads(line)
                evaluated = row.get("time/eval", 0.0)
                if evaluated:
                    eval_s.append(evaluated)
                if "time/iteration" in row:
                    iteration_s.append(row["time/iteration"] - evaluated)
    if not iteration_s:
        return "no timings yet"
    train, evaluate = statistics.fmean(iteration_s), statistics.fmean(eval_s or [0.0])
    evals = args.iterations // args.eval_every + 1 if args.eval_every else 0
    one_run = args.iterations * train + evals * evaluate
    grid = len(args.arms) * len(args.seeds) * one_run
    return (
        f"measured: {train:.0f} s per training iteration, {evaluate:.0f} s per evaluation; "
        f"one run of {args.iterations} iterations and {evals} evaluations about {one_run / 60:.1f} "
        f"min, {len(args.arms)} arms x {len(args.seeds)} seeds about {grid / 60:.0f} min"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--game", default="TicTacToe-v0")
    parser.add_argument(
        "--env-kwargs", default="{}", help="more environment arguments, JSON (payoff, game_kwargs)"
    )
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=["mirror", "league"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--games", type=int, default=8, help="games per iteration, each arm")
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--eval-groups", type=int, default=4)
    parser.add_argument("--meter-samples", type=int, default=16, help="texts per infoset")
    parser.add_argument("--eval-scripted", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--out", default="runs/league_vs_mirror")
    parser.add_argument("--summarize-only", action="store_true")
    parser.add_argument("--plot", type=Path, help="write the meter's curves to this SVG file")
    parser.add_argument("extra", nargs="*", help="more trainer flags, after --")
    args = parser.parse_args()
    if args.games % 4:
        parser.error(f"--games must be a multiple of 4 (the league's groups), got {args.games}")
    kuhn = args.game.startswith("KuhnPoker")
    if args.eval_scripted is None:
        args.eval_scripted = not kuhn  # the meter says more than win rates, at less cost
    if not args.summarize_only:
        for seed in args.seeds:
            for arm in args.arms:
                run(arm, seed, args)
    print(meter_table(args) if kuhn else scripted_table(args))
    if args.plot and kuhn:
        plot(args, args.plot)
        print(f"curves: {args.plot}")
    print()
    print(timing(args))


if __name__ == "__main__":
    main()
