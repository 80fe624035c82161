"""End to end without a model: plan -> rollout -> trajectories -> Datums with the context swap.

Byte tokens (``byte_render``) stand in for a tokenizer, so the token-level
statements are exact: attempt-2 Datums start with the *training* context's
tokens, action tokens are the completion's bytes verbatim, and attempt-1
tokens carry weight 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from baselines.data.datums import (
    assemble_training_data,
    training_context_transform,
    trajectory_to_data,
)
from baselines.rollouts import group_by, rollout
from baselines.samplers import ScriptedPolicy
from baselines.samplers.scripted import byte_render
from llm_envs.expert_iteration import ScriptedCritic, ScriptedMathSolver, plan_groups
from llm_envs.tasks import ArithmeticTask

MIX = {"iid": 2, "prompt_augmentation": 1, "answer_hint": 1, "two_turn_feedback": 2}


def tokens(text):
    return list(text.encode("utf-8"))


def datums(trajectory):
    transform = training_context_transform(trajectory, byte_render)
    return trajectory_to_data(trajectory, 1.0, transform)


def full_sequence(datum):
    return [*datum.model_input.tolist(), int(datum.target_tokens[-1])]


def weights_by_position(datum):
    # weights[t] belongs to target t, i.e. to position t + 1 of the full sequence.
    return [0.0, *datum.weights.tolist()]


@pytest.mark.parametrize(
    ("training_context", "feedback_source"),
    [("problem+attempt1", "verifier"), ("problem", "verifier"), ("problem+attempt1", "critic")],
)
def test_rollout_to_datums(training_context, feedback_source):
    problems = ArithmeticTask(3, seed=11)
    plan = plan_groups(problems, MIX, seed=0)
    envs = plan.make_envs(training_context=training_context, feedback_source=feedback_source)
    # Wrong first, right after feedback; the critic says whether attempt 1 is right.
    policy = ScriptedPolicy({"solver": ScriptedMathSolver(), "critic": ScriptedCritic()})
    results = rollout(envs, policy, seeds=plan.seeds, options=plan.options)

    for result, strategy in zip(results, plan.strategies, strict=True):
        trajectory = result.trajectories["solver"]
        assert trajectory.strategy == strategy
        turns = trajectory.transitions
        assert len(turns) == (2 if strategy == "two_turn_feedback" else 1)
        final_reward = result.final_rewards["solver"]
        if feedback_source == "critic" and strategy != "two_turn_feedback":
            assert result.trajectories["critic"].transitions == ()
        assert final_reward == (1.0 if strategy == "two_turn_feedback" else 0.0)
        data = datums(trajectory)
        env = envs[result.env_index].unwrapped

        if strategy == "iid":
            [d] = data
            assert turns[0].training_messages is None
            assert full_sequence(d)[: len(turns[0].observation)] == list(turns[0].observation)
        elif strategy in ("prompt_augmentation", "answer_hint"):
            [d] = data
            training = byte_render(turns[0].training_messages)
            assert training != turns[0].observation
            seq = full_sequence(d)
            assert seq == [*training, *turns[0].action]  # training context + verbatim completion
            assert seq[len(training) :] == tokens(env.attempts[0].text)
            assert set(weights_by_position(d)[len(training) :]) == {1.0}
        else:
            a1, a2 = turns
            assert a1.training_messages is None and a1.loss_weight == 0.0
            assert a2.training_messages is not None and a2.loss_weight == 1.0
            assert a1.info["correct"] is False and a2.info["correct"] is True
            if feedback_source == "critic":
                [review] = result.trajectories["critic"].transitions
                assert review.info["improvement"] == result.final_rewards["critic"] == 1.0
            assert a2.training_messages == env.attempts[1].context.training_messages
            assert "Feedback" not in str(a2.training_messages)
            training2 = list(byte_render(a2.training_messages))
            attempt2 = data[-1]
            seq = full_sequence(attempt2)
            # The Datum that trains attempt 2 starts with attempt 2's TRAINING context.
            assert seq[: len(training2)] == training2
            assert seq[len(training2) :] == list(a2.action) == tokens(env.attempts[1].text)
            assert training2 != list(a2.observation)  # the sampling context had the feedback
            weights = weights_by_position(attempt2)
            assert set(weights[len(training2) :]) == {1.0}
            if training_context == "problem+attempt1":
                # Problem + attempt 1 is a prefix of the training context: one Datum, and
                # attempt 1's tokens are in it with weight 0.
                assert len(data) == 1
                start = len(a1.observation)
                assert seq[:start] == list(a1.observation)
                assert seq[start : start + len(a1.action)] == list(a1.action)
                assert set(weights[start : start + len(a1.action)]) == {0.0}
            else:
                # Attempt 2 is trained as a first answer: a new Datum; attempt 1's has weight 0.
                assert len(data) == 2
                assert training2 == list(a1.observation)
                assert not np.any(data[0].weights)

    # agents=["solver"]: critics are not centred with the solvers they reviewed.
    groups = group_by(results, plan.group_key, agents=["solver"])
    assert len(groups) == 3
    for group in groups:
        assert group.strategies_G == tuple(plan.strategies[:6])
    batch = assemble_training_data(groups, render_messages=byte_render)
    assert batch.metrics["data/num_groups_kept"] == 3
    assert batch.metrics["strategy/two_turn_feedback/num_trajectories"] == 6
    assert batch.metrics["strategy/iid/num_trajectories"] == 6
    two_turn = [d for d in batch.data_D if d.strategy == "two_turn_feedback"]
    assert two_turn and all(np.all(d.advantages[d.weights > 0] > 0) for d in two_turn)
