"""Smoke test: the MAGRPO example runs as a user runs it, on a tiny model, and writes its report.

The example runs as a subprocess with ``--model tiny`` and the smallest sizes
(one problem per iteration, G = 2, two turns, 8 tokens, one held-out problem);
the test checks what it promises: the iterations and evaluations in
``metrics.jsonl``, the report's ``index.html`` linking the transcript pages, a
transcript with both agents' turns, their code, the test results and the
feedback, and the printed summary.
"""

from __future__ import annotations

import json
import re

import pytest

# The example trains a tiny model for two iterations.
pytestmark = [pytest.mark.slow, pytest.mark.training]

TINY = ["--model", "tiny", "--iterations", "2", "--problems", "1", "--group-size", "2"]
TINY += ["--turns", "2", "--max-tokens", "8", "--eval-problems", "1", "--threads", "1"]


def test_magrpo_coophumaneval_trains_and_reports(tmp_path, run_example):
    run_dir = tmp_path / "magrpo"
    out = run_example("magrpo_coophumaneval.py", *TINY, "--output-dir", str(run_dir)).stdout

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows if "env/all/reward/total" in r] == [0, 1]
    assert [r["iteration"] for r in rows if "eval/num_problems" in r] == [0, 2]
    first = rows[0]
    assert first["env/turn_1/joint_actions"] == 2 and first["env/turn_2/joint_actions"] == 4
    config = json.loads((run_dir / "config.json").read_text())
    assert config["env"] == "code_collab" and config["task"] == "coophumaneval"
    assert config["env_kwargs"] == {
        "num_agents": 2,
        "external_mode": "level_feedback",
        "num_turns": 2,
    }
    assert config["joint_mode"] == "align"

    report = run_dir / "report"
    index = (report / "index.html").read_text()
    pages = ["eval_00000.html", "eval_00002.html", "iter_00000.html", "iter_00001.html"]
    assert sorted(p.name for p in report.glob("*.html") if p.name != "index.html") == pages
    assert all(f'href="{page}"' in index for page in pages)
    page = (report / "iter_00000.html").read_text()
    assert page.count('class="turn') == 4  # helper and main, two turns
    assert "Round 2" in page and "code_collab_v0 · CoopHumanEval/" in page
    # The random model writes no function, so no test runs; every test is listed.
    assert re.search(r"<td>tests</td><td>0/\d+ passed</td>", page)
    assert "not_run: assert candidate(" in page and "sandbox_status" in page
    assert "Static and execution diagnostics" in page  # the feedback before turn 2
    assert "<td>advantage</td>" in page and "raw output" in page
    assert "def " in page  # the problem's code in the prompt

    assert re.search(r"iteration 0: turn 1: reward [\d.]+, pass rate [\d.]+ \| turn 2:", out)
    assert re.search(r"iteration 1: turn 1: reward", out)
    assert "evaluation before training (1 problems, greedy)" in out
    assert "evaluation after 2 iterations" in out
    assert f"report: {report / 'index.html'}" in out
