"""Code problems in the expert-iteration environment, scored by the sandbox (HumanEval, MBPP)."""

from __future__ import annotations

import pytest

from llm_envs.contract import LOSS_WEIGHT, TRAINING_MESSAGES
from llm_envs.expert_iteration import ScriptedCodeSolver, raw_env
from llm_envs.expert_iteration.prompts import default_revise_message, problem_text
from llm_envs.tasks import CodeProblem, load_humaneval, load_mbpp
from llm_envs.testing.conformance import check_aec_env, play_aec

BUGGY = "def truncate_number(number: float) -> float:\n    return number // 1.0\n"
FIXED = "def truncate_number(number: float) -> float:\n    return number % 1.0\n"


@pytest.fixture(scope="module")
def run_tests():
    sandbox = pytest.importorskip("llm_envs.sandbox")
    if not hasattr(sandbox, "run_tests"):
        pytest.skip("llm_envs.sandbox.run_tests has not landed")
    return sandbox.run_tests


@pytest.fixture(scope="module")
def truncate_number():
    problem = load_humaneval()[2]
    assert problem.entry_point == "truncate_number"
    return problem


def play(ei, agent, problem):
    return play_aec(ei, lambda a, obs, info: agent(obs, info), seed=0, options={"problem": problem})


def test_humaneval_two_turn_feedback_with_a_solver_that_fixes_its_code(run_tests, truncate_number):
    ei = raw_env(strategy="two_turn_feedback")
    seen = play(ei, ScriptedCodeSolver(BUGGY, FIXED), truncate_number)
    (_, _, _, _, _, before1), (_, obs2, r1, _, _, before2), (_, _, r2, term, _, after) = seen
    # Attempt 1 failed every test; its feedback lists them with the sandbox's errors.
    assert (r1, before2[LOSS_WEIGHT], before2["tests_passed"], before2["tests_total"]) == (
        0.0,
        0.0,
        0,
        3,
    )
    assert before2["program_status"] == "ok" and before2["correct"] is False
    feedback = obs2["messages"][-1]["content"]
    assert feedback.startswith(
        "Feedback on your answer:\nYour code failed 3 of 3 tests.\n"
        'Test:\n    assert candidate(3.5) == 0.5\nResult: AssertionError: "assert 3.0 == 0.5"\n'
    )
    assert feedback.endswith(default_revise_message(truncate_number))
    # Attempt 2 is trained on problem + attempt 1 + the revise message: no test in sight.
    plain = [{"role": "user", "content": problem_text(truncate_number)}]
    assert TRAINING_MESSAGES not in before1
    assert before2[TRAINING_MESSAGES] == [
        *plain,
        {"role": "assistant", "content": f"```python\n{BUGGY.rstrip()}\n```"},
        {"role": "user", "content": default_revise_message(truncate_number)},
    ]
    assert term and r2 == 1.0
    assert (after[LOSS_WEIGHT], after["tests_passed"], after["correct"], after["fixed"]) == (
        1.0,
        3,
        True,
        True,
    )


def test_humaneval_training_context_problem(run_tests, truncate_number):
    ei = raw_env(strategy="two_turn_feedback", training_context="problem")
    seen = play(ei, ScriptedCodeSolver(BUGGY, FIXED), truncate_number)
    assert seen[1][5][TRAINING_MESSAGES] == [
        {"role": "user", "content": problem_text(truncate_number)}
    ]
    assert seen[-1][2] == 1.0


@pytest.mark.parametrize(
    ("body", "code_reward", "reward"),
    [
        ("    return number % 1.0\n", "fraction", 1.0),
        ("    return 0.5\n", "fraction", 1 / 3),
        ("    return 0.5\n", "all_or_nothing", 0.0),
        ("    return number % 1.0\n", "all_or_nothing", 1.0),
    ],
)
def test_humaneval_reward_modes(run_tests, truncate_number, body, code_reward, reward):
    # A bare body (HumanEval's completion format) continues the prompt's stub.
    ei = raw_env(strategy="iid", code_reward=code_reward)
    seen = play(ei, lambda obs, info: f"```python\n{body}```", truncate_number)
    assert seen[-1][2] == pytest.approx(reward)


def test_code_that_does_not_compile_is_a_wrong_answer(run_tests, truncate_number):
    ei = raw_env(strategy="two_turn_feedback")
    seen = play(ei, ScriptedCodeSolver("def truncate_number(:\n    pass\n", FIXED), truncate_number)
    feedback = seen[1][1]["messages"][-1]["content"]
    assert (
        'Your code does not compile, so none of the 3 tests ran.\nError: "SyntaxError' in feedback
    )
    assert seen[1][5]["program_status"] == "syntax_error"
    assert seen[-1][2] == 1.0


def test_humaneval_answer_hint_shows_the_canonical_solution(run_tests, truncate_number):
    ei = raw_env(strategy="answer_hint")
    ei.reset(seed=0, options={"problem": truncate_number})
    sampled = ei.observe("solver")["messages"][0]["content"]
    assert "return number % 1.0" in sampled
    assert ei.infos["solver"][TRAINING_MESSAGES] == [
        {"role": "user", "content": problem_text(truncate_number)}
    ]


def test_mbpp_two_turn_feedback(run_tests):
    problem = load_mbpp("test")[0]  # remove_Occ
    fixed = problem.canonical_solution
    buggy = "def remove_Occ(s, ch):\n    return s[1:-1]\n"  # right only when ch is at both ends
    seen = play(raw_env(strategy="two_turn_feedback"), ScriptedCodeSolver(buggy, fixed), problem)
    assert (seen[1][5]["tests_passed"], seen[1][5]["tests_total"], seen[1][2]) == (2, 3, 0.0)
    assert seen[-1][2] == 1.0


def test_conformance_on_code_problems(run_tests, truncate_number):
    check_aec_env(
        lambda: raw_env(strategy="two_turn_feedback", problems=(truncate_number,)), num_cycles=20
    )


def test_a_custom_runner_scores_code_without_the_sandbox():
    problem = CodeProblem("t", "def f(x):\n    pass\n", "f", ("assert f(1) == 2",))
    seen_programs = []

    class Report:
        status, error = "ok", None

        def __init__(self, passed):
            self.outcomes = (
                type(
                    "O",
                    (),
                    {
                        "status": "passed" if passed else "failed",
                        "error_type": "AssertionError",
                        "message": "nope",
                    },
                )(),
            )

    def runner(program, tests, *, setup="", timeout=None, entry_point=None):
        seen_programs.append(program)
        return Report("2 * x" in program)

    solver = ScriptedCodeSolver("def f(x):\n    return x\n", "def f(x):\n    return 2 * x\n")
    seen = play(raw_env(strategy="two_turn_feedback", code_runner=runner), solver, problem)
    assert len(seen_programs) == 2
    assert 'Result: AssertionError: "nope"' in seen[1][1]["messages"][-1]["content"]
    assert seen[-1][2] == 1.0


def test_a_code_problem_without_tests_is_a_clear_error():
    problem = CodeProblem("t/none", "def f():\n    pass\n", "f", ())
    with pytest.raises(ValueError, match="'t/none' has no tests"):
        raw_env().reset(options={"problem": problem})
