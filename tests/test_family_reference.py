"""What a family declares for ``llm-envs check``: its reward range, and reference players.

``reward_range`` bounds one agent's return in one episode for the family's
settings (hand-computed from each env's documented rewards); the code
families' reference players write the data sets' reference solutions and
earn the most an episode of them can pay.
"""

from __future__ import annotations

import pytest

from baselines.rollouts import rollout
from baselines.samplers.scripted import ScriptedPolicy
from llm_envs.family import FamilyBase
from llm_envs.registration import make_family


def test_a_family_declares_no_range_unless_it_says_so():
    assert FamilyBase.reward_range is None


@pytest.mark.parametrize(
    ("name", "env_kwargs", "expected"),
    [
        # -1 for a parse error (once: it ends the debate) + the win rate in [0, 1]
        ("debate", {}, (-1.0, 1.0)),
        ("debate", {"reward": "win_minus_loss"}, (-2.0, 1.0)),
        ("debate", {"on_parse_error": "mask"}, (0.0, 1.0)),
        ("debate", {"reward": None, "on_parse_error": "mask"}, (0.0, 0.0)),
        # shaping: up to the weights' sum per answer, one answer per round (2 rounds)
        ("debate", {"max_rounds": 2, "shaping": {"contract": 0.5, "vote": 0.25}}, (-1.0, 2.5)),
        # the team reward in [0, 4] per turn, 2 turns by default
        ("code_collab", {}, (0.0, 8.0)),
        ("code_collab", {"num_turns": 1}, (0.0, 4.0)),
        ("code_collab", {"num_turns": 2, "reward_shift": -4.0}, (-8.0, 0.0)),
        ("code_collab", {"num_turns": 3, "reward_shift": -1.0}, (-3.0, 9.0)),
        # the solver's score in [0, 1] (+ format_reward), the critic's change in [-1, 1]
        ("expert_iteration", {}, (-1.0, 1.0)),
        ("expert_iteration", {"format_reward": 0.5}, (-1.0, 1.5)),
        ("expert_iteration", {"format_reward": -2.0}, (-2.0, 1.0)),
        ("textarena", {}, (-1.0, 1.0)),
    ],
)
def test_reward_ranges_follow_the_settings(name, env_kwargs, expected):
    assert make_family(name, env_kwargs).reward_range == expected


def _returns(family, groups):
    plan = family.evaluation(groups, seed=0)
    results = rollout(
        plan.envs,
        ScriptedPolicy(family.reference_players()),
        seeds=plan.seeds,
        options=plan.options,
    )
    return [
        {a: r.trajectories[a].step_reward + r.final_rewards[a] for a in seats}
        for r, seats in zip(results, plan.trained_agents, strict=True)
    ]


@pytest.mark.parametrize(
    ("name", "task", "expected"),
    [
        # main's reference solution, no helper code: 0.6 + 0.5 + 1.0 per turn, two turns
        ("code_collab", "humaneval", 4.2),
        ("code_collab", "mbpp", 4.2),
        ("expert_iteration", "default", 1.0),  # right at once
        ("expert_iteration", "humaneval", 1.0),  # every test passes
        ("expert_iteration", "mbpp", 1.0),
    ],
)
def test_the_code_and_math_reference_players_score_the_most(name, task, expected):
    family = make_family(name, {}, task=task)
    returns = _returns(family, [0, 1, 2])
    assert all(v == pytest.approx(expected) for r in returns for v in r.values()), returns


@pytest.mark.parametrize(
    ("name", "task"), [("code_collab", "default"), ("expert_iteration", "coophumaneval")]
)
def test_a_data_set_without_references_has_no_reference_players(name, task):
    with pytest.raises(ValueError, match="use --task humaneval or mbpp"):
        make_family(name, {}, task=task).reference_players()
