"""Forgery: wrong programs that attack the judge must score nothing, through every reward path.

The corpus (``forgery_cases.py``) holds programs that define the function under
test wrongly and then try to make the judge report passes: patched builtins and
modules, the harness reached through introspection (subclasses, gc, frames,
tracing, signal handlers, audit hooks, ctypes, process memory), forged output
on every descriptor, exits at every stage, rigged or odd return values, huge
values, threads, forks and resource sabotage. Three reward paths are checked:

1. the sandbox itself (a pool, and the module-level ``run_tests``): 0 passed;
2. ``CodeCollabEnv``: the team reward's tests part (level 3) is 0;
3. ``ExpertIterationEnv`` on code problems: the verdict is incorrect, reward 0.

Whatever a case does, the call returns, and the same pool then still judges an
honest program correct on every worker. (The module's pool is replaced after a
case that broke it, so that one broken pool fails one case, not all the later
ones.) Real HumanEval problems whose tests call a helper of the prompt (38, 32,
50) are attacked by redefining or patching that helper.

Only the public API is used (no ``llm_envs.sandbox._*``), so the file holds for
any judge behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from llm_envs.code_collab import CodeCollabEnv
from llm_envs.expert_iteration import raw_env as expert_iteration_env
from llm_envs.sandbox import Sandbox, SandboxJob, TestReport, default_sandbox, run_tests
from llm_envs.tasks import CodeProblem, load_humaneval
from llm_envs.testing.conformance import play_aec
from tests.sandbox.forgery_cases import (
    ADD,
    CASES,
    COUNTS,
    ENV_CASES,
    EVENS,
    HELPER_ATTACKS,
    Case,
    Task,
    collab_helper,
    collab_main,
)


def _params(names: Any) -> list[Any]:
    return [
        pytest.param(name, id=name, marks=[pytest.mark.slow] if CASES[name].slow else [])
        for name in names
    ]


def _problem(task: Task) -> CodeProblem:
    return CodeProblem(
        f"forgery/{task.entry_point}", task.prompt, task.entry_point, task.tests, task.setup
    )


def _skip_unless_protected(pool: Sandbox, case: Case) -> None:
    if case.requires_any and not any(getattr(pool.protections, p) for p in case.requires_any):
        pytest.skip(f"needs one of {case.requires_any}: without, it would reach the caller")


def _passes(report: TestReport, tests: Any) -> str:
    """What passed, for a failure message (the report itself may hold megabytes of output)."""
    passed = [test for test, outcome in zip(tests, report.outcomes, strict=False) if outcome.passed]
    return f"{report.status.value} ({report.error}): {report.passed} passed: {passed}"


def _judge(pool: Sandbox, program: str, task: Task, timeout: float | None = None) -> TestReport:
    report = pool.run_tests(
        program, task.tests, setup=task.setup, entry_point=task.entry_point, timeout=timeout
    )
    assert report.total == len(task.tests)
    assert report.passed == 0, _passes(report, task.tests)
    return report


def _assert_honest_still_passes(pool: Sandbox, program: str, task: Task) -> None:
    # Several runs at once, so that every worker of the pool judges one: a case may have
    # broken one worker only.
    job = SandboxJob(program, task.tests, task.setup, task.entry_point)
    for report in pool.run_tests_many([job] * (2 * pool.workers)):
        assert report.all_passed, (report.status, report.error, report.outcomes)


class _PoolKeeper:
    """This module's pool, replaced after a case that left it unable to judge honestly.

    Such a case fails on its own (its honest check); replacing the pool keeps the
    cases after it from failing for the same reason.
    """

    def __init__(self) -> None:
        self.current: Sandbox | None = None

    def get(self) -> Sandbox:
        if self.current is None:
            self.current = Sandbox(workers=2, timeout=30.0)
        return self.current

    def check(self) -> None:
        if self.current is None:
            return
        job = SandboxJob(ADD.honest, ADD.tests, ADD.setup, ADD.entry_point)
        reports = self.current.run_tests_many([job] * (2 * self.current.workers))
        if not all(report.all_passed for report in reports):
            self.close()

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None


@pytest.fixture(scope="module")
def _keeper() -> Iterator[_PoolKeeper]:
    keeper = _PoolKeeper()
    yield keeper
    keeper.close()


@pytest.fixture
def pool(_keeper: _PoolKeeper) -> Iterator[Sandbox]:
    """A two-worker pool with a long default timeout, healthy at the start of every test."""
    yield _keeper.get()
    _keeper.check()


@pytest.fixture(scope="module")
def humaneval() -> dict[str, CodeProblem]:
    wanted = {attack.task_id for attack in HELPER_ATTACKS.values()}
    return {p.task_id: p for p in load_humaneval() if p.task_id in wanted}


def _helper_task(problem: CodeProblem) -> Task:
    assert problem.canonical_solution is not None
    return Task(
        problem.entry_point,
        problem.prompt,
        problem.tests,
        problem.test_setup,
        problem.prompt + problem.canonical_solution,
    )


# --- 1. the sandbox ----------------------------------------------------------------------------


def test_the_corpus_is_large_and_every_task_is_sound(pool: Sandbox) -> None:
    # Each task's honest program passes, and its plainly wrong answer fails every test.
    assert len(CASES) >= 40
    for task, wrong in ((ADD, "return -7"), (EVENS, "return [7]"), (COUNTS, "return {'?': 7}")):
        _assert_honest_still_passes(pool, task.honest, task)
        _judge(pool, f"def {task.entry_point}(*args):\n    {wrong}\n", task)


@pytest.mark.parametrize("name", _params(CASES))
def test_forgery_scores_nothing_on_a_pool(pool: Sandbox, name: str) -> None:
    case = CASES[name]
    _skip_unless_protected(pool, case)
    _judge(pool, case.program, case.task, timeout=case.timeout)
    _assert_honest_still_passes(pool, case.task.honest, case.task)


@pytest.mark.parametrize("name", _params(ENV_CASES))
def test_forgery_scores_nothing_through_run_tests(name: str) -> None:
    # The module-level function and its shared pool.
    case = CASES[name]
    task = case.task
    report = run_tests(
        case.program,
        task.tests,
        setup=task.setup,
        entry_point=task.entry_point,
        timeout=case.timeout,
    )
    assert report.passed == 0, _passes(report, task.tests)
    honest = run_tests(task.honest, task.tests, setup=task.setup, entry_point=task.entry_point)
    assert honest.all_passed, honest.outcomes
    _assert_honest_still_passes(default_sandbox(), task.honest, task)


@pytest.mark.parametrize("name", list(HELPER_ATTACKS))
def test_redefining_the_prompts_helper_scores_nothing(
    pool: Sandbox, humaneval: dict[str, CodeProblem], name: str
) -> None:
    attack = HELPER_ATTACKS[name]
    problem = humaneval[attack.task_id]
    task = _helper_task(problem)
    _judge(pool, problem.prompt + attack.completion, task)
    _assert_honest_still_passes(pool, task.honest, task)


# Not forgeries, by design: a process the program forks is the program too, so an
# answer it sends is the program's answer (as `return 6` would be); and a call that
# empties its argument before the test reads it again passes `assert f(xs) == xs`
# exactly as it would in one process (the judge writes a call's changes to its
# arguments back, which in-place tasks need).


# --- 2. CodeCollabEnv --------------------------------------------------------------------------


def _collab(
    pool: Sandbox, problem: CodeProblem, main: str, helper: str | None = None
) -> tuple[float, dict[str, Any]]:
    env = CodeCollabEnv(
        problems=[problem], num_agents=1 if helper is None else 2, num_turns=1, sandbox=pool
    )
    env.reset(seed=0, options={"problem": problem})
    actions = {"main": main} if helper is None else {"helper": helper, "main": main}
    _, rewards, _, _, infos = env.step(actions)
    return rewards["main"], infos["main"]


def _assert_collab_scores_no_test(reward: float, info: dict[str, Any]) -> None:
    assert info["syntax_ok"], info  # the program ran: the attack was in it
    assert (info["passed"], info["level3"], info["bonus"]) == (0, 0.0, 0.0), info["sandbox_status"]
    assert reward == pytest.approx(info["level1"] + info["level2"])


def _assert_collab_honest(pool: Sandbox, problem: CodeProblem, main: str) -> None:
    _, info = _collab(pool, problem, main)
    assert info["passed"] == info["total_tests"] and info["level3"] == 1.0, info
    task = Task(problem.entry_point, problem.prompt, problem.tests, problem.test_setup, "")
    _assert_honest_still_passes(pool, info["program"], task)


@pytest.mark.parametrize("name", _params(ENV_CASES))
def test_forgery_scores_no_tests_in_code_collab(pool: Sandbox, name: str) -> None:
    case = CASES[name]
    problem = _problem(case.task)
    reward, info = _collab(pool, problem, collab_main(case.program, problem.entry_point))
    assert repr(case.program) in info["program"]
    _assert_collab_scores_no_test(reward, info)
    _assert_collab_honest(pool, problem, case.task.honest)


@pytest.mark.parametrize(
    "name", ["subclasses-known-exploit", "signal-timer-frames", "patch-builtins", "fd-spray"]
)
def test_forgery_in_the_helpers_aux_scores_no_tests_in_code_collab(
    pool: Sandbox, name: str
) -> None:
    # Two agents: the helper's aux carries the attack, main calls aux and answers wrongly.
    problem = _problem(ADD)
    main = "def add(a, b):\n    value = aux(-7)\n    return value\n"
    reward, info = _collab(pool, problem, main, helper=collab_helper(CASES[name].program))
    assert info["aux_defined"] and info["calls_aux"]
    _assert_collab_scores_no_test(reward, info)
    _assert_collab_honest(pool, problem, ADD.honest)


@pytest.mark.parametrize("name", list(HELPER_ATTACKS))
def test_redefining_the_prompts_helper_scores_no_tests_in_code_collab(
    pool: Sandbox, humaneval: dict[str, CodeProblem], name: str
) -> None:
    attack = HELPER_ATTACKS[name]
    problem = humaneval[attack.task_id]
    entry = problem.entry_point
    program = attack.extra + f"\n\ndef {entry}(s):\n" + attack.body
    if entry == "find_zero":
        program = program.replace(f"def {entry}(s):", f"def {entry}(xs):")
    reward, info = _collab(pool, problem, collab_main(program, entry))
    _assert_collab_scores_no_test(reward, info)
    _assert_collab_honest(pool, problem, _helper_task(problem).honest)


# --- 3. ExpertIterationEnv ---------------------------------------------------------------------


def _expert_iteration(
    pool: Sandbox, problem: CodeProblem, code: str
) -> tuple[float, dict[str, Any]]:
    env = expert_iteration_env(strategy="iid", problems=(problem,), code_runner=pool.run_tests)
    seen = play_aec(
        env,
        lambda agent, observation, info: f"```python\n{code}\n```",
        options={"problem": problem},
    )
    _, _, reward, _, _, info = seen[-1]
    return reward, info


def _assert_incorrect(reward: float, info: dict[str, Any], problem: CodeProblem) -> None:
    assert info["tests_total"] == len(problem.tests)
    assert (info["correct"], info["tests_passed"], info["score"], reward) == (False, 0, 0.0, 0.0), (
        info["program_status"]
    )


def _assert_expert_iteration_honest(pool: Sandbox, problem: CodeProblem, code: str) -> None:
    reward, info = _expert_iteration(pool, problem, code)
    assert info["correct"] and reward == 1.0, info
    task = Task(problem.entry_point, problem.prompt, problem.tests, problem.test_setup, "")
    _assert_honest_still_passes(pool, problem.prompt + code, task)


@pytest.mark.parametrize("name", _params(ENV_CASES))
def test_forgery_is_incorrect_in_expert_iteration(pool: Sandbox, name: str) -> None:
    case = CASES[name]
    problem = _problem(case.task)
    reward, info = _expert_iteration(pool, problem, case.program)
    _assert_incorrect(reward, info, problem)
    _assert_expert_iteration_honest(pool, problem, case.task.honest)


@pytest.mark.parametrize("name", list(HELPER_ATTACKS))
def test_redefining_the_prompts_helper_is_incorrect_in_expert_iteration(
    pool: Sandbox, humaneval: dict[str, CodeProblem], name: str
) -> None:
    attack = HELPER_ATTACKS[name]
    problem = humaneval[attack.task_id]
    reward, info = _expert_iteration(pool, problem, attack.completion)
    _assert_incorrect(reward, info, problem)
    assert problem.canonical_solution is not None
    _assert_expert_iteration_honest(pool, problem, problem.canonical_solution)


# --- 4. Any string is an action: oversized completions are outcomes ----------------------------


@pytest.mark.parametrize(
    "size", [2 << 20, pytest.param(64 << 20, marks=pytest.mark.slow)], ids=["2MiB", "64MiB"]
)
def test_an_oversized_completion_scores_zero_and_never_raises(pool: Sandbox, size: int) -> None:
    problem = _problem(ADD)
    body = f"def {problem.entry_point}(a, b):\n    return a + b\n"
    # (Inside the function: code collaboration keeps only the entry point's definition.)
    huge = body.replace("    return", f"    padding = '{'x' * size}'\n    return")
    reward, info = _collab(pool, problem, huge)
    assert (info["passed"], info["level3"]) == (0, 0.0), info["sandbox_status"]
    assert info["sandbox_status"] == "load_error"
    reward, info = _expert_iteration(pool, problem, huge)
    assert (info["correct"], reward) == (False, 0.0)
    # The same program, of a normal size, passes: only the size was refused.
    _assert_collab_honest(pool, problem, body)
