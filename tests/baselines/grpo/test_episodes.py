"""Transcripts of TRL GRPO runs: which episodes the rollout functions save, where, and when.

A stand-in trainer (the attributes a rollout function reads) and scripted
agents keep these tests free of model runs; the command-line test in
test_grpo_cli.py checks a real run's files.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from baselines.grpo.rollout_func import FamilyRollout
from baselines.grpo.run import GRPORunConfig
from baselines.report import write_report
from baselines.samplers import ScriptedPolicy
from llm_envs.debate import scripted_debaters
from llm_envs.expert_iteration import ScriptedMathSolver


@pytest.fixture
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def fake_trainer(tokenizer, output_dir, *, step=0, training=True, main_process=True):
    """What a rollout function reads from a ``trl.GRPOTrainer``."""
    return SimpleNamespace(
        processing_class=tokenizer,
        model=SimpleNamespace(training=training),
        accelerator=SimpleNamespace(is_main_process=main_process),
        state=SimpleNamespace(global_step=step),
        args=SimpleNamespace(output_dir=str(output_dir)),
        temperature=1.0,
        top_p=1.0,
    )


def debate_rollout(tokenizer, save_episodes):
    return FamilyRollout.for_env(
        "debate",
        {"num_agents": 2, "max_rounds": 2},
        num_groups=2,
        save_episodes=save_episodes,
        policy=ScriptedPolicy(scripted_debaters(2, seed=0), tokenizer),
    )


def question(row):
    """The question a data-set row shows after its key."""
    return row.split(": ", 1)[1]


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_each_training_step_saves_its_first_episodes(tokenizer, tmp_path):
    rollout = debate_rollout(tokenizer, save_episodes=1)
    rows = rollout.dataset_prompts()
    two_debates = [rows[0]] * 2 + [rows[1]] * 2
    rollout(two_debates, fake_trainer(tokenizer, tmp_path, step=0))
    rollout(two_debates, fake_trainer(tokenizer, tmp_path, step=1))

    folder = tmp_path / "episodes"
    assert sorted(p.name for p in folder.iterdir()) == ["step_00001.jsonl", "step_00002.jsonl"]
    (record,) = read(folder / "step_00001.jsonl")  # one debate of the two
    # The step that trains on the batch (TRL samples before its optimizer step),
    # as in metrics.jsonl's "iteration".
    assert record["iteration"] == 1 and record["env"] == "debate_v0"
    assert record["title"] == question(rows[0])
    assert {t["agent"] for t in record["turns"]} == {"agent_0", "agent_1"}
    assert all(t["prompt"] and t["text"] for t in record["turns"])

    # The report turns them into transcript pages.
    index = write_report(tmp_path)
    assert "step_00001.html" in index.read_text()
    assert question(rows[0])[:20] in (index.parent / "step_00001.html").read_text()


@pytest.mark.slow
def test_a_second_generation_batch_of_the_same_step_keeps_the_first(tokenizer, tmp_path):
    rollout = debate_rollout(tokenizer, save_episodes=1)
    rows = rollout.dataset_prompts()
    rollout([rows[0]] * 2, fake_trainer(tokenizer, tmp_path, step=3))
    rollout([rows[1]] * 2, fake_trainer(tokenizer, tmp_path, step=3))
    (record,) = read(tmp_path / "episodes" / "step_00004.jsonl")
    assert record["title"] == question(rows[0])


@pytest.mark.parametrize(
    ("save_episodes", "training", "main_process"),
    [(0, True, True), (1, False, True), (1, True, False)],
    ids=["save_episodes=0", "evaluation", "not the main process"],
)
@pytest.mark.slow
def test_nothing_is_saved(tokenizer, tmp_path, save_episodes, training, main_process):
    rollout = debate_rollout(tokenizer, save_episodes=save_episodes)
    trainer = fake_trainer(tokenizer, tmp_path, training=training, main_process=main_process)
    out = rollout(rollout.dataset_prompts()[:1] * 2, trainer)
    assert len(out["completion_ids"]) == 2
    assert not (tmp_path / "episodes").exists()


@pytest.mark.slow
def test_single_agent_episodes_are_saved_per_episode(tokenizer, tmp_path):
    rollout = FamilyRollout.for_env(
        "expert_iteration",
        task="arithmetic",
        num_groups=4,
        options={"strategy": "two_turn_feedback", "num_generations": 2},
        save_episodes=3,
        policy=ScriptedPolicy(ScriptedMathSolver(), tokenizer),
    )
    prompts = [p for p in rollout.dataset_prompts()[:2] for _ in range(2)]
    out = rollout(prompts, fake_trainer(tokenizer, tmp_path))

    records = read(tmp_path / "episodes" / "step_00001.jsonl")
    assert len(records) == 3
    task_ids = [r["summary"]["task_id"] for r in records]
    assert task_ids[0] == task_ids[1] != task_ids[2]  # the first problem's group, then the next
    # attempt 1, attempt 2: what the completion holds, readable.
    assert [t["round"] for t in records[0]["turns"]] == [1, 2]
    assert rollout.last_output is out


def test_save_episodes_is_checked():
    with pytest.raises(ValueError, match="save_episodes must be an int >= 0, got -1"):
        FamilyRollout.for_env("debate", save_episodes=-1)
    with pytest.raises(ValueError, match=r"save_episodes\n  Input should be greater than or eq"):
        GRPORunConfig(save_episodes=-1)
