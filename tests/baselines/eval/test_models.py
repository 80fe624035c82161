"""The eval command with real models: the tiny model in process, and a real `vllm serve`."""

from __future__ import annotations

import json

import pytest

from baselines.eval.__main__ import main
from baselines.eval.entrants import build_policies, parse_entrants

pytestmark = pytest.mark.slow

DEBATE = '{"num_agents": 3, "max_rounds": 1, "on_parse_error": "mask"}'


def test_entrants_of_one_folder_load_the_model_once(tiny_model_dir):
    specs = [f"a={tiny_model_dir}", f"b={tiny_model_dir}@temperature=1.5"]
    policies = build_policies(parse_entrants(specs))
    assert policies["a"].inner is policies["b"].inner


def test_a_tournament_of_local_models_from_the_command_line(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    status = main(
        [
            "--env-kwargs", DEBATE, "--task", "arithmetic", "--problems", "1",
            "--max-tokens", "8", "--num-bootstrap", "20", "--device", "cpu",
            "--output-dir", str(out), "--no-progress",
            "--models", f"cold={tiny_model_dir}@temperature=0.3",
            f"hot={tiny_model_dir}@temperature=1.5", "tiny",
        ]
    )  # fmt: skip
    assert status == 0
    printed = capsys.readouterr().out
    # The tournament table, under the line saying what its ranking rests on.
    assert "Ranked by" in printed or "No judgement compares two models" in printed
    assert "| rank | model | rating |" in printed and "| cold | 3 |" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert [s["model"] for s in summary["scores"]] == ["cold", "hot", "tiny"]
    assert summary["tournament"]["votes_total"] == 0  # a random model writes no XML
    assert (out / "report" / "index.html").exists()


def test_before_and_after_against_vllm_serve(vllm_server, tiny_model_dir, tmp_path, capsys):
    # The same weights served by vLLM and loaded locally: the two scores side by side.
    out = tmp_path / "run"
    status = main(
        [
            "--env", "expert_iteration", "--problems", "3", "--max-tokens", "8",
            "--num-bootstrap", "50", "--device", "cpu", "--output-dir", str(out),
            "--no-progress", "--api-key-env", "none",
            "--models", f"served={vllm_server}#tiny", f"local={tiny_model_dir}",
        ]
    )  # fmt: skip
    assert status == 0
    printed = capsys.readouterr().out
    assert "| served | 3 |" in printed and "minus served" in printed
    lines = [json.loads(x) for x in (out / "episodes" / "eval.jsonl").read_text().splitlines()]
    assert len(lines) == 6 and {line["seats"]["solver"] for line in lines} == {"served", "local"}
    served = [line for line in lines if line["seats"]["solver"] == "served"]
    assert all(line["turns"][0]["text"] is not None for line in served)
