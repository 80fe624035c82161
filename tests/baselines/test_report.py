"""The report: plots from metrics.jsonl and HTML transcript pages from episode records."""

from __future__ import annotations

import json

import pytest

from baselines.report import load_metrics, main, write_report
from llm_envs.agents import MalformedDebater, scripted_debaters
from llm_envs.debate import raw_env
from llm_envs.testing.conformance import play_aec

pytest.importorskip("matplotlib")


def debate_record(malformed: bool = False):
    env = raw_env(num_agents=3, max_rounds=2, on_parse_error="mask")
    agents = dict(scripted_debaters(3, seed=1))
    if malformed:
        agents["agent_2"] = MalformedDebater("prose")
    play_aec(env, lambda a, o, i: agents[a](o, i), seed=0, options={"question": "Is <b>1 & 2</b>?"})
    return env.record()


@pytest.fixture
def run_dir(tmp_path):
    rows = [
        {"iteration": i, "env/all/reward/total": 0.1 * i, "optim/kl_sample_train_v1": 1e-4,
         "time/total": 3.0, "env/all/parse_error": 0.5 - 0.1 * i}
        for i in range(4)
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    episodes = tmp_path / "episodes"
    episodes.mkdir()
    lines = [json.dumps({**debate_record(m), "iteration": 0}) for m in (False, True)]
    (episodes / "iter_00000.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_report_writes_plots_and_transcripts(run_dir):
    index = write_report(run_dir)
    assert index == run_dir / "report" / "index.html"
    names = {p.name for p in index.parent.iterdir()}
    assert {"reward.png", "optim.png", "time.png", "env.png", "iter_00000.html"} <= names
    assert (index.parent / "reward.png").stat().st_size > 5_000
    page = (index.parent / "iter_00000.html").read_text()
    # Escaped, never injected: the question holds markup.
    assert "Is &lt;b&gt;1 &amp; 2&lt;/b&gt;?" in page and "<b>1 & 2</b>" not in page
    assert page.count('class="turn') == 12  # 2 debates x 3 agents x 2 rounds
    assert page.count('class="turn error"') == 2  # the malformed agent, both rounds
    assert "Round 2" in page and "raw output" in page and "Agent 0 &gt; Agent 1" in page
    assert 'href="iter_00000.html"' in index.read_text()


def test_report_errors_and_cli(tmp_path, run_dir, capsys):
    with pytest.raises(FileNotFoundError, match=r"no metrics\.jsonl"):
        write_report(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.jsonl").write_text('{"iteration": 0}\nnot json\n{}\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2 is not JSON"):
        load_metrics(tmp_path / "bad" / "metrics.jsonl")
    main([str(run_dir), "--out", str(tmp_path / "out")])
    assert capsys.readouterr().out.strip().endswith("index.html")


def test_plots_put_evaluation_apart_and_split_large_groups(tmp_path):
    from baselines.report import plot_metrics

    env = {f"env/turn_{t}/pass_rate": t for t in range(40)}
    rows = [{"iteration": i, "eval/reward/total": 0.5, **env} for i in range(3)]
    written = plot_metrics(rows, tmp_path)
    # evaluation has its own figure, not the training reward's; 40 panels make two figures
    assert [p.name for p in written] == ["eval.png", "env.png", "env_2.png"]
    assert all(p.stat().st_size > 5_000 for p in written)


def test_a_training_context_shows_as_a_chat_not_as_json():
    from baselines.report import episode_html

    record = {
        "title": "swap",
        "turns": [
            {
                "agent": "solver",
                "round": 2,
                "prompt": [{"role": "user", "content": "What is 2 * 4?"}],
                "text": "8",
                "details": {
                    "loss_weight": 1.0,
                    "training_messages": [
                        {"role": "user", "content": "What is <2> * 4?"},
                        {"role": "assistant", "content": "15"},
                    ],
                },
            }
        ],
    }
    page = episode_html(record)
    assert "<summary>2 messages</summary>" in page
    assert "<b>assistant</b><pre>15</pre>" in page and "What is &lt;2&gt; * 4?" in page
    assert '"role"' not in page  # not dumped as JSON


def test_first_and_last_skips_missing_and_non_finite_values():
    from baselines.report import first_and_last

    rows = [{"x": 1}, {"r": float("inf")}, {"r": -0.5}, {"r": 0.125}, {"r": True}, {}]
    assert first_and_last(rows, "r") == "-0.500 -> 0.125"
    assert first_and_last(rows, "missing") == "not logged"
