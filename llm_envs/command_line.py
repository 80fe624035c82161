"""One error style for every command: the message and its fix on one line, no usage block.

:class:`CommandParser` is :class:`argparse.ArgumentParser` with argparse's
error output replaced. argparse prints the whole usage block (sixty lines for
a trainer) before a one-line error; here a user error is::

    llm-envs train: error: unrecognized arguments: --max_steps 3
    llm-envs train: --max_steps: flags are spelled with dashes here: --max-steps
    (llm-envs train --help lists every flag)

and exit status 2. ``--help`` still prints the usage. Every command of the
project builds its parser from this class (the trainers through
:func:`baselines.cli.build_parser`, the servers directly), so a hint added here
reaches all of them.
"""

from __future__ import annotations

import argparse
import difflib
import re
from typing import NoReturn

__all__ = ["SYNONYMS", "CommandParser", "flag_hints"]

_UNKNOWN = re.compile(r"unrecognized arguments: (.*)")
SYNONYMS = {
    "--max-steps": ("--num-iterations",),
    "--num-train-epochs": ("--num-iterations",),
    "--max-completion-length": ("--max-tokens",),
    "--max-new-tokens": ("--max-tokens",),
    "--per-device-train-batch-size": ("--groups-per-batch", "--problems-per-iteration"),
    "--num-generations": ("--group-size",),
    "--bf16": ("--precision",),
    "--fp16": ("--precision",),
    "--logging-dir": ("--output-dir",),
    "--model-name-or-path": ("--model",),
}
"""TRL's and Transformers' flags (dashed), and ours that do their job where they are unknown."""


def flag_hints(unknown: list[str], known: list[str]) -> list[str]:
    """A line of advice for each unknown flag: its dashed spelling, or the closest flag.

    Example:
        >>> flag_hints(["--max_steps", "3", "--lerning-rate"], ["--max-steps", "--learning-rate"])
        ['--max_steps: flags are spelled with dashes here: --max-steps', '--lerning-rate: did you mean --learning-rate?']
    """  # noqa: E501  (a doctest's output is one line)
    hints = []
    for word in unknown:
        if not word.startswith("--"):
            continue
        flag = word.split("=", 1)[0]
        dashed = flag.replace("_", "-")
        if dashed != flag and dashed in known:
            hints.append(f"{flag}: flags are spelled with dashes here: {dashed}")
            continue
        ours = [f for f in SYNONYMS.get(dashed, ()) if f in known]
        if ours:
            hints.append(f"{flag} is TRL's spelling; here it is {ours[0]}")
            continue
        close = difflib.get_close_matches(dashed, known, n=1, cutoff=0.75)
        if close:
            hints.append(f"{flag}: did you mean {close[0]}?")
    return hints


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, a hint, and where the flags are listed."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message``, hints for misspelt flags, and exit with status 2."""
        lines = [f"{self.prog}: error: {message}"]
        unknown = _UNKNOWN.search(message)
        if unknown:
            known = [s for action in self._actions for s in action.option_strings]
            lines += [f"{self.prog}: {hint}" for hint in flag_hints(unknown[1].split(), known)]
        lines.append(f"({self.prog} --help lists every flag)")
        self.exit(2, "\n".join(lines) + "\n")
