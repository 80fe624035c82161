"""A training run's folder: its settings, its metrics log, its transcripts, its checkpoints.

Every trainer of :mod:`baselines` writes the same layout, which
``python -m baselines.report`` reads::

    OUTPUT_DIR/
        run.json             which trainer's run this folder is
        config.json          the run's settings (written at every start)
        metrics.jsonl        one JSON object per line, each with an "iteration"
        episodes/*.jsonl     episode records for the transcript viewer
        checkpoints/         iteration_NNNNNN/ folders (baselines.training.checkpoints)
        final_model/         the trained weights, at the end

:class:`RunDirectory` owns the first four. A folder belongs to one run:
:meth:`RunDirectory.claim` refuses a folder that holds another trainer's run,
or a run of another model or environment, unless told to overwrite it; the
same run resumes. Resuming a run drops the metric
lines of the iterations that are about to be redone (those at or past the
checkpoint's iteration), so a resumed run's log reads like an uninterrupted
one. A process killed while writing can leave a torn last line; it is dropped
with a warning, never an error, when the run starts again or is read.

Nothing here imports torch: the report reads runs with it.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CHECKPOINTS_DIR",
    "CONFIG_FILE",
    "EPISODES_DIR",
    "FINAL_MODEL_DIR",
    "LIBRARY_LOG",
    "METRICS_FILE",
    "RUN_FILE",
    "SUMMARY_FILE",
    "RunDirectory",
    "RunFolderError",
    "read_metrics",
    "write_atomically",
]

CONFIG_FILE = "config.json"
"""The run's settings, as the trainer's config writes them."""
METRICS_FILE = "metrics.jsonl"
"""One JSON object per logged step."""
EPISODES_DIR = "episodes"
"""Episode records (``*.jsonl``) for ``python -m baselines.report``."""
CHECKPOINTS_DIR = "checkpoints"
"""Checkpoint folders, ``iteration_NNNNNN``."""
RUN_FILE = "run.json"
"""Which trainer's run the folder holds (:meth:`RunDirectory.claim`)."""
FINAL_MODEL_DIR = "final_model"
"""The trained model and tokenizer, saved at the end."""
SUMMARY_FILE = "summary.json"
"""An evaluation's results (:meth:`baselines.eval.summary.EvalSummary.to_json`), for the report."""
LIBRARY_LOG = "libraries.log"
"""Other libraries' log lines and warnings (:mod:`baselines.library_logs`), appended."""


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    r"""The rows of a ``metrics.jsonl`` file; blank lines skipped, a torn last line dropped.

    A process killed while appending leaves the last line cut short: it is
    dropped with a warning. A broken line anywhere else is a damaged file, not
    a crash, and raises.

    Raises:
        ValueError: a line other than the last is not a JSON object; the
            message names the file and line.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
        >>> _ = path.write_text('{"iteration": 0}\n\n{"iteration": 1}\n{"itera')
        >>> with warnings.catch_warnings(record=True):
        ...     read_metrics(path)
        [{'iteration': 0}, {'iteration': 1}]
    """
    rows: list[dict[str, Any]] = []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if index == last:
                warnings.warn(
                    f"{path}:{index + 1}: dropped a torn last line (a run stopped while "
                    f"writing it): {line[:60]!r}",
                    stacklevel=2,
                )
                break
            raise ValueError(f"{path}:{index + 1} is not JSON: {exc}") from exc
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{index + 1} is not a JSON object: {line[:60]!r}")
        rows.append(row)
    return rows


IDENTITY: tuple[str, ...] = ("model", "env", "task", "dataset", "lora_r")
"""Settings that make a run another run: a folder resumes only with the same ones."""

_RUN_FILES = (RUN_FILE, CONFIG_FILE, METRICS_FILE, SUMMARY_FILE)
_RUN_DIRS = (EPISODES_DIR, CHECKPOINTS_DIR, FINAL_MODEL_DIR, "report")


class RunFolderError(ValueError):
    """``output_dir`` holds another run; the message says whose and how to go on."""


class RunDirectory:
    """The output folder of one run, as every trainer writes it.

    Only the main process writes: under several processes, the others get a
    ``RunDirectory(..., writer=False)`` whose methods do nothing, so trainer
    code calls them unconditionally.

    Args:
        path: the folder (created by :meth:`start`).
        writer: whether this process writes (the main process).
    """

    def __init__(self, path: str | Path, *, writer: bool = True) -> None:
        self.path = Path(path)
        self.writer = writer

    @property
    def metrics_path(self) -> Path:
        """``metrics.jsonl``."""
        return self.path / METRICS_FILE

    @property
    def config_path(self) -> Path:
        """``config.json``."""
        return self.path / CONFIG_FILE

    @property
    def episodes_dir(self) -> Path:
        """``episodes/``."""
        return self.path / EPISODES_DIR

    @property
    def final_model_dir(self) -> Path:
        """``final_model/``."""
        return self.path / FINAL_MODEL_DIR

    def create(self) -> None:
        """Create the folder now, so that a folder that cannot be made fails before any work."""
        if not self.writer:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise type(exc)(
                f"output_dir {str(self.path)!r} cannot be created ({exc.strerror or exc} at "
                f"{exc.filename!r}); choose a folder you can write to"
            ) from exc

    def claim(self, trainer: str, config_json: str, *, overwrite: bool = False) -> None:
        """Make the folder this run's, before anything is read from it (a checkpoint).

        A new folder, or one of the same run (the same trainer and the same
        :data:`IDENTITY` settings), is this run's: it resumes from its last
        checkpoint, or starts again where it has none. A folder of another
        trainer, or of the same trainer with another model, environment, task,
        data set or LoRA rank, is refused, unless ``overwrite``: then its run
        files are deleted first (checkpoints, metrics, transcripts, the final
        model, the report).

        Raises:
            RunFolderError: another run's folder, without ``overwrite``.
        """
        if not self.writer:
            return
        self.create()
        problem = self._other_run(trainer, json.loads(config_json))
        if problem is not None:
            if not overwrite:
                raise RunFolderError(
                    f"output_dir {str(self.path)!r} holds {problem}; choose another "
                    "--output-dir, or pass --overwrite to delete that run and start afresh"
                )
            for name in _RUN_FILES:
                (self.path / name).unlink(missing_ok=True)
            for name in _RUN_DIRS:
                shutil.rmtree(self.path / name, ignore_errors=True)
        write_atomically(self.path / RUN_FILE, json.dumps({"trainer": trainer}) + "\n")

    def _other_run(self, trainer: str, settings: Mapping[str, Any]) -> str | None:
        """What another run left here, in words; None for a new folder or the same run."""
        try:
            owner = json.loads((self.path / RUN_FILE).read_text()).get("trainer")
        except (OSError, ValueError, AttributeError):
            owner = None
        try:
            before = json.loads(self.config_path.read_text())
        except (OSError, ValueError):
            before = None
        if not isinstance(before, dict):
            before = None
        if owner is None and before is None:
            if self.metrics_path.exists() or (self.path / CHECKPOINTS_DIR).exists():
                return "the metrics or checkpoints of a run without its config.json"
            return None
        if owner is None and before is not None and len(set(before) ^ set(settings)) > 3:
            # A folder written before run.json: another trainer's settings differ in many
            # fields (a newer version of the same trainer in a few).
            owner = "another trainer"
        if owner is not None and owner != trainer:
            return f"a run of {owner}, not {trainer}"
        for key in IDENTITY:
            if before is not None and key in settings and before.get(key) != settings[key]:
                return (
                    f"a run with {key}={before.get(key)!r}, and this one has "
                    f"{key}={settings[key]!r}"
                )
        return None

    def start(
        self,
        config_json: str,
        *,
        resume_from: int = 0,
        may_change: Iterable[str] = ("num_iterations", "progress"),
    ) -> None:
        """Create the folder, write ``config.json``, keep the metric lines before ``resume_from``.

        Args:
            config_json: the config as a JSON object (``config.to_json()``).
            resume_from: the iteration the run starts at (a checkpoint's
                completed iterations; 0 for a new run). Lines whose
                ``iteration`` is at or past it are dropped: they are redone.
            may_change: settings a resumed run may change without a warning
                (e.g. ``num_iterations``, to train further).

        Warns:
            UserWarning: a resumed run's settings differ from the ones it
                started with, other than ``may_change``; the warning names them.
        """
        if not self.writer:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        if resume_from > 0 and self.config_path.exists():
            self._warn_changed(config_json, frozenset(may_change))
        self.config_path.write_text(config_json)
        kept: list[dict[str, Any]] = []
        if resume_from > 0 and self.metrics_path.exists():
            kept = [
                row for row in read_metrics(self.metrics_path) if row["iteration"] < resume_from
            ]
        write_atomically(self.metrics_path, "".join(_line(row) for row in kept))

    def _warn_changed(self, config_json: str, may_change: frozenset[str]) -> None:
        try:
            before = json.loads(self.config_path.read_text())
        except json.JSONDecodeError:
            return  # torn by a crash: nothing to compare with
        now = json.loads(config_json)
        # A setting the saved config lacks is newer than the run: it took that setting's default.
        changed = sorted(
            k for k, v in now.items() if k in before and before[k] != v and k not in may_change
        )
        if changed:
            warnings.warn(f"resuming {self.path} with changed settings {changed}", stacklevel=3)

    def log(self, metrics: Mapping[str, Any]) -> None:
        """Append one line to ``metrics.jsonl`` (it must hold an ``iteration``)."""
        if "iteration" not in metrics:
            raise ValueError(f"a metrics line needs an 'iteration', got keys {sorted(metrics)}")
        if self.writer:
            with self.metrics_path.open("a", encoding="utf-8", errors="backslashreplace") as f:
                f.write(_line(metrics))
                f.flush()

    def write_episodes(self, name: str, records: Sequence[Mapping[str, Any]]) -> Path | None:
        """Write episode records to ``episodes/{name}.jsonl``; None when there are none."""
        if not records or not self.writer:
            return None
        self.episodes_dir.mkdir(parents=True, exist_ok=True)
        path = self.episodes_dir / f"{name}.jsonl"
        lines = "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in records)
        write_atomically(path, lines)
        return path

    def remove_episodes(self, pattern: str) -> None:
        """Delete the earlier episode files matching ``pattern`` (a glob, e.g. ``step_*.jsonl``)."""
        if self.writer:
            for stale in self.episodes_dir.glob(pattern):
                stale.unlink()


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` beside it and rename: a crash leaves the old file or the new one.

    Lone surrogates, which no UTF-8 file can hold, are written as backslash escapes.
    """
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", errors="backslashreplace")
    os.replace(tmp, path)


def _line(row: Mapping[str, Any]) -> str:
    return json.dumps(dict(row), sort_keys=True) + "\n"
