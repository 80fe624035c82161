"""Credit assignment in TRL runs: the rollout hands TRL advantages its own centring keeps.

TRL (``scale_rewards="none"``) computes ``A_i = r_i - mean of r over the group`` from
the rewards it gets. The rollout gives it each completion's advantage under the
run's credit scheme; where those sum to zero over a TRL group, TRL's centring
changes nothing and the run trains on the scheme's advantages. No model runs here
except in the last test (a scripted debate through a real tokenizer).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from baselines.data.credit import RoleBaselines, assign_credit
from baselines.grpo.config import GRPORunConfig
from baselines.grpo.reward import env_reward
from baselines.grpo.rollout_func import FamilyRollout
from baselines.grpo.run import build_rollout
from baselines.types import Trajectory, TrajectoryGroup, Transition


def trls_advantages(rewards: list[float], num_generations: int) -> np.ndarray:
    """What TRL 1.16's GRPOTrainer makes of the rewards with scale_rewards='none' (float32)."""
    torch = pytest.importorskip("torch")
    r = torch.tensor(rewards, dtype=torch.float32)
    mean = torch.nanmean(r.view(-1, num_generations), dim=1).repeat_interleave(num_generations)
    return (r - mean).numpy()


def played(*rows: tuple[str, int, float]) -> list[tuple[Trajectory, float]]:
    """``(seat, turns, final reward)`` per completion, as the rollout pairs them."""
    return [
        (Trajectory([Transition([1], [2], [-0.1])] * turns, agent_id=seat), final)
        for seat, turns, final in rows
    ]


def code_rollout(credit: str) -> FamilyRollout:
    # Two episodes of a helper and a main agent per group, one turn each.
    return FamilyRollout.for_env(
        "code_collab",
        {"num_turns": 1},
        num_groups=1,
        options={"num_generations": 2},
        credit=credit,
    )


def test_per_agent_norm_reaches_trl_unchanged_by_its_centring():
    rollout = code_rollout("per_agent_norm")
    assert rollout.num_generations == 4 and rollout.credit_env == "code_collab"
    # Group 1: helpers 3 and 1, mains 0.5 and 0.5; group 2: helpers 2 and 2, mains 4 and 0.
    rows = played(
        ("helper", 1, 3.0), ("main", 1, 0.5), ("helper", 1, 1.0), ("main", 1, 0.5),
        ("helper", 1, 2.0), ("main", 1, 4.0), ("helper", 1, 2.0), ("main", 1, 0.0),
    )  # fmt: skip
    rewards = rollout._credit_rewards(rows)
    # (R - mu) / (sigma + eps): helpers of group 1 are 2 +- 1, mains of group 2 are 2 +- 2;
    # a seat whose returns are equal gets 0.
    one, two = 1 / (1 + 1e-6), 2 / (2 + 1e-6)
    np.testing.assert_allclose(rewards, [one, 0, -one, 0, 0, two, 0, -two], rtol=1e-12)
    np.testing.assert_allclose(trls_advantages(rewards, 4), rewards, atol=1e-6)
    # The returns themselves would be centred on one mean for both seats.
    returns = [final for _, final in rows]
    assert trls_advantages(returns, 4)[:4].tolist() == [1.75, -0.75, -0.25, -0.75]


def test_role_baselines_reach_trl_and_move_with_every_call():
    rollout = code_rollout("role_baseline")
    first = played(("helper", 1, 1.0), ("main", 1, -1.0), ("helper", 1, -1.0), ("main", 1, 1.0))
    assert rollout._credit_rewards(first) == [1.0, -1.0, -1.0, 1.0]  # baselines of 0
    assert rollout.role_baselines.count("code_collab", "helper") == 2
    second = played(("helper", 1, 1.0), ("main", 1, -1.0), ("helper", 1, 1.0), ("main", 1, -1.0))
    expected = assign_credit(
        [TrajectoryGroup([t for t, _ in second], [f for _, f in second])],
        "role_baseline",
        env="code_collab",
        baselines=assign_credit(
            [TrajectoryGroup([t for t, _ in first], [f for _, f in first])],
            "role_baseline",
            env="code_collab",
        ).baselines,
    )
    assert rollout._credit_rewards(second) == expected.advantages_P_G[0].tolist()
    # Zero-sum episodes keep the seats' baselines opposite: TRL's centring is a no-op.
    rewards = rollout._credit_rewards(second)
    np.testing.assert_allclose(trls_advantages(rewards, 4), rewards, atol=1e-6)


def test_agent_turn_groups_reach_trl_for_agents_of_one_turn():
    rollout = code_rollout("agent_turn_groups")
    rows = played(("helper", 1, 3.0), ("main", 0, 9.0), ("helper", 1, 1.0), ("main", 1, 0.5))
    # helper's turn 0: 3 and 1 -> +-1; main: one turn among two trajectories -> 0, none -> 0.
    assert rollout._credit_rewards(rows) == [1.0, 0.0, -1.0, 0.0]
    with pytest.raises(ValueError, match="gives each turn its own advantage"):
        rollout._credit_rewards(played(("helper", 2, 3.0), ("main", 1, 0.0)) * 2)


def test_a_rollout_refuses_credit_its_groups_cannot_carry():
    with pytest.raises(
        ValueError, match=r"holds one trajectory per seat \(\['agent_0', 'agent_1'\]"
    ):
        FamilyRollout.for_env("debate", {"num_agents": 2}, credit="per_agent_norm")
    with pytest.raises(ValueError, match="takes up to 2 turns in one TRL completion"):
        FamilyRollout.for_env(
            "expert_iteration",
            options={"strategy": "two_turn_feedback", "num_generations": 2},
            credit="agent_turn_groups",
        )
    with pytest.raises(ValueError, match="credit must be one of"):
        FamilyRollout.for_env("debate", credit="leave_one_out")
    # The run's flag reaches the rollout.
    rollout = build_rollout(
        GRPORunConfig(env="expert_iteration", task="arithmetic", credit="agent_turn_groups")
    )
    assert rollout.credit == "agent_turn_groups"
    assert build_rollout(GRPORunConfig()).credit == "group_mean"


def test_env_reward_hands_trl_the_credit_and_logs_the_return():
    logged = {}
    rewards = env_reward(
        ["a", "b"],
        env_reward=[1.0, 3.0],
        credit_reward=[-0.5, 0.5],
        log_metric=logged.__setitem__,
    )
    assert rewards == [-0.5, 0.5] and logged == {"env/return": 2.0}
    with pytest.raises(ValueError, match="got 1 credit rewards for 2 completions"):
        env_reward(["a", "b"], env_reward=[1.0, 3.0], credit_reward=[0.5])


@pytest.mark.slow
def test_a_scripted_debate_gets_role_baseline_rewards(tiny_model_dir):
    from transformers import AutoTokenizer

    from baselines.samplers import ScriptedPolicy
    from llm_envs.debate import scripted_debaters

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    rollout = FamilyRollout.for_env(
        "debate",
        {"num_agents": 3, "max_rounds": 1},
        num_groups=2,
        policy=ScriptedPolicy(scripted_debaters(3, seed=0), tokenizer),
        credit="role_baseline",
    )
    trainer = SimpleNamespace(
        processing_class=tokenizer, model=SimpleNamespace(training=False), temperature=1.0
    )
    prompts = [row for row in rollout.dataset_prompts() for _ in range(3)]
    seats = [agent for _, agent in rollout._plan(prompts).rows]
    assert seats == ["agent_0", "agent_1", "agent_2"] * 2
    state = RoleBaselines()
    for _ in range(2):
        out = rollout(prompts, trainer)
        assert any(r != 0 for r in out["env_reward"])  # votes were cast: the test can fail
        base = [state.value("debate", seat) for seat in seats]
        assert out["credit_reward"] == [r - b for r, b in zip(out["env_reward"], base, strict=True)]
        returns = dict.fromkeys(seats, ())
        for seat, r in zip(seats, out["env_reward"], strict=True):
            returns[seat] += (r,)
        state = state.updated("debate", returns)
        assert rollout.role_baselines == state
    assert any(state.value("debate", seat) != 0 for seat in seats)
    # With the default credit TRL gets the returns, and no second reward field.
    rollout.credit = "group_mean"
    assert "credit_reward" not in rollout(prompts, trainer)


@pytest.mark.slow
@pytest.mark.training
def test_a_tiny_trl_run_trains_on_the_credit(tmp_path):
    pytest.importorskip("trl")
    from transformers import AutoTokenizer

    from baselines.grpo.run import build_trainer
    from baselines.models import resolve_model
    from baselines.samplers import ScriptedPolicy
    from llm_envs.expert_iteration import ScriptedMathSolver

    # A solver that is always right: every return is the same, so every advantage is 0.
    cfg = GRPORunConfig(
        env="expert_iteration", task="arithmetic", credit="per_agent_norm", model="tiny",
        device="cpu", max_steps=1, max_tokens=48, save_model=False, output_dir=str(tmp_path),
    )  # fmt: skip
    rollout = build_rollout(cfg)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("tiny"))
    rollout.policy = ScriptedPolicy(ScriptedMathSolver(first_attempt="right"), tokenizer)
    trainer = build_trainer(cfg, rollout)
    trainer.train()
    [logged] = [h for h in trainer.state.log_history if "reward" in h]
    # TRL's reward is what the rollout handed it: the credit, not the return.
    assert logged["env/return"] > 0
    assert logged["reward"] == 0.0
