"""The evaluation's results file: one JSON line per finished episode, appended as it finishes.

``OUTPUT_DIR/episodes/eval.jsonl`` holds, per line, the episode's record (the
transcript that ``python -m baselines.report`` shows) and what the evaluation
needs to score it (:func:`episode_line`). Lines are appended and flushed as
episodes finish, so a run killed halfway keeps every episode it finished; a
restart reads the file, drops a torn last line (with a warning, like
:func:`baselines.run_directory.read_metrics`), and plays only the episodes
whose ids are not there yet.

Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.data.episode_metrics import numeric_info
from baselines.rollouts import EpisodeResult
from baselines.run_directory import read_metrics, write_atomically

__all__ = ["RESULTS_FILE", "EpisodeLog", "episode_line"]

RESULTS_FILE = "eval.jsonl"
"""The results file's name, in the run folder's ``episodes/``."""


class EpisodeLog:
    """An append-only JSONL file of finished episodes, keyed by ``episode_id``.

    Args:
        path: the file (its folder is created on the first append).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> list[dict[str, Any]]:
        """Every line as a dict; a torn last line is dropped with a warning.

        Raises:
            ValueError: a line other than the last is not a JSON object, or a
                line has no ``episode_id``; the message names the file and line.
        """
        if not self.path.exists():
            return []
        rows = read_metrics(self.path)
        for number, row in enumerate(rows, 1):
            if "episode_id" not in row:
                raise ValueError(
                    f"{self.path}: line {number} has no episode_id: this is not an evaluation's "
                    "results file; choose another --output-dir"
                )
        return rows

    def repair(self) -> list[dict[str, Any]]:
        """Read the file and rewrite it without a torn last line; return its lines.

        Appending after a torn line would leave a broken line in the middle.
        """
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = self.read()
        for warning in caught:
            warnings.warn(str(warning.message), stacklevel=2)
        if caught:
            write_atomically(self.path, "".join(_line(r) for r in rows))
        return rows

    def append(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append ``rows`` and flush them to disk."""
        if not rows:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8", errors="backslashreplace") as f:
            f.write("".join(_line(r) for r in rows))
            f.flush()
            os.fsync(f.fileno())


def _line(row: Mapping[str, Any]) -> str:
    return json.dumps(dict(row), ensure_ascii=False) + "\n"


def episode_line(
    result: EpisodeResult,
    env: Any,
    *,
    episode_id: str,
    problem: int,
    seating: int,
    seats: Mapping[str, str],
    extras: Mapping[str, Any],
) -> dict[str, Any]:
    """One results line: the transcript, who sat where, and what each agent earned.

    Keys: the env's record (``env``, ``title``, ``summary``, ``turns``; a
    minimal one when the env has no ``record()``), with ``seats`` added to its
    summary so the transcript page shows who played whom; ``phase``
    (``"eval"``), ``episode_id``, ``problem``, ``seating``, ``seats`` (agent ->
    model name), ``returns`` (agent -> its return: every step reward plus its
    final reward), ``metrics`` (agent -> the numeric outcome values of its last
    info), ``turns_taken`` (agent -> its turns) and ``turn_parse_errors`` (agent
    -> its turns that were parse errors, for environments that report them), and the
    arena's ``extras`` (a debate's ``votes``...).
    """
    unwrapped = getattr(env, "unwrapped", env)
    if hasattr(unwrapped, "record"):
        record = dict(unwrapped.record())
    else:
        name = str(getattr(unwrapped, "metadata", {}).get("name", type(unwrapped).__name__))
        record = {"env": name, "title": episode_id, "summary": {}, "turns": []}
    record["summary"] = {**record.get("summary", {}), "seats": dict(seats)}
    record["title"] = f"{record.get('title', '')} ({episode_id})".strip()
    returns, metrics, turns_taken, parse_errors = {}, {}, {}, {}
    for agent, trajectory in result.trajectories.items():
        returns[agent] = trajectory.step_reward + float(result.final_rewards[agent])
        metrics[agent] = numeric_info(result.final_infos.get(agent, {}))
        turns_taken[agent] = len(trajectory.transitions)
        if any("parse_error" in t.info for t in trajectory.transitions):  # envs that parse
            parse_errors[agent] = sum(
                bool(t.info.get("parse_error")) for t in trajectory.transitions
            )
    return {
        **record,
        "phase": "eval",
        "episode_id": episode_id,
        "problem": problem,
        "seating": seating,
        "seats": dict(seats),
        "returns": returns,
        "metrics": metrics,
        "turns_taken": turns_taken,
        "turn_parse_errors": parse_errors,
        **extras,
    }
