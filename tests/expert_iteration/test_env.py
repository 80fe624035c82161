"""The expert-iteration environment: conformance, configuration, turns, rewards, loss weights."""

from __future__ import annotations

import json
import warnings

import pettingzoo
import pytest
from hypothesis import given
from hypothesis import strategies as st

import llm_envs  # noqa: F401  (registers the environments)
from llm_envs.contract import LOSS_WEIGHT, ROUND, STOP, STRATEGY, TRAINING_MESSAGES, TURN
from llm_envs.expert_iteration import (
    ExpertIterationEnv,
    ScriptedCritic,
    ScriptedMathSolver,
    Strategy,
    env,
    raw_env,
)
from llm_envs.tasks import ArithmeticTask, MathProblem
from llm_envs.testing.conformance import check_aec_env, play_aec

PROBLEM = MathProblem("demo/0", "What is 17 + 4?", "21")
STRATEGIES = [s.value for s in Strategy]


def play(ei, agents, *, seed=0, problem=PROBLEM, strategy=None):
    """Play one episode with text agents by name; return every last()."""
    options = {"problem": problem}
    if strategy is not None:
        options["strategy"] = strategy
    return play_aec(
        ei, lambda agent, obs, info: agents[agent](obs, info), seed=seed, options=options
    )


def live_turns(seen):
    return [(agent, info) for agent, _, _, term, trunc, info in seen if not (term or trunc)]


def final(seen):
    """Each agent's (reward, info) at its dead step."""
    return {agent: (reward, info) for agent, _, reward, term, trunc, info in seen if term or trunc}


# --------------------------------------------------------------------- conformance


@pytest.mark.parametrize(
    "kwargs",
    [
        *({"strategy": s} for s in STRATEGIES),
        {"strategy": "two_turn_feedback", "training_context": "problem"},
        {"strategy": "two_turn_feedback", "feedback_source": "critic"},
        {"strategy": "two_turn_feedback", "on_first_correct": "stop", "format_reward": 0.1},
        {"strategy": "iid", "feedback_source": "critic"},  # the critic never acts
        {"strategy": "prompt_augmentation", "system_prompt": "S", "stop": ["</answer>"]},
    ],
)
def test_pettingzoo_conformance(kwargs):
    check_aec_env(lambda: env(**kwargs))
    check_aec_env(lambda: raw_env(**kwargs))


def test_registered_with_pettingzoo():
    ei = pettingzoo.make("aec", "llm_envs/ExpertIteration-v0", strategy="answer_hint")
    ei.reset(seed=0)
    assert ei.possible_agents == ["solver"]
    assert isinstance(ei.unwrapped, ExpertIterationEnv)
    assert ei.unwrapped.strategy is Strategy.ANSWER_HINT


def test_default_problems_are_seeded_arithmetic():
    a, b = raw_env(), raw_env()
    a.reset(seed=5)
    b.reset(seed=5)
    assert a.problem == b.problem
    assert a.problem.task_id.startswith("Arithmetic/0/")


# ------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"strategy": "beam"}, ValueError, "strategy must be one of"),
        ({"problems": []}, ValueError, "problems must not be empty"),
        ({"problems": PROBLEM}, TypeError, r"got one MathProblem .*: wrap it in a list"),
        ({"augmentation": " "}, ValueError, "augmentation must be non-empty"),
        (
            {"augmentation": [{"role": "user", "content": "x"}]},
            ValueError,
            "must not end with a user message",
        ),
        (
            {"augmentation": [{"role": "system", "content": "x"}], "system_prompt": "S"},
            ValueError,
            "two system messages",
        ),
        ({"hint": "half"}, ValueError, "hint must be one of"),
        ({"hint_fraction": 0}, ValueError, r"hint_fraction must be a finite number in \(0, 1\]"),
        ({"hint_template": "no placeholder"}, ValueError, "must contain the placeholder"),
        ({"feedback_source": "human"}, ValueError, "feedback_source must be one of"),
        ({"training_context": "attempt1"}, ValueError, "training_context must be one of"),
        ({"revise_message": ""}, ValueError, "revise_message must be non-empty"),
        ({"attempt1_loss_weight": -1}, ValueError, "attempt1_loss_weight must be"),
        ({"on_first_correct": "retry"}, ValueError, "on_first_correct must be one of"),
        ({"code_reward": "partial"}, ValueError, "code_reward must be one of"),
        ({"format_reward": float("nan")}, ValueError, "format_reward must be a finite"),
        ({"stop": "</a>"}, TypeError, "wrap it"),
        ({"stop": [""]}, ValueError, "stop must hold non-empty strings"),
        ({"code_timeout": 0}, ValueError, "code_timeout must be"),
        ({"max_failures_shown": -1}, ValueError, "max_failures_shown must be"),
        ({"code_runner": 3}, TypeError, "code_runner must be callable"),
        ({"render_mode": "rgb_array"}, ValueError, "render_mode must be one of"),
        # Numbers: finite, in range, of the right type, refused at construction.
        ({"hint_fraction": float("nan")}, ValueError, r"hint_fraction must be a finite number"),
        ({"hint_fraction": True}, TypeError, r"hint_fraction must be .* got True \(a bool\)"),
        ({"attempt1_loss_weight": True}, TypeError, r"attempt1_loss_weight must be a finite"),
        ({"attempt1_loss_weight": float("inf")}, ValueError, "attempt1_loss_weight must be"),
        ({"format_reward": True}, TypeError, r"format_reward must be a finite number, got True"),
        ({"format_reward": float("-inf")}, ValueError, "format_reward must be a finite number"),
        ({"format_reward": "1"}, TypeError, r"format_reward must be a finite number, got '1'"),
        ({"code_timeout": True}, TypeError, r"code_timeout must be .* got True \(a bool\)"),
        ({"code_timeout": 1e9}, ValueError, r"code_timeout must be .* in \(0, 3600\]"),
        ({"code_timeout": float("nan")}, ValueError, r"code_timeout must be .* got nan"),
        ({"max_failures_shown": True}, TypeError, r"max_failures_shown must be an int >= 0"),
        ({"max_failures_shown": 2.5}, TypeError, r"max_failures_shown must be an int >= 0"),
        ({"critic_sees_reference": "no"}, TypeError, "critic_sees_reference must be True or"),
        ({"hint_template": 3}, TypeError, "hint_template must be text"),
        ({"augmentation": 3}, TypeError, "augmentation must be text or a sequence"),
        # Sequences: one item is not a sequence, and every item is a problem.
        ({"problems": "What is 1 + 1?"}, TypeError, r"got one str .*; pass a list"),
        ({"problems": ["What is 1 + 1?"]}, TypeError, r"problems\[0\] is 'What is 1 \+ 1\?'"),
        ({"problems": 3}, TypeError, "problems must be a sequence of MathProblem or CodeProblem"),
    ],
)
def test_bad_config_is_a_clear_error(kwargs, error, message):
    with pytest.raises(error, match=message):
        ExpertIterationEnv(**kwargs)


def test_bad_reset_options_are_clear_errors_and_unknown_ones_warn():
    ei = raw_env()
    with pytest.raises(TypeError, match="MathProblem or CodeProblem, got str"):
        ei.reset(options={"problem": "What is 1 + 1?"})
    with pytest.raises(ValueError, match=r"options\['strategy'\] must be one of"):
        ei.reset(options={"strategy": "beam"})
    with pytest.warns(UserWarning, match=r"ignores unknown option\(s\) \['question'\]"):
        ei.reset(options={"question": "x"})


def test_lifecycle_errors():
    ei = env()
    with pytest.raises(AssertionError, match=r"reset\(\) needs to be called before step"):
        ei.step("x")
    bare = raw_env()
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\): ExpertIterationEnv"):
        bare.step("x")
    bare.reset(seed=0)
    with pytest.raises(TypeError, match="must be its text"):
        bare.step(7)  # type: ignore[arg-type]
    bare.step("x")
    bare.step(None)
    with pytest.raises(RuntimeError, match="after the episode ended"):
        bare.step("x")


# -------------------------------------------------------------- single-turn episodes


@pytest.mark.parametrize("strategy", ["iid", "prompt_augmentation", "answer_hint"])
@pytest.mark.parametrize(
    ("answer", "format_reward", "reward", "correct", "formatted"),
    [
        ("17 + 4 = \\boxed{21}", 0.0, 1.0, True, True),
        ("17 + 4 = \\boxed{21}", 0.1, 1.1, True, True),
        ("The answer is 21.", 0.1, 1.0, True, False),
        ("\\boxed{20}", 0.1, 0.1, False, True),
        ("no idea", 0.1, 0.0, False, False),
    ],
)
def test_single_turn_reward_and_outcome(
    strategy, answer, format_reward, reward, correct, formatted
):
    ei = raw_env(strategy=strategy, format_reward=format_reward)
    seen = play(ei, {"solver": lambda obs, info: answer})
    [(_, before)] = live_turns(seen)
    assert before[TURN] == 0 and before[ROUND] == 1 and before[STRATEGY] == strategy
    got_reward, info = final(seen)["solver"]
    assert got_reward == pytest.approx(reward)
    assert info[LOSS_WEIGHT] == 1.0
    assert (info["correct"], info["formatted"], info["attempt"]) == (correct, formatted, 1)
    assert info["score"] == (1.0 if correct else 0.0)
    assert info["attempt_reward"] == pytest.approx(reward)
    assert info["task_id"] == "demo/0"
    assert TRAINING_MESSAGES not in info  # no upcoming turn
    assert "first_attempt_correct" not in info


def test_strategy_option_overrides_the_configured_strategy():
    ei = raw_env(strategy="iid")
    seen = play(ei, {"solver": lambda obs, info: "\\boxed{21}"}, strategy="two_turn_feedback")
    assert [info[STRATEGY] for _, info in live_turns(seen)] == ["two_turn_feedback"] * 2
    ei.reset(seed=0)
    assert ei.strategy is Strategy.IID


# ------------------------------------------------------- two-turn feedback (verifier)


@pytest.mark.parametrize("training_context", ["problem+attempt1", "problem"])
def test_two_turn_scripted_solver_fixes_after_feedback(training_context):
    ei = raw_env(strategy="two_turn_feedback", training_context=training_context)
    seen = play(ei, {"solver": ScriptedMathSolver()})
    (_, first), (_, second) = live_turns(seen)
    assert (first[TURN], first[ROUND], second[TURN], second[ROUND]) == (0, 1, 1, 2)
    # The info before attempt 2 carries attempt 1's outcome: wrong, loss weight 0, no reward.
    assert second[LOSS_WEIGHT] == 0.0
    assert (second["attempt"], second["correct"], second["extracted_answer"]) == (1, False, "22")
    assert seen[1][2] == 0.0
    assert (
        ei.attempts[1]
        .context.observation[-1]["content"]
        .startswith("Feedback on your answer:\nYour final answer, 22, is wrong.")
    )
    reward, info = final(seen)["solver"]
    assert reward == 1.0
    assert info[LOSS_WEIGHT] == 1.0
    assert (info["attempt"], info["correct"]) == (2, True)
    assert info["first_attempt_correct"] is False
    assert (info["num_attempts"], info["fixed"], info["broken"]) == (2, True, False)


def test_attempt1_loss_weight_is_configurable():
    ei = raw_env(strategy="two_turn_feedback", attempt1_loss_weight=0.25)
    (_, _), (_, second) = live_turns(play(ei, {"solver": ScriptedMathSolver()}))
    assert second[LOSS_WEIGHT] == 0.25


def test_solver_that_ignores_feedback_stays_wrong():
    ei = raw_env(strategy="two_turn_feedback")
    seen = play(ei, {"solver": ScriptedMathSolver(fix_after_feedback=False)})
    reward, info = final(seen)["solver"]
    assert reward == 0.0
    assert (info["fixed"], info["broken"], info["first_attempt_correct"]) == (False, False, False)


def test_first_attempt_correct_continues_by_default():
    ei = raw_env(strategy="two_turn_feedback")
    seen = play(ei, {"solver": ScriptedMathSolver(first_attempt="right")})
    assert len(live_turns(seen)) == 2
    assert (
        ei.attempts[1]
        .context.observation[-1]["content"]
        .startswith("Feedback on your answer:\nYour final answer, 21, is correct.")
    )
    reward, info = final(seen)["solver"]
    assert reward == 1.0
    assert (info["first_attempt_correct"], info["fixed"], info["broken"]) == (True, False, False)


def test_first_attempt_correct_can_stop_the_episode():
    ei = raw_env(strategy="two_turn_feedback", on_first_correct="stop")
    seen = play(ei, {"solver": ScriptedMathSolver(first_attempt="right")})
    assert len(live_turns(seen)) == 1
    reward, info = final(seen)["solver"]
    # Attempt 1 is the final attempt: rewarded and trained on (its context is the plain problem).
    assert reward == 1.0
    assert info[LOSS_WEIGHT] == 1.0
    assert (info["attempt"], info["num_attempts"], info["first_attempt_correct"]) == (1, 1, True)


def test_wrong_first_attempt_still_gets_feedback_with_stop():
    ei = raw_env(strategy="two_turn_feedback", on_first_correct="stop")
    assert len(live_turns(play(ei, {"solver": ScriptedMathSolver()}))) == 2


def test_broken_answer_is_reported():
    answers = iter(["\\boxed{21}", "\\boxed{20}"])
    ei = raw_env(strategy="two_turn_feedback")
    seen = play(ei, {"solver": lambda obs, info: next(answers)})
    reward, info = final(seen)["solver"]
    assert reward == 0.0
    assert (info["first_attempt_correct"], info["broken"]) == (True, True)


def test_reward_is_given_once_for_the_final_attempt():
    ei = raw_env(strategy="two_turn_feedback", format_reward=0.5)
    seen = play(ei, {"solver": ScriptedMathSolver()})
    rewards = [reward for agent, _, reward, *_ in seen]
    assert rewards == [0.0, 0.0, 1.5]


# --------------------------------------------------------------- two-turn with a critic


def test_critic_writes_the_feedback():
    ei = raw_env(strategy="two_turn_feedback", feedback_source="critic")
    seen = play(ei, {"solver": ScriptedMathSolver(), "critic": ScriptedCritic()})
    turns = live_turns(seen)
    assert [agent for agent, _ in turns] == ["solver", "critic", "solver"]
    assert [info[TURN] for _, info in turns] == [0, 1, 2]
    assert [info[ROUND] for _, info in turns] == [1, 1, 2]
    assert TRAINING_MESSAGES not in turns[1][1]
    # Attempt 1's outcome reaches the solver at its next turn, after the critic's.
    assert turns[2][1][LOSS_WEIGHT] == 0.0 and turns[2][1]["correct"] is False
    critic_view = ei.observe("critic")["messages"]
    assert critic_view[0]["role"] == "system"
    assert critic_view[1]["content"] == (
        "Problem:\nWhat is 17 + 4?\n\nProposed answer:\nI think 17 + 4 = \\boxed{22}.\n\n"
        "Write your feedback on the proposed answer."
    )
    feedback = "The proposed final answer is wrong: recompute it step by step."
    assert critic_view[2] == {"role": "assistant", "content": feedback}
    assert (
        ei.attempts[1]
        .context.observation[-1]["content"]
        .startswith(f"Feedback on your answer:\n{feedback}\n\n")
    )
    # The training context is the same as with verifier feedback: the feedback is dropped.
    assert feedback not in str(ei.attempts[1].context.training_messages)
    outcome = final(seen)
    assert outcome["solver"][0] == 1.0
    assert outcome["critic"][0] == 1.0  # improvement: 1.0 - 0.0
    assert outcome["critic"][1]["improvement"] == 1.0
    assert outcome["critic"][1][LOSS_WEIGHT] == 1.0


def test_critic_sees_the_reference_when_configured():
    ei = raw_env(strategy="two_turn_feedback", feedback_source="critic", critic_sees_reference=True)
    ei.reset(seed=0, options={"problem": PROBLEM})
    assert "Reference answer:\n21" in ei.observe("critic")["messages"][1]["content"]


def test_critic_that_misleads_gets_a_negative_reward():
    ei = raw_env(strategy="two_turn_feedback", feedback_source="critic")
    agents = {
        "solver": ScriptedMathSolver(first_attempt="right"),
        "critic": lambda obs, info: "This is wrong.",
    }
    seen = play(ei, agents)
    # The scripted solver "fixes" a right answer into the same right answer.
    assert final(seen)["critic"][0] == 0.0
    answers = iter(["\\boxed{21}", "\\boxed{20}"])
    agents["solver"] = lambda obs, info: next(answers)
    assert final(play(ei, agents))["critic"][0] == -1.0


def test_critic_is_idle_in_other_strategies_and_after_a_stop():
    ei = raw_env(strategy="iid", feedback_source="critic")
    ei.reset(seed=0)
    assert ei.agents == ["solver"]
    ei = raw_env(strategy="two_turn_feedback", feedback_source="critic", on_first_correct="stop")
    seen = play(ei, {"solver": ScriptedMathSolver(first_attempt="right"), "critic": None})
    assert [agent for agent, _ in live_turns(seen)] == ["solver"]
    assert final(seen)["critic"][0] == 0.0


# ---------------------------------------------------------------------- other contract


def test_infos_hold_stop_strings_and_strategy_on_every_turn():
    ei = raw_env(strategy="two_turn_feedback", stop=["</answer>"])
    for _, info in live_turns(play(ei, {"solver": ScriptedMathSolver()})):
        assert info[STOP] == ["</answer>"]
        assert info[STRATEGY] == "two_turn_feedback"


def test_fork_is_independent_mid_episode():
    ei = raw_env(strategy="two_turn_feedback")
    ei.reset(seed=0, options={"problem": PROBLEM})
    ei.step("\\boxed{22}")
    fork = ei.fork()
    assert fork.config is ei.config
    fork.step("\\boxed{21}")
    ei.step("\\boxed{23}")
    assert fork.rewards["solver"] == 1.0 and ei.rewards["solver"] == 0.0
    assert fork.attempts[1].text == "\\boxed{21}" and ei.attempts[1].text == "\\boxed{23}"


def test_render_ansi_transcript():
    ei = raw_env(strategy="two_turn_feedback", render_mode="ansi")
    play(ei, {"solver": ScriptedMathSolver()})
    text = ei.render()
    assert text.startswith("Problem demo/0 (strategy: two_turn_feedback)\nuser: What is 17 + 4?")
    assert "--- attempt 1 ---\nI think 17 + 4 = \\boxed{22}.\n(correct: False" in text
    assert "--- feedback ---\nFeedback on your answer:\nYour final answer, 22, is wrong." in text
    assert text.endswith("=== ended after 2 attempt(s) ===")
    with pytest.warns(UserWarning, match="without a render_mode"):
        raw_env().render()


def test_record_is_json_ready_and_complete():
    ei = raw_env(strategy="two_turn_feedback", feedback_source="critic")
    play(ei, {"solver": ScriptedMathSolver(), "critic": ScriptedCritic()})
    record = json.loads(json.dumps(ei.record()))
    assert record["env"] == "expert_iteration_v0"
    assert record["title"] == "demo/0 (two_turn_feedback)"
    assert record["summary"] == {
        "task_id": "demo/0",
        "strategy": "two_turn_feedback",
        "reference_answer": "21",
        "attempts": 2,
        "final_correct": True,
        "final_score": 1.0,
        "first_attempt_correct": False,
        "feedback_source": "critic",
    }
    first, review, second = record["turns"]
    assert [t["agent"] for t in record["turns"]] == ["solver", "critic", "solver"]
    assert [t["round"] for t in record["turns"]] == [1, 1, 2]
    assert first["prompt"] == ei.attempts[0].context.observation
    assert first["text"] == "I think 17 + 4 = \\boxed{22}."
    assert first["details"][LOSS_WEIGHT] == 0.0 and first["details"]["correct"] is False
    assert TRAINING_MESSAGES not in first["details"]
    assert review["prompt"][1]["content"].startswith("Problem:\nWhat is 17 + 4?")
    assert review["text"] == ei.critic_feedback
    assert second["details"][LOSS_WEIGHT] == 1.0
    assert second["details"][TRAINING_MESSAGES] == ei.attempts[1].context.training


def test_problems_are_drawn_from_the_reset_seed():
    task = ArithmeticTask(50, seed=4)
    ei = raw_env(problems=task)
    drawn = set()
    for seed in range(20):
        ei.reset(seed=seed)
        drawn.add(ei.problem.task_id)
        ei.reset(seed=seed)
        assert ei.problem.task_id in drawn
    assert len(drawn) > 5


@given(st.text(max_size=200), st.text(max_size=200), st.sampled_from(STRATEGIES))
def test_any_text_is_a_legal_action(first, second, strategy):
    texts = iter([first, second])
    ei = raw_env(strategy=strategy, feedback_source="critic", format_reward=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        seen = play(ei, {"solver": lambda o, i: next(texts), "critic": lambda o, i: first})
    reward, info = final(seen)["solver"]
    assert 0.0 <= reward <= 1.1
    assert info["attempt_reward"] == reward
