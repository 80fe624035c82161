"""Experiment trackers (TensorBoard, Weights & Biases, trackio) through ``accelerate``'s.

A run's ``report_to`` (:class:`baselines.config.RunConfig`) names the tracker by
the name TRL and ``accelerate`` give it. This package's trainers hand
:func:`make_trackers`' trackers to their ``accelerate.Accelerator``
(``log_with=``); :class:`~baselines.training.run.TrainingRun` starts them and
sends every line of ``metrics.jsonl`` to them too (numbers only, ``step`` =
``iteration``). ``metrics.jsonl`` stays the run's record: the report reads it,
and it is written whatever ``report_to`` says.

Where each tracker writes:

============  ==============================================================
tensorboard   event files in ``OUTPUT_DIR/tensorboard/`` (the config as
              hyperparameters in a sub-folder)
wandb         a run named after ``OUTPUT_DIR``'s last folder in the project
              ``project``; its local files in ``OUTPUT_DIR/wandb/``
              (``WANDB_MODE=offline`` keeps it there, ``wandb sync`` uploads)
trackio       a run named after ``OUTPUT_DIR``'s last folder in ``project``
============  ==============================================================

Only the main process logs (``accelerate``'s trackers run there alone).
"""

from __future__ import annotations

import importlib.util
import json
import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "TRACKER_DIR",
    "make_trackers",
    "numeric_metrics",
    "require_tracker",
    "tracker_config",
]

TRACKER_DIR = "tensorboard"
"""TensorBoard's folder in a run's output folder."""

_PACKAGE = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}


def require_tracker(report_to: str) -> None:
    """Raise when ``report_to``'s package is missing, naming the extra that installs it.

    Raises:
        ImportError: ``report_to='wandb' needs the wandb package: pip install ...``
        ValueError: an unknown tracker name.

    Example:
        >>> require_tracker("none")
        >>> require_tracker("mlflow")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: report_to must be one of ['none', 'tensorboard', 'wandb', 'trackio'], got ...
    """
    if report_to == "none":
        return
    if report_to not in _PACKAGE:
        raise ValueError(f"report_to must be one of {['none', *_PACKAGE]}, got {report_to!r}")
    package = _PACKAGE[report_to]
    if importlib.util.find_spec(package) is None:
        raise ImportError(
            f"report_to={report_to!r} needs the {package} package: "
            f'pip install "llm-envs[{report_to}]" (or --report-to none)'
        )


def make_trackers(report_to: str, output_dir: str | Path, project: str) -> list[Any]:
    """``accelerate`` tracker objects for ``report_to`` (none for ``"none"``), not yet started.

    Pass them as ``Accelerator(log_with=...)``; ``accelerator.init_trackers``
    starts them on the main process.
    """
    require_tracker(report_to)
    if report_to == "none":
        return []
    # accelerate ships no type information (no py.typed).
    from accelerate import tracking  # type: ignore[import-untyped]

    folder = Path(output_dir)
    name = folder.resolve().name
    if report_to == "tensorboard":
        # accelerate writes into logging_dir / run_name: OUTPUT_DIR/tensorboard.
        return [tracking.TensorBoardTracker(TRACKER_DIR, folder)]
    if report_to == "wandb":
        return [tracking.WandBTracker(project, name=name, dir=str(folder))]
    return [tracking.TrackioTracker(project, name=name)]


def tracker_config(config: Any) -> dict[str, bool | int | float | str]:
    """A config as flat hyperparameters: scalars kept, anything else as JSON text.

    TensorBoard's hyperparameters take ``bool``, ``int``, ``float`` and ``str`` only.

    Example:
        >>> tracker_config({"lr": 1e-3, "env_kwargs": {"num_agents": 2}, "sampler_url": None})
        {'lr': 0.001, 'env_kwargs': '{"num_agents": 2}', 'sampler_url': 'None'}
    """
    values = config if isinstance(config, Mapping) else json.loads(config.to_json())
    flat: dict[str, bool | int | float | str] = {}
    for key, value in values.items():
        if isinstance(value, bool | int | float | str):
            flat[key] = value
        elif value is None:
            flat[key] = "None"
        else:
            flat[key] = json.dumps(value, sort_keys=True)
    return flat


def numeric_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a metrics line (what a tracker plots), ``iteration`` left out.

    Example:
        >>> numeric_metrics({"iteration": 3, "loss": 0.5, "note": "x", "nan": float("nan")})
        {'loss': 0.5}
    """
    return {
        key: float(value)
        for key, value in metrics.items()
        if key != "iteration"
        and isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
    }
