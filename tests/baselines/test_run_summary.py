"""A finished run says what it trained, what moved, where its report is, what next, and its disk."""

from __future__ import annotations

import json
from pathlib import Path

from baselines.report.summary import disk_use, run_summary
from baselines.training.run import finish_run


def _run(tmp_path: Path, *, league: bool = False) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    config = {
        "model": "tiny",
        "env": "textarena",
        "env_kwargs": {"game": "TicTacToe-v0"},
        "task": "default",
        "num_iterations": 2,
    }
    (run / "config.json").write_text(json.dumps(config))
    rows = [
        {"iteration": 0, "eval/reward/total": -1.0, "eval/all/invalid_move": 0.75},
        {"iteration": 0, "env/all/reward/total": -0.5, "loss": 0.1},
        {"iteration": 1, "env/all/reward/total": 0.0, "loss": 0.05},
        {"iteration": 2, "eval/reward/total": -0.5, "eval/all/invalid_move": 0.5},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    checkpoint = run / "checkpoints" / "iteration_000002"
    checkpoint.mkdir(parents=True)
    (checkpoint / "optimizer.bin").write_bytes(b"\0" * 3000)
    (checkpoint / "model.safetensors").write_bytes(b"\0" * 1000)
    (run / "final_model").mkdir()
    if league:
        for k in (0, 2, 4, 6):
            (run / "league" / f"snapshot_{k:05d}").mkdir(parents=True)
    return run


def test_the_summary_of_a_run(tmp_path):
    run = _run(tmp_path)
    report = run / "report" / "index.html"
    text = run_summary(run, trainer="llm-envs train", report=report)
    total, optimizer = disk_use(run)
    assert optimizer == 3000
    assert text.splitlines() == [
        "== done. llm-envs train: tiny on textarena, 2 iterations",
        "before -> after:",
        "  reward: -1.000 -> -0.500 (rose by 0.500)  [eval/reward/total]",
        "next:",
        f"  evaluate the trained model: llm-envs eval --env textarena --env-kwargs "
        f'\'{{"game": "TicTacToe-v0"}}\' --models tiny {run / "final_model"}',
        f"  open the report: {report}",
        f"disk: {total / 1000:.1f} KB in {run} (3.0 KB of it optimizer state, kept to resume)",
    ]


def test_a_league_run_says_how_to_rate_its_latest_snapshots(tmp_path):
    run = _run(tmp_path, league=True)
    text = run_summary(run, trainer="llm-envs train", report=None)
    snapshots = " ".join(str(run / "league" / f"snapshot_{k:05d}") for k in (2, 4, 6))
    assert (
        f"  rate the league's snapshots: llm-envs eval --env textarena --env-kwargs "
        f'\'{{"game": "TicTacToe-v0"}}\' --models {snapshots} reference '
        f"--output-dir {run / 'league' / 'eval'}"
    ) in text.splitlines()
    assert f"  write the report: llm-envs report {run}" in text.splitlines()


def test_a_run_without_metrics_still_ends_with_a_summary(tmp_path):
    run = tmp_path / "empty"
    run.mkdir()
    text = finish_run(run, "llm-envs train")
    assert "no metrics were logged" in text
    assert "the report could not be written: FileNotFoundError" in text
    assert f"write the report: llm-envs report {run}" in text


def test_finish_run_writes_the_report(tmp_path):
    run = _run(tmp_path)
    text = finish_run(run, "llm-envs train")
    assert (run / "report" / "index.html").exists()
    assert f"open the report: {run / 'report' / 'index.html'}" in text


def test_an_iteration_whose_groups_all_pay_the_same_says_there_is_nothing_to_learn():
    from baselines.training.run import nothing_to_learn

    assert nothing_to_learn({"data/num_groups": 12, "data/num_groups_with_signal": 0}) == (
        "nothing to learn in this iteration: in each of its 12 groups every episode was paid the "
        "same, so every advantage is 0. If later iterations say so too, the policy cannot tell "
        "better from worse: try a warm start (--warm-start-steps), bigger groups, or reward "
        "shaping (docs/trainer.md)"
    )
    assert nothing_to_learn({"data/num_groups": 12, "data/num_groups_with_signal": 1}) is None
    assert nothing_to_learn({"loss": 0.0}) is None  # a trainer that does not log groups
