"""The sandbox worker: a warm interpreter that judges each program run in a fresh confined process.

The pool (:mod:`llm_envs.sandbox.pool`) starts each worker as
``python -P -s -S -c <bootstrap>``, so the worker imports only the standard
library and this package's sandbox modules (never ``llm_envs/__init__``).
Three kinds of process take part:

* The **worker** talks to the pool over its stdin/stdout (frames: a 4-byte
  big-endian length, then the payload: requests are marshalled, since the pool
  is trusted and marshal is fastest; replies are JSON, so the pool never
  unmarshals anything a worker wrote). At start it enters new namespaces where
  the system allows (as PID 1 of its PID namespace), pre-imports the standard
  modules that benchmark tests use, and prepares the confinement. Per request it
  compiles the tests (cached) and the program, hands the program to a waiting
  run, and judges it: the setup and the tests run here
  (:mod:`llm_envs.sandbox._judge`), calling the program's functions in the run.
  Then it kills whatever the run left and empties the run's directory. It never
  forks per run, so its memory is never write-protected.
* The **spawner**, forked once from the worker, applies every inherited part of
  the confinement once: resource limits, the unprivileged uid, ``no_new_privs``,
  the Landlock ruleset, the descriptor layout, the working directory, and a
  seccomp filter (no signals to it, no sockets, no memory outside the
  address-space limit; it is non-dumpable, so runs cannot ptrace it either). Its
  loop only forks: each run is forked ahead of its job and waits for it, so the
  fork is off the critical path.
* Each **run** is a child of the spawner. It reads its job from the job pipe,
  sets its CPU limit, and hands over to :func:`llm_envs.sandbox._program.serve`,
  which executes the program and then answers the judge's calls.

This module must never run untrusted code in the worker or the spawner, never
read anything a run wrote except through the judge's strict decoder, and never
write anything to stdout except reply frames.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import gc
import json
import marshal
import math
import os
import select
import signal
import struct
import sys
import time
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llm_envs.sandbox import _isolation, _judge, _landlock, _program, _seccomp, _spawner
from llm_envs.sandbox._processes import (
    clean_directory,
    describe_exit,
    kill_run,
    open_pidfd,
    read_exact,
    wait_status,
)

if TYPE_CHECKING:
    from llm_envs.sandbox._compile import CompiledProgram, PreparedTests

__all__ = ["PRELOADED_MODULES", "main"]

#: Standard modules imported before forking, so runs don't pay for them: what
#: HumanEval, MBPP and typical model-written solutions import. Every module here
#: is in the memory of every run, and a fork and an exit cost time in proportion
#: to that memory: ``dataclasses`` is left out (it brings ``inspect``, ``ast``,
#: ``dis`` and ``tokenize``, 1.2 MiB that every run would copy page tables for),
#: so a program that imports it pays for the import instead (a few milliseconds).
PRELOADED_MODULES = (
    "abc",
    "array",
    "bisect",
    "calendar",
    "cmath",
    "collections",
    "collections.abc",
    "contextlib",
    "copy",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "json",
    "math",
    "numbers",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "struct",
    "textwrap",
    "time",
    "typing",
    "unicodedata",
)
_BUILTIN_NAMES = frozenset(dir(builtins))
_SANDBOX_UID_BASE = 2_000_000_000
_FALLBACK_UID = 65534  # nobody
_PREPARED_CACHE_SIZE = 2048
_JOB_PIPE_BYTES = 1 << 20
_KILL_GRACE_MS = 10_000  # how long a killed run may take to exit
_EXIT_GRACE = 0.05  # how long a run asked to exit may take before it is killed
_EXIT_REQUEST = _program.EXIT_REQUEST


def _format_exception(limit: int) -> str:
    """The exception being handled, with its traceback (``traceback`` is imported only here)."""
    import traceback

    return traceback.format_exc(limit=limit)


def _send(fd: int, message: dict[str, Any]) -> None:
    payload = json.dumps(message).encode()
    data = memoryview(struct.pack(">I", len(payload)) + payload)
    while data:
        data = data[os.write(fd, data) :]


def _receive(fd: int) -> dict[str, Any] | None:
    """A request: marshalled (the pool is trusted; marshal is the fastest codec here)."""
    header = read_exact(fd, 4)
    if header is None:
        return None
    payload = read_exact(fd, struct.unpack(">I", header)[0])
    if payload is None:
        return None
    program, tests, setup, timeout, entry_point = marshal.loads(payload)
    return {
        "program": program,
        "tests": tests,
        "setup": setup,
        "timeout": timeout,
        "entry_point": entry_point,
    }


class Worker:
    """One warm worker: confinement prepared once, one fresh process per run.

    Args:
        config: the pool's settings (see ``Sandbox.__init__``).
        proto_in: the descriptor requests arrive on.
        proto_out: the descriptor replies go to.
    """

    def __init__(self, config: dict[str, Any], proto_in: int, proto_out: int) -> None:
        self.proto_in = proto_in
        self.proto_out = proto_out
        self.memory_bytes = int(config["memory_mb"]) * 1024 * 1024
        self.file_bytes = int(config["file_size_mb"]) * 1024 * 1024
        self.output_limit = int(config["output_limit"])
        self.max_processes = int(config["max_processes"])
        scratch = str(config["scratch"])
        # A uid of its own per pool and worker: RLIMIT_NPROC counts per uid, so a fork
        # bomb in one pool's run must not starve another pool's runs of processes.
        index = (int(config["pool"]) % (1 << 22)) * 64 + int(config["index"]) % 64

        for name in PRELOADED_MODULES:
            __import__(name)
        if config["pin"]:
            # The worker and its runs take turns (each waits while the other works):
            # on one CPU, each call's hand-over goes to a process on the CPU that just
            # went idle, with warm caches, instead of waking another CPU (measured:
            # 20 us per call instead of 67 on an idle 2-CPU VM).
            allowed = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(0, {allowed[int(config["index"]) % len(allowed)]})

        self.namespaces = (
            _isolation.enter_namespaces() if config["namespaces"] else _isolation.NamespaceState()
        )
        if self.namespaces.pid:
            self._become_pid_namespace_init()
        self.pid = os.getpid()
        mounted = False
        if self.namespaces.mount:
            mounted = _isolation.mount_private_proc_and_tmp(scratch, 4 * self.file_bytes + 2**22)
        if not self.namespaces.pid:
            _isolation.set_child_subreaper()
        os.umask(0o022)

        self.run_dir = os.path.join(scratch, "run")
        os.mkdir(self.run_dir, 0o700)
        self.import_paths = [path for path in sys.path if os.path.isdir(path)]
        self.root_without_uid = False
        self.run_uid: int | None = None
        if os.geteuid() == 0 and not self.namespaces.user:
            if mounted:
                _isolation.expose_to_others(self.import_paths)
            self.run_uid = self._pick_uid(index)
            # Without a usable uid, runs stay uid 0 but lose every capability.
            self.root_without_uid = self.run_uid is None
        if self.run_uid is not None:
            os.chown(self.run_dir, self.run_uid, self.run_uid)
        os.environ.clear()
        os.environ.update(config["environment"])
        os.environ.update(HOME=self.run_dir, TMPDIR=self.run_dir)

        # RLIMIT_NPROC counts the spawner too, hence the + 1.
        if self.root_without_uid:
            self.nproc_limit: int | None = None  # the kernel never limits uid 0's processes
        elif self.run_uid is not None or self.namespaces.user:
            # Only the sandbox's own processes count: a uid (or user namespace) of its own.
            self.nproc_limit = self.max_processes + 1
        else:
            # The limit counts every task of the caller's uid: allow what runs now plus
            # the run's share. Tasks started later only make a run's forks fail sooner.
            self.nproc_limit = _isolation.count_user_tasks(os.getuid()) + self.max_processes + 1

        self.landlock_abi = _landlock.landlock_abi() if config["landlock"] else 0
        self.ruleset_fd: int | None = None
        self.nested_ruleset_fd: int | None = None
        if self.landlock_abi >= 1:
            paths = _landlock.default_read_paths(site_packages=bool(config["site_packages"]))
            paths = _landlock.LandlockPaths(
                read_dirs=paths.read_dirs,
                listable_dirs=paths.listable_dirs,
                read_files=paths.read_files,
                write_files=paths.write_files,
                write_dirs=(self.run_dir,),
            )
            self.ruleset_fd = _landlock.build_landlock_ruleset(self.landlock_abi, paths)
            self.nested_ruleset_fd = _landlock.build_nested_ruleset(self.landlock_abi)

        # Outside a PID namespace and without Landlock's signal scoping, a run could
        # signal the worker and the caller (same uid): a seccomp filter confines its
        # signals to itself and its process group. (The spawner guards itself.)
        # The spawner's seccomp filter (inherited by every run) also refuses sockets and
        # memory outside the address-space limit (_seccomp.DENIED_SYSCALLS).
        self.seccomp = self._probe_signal_filter()
        self.signal_filter = not self.namespaces.pid and self.landlock_abi < 6 and self.seccomp
        # Compiled here once; each run only writes its pid into it.
        self.run_signal_filter = _seccomp.RunSignalFilter() if self.signal_filter else None

        self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        self.stdout_fd = os.memfd_create("sandbox-stdout")
        self.stderr_fd = os.memfd_create("sandbox-stderr")
        # Appending (set again before every run, which can clear it): a run and the
        # processes it forks share these files' offset, and a memfd's writes do not
        # serialize on it; without O_APPEND two concurrent writers land at the same
        # offset and one's output is overwritten.
        self.append_flags = fcntl.fcntl(self.stdout_fd, fcntl.F_GETFL) | os.O_APPEND
        # The run's job, then the judge's calls, go down the job pipe; the run's
        # messages come back up the reply pipe. The worker's ends never block: the
        # judge waits on them with the run's deadline.
        self.job_read, self.job_write = os.pipe()
        self.reply_read, self.reply_write = os.pipe()
        for fd in (self.job_write, self.reply_read):
            with contextlib.suppress(OSError):  # (where the system's maximum is lower)
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _JOB_PIPE_BYTES)
            os.set_blocking(fd, False)
        # Compiled test suites: a suite is typically run many times.
        self.prepared: OrderedDict[
            tuple[str, tuple[str, ...], str | None], tuple[PreparedTests, frozenset[str]]
        ] = OrderedDict()
        # The run's deadline interrupts the judge's own work too (decoding a huge
        # value, a test's loop over what the program returned).
        self.alarm_armed = False
        signal.signal(signal.SIGALRM, self._on_alarm)
        self.protections = {
            "pid_namespace": self.namespaces.pid,
            "network_namespace": self.namespaces.net,
            "mount_namespace": mounted,
            "user_namespace": self.namespaces.user,
            "run_as_uid": self.run_uid,
            "landlock_abi": self.landlock_abi,
            "filesystem_confined": self.ruleset_fd is not None,
            "tcp_blocked": self.namespaces.net or self.landlock_abi >= 4,
            "signals_confined": (
                self.namespaces.pid or self.landlock_abi >= 6 or self.signal_filter
            ),
            "process_limit": self.nproc_limit is not None,
            "syscalls_filtered": self.seccomp,
        }
        self.max_fd = os.sysconf("SC_OPEN_MAX")
        # Objects that exist now are never collected: the runs' garbage collector
        # then leaves their pages alone instead of copying them.
        gc.collect()
        gc.freeze()
        self.children = _isolation.ChildrenListing()
        self.spawner_pid = 0
        self.spawner_death = "the spawner is running"
        self.status_read = -1
        # The run whose exit status the spawner reported but this process has not read.
        self.unread_status: int | None = None
        self._start_spawner()
        # The compiler (with ``ast``) is imported only now: the spawner, and so every
        # run, is forked without it in memory.
        from llm_envs.sandbox import _compile

        self.prepare_tests: Callable[[str, tuple[str, ...]], PreparedTests] = _compile.prepare_tests
        self.compile_program: Callable[[str], CompiledProgram] = _compile.compile_program
        self.compile_limit = _compile.COMPILE_IN_WORKER_LIMIT
        #: Set when a run left a directory this worker could not clean: it answers
        #: that run, then exits, and the pool starts a fresh one.
        self.retiring = False

    def _on_alarm(self, signum: int, frame: types.FrameType | None) -> None:
        if self.alarm_armed:
            self.alarm_armed = False
            raise _judge.RunTimeout

    # --- start-up --------------------------------------------------------------------------

    def _become_pid_namespace_init(self) -> None:
        """Fork the process that is PID 1 of the new namespace; this one only waits for it."""
        child = os.fork()
        if child == 0:
            _isolation.set_parent_death_signal()
            return
        os.close(self.proto_in)
        os.close(self.proto_out)
        os._exit(os.waitstatus_to_exitcode(wait_status(child)) & 0xFF)

    def _pick_uid(self, index: int) -> int | None:
        """An unused uid this (root) worker's runs can switch to and import as, or None."""
        import pwd  # only needed as root

        for uid in (_SANDBOX_UID_BASE + index, _FALLBACK_UID):
            try:
                pwd.getpwuid(uid)
                if uid != _FALLBACK_UID:
                    continue  # a real account: never borrow it
            except KeyError:
                pass
            probe = os.fork()
            if probe == 0:
                try:
                    os.setgroups([])
                    os.setresgid(uid, uid, uid)
                    os.setresuid(uid, uid, uid)
                    for path in self.import_paths:  # runs must be able to import
                        os.listdir(path)
                except OSError:
                    os._exit(1)
                os._exit(0)
            if os.waitstatus_to_exitcode(wait_status(probe)) == 0:
                return uid
        return None

    def _probe_signal_filter(self) -> bool:
        probe = os.fork()
        if probe == 0:
            try:
                _isolation.set_no_new_privs()
                os._exit(0 if _seccomp.install_signal_filter(allow=[os.getpid()]) else 1)
            except BaseException:
                os._exit(1)
        return os.waitstatus_to_exitcode(wait_status(probe)) == 0

    def _start_spawner(self) -> None:
        status_read, status_write = os.pipe()
        spawner = os.fork()
        if spawner == 0:
            try:
                _spawner.spawner_main(self, status_write)
            finally:
                os._exit(1)
        os.close(status_write)
        self.spawner_pid = spawner
        self.status_read = status_read

    def _restart_spawner(self, *, reaped: bool = False) -> None:
        with contextlib.suppress(OSError):
            os.close(self.status_read)
        self.unread_status = None
        if not reaped:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(self.spawner_pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                self.spawner_death = describe_exit(wait_status(self.spawner_pid))
        # Its runs are this process's children now; one waiting for a job would take
        # the next run's job.
        for orphan in self.children.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(orphan, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                wait_status(orphan)
        self._start_spawner()

    def hello(self) -> dict[str, Any]:
        """The first frame: what this worker enforces, and its own memory footprint."""
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[0])
        return {
            "hello": True,
            "protections": self.protections,
            "address_space_mb": pages * os.sysconf("SC_PAGE_SIZE") / 2**20,
        }

    # --- serving ---------------------------------------------------------------------------

    def serve(self) -> None:
        """Answer requests until the pool closes the pipe."""
        while True:
            request = _receive(self.proto_in)
            if request is None:
                return
            try:
                reply = self.run(request)
            except Exception:
                reply = {"internal_error": _format_exception(5)}
            _send(self.proto_out, reply)
            if self.retiring:
                return

    def _prepare(
        self, setup: str, tests: tuple[str, ...], entry_point: str | None
    ) -> tuple[PreparedTests, frozenset[str]]:
        """The compiled setup and tests, and the names they may take from the program (cached)."""
        key = (setup, tests, entry_point)
        prepared = self.prepared.get(key)
        if prepared is None:
            compiled = self.prepare_tests(setup, tests)
            # The names the tests use, except that a program's `len = ...` never
            # reaches them (MBPP/126's entry point is `sum`).
            wanted = frozenset(
                name for name in compiled.names if name not in _BUILTIN_NAMES or name == entry_point
            )
            prepared = self.prepared[key] = (compiled, wanted)
            if len(self.prepared) > _PREPARED_CACHE_SIZE:
                self.prepared.popitem(last=False)
        else:
            self.prepared.move_to_end(key)
        return prepared

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one program in a fresh confined process and judge it against its tests here."""
        tests = tuple(request["tests"])
        try:
            prepared, wanted = self._prepare(request["setup"], tests, request["entry_point"])
        except ValueError as error:
            return {"invalid": str(error)}
        timeout = float(request["timeout"])
        source: str = request["program"]
        program: str | types.CodeType = source
        notes = ""
        if len(source) <= self.compile_limit:
            # Compiled here, not in the run: compiling allocates more than running a
            # typical solution, and every page a run writes costs a fault. Nothing runs.
            compiled = self.compile_program(source)
            if compiled.code is None:
                return self._not_compiled(len(tests), compiled)
            program, notes = compiled.code, compiled.warnings
        recursion_limit = sys.getrecursionlimit()
        data = marshal.dumps(
            (program, notes, tuple(sorted(wanted)), recursion_limit, math.ceil(timeout) + 1)
        )
        job = _spawner.JOB_HEADER.pack(len(data)) + data
        for fd in (self.stdout_fd, self.stderr_fd):
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            fcntl.fcntl(fd, fcntl.F_SETFL, self.append_flags)
        # A run can change the flags of the pipe ends it shares with the next runs
        # (O_NONBLOCK on its job pipe would make the next run's read fail).
        for fd in (self.job_read, self.reply_write):
            fcntl.fcntl(fd, fcntl.F_SETFL, 0)
        self._drain_replies()
        child = self._waiting_run()
        if child is None:
            return {
                "status": "killed",
                "error": "the sandbox could not start a process for this run "
                f"({self.spawner_death})",
                "outcomes": [["not_run", None, None]] * len(tests),
                "stdout": "",
                "stderr": "",
                "output_truncated": False,
                "duration": 0.0,
            }
        pidfd = open_pidfd(child)
        started = time.monotonic()
        # Without a pidfd (kernels before 5.3), the spawner's report says when it exited.
        channel = _judge.Channel(
            self.job_write,
            self.reply_read,
            pidfd if pidfd >= 0 else self.status_read,
            started + timeout,
            lambda: kill_run(child),
        )
        try:
            self.alarm_armed = True
            signal.setitimer(signal.ITIMER_REAL, timeout + 0.05)
            try:
                result = _judge.judge(
                    channel, job, prepared.setup, prepared.tests, wanted, recursion_limit
                )
            finally:
                self.alarm_armed = False
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _judge.RunTimeout:  # (the alarm, between the judge's own steps)
            result = _judge.JudgeResult(
                "timeout", None, [["not_run", None, None]] * len(tests), "in the judge"
            )
        duration = time.monotonic() - started
        if pidfd >= 0:
            # Ask the run to exit (cheaper than a signal); one that does not, at once,
            # is killed. Its exit means its output is complete.
            if not channel.exited and channel.ended is None and not channel.timed_out:
                with contextlib.suppress(OSError):
                    os.write(self.job_write, _EXIT_REQUEST)
                if not select.select([pidfd], [], [], _EXIT_GRACE)[0]:
                    kill_run(child)
            else:
                kill_run(child)
            select.select([pidfd], [], [], _KILL_GRACE_MS / 1000)
            os.close(pidfd)
        self._kill_leftovers(child)
        reply = self._reply(result, child, timeout)
        stdout, stdout_cut = self._read_output(self.stdout_fd)
        stderr, stderr_cut = self._read_output(self.stderr_fd)
        reply.update(
            stdout=stdout,
            stderr=stderr,
            output_truncated=stdout_cut or stderr_cut,
            duration=duration,
        )
        if not clean_directory(self.run_dir):
            # A tree this worker cannot delete would reach the next run: this run gets
            # its report, and a fresh worker (with a fresh directory) takes its place.
            self.retiring = True
            reply["retire"] = True
        return reply

    def _drain_replies(self) -> None:
        """Drop anything left in the reply pipe (a previous run's last words)."""
        while True:
            try:
                if not os.read(self.reply_read, 1 << 16):
                    return
            except BlockingIOError:
                return

    def _reply(self, result: _judge.JudgeResult, child: int, timeout: float) -> dict[str, Any]:
        """The reply for the pool: the judge's verdict, with how a run that ended early did."""
        status, error, outcomes = result.status, result.error, result.outcomes
        stage = result.stage or ""
        if status == "timeout":
            error = f"timed out after {timeout:g} s {stage}"
        elif status == "killed":
            if result.ended is not None and result.ended != _judge.DIED:
                how = result.ended
            else:
                how = describe_exit(self._exit_status(child))
            error = f"{how} ({stage})"
            for outcome in outcomes:
                if outcome[1] == "ProcessDied":
                    outcome[2] = how
        return {"status": status, "error": error, "outcomes": outcomes}

    def _not_compiled(self, total: int, compiled: CompiledProgram) -> dict[str, Any]:
        """The reply for a program that does not compile: nothing was run."""
        stderr = compiled.warnings.encode("utf-8", "backslashreplace")
        return {
            "status": "syntax_error",
            "error": compiled.error,
            "outcomes": [["not_run", None, None]] * total,
            "stdout": "",
            "stderr": stderr[: self.output_limit].decode("utf-8", "replace"),
            "output_truncated": len(stderr) > self.output_limit,
            "duration": 0.0,
        }

    def _waiting_run(self) -> int | None:
        """The pid of the run the spawner forked ahead, waiting for its job (None: no spawner)."""
        for _ in range(2):
            if self.unread_status is not None:
                self._exit_status(self.unread_status)
            reply = read_exact(self.status_read, _spawner.STATUS.size)
            if reply is not None:
                self.unread_status = int(_spawner.STATUS.unpack(reply)[0])
                return self.unread_status
            # The spawner died (a run of a previous job killed it): start a new one.
            self._restart_spawner()
        return None

    def _exit_status(self, child: int) -> int:
        """The wait status of the latest run, from the spawner's report (read once)."""
        if self.unread_status != child:
            return 0  # already read, or lost with a spawner that died
        self.unread_status = None
        reply = read_exact(self.status_read, _spawner.STATUS.size)
        if reply is not None:
            return int(_spawner.STATUS.unpack(reply)[0])
        # The run killed its spawner; the run is now this process's child (it is
        # PID 1 of its namespace, or a subreaper): reap it here.
        self._restart_spawner()
        kill_run(child)
        # The kernel re-parents the run while the spawner exits, just after its pipe closes.
        for _ in range(1000):
            try:
                return wait_status(child)
            except ChildProcessError:
                time.sleep(0.001)
        return 0

    def _kill_leftovers(self, child: int) -> None:
        """Kill and reap every process the run left behind."""
        kill_run(child)
        # Processes that left the process group (setsid, double fork) were re-parented
        # to this worker (PID 1 of its namespace, or a subreaper): kill and reap them.
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == self.spawner_pid:
                self._restart_spawner(reaped=True)  # a run killed it; keep serving
                continue
            if pid:
                continue
            orphans = [pid for pid in self.children.pids() if pid != self.spawner_pid]
            if not orphans:
                return
            for orphan in orphans:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(orphan, signal.SIGKILL)
            for orphan in orphans:
                with contextlib.suppress(ChildProcessError):
                    wait_status(orphan)

    def _read_output(self, fd: int) -> tuple[str, bool]:
        size = os.fstat(fd).st_size
        data = os.pread(fd, min(size, self.output_limit), 0)
        return data.decode("utf-8", "replace"), size > self.output_limit


def main(config_json: str) -> None:
    """Run a worker on stdin/stdout until the pool closes the pipe."""
    # Move the protocol pipes out of the way: nothing the worker prints by
    # mistake can corrupt a frame, and no run inherits them.
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    for fd in (proto_in, proto_out):
        os.set_inheritable(fd, False)
    # As PID 1 of a namespace the worker would receive a run's SIGINT (Python
    # installs a handler for it); no other signal reaches an init without a handler.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        worker = Worker(json.loads(config_json), proto_in, proto_out)
    except BaseException:
        _send(proto_out, {"startup_error": _format_exception(8)})
        raise SystemExit(1) from None
    _send(proto_out, worker.hello())
    worker.serve()
