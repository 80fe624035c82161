"""The caller's side of the sandbox: a pool of warm workers and the ``run_tests`` API.

:class:`Sandbox` starts ``workers`` worker interpreters (:mod:`._worker`) once
and sends each run to an idle one; the worker forks a confined process per run,
so a run costs a fork, not an interpreter start. :func:`run_tests` uses a
shared pool created on first use.

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
import marshal
import math
import os
import selectors
import struct
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from llm_envs.sandbox import _compile
from llm_envs.sandbox._workers import WORKER_ENVIRONMENT, WorkerProcess
from llm_envs.sandbox.report import (
    ProgramStatus,
    Protections,
    TestOutcome,
    TestReport,
    TestStatus,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "Sandbox",
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
# Slack on top of a run's own timeout before the pool gives up on a silent worker:
# the worker enforces the timeout itself, so this only fires if the worker hangs.
_WORKER_GRACE = 10.0
_SYNTAX_CACHE_SIZE = 4096
# Jobs queued per worker (the running one included), and the most bytes of them
# in its request pipe at once: below the pipe's 64 KiB, so sending never blocks.
_PIPELINE_DEPTH = 2
_PIPELINE_BYTES = 60 * 1024

# Decoding replies: a dict lookup rather than an Enum call per value.
_PROGRAM_STATUSES = {status.value: status for status in ProgramStatus}
_PLAIN_OUTCOMES = {status.value: TestOutcome(status) for status in TestStatus}


class SandboxError(RuntimeError):
    """The sandbox machinery failed (a worker could not start or be restarted)."""


class SandboxClosedError(SandboxError):
    """The pool was used after :meth:`Sandbox.close`."""


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
    """

    program: str
    tests: Sequence[str]
    setup: str = ""
    entry_point: str | None = None
    timeout: float | None = None


def _describe_value(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_timeout(timeout: object, name: str = "timeout") -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {_describe_value(timeout)}")
    if not (math.isfinite(timeout) and 0 < timeout <= 3600):
        raise ValueError(f"{name} must be in (0, 3600] seconds, got {timeout!r}")
    return float(timeout)


def _check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {_describe_value(value)}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


class _Request(NamedTuple):
    payload: bytes
    timeout: float
    total: int
    oversized: str | None = None  # why the program is not run (too large)


class _Slot:
    """A place for one worker in the pool; the worker in it is replaced when it dies."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.worker: WorkerProcess | None = None


@dataclass
class _Flight:
    """The jobs sent to one worker and not answered yet, oldest (running) first."""

    slot: _Slot
    worker: WorkerProcess
    jobs: deque[int]
    queued_bytes: int
    deadline: float = 0.0


def _shutdown_slots(slots: list[_Slot], wait: float, owner: int) -> None:
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
        start_timeout: seconds to wait for a worker to start.
        max_program_chars: the longest program the pool runs; a longer one gets a
            ``LOAD_ERROR`` report without running (it is an outcome, never an error).
        pin_cpus: keep each worker and its runs on one CPU of those this process
            may use (worker ``i`` on the ``i``-th, round robin). A test's calls into
            the program hand over between the two processes, which is 3x faster
            on one CPU. Default: pinned when there are at least as many CPUs as
            workers; turn it off when other work must be free to move.

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
        start_timeout: float = 60.0,
        max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
        pin_cpus: bool | None = None,
    ) -> None:
        if not sys.platform.startswith("linux"):
            raise SandboxError(f"llm_envs.sandbox needs Linux, not {sys.platform!r}")
        if workers is None:
            workers = len(os.sched_getaffinity(0))
        self.workers = _check_positive_int(workers, "workers")
        self.timeout = _check_timeout(timeout)
        self.memory_mb = _check_positive_int(memory_mb, "memory_mb")
        self.output_limit = _check_positive_int(output_limit, "output_limit")
        self.max_program_chars = _check_positive_int(max_program_chars, "max_program_chars")
        cpus = len(os.sched_getaffinity(0))
        self.pin_cpus = bool(self.workers <= cpus and cpus > 1 if pin_cpus is None else pin_cpus)
        self._config = {
            "memory_mb": self.memory_mb,
            "file_size_mb": _check_positive_int(file_size_mb, "file_size_mb"),
            "output_limit": self.output_limit,
            "max_processes": _check_positive_int(max_processes, "max_processes"),
            "site_packages": bool(site_packages),
            "namespaces": bool(namespaces),
            "landlock": bool(landlock),
            "environment": WORKER_ENVIRONMENT,
            "pool": os.getpid(),
            "pin": self.pin_cpus,
        }
        self._start_timeout = _check_timeout(start_timeout, "start_timeout")
        self._owner_pid = os.getpid()
        self._closed = False
        self._condition = threading.Condition()
        self._slots = [_Slot(index) for index in range(self.workers)]
        self._idle: list[_Slot] = []
        self._syntax_checked: OrderedDict[tuple[str, tuple[str, ...]], None] = OrderedDict()
        self._finalizer = weakref.finalize(self, _shutdown_slots, self._slots, 0.0, self._owner_pid)
        try:
            for slot in self._slots:
                slot.worker = WorkerProcess({**self._config, "index": slot.index})
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
        self.protections = Protections(**hello["protections"])
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
            deadline = time.monotonic() + self.timeout + _WORKER_GRACE
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
                reports[index] = self._failed_report(
                    request, ProgramStatus.LOAD_ERROR, request.oversized
                )
        pending = [index for index, request in enumerate(requests) if request.oversized is None]
        if pending:
            slots = self._acquire(len(pending))
            try:
                self._dispatch(slots, requests, reports, pending)
            finally:
                self._release(slots)
        for report in reports:
            if isinstance(report, BaseException):
                raise report
        return [report for report in reports if isinstance(report, TestReport)]

    # --- internals ---------------------------------------------------------------------------

    def _encode(self, job: object, index: int) -> _Request:
        where = f"jobs[{index}]"
        if isinstance(job, SandboxJob):
            program, tests, setup, entry_point, timeout = job
        elif isinstance(job, tuple | list) and len(job) in (2, 3):
            program, tests, setup = (*job, "") if len(job) == 2 else job
            entry_point, timeout = None, None
        else:
            raise TypeError(
                f"{where} must be a SandboxJob or a (program, tests, setup) tuple, "
                f"got {_describe_value(job)}"
            )
        if not isinstance(program, str):
            raise TypeError(f"program must be a str, got {_describe_value(program)} ({where})")
        if not isinstance(setup, str):
            raise TypeError(f"setup must be a str, got {_describe_value(setup)} ({where})")
        if isinstance(tests, str | bytes) or not isinstance(tests, Sequence):
            raise TypeError(
                f"tests must be a sequence of test snippets (str), got {_describe_value(tests)} "
                f"({where}); wrap a single test in a list"
            )
        tests = tuple(tests)
        for position, test in enumerate(tests):
            if not isinstance(test, str):
                raise TypeError(
                    f"tests[{position}] must be a str, got {_describe_value(test)} ({where})"
                )
        if entry_point is not None and not (
            isinstance(entry_point, str) and entry_point.isidentifier()
        ):
            raise ValueError(
                f"entry_point must be a Python identifier or None, got "
                f"{_describe_value(entry_point)} ({where})"
            )
        run_timeout = self.timeout if timeout is None else _check_timeout(timeout)
        self._check_syntax(setup, tests, where)
        if len(program) > self.max_program_chars:
            why = (
                f"the program is {len(program):,} characters long; the sandbox runs programs "
                f"of at most {self.max_program_chars:,} (Sandbox(max_program_chars=...))"
            )
            return _Request(b"", run_timeout, len(tests), why)
        # Requests are marshalled (the worker trusts this process); replies are JSON.
        payload = marshal.dumps((program, tests, setup, run_timeout, entry_point))
        return _Request(struct.pack(">I", len(payload)) + payload, run_timeout, len(tests))

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

    def _acquire(self, wanted: int) -> list[_Slot]:
        with self._condition:
            while True:
                self._check_usable()
                if self._idle:
                    taken = self._idle[:wanted]
                    del self._idle[:wanted]
                    return taken
                self._condition.wait()

    def _release(self, slots: list[_Slot]) -> None:
        with self._condition:
            self._idle.extend(slots)
            self._condition.notify_all()

    def _await_hello(self, slot: _Slot) -> None:
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

    def _ready_worker(self, slot: _Slot) -> WorkerProcess:
        """The slot's worker, restarted first if it died."""
        worker = slot.worker
        if worker is not None and worker.process.poll() is None:
            return worker
        if worker is not None:
            worker.kill()
            slot.worker = None
        with self._condition:
            self._check_usable()
        slot.worker = WorkerProcess({**self._config, "index": slot.index})
        self._await_hello(slot)
        return slot.worker

    def _dispatch(
        self,
        slots: list[_Slot],
        requests: list[_Request],
        reports: list[TestReport | BaseException | None],
        pending: list[int],
    ) -> None:
        flights: dict[int, _Flight] = {}  # worker stdout fd -> what that worker is doing
        try:
            self._dispatch_loop(slots, requests, reports, flights, pending)
        except BaseException:
            # A worker still busy would later answer the wrong request: stop it (its
            # slot restarts one on next use).
            for flight in flights.values():
                if flight.slot.worker is not None:
                    flight.slot.worker.kill()
                    flight.slot.worker = None
            raise

    def _dispatch_loop(
        self,
        slots: list[_Slot],
        requests: list[_Request],
        reports: list[TestReport | BaseException | None],
        flights: dict[int, _Flight],
        pending: list[int],
    ) -> None:
        queue = deque(pending)
        free = list(slots)
        with selectors.DefaultSelector() as selector:
            while queue or flights:
                while queue and free:
                    slot = free.pop()
                    job = queue.popleft()
                    worker = self._ready_worker(slot)
                    try:
                        worker.send(requests[job].payload)
                    except OSError:
                        worker = self._ready_worker(slot)  # it died while idle: once more
                        worker.send(requests[job].payload)
                    flight = _Flight(slot, worker, deque([job]), len(requests[job].payload))
                    flight.deadline = time.monotonic() + requests[job].timeout + _WORKER_GRACE
                    flights[worker.stdout_fd] = flight
                    selector.register(worker.stdout_fd, selectors.EVENT_READ)
                # Queue one more small job on each busy worker: it starts the moment the
                # worker answers, without waiting for this process to send it.
                for flight in flights.values():
                    if not queue or len(flight.jobs) >= _PIPELINE_DEPTH:
                        continue
                    size = len(requests[queue[0]].payload)
                    if flight.queued_bytes + size > _PIPELINE_BYTES:
                        continue  # a write that could block on a full pipe
                    job = queue.popleft()
                    try:
                        flight.worker.send(requests[job].payload)
                    except OSError:
                        queue.appendleft(job)  # the worker died: its end shows up below
                        continue
                    flight.jobs.append(job)
                    flight.queued_bytes += size
                wait = max(0.0, min(f.deadline for f in flights.values()) - time.monotonic())
                for key, _ in selector.select(wait):
                    flight = flights[int(key.fd)]
                    try:
                        messages = flight.worker.read_messages()
                    except EOFError:
                        reason = flight.worker.exit_description()
                        self._ground(flight, selector, flights, free, queue)
                        job = flight.jobs.popleft()
                        reports[job] = self._failed_report(
                            requests[job],
                            ProgramStatus.KILLED,
                            f"the sandbox worker {reason} during this run; it was restarted",
                        )
                        queue.extendleft(reversed(flight.jobs))  # queued, never started
                        continue
                    retired = False
                    for message in messages:
                        job = flight.jobs.popleft()
                        flight.queued_bytes -= len(requests[job].payload)
                        reports[job] = self._report(message, requests[job])
                        if message.get("retire"):
                            # The worker could not clean up after this run and exits:
                            # what was queued behind it goes to a fresh worker.
                            retired = True
                            break
                        if flight.jobs:
                            timeout = requests[flight.jobs[0]].timeout
                            flight.deadline = time.monotonic() + timeout + _WORKER_GRACE
                    if retired:
                        self._ground(flight, selector, flights, free, queue)
                        queue.extendleft(reversed(flight.jobs))
                        continue
                    if not flight.jobs:
                        selector.unregister(flight.worker.stdout_fd)
                        del flights[flight.worker.stdout_fd]
                        free.append(flight.slot)
                now = time.monotonic()
                for flight in list(flights.values()):
                    if now < flight.deadline:
                        continue
                    self._ground(flight, selector, flights, free, queue)
                    job = flight.jobs.popleft()
                    reports[job] = self._failed_report(
                        requests[job],
                        ProgramStatus.TIMEOUT,
                        "the sandbox worker stopped answering; it was restarted",
                    )
                    queue.extendleft(reversed(flight.jobs))

    @staticmethod
    def _ground(
        flight: _Flight,
        selector: selectors.BaseSelector,
        flights: dict[int, _Flight],
        free: list[_Slot],
        queue: deque[int],
    ) -> None:
        """Take a dead or stuck worker out of service (its slot restarts one on next use)."""
        selector.unregister(flight.worker.stdout_fd)
        del flights[flight.worker.stdout_fd]
        flight.worker.kill()
        flight.slot.worker = None
        free.append(flight.slot)

    @staticmethod
    def _failed_report(request: _Request, status: ProgramStatus, error: str) -> TestReport:
        outcomes = (TestOutcome(TestStatus.NOT_RUN),) * request.total
        return TestReport(status=status, outcomes=outcomes, error=error)

    @staticmethod
    def _report(message: dict[str, Any], request: _Request) -> TestReport | BaseException:
        # Errors are returned, not raised: the other workers' replies must be read first.
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
