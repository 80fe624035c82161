"""Smoke test: ``examples/tour.py`` runs as a user would run it and tells the story it promises."""

from __future__ import annotations

import re


def test_tour_plays_each_family_and_prints_their_rewards(run_example):
    out = run_example("tour.py", timeout=120).stdout
    for section in ("Debate-v0", "ExpertIteration-v0", "CodeCollab-v0"):
        assert section in out
    # debate: three leave-one-out win rates in [0, 1]
    rewards = [float(r) for r in re.findall(r"agent_\d: final reward ([\d.]+)", out)]
    assert len(rewards) == 3 and all(0.0 <= r <= 1.0 for r in rewards)
    # expert iteration: attempt 1 is not trained on, the corrected attempt 2 earns the reward
    assert "attempt 1's loss weight (an outcome key): 0.0" in out
    assert "final reward 1.0" in out
    # code collaboration: the fixed program reaches the top level reward
    assert re.search(r"turn 2: reward 4\.00 .*\(3/3 tests\)", out)
