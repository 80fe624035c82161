"""Where a run's time goes, as its worker saw it: the timeline behind bench/sandbox.py's breakdown.

Every worker reply carries its run's timeline: the wall time of each of
:data:`PHASES`, in microseconds, measured by the worker (the run's own process
reports nothing). :func:`record` collects the timelines of every run answered
while it is active, from any pool and thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["PHASES", "note", "record"]

#: The phases of a run, in order. ``request``: the job decoded, its tests taken
#: from the cache, the program compiled. ``spawn``: waiting for the run the
#: spawner forked ahead (the fork, where it did not finish while the worker
#: answered the last run). ``load``: the job sent to the run, which executes the
#: program and reports its names. ``tests``: the setup and the tests, in the
#: judge, with every call into the run. ``exit``: the run asked to exit, until
#: it has (its process torn down). ``cleanup``: what the run left killed and
#: checked, the next run's pipes and go. ``reply``: the run's output read, its
#: directory emptied, the reply built.
PHASES = ("request", "spawn", "load", "tests", "exit", "cleanup", "reply")

_recordings: list[list[tuple[int, ...]]] = []


@contextlib.contextmanager
def record() -> Iterator[list[tuple[int, ...]]]:
    """Collect the timeline of every run answered while the block runs.

    Yields:
        A list that gets one tuple per run: microseconds in each of :data:`PHASES`.
    """
    timelines: list[tuple[int, ...]] = []
    _recordings.append(timelines)
    try:
        yield timelines
    finally:
        _recordings.remove(timelines)


def note(timeline: object) -> None:
    """Hand a reply's timeline to the active recordings (a malformed one is dropped)."""
    if _recordings and type(timeline) is list and len(timeline) == len(PHASES):
        entry = tuple(int(value) for value in timeline)
        for timelines in list(_recordings):
            timelines.append(entry)
