"""What a run is doing, said often enough: a bar in a terminal, a line every 30 s in a log.

Every long phase of a run (converting the model, evaluating, sampling, the
warm start, the optimizer steps, saving) opens a :func:`phase` with what it
counts. In a terminal a phase with a count shows a tqdm bar (when asked with
``bar=True``); without one, :func:`heartbeat` (which the command lines run
around the whole program) prints a line whenever nothing was said for
``every`` seconds, naming the innermost phase, how far it is and for how long
it has run::

    generate: 5/32 completions, 41 s, token 57/256 (sampling: 0/32 episodes; iteration 3/5)

Phases nest: the outer ones follow the innermost in brackets, with their
counts, and an outer phase of the same name as the one inside it is not
repeated. A phase costs a lock and a few attribute writes when nothing is
shown, and may be opened from any thread. Lines the program prints through :func:`say` count as
something said.

Example:
    >>> with phase("evaluate", total=3, unit="episodes") as step:
    ...     for _ in range(3):
    ...         step.advance()
    ...     print(status())
    evaluate: 3/3 episodes, 0 s
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["Phase", "heartbeat", "in_terminal", "phase", "say", "status"]

_lock = threading.Lock()
_phases: list[Phase] = []
_last_said = [time.monotonic()]


def in_terminal() -> bool:
    """Whether progress goes to a terminal (bars) rather than a file or pipe (lines)."""
    return sys.stderr.isatty()


@dataclass
class Phase:
    """One phase of a run: its name, how far it is, since when; :meth:`advance` counts."""

    name: str
    total: int | None = None
    unit: str = ""
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    note: str = ""
    """Free text shown after the count (e.g. ``"96 turns sampled"``)."""
    bar: Any = None

    def advance(self, count: int = 1) -> None:
        """``count`` more of what this phase counts are done."""
        with _lock:
            self.done += count
        if self.bar is not None:
            self.bar.update(count)

    def describe(self, now: float) -> str:
        """``name: done/total unit, elapsed s`` (``name, elapsed s`` when it counts nothing)."""
        elapsed = f"{now - self.started:.0f} s" + (f", {self.note}" if self.note else "")
        unit = f" {self.unit}" if self.unit else ""
        if self.total is not None:
            return f"{self.name}: {self.done}/{self.total}{unit}, {elapsed}"
        if self.done:
            return f"{self.name}: {self.done}{unit}, {elapsed}"
        return f"{self.name}, {elapsed}"

    def count(self) -> str:
        """How an outer phase is shown: ``name: done/total unit``, or ``name`` alone."""
        if self.total is None:
            return self.name
        return f"{self.name}: {self.done}/{self.total}" + (f" {self.unit}" if self.unit else "")


@contextlib.contextmanager
def phase(
    name: str, total: int | None = None, unit: str = "", *, bar: bool | None = False
) -> Iterator[Phase]:
    """Open a phase for the ``with`` block; yields the :class:`Phase` to :meth:`~Phase.advance`.

    Args:
        name: what the run is doing (``"sampling"``, ``"evaluation"``, ``"convert model"``).
        total: how many of ``unit`` the phase does, when known.
        unit: what it counts (``"episodes"``, ``"steps"``).
        bar: in a terminal, show a tqdm bar of the count (removed when done);
            None: when the enclosing phase shows one (a sampler's count under a rollout's bar).
    """
    current = Phase(name, total, unit)
    if bar is None:
        with _lock:
            bar = bool(_phases) and _phases[-1].bar is not None
    if bar and total is not None and in_terminal():
        with contextlib.suppress(ImportError):  # tqdm comes with the train extra
            from tqdm.auto import tqdm

            current.bar = tqdm(total=total, desc=name, unit=unit or "it", leave=False)
    with _lock:
        _phases.append(current)
    try:
        yield current
    finally:
        with _lock:
            _phases.remove(current)
        if current.bar is not None:
            current.bar.close()


def status(now: float | None = None) -> str:
    """The line a heartbeat prints now: the innermost phase, then the outer ones in brackets."""
    now = time.monotonic() if now is None else now
    with _lock:
        phases = list(_phases)
    if not phases:
        return "working"
    line = phases[-1].describe(now)
    outer = [p for p, inner in itertools.pairwise(phases) if p.name != inner.name]
    if outer:
        line += " (" + "; ".join(p.count() for p in reversed(outer)) + ")"
    return line


def say(message: str, stream: TextIO | None = None) -> None:
    """Print a progress message to stderr (without breaking a bar that is showing)."""
    _last_said[0] = time.monotonic()
    stream = sys.stderr if stream is None else stream
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the train extra
        print(message, file=stream, flush=True)
        return
    tqdm.write(message, file=stream)


@contextlib.contextmanager
def heartbeat(
    *, every: float = 30.0, enabled: bool = True, stream: TextIO | None = None
) -> Iterator[None]:
    """While the block runs, print :func:`status` whenever nothing was said for ``every`` seconds.

    A daemon thread; it stops with the block. ``enabled=False`` (progress off,
    or another process of a launched run) prints nothing.
    """
    if not enabled:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(max(0.05, every - (time.monotonic() - _last_said[0]))):
            with _lock:
                shown = bool(_phases) and _phases[-1].bar is not None
            if shown:  # a bar is showing the innermost phase already
                _last_said[0] = time.monotonic()
            elif time.monotonic() - _last_said[0] >= every:
                say(status(), stream)

    _last_said[0] = time.monotonic()
    thread = threading.Thread(target=beat, name="llm-envs heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
