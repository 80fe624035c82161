"""Smoke tests: the importance-sampling trainer's examples run as a user runs them, on a tiny model.

Each example runs as a subprocess with ``--model tiny`` and the smallest sizes,
then the test checks what the example promises: the iterations in
``metrics.jsonl``, the report's ``index.html`` with an episode page, and the
printed summary (for expert iteration, a context swap whose training messages
differ from the sampling messages).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

# The smallest run: a random two-layer model, one group, two iterations, 8 tokens per turn.
TINY = ["--model", "tiny", "--iterations", "2", "--groups", "1", "--max-tokens", "8"]
TINY += ["--sampler", "transformers", "--eval-groups", "1"]


def check_run(run_dir: Path, out: str, iterations: int) -> None:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [row["iteration"] for row in rows if "env/all/reward/total" in row]
    assert trained == list(range(iterations))
    # evaluated before the first iteration and after the last
    assert [row["iteration"] for row in rows if "eval/reward/total" in row] == [0, iterations]
    index = run_dir / "report" / "index.html"
    assert index.is_file()
    pages = sorted(p.name for p in (run_dir / "report").glob("iter_*.html"))
    assert pages and pages[0] in index.read_text()
    assert f"report: {index}" in out


def test_debate_self_play_judging_flags_reach_the_environment():
    example = _debate_example()
    flags = ["--on-parse-error", "mask", "--shuffle-answers", "--shaping-vote", "0.25"]
    flags += ["--no-shuffle-labels", "--shaping-judge", "0", "--rounds", "2"]
    config = example.build_config(example.parse_args(flags))
    assert config.env_kwargs == {
        "num_agents": 3,
        "max_rounds": 2,
        "reward": "win_rate",
        "shuffle_answers": True,
        "on_parse_error": "mask",
        "shaping": {"contract": 0.5, "correct": 0.5, "vote": 0.25},
    }
    # The main job's defaults: one round, judging shaped, shuffled labels, a teacher that
    # answers wrong half the time.
    main = example.build_config(example.parse_args([]))
    assert main.env_kwargs == {
        "num_agents": 3,
        "max_rounds": 1,
        "reward": "win_rate",
        "shuffle_labels": True,
        "shaping": {"contract": 0.5, "correct": 0.5, "judge": 0.5, "vote": 0.5},
    }
    assert (main.warm_start.steps, main.warm_start.mistake_rate) == (6, 0.5)
    # The flags the docstring names give the recipe's debate as it is.
    recipe = ["--warm-start-steps", "0", "--shaping", "0", "0", "--shaping-judge", "0"]
    recipe += ["--shaping-vote", "0", "--no-shuffle-labels", "--rounds", "3", "--task", "default"]
    assert example.build_config(example.parse_args(recipe)).env_kwargs == {
        "num_agents": 3,
        "max_rounds": 3,
        "reward": "win_rate",
    }


@pytest.mark.slow
@pytest.mark.training
def test_debate_self_play_trains_and_reports(tmp_path, run_example):
    run_dir = tmp_path / "debate"
    out = run_example(
        "debate_self_play.py",
        *TINY,
        *["--agents", "3", "--rounds", "1", "--warm-start-steps", "1"],
        *["--output-dir", str(run_dir)],
    ).stdout
    check_run(run_dir, out, iterations=2)
    # The tiny model is not the main job: its precision and sampler, and no duration.
    assert re.search(
        r"main job: (fp32|bf16) \(.*\), .* sampler .*; duration not measured for "
        r"these settings",
        out,
    ), out[:500]
    config = json.loads((run_dir / "config.json").read_text())
    assert config["env"] == "debate" and config["task"] == "arithmetic"
    assert config["env_kwargs"] == {
        "num_agents": 3,
        "max_rounds": 1,
        "reward": "win_rate",
        "shuffle_labels": True,
        "shaping": {"contract": 0.5, "correct": 0.5, "judge": 0.5, "vote": 0.5},
    }
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["warm_start/steps"] == 1
    moved = r"-?[\d.]+ -> -?[\d.]+ \((rose by|fell by|did not move)"
    for line in ("reward curve", "parse errors", "eval parse errors vs the initial model"):
        assert re.search(
            rf"{line}, first -> last: {moved}" if "eval" not in line else rf"{line}: {moved}", out
        ), line


@pytest.mark.slow
@pytest.mark.training
def test_expert_iteration_mixed_shows_the_context_swap(tmp_path, run_example):
    run_dir = tmp_path / "expert_iteration"
    out = run_example(
        "expert_iteration_mixed.py",
        *TINY,
        *["--mix", "iid=1", "answer_hint=1", "two_turn_feedback=1"],
        *["--output-dir", str(run_dir)],
    ).stdout
    check_run(run_dir, out, iterations=2)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["strategy_mix"] == {"iid": 1, "answer_hint": 1, "two_turn_feedback": 1}
    assert config["strategy_weights"]["answer_hint"] == 0.5

    # The two_turn_feedback episode: attempt 1 is not trained on and keeps its context;
    # attempt 2 is trained on other messages than it was sampled on (the feedback removed).
    assert "(two_turn_feedback)" in out
    turns = re.findall(
        r"attempt (\d), loss_weight ([\d.]+)\n    sampled on:\n((?:      .*\n)+)"
        r"    trained on:\n((?:      .*\n)+)",
        out,
    )
    assert [(number, float(weight)) for number, weight, *_ in turns] == [("1", 0.0), ("2", 1.0)]
    (_, _, sampled_1, trained_1), (_, _, sampled_2, trained_2) = turns
    assert trained_1.strip() == "(the same messages)"
    assert sampled_2.startswith(sampled_1)  # attempt 2 continues attempt 1's chat
    assert sampled_2 != trained_2
    assert "Feedback on your answer" in sampled_2 and "Feedback" not in trained_2
    # stratified scales w_s / n_s with one episode per strategy and group
    assert re.search(r"answer_hint +0\.50 / 1 = 0\.500", out)
    assert re.search(r"held-out iid accuracy \(eval/correct\): [\d.]+ -> [\d.]+", out)


def test_expert_iteration_mixed_rejects_a_malformed_mix(run_example):
    done = run_example("expert_iteration_mixed.py", "--mix", "iid", timeout=120, ok=False)
    assert done.returncode == 2
    assert "expected strategy=int, e.g. iid=2, got 'iid'" in done.stderr


def _debate_example():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "debate_self_play.py"
    spec = importlib.util.spec_from_file_location("debate_self_play", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


@pytest.mark.parametrize(
    ("precision", "sampler", "flags", "vllm", "expected"),
    [
        (
            "bf16",
            "auto",
            {"avx512_bf16", "avx2"},
            True,
            "main job: bf16 (this CPU has avx512_bf16), vLLM sampler (installed); expected 6.5 "
            "to 8.5 minutes (2 quiet cores with bf16 arithmetic) on 2 cores",
        ),
        (
            "auto",
            "auto",
            {"avx2"},
            True,
            "main job: fp32 (no bf16 arithmetic on this CPU (avx512_bf16 or amx_bf16)), vLLM "
            "sampler (installed); expected over 23 minutes (2 quiet AVX2-only cores: stopped at "
            "23 in its last evaluation) on 2 cores",
        ),
        (
            "auto",
            "auto",
            {"avx2"},
            False,
            "main job: fp32 (no bf16 arithmetic on this CPU (avx512_bf16 or amx_bf16)), "
            "transformers sampler (vLLM not installed: sampling about 3x slower; see the README); "
            "duration not measured for this choice",
        ),
        (
            "fp32",
            "transformers",
            {"amx_bf16"},
            True,
            "main job: fp32 (as asked), transformers sampler (as asked); duration not measured "
            "for this choice",
        ),
    ],
)
def test_the_main_job_says_its_precision_sampler_and_duration(
    precision, sampler, flags, vllm, expected
):
    assert _debate_example().plan(precision, sampler, frozenset(flags), vllm, 2) == expected


def test_a_run_of_another_size_keeps_the_whole_choice_and_names_no_duration():
    line = _debate_example().plan("auto", "auto", frozenset({"avx2"}), False, 2, sized=False)
    assert line == (
        "main job: fp32 (no bf16 arithmetic on this CPU (avx512_bf16 or amx_bf16)), "
        "transformers sampler (vLLM not installed: sampling about 3x slower; see the README); "
        "duration not measured for these settings"
    )
