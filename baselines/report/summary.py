"""What a finished run prints last: what it trained, what moved, where the report is, what next.

:func:`run_summary` reads the run's folder (``config.json``, ``metrics.jsonl``,
its checkpoints and league snapshots) and says, in a few lines: the trainer,
model, env and iterations; the evaluation's headline numbers before and after
(the training metrics' when the run never evaluated); where the report is; the
next command (rate the league's snapshots, evaluate the final model, open the
report); and the disk the run used, the optimizer state apart (it is most of a
checkpoint).

The summary reads files only: it works on any run folder, finished or not.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.report.metrics import evaluation_metrics, first_and_last, headline_metrics
from baselines.run_directory import CONFIG_FILE, FINAL_MODEL_DIR, METRICS_FILE, read_metrics

__all__ = ["disk_use", "run_summary"]

_MAX_NUMBERS = 6
"""Headline numbers shown: the report has the rest."""


def disk_use(path: Path) -> tuple[int, int]:
    """The bytes under ``path``, and those of optimizer state files among them."""
    total = optimizer = 0
    for file in path.rglob("*"):
        if file.is_file() and not file.is_symlink():
            size = file.stat().st_size
            total += size
            if "optimizer" in file.name:
                optimizer += size
    return total, optimizer


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000  # type: ignore[assignment]
    raise AssertionError("unreachable")


def _trained(config: Mapping[str, Any], trainer: str) -> str:
    env = config.get("env", "?")
    task = config.get("task")
    on = f"{env}" + (f" (task {task})" if task and task != "default" else "")
    steps = config.get("num_iterations", config.get("max_steps"))
    unit = "steps" if "max_steps" in config and "num_iterations" not in config else "iterations"
    return f"{trainer}: {config.get('model', '?')} on {on}, {steps} {unit}"


def _numbers(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    names = {k for row in rows for k in row}
    chosen = evaluation_metrics(names) or headline_metrics(names)
    lines = []
    for name, meaning in chosen[:_MAX_NUMBERS]:
        moved = first_and_last(rows, name)
        if moved != "not logged":
            lines.append(f"  {meaning}: {moved}  [{name}]")
    return lines


def _next(run: Path, config: Mapping[str, Any], report: Path | None) -> list[str]:
    env = str(config.get("env", "debate"))
    settings = ""
    if config.get("env_kwargs"):
        settings = f" --env-kwargs {shlex.quote(json.dumps(config['env_kwargs']))}"
    snapshots = sorted((run / "league").glob("snapshot_*"))
    lines = []
    if snapshots:
        models = " ".join(shlex.quote(str(s)) for s in snapshots[-3:])
        lines.append(
            f"  rate the league's snapshots: llm-envs eval --env {env}{settings} "
            f"--models {models} reference --output-dir {shlex.quote(str(run / 'league' / 'eval'))}"
        )
    final = run / FINAL_MODEL_DIR
    if final.is_dir():
        lines.append(
            f"  evaluate the trained model: llm-envs eval --env {env}{settings} "
            f"--models {shlex.quote(str(config.get('model', 'MODEL')))} {shlex.quote(str(final))}"
        )
    if report is not None:
        lines.append(f"  open the report: {report}")
    else:
        lines.append(f"  write the report: llm-envs report {shlex.quote(str(run))}")
    return lines


def run_summary(
    run_dir: str | Path, *, trainer: str, report: Path | None, report_error: str | None = None
) -> str:
    """The lines a run prints when it ends (no trailing newline).

    Args:
        run_dir: the run's folder.
        trainer: what trained, as the user knows it (``llm-envs train``).
        report: the report's ``index.html``, if it was written.
        report_error: why the report could not be written, if it could not.
    """
    run = Path(run_dir)
    config_path = run / CONFIG_FILE
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    metrics = run / METRICS_FILE
    rows = read_metrics(metrics) if metrics.exists() else []
    lines = [f"== done. {_trained(config, trainer)}"]
    numbers = _numbers(rows)
    lines += ["before -> after:", *numbers] if numbers else ["no metrics were logged"]
    if report_error:
        lines.append(f"the report could not be written: {report_error}")
    lines.append("next:")
    lines += _next(run, config, report)
    total, optimizer = disk_use(run)
    kept = f" ({_size(optimizer)} of it optimizer state, kept to resume)" if optimizer else ""
    lines.append(f"disk: {_size(total)} in {run}{kept}")
    return "\n".join(lines)
