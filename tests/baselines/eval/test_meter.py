"""The evaluator's meter column: each entrant's Kuhn Poker exploitability, kept in meter.json."""

from __future__ import annotations

import json

import pytest

from baselines.eval.run import Evaluation
from baselines.samplers.scripted import ScriptedPolicy
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
        "models": ("a=scripted:random", "b=scripted:random"),
        "env": "textarena",
        "env_kwargs": {"game": "IteratedPrisonersDilemma-v0"},
        "task": "default",
        "problems": 1,
    }
    summary = Evaluation(config(tmp_path, **settings)).run()
    assert "exploitability" not in summary.headline
    assert not (tmp_path / "run" / "meter.json").exists()


def test_a_debate_gets_each_entrant_s_majority_vote(tmp_path):
    from llm_envs.debate.agents import MalformedDebater

    settings = {
        "models": ("reference", "broken"),
        "env_kwargs": {"num_agents": 3, "max_rounds": 1},
        "problems": 3,
        "meter_samples": 0,  # debate has no meter: its majority vote is measured regardless
    }
    policies = {"broken": ScriptedPolicy(MalformedDebater("prose"))}
    evaluation = Evaluation(config(tmp_path, **settings), policies=policies)
    policies["reference"] = ScriptedPolicy(evaluation.arena.family.reference_players())
    summary = evaluation.run()
    metrics = {s.model: s.metrics for s in summary.scores}
    # The reference answers every question right, alone as in the debate; prose never parses.
    assert metrics["reference"]["majority_vote/correct"] == 1.0
    assert metrics["reference"]["single_answer/correct"] == 1.0
    assert metrics["broken"]["majority_vote/correct"] == 0.0
    assert "majority_vote/correct" in summary.headline
    assert "| majority vote correct |" in summary.scores_markdown()
    saved = json.loads((tmp_path / "run" / "meter.json").read_text())
    assert saved["settings"]["problems"] == 3
