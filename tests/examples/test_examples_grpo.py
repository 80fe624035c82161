"""Smoke tests: the TRL GRPO examples run as a user runs them, on a tiny model.

Each example runs as a subprocess with ``--model tiny`` and the smallest sizes
(one step, one item, 8 tokens per turn); the test checks what the example
promises: a trained step in ``metrics.jsonl``, the report's ``index.html``
linking a transcript page of that step, and the printed summary.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

# Each example trains a tiny model for a step.
pytestmark = [pytest.mark.slow, pytest.mark.training]

TINY = ["--model", "tiny", "--steps", "1", "--max-tokens", "8", "--seed", "3"]


def check_run(run_dir: Path, out: str) -> str:
    """Check metrics, report and summary; return the step's transcript page."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows if "reward" in row] == [1]
    index = run_dir / "report" / "index.html"
    page = run_dir / "report" / "step_00001.html"
    assert page.name in index.read_text()
    assert re.search(
        r"mean reward, first step -> last step: -?[\d.]+ -> -?[\d.]+ \((rose|fell|did not move)",
        out,
    )
    assert f"report: {index}" in out
    return page.read_text()


def test_grpo_debate(tmp_path, run_example):
    run_dir = tmp_path / "debate"
    out = run_example(
        "grpo_debate.py",
        *TINY,
        *["--agents", "2", "--rounds", "1", "--questions-per-step", "1"],
        *["--output-dir", str(run_dir)],
    ).stdout
    page = check_run(run_dir, out)
    assert "agent_0" in page  # the step's first debate


def test_grpo_expert_iteration(tmp_path, run_example):
    run_dir = tmp_path / "expert_iteration"
    out = run_example(
        "grpo_expert_iteration.py",
        *TINY,
        *["--generations", "2", "--problems-per-step", "1", "--output-dir", str(run_dir)],
    ).stdout
    page = check_run(run_dir, out)
    assert page.count("<h2>") == 2 and "two_turn_feedback" in page  # the whole group
    # The printed completion: attempt 1 and the feedback masked, attempt 2 trained.
    masked = out.index("--- env_mask 0")
    assert "Feedback on your answer" in out[masked:]
    assert out.index("--- env_mask 1") > masked


def test_grpo_code_collab(tmp_path, run_example):
    run_dir = tmp_path / "code_collab"
    out = run_example(
        "grpo_code_collab.py",
        *TINY,
        *["--generations", "2", "--turns", "2", "--output-dir", str(run_dir)],
    ).stdout
    page = check_run(run_dir, out)
    # The whole group of the step's problem: the code per turn, the tests, the feedback.
    assert page.count("<h2>") == 2 and "code_collab_v0 · HumanEval/" in page
    assert "not_run: assert" in page or "passed: assert" in page or "failed (" in page
    assert "Static and execution diagnostics" in page  # the feedback before turn 2
    # The printed completion: turn 1 trained, the feedback masked, turn 2 trained.
    assert [int(m) for m in re.findall(r"--- env_mask (\d)", out)][:3] == [1, 0, 1]
    masked = out.index("--- env_mask 0")
    assert "Static and execution diagnostics" in out[masked:]
    assert re.search(r"step  return  pass_rate \(last turn\)\n +1 +-?[\d.]+ +[\d.]+", out)
