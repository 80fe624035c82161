"""The worker's timeline of each run (llm_envs.sandbox.phases), as bench/sandbox.py reads it."""

from __future__ import annotations

import time

import pytest

from llm_envs.sandbox import Sandbox
from llm_envs.sandbox.phases import PHASES, note, record

SLEEPY = "import time\ntime.sleep(0.05)\ndef f(x):\n    time.sleep(0.05)\n    return x\n"


def test_each_run_answered_while_recording_gives_its_timeline(sandbox: Sandbox) -> None:
    sandbox.run_tests("def f(x):\n    return x\n", ["assert f(1) == 1"])  # not recorded
    with record() as timelines:
        start = time.monotonic()
        reports = sandbox.run_tests_many([(SLEEPY, ["assert f(1) == 1"], "")] * 2)
        elapsed = time.monotonic() - start
    assert all(report.all_passed for report in reports)
    assert len(timelines) == 2
    for timeline in timelines:
        assert len(timeline) == len(PHASES)
        assert all(type(value) is int and value >= 0 for value in timeline)
        phase = dict(zip(PHASES, timeline, strict=True))
        # The program sleeps 50 ms loading and 50 ms in the call: each lands in its phase.
        assert phase["load"] >= 50_000 and phase["tests"] >= 50_000
        assert sum(timeline) <= elapsed * 1e6
    sandbox.run_tests("def f(x):\n    return x\n", ["assert f(1) == 1"])
    assert len(timelines) == 2  # (the recording ended with its block)


def test_recordings_nest_and_a_run_that_never_started_has_no_timeline(sandbox: Sandbox) -> None:
    with record() as outer:
        with record() as inner:
            sandbox.run_tests("def f(x):\n    return x\n", ["assert f(1) == 1"])
        sandbox.run_tests("def f(:\n", ["assert f(1) == 1"])  # does not compile: no run
    assert len(inner) == 1 and len(outer) == 1


@pytest.mark.parametrize(
    "timeline",
    [None, "1,2,3,4,5,6,7", [1, 2, 3], list(range(len(PHASES) + 1)), {"load": 1}],
)
def test_a_malformed_timeline_is_dropped(timeline: object) -> None:
    with record() as timelines:
        note(timeline)
        note(list(range(len(PHASES))))
    assert timelines == [tuple(range(len(PHASES)))]
