"""The evaluator's meter column: each entrant's Kuhn Poker exploitability, kept in meter.json."""

from __future__ import annotations

import json

import pytest

from baselines.eval.run import Evaluation
from tests.baselines.eval.test_run import config

KUHN = {"game": "KuhnPoker-v0", "payoff": "chips", "game_kwargs": {"max_rounds": 1}}
SCRIPTED = ("scripted:always_bet", "reference", "scripted:random")


def test_each_entrant_gets_its_exploitability(tmp_path, monkeypatch):
    settings = {
        "models": SCRIPTED,
        "env": "textarena",
        "env_kwargs": KUHN,
        "task": "default",
        "problems": 2,
        "meter_samples": 32,
    }
    summary = Evaluation(config(tmp_path, **settings)).run()
    metrics = {s.model: s.metrics for s in summary.scores}
    always, nash, uniform = (metrics[m] for m in SCRIPTED)
    assert always["exploitability"] == pytest.approx(1 / 3)
    # The reference (a Nash equilibrium) reads near 0, well below uniform play (11/24).
    assert nash["exploitability"] < 0.1
    assert nash["exploitability_high"] < uniform["exploitability_low"]
    assert uniform["exploitability_low"] <= 11 / 24 <= uniform["exploitability_high"]
    assert "exploitability" in summary.headline
    assert "| exploitability |" in summary.scores_markdown()
    saved = json.loads((tmp_path / "run" / "meter.json").read_text())
    assert set(saved["models"]) == set(SCRIPTED) and saved["settings"]["samples"] == 32

    # Run again: the numbers come from meter.json, nothing is sampled.
    def refuse(*args, **kwargs):
        raise AssertionError("measured again")

    evaluation = Evaluation(config(tmp_path, **settings))
    monkeypatch.setattr(type(evaluation.arena.family), "measure", refuse)
    again = evaluation.run()
    assert {s.model: s.metrics for s in again.scores} == metrics


def test_a_game_without_a_meter_has_no_column(tmp_path):
    settings = {
        "models": ("scripted:random", "reference"),
        "env": "textarena",
        "env_kwargs": {"game": "TicTacToe-v0"},
        "task": "default",
        "problems": 1,
    }
    summary = Evaluation(config(tmp_path, **settings)).run()
    assert "exploitability" not in summary.headline
    assert not (tmp_path / "run" / "meter.json").exists()
