"""The judge's names hold through every reward path, not only ``run_tests``.

A wrong answer that binds the judge's comparison (here through an import,
which code collaboration keeps from the helper's text) must stay wrong in
``Sandbox.run_tests_many``, the code-collaboration team reward, and the
expert-iteration verifier.
"""

from __future__ import annotations

from llm_envs.code_collab.env import parallel_env
from llm_envs.expert_iteration.verifier import verify_code
from llm_envs.sandbox import Sandbox, SandboxJob
from llm_envs.sandbox._judge import COMPARE_NAME
from llm_envs.tasks import CodeProblem

PROBLEM = CodeProblem(
    "demo/0",
    "def double(x):\n    '''Twice x.'''\n",
    "double",
    ("assert double(2) == 4", "assert double(3) == 6", "assert double(0) == 0"),
)
# What code collaboration keeps of a helper's text: its imports. max(left, right,
# op) is truthy for most comparisons (a wrong program's 2 of these 3 tests).
FORGERY = f"from builtins import max as {COMPARE_NAME}\n"
# What a whole program can do: a comparison that says yes to everything.
FORGED_FUNCTION = f"def {COMPARE_NAME}(left, right, op):\n    return True\n"
WRONG_MAIN = "def double(x):\n    return -1\n"


def test_run_tests_many(sandbox: Sandbox) -> None:
    jobs = [
        SandboxJob(forgery + WRONG_MAIN, PROBLEM.tests, entry_point="double")
        for forgery in (FORGERY, FORGED_FUNCTION)
    ]
    assert [r.passed for r in sandbox.run_tests_many(jobs)] == [0, 0]


def test_the_code_collaboration_team_reward(sandbox: Sandbox) -> None:
    env = parallel_env(problems=[PROBLEM], num_turns=1, sandbox=sandbox)
    env.reset(seed=0)
    helper = FORGERY + "def aux(x):\n    return x\n"
    _, rewards, _, _, infos = env.step({"helper": helper, "main": WRONG_MAIN})
    assert infos["main"]["passed"] == 0
    assert rewards["main"] == 1.5  # definitions and syntax only: no test, no bonus


def test_the_expert_iteration_verifier(sandbox: Sandbox) -> None:
    response = f"```python\n{FORGED_FUNCTION}{WRONG_MAIN}```"
    verdict = verify_code(PROBLEM, response, sandbox.run_tests)
    assert not verdict.correct
    assert verdict.tests_passed == 0
