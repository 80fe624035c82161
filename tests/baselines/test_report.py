"""The report: what a run did on its first screen, its curves, and per-agent rewards in transcripts.

Run folders are written by hand, with the metric names each trainer logs
(the importance-sampling trainer, MAGRPO, the TRL runner), and episode records
played by the scripted agents; the rewards the report reads from a record are
checked against the rewards the environment paid.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from baselines.report import (
    constant_series,
    episode_html,
    episode_rewards,
    first_and_last,
    headline_metrics,
    load_metrics,
    main,
    metric_series,
    run_counts,
    write_report,
)
from llm_envs import code_collab, debate, expert_iteration
from llm_envs.code_collab import ScriptedCoder
from llm_envs.debate import DebateQuestion, JudgingDebater, MalformedDebater, scripted_debaters
from llm_envs.expert_iteration import ScriptedMathSolver
from llm_envs.tasks import CodeProblem, MathProblem
from llm_envs.testing.conformance import play_aec

# ----------------------------------------------------------------- episodes, played


def returns_of(seen: list[tuple[Any, ...]]) -> dict[str, float]:
    """Each agent's return: the sum of the rewards ``last()`` gave it."""
    returns: dict[str, float] = {}
    for agent, _, reward, *_ in seen:
        returns[agent] = returns.get(agent, 0.0) + reward
    return returns


def debate_episode(malformed: str | None = None, seed: int = 0, **kwargs: Any):
    env = debate.env(num_agents=3, max_rounds=2, **kwargs)
    agents = dict(scripted_debaters(3, seed=seed))
    if malformed:
        agents[malformed] = MalformedDebater("prose")
    seen = play_aec(env, lambda a, o, i: agents[a](o, i), options={"question": "Is <b>1 & 2</b>?"})
    return env.unwrapped.record(), returns_of(seen)


def expert_iteration_episode(**kwargs: Any):
    env = expert_iteration.raw_env(
        problems=[MathProblem("t/1", "What is 12 + 30?", "42")], **kwargs
    )
    solver = ScriptedMathSolver()
    seen = play_aec(env, lambda a, o, i: solver(o, i) if a == "solver" else "Check the sum.")
    return env.record(), returns_of(seen)


def code_collab_episode():
    problem = CodeProblem(
        task_id="t/sum_of_squares",
        prompt='def sum_of_squares(xs):\n    """Return the sum of the squares of xs."""\n',
        entry_point="sum_of_squares",
        tests=("assert candidate([1, 2, 3]) == 14", "assert candidate([]) == 0"),
        test_setup="candidate = sum_of_squares",
    )
    helper = ScriptedCoder(["def aux(x):\n    return x * 2\n", "def aux(x):\n    return x * x\n"])
    main_coder = ScriptedCoder("def sum_of_squares(xs):\n    return sum(aux(x) for x in xs)\n")
    env = code_collab.parallel_env(problems=[problem], num_turns=2)
    observations, infos = env.reset(seed=0)
    returns = dict.fromkeys(env.possible_agents, 0.0)
    while env.agents:
        actions = {
            "helper": helper(observations["helper"], infos["helper"]),
            "main": main_coder(observations["main"], infos["main"]),
        }
        observations, rewards, _, _, infos = env.step(actions)
        for agent, reward in rewards.items():
            returns[agent] += reward
    return env.unwrapped.record(), returns


# What each agent earned, as the report reads it from the record, against what the
# environment paid; env_kwargs are the run's config.json "env_kwargs".
REWARD_CASES = [
    # (case, play, env_kwargs, rewards, how the first agent's adds up)
    (
        "debate, agent_0 breaks the format: penalized, the episode ends",
        lambda: debate_episode(malformed="agent_0"),
        {},
        {"agent_0": -1.0, "agent_1": 0.0, "agent_2": 0.0},
        "parse-error penalty -1 + win_rate 0",
    ),
    (
        "debate, everyone answers and votes",
        lambda: debate_episode(),
        {"reward": "win_rate"},
        {"agent_0": 1 / 3, "agent_1": 0.5, "agent_2": 0.75},
        "win_rate 0.3333",
    ),
    (
        "debate, win_minus_loss, agent_2's errors masked",
        lambda: debate_episode("agent_2", on_parse_error="mask", reward="win_minus_loss"),
        {"on_parse_error": "mask", "reward": "win_minus_loss"},
        {"agent_0": 0.0, "agent_1": -1.0, "agent_2": 0.5},
        "win_minus_loss 0",
    ),
    (
        "debate, contract shaping: 0.5 for each of two well-formed answers",
        lambda: debate_episode(shaping={"contract": 0.5}),
        {"shaping": {"contract": 0.5}},
        {"agent_0": 1 / 3 + 1.0, "agent_1": 0.5 + 1.0, "agent_2": 0.75 + 1.0},
        "win_rate 0.3333 + shaping 1",
    ),
    (
        "debate, contract shaping, agent_0's prose masked: it earns no shaping",
        lambda: debate_episode("agent_0", on_parse_error="mask", shaping={"contract": 0.5}),
        {"on_parse_error": "mask", "shaping": {"contract": 0.5}},
        {"agent_0": 1 / 3, "agent_1": 0.75 + 1.0, "agent_2": 0.5 + 1.0},
        "win_rate 0.3333 + shaping 0",
    ),
    (
        "expert iteration, two-turn feedback: wrong, then right",
        lambda: expert_iteration_episode(strategy="two_turn_feedback"),
        {},
        {"solver": 1.0},
        "attempt 2's score 1 (attempt 1 is not rewarded)",
    ),
    (
        "expert iteration, a format reward",
        lambda: expert_iteration_episode(strategy="iid", format_reward=0.5),
        {"format_reward": 0.5},
        {"solver": 0.5},
        "attempt 1's score 0 + format reward 0.5",
    ),
    (
        "expert iteration with a critic",
        lambda: expert_iteration_episode(strategy="two_turn_feedback", feedback_source="critic"),
        {},
        {"solver": 0.0, "critic": 0.0},
        "attempt 2's score 0 (attempt 1 is not rewarded)",
    ),
    (
        "code collaboration: the helper fixes aux in turn 2",
        code_collab_episode,
        {},
        {"helper": 3.5 + 4.0, "main": 3.5 + 4.0},
        "turn 1: 3.5 + turn 2: 4 (the team reward, shared)",
    ),
]


@pytest.mark.parametrize(
    ("play", "env_kwargs", "rewards", "how"),
    [case[1:] for case in REWARD_CASES],
    ids=[case[0] for case in REWARD_CASES],
)
def test_each_agents_reward_is_read_from_the_record(play, env_kwargs, rewards, how):
    record, paid = play()
    read = episode_rewards(json.loads(json.dumps(record)), env_kwargs)
    assert read is not None
    assert paid == pytest.approx(rewards)  # what the environment paid
    assert read.total == pytest.approx(paid)
    assert read.how[next(iter(rewards))] == how


@pytest.mark.parametrize("shuffle_labels", [False, True])
def test_judge_shaping_is_read_from_the_record(shuffle_labels):
    # Agents who judge by their own answer: agent_0 is right, agents 1 and 2 agree on a wrong
    # sum, so agent_0's votes agree with the reference and theirs do not. They judge by
    # content, so the labels they read change nothing.
    question = DebateQuestion("What is 2 + 3?", answer="5")
    shaping = {"contract": 0.5, "correct": 0.5, "judge": 0.5, "vote": 0.25}
    env = debate.env(
        num_agents=3,
        max_rounds=2,
        questions=[question],
        shaping=shaping,
        shuffle_labels=shuffle_labels,
    )
    agents = {
        f"agent_{i}": JudgingDebater(i, 3, solver=lambda q, i=i: "5" if i == 0 else "6")
        for i in range(3)
    }
    seen = play_aec(env, lambda a, o, i: agents[a](o, i))
    record, paid = env.unwrapped.record(), returns_of(seen)
    judged = [(a, i["shaping/judge"]) for a, *_, i in seen if "shaping/judge" in i]
    # agent_2 in round 1 (1 > 0), then round 2: agent_0 (1 = 2), agent_1 (2 > 0), agent_2 (1 > 0)
    assert judged == [("agent_2", 0.0), ("agent_0", 1.0), ("agent_1", 0.0), ("agent_2", 0.0)]
    read = episode_rewards(json.loads(json.dumps(record)), {"shaping": shaping})
    assert read is not None and read.total == pytest.approx(paid)


def test_rewards_of_other_records():
    # A record that states its rewards; one with a reward per turn; one that says nothing.
    stated = {"env": "demo_v0", "summary": {"rewards": {"a": 1, "b": -2}}, "turns": []}
    assert episode_rewards(stated).total == {"a": 1.0, "b": -2.0}
    per_turn = {
        "env": "demo_v0",
        "summary": {},
        "turns": [
            {"agent": "a", "round": 1, "details": {"reward": 0.5}},
            {"agent": "a", "round": 2, "details": {"reward": 0.25}},
        ],
    }
    assert episode_rewards(per_turn).total == {"a": 0.75}
    assert episode_rewards({"env": "demo_v0", "summary": {}, "turns": []}) is None
    assert episode_rewards({"env": "debate_v0", "summary": {"odd": 1}, "turns": []}) is None


# --------------------------------------------------------------------- run folders


def write_run(
    path: Path,
    rows: list[dict[str, Any]] | None = None,
    config: dict[str, Any] | None = None,
    episodes: dict[str, list[dict[str, Any]]] | None = None,
) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))
    if rows is not None:
        (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name, records in (episodes or {}).items():
        (path / "episodes").mkdir(exist_ok=True)
        lines = "".join(json.dumps(r) + "\n" for r in records)
        (path / "episodes" / f"{name}.jsonl").write_text(lines)
    return path


def is_trainer_run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """As baselines.is_trainer logs: 5 iterations, evaluated before and after (iteration 5)."""
    rows: list[dict[str, Any]] = [
        {
            "iteration": i,
            "env/all/reward/total": -0.5 + 0.25 * i,
            "env/all/parse_error": 0.5 - 0.125 * i,
            "env/all/pairwise_reward_is_win_rate": 1.0,  # a flag: constant
            "optim/loss": 0.125,  # constant
            "optim/grad_norm": 4.0 - i,
            "time/iteration": 3.0 + i,
        }
        for i in range(5)
    ]
    rows[0] |= {"eval/reward/total": -0.4, "eval/opponent/reward/total": -0.2, "time/eval": 1.0}
    rows.append(
        {
            "iteration": 5,
            "eval/reward/total": 0.3,
            "eval/opponent/reward/total": -0.5,
            "time/eval": 1.0,
        }
    )
    config = {
        "env": "debate",
        "env_kwargs": {"num_agents": 3, "max_rounds": 2, "reward": "win_rate"},
        "groups_per_batch": 2,
        "model": "tiny",
        "num_iterations": 5,
    }
    return rows, config


def magrpo_run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """As baselines.magrpo logs: per-turn rewards, eval/final/... at 0 and 3."""
    rows: list[dict[str, Any]] = [
        {
            "iteration": i,
            "env/all/reward/total": 1.0 + i,
            "env/turn_1/reward": 0.5 * i,
            "env/turn_2/reward": 1.0 + 0.5 * i,
            "env/turn_2/pass_rate": 0.25 * i,
            "optim/helper/loss": 0.5,
            "optim/main/loss": 0.5 - 0.25 * i,
            "time/iteration": 2.0,
        }
        for i in range(3)
    ]
    evaluation = {"eval/all/reward/total": 1.0, "eval/final/reward": 0.5, "eval/num_problems": 1.0}
    rows[0] |= evaluation
    rows.append(
        {"iteration": 3, **evaluation, "eval/all/reward/total": 3.0, "eval/final/reward": 2.5}
    )
    config = {"dataset": "coophumaneval", "joint_mode": "align", "model": "tiny"}
    return rows, config | {"num_iterations": 3, "num_turns": 2, "env_kwargs": {}}


def trl_run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """As baselines.grpo logs through TRL: steps 1-3, then TRL's summary line at step 3."""
    rows: list[dict[str, Any]] = [
        {
            "iteration": step,
            "reward": -0.5 + 0.25 * step,
            "reward_std": 0.75,
            "loss": 0.5,
            "grad_norm": 6.0 - step,
            "env/parse_error": 1.0 - 0.25 * step,
            "step_time": 3.0,
        }
        for step in (1, 2, 3)
    ]
    rows.append({"iteration": 3, "train_loss": 0.5, "train_runtime": 14.5, "epoch": 0.5})
    return rows, {"env": "debate", "env_kwargs": {}, "max_steps": 3, "model": "tiny"}


HEADLINE_ROW = re.compile(
    r"<tr><td><code>([^<]+)</code><br><span class='meaning'>[^<]*</span></td>"
    r"<td class='n'>([^<]*)</td><td class='n'>([^<]*)</td><td><span class=\"(\w*)\">(\S+)"
)

# (trainer, run, the sentence of counts, training iterations, evaluations,
#  headline rows (metric, first, last, css, arrow) in order, constant series)
TRAINERS = [
    (
        "importance sampling",
        is_trainer_run,
        "5 training iterations (iteration 0–4)",
        (0, 1, 2, 3, 4),
        (0, 5),
        [
            ("env/all/reward/total", "-0.5", "0.5", "good", "▲"),
            ("env/all/parse_error", "0.5", "0", "good", "▼"),
            ("optim/loss", "0.125", "0.125", "flat", "="),
            ("optim/grad_norm", "4", "0", "", "▼"),
            ("time/iteration", "3", "7", "", "▲"),
        ],
        {"env/all/pairwise_reward_is_win_rate": 1.0, "optim/loss": 0.125, "time/eval": 1.0},
    ),
    (
        "MAGRPO",
        magrpo_run,
        "3 training iterations (iteration 0–2)",
        (0, 1, 2),
        (0, 3),
        [
            ("env/all/reward/total", "1", "3", "good", "▲"),
            ("env/turn_1/reward", "0", "1", "good", "▲"),
            ("env/turn_2/reward", "1", "2", "good", "▲"),
            ("env/turn_2/pass_rate", "0", "0.5", "good", "▲"),
            ("optim/helper/loss", "0.5", "0.5", "flat", "="),
            ("optim/main/loss", "0.5", "0", "", "▼"),
            ("time/iteration", "2", "2", "flat", "="),
        ],
        {"eval/num_problems": 1.0, "optim/helper/loss": 0.5, "time/iteration": 2.0},
    ),
    (
        "TRL GRPO",
        trl_run,
        "3 training steps (step 1–3)",
        (1, 2, 3),
        (),
        [
            ("reward", "-0.25", "0.25", "good", "▲"),
            ("reward_std", "0.75", "0.75", "flat", "="),
            ("env/parse_error", "0.75", "0.25", "good", "▼"),
            ("loss", "0.5", "0.5", "flat", "="),
            ("grad_norm", "5", "3", "", "▼"),
            ("step_time", "3", "3", "flat", "="),
        ],
        {
            "epoch": 0.5,
            "loss": 0.5,
            "reward_std": 0.75,
            "step_time": 3.0,
            "train_loss": 0.5,
            "train_runtime": 14.5,
        },
    ),
]


@pytest.mark.parametrize(
    ("run", "sentence", "training", "evaluations", "headline", "constant"),
    [case[1:] for case in TRAINERS],
    ids=[case[0] for case in TRAINERS],
)
def test_the_first_screen_says_what_the_run_did(
    tmp_path, run, sentence, training, evaluations, headline, constant
):
    rows, config = run()
    counts = run_counts(rows, config)
    assert (counts.training, counts.evaluations) == (training, evaluations)
    assert constant_series(metric_series(rows)) == constant

    page = write_report(write_run(tmp_path / "run", rows, config)).read_text()
    assert sentence in page
    training = page[page.index("<h2>Training") :].split("<h2>", 2)[1]
    assert HEADLINE_ROW.findall(training) == headline
    assert f"{len(constant)} constant series" in page
    # A changing series has its chart; a constant one is listed, never drawn.
    changing = sorted(set(metric_series(rows)) - set(constant))
    drawn = re.findall(
        r'<svg width="290" height="150" viewBox="[^"]+" role="img" aria-label="([^"]+)"', page
    )
    assert drawn and sorted(drawn) == changing
    assert all(f"<code>{name}</code></td><td class='n'>" in page for name in constant)


def test_evaluations_are_counted_apart_from_training(tmp_path):
    rows, config = is_trainer_run()
    page = write_report(write_run(tmp_path / "run", rows, config)).read_text()
    # 6 metric lines, 5 training iterations: the line at iteration 5 is the final evaluation.
    assert "6 iterations" not in page and "6 training" not in page
    assert "evaluated 2 times, at iteration 0 (before training), 5 (final evaluation" in page
    evaluation = page[page.index("<h2>Evaluation</h2>") :]
    assert "<th class='n'>iteration 0</th><th class='n'>iteration 5</th>" in evaluation
    assert re.search(
        r"<code>eval/reward/total</code>.*?<td class='n'>-0.4</td><td class='n'>0.3</td>"
        r"<td><span class=\"good\">▲ up \+0.7",
        evaluation,
    )
    assert "<code>eval/opponent/reward/total</code>" in evaluation
    # The reward chart: training as a line, evaluation as points
    assert "training: env/all/reward/total" in page and "evaluation: eval/reward/total" in page


@pytest.mark.parametrize(
    ("rows", "config", "said"),
    [
        ([{"iteration": i, "loss": 1.0} for i in range(3)], {"num_iterations": 10},
         "3 of 10 planned training iterations logged (iteration 0–2): the run stopped early "
         "or is still going"),
        ([{"iteration": 0, "loss": 1.0}], {}, "1 training iteration (iteration 0)"),
        ([{"iteration": 0, "eval/reward/total": 1.0}], {}, "no training iteration logged yet"),
    ],
)  # fmt: skip
def test_counts_of_unfinished_runs(rows, config, said):
    assert run_counts(rows, config).describe()[0] == said


def test_headline_metrics_pick_the_trainers_rewards_first():
    names = ["optim/loss", "env/iid/reward/total", "env/all/turn/correct", "env/all/correct"]
    names += ["env/all/reward/total", "env/answer_hint/reward/total", "data/num_tokens"]
    assert [name for name, _ in headline_metrics(names)] == [
        "env/all/reward/total",
        "env/answer_hint/reward/total",
        "env/iid/reward/total",
        "env/all/turn/correct",  # per turn, as the console prints it; not also per episode
        "optim/loss",
    ]


def test_the_debate_headline_shows_judging_beside_the_pairwise_reward():
    # What a debate run logs: each of these per turn and per agent and episode.
    leaves = ["voted", "vote_agreement", "vote_lower_seat", "parse_error", "pairwise_reward"]
    names = ["env/all/reward/total", *(f"env/all/{x}" for x in leaves)]
    names += [f"env/all/turn/{x}" for x in leaves]
    assert [name for name, _ in headline_metrics(names)] == [
        "env/all/reward/total",
        "env/all/turn/parse_error",
        "env/all/turn/voted",
        "env/all/turn/vote_agreement",
        "env/all/turn/vote_lower_seat",
        "env/all/pairwise_reward",  # paid per episode: its per-turn mean does not hide it
    ]


# ---------------------------------------------------------------------- transcripts


@pytest.fixture
def debate_run(tmp_path):
    rows, config = is_trainer_run()
    records = [{**debate_episode(malformed)[0], "iteration": 0} for malformed in (None, "agent_0")]
    return write_run(tmp_path / "run", rows, config, {"iter_00000": records})


def test_transcripts_show_each_agents_reward_and_the_raw_output(debate_run):
    index = write_report(debate_run)
    page = (index.parent / "iter_00000.html").read_text()
    # Escaped, never injected: the question holds markup.
    assert "Is &lt;b&gt;1 &amp; 2&lt;/b&gt;?" in page and "<b>1 & 2</b>" not in page
    assert page.count("<h2>") == 2 and page.count('class="turn') == 6 + 1
    assert page.count('class="turn error"') == 1  # agent_0 breaks the format and ends it
    agents = re.findall(r'<td class="agent">(\w+)</td><td class="n">([^<]+)</td>', page)
    assert agents == [
        ("agent_0", "0.3333"), ("agent_1", "0.5"), ("agent_2", "0.75"),
        ("agent_0", "-1"), ("agent_1", "0"), ("agent_2", "0"),
    ]  # fmt: skip
    assert "parse-error penalty -1 + win_rate 0" in page
    assert '<span class="gain">parse-error penalty -1</span>' in page
    # The raw output is shown, not behind a click: it comes before the turn's first <details>.
    for turn in page.split('<div class="turn')[1:]:
        assert turn.index('<pre class="output">') < turn.index("<details>")
    assert "Round 2" in page and "Agent 1 &gt; Agent 0" in page
    # The index: a link to the page and each agent's mean reward over its episodes
    assert re.search(
        r'<a href="iter_00000.html">iter_00000</a></td><td>0</td><td class=\'n\'>2</td>'
        r"<td class='n'>0.09722</td><td>agent_0 -0.3333, agent_1 0.25, agent_2 0.375</td>",
        index.read_text(),
    )


def test_the_first_and_last_training_transcripts_are_one_click_from_the_top(tmp_path):
    rows, config = is_trainer_run()
    record = debate_episode(None)[0]
    files = {
        f"iter_{i:05d}": [{**record, "iteration": i}] for i in (0, 1, 2)
    }  # fmt: skip
    files["eval_00003"] = [{**record, "iteration": 3, "phase": "eval"}]  # not training
    index = write_report(write_run(tmp_path / "run", rows, config, files)).read_text()
    jump = re.search(r"<p class='jump'>(.*?)</p>", index)
    assert jump is not None
    assert re.findall(r'href="([^"]+)">([^<]+)</a>', jump.group(1)) == [
        ("iter_00000.html", "first iteration (0)"),
        ("iter_00002.html", "last iteration (2)"),
    ]
    # Right under the training table, above the config.
    assert index.index("Training, per iteration") < jump.start() < index.index("<h2>Config")
    one = write_report(write_run(tmp_path / "one", rows, config, {"iter_00000": [record]}))
    assert "first iteration" not in one.read_text()  # a record without an iteration: no link
    single = {"iter_00000": [{**record, "iteration": 0}]}
    only = write_report(write_run(tmp_path / "single", rows, config, single)).read_text()
    assert "first iteration (0)" in only and "last iteration" not in only


def test_a_very_long_output_is_cut_and_kept_whole_under_a_click():
    text = "\n".join(f"line {i}" for i in range(200))
    record = {"env": "demo_v0", "title": "t", "summary": {}, "turns": []}
    record["turns"] = [{"agent": "a", "round": 1, "prompt": [], "text": text, "details": {}}]
    page = episode_html(record)
    shown, folded = page.split("<details>", 1)
    assert "line 24\n…" in shown and "line 25" not in shown
    assert "the whole output (200 lines)" in folded and "line 199" in folded


def test_a_training_context_shows_as_a_chat_not_as_json():
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


# ------------------------------------------------------------ odd and partial runs


def test_a_run_with_only_episodes_or_only_metrics(tmp_path):
    record = {**expert_iteration_episode(strategy="iid")[0], "iteration": 0}
    only_episodes = write_run(tmp_path / "a", episodes={"step_00001": [record]})
    page = write_report(only_episodes).read_text()
    assert "no metrics.jsonl: only the transcripts are shown" in page
    assert 'href="step_00001.html"' in page and "<h2>Training" not in page

    rows, config = trl_run()
    page = write_report(write_run(tmp_path / "b", rows, config)).read_text()
    assert "<h2>Transcripts</h2>" not in page and "3 training steps" in page


def test_torn_empty_and_broken_files(tmp_path):
    rows, config = is_trainer_run()
    run = write_run(tmp_path / "torn", rows, config, {"iter_00000": [], "iter_00001": []})
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"iteration": 6, "env/all/rew')  # a run killed while writing
    (run / "episodes" / "iter_00001.jsonl").write_text('{"env": "demo_v0"}\nnot json\n')
    (run / "config.json").write_text('{"env": "deb')
    with pytest.warns(UserWarning, match="torn last line"):
        index = write_report(run)
    page = index.read_text()
    assert "dropped a torn last line" in page and "5 training iterations" in page
    assert "config.json is not readable JSON" in page
    assert "This file holds no episodes." in (index.parent / "iter_00000.html").read_text()
    assert (
        "iter_00001.jsonl:2 is not a JSON object: skipped"
        in (index.parent / "iter_00001.html").read_text()
    )

    empty = write_run(tmp_path / "empty", [], {})
    assert "holds no metric line yet" in write_report(empty).read_text()


def test_report_errors_and_cli(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match=r"no metrics\.jsonl"):
        write_report(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.jsonl").write_text('{"iteration": 0}\nnot json\n{}\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2 is not JSON"):
        load_metrics(tmp_path / "bad" / "metrics.jsonl")
    rows, config = trl_run()
    run = write_run(tmp_path / "run", rows, config)
    main([str(run), "--out", str(tmp_path / "out")])
    assert capsys.readouterr().out.strip() == str(tmp_path / "out" / "index.html")


def test_a_page_is_self_contained(debate_run):
    index = write_report(debate_run)
    assert sorted(p.name for p in index.parent.iterdir()) == ["index.html", "iter_00000.html"]
    for page in index.parent.iterdir():
        text = page.read_text()
        assert "<script" not in text and "<img" not in text and "http" not in text


def test_first_and_last_skips_missing_and_non_finite_values():
    rows = [{"x": 1}, {"r": float("inf")}, {"r": -0.5}, {"r": 0.125}, {"r": True}, {}]
    assert first_and_last(rows, "r") == "-0.500 -> 0.125 (rose by 0.625)"
    assert first_and_last([{"r": 2}, {"r": 1.5}], "r") == "2.000 -> 1.500 (fell by 0.500)"
    assert first_and_last([{"r": 0.1}, {"r": 0.1002}], "r") == "0.100 -> 0.100 (did not move)"
    assert first_and_last(rows, "missing") == "not logged"


if __name__ == "__main__":  # a run folder to look at: python tests/baselines/test_report.py DIR
    folder = Path(sys.argv[1])
    rows, config = is_trainer_run()
    episodes = {
        "iter_00000": [{**debate_episode(m)[0], "iteration": 0} for m in (None, "agent_0")],
        "iter_00001": [
            {**expert_iteration_episode(strategy="two_turn_feedback")[0], "iteration": 1}
        ],
        "iter_00002": [{**code_collab_episode()[0], "iteration": 2}],
    }
    print(write_report(write_run(folder, rows, config, episodes)))


def test_a_league_run_shows_its_league(tmp_path):
    rows, config = is_trainer_run()
    league = [
        {"league/rating/learner": 10.0, "league/rating/latest": -10.0, "league/mix/latest": 1.0},
        {
            "league/rating/learner": 40.0,
            "league/rating/latest": -5.0,
            "league/rating/snapshot_00001": -35.0,
            "league/mix/latest": 0.25,
            "league/mix/snapshot_00001": 0.75,
            "league/score/snapshot_00001": 0.625,
        },
    ]
    training = [r for r in rows if "eval/reward/total" not in r or "optim/loss" in r]
    for row, extra in zip(training, league, strict=False):
        row.update(extra)
    page = write_report(write_run(tmp_path / "league", rows, config)).read_text()
    section = page[page.index("<h2>League</h2>") :]
    members = re.findall(r"<tr><td><code>([^<]+)</code>", section)
    assert members[:3] == ["learner", "latest", "snapshot_00001"]  # in the order they joined
    # The last rating, the mean share met, the iterations met, the last score.
    assert re.search(
        r"snapshot_00001</code></td><td class='n'>-35</td><td class='n'>0.75</td>"
        r"<td class='n'>1</td><td class='n'>0.625</td>",
        section,
    )
    assert section.count("<svg") >= 3
    plain, _ = is_trainer_run()
    assert (
        "<h2>League</h2>"
        not in write_report(write_run(tmp_path / "mirror", plain, config)).read_text()
    )
