"""Other libraries' warnings and info lines go to a log file in the run folder, not the console.

A run's console should say what the run does; vLLM's engine start-up lines,
transformers' and torch's warnings belong in a file the user opens when
something looks wrong. :func:`library_logs_to` sends the loggers of the
libraries in :data:`LIBRARIES` (vLLM, transformers, torch, accelerate, TRL,
...) and the Python warnings raised from their code to one file, and leaves
this package's own warnings and lines on the console. ``LLM_ENVS_LIBRARY_LOGS=console``
leaves everything where the libraries send it.

Example:
    >>> import logging, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> with library_logs_to(folder / "libraries.log"):
    ...     logging.getLogger("transformers.generation").warning("generation noise")
    >>> "generation noise" in (folder / "libraries.log").read_text()
    True
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["LIBRARIES", "library_logs_to"]

LIBRARIES = (
    "vllm",
    "transformers",
    "torch",
    "accelerate",
    "trl",
    "peft",
    "datasets",
    "huggingface_hub",
    "deepspeed",
    "DeepSpeed",
)
"""The libraries whose loggers and warnings go to the file."""

_OURS = tuple(
    str(Path(__file__).resolve().parents[1] / name) + os.sep for name in ("baselines", "llm_envs")
)


def _from_a_library(filename: str) -> bool:
    """Whether a warning raised in ``filename`` is another library's (not this package's)."""
    if filename.startswith(_OURS):
        return False
    parts = Path(filename).parts
    return any(name in parts for name in LIBRARIES)


class _RunLog(logging.FileHandler):
    """A log file opened on the first record, its folder made then.

    A folder that cannot be made (an ``--output-dir`` the run will refuse with
    its own message) loses the records instead of printing logging's traceback.
    """

    def __init__(self, path: Path | str) -> None:
        super().__init__(path, encoding="utf-8", delay=True)
        self.unwritable = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.unwritable:
            return
        if self.stream is None:
            try:
                Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
                self.stream = self._open()
            except OSError:
                self.unwritable = True
                return
        super().emit(record)


@contextlib.contextmanager
def library_logs_to(path: Path | str) -> Iterator[None]:
    """While the block runs, the libraries' log records and warnings are appended to ``path``.

    The file is opened on the first record (a run that says nothing leaves
    none). Everything is restored afterwards: the loggers' handlers,
    propagation and levels, :func:`warnings.showwarning` and the environment
    variables that keep vLLM and the hub's bars quiet.
    """
    if os.environ.get("LLM_ENVS_LIBRARY_LOGS", "").lower() == "console":
        yield
        return
    quiet = {
        "VLLM_CONFIGURE_LOGGING": "0",  # vLLM imported later adds no console handler
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' loading bars
    }
    ours = [name for name in quiet if name not in os.environ]
    os.environ.update({name: quiet[name] for name in ours})
    handler = _RunLog(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    saved: list[tuple[logging.Logger, list[logging.Handler], bool, int]] = []
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        saved.append((logger, list(logger.handlers), logger.propagate, logger.level))
        for old in list(logger.handlers):  # the console handlers libraries install
            if isinstance(old, logging.StreamHandler) and not isinstance(old, logging.FileHandler):
                logger.removeHandler(old)
        logger.addHandler(handler)
        logger.propagate = False
    # A library logger some other configuration switched off would drop its records.
    disabled = [
        lg
        for name, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger) and lg.disabled and name.split(".")[0] in LIBRARIES
    ]
    for lg in disabled:
        lg.disabled = False
    vllm = logging.getLogger("vllm")
    if vllm.level == logging.NOTSET:
        vllm.setLevel(logging.INFO)  # vLLM's info lines, as its own logging shows them
    shown = warnings.showwarning

    def showwarning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if _from_a_library(filename):
            text = warnings.formatwarning(message, category, filename, lineno, line).rstrip()
            handler.handle(
                logging.LogRecord("warnings", logging.WARNING, filename, lineno, text, (), None)
            )
            return
        shown(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning
    try:
        yield
    finally:
        warnings.showwarning = shown
        for name in ours:
            os.environ.pop(name, None)
        for lg in disabled:
            lg.disabled = True
        for logger, handlers, propagate, level in saved:
            logger.removeHandler(handler)
            for old in handlers:
                if old not in logger.handlers:
                    logger.addHandler(old)
            logger.propagate = propagate
            logger.setLevel(level)
        handler.close()
        sys.stderr.flush()
