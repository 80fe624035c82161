"""The caller's side of the sandbox: a pool of warm workers and the ``run_tests`` API.

:class:`Sandbox` starts ``workers`` worker interpreters (:mod:`._worker`) once,
each with control groups of its own where the machine allows (:mod:`._cgroups`),
and sends each run to an idle one; the worker forks a confined process per run,
so a run costs a fork, not an interpreter start. :func:`run_tests` uses a
shared pool created on first use. Each job is checked and encoded by
:mod:`._requests`; a batch is sent to the workers, and their replies read, by
:mod:`._dispatch`.

Failures of the machinery are explicit: using a closed pool raises
:class:`SandboxClosedError`; a worker that dies during a run (only possible
where the OS gives no namespaces, no Landlock signal scoping and no separate
uid, see ``docs/sandbox.md``) yields a ``KILLED`` report for that run and is
restarted for the next one; a worker that cannot be (re)started raises
:class:`SandboxError`.

This module must never execute the program or the tests itself, never read a
run's stdout for results, and never unpickle anything a worker sends (replies
are JSON).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from llm_envs.arguments import check_bool, check_int, describe
from llm_envs.sandbox import _cgroups, _compile
from llm_envs.sandbox._dispatch import WORKER_GRACE, Dispatch, Slot
from llm_envs.sandbox._requests import (
    Request,
    check_positive_int,
    check_timeout,
    encode_request,
    failed_report,
)
from llm_envs.sandbox._workers import WORKER_ENVIRONMENT, WorkerProcess, try_control_groups
from llm_envs.sandbox.fair import RoundRobin, current_client, give_up_at
from llm_envs.sandbox.report import ProgramStatus, Protections, TestOutcome, TestReport, TestStatus

__all__ = [
    "DEFAULT_TIMEOUT",
    "Sandbox",
    "SandboxBusyError",
    "SandboxClosedError",
    "SandboxError",
    "SandboxJob",
    "default_sandbox",
    "run_tests",
]

#: Seconds of wall-clock time a run may take unless told otherwise.
DEFAULT_TIMEOUT = 5.0
#: The longest program (in characters) a pool runs unless told otherwise.
DEFAULT_MAX_PROGRAM_CHARS = 1 << 20
_SYNTAX_CACHE_SIZE = 4096

# Decoding replies: a dict lookup rather than an Enum call per value.
_PROGRAM_STATUSES = {status.value: status for status in ProgramStatus}
_PLAIN_OUTCOMES = {status.value: TestOutcome(status) for status in TestStatus}


class SandboxError(RuntimeError):
    """The sandbox machinery failed (a worker could not start or be restarted)."""


class SandboxClosedError(SandboxError):
    """The pool was used after :meth:`Sandbox.close`."""


class SandboxBusyError(SandboxError):
    """No worker came free before the caller's deadline (:func:`~llm_envs.sandbox.fair.as_client`).

    Only where a caller set one: the episode server's step threads, whose
    step is over by then. The runs were not made.
    """


class SandboxJob(NamedTuple):
    """One run for :meth:`Sandbox.run_tests_many` (a ``(program, tests, setup)`` tuple works too).

    Attributes:
        program: the untrusted source.
        tests: test snippets, run in order after the program and the setup.
        setup: code the tests need (imports, ``candidate = f``).
        entry_point: a name the program defines that the tests may use even if
            it shadows a builtin (MBPP/126 defines ``sum``); otherwise builtin
            names in tests always mean the builtins.
        timeout: this run's wall-clock limit in seconds (None: the pool's).
        helper: a second untrusted program, run in a process of its own, whose
            functions ``program`` calls (names it uses that ``helper`` defines as
            functions). Each call goes through the judge, which counts those the
            helper answered while the setup and the tests ran:
            :attr:`TestReport.helper_calls`. Arguments and results cross as plain
            data, as between a test and the program.
    """

    program: str
    tests: Sequence[str]
    setup: str = ""
    entry_point: str | None = None
    timeout: float | None = None
    helper: str | None = None


class _Waiter:
    """A call waiting for workers: how many it can use, and those it was handed."""

    __slots__ = ("slots", "wanted")

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.slots: list[Slot] | None = None


def _shutdown_slots(slots: list[Slot], wait: float, owner: int) -> None:
    if os.getpid() != owner:
        return  # a forked copy of the caller: the workers belong to the parent
    for slot in slots:
        if slot.worker is not None:
            slot.worker.shut_down(wait)
            slot.worker = None


class Sandbox:
    r"""A pool of warm sandbox workers that run untrusted programs against tests.

    Every run gets a process of its own, forked from a warm worker, in an empty
    temporary directory, with resource limits and a wall-clock timeout, and
    with whatever namespaces, Landlock rules and uid switch the machine allows
    (see :attr:`protections` and ``docs/sandbox.md``).

    Args:
        workers: worker processes, i.e. runs in parallel (default: the CPUs
            this process may use).
        timeout: default wall-clock limit of a run, in seconds.
        memory_mb: address-space limit of a run, in MiB.
        output_limit: bytes of stdout and of stderr kept per run.
        file_size_mb: the largest file (and output stream) a run may write, in MiB.
        max_processes: processes and threads a run may create (RLIMIT_NPROC).
        site_packages: let programs import third-party packages (and read
            site-packages). Off by default: benchmark data lives there.
        namespaces: use PID/network/mount namespaces where the OS allows.
        landlock: use Landlock where the kernel has it (turn off to let programs
            read and write wherever the uid allows).
        seccomp: install the seccomp filters where the kernel has them (turn off
            only to test the weakest mode: runs may then open sockets, signal
            the worker, and make processes that the spawner, not the kernel,
            keeps inside the run).
        start_timeout: seconds to wait for a worker to start.
        max_program_chars: the longest program the pool runs; a longer one gets a
            ``LOAD_ERROR`` report without running (it is an outcome, never an error).
        pin_cpus: keep each worker and its runs on one CPU of those this process
            may use (worker ``i`` on the ``i``-th, round robin). A test's calls into
            the program hand over between the two processes, which is 3x faster
            on one CPU. Default: pinned when there are at least as many CPUs as
            workers; turn it off when other work must be free to move.
        control_groups: bound each run's whole process tree (memory, processes)
            and each worker's CPU with the kernel's control groups, where this
            process may create them (turn off only to test the mode without).

    Raises:
        SandboxError: on a non-Linux system, or when a worker cannot start.

    Example:
        >>> with Sandbox(workers=1) as sandbox:
        ...     report = sandbox.run_tests("def f(x):\n    return 2 * x", ["assert f(2) == 4"])
        >>> report.passed, report.total, report.status
        (1, 1, <ProgramStatus.OK: 'ok'>)
    """

    def __init__(
        self,
        workers: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        memory_mb: int = 1024,
        *,
        output_limit: int = 8192,
        file_size_mb: int = 16,
        max_processes: int = 32,
        site_packages: bool = False,
        namespaces: bool = True,
        landlock: bool = True,
        seccomp: bool = True,
        start_timeout: float = 60.0,
        max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
        pin_cpus: bool | None = None,
        control_groups: bool = True,
    ) -> None:
        if not sys.platform.startswith("linux"):
            raise SandboxError(f"llm_envs.sandbox needs Linux, not {sys.platform!r}")
        if workers is None:
            workers = len(os.sched_getaffinity(0))
        self.workers = check_positive_int(workers, "workers")
        self.timeout = check_timeout(timeout)
        self.memory_mb = check_positive_int(memory_mb, "memory_mb")
        self.output_limit = check_positive_int(output_limit, "output_limit")
        self.max_program_chars = check_positive_int(max_program_chars, "max_program_chars")
        _check_upper_bounds(
            workers=self.workers,
            memory_mb=self.memory_mb,
            output_limit=self.output_limit,
            file_size_mb=file_size_mb,
            max_processes=max_processes,
        )
        cpus = len(os.sched_getaffinity(0))
        if pin_cpus is not None:
            check_bool("pin_cpus", pin_cpus)
        self.pin_cpus = self.workers <= cpus and cpus > 1 if pin_cpus is None else pin_cpus
        self._config = {
            "memory_mb": self.memory_mb,
            "file_size_mb": check_positive_int(file_size_mb, "file_size_mb"),
            "output_limit": self.output_limit,
            "max_processes": check_positive_int(max_processes, "max_processes"),
            "site_packages": check_bool("site_packages", site_packages),
            "namespaces": check_bool("namespaces", namespaces),
            "landlock": check_bool("landlock", landlock),
            "seccomp": check_bool("seccomp", seccomp),
            "environment": WORKER_ENVIRONMENT,
            "pool": os.getpid(),
            "pin": self.pin_cpus,
        }
        self._support = self._control_groups(check_bool("control_groups", control_groups))
        self._config["cgroups_missing"] = self._support.missing
        self._start_timeout = check_timeout(start_timeout, "start_timeout")
        self._owner_pid = os.getpid()
        self._closed = False
        self._condition = threading.Condition()
        self._slots = [Slot(index) for index in range(self.workers)]
        self._idle: list[Slot] = []
        self._waiting: RoundRobin[_Waiter] = RoundRobin()
        self._syntax_checked: OrderedDict[tuple[str, tuple[str, ...]], None] = OrderedDict()
        self._finalizer = weakref.finalize(self, _shutdown_slots, self._slots, 0.0, self._owner_pid)
        self.protections = self._start_workers()
        self._idle = list(self._slots)

    # --- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Sandbox(workers={self.workers}, timeout={self.timeout:g}, {state})"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Stop the workers and delete their files; runs in flight finish first.

        Idempotent. Calls waiting for a worker, and later calls, raise
        :class:`SandboxClosedError`. A run still going after its own timeout
        plus a grace period has its worker killed (its call reports ``KILLED``).
        """
        with self._condition:
            if self._closed:
                return
            self._closed = True
            self._condition.notify_all()
            deadline = time.monotonic() + self.timeout + WORKER_GRACE
            while len(self._idle) < len(self._slots) and time.monotonic() < deadline:
                self._condition.wait(max(0.0, deadline - time.monotonic()))
            idle = list(self._idle)
            busy = [slot for slot in self._slots if slot not in idle]
        self._finalizer.detach()
        if os.getpid() != self._owner_pid:
            return
        _shutdown_slots(idle, 1.0, self._owner_pid)
        # A busy slot's pipes belong to the thread waiting on it: only stop the
        # process, and that thread cleans up when it sees the worker gone.
        for slot in busy:
            worker = slot.worker
            if worker is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(worker.process.pid, 9)

    # --- running -----------------------------------------------------------------------------

    def run_tests(
        self,
        program: str,
        tests: Sequence[str],
        *,
        setup: str = "",
        timeout: float | None = None,
        entry_point: str | None = None,
    ) -> TestReport:
        """Run ``program``, then ``setup``, then each test, in a fresh confined process.

        Args:
            program: the untrusted source (e.g. ``problem.prompt + completion``).
            tests: test snippets, typically one ``assert`` each. A failing test
                does not stop the later ones.
            setup: code the tests need, run after the program (imports,
                helpers, ``candidate = entry_point``).
            timeout: wall-clock limit in seconds (default: the pool's).
            entry_point: see :class:`SandboxJob`.

        Returns:
            The report; a test counts as passed only when the judge ran it to its end.

        Raises:
            TypeError: ``program``, ``setup`` or a test is not a str, or ``tests``
                is a single str.
            ValueError: the setup or a test is not valid Python, or ``timeout``
                is out of range.
            SandboxClosedError: the pool is closed.
        """
        job = SandboxJob(program, tests, setup, entry_point, timeout)
        return self.run_tests_many([job])[0]

    def run_tests_many(
        self, jobs: Iterable[SandboxJob | tuple[str, Sequence[str], str]]
    ) -> list[TestReport]:
        """Run many jobs on all workers at once; the reports come back in the jobs' order.

        Args:
            jobs: :class:`SandboxJob` values or ``(program, tests, setup)`` tuples.

        Raises:
            TypeError: a job is malformed (the message names its index and field).
            ValueError: a job's setup or tests are not valid Python.
            SandboxClosedError: the pool is closed.
        """
        requests = [self._encode(job, index) for index, job in enumerate(jobs)]
        if not requests:
            return []
        reports: list[TestReport | BaseException | None] = [None] * len(requests)
        # A program too large to run is an outcome of its own, decided here.
        for index, request in enumerate(requests):
            if request.oversized is not None:
                reports[index] = failed_report(request, ProgramStatus.LOAD_ERROR, request.oversized)
        pending = [index for index, request in enumerate(requests) if request.oversized is None]
        if pending:
            slots = self._acquire(len(pending))
            try:
                Dispatch(slots, requests, reports, pending, self._ready_worker, _report).run()
            finally:
                self._release(slots)
        for report in reports:
            if isinstance(report, BaseException):
                raise report
        return [report for report in reports if isinstance(report, TestReport)]

    # --- internals ---------------------------------------------------------------------------

    def _control_groups(self, wanted: bool) -> _cgroups.Support:
        """Where this pool's workers get control groups (version 0: nowhere, and why)."""
        if not wanted:
            return _cgroups.Support(0, {}, "control groups are turned off (control_groups=False)")
        support = _cgroups.find_support()
        if not support.version:
            return support
        _cgroups.sweep_stale(support)
        failed = try_control_groups(support)
        return _cgroups.Support(0, {}, failed) if failed else support

    def _new_worker(self, index: int) -> WorkerProcess:
        try:
            return WorkerProcess({**self._config, "index": index}, self._support)
        except OSError as error:
            raise SandboxError(
                f"sandbox worker {index} could not get its control groups: {error}"
            ) from None

    def _start_workers(self) -> Protections:
        """Start every slot's worker; what they enforce. On failure, none is left running."""
        try:
            for slot in self._slots:
                slot.worker = self._new_worker(slot.index)
            for slot in self._slots:
                self._await_hello(slot)
        except BaseException:
            self._finalizer()
            raise
        hello = self._slots[0].worker.hello if self._slots[0].worker else None
        assert hello is not None
        footprint = float(hello["address_space_mb"])
        if self.memory_mb < footprint + 64:
            self._finalizer()
            raise ValueError(
                f"memory_mb must leave room above the worker's own {footprint:.0f} MiB of "
                f"address space; got {self.memory_mb}, use at least {math.ceil(footprint) + 64}"
            )
        return Protections(**hello["protections"])

    def _encode(self, job: object, index: int) -> Request:
        where = f"jobs[{index}]"
        if isinstance(job, SandboxJob):
            program, tests, setup, entry_point, timeout, helper = job
        elif isinstance(job, tuple | list) and len(job) in (2, 3):
            program, tests, setup = (*job, "") if len(job) == 2 else job
            entry_point, timeout, helper = None, None, None
        else:
            raise TypeError(
                f"{where} must be a SandboxJob or a (program, tests, setup) tuple, "
                f"got {describe(job)}"
            )
        return encode_request(
            program,
            tests,
            setup,
            entry_point,
            timeout,
            helper=helper,
            where=where,
            default_timeout=self.timeout,
            max_program_chars=self.max_program_chars,
            check_syntax=self._check_syntax,
        )

    def _check_syntax(self, setup: str, tests: tuple[str, ...], where: str) -> None:
        key = (setup, tests)
        with self._condition:
            if key in self._syntax_checked:
                self._syntax_checked.move_to_end(key)
                return
        try:
            _compile.check_test_syntax(setup, tests)
        except ValueError as error:
            raise ValueError(f"{error} ({where})") from None
        with self._condition:
            self._syntax_checked[key] = None
            if len(self._syntax_checked) > _SYNTAX_CACHE_SIZE:
                self._syntax_checked.popitem(last=False)

    def _check_usable(self) -> None:
        if self._closed:
            raise SandboxClosedError("this Sandbox is closed; create a new one")
        if os.getpid() != self._owner_pid:
            raise SandboxError(
                f"this Sandbox belongs to process {self._owner_pid}; a forked process "
                "must create its own"
            )

    def _acquire(self, wanted: int) -> list[Slot]:
        """Up to ``wanted`` idle workers (at least one), in the current client's turn.

        Callers waiting for a worker are served in turn between clients
        (:func:`~llm_envs.sandbox.fair.current_client`,
        :class:`~llm_envs.sandbox.fair.RoundRobin`), each client's in arrival
        order. A caller past :func:`~llm_envs.sandbox.fair.give_up_at` stops
        waiting (:class:`SandboxBusyError`).
        """
        with self._condition:
            self._check_usable()
            client = current_client()
            if self._idle and not self._waiting:
                self._waiting.served(client)
                return self._take(wanted)
            waiter = _Waiter(wanted)
            self._waiting.push(client, waiter)
            until = give_up_at()
            try:
                while waiter.slots is None:
                    self._check_usable()
                    left = None if until is None else until - time.monotonic()
                    if left is not None and left <= 0:
                        raise SandboxBusyError(
                            f"no sandbox worker came free for client {client} before its "
                            "caller's deadline (the episode server's --step-deadline); the "
                            "run was not made"
                        )
                    self._condition.wait(left)
                if self._closed:
                    self._check_usable()
                return waiter.slots
            except BaseException:
                if not self._waiting.remove(client, waiter) and waiter.slots is not None:
                    self._give(waiter.slots)  # handed slots as it gave up: pass them on
                raise

    def _take(self, wanted: int) -> list[Slot]:
        """(Under the condition.) Up to ``wanted`` idle slots."""
        taken = self._idle[:wanted]
        del self._idle[:wanted]
        return taken

    def _release(self, slots: list[Slot]) -> None:
        with self._condition:
            self._give(slots)

    def _give(self, slots: list[Slot]) -> None:
        """(Under the condition.) Idle ``slots``: to the waiters whose turn it is, then idle."""
        self._idle.extend(slots)
        if self._closed:
            self._condition.notify_all()
            return
        if self._idle and self._waiting:
            while self._idle and self._waiting:
                waiter = self._waiting.pop()
                waiter.slots = self._take(waiter.wanted)
            self._condition.notify_all()

    def _await_hello(self, slot: Slot) -> None:
        worker = slot.worker
        assert worker is not None
        deadline = time.monotonic() + self._start_timeout
        try:
            message = worker.wait_message(deadline)
        except (EOFError, TimeoutError):
            reason = worker.exit_description()
            worker.kill()
            slot.worker = None
            raise SandboxError(f"sandbox worker {slot.index} {reason} while starting") from None
        if "startup_error" in message:
            worker.kill()
            slot.worker = None
            raise SandboxError(
                f"sandbox worker {slot.index} failed to start:\n{message['startup_error']}"
            )
        worker.hello = message

    def _ready_worker(self, slot: Slot) -> WorkerProcess:
        """The slot's worker, restarted first if it died."""
        worker = slot.worker
        if worker is not None and worker.process.poll() is None:
            return worker
        if worker is not None:
            worker.kill()
            slot.worker = None
        with self._condition:
            self._check_usable()
        slot.worker = self._new_worker(slot.index)
        self._await_hello(slot)
        return slot.worker


def _report(message: dict[str, Any], request: Request) -> TestReport | BaseException:
    """The report a worker's reply gives ``request``, or the error its call must raise."""
    if "invalid" in message:
        return ValueError(str(message["invalid"]))
    if "internal_error" in message:
        return SandboxError(f"sandbox worker error:\n{message['internal_error']}")
    outcomes = []
    for status, error_type, text in message["outcomes"]:
        # Outcomes without details are immutable values: one shared instance each.
        shared = _PLAIN_OUTCOMES.get(status) if error_type is None and text is None else None
        outcomes.append(shared or TestOutcome(TestStatus(status), error_type, text))
    return TestReport(
        status=_PROGRAM_STATUSES[message["status"]],
        outcomes=tuple(outcomes),
        error=message["error"],
        stdout=message["stdout"],
        stderr=message["stderr"],
        output_truncated=bool(message["output_truncated"]),
        duration=float(message["duration"]),
        helper_calls=int(message.get("helper_calls", 0)),
    )


_default_lock = threading.Lock()
_default: Sandbox | None = None


def _close_default() -> None:
    if _default is not None:
        _default.close()


atexit.register(_close_default)


def default_sandbox() -> Sandbox:
    """The shared pool :func:`run_tests` uses, created on first use with default settings.

    A process forked from the one that created it gets a pool of its own.
    """
    global _default
    with _default_lock:
        if _default is None or _default.closed or _default._owner_pid != os.getpid():
            _default = Sandbox()
        return _default


def run_tests(
    program: str,
    tests: Sequence[str],
    *,
    setup: str = "",
    timeout: float | None = None,
    entry_point: str | None = None,
) -> TestReport:
    r"""Run ``program``, ``setup`` and ``tests`` in the shared pool (see :meth:`Sandbox.run_tests`).

    Example:
        >>> report = run_tests("def add(a, b):\n    return a + b", ["assert add(1, 2) == 3"])
        >>> report.all_passed
        True
    """
    return default_sandbox().run_tests(
        program, tests, setup=setup, timeout=timeout, entry_point=entry_point
    )


_UPPER_BOUNDS = {
    "workers": (4096, "one process each"),
    "memory_mb": (1 << 20, "1 TiB per run"),
    "output_limit": (16 << 20, "the 16 MiB a reply may carry"),
    "file_size_mb": (1 << 20, "1 TiB per file"),
    "max_processes": (1 << 16, "processes per run"),
}
"""Largest accepted pool settings: past them a value is a typo, not a setting."""


def _check_upper_bounds(**values: object) -> None:
    """Refuse pool settings past :data:`_UPPER_BOUNDS`, naming the limit and why."""
    for name, value in values.items():
        largest, why = _UPPER_BOUNDS[name]
        check_int(name, value, minimum=1, maximum=largest, meaning=f" ({why})")
