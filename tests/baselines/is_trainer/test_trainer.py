"""The importance-sampling trainer: config and CLI, packed forward, loop, on-policy, resume."""

from __future__ import annotations

import doctest
import importlib
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest

from baselines.cli import config_table, parse_config
from baselines.config import flat_fields
from baselines.data.datums import trajectory_to_data
from baselines.env_families import batch_of
from baselines.is_trainer.config import ISTrainerConfig
from baselines.is_trainer.learner import shard_by_tokens
from baselines.training.forward import forward_logprobs, split_microbatches
from baselines.training.layout import packing_error
from baselines.types import Trajectory, Transition
from llm_envs.debate.family import DebateFamily

torch = pytest.importorskip("torch")

DOCS = Path(__file__).resolve().parents[3] / "docs" / "trainer.md"

# A debate that costs little: two agents, one round, short turns.
SMALL_DEBATE = {"num_agents": 2, "max_rounds": 1}


def tiny_config(tmp_path: Path, tiny_model_dir: Path, **overrides) -> ISTrainerConfig:
    settings = {
        "model": str(tiny_model_dir),
        "env": "debate",
        "env_kwargs": SMALL_DEBATE,
        "groups_per_batch": 2,
        "num_iterations": 2,
        "max_tokens": 16,
        "learning_rate": 1e-3,
        "sampler": "transformers",
        "eval_every": 0,
        "output_dir": str(tmp_path / "run"),
        "progress": False,
    }
    return ISTrainerConfig(**{**settings, **overrides})


def read_metrics(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---------------------------------------------------------------- config and CLI


def test_cli_parses_every_kind_of_field():
    config = parse_config(
        ISTrainerConfig,
        [
            "--env",
            "expert_iteration",
            "--env-kwargs",
            '{"format_reward": 0.5}',
            "--adam-betas",
            "0.8",
            "0.9",
            "--no-drop-constant-groups",
            "--eval-opponent",
            "none",
            "--strategy-mix",
            '{"iid": 2, "answer_hint": 1}',
            "--strategy-weights",
            '{"iid": 1.0, "answer_hint": 0.5}',
            "--learning-rate",
            "3e-5",
        ],
    )
    assert config.env == "expert_iteration"
    assert config.env_kwargs == {"format_reward": 0.5}
    assert config.adam_betas == (0.8, 0.9)
    assert config.drop_constant_groups is False
    assert config.evaluation.opponent is None
    assert config.strategy_mix == {"iid": 2, "answer_hint": 1}
    assert config.strategy_weights == {"iid": 1.0, "answer_hint": 0.5}
    assert config.learning_rate == 3e-5
    assert parse_config(ISTrainerConfig, []) == ISTrainerConfig()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--num-substeps", "0"],
            "num_substeps: Input should be greater than or equal to 1, got 0",
        ),
        (["--env-kwargs", "[1]"], "expected a JSON object"),
        (["--loss", "dpo"], "invalid choice"),
        (["--sampler", "openai"], "needs sampler_url"),
        (
            ["--env", "expert_iteration", "--strategy-weights", '{"iid": 1}'],
            "no weight for ['answer_hint', 'prompt_augmentation']",
        ),
    ],
)
def test_cli_rejects_bad_values_with_the_reason(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse_config(ISTrainerConfig, argv)
    assert message in capsys.readouterr().err


def test_every_config_field_is_documented_once_and_in_the_docs():
    table = config_table(ISTrainerConfig)
    assert table.count("| `--") == len(flat_fields(ISTrainerConfig))
    page = DOCS.read_text()
    # The docs page embeds the generated table verbatim (python -m baselines.cli ...).
    assert table in page, (
        "docs/trainer.md is out of date: paste the output of "
        "`python -m baselines.cli baselines.is_trainer.config:ISTrainerConfig`"
    )


@pytest.mark.parametrize(
    "module",
    [
        "baselines.cli",
        "baselines.training.forward",
        "baselines.data.episode_metrics",
        "baselines.precision",
        "llm_envs.family",
        "llm_envs.tasks.math_sources",
    ],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


# ------------------------------------------------------------- forward and layout


def random_data(vocab: int, lengths: list[int], seed: int = 0):
    rng = np.random.default_rng(seed)
    data = []
    for length in lengths:
        prompt = rng.integers(0, vocab, size=length // 2).tolist()
        action = rng.integers(0, vocab, size=length - length // 2).tolist()
        turn = Transition(prompt, action, [-1.0] * len(action))
        data.extend(trajectory_to_data(Trajectory([turn]), advantage=1.0))
    return data


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.slow
def test_packed_forward_gives_the_logprobs_of_separate_forwards(tiny_model_dir, attention):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        tiny_model_dir, dtype=torch.float32, attn_implementation=attention
    )
    data = random_data(model.config.vocab_size, [7, 30, 12, 3])
    device = torch.device("cpu")
    with torch.no_grad():
        packed, packed_D, inputs = forward_logprobs(model, data, "packed", device)
        padded, padded_D, _ = forward_logprobs(model, data, "padded", device)
        separate_D = [forward_logprobs(model, [d], "packed", device)[0] for d in data]
    assert packed.shape == (sum(len(d) for d in data),)
    assert padded.shape == (len(data), max(len(d) for d in data))
    for one, together, row in zip(separate_D, packed_D, padded_D, strict=True):
        torch.testing.assert_close(together, one, atol=1e-5, rtol=0)
        torch.testing.assert_close(row, one, atol=1e-5, rtol=0)
    assert torch.equal(inputs["mask"], torch.from_numpy(np.concatenate([d.mask for d in data])))
    assert packing_error(model, device) < 1e-5
    # The vocabulary projection on action tokens only: the same logprobs there.
    with torch.no_grad():
        packed_actions = forward_logprobs(model, data, "packed", device, actions_only=True)[0]
        padded_actions = forward_logprobs(model, data, "padded", device, actions_only=True)[0]
    mask_N = inputs["mask"]
    mask_B_T = torch.zeros(padded.shape)
    for row, datum in enumerate(data):
        mask_B_T[row, : len(datum)] = torch.tensor(datum.mask)
    torch.testing.assert_close(packed_actions * mask_N, packed * mask_N, atol=1e-5, rtol=0)
    torch.testing.assert_close(padded_actions * mask_B_T, padded * mask_B_T, atol=1e-5, rtol=0)
    assert not packed_actions[mask_N == 0].any()  # observation targets: never computed


def test_microbatches_and_process_shards():
    assert split_microbatches([4, 4, 4], max_tokens=8) == [[0, 1], [2]]
    assert split_microbatches([10, 1], max_tokens=8) == [[0], [1]]
    assert split_microbatches([1, 8], max_tokens=8, layout="padded") == [[0], [1]]
    # Longest first to the lightest shard; each shard keeps batch order.
    assert shard_by_tokens([5, 1, 4, 2], 2) == [[0, 1], [2, 3]]
    assert shard_by_tokens([3], 2) == [[0], []]


def test_debate_evaluation_puts_the_trained_policy_in_each_role_once():
    family = DebateFamily({"num_agents": 3, "max_rounds": 1}, task="arithmetic", seed=0)
    batch = batch_of(family.evaluation([0, 1], seed=5))
    assert [sorted(r) for r in batch.trained_agents] == [
        ["agent_0"],
        ["agent_1"],
        ["agent_2"],
    ] * 2
    # The three debates of a question differ only in who is trained.
    assert batch.seeds[:3] == [batch.seeds[0]] * 3 and batch.seeds[3] != batch.seeds[0]
    questions = [o["question"].text for o in batch.options]
    assert questions[:3] == [questions[0]] * 3 and questions[3] != questions[0]
    trained, fixed = object(), object()
    assign = batch.assignment(trained, fixed)  # type: ignore[arg-type]
    assert [assign(1, f"agent_{i}") for i in range(3)] == [fixed, trained, fixed]
    # Evaluation masks parse errors, so an untrained opponent's broken answer does
    # not end a debate before the trained policy speaks; training keeps the env's mode.
    assert {e.unwrapped.config.on_parse_error for e in batch.envs} == {"mask"}
    assert family.training([0], seed=5).envs[0].unwrapped.config.on_parse_error == "penalize"
    # Training data does not depend on which process asks for it.
    train = family.training([4, 5], seed=9)
    assert train.seeds == family.training([4], seed=9).seeds + family.training([5], seed=9).seeds


def play_teachers(batch, teachers):
    """The teachers' debates, played: the episode results and each debate's record."""
    from baselines.rollouts import rollout
    from baselines.samplers.base import SamplingParams
    from baselines.samplers.scripted import ScriptedPolicy

    results = rollout(
        batch.envs,
        ScriptedPolicy(teachers),
        SamplingParams(max_tokens=1),
        seeds=batch.seeds,
        options=batch.options,
    )
    return results, [env.unwrapped.record() for env in batch.envs]


def test_the_debate_teacher_answers_with_the_reference_and_sometimes_one_more():
    from llm_envs.debate.protocol import contract_score

    family = DebateFamily({"num_agents": 3, "max_rounds": 2}, task="arithmetic", seed=0)
    batch, teachers = family.demonstrations(list(range(40)), seed=3, mistake_rate=0.25)
    results, records = play_teachers(batch, teachers)
    assert len(results) == 40
    first_answers = [t for r in records for t in r["turns"] if t["round"] == 1]
    assert all(contract_score(t["text"]) == 1.0 for r in records for t in r["turns"])
    right = sum(bool(t["details"]["solution_correct"]) for t in first_answers)
    assert 0.6 < right / len(first_answers) < 0.9  # 1 - mistake_rate, roughly
    # deterministic for a seed
    again, _ = family.demonstrations(list(range(40)), seed=3)
    assert again.seeds == batch.seeds


def test_broken_seats_are_masked_voted_last_and_not_imitated():
    from baselines.training.warm_start import demonstration_data
    from llm_envs.debate import parse_response

    family = DebateFamily({"num_agents": 3, "max_rounds": 2}, task="arithmetic", seed=0)
    batch, teachers = family.demonstrations(list(range(40)), seed=3, broken_rate=0.5)
    assert {e.unwrapped.config.on_parse_error for e in batch.envs} == {"mask"}
    results, records = play_teachers(batch, teachers)
    broken = [{t["agent"] for t in r["turns"] if t["details"]["parse_error"]} for r in records]
    assert all(len(seats) <= 1 for seats in broken)  # one broken seat at most per debate
    assert 12 < sum(map(len, broken)) < 28  # about half the debates
    # Every vote about a broken seat puts it last; no well-formed answer is lost.
    for record, seats in zip(records, broken, strict=True):
        for turn in record["turns"]:
            if turn["details"]["parse_error"]:
                continue
            reply = parse_response(turn["text"], author=int(turn["agent"].split("_")[1]))
            for a, sign, b in reply.comparisons:
                assert f"agent_{a}" not in seats or sign == "="
                if f"agent_{b}" in seats and f"agent_{a}" not in seats:
                    assert sign == ">"
    assert any(
        f"agent_{b}" in seats
        for record, seats in zip(records, broken, strict=True)
        for turn in record["turns"]
        if not turn["details"]["parse_error"]
        for _, _, b in parse_response(turn["text"], author=0).comparisons
    )
    # The broken turns weigh nothing: their Datums are left out of the imitation data.
    # (Each turn is a Datum here: a debate's prompts do not extend one another.)
    data = demonstration_data(batch_of(batch).to_groups(results))
    turns = [t for r in records for t in r["turns"]]
    assert len(data) == sum(not t["details"]["parse_error"] for t in turns) < len(turns)
    assert all(float(d.weights.sum()) > 0 for d in data)


def test_a_warm_start_without_reference_answers_is_a_clear_error():
    from llm_envs.expert_iteration.family import ExpertIterationFamily

    # the built-in questions: one of the six has no reference answer
    with pytest.raises(ValueError, match=r"reference answers.*--task arithmetic"):
        DebateFamily({"num_agents": 3}, task="default").demonstrations(list(range(6)), seed=0)
    family = ExpertIterationFamily({}, task="arithmetic", strategy_mix={"iid": 1})
    with pytest.raises(ValueError, match="no scripted teacher for a warm start"):
        family.demonstrations([0], seed=0)


# ------------------------------------------------------------------------ the loop


@pytest.mark.slow
@pytest.mark.training
def test_two_iterations_on_debate_train_and_write_metrics(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from baselines.is_trainer.trainer import train

    config = tiny_config(tmp_path, tiny_model_dir, eval_every=1, eval_groups=1)
    metrics_path = train(config)
    rows = read_metrics(metrics_path)
    assert [r["iteration"] for r in rows] == [0, 1, 2]  # the last row: the final evaluation
    first = rows[0]
    for key in (
        "env/all/reward/total",
        "env/all/turn/parse_error",
        "env/all/ac_tokens_per_turn",
        "env/all/by_group/frac_mixed",
        "optim/kl_sample_train_v1",
        "optim/kl_sample_train_v2",
        "optim/entropy",
        "optim/loss",
        "strategy/untagged/mean_log_ratio",
        "time/sample",
        "time/train",
        "train/tokens_per_s",
    ):
        assert np.isfinite(first[key]), key
    assert first["data/num_groups"] == 2
    # generate() on the trained model itself: on-policy up to float noise.
    assert all(row["optim/kl_sample_train_v2"] < 1e-6 for row in rows[:2])
    # Role-averaged evaluation: one trained agent per debate, the opponent in the other role.
    assert first["eval/num_episodes"] == 2 and first["eval/opponent/num_episodes"] == 2
    final_keys = {"iteration", "time/eval", "time/checkpoint"}
    assert set(rows[-1]) == final_keys | {k for k in first if k.startswith("eval/")}

    before = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "final_model").state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) == len(before), "every parameter should have moved"
    checkpoints = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert checkpoints == ["iteration_000002"]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["num_iterations"] == 2

    # Transcripts for the report: the first episodes of every iteration.
    episodes = sorted((tmp_path / "run" / "episodes").glob("*.jsonl"))
    assert [p.name for p in episodes] == ["iter_00000.jsonl", "iter_00001.jsonl"]
    record = json.loads(episodes[0].read_text().splitlines()[0])
    assert record["env"] == "debate_v0" and record["iteration"] == 0 and record["turns"]
    from baselines.report import write_report

    assert (write_report(tmp_path / "run").parent / "iter_00000.html").exists()


@pytest.mark.slow
@pytest.mark.training
def test_the_opponent_shares_the_sampler_until_the_weights_move(tmp_path, tiny_model_dir):
    from baselines.is_trainer.trainer import ISTrainer

    three = {"num_agents": 3, "max_rounds": 1}
    config = tiny_config(tmp_path, tiny_model_dir, env_kwargs=three, eval_every=1, eval_groups=1)
    trainer = ISTrainer(config)
    # The initial model is the default opponent: before a step, that is the sampler's model,
    # and the question is debated once (not once per role), every seat on both sides.
    assert trainer.eval_policies.opponent() is trainer.learner.sampler.policy
    before = trainer.evaluate()
    assert before["eval/num_episodes"] == 3 and before["eval/opponent/num_episodes"] == 3
    trainer.train_iteration(0)
    opponent = trainer.eval_policies.opponent()
    assert (
        opponent is not trainer.learner.sampler.policy
        and opponent is trainer.eval_policies.opponent()
    )
    after = trainer.evaluate()  # three debates: one trained seat and two opponents in each
    assert after["eval/num_episodes"] == 3 and after["eval/opponent/num_episodes"] == 6
    assert set(after) == set(before)
    trainer.finish()


@pytest.mark.slow
@pytest.mark.training
def test_a_warm_start_imitates_the_teacher_before_the_first_iteration(
    tmp_path, tiny_model_dir, capsys
):
    from baselines.is_trainer.trainer import train

    config = tiny_config(
        tmp_path,
        tiny_model_dir,
        env_kwargs={"num_agents": 3, "max_rounds": 1},
        task="arithmetic",
        num_iterations=1,
        groups_per_batch=1,
        warm_start_steps=4,
        warm_start_groups=1,
        warm_start_datums=3,
        warm_start_learning_rate=3e-3,
        progress=True,
    )
    [row] = read_metrics(train(config))
    said = [line for line in capsys.readouterr().err.splitlines() if "warm start" in line]
    # What it is doing from the start (the teacher's games), then every step of four.
    assert said[0] == "warm start: playing 1 teacher episodes, then 4 imitation steps"
    assert [line.split(",")[0] for line in said[1:4]] == [
        f"warm start: step {k}/4" for k in (1, 2, 3)
    ]
    assert said[4].startswith("warm start: 4 steps on 3 teacher answers, loss ")
    assert row["warm_start/steps"] == 4 and row["warm_start/datums"] == 3
    # the same three answers, seen again and again: their loss must fall
    assert row["warm_start/loss_last"] < 0.9 * row["warm_start/loss_first"]
    assert row["time/warm_start"] > 0
    # the learning rate of the run is back for the reinforcement learning step
    assert row["optim/learning_rate"] == config.learning_rate


@pytest.mark.slow
@pytest.mark.training
def test_progress_lines_name_the_phase_and_move_within_a_generation(
    tmp_path, tiny_model_dir, capsys, monkeypatch
):
    import functools
    import time

    from transformers import Qwen2ForCausalLM

    import baselines.training.run
    from baselines.is_trainer.trainer import train
    from baselines.progress import heartbeat

    forward = Qwen2ForCausalLM.forward

    def slow(self, *args, **kwargs):
        # 10 ms a sampling step, 200 ms a microbatch's forward: both span heartbeats
        time.sleep(0.01 if not torch.is_grad_enabled() else 0.2)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(Qwen2ForCausalLM, "forward", slow)
    monkeypatch.setattr(
        baselines.training.run, "heartbeat", functools.partial(heartbeat, every=0.05)
    )
    config = tiny_config(
        tmp_path,
        tiny_model_dir,
        num_iterations=1,
        eval_every=1,
        eval_groups=1,
        progress=True,
        max_tokens_per_microbatch=64,  # a step of several microbatches
    )
    train(config)
    err = capsys.readouterr().err.splitlines()
    lines = [line for line in err if line.startswith("generate: ")]
    for name in ("sampling", "evaluation"):
        named = [line for line in lines if f"({name}: " in line]
        tokens = [int(m.group(1)) for m in map(re.compile(r"token (\d+)/16").search, named) if m]
        # the count moves while the generation runs (it restarts with each turn's call)
        assert any(b > a for a, b in itertools.pairwise(tokens)), lines
    passes = [
        int(m.group(1))
        for line in err
        if (m := re.match(r"forward and backward: (\d+)/\d+ microbatches, .*\(training: ", line))
    ]
    assert any(b > a for a, b in itertools.pairwise(passes)), err


@pytest.mark.slow
@pytest.mark.training
def test_first_substep_is_on_policy_with_the_vllm_sampler(tmp_path, tiny_model_dir):
    pytest.importorskip("vllm")
    from baselines.is_trainer.trainer import train

    config = tiny_config(
        tmp_path, tiny_model_dir, sampler="vllm", num_substeps=2, groups_per_batch=4
    )
    rows = read_metrics(train(config))
    for row in rows:
        # Sampled with the weights the first substep trains: only numerical noise.
        assert abs(row["optim/substep_0/kl_sample_train_v1"]) < 1e-4
        assert row["optim/substep_0/kl_sample_train_v2"] < 1e-6
        # The second substep trains on data sampled before the first step.
        assert row["optim/kl_sample_train_v2"] > row["optim/substep_0/kl_sample_train_v2"]
        assert row["optim/num_steps"] == 2
    # Iteration 1 was sampled after two refreshes: still on-policy.
    assert rows[1]["time/refresh"] > 0


class Crash(RuntimeError):
    """Stands for a killed process."""


def assert_same_metrics(whole: list[dict], resumed: list[dict], iterations: list[int]) -> None:
    """A resumed run's metric lines equal an uninterrupted run's, measurements aside."""
    assert [r["iteration"] for r in resumed] == [r["iteration"] for r in whole] == iterations
    for a, b in zip(whole, resumed, strict=True):
        # Timings are measurements (and the resumed run saved its first checkpoint
        # in the process that died, so its next line has no time/checkpoint).
        assert {k for k in a if not k.startswith("time/")} == {
            k for k in b if not k.startswith("time/")
        }
        for key in a:
            if re.match(r"time/|\w+/tokens_per_s", key):
                continue
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["iteration"], key)


@pytest.mark.slow
@pytest.mark.training
@pytest.mark.parametrize("credit", ["group_mean", "role_baseline"])
def test_resumed_run_matches_an_uninterrupted_one(tmp_path, tiny_model_dir, monkeypatch, credit):
    import baselines.is_trainer.learner as learner_module
    import baselines.is_trainer.trainer as is_trainer

    settings = {"num_iterations": 2, "eval_every": 1, "eval_groups": 1, "credit": credit}
    whole = read_metrics(is_trainer.train(tiny_config(tmp_path / "a", tiny_model_dir, **settings)))

    real_save = learner_module.save_checkpoint

    def save_then_die(accelerator, model, output_dir, iteration, tokenizer, **kwargs):
        # Iteration 0 is checkpointed; iteration 1 is logged, then the process dies
        # before its checkpoint: the resumed run must redo it and rewrite its line.
        if iteration == 2:
            raise Crash
        return real_save(accelerator, model, output_dir, iteration, tokenizer, **kwargs)

    config = tiny_config(tmp_path / "b", tiny_model_dir, **settings)
    monkeypatch.setattr(learner_module, "save_checkpoint", save_then_die)
    with pytest.raises(Crash):
        is_trainer.train(config)
    assert [r["iteration"] for r in read_metrics(Path(config.output_dir) / "metrics.jsonl")] == [
        0,
        1,
    ]
    monkeypatch.setattr(learner_module, "save_checkpoint", real_save)
    resumed = read_metrics(is_trainer.train(config))

    assert_same_metrics(whole, resumed, iterations=[0, 1, 2])
    if credit == "role_baseline":
        # Iteration 1 is measured against the baselines iteration 0 moved, which the
        # resumed run read from the checkpoint (with baselines of 0 its line would differ).
        moved = {k: v for k, v in resumed[1].items() if k.startswith("credit/baseline/")}
        assert moved and any(v != 0 for v in moved.values())
        checkpoint = Path(config.output_dir) / "checkpoints" / "iteration_000002"
        saved = json.loads((checkpoint / "trainer_state.json").read_text())
        assert set(saved["role_baselines"]["debate"]) == {"agent_0", "agent_1"}


@pytest.mark.slow
@pytest.mark.training
def test_two_iterations_on_expert_iteration_with_mixed_strategies(tmp_path, tiny_model_dir):
    from baselines.is_trainer.trainer import train

    mix = {"iid": 1, "prompt_augmentation": 1, "answer_hint": 1, "two_turn_feedback": 1}
    config = tiny_config(
        tmp_path,
        tiny_model_dir,
        env="expert_iteration",
        env_kwargs={},
        task="arithmetic",
        task_kwargs={"max_digits": 1},
        strategy_mix=mix,
        strategy_weights={
            "iid": 2.0,
            "prompt_augmentation": 1.0,
            "answer_hint": 1.0,
            "two_turn_feedback": 1.0,
        },
        drop_constant_groups=False,  # a random model rarely answers right: keep every group
        eval_every=2,
        eval_groups=2,
    )
    rows = read_metrics(train(config))
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    first = rows[0]
    for strategy in mix:
        assert first[f"strategy/{strategy}/num_trajectories"] == 2  # n_s: one per group
        assert f"env/{strategy}/reward/total" in first
    # Attempt 1 of two_turn_feedback is context only (loss weight 0); the swapped
    # contexts show as a non-zero log ratio, the on-policy iid samples do not.
    assert abs(first["strategy/iid/mean_log_ratio"]) < 1e-4
    assert abs(first["strategy/prompt_augmentation/mean_log_ratio"]) > 1e-3
    assert first["eval/num_episodes"] == 2 and "eval/opponent/num_episodes" not in first
