"""The sandbox's contract: statuses, per-test outcomes, output, the pool's lifecycle, bad input."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from llm_envs.sandbox import (
    ProgramStatus,
    Protections,
    Sandbox,
    SandboxClosedError,
    SandboxError,
    SandboxJob,
    TestOutcome,
    TestReport,
    TestStatus,
    run_tests,
)
from tests.sandbox.processes import cpu_ticks_of_run, worker_pids

DOUBLE = "def double(x):\n    return 2 * x\n"
PASSED = TestOutcome(TestStatus.PASSED)
NOT_RUN = TestOutcome(TestStatus.NOT_RUN)


def test_passing_and_failing_tests_are_reported_one_by_one(sandbox: Sandbox) -> None:
    report = sandbox.run_tests(
        DOUBLE, ["assert double(2) == 4", "assert double(3) == 7", "assert double(0) == 0"]
    )
    assert report.status is ProgramStatus.OK
    assert report.outcomes == (
        PASSED,
        TestOutcome(TestStatus.FAILED, "AssertionError", "assert 6 == 7"),
        PASSED,
    )
    assert (report.passed, report.total, report.all_passed) == (2, 3, False)
    assert report.pass_rate == pytest.approx(2 / 3)
    assert report.error is None


@pytest.mark.parametrize(
    ("program", "tests", "setup", "status", "error_start", "outcomes"),
    [
        ("def f(:\n", ["assert f()"], "", ProgramStatus.SYNTAX_ERROR, "SyntaxError", [NOT_RUN]),
        ("x = 1 / 0\n", ["assert x"], "", ProgramStatus.LOAD_ERROR, "ZeroDivisionError", [NOT_RUN]),
        (
            "def f():\n    return 1\n",
            ["assert candidate() == 1"],
            "candidate = g",
            ProgramStatus.LOAD_ERROR,
            "the test setup raised NameError",
            [NOT_RUN],
        ),
        ("", [], "", ProgramStatus.OK, None, []),
    ],
    ids=["syntax-error", "error-while-loading", "setup-fails", "no-tests"],
)
def test_program_status(
    sandbox: Sandbox,
    program: str,
    tests: list[str],
    setup: str,
    status: ProgramStatus,
    error_start: str | None,
    outcomes: list[TestOutcome],
) -> None:
    report = sandbox.run_tests(program, tests, setup=setup)
    assert report.status is status
    assert report.outcomes == tuple(outcomes)
    if error_start is None:
        assert report.error is None
    else:
        assert report.error is not None and report.error.startswith(error_start)


def test_a_test_that_raises_does_not_stop_later_tests(sandbox: Sandbox) -> None:
    report = sandbox.run_tests(
        "def f(x):\n    return 10 // x\n", ["assert f(0) == 1", "assert f(5) == 2"]
    )
    assert report.outcomes[0].status is TestStatus.FAILED
    assert report.outcomes[0].error_type == "ZeroDivisionError"
    assert report.outcomes[1] == PASSED


def test_timeout_marks_the_running_test_and_the_rest_not_run(sandbox: Sandbox) -> None:
    program = "def f(x):\n    while x:\n        pass\n    return 0\n"
    # 2 s: the first test must pass within the limit, also on a loaded machine.
    report = sandbox.run_tests(
        program, ["assert f(0) == 0", "assert f(1) == 0", "assert f(0) == 0"], timeout=2.0
    )
    assert report.status is ProgramStatus.TIMEOUT
    assert report.outcomes == (PASSED, TestOutcome(TestStatus.TIMEOUT), NOT_RUN)
    assert report.error == "timed out after 2 s in tests[1]"


def test_setup_runs_after_the_program_and_binds_names_for_the_tests(sandbox: Sandbox) -> None:
    report = sandbox.run_tests(
        DOUBLE, ["assert candidate(SIZE) == 6"], setup="candidate = double\nSIZE = 3"
    )
    assert report.all_passed


def test_tests_share_one_namespace_in_order(sandbox: Sandbox) -> None:
    report = sandbox.run_tests(
        "", ["values = [1, 2]", "values.append(3)", "assert values == [1, 2, 3]"]
    )
    assert report.all_passed


def test_stdout_and_stderr_are_captured_and_capped() -> None:
    with Sandbox(workers=1, output_limit=100) as pool:
        report = pool.run_tests("import sys\nprint('hello')\nprint('oops', file=sys.stderr)\n", [])
        assert (report.stdout, report.stderr, report.output_truncated) == (
            "hello\n",
            "oops\n",
            False,
        )
        report = pool.run_tests("print('x' * 1000)\n", [])
        assert report.stdout == "x" * 100
        assert report.output_truncated


def test_output_printed_before_a_timeout_is_kept(sandbox: Sandbox) -> None:
    report = sandbox.run_tests("print('started')\nwhile True:\n    pass\n", [], timeout=0.5)
    assert report.status is ProgramStatus.TIMEOUT
    assert report.stdout == "started\n"


def test_run_tests_many_returns_reports_in_order(sandbox: Sandbox) -> None:
    jobs = [
        (f"import time\ntime.sleep({delay})\nVALUE = {index}\n", [f"assert VALUE == {index}"], "")
        for index, delay in enumerate([0.3, 0.0, 0.2, 0.0, 0.1])
    ]
    reports = sandbox.run_tests_many(jobs)
    assert [report.all_passed for report in reports] == [True] * 5
    assert sandbox.run_tests_many([]) == []


def test_jobs_accept_two_tuples_and_sandbox_job_with_its_own_timeout(sandbox: Sandbox) -> None:
    reports = sandbox.run_tests_many(
        [
            (DOUBLE, ["assert double(1) == 2"]),
            SandboxJob("while True:\n    pass\n", ["assert True"], timeout=0.3),
        ]
    )
    assert reports[0].all_passed
    assert reports[1].status is ProgramStatus.TIMEOUT
    assert reports[1].error == "timed out after 0.3 s while loading the program"


def test_every_run_starts_in_an_empty_directory_with_a_scrubbed_environment() -> None:
    os.environ["LLM_ENVS_TEST_SECRET"] = "hunter2"
    try:
        with Sandbox(workers=1) as pool:
            first = pool.run_tests("open('left-behind.txt', 'w').write('x')\n", [])
            second = pool.run_tests(
                "import os\nFILES = os.listdir('.')\nENV = dict(os.environ)\n",
                ["assert FILES == []", "assert 'LLM_ENVS_TEST_SECRET' not in ENV"],
            )
    finally:
        del os.environ["LLM_ENVS_TEST_SECRET"]
    assert first.status is ProgramStatus.OK
    assert second.all_passed, second


def test_a_program_sees_none_of_the_sandboxs_own_modules(sandbox: Sandbox) -> None:
    # Every module of the package that the worker imports is hidden from the runs
    # (_spawner.OWN_MODULES): a module split off or added must be listed there too.
    program = (
        "import sys\n"
        "OWN = sorted(name for name in sys.modules if name.split('.')[0] in ('llm_envs', "
        "'__main__'))\n"
    )
    report = sandbox.run_tests(program, ["assert OWN == [], OWN"])
    assert report.all_passed, report


def test_runs_are_reproducible(sandbox: Sandbox) -> None:
    program = (
        "import random\n"
        "VALUES = [random.random() for _ in range(3)]\n"
        "ORDER = list({'b', 'a', 'c', 'd'})\n"
    )
    probe = "print(VALUES, ORDER)"
    outputs = {sandbox.run_tests(program + probe, []).stdout for _ in range(4)}
    assert len(outputs) == 1


def test_a_program_name_that_shadows_a_builtin_reaches_tests_only_as_entry_point(
    sandbox: Sandbox,
) -> None:
    program = "def sum(a, b):\n    return a + b\n"  # MBPP/126 names its function `sum`
    tests = ["assert sum(10, 15) == 25"]
    assert sandbox.run_tests(program, tests).outcomes[0].error_type == "TypeError"
    assert sandbox.run_tests(program, tests, entry_point="sum").all_passed


@pytest.mark.parametrize(
    ("program", "test"),
    [
        (
            "from collections import Counter\ndef f():\n    return Counter('aab')\n",
            "assert f() == {'a': 2, 'b': 1}",
        ),
        ("import re\ndef f(s):\n    return re.match('a+', s)\n", "assert f('aa')"),
        ("def f():\n    return None\n", "assert f() is None"),
        (
            "from collections import OrderedDict\ndef f():\n    return OrderedDict(a=1)\n",
            "assert f() == {'a': 1}",
        ),
        (
            "import math\ndef f():\n    return math.pi\n",
            "assert math.isclose(f(), 3.14159, rel_tol=1e-3)",
        ),
        ("def f():\n    return [1.5, (2, 'x'), {3: None}]\n", "assert f()[1][1] == 'x'"),
        (
            "import collections\ndef f():\n    return collections.defaultdict(list, a=[1])\n",
            "assert f()['b'] == [] and f()['a'] == [1]",
        ),
        (
            "import collections\ndef f():\n    return collections.deque([1, 2], maxlen=3)\n",
            "assert list(f()) == [1, 2] and f().maxlen == 3",
        ),
        (
            "from fractions import Fraction\nfrom decimal import Decimal\n"
            "def f():\n    return Fraction(1, 3), Decimal('1.10'), range(2, 9, 3)\n",
            "assert f() == (Fraction(1, 3), Decimal('1.10'), range(2, 9, 3))",
        ),
        (
            "import re\ndef f(s):\n    return re.search(r'(?P<d>[0-9]+)(x)?', s)\n",
            "assert f('ab12c').group() == '12' and f('ab12c').span('d') == (2, 4) "
            "and f('ab12c').groups() == ('12', None)",
        ),
        (
            "def f():\n    return float('nan'), -0.0, 1e308 * 10, 2**200, 1j\n",
            "assert f()[3] == 2**200 and f()[2] == float('inf')",
        ),
        (
            "def f():\n    return {frozenset({1}): b'x', (1,): {True, None}}\n",
            "assert f()[(1,)] == {True, None}",
        ),
    ],
    ids=[
        "counter",
        "re-match",
        "is-none",
        "ordered-dict",
        "isclose",
        "nested",
        "defaultdict",
        "deque",
        "fraction-decimal-range",
        "re-match-groups",
        "floats-and-ints",
        "hashable-containers",
    ],
)
def test_honest_values_of_common_types_pass(sandbox: Sandbox, program: str, test: str) -> None:
    setup = "import math\nfrom fractions import Fraction\nfrom decimal import Decimal"
    report = sandbox.run_tests(program, [test], setup=setup)
    assert report.all_passed, report.outcomes


@pytest.mark.parametrize(
    ("program", "kind"),
    [
        ("def f():\n    return (x * x for x in range(3))\n", "generator"),
        ("def f():\n    return map(str, [1, 2])\n", "map"),
        ("def f():\n    return f\n", "function"),
        ("class C:\n    pass\ndef f():\n    return C()\n", "C"),
        ("class L(list):\n    pass\ndef f():\n    return L([0, 1, 4])\n", "L"),
        ("def f():\n    return [[0, 1, 4], object()]\n", "object"),
    ],
    ids=["generator", "map", "function", "instance", "list-subclass", "nested-object"],
)
def test_values_that_are_not_plain_data_fail_the_call(
    sandbox: Sandbox, program: str, kind: str
) -> None:
    report = sandbox.run_tests(program, ["assert list(f()) == [0, 1, 4]"])
    (outcome,) = report.outcomes
    assert outcome.error_type == "UntrustedValue", report
    assert f"a value of type {kind}" in (outcome.message or "")


def test_types_survive_the_trip_exactly(sandbox: Sandbox) -> None:
    program = "def f(x):\n    return x\n"
    tests = [
        "assert type(f(True)) is bool and type(f(1)) is int",
        "assert type(f((1, [2]))) is tuple and type(f((1, [2]))[1]) is list",
        "assert type(f(frozenset({1}))) is frozenset and type(f({1})) is set",
        "assert type(f(b'x')) is bytes and type(f('x')) is str and f(None) is None",
        "x = f(float('nan')); assert x != x",
        "assert f({'a': (1, 2.5)}) == {'a': (1, 2.5)}",
        "assert f(1 + 2j) == 1 + 2j and f(-(2**100)) == -(2**100)",
    ]
    report = sandbox.run_tests(program, tests)
    assert report.all_passed, report.outcomes


def test_a_call_that_mutates_its_argument_is_seen_by_the_test(sandbox: Sandbox) -> None:
    program = (
        "def f(items, table, seen, buffer):\n"
        "    items.sort(); items[0].append(9); table['k'] = 1; seen.add(3); buffer[0] = 65\n"
    )
    test = (
        "items = [[2], [1]]; inner = items[1]; table = {}; seen = set(); buffer = bytearray(b'x')\n"
        "f(items, table, seen, buffer)\n"
        "assert items == [[1, 9], [2]] and table == {'k': 1} and seen == {3}\n"
        "assert buffer == bytearray(b'A')"
    )
    report = sandbox.run_tests(program, [test])
    assert report.all_passed, report.outcomes


def test_an_exception_of_the_program_keeps_its_type_for_the_test(sandbox: Sandbox) -> None:
    program = (
        "class Odd(Exception):\n    pass\n"
        "def f(x):\n"
        "    if x == 0:\n        raise ValueError('zero')\n"
        "    if x == 1:\n        raise Odd('one')\n"
        "    raise SystemExit(2)\n"
    )
    tests = [
        "try:\n    f(0)\nexcept ValueError as error:\n    assert str(error) == 'zero'",
        "f(1)",
        "f(2)",
        "try:\n    f(2)\nexcept Exception:\n    pass",
    ]
    report = sandbox.run_tests(program, tests)
    assert report.status is ProgramStatus.OK
    assert [(o.status.value, o.error_type, o.message) for o in report.outcomes] == [
        ("passed", None, None),
        ("failed", "Odd", "one"),
        ("failed", "SystemExit", "2"),
        ("passed", None, None),
    ]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda pool: pool.run_tests(42, []), "program must be a str, got 42"),
        (
            lambda pool: pool.run_tests("", "assert True"),
            "tests must be a sequence of test snippets",
        ),
        (lambda pool: pool.run_tests("", ["assert True", 7]), "tests[1] must be a str, got 7"),
        (lambda pool: pool.run_tests("", [], setup=None), "setup must be a str, got None"),
        (
            lambda pool: pool.run_tests("", [], timeout="5"),
            "timeout must be a number of seconds, got '5'",
        ),
        (lambda pool: pool.run_tests_many([("", [], "", "x")]), "jobs[0] must be a SandboxJob"),
    ],
    ids=["program", "tests-str", "test-item", "setup", "timeout-type", "job-shape"],
)
def test_bad_input_raises_type_error_naming_the_value(sandbox: Sandbox, call, error: str) -> None:
    with pytest.raises(TypeError, match=error.replace("[", r"\[").replace("]", r"\]")):
        call(sandbox)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"timeout": 0}, r"timeout must be in \(0, 3600\] seconds, got 0"),
        ({"timeout": float("nan")}, "timeout must be in"),
        ({"setup": "import ("}, "setup is not valid Python"),
        ({"entry_point": "not an identifier"}, "entry_point must be a Python identifier"),
    ],
)
def test_bad_values_raise_value_error(sandbox: Sandbox, kwargs: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        sandbox.run_tests("", ["assert True"], **kwargs)


def test_a_test_that_does_not_parse_is_named(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match=r"tests\[1\] is not valid Python: SyntaxError"):
        sandbox.run_tests("", ["assert True", "assert (", "assert True"])


@pytest.mark.parametrize(
    ("kwargs", "error", "kind"),
    [
        ({"workers": 0}, "workers must be >= 1, got 0", ValueError),
        ({"workers": 1.5}, "workers must be an int, got 1.5", TypeError),
        ({"memory_mb": 8}, "memory_mb must leave room above the worker's own", ValueError),
        ({"timeout": -1}, "timeout must be in", ValueError),
        ({"site_packages": "no"}, "site_packages must be True or False, got 'no'", TypeError),
        ({"pin_cpus": 1}, "pin_cpus must be True or False, got 1", TypeError),
        ({"memory_mb": 10**9}, r"memory_mb must be an int in \[1, 1048576\] \(1 TiB", ValueError),
        ({"max_processes": 10**6}, r"max_processes must be an int in \[1, 65536\]", ValueError),
    ],
)
def test_bad_pool_settings_fail_at_construction(kwargs: dict, error: str, kind: type) -> None:
    with pytest.raises(kind, match=error):
        Sandbox(**kwargs)


def test_closed_pool_raises_a_clear_error_and_close_is_idempotent() -> None:
    pool = Sandbox(workers=1)
    pids = worker_pids(pool)
    with pool:
        assert pool.run_tests(DOUBLE, ["assert double(1) == 2"]).all_passed
    assert pool.closed
    pool.close()
    with pytest.raises(SandboxClosedError, match="closed"):
        pool.run_tests(DOUBLE, [])
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_worker_killed_between_runs_is_restarted() -> None:
    with Sandbox(workers=1) as pool:
        (pid,) = worker_pids(pool)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        report = pool.run_tests(DOUBLE, ["assert double(2) == 4"])
        assert report.all_passed
        assert worker_pids(pool) != [pid]


def test_a_worker_that_dies_during_a_run_yields_killed_and_is_restarted() -> None:
    with Sandbox(workers=1, timeout=30) as pool:
        (pid,) = worker_pids(pool)
        result: list[TestReport] = []
        thread = threading.Thread(
            target=lambda: result.append(pool.run_tests("while True:\n    pass\n", ["assert True"]))
        )
        thread.start()
        deadline = time.monotonic() + 20
        while cpu_ticks_of_run(pool) < 5:  # until the program is running
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.killpg(pid, signal.SIGKILL)
        thread.join(20)
        (report,) = result
        assert report.status is ProgramStatus.KILLED
        assert report.error is not None and "restarted" in report.error
        assert report.outcomes == (NOT_RUN,)
        assert pool.run_tests(DOUBLE, ["assert double(2) == 4"]).all_passed


def test_module_level_run_tests_uses_a_shared_pool() -> None:
    report = run_tests("def add(a, b):\n    return a + b\n", ["assert add(1, 2) == 3"])
    assert report.all_passed


def test_protections_are_reported(sandbox: Sandbox) -> None:
    protections = sandbox.protections
    assert isinstance(protections, Protections)
    assert isinstance(protections.landlock_abi, int)
    # Every Linux machine CI runs on has either namespaces or Landlock.
    assert protections.pid_namespace or protections.landlock_abi > 0


def test_report_properties() -> None:
    report = TestReport(ProgramStatus.TIMEOUT, (PASSED, TestOutcome(TestStatus.TIMEOUT), NOT_RUN))
    assert (report.passed, report.total, report.all_passed) == (1, 3, False)
    assert TestReport(ProgramStatus.OK, ()).pass_rate == 0.0
    assert TestReport(ProgramStatus.OK, ()).all_passed


def test_close_lets_a_run_in_flight_finish() -> None:
    pool = Sandbox(workers=1)
    result: list[TestReport] = []
    thread = threading.Thread(
        target=lambda: result.append(
            pool.run_tests("import time\ntime.sleep(0.5)\n" + DOUBLE, ["assert double(1) == 2"])
        )
    )
    thread.start()
    time.sleep(0.1)
    pool.close()
    thread.join(10)
    assert result[0].all_passed
    with pytest.raises(SandboxClosedError):
        pool.run_tests(DOUBLE, [])


def test_a_program_too_large_to_run_is_a_load_error(sandbox: Sandbox) -> None:
    report = sandbox.run_tests("x = 1\n" * 200_000, ["assert x == 1"])  # 1.2 MB
    assert report.status is ProgramStatus.LOAD_ERROR
    assert "at most 1,048,576" in (report.error or "")
    assert report.outcomes[0].status is TestStatus.NOT_RUN
    assert sandbox.run_tests(DOUBLE, ["assert double(1) == 2"]).all_passed


def test_a_large_program_compiles_in_its_run(sandbox: Sandbox) -> None:
    program = "x = 1\n" * 150_000 + DOUBLE  # 900 kB: too large to compile in the worker
    report = sandbox.run_tests(program, ["assert double(x) == 2"])
    assert report.all_passed, report


def test_a_forked_caller_gets_a_clear_error_and_leaves_the_pool_alone(sandbox: Sandbox) -> None:
    child = os.fork()
    if child == 0:
        try:
            sandbox.run_tests(DOUBLE, [])
        except SandboxError as error:
            os._exit(7 if "forked process must create its own" in str(error) else 1)
        os._exit(0)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    assert sandbox.run_tests(DOUBLE, ["assert double(1) == 2"]).all_passed
