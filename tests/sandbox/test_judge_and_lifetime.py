"""The judge's own names and the run's lifetime, proved by construction.

Two properties every verdict rests on:

* **No name a program defines replaces one of the judge's.** Not checked one
  name at a time: every name in :data:`~llm_envs.sandbox._judge.JUDGE_NAMES`, in
  every form a program can give a name (a function, a value, a module), and a
  test that fails if the judge ever puts a name in the tests' namespace without
  listing it there.
* **Nothing a run starts outlives it**, in every mode the sandbox supports:
  ``clone(CLONE_PARENT)`` (a sibling instead of a child) is refused where
  seccomp is on, and killed by the spawner where it is off; ``clone3`` is
  answered as missing (threads still start); each run has pipes of its own, so
  even a process that did survive could not read a later run's job.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

import pytest

from llm_envs.sandbox import ProgramStatus, Sandbox, SandboxJob
from llm_envs.sandbox._judge import CONTROL_FLOW_ERRORS, JUDGE_NAMES

ADD_TESTS = ["assert candidate(1, 2) == 3", "assert candidate(2, 2) == 4", "assert add(0, 5) == 5"]
ADD_SETUP = "candidate = add"
HONEST = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return 0\n"

# Every form in which a program can give a name a meaning the judge might bind.
NAME_FORMS = {
    "function": "def {name}(*args, **kwargs):\n    return True\n",
    "lambda": "{name} = lambda *args, **kwargs: True\n",
    "value": "{name} = True\n",
    "module": "import builtins as {name}\n",
    "class": "class {name}:\n    def __bool__(self):\n        return True\n",
}

MODES = {
    "strong": {},
    "weak": {"namespaces": False, "landlock": False},
    "weakest": {"namespaces": False, "landlock": False, "seccomp": False},
}
_MACHINE = os.uname().machine
_SYSCALLS = {"x86_64": {"clone": 56, "clone3": 435}, "aarch64": {"clone": 220, "clone3": 435}}
_CLONE_PARENT = 0x8000
_SIGCHLD = 17


@pytest.fixture(scope="module", params=sorted(MODES))
def pool(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with Sandbox(workers=1, timeout=10.0, **MODES[request.param]) as sandbox:
        yield sandbox


# --- the judge's names ------------------------------------------------------------------------


@pytest.mark.parametrize("form", sorted(NAME_FORMS))
def test_no_name_a_program_defines_replaces_one_of_the_judges(sandbox: Sandbox, form: str) -> None:
    # One program defines every judge name at once, another each alone: neither
    # passes a test its `add` fails.
    names = sorted(JUDGE_NAMES)
    together = WRONG + "".join(NAME_FORMS[form].format(name=name) for name in names)
    programs = [together] + [WRONG + NAME_FORMS[form].format(name=name) for name in names]
    # The tests also read each judge name, so every one is a name the tests use.
    tests = [*ADD_TESTS, *(f"assert {name} is not None" for name in names)]
    jobs = [SandboxJob(program, tests, ADD_SETUP) for program in programs]
    for program, report in zip(programs, sandbox.run_tests_many(jobs), strict=True):
        assert report.status is ProgramStatus.OK, (program, report)
        assert [outcome.passed for outcome in report.outcomes[:3]] == [False] * 3, program
        assert report.passed == len(names), program


def test_the_judge_binds_no_name_it_does_not_list(sandbox: Sandbox) -> None:
    # Trusted test code sees the whole namespace: every name in it is the program's
    # (asked for by the tests) or one of JUDGE_NAMES. A judge name added without
    # being listed (and so without the protection) fails here.
    listed = sorted(JUDGE_NAMES | {"add", "candidate"})
    test = f"assert sorted(set(globals()) - set({listed!r})) == []"
    report = sandbox.run_tests(HONEST, [*ADD_TESTS, test], setup=ADD_SETUP)
    assert report.passed == 4, report


def test_a_program_is_not_told_the_judges_names(sandbox: Sandbox) -> None:
    # The run's job lists the names the tests use; the program can read it from
    # the frames below its own. It must hold `add` but no judge name.
    program = HONEST + (
        "import sys\n"
        "told = set()\n"
        "def _strings(value, depth=0):\n"
        "    if isinstance(value, str):\n"
        "        told.add(value)\n"
        "    elif isinstance(value, (tuple, list)) and depth < 4:\n"
        "        for item in value:\n"
        "            _strings(item, depth + 1)\n"
        "frame = sys._getframe()\n"
        "while frame is not None:\n"
        "    for value in list(frame.f_locals.values()):\n"
        "        _strings(value)\n"
        "    frame = frame.f_back\n"
        "def names_told():\n"
        "    return sorted(told)\n"
    )
    report = sandbox.run_tests(
        program,
        [
            "assert 'add' in names_told()",
            f"assert set(names_told()) & {set(JUDGE_NAMES)!r} == set()",
            "assert candidate(1, 2) == 3",
        ],
        setup=ADD_SETUP,
    )
    assert report.passed == 3, report


# --- the run's lifetime ----------------------------------------------------------------------

needs_known_arch = pytest.mark.skipif(
    _MACHINE not in _SYSCALLS, reason=f"syscall numbers for {_MACHINE}"
)


def _clone_parent_program(survivor: str) -> str:
    """A program that makes a sibling (clone with CLONE_PARENT) running ``survivor``."""
    number = _SYSCALLS.get(_MACHINE, {}).get("clone", -1)
    return (
        "import ctypes, os, time\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"pid = libc.syscall({number}, {_CLONE_PARENT | _SIGCHLD}, 0, 0, 0, 0)\n"
        "if pid == 0:\n"
        "    os.setsid()\n"
        f"{survivor}"
        "    os._exit(0)\n"
        "CLONED = (pid, ctypes.get_errno(), os.getpid())\n"
        "def cloned():\n"
        "    return CLONED\n" + HONEST
    )


# The survivor steals what arrives on the job pipe (the judge's calls, and, were
# the pipe shared, the next run's job) and answers every call it can as passed.
_THIEF = (
    "    while True:\n"
    "        try:\n"
    "            os.read(4, 1 << 16)\n"
    "            os.write(3, b'R' + (8).to_bytes(4, 'little') + b'\\x00' * 8)\n"
    "        except OSError:\n"
    "            time.sleep(0.01)\n"
)


@needs_known_arch
def test_a_sibling_process_is_refused_or_dies_with_the_run(pool: Sandbox) -> None:
    report = pool.run_tests(_clone_parent_program(_THIEF), ["assert cloned() is None"], timeout=3)
    if pool.protections.syscalls_filtered:
        # Refused by the filter: no sibling was ever made.
        assert report.status is ProgramStatus.OK, report
        assert report.outcomes[0].message is not None
        assert f"(-1, {errno.EPERM}," in report.outcomes[0].message, report
    # Whatever happened to the thief's own run, later runs are judged as if it never ran.
    honest = pool.run_tests_many([SandboxJob(HONEST, ADD_TESTS, ADD_SETUP)] * 6)
    assert [r.passed for r in honest] == [3] * 6, honest
    wrong = pool.run_tests_many([SandboxJob(WRONG, ADD_TESTS, ADD_SETUP)] * 3)
    assert [r.passed for r in wrong] == [0] * 3, wrong


@needs_known_arch
def test_no_sibling_process_outlives_its_run(pool: Sandbox) -> None:
    if pool.protections.pid_namespace:
        pytest.skip("pids inside the namespace are not this process's to check")
    sleeper = "    time.sleep(60)\n"
    report = pool.run_tests(_clone_parent_program(sleeper), ["assert cloned() == 0"], timeout=3)
    message = report.outcomes[0].message or ""
    pid = int(message.split("assert (")[1].split(",")[0])
    if pool.protections.syscalls_filtered:
        assert pid == -1, report
        return
    assert pid > 0, report  # (the weakest mode: the sibling was made, and must be gone)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@needs_known_arch
def test_clone3_is_answered_as_missing_and_threads_still_start(pool: Sandbox) -> None:
    program = (
        "import ctypes, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "args = (ctypes.c_uint64 * 11)()\n"
        "args[4] = 17  # exit_signal: SIGCHLD\n"
        f"result = libc.syscall({_SYSCALLS.get(_MACHINE, {}).get('clone3', -1)}, "
        "ctypes.byref(args), ctypes.sizeof(args))\n"
        "if result == 0:\n"
        "    import os\n"
        "    os._exit(0)\n"
        "CLONE3 = (result, ctypes.get_errno())\n"
        "done = []\n"
        "worker = threading.Thread(target=done.append, args=(1,))\n"
        "worker.start()\n"
        "worker.join()\n"
        "def probe():\n"
        "    return CLONE3, done\n"
    )
    report = pool.run_tests(program, ["assert probe()[1] == [1]", "assert probe()[0][0] == -1"])
    if pool.protections.syscalls_filtered:
        assert report.passed == 2, report
        report = pool.run_tests(program, [f"assert probe()[0] == (-1, {errno.ENOSYS})"])
        assert report.passed == 1, report
    else:
        assert report.outcomes[0].passed, report


def test_the_protections_say_whether_runs_are_contained(pool: Sandbox) -> None:
    protections = pool.protections
    assert protections.runs_contained == protections.pid_namespace


def test_a_foreign_architecture_call_is_refused(pool: Sandbox) -> None:
    # On x86-64, `int 0x80` enters the 32-bit system call table, whose numbers the
    # filter does not read: refused as a whole. (getpid is 20 there.)
    if _MACHINE != "x86_64" or not pool.protections.syscalls_filtered:
        pytest.skip("an x86-64 filter")
    program = (
        "import ctypes, mmap\n"
        "code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20; int 0x80; ret\n"
        "page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "page.write(code)\n"
        "address = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
        "result = ctypes.CFUNCTYPE(ctypes.c_long)(address)()\n"
        "def foreign():\n"
        "    return result\n"
    )
    report = pool.run_tests(program, [f"assert foreign() == {-errno.EPERM}"])
    if report.status is ProgramStatus.KILLED:
        pytest.skip("this kernel has no 32-bit system calls (the process was killed)")
    assert report.passed == 1, report


# --- exceptions that steer control flow ------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CONTROL_FLOW_ERRORS))
@pytest.mark.parametrize(
    "test",
    [
        "assert all(map(candidate, [1, 2, 3]))",
        "assert [x for x in iter(lambda: candidate(1), None)] == []",
        "assert list(zip([1, 2], map(candidate, [1, 2]))) == [(1, 2), (2, 3)]",
        "assert next(map(candidate, [1]), 'default') == 'default'",
        "assert sum(candidate(x) for x in [1, 2]) == 0",
    ],
)
def test_a_control_flow_exception_of_the_program_fails_the_test(
    sandbox: Sandbox, name: str, test: str
) -> None:
    program = f"def add(x):\n    raise {name}\n"
    report = sandbox.run_tests(program, [test], setup="candidate = add")
    assert report.status is ProgramStatus.OK, report
    assert not report.outcomes[0].passed, report
    assert report.outcomes[0].error_type == name, report


# --- what the judge expands -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("range(10**12)", "a range of more than"),
        ("range(0, 2**80, 3)", "a range of more than"),
        ("decimal.Decimal('1e999999999')", "a Decimal of exponent"),
        ("decimal.Decimal('-1e-999999999')", "a Decimal of exponent"),
    ],
)
def test_a_lazily_expanded_value_beyond_the_limits_does_not_cross(
    sandbox: Sandbox, value: str, why: str
) -> None:
    program = f"import decimal\ndef make():\n    return {value}\n"
    report = sandbox.run_tests(program, ["assert len(list(make())) > 0 or int(make()) > 0"])
    assert report.outcomes[0].error_type == "UntrustedValue", report
    assert why in (report.outcomes[0].message or ""), report


def test_lazily_expanded_values_within_the_limits_still_cross(sandbox: Sandbox) -> None:
    program = (
        "import decimal\n"
        "def span():\n    return range(3, 10**6, 2)\n"
        "def number():\n    return decimal.Decimal('1.5e300')\n"
    )
    tests = [
        "assert span() == range(3, 10**6, 2) and len(list(span())) == 499999",
        "assert number() == decimal.Decimal('1.5e300')",
    ]
    report = sandbox.run_tests(program, tests, setup="import decimal")
    assert report.passed == 2, report


def test_a_test_that_expands_too_much_fails_and_the_worker_goes_on() -> None:
    with Sandbox(workers=1, timeout=10.0) as pool:
        assert pool.protections.worker_memory_mb > pool.memory_mb
        # 10**10 references: 80 GB, past any worker's limit, refused at once.
        report = pool.run_tests("def make():\n    return 'x'\n", ["y = [make()] * 10**10"])
        assert report.outcomes[0].error_type == "MemoryError", report
        honest = pool.run_tests_many([SandboxJob(HONEST, ADD_TESTS, ADD_SETUP)] * 3)
        assert [r.passed for r in honest] == [3] * 3, honest


# --- what a run can leave to later runs, or make the worker spend ---------------------------


def test_a_run_cannot_lower_what_later_runs_inherit(pool: Sandbox) -> None:
    # The spawner (the run's parent, of the same uid) passes its limits, priority and
    # CPUs to every later run: refused by the filter, or the spawner is replaced.
    attack = (
        "import os, resource\n"
        "for limit in (resource.RLIMIT_DATA, resource.RLIMIT_FSIZE, resource.RLIMIT_AS):\n"
        "    try:\n"
        "        resource.prlimit(os.getppid(), limit, (1 << 20, 1 << 20))\n"
        "    except OSError:\n"
        "        pass\n"
        "for change in (lambda: os.setpriority(os.PRIO_PROCESS, os.getppid(), 19),\n"
        "               lambda: os.sched_setaffinity(os.getppid(), {0})):\n"
        "    try:\n"
        "        change()\n"
        "    except OSError:\n"
        "        pass\n" + HONEST
    )
    # Needs memory (a 1M-item list: past a 1 MiB RLIMIT_DATA) and writes output
    # (past a zero-byte RLIMIT_FSIZE).
    right = "def add(a, b):\n    room = [0] * 1_000_000\n    print('x' * 100)\n    return a + b\n"
    reports = pool.run_tests_many(
        [SandboxJob(attack, ADD_TESTS, ADD_SETUP)] + [SandboxJob(right, ADD_TESTS, ADD_SETUP)] * 4
    )
    assert [r.passed for r in reports] == [3] * 5, reports
    # (A run may still change its own limits and priority.)
    own = (
        "import os, resource\n"
        "resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, resource.RLIM_INFINITY))\n"
        "os.setpriority(os.PRIO_PROCESS, 0, 5)\n" + HONEST
    )
    assert pool.run_tests(own, ADD_TESTS, setup=ADD_SETUP).passed == 3


_COLLIDING = (1 << 61) - 1  # every multiple hashes to 0


@pytest.mark.parametrize(
    "value",
    [
        f"[{_COLLIDING} * i for i in range(1, 5000)]",
        f"{{{_COLLIDING} * i for i in range(1, 2000)}}",
        f"{{{_COLLIDING} * i: 0 for i in range(1, 2000)}}",
        f"[[{_COLLIDING} * (i * 100 + j) for j in range(1, 100)] for i in range(50)]",
        f"[(i, -i * {_COLLIDING}) for i in range(5000)]",
    ],
)
def test_values_whose_hashes_collide_do_not_cross(sandbox: Sandbox, value: str) -> None:
    # A set (or dict) of them would take the judge quadratic time to build, in C.
    program = f"def make():\n    return {value}\n"
    report = sandbox.run_tests(program, ["assert len(set(make())) == 0"], timeout=5)
    assert report.outcomes[0].error_type == "UntrustedValue", report
    assert "share one hash" in (report.outcomes[0].message or ""), report


def test_large_honest_values_still_cross(sandbox: Sandbox) -> None:
    program = (
        "def make():\n"
        "    pairs = {i: (i, str(i), 2**70 + i) for i in range(20000)}\n"
        "    return pairs, {2**64 + i for i in range(5000)}\n"
    )
    tests = ["assert len(make()[0]) == 20000 and len(make()[1]) == 5000"]
    assert sandbox.run_tests(program, tests).passed == 1


def test_a_compile_bomb_costs_its_own_run_not_the_worker() -> None:
    # try/finally nested in finally: CPython compiles each finally twice, so the
    # work doubles per level. The worker compiles no program with a finally.
    source = "def f():\n"
    indent = "    "
    for _ in range(19):
        source += f"{indent}try:\n{indent}    x = 1\n{indent}finally:\n"
        indent += "    "
    source += f"{indent}x = 2\n" + HONEST
    with Sandbox(workers=1, timeout=3.0) as pool:
        report = pool.run_tests(source, ADD_TESTS, setup=ADD_SETUP)
        assert report.passed == 0, report
        assert report.status is not ProgramStatus.OK, report
        honest = pool.run_tests(
            "def add(a, b):\n    try:\n        return a + b\n    finally:\n        pass\n",
            ADD_TESTS,
            setup=ADD_SETUP,
        )
        assert honest.passed == 3, honest


# --- a helper program in a run of its own ---------------------------------------------------

HELPER = (
    "def aux(x):\n    return 2 * x\n"
    "def sort_in_place(xs):\n    xs.sort()\n"
    "def refuse(x):\n    raise ValueError(f'no {x}')\n"
)


@pytest.mark.parametrize(
    ("program", "tests", "passed", "calls"),
    [
        ("def f(x):\n    return aux(x) + 1\n", ["assert f(2) == 5", "assert f(3) == 7"], 2, 2),
        # Written, never executed: not a call.
        (
            "def f(x):\n    if False:\n        aux(x)\n    return 2 * x + 1\n",
            ["assert f(2) == 5"],
            1,
            0,
        ),
        # The helper changes a list in place: the program sees it changed.
        (
            "def f(x):\n    xs = [3, 1, 2]\n    sort_in_place(xs)\n    return xs\n",
            ["assert f(0) == [1, 2, 3]"],
            1,
            1,
        ),
        # The helper's exception is raised in the program, as the builtin of its name.
        (
            "def f(x):\n    try:\n        refuse(x)\n"
            "    except ValueError as e:\n        return str(e)\n",
            ["assert f(4) == 'no 4'"],
            1,
            1,
        ),
        # Only plain data crosses, as between a test and the program.
        ("def f(x):\n    return aux(lambda: x)\n", ["assert f(0) == 0"], 0, 0),
    ],
)
def test_the_judge_counts_the_calls_into_a_helper(
    pool: Sandbox, program: str, tests: list[str], passed: int, calls: int
) -> None:
    report = pool.run_tests_many([SandboxJob(program, tests, helper=HELPER)])[0]
    assert report.status is ProgramStatus.OK, report
    assert (report.passed, report.helper_calls) == (passed, calls), report


def test_a_broken_helper_is_the_programs_outcome(pool: Sandbox) -> None:
    program = "def f(x):\n    return aux(x)\n"
    jobs = [
        SandboxJob(program, ["assert f(1) == 2"], helper="def aux(x:\n"),
        SandboxJob(program, ["assert f(1) == 2"], helper="raise KeyError('at load')\n"),
        SandboxJob(
            program, ["assert f(1) == 2"], helper="import os\ndef aux(x):\n    os._exit(3)\n"
        ),
        SandboxJob(program, ["assert f(1) == 2"], helper=HELPER),
    ]
    syntax, load, died, fine = pool.run_tests_many(jobs)
    assert syntax.status is ProgramStatus.SYNTAX_ERROR and "the helper" in (syntax.error or "")
    assert load.status is ProgramStatus.LOAD_ERROR and "the helper" in (load.error or "")
    assert died.status is ProgramStatus.KILLED and "the helper's run ended" in (died.error or "")
    assert (fine.passed, fine.helper_calls) == (1, 1), fine


def test_a_helper_cannot_speak_for_the_program(pool: Sandbox) -> None:
    # The helper writes forged results into its own channel and tries to read the
    # program's: its pipes are its own, so the forgery only ends the helper's run.
    helper = (
        "import os\n"
        "def aux(x):\n"
        "    os.write(3, b'R' + (3).to_bytes(4, 'little') + b'\\xe9\\x01\\x00')\n"
        "    return 0\n"
    )
    wrong = "def f(x):\n    aux(x)\n    return 0\n"
    report = pool.run_tests_many([SandboxJob(wrong, ["assert f(1) == 2"], helper=helper)])[0]
    assert report.passed == 0, report
    honest = pool.run_tests_many([SandboxJob(HONEST, ADD_TESTS, ADD_SETUP)] * 2)
    assert [r.passed for r in honest] == [3, 3], honest


def test_only_answered_calls_while_the_tests_run_count(pool: Sandbox) -> None:
    helper = (
        "import os, time\n"
        "def aux(x):\n    return 2 * x\n"
        "def dies(x):\n    os._exit(0)\n"
        "def hangs(x):\n    time.sleep(100)\n"
    )
    cases = [
        # At load time (a default argument, top-level code): not while the tests ran.
        ("def f(x, _=aux(0)):\n    return 2 * x\n", 0),
        ("aux(0)\ndef f(x):\n    return 2 * x\n", 0),
        # Calls the helper never answered.
        ("def f(x):\n    return dies(x)\n", 0),
        ("def f(x):\n    return hangs(x)\n", 0),
        ("def f(x):\n    return aux(x)\n", 1),
    ]
    jobs = [
        SandboxJob(program, ["assert f(1) == 2"], helper=helper, timeout=2) for program, _ in cases
    ]
    reports = pool.run_tests_many(jobs)
    assert [r.helper_calls for r in reports] == [calls for _, calls in cases], reports


def test_a_helper_with_a_finally_still_offers_its_functions(pool: Sandbox) -> None:
    # (Compiled by its run, not the worker: its names are read from its syntax tree.)
    helper = "def aux(x):\n    try:\n        return 2 * x\n    finally:\n        pass\n"
    report = pool.run_tests_many(
        [SandboxJob("def f(x):\n    return aux(x)\n", ["assert f(1) == 2"], helper=helper)]
    )[0]
    assert (report.passed, report.helper_calls) == (1, 1), report


def test_a_run_cannot_renice_its_uid_or_join_the_spawners_group(pool: Sandbox) -> None:
    protections = pool.protections
    # Without the filter and with the caller's own uid, PRIO_USER would renice the
    # caller's every process (this test's too, for good): not tried there.
    renice_uid = protections.syscalls_filtered or protections.run_as_uid is not None
    attack = (
        "import os, signal\n"
        f"renice_uid = {renice_uid}\n"
        "for change in (lambda: renice_uid and os.setpriority(os.PRIO_USER, 0, 19),\n"
        "               lambda: os.setpriority(os.PRIO_PGRP, 0, 19),\n"
        "               lambda: os.setpgid(0, os.getpgid(os.getppid()))):\n"
        "    try:\n"
        "        change()\n"
        "    except OSError:\n"
        "        pass\n"
        "if os.getpgid(0) == os.getpgid(os.getppid()):\n"
        "    os.kill(0, signal.SIGSTOP)\n" + HONEST
    )
    reports = pool.run_tests_many(
        [SandboxJob(attack, ADD_TESTS, ADD_SETUP, timeout=3)]
        + [SandboxJob(HONEST, ADD_TESTS, ADD_SETUP)] * 3
    )
    assert [r.passed for r in reports[1:]] == [3] * 3, reports
    # Every later run starts at the worker's niceness, whatever the attack did.
    niceness = pool.run_tests(
        "import os\ndef nice():\n    return os.nice(0)\n", ["assert nice() == 0"]
    )
    assert niceness.passed == 1, niceness
