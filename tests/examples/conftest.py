"""Run an example the way a user does: ``python examples/NAME ARGS`` from the repository root."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RunExample = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def run_example() -> RunExample:
    """``run_example(name, *args, timeout=600, ok=True)``: the finished process.

    With ``ok`` (the default) the process must exit with 0; its stderr tail is
    the failure message otherwise.
    """

    def run(name: str, *args: str, timeout: float = 600, ok: bool = True):
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / name), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )
        if ok:
            assert done.returncode == 0, done.stderr[-4000:]
        return done

    return run
