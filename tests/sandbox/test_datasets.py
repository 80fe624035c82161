"""The benchmark data sets in the sandbox: reference solutions pass, wrong ones fail.

Every HumanEval canonical solution must pass every test, and every MBPP
reference solution must pass too, except the data-set errors listed in
``MBPP_EXCEPTIONS`` with their reason (there are none: all 427 pass). Every
CoopHumanEval test must parse and compile through the sandbox's assert rewriting
(the data set has no reference solutions). The data comes from
``LLM_ENVS_DATA_DIR`` (tests/conftest.py points it at ../shared/data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from llm_envs.sandbox import ProgramStatus, Sandbox, SandboxJob, TestStatus
from llm_envs.sandbox._compile import check_test_syntax, prepare_tests
from llm_envs.tasks import CodeProblem, load_coophumaneval, load_humaneval, load_mbpp

# The data's code uses old string escapes; those warnings are not the sandbox's.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")

#: MBPP tasks whose reference solution fails its own tests, with the reason.
MBPP_EXCEPTIONS: dict[str, str] = {}

# Mbpp/123 (amicable numbers below 10,000) takes seconds by itself on a busy 2-core
# machine: a timeout this long only bounds a hang, it never decides a verdict.
DATA_SET_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def pool() -> Iterator[Sandbox]:
    with Sandbox(timeout=DATA_SET_TIMEOUT) as sandbox:
        yield sandbox


def job(problem: CodeProblem, program: str) -> SandboxJob:
    return SandboxJob(program, problem.tests, problem.test_setup, problem.entry_point)


def failures(
    pool: Sandbox, problems: tuple[CodeProblem, ...], programs: list[str]
) -> dict[str, str]:
    reports = pool.run_tests_many(
        [job(p, program) for p, program in zip(problems, programs, strict=True)]
    )
    found = {}
    for problem, report in zip(problems, reports, strict=True):
        if not report.all_passed:
            failed = [f"{o.error_type}: {o.message}" for o in report.outcomes if not o.passed]
            found[problem.task_id] = f"{report.status.value} {report.error or ''} {failed[:2]}"
    return found


def test_every_humaneval_canonical_solution_passes_every_test(pool: Sandbox) -> None:
    problems = load_humaneval()
    assert len(problems) == 164
    programs = [p.prompt + (p.canonical_solution or "") for p in problems]
    assert failures(pool, problems, programs) == {}


def test_every_mbpp_reference_solution_passes(pool: Sandbox) -> None:
    problems = load_mbpp("all")
    assert len(problems) == 427
    programs = [p.canonical_solution or "" for p in problems]
    assert set(failures(pool, problems, programs)) == set(MBPP_EXCEPTIONS)


def test_every_coophumaneval_test_parses_and_compiles() -> None:
    problems = load_coophumaneval()
    assert len(problems) == 82
    for problem in problems:
        check_test_syntax(problem.test_setup, problem.tests)
        assert len(prepare_tests(problem.test_setup, problem.tests).tests) == len(problem.tests)


def test_coophumaneval_tests_run_and_fail_a_stub(pool: Sandbox) -> None:
    problems = load_coophumaneval()
    programs = [p.prompt + "    return None\n" for p in problems]
    reports = pool.run_tests_many(
        [job(p, program) for p, program in zip(problems, programs, strict=True)]
    )
    assert {report.status for report in reports} == {ProgramStatus.OK}
    assert sum(report.passed for report in reports) == 0


@pytest.mark.parametrize(
    ("task_id", "load", "program", "should_fail"),
    # Always False: exactly the tests that expect True fail, with AssertionError.
    [
        (
            "HumanEval/0",
            load_humaneval,
            "    return False\n",
            lambda test: test.endswith("== True"),
        ),
        (
            "Mbpp/3",
            lambda: load_mbpp("all"),
            "def is_not_prime(n):\n    return False\n",
            lambda test: test.endswith("== True"),
        ),
    ],
    ids=["humaneval", "mbpp"],
)
def test_a_wrong_solution_fails_exactly_the_right_tests(
    pool: Sandbox,
    task_id: str,
    load: Callable[[], tuple[CodeProblem, ...]],
    program: str,
    should_fail: Callable[[str], bool],
) -> None:
    (problem,) = [p for p in load() if p.task_id == task_id]
    if task_id.startswith("HumanEval"):
        program = problem.prompt + program
    report = pool.run_tests(
        program, problem.tests, setup=problem.test_setup, entry_point=problem.entry_point
    )
    assert report.status is ProgramStatus.OK
    failed = [
        test
        for test, outcome in zip(problem.tests, report.outcomes, strict=True)
        if outcome.status is TestStatus.FAILED
    ]
    assert failed == [test for test in problem.tests if should_fail(test)]
    assert all(
        outcome.error_type == "AssertionError" for outcome in report.outcomes if not outcome.passed
    )
