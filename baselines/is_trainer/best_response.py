"""How beatable is a checkpoint? Train a best responder against it; its winnings bound the answer.

In a two-seat zero-sum game whose seats are played alike (the evaluation
plays every game once per seat), a policy's exploitability is the most any
policy wins against it on average. Any policy trained against it wins at
most that much, so the responder's measured payoff against the frozen
checkpoint is a lower bound on the checkpoint's exploitability: as tight as
the responder's budget (iterations, games, LoRA rank) makes it, and only
ever an underestimate. Where the game is small enough for an exact value
(a family meter's ``eval/exploitability``), prefer that; this works for
any family with two seats and a fixed evaluation opponent.

The responder is the importance-sampling trainer with:

* ``--model BASE``: the checkpoint itself by default, so that the responder
  starts where the checkpoint is (it plays the format) and its first
  evaluation is the mirror match, near 0; with ``--lora-r 8`` unless given;
* the checkpoint, frozen, as the league's only opponent
  (``--opponents league --league-matchmaking anchors --league-anchors
  target=model:CHECKPOINT --league-snapshot-every 0``);
* an evaluation before training and after the last iteration against the
  checkpoint (the initial model when ``BASE`` is the checkpoint,
  ``--eval-opponent CHECKPOINT`` otherwise).

Every other flag is the trainer's (``llm-envs train --help``). The bound,
its interval where the payoff is a win or a loss, and the budget are printed
and written to ``OUTPUT_DIR/best_response.json``.

    llm-envs best-response runs/game/final_model --env my_game --num-iterations 4
        --output-dir runs/br   # docs/league.md has a Tic Tac Toe example
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ResponderSettings", "bound_of", "main", "trainer_argv"]

_FORCED = ("--model", "--opponents", "--league-matchmaking", "--league-anchors")
"""Trainer flags this command sets itself: the responder's model and its opponent."""


class ResponderSettings(argparse.Namespace):
    """The command's own flags: the checkpoint and the responder's base."""

    checkpoint: str
    base: str | None


def _given(argv: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def trainer_argv(checkpoint: str, base: str | None, argv: Sequence[str]) -> list[str]:
    """The IS trainer's command line for a responder to ``checkpoint`` (see the module docstring).

    Example:
        >>> trainer_argv("ck", None, ["--env", "my_game", "--num-iterations", "2"])[:4]
        ['--model', 'ck', '--opponents', 'league']

    Raises:
        ValueError: a flag this command sets itself, given in ``argv``.
    """
    clash = [f for f in _FORCED if _given(argv, f)]
    if clash:
        raise ValueError(
            f"{', '.join(clash)}: best-response sets these itself (the responder's base is "
            "--base, its opponent the checkpoint); drop them"
        )
    out = [
        "--model",
        base or checkpoint,
        "--opponents",
        "league",
        "--league-matchmaking",
        "anchors",
        "--league-anchors",
        f"target=model:{checkpoint}",
    ]
    if not _given(argv, "--league-snapshot-every"):
        out += ["--league-snapshot-every", "0"]
    if not _given(argv, "--lora-r"):
        out += ["--lora-r", "8"]
    if base is not None and base != checkpoint and not _given(argv, "--eval-opponent"):
        out += ["--eval-opponent", checkpoint]
    if not _given(argv, "--eval-every"):
        iterations = _value(argv, "--num-iterations")
        out += ["--eval-every", iterations or "4"]
        if iterations is None:
            out += ["--num-iterations", "4"]
    return [*out, *argv]


def _value(argv: Sequence[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def bound_of(first: Mapping[str, float], last: Mapping[str, float]) -> dict[str, Any]:
    """The lower bound from the evaluations before and after training (``eval/...`` metrics).

    The bound is the responder's mean payoff against the checkpoint at the
    last evaluation (``eval/game_reward``). Where the game pays a win, a draw
    or a loss (1, 0, -1: the rates account for the whole mean), a 95%
    interval from the three outcomes' variance over the games played.

    Example:
        >>> last = {"eval/game_reward": 0.5, "eval/win": 0.625, "eval/loss": 0.125,
        ...         "eval/draw": 0.25, "eval/num_episodes": 16}
        >>> b = bound_of({"eval/game_reward": 0.0}, last)
        >>> b["lower_bound"], round(b["interval"][0], 2), round(b["interval"][1], 2)
        (0.5, 0.15, 0.85)
    """
    value = float(last["eval/game_reward"])
    out: dict[str, Any] = {
        "lower_bound": value,
        "before": float(first.get("eval/game_reward", math.nan)),
        "games": int(last.get("eval/num_episodes", 0)),
    }
    win, loss = last.get("eval/win"), last.get("eval/loss")
    if win is not None and loss is not None and math.isclose(win - loss, value, abs_tol=1e-9):
        games = max(out["games"], 1)
        variance = max(win + loss - (win - loss) ** 2, 0.0)
        half = 1.96 * math.sqrt(variance / games)
        out["interval"] = [value - half, value + half]
        out.update(win=float(win), loss=float(loss), draw=float(last.get("eval/draw", 0.0)))
    return out


def _evaluations(metrics: Path) -> list[dict[str, float]]:
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return [
        {k: v for k, v in r.items() if k.startswith("eval/")}
        for r in rows
        if "eval/game_reward" in r
    ]


def main(argv: Sequence[str] | None = None, *, prog: str = "llm-envs best-response") -> None:
    """The command line: ``llm-envs best-response CHECKPOINT [--base MODEL] [trainer flags]``."""
    from baselines.cli import parse_config
    from baselines.is_trainer.config import ISTrainerConfig
    from baselines.is_trainer.trainer import train

    parser = argparse.ArgumentParser(
        prog=prog,
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Every other flag is the trainer's: llm-envs train --help.",
    )
    parser.add_argument("checkpoint", help="the model folder to exploit (a run's final_model)")
    parser.add_argument(
        "--base", help="the responder's starting model (default: the checkpoint itself)"
    )
    settings, rest = parser.parse_known_args(
        sys.argv[1:] if argv is None else list(argv), namespace=ResponderSettings()
    )
    if not Path(settings.checkpoint).is_dir():
        parser.error(f"no model folder at {settings.checkpoint!r}; give a run's final_model")
    try:
        flags = trainer_argv(settings.checkpoint, settings.base, rest)
    except ValueError as error:
        parser.error(str(error))
    config = parse_config(ISTrainerConfig, flags, prog=prog)
    metrics = train(config)
    evaluations = _evaluations(metrics)
    if len(evaluations) < 2:
        parser.error(f"{metrics} holds {len(evaluations)} evaluations; the bound needs two")
    result = bound_of(evaluations[0], evaluations[-1])
    result["budget"] = {
        "iterations": config.num_iterations,
        "groups_per_batch": config.groups_per_batch,
        "group_size": config.league.group_size,
        "lora_r": config.lora_r,
        "base": settings.base or settings.checkpoint,
    }
    result["checkpoint"] = settings.checkpoint
    (metrics.parent / "best_response.json").write_text(json.dumps(result, indent=2) + "\n")
    interval = result.get("interval")
    shown = f" (95%: {interval[0]:.3f} to {interval[1]:.3f})" if interval else ""
    print(
        f"best response to {settings.checkpoint}: it wins {result['lower_bound']:.3f} a game "
        f"on average over {result['games']} games{shown}, against {result['before']:.3f} "
        "before training.\nSo the checkpoint's exploitability is at least that much, under "
        "the game's payoff (a lower bound, as good as the responder's budget: "
        f"{config.num_iterations} iterations of {config.groups_per_batch} groups, LoRA rank "
        f"{config.lora_r}).\nwritten: {metrics.parent / 'best_response.json'}"
    )


if __name__ == "__main__":
    main()
