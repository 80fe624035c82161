"""``python -m baselines.grpo``: flags, the mapping to GRPOConfig, and a tiny run end to end."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest

from baselines.cli import config_table, parse_config
from baselines.grpo.rollout_func import FamilyRollout
from baselines.grpo.run import GRPORunConfig, build_rollout, grpo_config_kwargs, main


def parse(*argv: str) -> GRPORunConfig:
    return parse_config(GRPORunConfig, list(argv))


def test_flags_default_to_the_config_and_parse_types():
    assert parse() == GRPORunConfig()
    cfg = parse(
        "--env", "expert_iteration", "--strategy", "two_turn_feedback", "--learning-rate", "3e-6",
        "--no-save-model", "--task", "humaneval", "--num-generations", "8",
        "--env-kwargs", '{"attempt1_loss_weight": 0.5}',
    )  # fmt: skip
    assert (cfg.env, cfg.strategy, cfg.task) == (
        "expert_iteration",
        "two_turn_feedback",
        "humaneval",
    )
    assert (cfg.learning_rate, cfg.save_model, cfg.num_generations) == (3e-6, False, 8)
    assert cfg.env_kwargs == {"attempt1_loss_weight": 0.5}
    with pytest.raises(SystemExit):
        parse("--strategy", "answer_hint")  # needs the context swap: not offered here


def test_every_flag_is_documented():
    assert config_table(GRPORunConfig).count("| `--") == len(dataclasses.fields(GRPORunConfig))


def test_bad_config_fails_at_construction():
    with pytest.raises(
        ValueError,
        match=r"max_steps\n  Input should be greater than or equal to 1 .*input_value=0,",
    ):
        GRPORunConfig(max_steps=0)
    with pytest.raises(ValueError, match="task for env='debate'"):
        GRPORunConfig(env="debate", task="humaneval")
    with pytest.raises(ValueError, match="task_kwargs are for task='arithmetic'"):
        GRPORunConfig(task_kwargs={"max_digits": 1})


def test_cpu_defaults():
    kwargs = grpo_config_kwargs(GRPORunConfig(), 3, gpu=False)
    assert kwargs["bf16"] is False and kwargs["use_cpu"] is True
    assert kwargs["use_vllm"] is False and kwargs["gradient_checkpointing"] is False
    assert kwargs["report_to"] == "none" and kwargs["scale_rewards"] == "none"
    assert kwargs["num_generations"] == 3 and kwargs["per_device_train_batch_size"] == 3
    from trl import GRPOConfig

    GRPOConfig(**kwargs)  # TRL accepts them


def test_gpu_defaults():
    kwargs = grpo_config_kwargs(GRPORunConfig(items_per_step=4), 3, gpu=True)
    assert kwargs["bf16"] is True and kwargs["use_cpu"] is False
    assert kwargs["gradient_checkpointing"] is True
    assert kwargs["use_vllm"] is (importlib.util.find_spec("vllm") is not None)
    assert kwargs["vllm_mode"] == "colocate" and kwargs["vllm_enable_sleep_mode"] is False
    assert kwargs["per_device_train_batch_size"] == 12
    assert grpo_config_kwargs(GRPORunConfig(vllm="off"), 3, gpu=True)["use_vllm"] is False
    with pytest.raises(ValueError, match="needs a GPU"):
        grpo_config_kwargs(GRPORunConfig(vllm="on"), 3, gpu=False)


def test_max_completion_length_is_the_tokens_of_the_most_turns_an_agent_takes():
    kwargs = grpo_config_kwargs(GRPORunConfig(max_tokens=50), 3, gpu=False, max_turns=3)
    assert kwargs["max_completion_length"] == 150


def test_every_env_gets_its_familys_rollout():
    # Each family answers the run's settings: its group, its turns, its tasks.
    debate = build_rollout(GRPORunConfig(env="debate", env_kwargs={"num_agents": 4}))
    assert isinstance(debate, FamilyRollout) and debate.num_generations == 4
    assert debate.max_turns == 3 and debate.family.env_kwargs["observation_mode"] == "chat"
    questions = build_rollout(
        GRPORunConfig(
            task="arithmetic", task_kwargs={"max_digits": 1}, max_steps=3, items_per_step=2
        )
    )
    assert len(questions.dataset_prompts()) == 6  # a row for each group the run trains on
    plan = questions.family.training([0], 0)
    assert all(o["question"].answer is not None for o in plan.options)
    ei = build_rollout(
        GRPORunConfig(
            env="expert_iteration", num_generations=5, strategy="two_turn_feedback",
            task="arithmetic", task_kwargs={"num_problems": 7},
        )
    )  # fmt: skip
    assert (ei.num_generations, ei.max_turns) == (5, 2)
    assert ei.family.mix == {"two_turn_feedback": 5}
    ei_code = build_rollout(GRPORunConfig(env="expert_iteration", task="mbpp"))
    assert len(ei_code.family.train_problems) == 120  # MBPP's train split
    code = build_rollout(
        GRPORunConfig(
            env="code_collab", task="humaneval", env_kwargs={"num_agents": 1, "num_turns": 1}
        )
    )
    assert (code.num_generations, code.max_turns, code.family.agents) == (4, 1, ("main",))
    assert len(code.family.problems) == 164  # HumanEval
    team = build_rollout(GRPORunConfig(env="code_collab", num_generations=2))
    assert team.num_generations == 4 and team.family.agents == ("helper", "main")


@pytest.mark.slow
@pytest.mark.training
@pytest.mark.parametrize(
    "env_flags",
    [
        ["--env", "debate"],
        ["--env", "expert_iteration", "--strategy", "two_turn_feedback"],
        ["--env", "code_collab", "--env-kwargs", '{"num_agents": 1, "num_turns": 2}'],
    ],
)
def test_a_tiny_run_end_to_end(tmp_path, env_flags):
    pytest.importorskip("trl")
    stale = tmp_path / "episodes" / "step_00099.jsonl"  # an earlier, longer run's transcript
    stale.parent.mkdir()
    stale.write_text("{}\n")
    last = main(
        [
            *env_flags,
            "--model", "tiny", "--device", "cpu", "--max-steps", "1",
            "--max-tokens", "8", "--num-generations", "2",
            "--output-dir", str(tmp_path),
            *(["--no-save-model"] if env_flags[1] != "debate" else []),
        ]
    )  # fmt: skip
    assert "reward" in last
    if env_flags[1] == "debate":  # the model in its own folder; the run's settings kept
        assert (tmp_path / "final_model" / "config.json").is_file()
        assert json.loads((tmp_path / "config.json").read_text())["env"] == "debate"
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert lines[0]["iteration"] == 1 and "rewards/env_reward/mean" in lines[0]
    # Transcripts of the step (save_episodes=1), for envs that keep records; none left over.
    assert not stale.exists()
    saved = sorted(p.name for p in (tmp_path / "episodes").iterdir())
    if env_flags[1] != "code_collab":
        assert saved == ["step_00001.jsonl"]
        (record,) = [json.loads(line) for line in (tmp_path / "episodes" / saved[0]).open()]
        assert record["iteration"] == 1 and record["turns"]


def test_the_docs_show_the_current_flags():
    from pathlib import Path

    page = (Path(__file__).parents[3] / "docs" / "trl_grpo.md").read_text()
    assert config_table(GRPORunConfig) in page, (
        "docs/trl_grpo.md is out of date: paste `python -m baselines.cli "
        "baselines.grpo.run:GRPORunConfig` into its Flags section"
    )


def test_questions_come_from_the_task_not_from_env_kwargs():
    with pytest.raises(ValueError, match=r"env_kwargs must not set \['questions'\]"):
        GRPORunConfig(env_kwargs={"questions": ["What is 2 + 2?"]})
