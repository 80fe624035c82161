"""What one sandboxed run produced: the program's status and each test's outcome.

These records are the sandbox's whole public output. They are plain frozen
dataclasses so that environments can store them in infos, compare them in tests
and hash them. They are built in the caller's process from the worker's reply;
nothing in them comes from the program's stdout.

This module must never run code: it only describes results.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ProgramStatus", "Protections", "TestOutcome", "TestReport", "TestStatus"]


class ProgramStatus(StrEnum):
    """How the run of the program as a whole ended.

    Attributes:
        OK: the program loaded, the setup ran and every test was attempted.
        SYNTAX_ERROR: the program does not compile; nothing ran.
        LOAD_ERROR: the program (or the setup, e.g. ``candidate = f`` when the
            program never defined ``f``) raised while loading; no test ran.
        TIMEOUT: the wall-clock limit expired; the running test is marked
            :attr:`TestStatus.TIMEOUT` and later tests :attr:`TestStatus.NOT_RUN`.
        KILLED: the program's process ended before the tests finished: a signal,
            a resource limit (CPU time, memory, processes), the program calling
            ``os._exit``, or writing into the judge's channel.
    """

    OK = "ok"
    SYNTAX_ERROR = "syntax_error"
    LOAD_ERROR = "load_error"
    TIMEOUT = "timeout"
    KILLED = "killed"


class TestStatus(StrEnum):
    """The outcome of one test snippet.

    Attributes:
        PASSED: the judge ran the snippet to its end and saw every assertion hold.
        FAILED: the snippet raised (an assertion, an exception from the program,
            a value of an untrusted type, or the process ending mid-test).
        TIMEOUT: the wall-clock limit expired while this test ran.
        NOT_RUN: the run ended before this test started.
    """

    __test__ = False  # tell pytest this is not a test class

    PASSED = "passed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    NOT_RUN = "not_run"


@dataclass(frozen=True)
class TestOutcome:
    """One test's outcome.

    Attributes:
        status: what happened.
        error_type: for a failure, the exception's class name (``"AssertionError"``,
            ``"ZeroDivisionError"``, ``"UntrustedValue"``, ``"ProcessDied"``); else None.
        message: for a failure, a short description, e.g. ``"assert 3 == 4"``; else None.
    """

    __test__ = False  # tell pytest this is not a test class

    status: TestStatus
    error_type: str | None = None
    message: str | None = None

    @property
    def passed(self) -> bool:
        """Whether the test passed."""
        return self.status is TestStatus.PASSED


@dataclass(frozen=True)
class TestReport:
    """The result of running one program against its tests.

    Attributes:
        status: how the run ended (see :class:`ProgramStatus`).
        outcomes: one :class:`TestOutcome` per test, in the order given.
        error: for any status but ``OK``, what went wrong, e.g.
            ``"SyntaxError: invalid syntax (line 3)"`` or ``"timed out after 5 s"``.
        stdout: the program's standard output, cut to the pool's ``output_limit``.
        stderr: the program's standard error, cut the same way.
        output_truncated: whether either stream was cut.
        duration: seconds from the fork of the run's process to its end.
        helper_calls: with a :attr:`SandboxJob.helper`, how many calls of the
            helper's functions the program made while the setup and the tests
            ran (not while it loaded) and the helper's process answered, counted
            by the judge.

    Example:
        >>> report = TestReport(ProgramStatus.OK, (TestOutcome(TestStatus.PASSED),))
        >>> report.passed, report.total, report.all_passed
        (1, 1, True)
    """

    __test__ = False  # tell pytest this is not a test class

    status: ProgramStatus
    outcomes: tuple[TestOutcome, ...]
    error: str | None = None
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    duration: float = 0.0
    helper_calls: int = 0

    @property
    def passed(self) -> int:
        """How many tests passed."""
        return sum(outcome.status is TestStatus.PASSED for outcome in self.outcomes)

    @property
    def total(self) -> int:
        """How many tests there were."""
        return len(self.outcomes)

    @property
    def all_passed(self) -> bool:
        """Whether the program loaded and every test passed (True for zero tests)."""
        return self.status is ProgramStatus.OK and self.passed == self.total

    @property
    def pass_rate(self) -> float:
        """The fraction of tests that passed (0.0 when there are none)."""
        return self.passed / self.total if self.outcomes else 0.0


@dataclass(frozen=True)
class Protections:
    """What the operating system let the sandbox enforce, as probed by a worker.

    Every field is a guarantee that holds for every run of that pool; a False
    field means the protection is absent, not that it failed. See
    ``docs/sandbox.md`` for what each one stops.

    Attributes:
        pid_namespace: runs live in a PID namespace of their own: they see no
            other process, cannot signal the worker, and everything they started
            dies with the run.
        network_namespace: runs live in an empty network namespace (no
            interfaces, not even a working loopback): no network at all.
        mount_namespace: runs see a private ``/proc`` (their own processes only)
            and a size-limited private tmpfs for their temporary directories.
        user_namespace: the namespaces above were made without root, inside a
            user namespace; runs drop every capability in it.
        run_as_uid: the unprivileged uid runs switch to (the worker ran as
            root), or None when runs keep the caller's uid.
        landlock_abi: the kernel's Landlock ABI version (0: unavailable).
        filesystem_confined: Landlock confines runs: writes only inside their
            temporary directory, reads only from the standard library, system
            libraries and a few device and configuration files.
        tcp_blocked: runs can neither connect nor listen over TCP.
        signals_confined: runs cannot signal processes outside their own run (a
            PID namespace, Landlock signal scoping, or a seccomp filter).
        process_limit: the number of processes and threads a run may create is
            limited (RLIMIT_NPROC is enforced for its uid, or a pids control group
            bounds its tree).
        syscalls_filtered: a seccomp filter refuses runs new sockets of any family
            and memory outside their address-space limit (memfd, SysV and POSIX
            IPC, keys), the interfaces that would bypass it (io_uring, BPF) and
            new or joined namespaces (``unshare``, ``setns``, ``clone`` with a
            namespace flag); and it keeps every process a run starts inside the
            run's process tree (``clone(CLONE_PARENT)`` refused, ``clone3``
            answered as missing).
        runs_contained: nothing a run starts outlives the run, even if the
            worker itself is killed while the run is in progress: the worker is
            PID 1 of a PID namespace, whose processes the kernel kills with it.
            Without one, everything a run starts is still killed after the run
            (the worker is a child subreaper and checks that nothing is left),
            but a worker killed from outside in the middle of a run leaves that
            run's processes to the system's init.
        worker_memory_mb: the address-space limit of each worker, the judge: its
            own footprint, plus ``memory_mb``, plus 256 MiB. A test that makes
            the judge expand what a program returned beyond it (a ``list()`` of
            a long range) fails with ``MemoryError``; the worker goes on.
        scheduling_fixed: runs cannot change their CPUs or their scheduling policy
            (seccomp refuses ``sched_setaffinity``, ``sched_setscheduler``,
            ``sched_setparam`` and ``sched_setattr``, even on themselves) nor raise
            their priority (RLIMIT_NICE and RLIMIT_RTPRIO are 0): a run pinned with
            its worker (``pin_cpus``) stays on that worker's CPU.
        control_groups: the control group interface the limits below use (1 or
            2), or 0 when they do not hold (see ``control_groups_missing``).
        tree_memory_limit: ``memory_mb`` bounds the memory of a run's whole
            process tree (resident and swapped memory, page cache, the run
            directory's files), not only each process's address space; past it
            the kernel kills one of its processes and the run is ``KILLED``
            with an error that names memory.
        tree_process_limit: ``max_processes`` bounds the processes and threads of
            a run's whole tree (a pids control group), whatever its uid.
        cpu_limit: each worker, its judge and its runs together, gets at most one
            CPU's time and the same scheduling weight as every other worker,
            however many processes or sessions a run starts: no run can slow
            another worker's run.
        control_groups_missing: why the three limits above do not hold (empty
            when they do): without them ``memory_mb`` bounds each process, so a
            run of N processes may use N times as much, and a run's busy
            processes compete with other runs' one by one.
    """

    pid_namespace: bool = False
    network_namespace: bool = False
    mount_namespace: bool = False
    user_namespace: bool = False
    run_as_uid: int | None = None
    landlock_abi: int = 0
    filesystem_confined: bool = False
    tcp_blocked: bool = False
    signals_confined: bool = False
    process_limit: bool = False
    syscalls_filtered: bool = False
    runs_contained: bool = False
    worker_memory_mb: int = 0
    scheduling_fixed: bool = False
    control_groups: int = 0
    tree_memory_limit: bool = False
    tree_process_limit: bool = False
    cpu_limit: bool = False
    control_groups_missing: str = ""
