"""The MAGRPO trainer on CPU with the tiny model: loss, logprobs, a two-step run, resume, config."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from baselines.cli import parse_config  # noqa: E402
from baselines.magrpo.trainer import (  # noqa: E402
    MAGRPOConfig,
    MAGRPOTrainer,
)
from baselines.report import write_report  # noqa: E402
from baselines.samplers.base import Completion, SampleRequest, SamplingParams  # noqa: E402


def fresh_models(tiny_model_dir, agents=("helper", "main")):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    models = {
        a: AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32) for a in agents
    }
    return models, tokenizer


class HalfSolved:
    """Samples with a real policy; every even request's text is replaced by ``answer``.

    The random tiny model writes no code, so all its joint actions score 0 and every
    advantage is 0. Replacing half of the main agent's completions with a solution
    (tokenized, as a scripted sampler would) makes the rewards differ. The solutions
    are the first of each node's G completions, so the saved transcripts (the first
    joint action of every node) show them.
    """

    def __init__(self, inner, tokenizer, answer: str) -> None:
        self.inner, self.tokenizer, self.answer = inner, tokenizer, answer

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        got = self.inner.sample(requests, params)
        tokens = tuple(self.tokenizer.encode(self.answer, add_special_tokens=False))
        return [
            Completion(c.prompt_tokens, tokens, (0.0,) * len(tokens), self.answer, "eos")
            if i % 2 == 0
            else c
            for i, c in enumerate(got)
        ]


SOLUTION = "def x_or_y(n, x, y):\n    return x if n > 1 and all(n % k for k in range(2, n)) else y"


def make_config(tmp_path, **overrides):
    values = {
        "model": "tiny",
        "task_kwargs": {"num_problems": 2},  # CoopHumanEval/0 to train on, /1 held out
        "eval_problems": 1,
        "group_size": 2,
        "num_turns": 2,
        "max_tokens": 6,
        "num_iterations": 2,
        "learning_rate": 1e-3,
        "eval_every": 2,
        "output_dir": str(tmp_path / "run"),
        "progress": False,
        "device": "cpu",
    }
    values.update(overrides)
    return MAGRPOConfig(**values)


def build(tmp_path, tiny_model_dir, **overrides):
    from baselines.samplers import TransformersPolicy

    models, tokenizer = fresh_models(tiny_model_dir)
    samplers = {
        "helper": TransformersPolicy(models["helper"], tokenizer),
        "main": HalfSolved(TransformersPolicy(models["main"], tokenizer), tokenizer, SOLUTION),
    }
    config = make_config(tmp_path, **overrides)
    return MAGRPOTrainer(config, models=models, tokenizer=tokenizer, samplers=samplers)


def task_ids(plan):
    return [options["problem"].task_id for options in plan.options]


@pytest.mark.slow
@pytest.mark.training
def test_two_step_run_updates_both_agents_and_writes_metrics(tmp_path, tiny_model_dir):
    trainer = build(tmp_path, tiny_model_dir)
    assert trainer.agents == ["helper", "main"]
    assert task_ids(trainer.iteration_plan(range(3))) == ["CoopHumanEval/0"] * 3
    assert task_ids(trainer.family.evaluation([0], 0)) == ["CoopHumanEval/1"]
    before = {
        a: {k: v.clone() for k, v in m.state_dict().items()} for a, m in trainer.models.items()
    }
    trainer.run()

    for agent, model in trainer.models.items():
        after = model.state_dict()
        changed = [k for k in after if not torch.equal(before[agent][k], after[k])]
        assert changed, f"{agent}'s parameters did not change"
    assert trainer.models["helper"] is not trainer.models["main"]

    rows = [
        json.loads(line)
        for line in (tmp_path / "run" / "metrics.jsonl").read_text().split("\n")
        if line
    ]
    # two iterations (evaluation before the first), then the final evaluation
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert "eval/num_problems" not in rows[1]
    first = rows[0]
    # align, G = 2, two turns: 1 + 2 nodes, 2 + 4 joint actions; every odd main completion
    # solves x_or_y alone (2.1), every even one is the tiny model's noise (0)
    assert first["env/turn_1/nodes"] == 1 and first["env/turn_2/nodes"] == 2
    assert first["env/turn_1/joint_actions"] == 2 and first["env/turn_2/joint_actions"] == 4
    assert first["env/turn_1/reward"] == pytest.approx(2.1 / 2)
    assert first["env/turn_1/pass_rate"] == pytest.approx(0.5)
    for key in ("level1", "level2", "level3", "bonus", "solved", "return"):
        assert f"env/turn_2/{key}" in first
    for agent in ("helper", "main"):
        assert first[f"optim/{agent}/completions"] == 6  # (1 + 2 nodes) x G
        assert first[f"optim/{agent}/trained_completions"] > 0
        assert first[f"optim/{agent}/grad_norm"] > 0
    assert first["eval/num_problems"] == 1 and "eval/final/pass_rate" in first
    assert "eval/turn_2/reward" in rows[-1]
    # The helper's tokens are the sampler's, so training reproduces its logprobs.
    assert first["optim/helper/sample_train_logprob_diff"] < 1e-3

    run = tmp_path / "run"
    assert (run / "checkpoints" / "iteration_000002" / "trainer_state.json").is_file()
    for agent in ("helper", "main"):
        assert (run / "final_model" / agent / "config.json").is_file()
        assert (run / "checkpoints" / "iteration_000002" / agent / "optimizer.pt").is_file()
    assert json.loads((run / "config.json").read_text())["joint_mode"] == "align"

    # Transcripts: one episode of each iteration's tree, the evaluation episodes.
    episodes = run / "episodes"
    assert sorted(p.name for p in episodes.iterdir()) == [
        "eval_00000.jsonl", "eval_00002.jsonl", "iter_00000.jsonl", "iter_00001.jsonl"
    ]  # fmt: skip
    (record,) = [
        json.loads(line) for line in (episodes / "iter_00000.jsonl").read_text().split("\n") if line
    ]
    assert record["iteration"] == 0 and record["phase"] == "train"
    assert record["title"] == "CoopHumanEval/0 (x_or_y)"
    assert [(t["agent"], t["round"]) for t in record["turns"]] == [
        ("helper", 1), ("main", 1), ("helper", 2), ("main", 2)
    ]  # fmt: skip
    main1 = record["turns"][1]["details"]
    assert main1["code"] == SOLUTION and main1["tests"] == "5/5 passed"
    # 2.1 against its sibling's 0, and both children earn (2.1, 0): A = (2.1 - 0) / 2
    assert main1["advantage"] == pytest.approx(1.05)
    (evaluated,) = [
        json.loads(line) for line in (episodes / "eval_00002.jsonl").read_text().split("\n") if line
    ]
    assert evaluated["phase"] == "eval" and evaluated["summary"]["task_id"] == "CoopHumanEval/1"
    assert "advantage" not in evaluated["turns"][0]["details"]

    index = write_report(run)
    page = (index.parent / "iter_00000.html").read_text()
    assert "def x_or_y(n, x, y):" in page and "passed: assert candidate(7, 34, 12) == 34" in page
    assert "Static and execution diagnostics" in page  # the feedback before turn 2


@pytest.mark.slow
@pytest.mark.training
def test_cross_mode_and_resume(tmp_path, tiny_model_dir):
    trainer = build(
        tmp_path,
        tiny_model_dir,
        joint_mode="cross",
        num_turns=1,
        env_kwargs={"num_turns": 1},
        num_iterations=1,
        eval_every=0,
        save_episodes=0,
        share_prompts=False,  # one row per prompt + completion
    )
    trainer.run()
    assert not (tmp_path / "run" / "episodes").exists()
    (row,) = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert row["env/turn_1/joint_actions"] == 4  # G^N
    assert row["optim/main/completions"] == 2
    saved = {k: v.clone() for k, v in trainer.models["main"].state_dict().items()}

    resumed = build(
        tmp_path,
        tiny_model_dir,
        joint_mode="cross",
        num_turns=1,
        env_kwargs={"num_turns": 1},
        num_iterations=2,
        eval_every=0,
        share_prompts=False,
    )
    assert resumed.start_iteration == 1
    for key, value in resumed.models["main"].state_dict().items():
        assert torch.equal(value, saved[key])
    resumed.run()
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["iteration"] for r in rows] == [0, 1]


@pytest.mark.slow
def test_problem_order_is_seeded_and_covers_every_problem(tmp_path, tiny_model_dir):
    trainer = build(
        tmp_path,
        tiny_model_dir,
        task_kwargs={"num_problems": 6},
        eval_problems=1,
        problems_per_iteration=2,
    )
    assert [trainer.iteration_groups(k) for k in range(3)] == [[0, 1], [2, 3], [4, 5]]
    first_pass = [
        t for k in range(3) for t in task_ids(trainer.iteration_plan(trainer.iteration_groups(k)))
    ]
    assert sorted(first_pass[:5]) == [f"CoopHumanEval/{i}" for i in range(5)]
    assert first_pass == task_ids(trainer.iteration_plan(range(6)))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"group_size": 1}, r"group_size\n  Input should be greater than or equal to 2 .*=1,"),
        ({"joint_mode": "aligned"}, r"joint_mode\n  Input should be 'align' or 'cross'"),
        ({"return_reduction": "max"}, r"return_reduction\n  Input should be 'mean' or 'sum'"),
        ({"discount": 1.5}, r"discount\n  Input should be less than or equal to 1 .*=1.5,"),
        ({"env_kwargs": {"termination_threshold": 3.0}}, "must not set"),
        ({"env": "debate"}, "--env debate has none"),
        ({"temperature": 0.0}, r"temperature\n  Input should be greater than 0"),
    ],
)
def test_config_rejects_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        MAGRPOConfig(**overrides)


def test_command_line_builds_the_config():
    config = parse_config(
        MAGRPOConfig,
        [
            "--joint-mode",
            "cross",
            "--termination-threshold",
            "-0.2",
            "--task",
            "mbpp",
            "--env-kwargs",
            '{"reward_shift": -4.0, "num_agents": 1}',
            "--return-reduction",
            "sum",
            "--no-progress",
        ],
    )
    assert config.joint_mode == "cross" and config.return_reduction == "sum"
    assert config.termination_threshold == -0.2
    assert config.env == "code_collab" and config.task == "mbpp"
    assert config.env_kwargs == {"reward_shift": -4.0, "num_agents": 1}
    assert config.progress is False
    assert (
        parse_config(MAGRPOConfig, ["--termination-threshold", "none"]).termination_threshold
        is None
    )


def test_the_docs_show_the_current_flags():
    from pathlib import Path

    from baselines.cli import config_table

    page = (Path(__file__).parents[3] / "docs" / "magrpo.md").read_text()
    assert config_table(MAGRPOConfig) in page, (
        "docs/magrpo.md is out of date: paste `python -m baselines.cli "
        "baselines.magrpo.config:MAGRPOConfig` into its Flags section"
    )


@pytest.mark.slow
@pytest.mark.training
def test_bf16_on_a_cpu_trains_under_autocast(tmp_path, tiny_model_dir):
    # precision="bf16" on a CPU with bf16 arithmetic: the training pass autocasts on
    # the CPU (it once autocast for CUDA only, which did nothing here), so its
    # logprobs move away from the fp32 sampler's by bf16's rounding; the weights
    # stay fp32.
    from baselines.precision import fastest_precision

    if fastest_precision() != "bf16":
        pytest.skip("this CPU has no bf16 arithmetic (avx512_bf16, amx_bf16)")
    diffs = {}
    for precision in ("fp32", "bf16"):
        trainer = build(
            tmp_path / precision,
            tiny_model_dir,
            precision=precision,
            num_iterations=1,
            eval_every=0,
        )
        metrics = trainer.train_iteration(0)
        diffs[precision] = metrics["optim/helper/sample_train_logprob_diff"]
        assert all(p.dtype == torch.float32 for p in trainer.models["helper"].parameters())
    assert diffs["fp32"] < 1e-5 < 1e-4 < diffs["bf16"], diffs  # measured: 2.4e-7, 9.2e-4
