"""MAGRPO takes any parallel family with a team reward, and refuses the others by name.

The proof is a family ``baselines`` never names: *match lengths*
(:mod:`tests.baselines.magrpo.team_game`), registered for these tests only.
MAGRPO grows its trees, credits them and trains both agents on it. Code
collaboration, the default, keeps its problems, their order and the held-out
split exactly as before the trainer took families.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from baselines.magrpo.config import MAGRPOConfig
from baselines.magrpo.credit import tree_credit
from baselines.magrpo.roots import plan_roots, team_family
from baselines.magrpo.tree import credit_node, grow_trees, tree_metrics
from baselines.samplers.base import SamplingParams
from baselines.samplers.scripted import ScriptedPolicy
from llm_envs import registration
from llm_envs.code_collab import load_problems
from tests.baselines.magrpo.team_game import AGENTS, ENTRIES, EVAL_TOPICS, TOPICS

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def team_game():
    """The test families in the registry for one test, taken out afterwards."""
    for entry in ENTRIES:
        registration.register(
            entry.family, entry.family_entry_point, parallel=entry.entry_point, env_id=entry.id
        )
    try:
        yield
    finally:
        for entry in ENTRIES:
            registration.unregister(entry.family)


def test_baselines_never_names_the_family():
    mentions = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "baselines").rglob("*.py"))
        if "team_game" in path.read_text().lower()
    ]
    assert mentions == []


def test_the_family_is_gone_after_its_test():
    assert "team_game" not in registration.family_names()


def test_a_scripted_tree_on_the_family(team_game):
    config = MAGRPOConfig(env="team_game", eval_problems=1, num_turns=2, device="cpu")
    family = team_family(config)
    assert family.agents == AGENTS
    roots, resets = plan_roots(family.training([0, 1], config.seed))
    assert [root.topic for root in roots] == [
        family.training([g], 0).options[0]["topic"] for g in (0, 1)
    ]
    # agent_0 writes 3 or 5 characters, agent_1 always 3: the aligned pairs are paid 0 and -0.2.
    words = {"agent_0": iter(["abc", "abcde"] * 8), "agent_1": iter(["xyz"] * 16)}
    policy = ScriptedPolicy(
        {a: (lambda agent: lambda obs, info: next(words[agent]))(a) for a in AGENTS}
    )
    trees = grow_trees(
        roots[:1],
        dict.fromkeys(AGENTS, policy),
        SamplingParams(max_tokens=8),
        group_size=2,
        num_turns=2,
        reset_results=resets[:1],
    )
    assert trees[0].rewards_J == [0.0, -0.2]
    credit = tree_credit(credit_node(trees[0]), 0.9, "mean")
    # R = r + 0.9 * mean(children's (0, -0.2)): (-0.09, -0.29); A = R - mean
    assert credit.advantages_A_G[0] == pytest.approx([0.1, -0.1])
    assert credit.advantages_A_G[1] == pytest.approx([0.1, -0.1])
    metrics = tree_metrics(trees, [credit])
    assert metrics["env/turn_1/length_gap"] == pytest.approx(1.0)  # the env's own info
    assert metrics["env/turn_2/nodes"] == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"env": "debate"}, "MAGRPO trains agents on one team reward, and --env debate has none"),
        ({"env": "expert_iteration"}, "--env expert_iteration has none"),
        (
            {"env": "nope"},
            "unknown env 'nope'; the registered ones are: debate, expert_iteration, code_collab",
        ),
        ({"task": "gsm8k"}, "--env code_collab takes --task default | coophumaneval"),
        ({"env_kwargs": {"termination_threshold": 3.0}}, "must not set"),
    ],
)
def test_the_config_refuses(overrides, message):
    with pytest.raises(ValueError, match=message):
        MAGRPOConfig(**overrides)


def test_the_refusal_names_the_families_with_a_team_reward(team_game):
    with pytest.raises(ValueError, match="with a team reward: code_collab, team_game"):
        MAGRPOConfig(env="debate")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"env": "team_game_aec"},
            "parallel environment.*--env team_game_aec plays OrderEnforcingWrapper, an AEC",
        ),
        (
            {"env": "team_game", "num_turns": 3},
            r"num_turns=3 exceeds the env's horizon of 2 turns; lower --num-turns or raise "
            r"the env's \(--env-kwargs '\{\"num_turns\": 3\}'\)",
        ),
        ({"env_kwargs": {"num_agents": 3}}, r"num_agents must be an int in \[1, 2\]"),
        ({"env_kwargs": {"external_mode": "expert_edits"}}, "needs expert="),
        ({"env_kwargs": {"problems": "mbpp"}}, "pass code problems through `task`"),
        ({"task_kwargs": {"size": 3}}, "takes task_kwargs {'num_problems': n} only"),
        (
            {"eval_problems": 82},
            "eval_problems=82: holding out 82 of the 82 problems leaves none to train on",
        ),
    ],
)
def test_the_trainer_refuses_before_loading_a_model(team_game, overrides, message):
    with pytest.raises(ValueError, match=message):
        team_family(MAGRPOConfig(**overrides))


def test_code_collab_problems_order_and_split_are_the_ones_before_families():
    config = MAGRPOConfig(eval_problems=2, problems_per_iteration=3, seed=5)
    family = team_family(config)
    problems = load_problems("coophumaneval")
    train, held_out = problems[:-2], problems[-2:]
    # The trainer's own order before it took families: a seeded permutation per pass.
    before = []
    for position in range(200):
        epoch, offset = divmod(position, len(train))
        order = np.random.default_rng([config.seed, epoch]).permutation(len(train))
        before.append(train[int(order[offset])].task_id)
    plan = family.training(list(range(200)), config.seed)
    assert [o["problem"].task_id for o in plan.options] == before
    assert plan.group_keys == list(range(200))  # one episode, one tree per group
    evaluation = family.evaluation([0, 1], 0)
    assert [o["problem"].task_id for o in evaluation.options] == [p.task_id for p in held_out]
    assert family.num_eval_problems == 2
    # The env of the default run: two agents, two turns, level feedback.
    env = plan.envs[0]
    assert list(env.possible_agents) == ["helper", "main"]
    assert (env.config.num_turns, env.config.external_mode) == (2, "level_feedback")


def test_code_collab_takes_its_settings_from_env_kwargs_and_task():
    config = MAGRPOConfig(
        task="humaneval",
        task_kwargs={"num_problems": 5},
        env_kwargs={"num_agents": 1, "external_mode": "plain", "num_turns": 3},
        num_turns=3,
        eval_problems=1,
    )
    family = team_family(config)
    assert family.agents == ("main",)  # one agent: GRPO on the same tree
    plan = family.training([0, 1, 2, 3], 0)
    assert sorted(o["problem"].task_id for o in plan.options) == [
        f"HumanEval/{i}" for i in range(4)
    ]
    assert family.evaluation([0], 0).options[0]["problem"].task_id == "HumanEval/4"
    assert plan.envs[0].config.external_mode == "plain"


@pytest.mark.slow
@pytest.mark.training
def test_magrpo_trains_both_agents_on_a_family_it_never_names(team_game, tmp_path, tiny_model_dir):
    torch = pytest.importorskip("torch")
    from baselines.magrpo.trainer import MAGRPOTrainer
    from baselines.samplers import TransformersPolicy
    from tests.baselines.magrpo.test_trainer import HalfSolved, fresh_models

    models, tokenizer = fresh_models(tiny_model_dir, agents=AGENTS)
    samplers = {
        "agent_0": TransformersPolicy(models["agent_0"], tokenizer),
        # Half of agent_1's words are "same": the joint actions' rewards differ.
        "agent_1": HalfSolved(TransformersPolicy(models["agent_1"], tokenizer), tokenizer, "same"),
    }
    config = MAGRPOConfig(
        env="team_game",
        model="tiny",
        eval_problems=1,
        group_size=2,
        num_turns=2,
        max_tokens=6,
        num_iterations=2,
        learning_rate=1e-3,
        eval_every=2,
        output_dir=str(tmp_path / "run"),
        progress=False,
        device="cpu",
    )
    trainer = MAGRPOTrainer(config, models=models, tokenizer=tokenizer, samplers=samplers)
    assert trainer.agents == list(AGENTS)
    before = {a: {k: v.clone() for k, v in m.state_dict().items()} for a, m in models.items()}
    trainer.run()

    for agent, model in trainer.models.items():
        after = model.state_dict()
        assert any(not torch.equal(before[agent][k], after[k]) for k in after), agent
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    first = rows[0]
    assert first["env/turn_1/nodes"] == 1 and first["env/turn_2/joint_actions"] == 4
    assert "env/turn_1/length_gap" in first and first["env/turn_1/reward"] <= 0
    for agent in AGENTS:
        assert first[f"optim/{agent}/completions"] == 6  # (1 + 2 nodes) x G
        assert first[f"optim/{agent}/grad_norm"] > 0
    assert first["eval/num_problems"] == 1 and "eval/turn_2/length_gap" in rows[-1]

    (record,) = [
        json.loads(x) for x in (run / "episodes" / "iter_00000.jsonl").read_text().splitlines()
    ]
    topic = record["title"].removeprefix("match lengths: ")
    assert record["env"] == "team_game_v0" and topic in TOPICS
    assert [(t["agent"], t["round"]) for t in record["turns"]] == [
        ("agent_0", 1), ("agent_1", 1), ("agent_0", 2), ("agent_1", 2)
    ]  # fmt: skip
    assert all("advantage" in t["details"] for t in record["turns"])
    (evaluated,) = [
        json.loads(x) for x in (run / "episodes" / "eval_00002.jsonl").read_text().splitlines()
    ]
    assert evaluated["title"] == f"match lengths: {EVAL_TOPICS[0]}"
