"""The sandbox worker: a warm interpreter that judges each program run in a fresh confined process.

The pool (:mod:`llm_envs.sandbox.pool`) starts each worker as
``python -P -s -S -c <bootstrap>``, so the worker imports only the standard
library and this package's sandbox modules (never ``llm_envs/__init__``).
Three kinds of process take part:

* The **worker** talks to the pool over its stdin/stdout (frames: a 4-byte
  big-endian length, then the payload: requests are marshalled, since the pool
  is trusted and marshal is fastest; replies are JSON, so the pool never
  unmarshals anything a worker wrote). At start it joins its control groups
  where the pool made them (:mod:`llm_envs.sandbox._cgroups`: one CPU for it and
  its runs), enters new namespaces where
  the system allows (as PID 1 of its PID namespace), pre-imports the standard
  modules that benchmark tests use, and prepares the confinement. Per request it
  compiles the tests (cached) and the program, hands the program to a waiting
  run, and judges it: the setup and the tests run here
  (:mod:`llm_envs.sandbox._judge`), calling the program's functions in the run.
  Then it kills whatever the run left and empties the run's directory. It never
  forks per run, so its memory is never write-protected. Its start-up steps are
  in :mod:`llm_envs.sandbox._startup`; its hold on the spawner and on the runs'
  processes (starting, ending, killing and reaping them) in
  :mod:`llm_envs.sandbox._runs`.
* The **spawner**, forked once from the worker, applies every inherited part of
  the confinement once: resource limits, the unprivileged uid, ``no_new_privs``,
  the Landlock ruleset, the descriptor layout, the working directory, and a
  seccomp filter (no signals to it, no sockets, no memory outside the
  address-space limit, no scheduling changes; it is non-dumpable, so runs cannot
  ptrace it either), then joins the run group (memory and processes for each
  run's whole tree). Its loop only forks: each run is forked ahead of its job and
  waits for it, so the fork is off the critical path.
* Each **run** is a child of the spawner. It reads its job from the job pipe,
  sets its CPU limit, and hands over to :func:`llm_envs.sandbox._program.serve`,
  which executes the program and then answers the judge's calls.

This module must never run untrusted code in the worker or the spawner, never
read anything a run wrote except through the judge's strict decoder, and never
write anything to stdout except reply frames.
"""

from __future__ import annotations

import builtins
import fcntl
import gc
import json
import marshal
import math
import os
import resource
import signal
import struct
import sys
import time
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llm_envs.sandbox import (
    _cgroups,
    _isolation,
    _judge,
    _landlock,
    _runs,
    _seccomp,
    _spawner,
    _startup,
)
from llm_envs.sandbox._processes import (
    clean_directory,
    describe_exit,
    kill_run,
    open_pidfd,
    read_exact,
)
from llm_envs.sandbox._startup import PRELOADED_MODULES
from llm_envs.sandbox.phases import PHASES

if TYPE_CHECKING:
    from llm_envs.sandbox._compile import CompiledProgram, PreparedTests

__all__ = ["PRELOADED_MODULES", "main"]

_BUILTIN_NAMES = frozenset(dir(builtins))
_PREPARED_CACHE_SIZE = 2048
_JUDGE_MEMORY_MARGIN = 256 * 1024 * 1024


def _format_exception(limit: int) -> str:
    """The exception being handled, with its traceback (``traceback`` is imported only here)."""
    import traceback

    return traceback.format_exc(limit=limit)


def _send(fd: int, message: dict[str, Any]) -> None:
    # Whatever text a program produced (its exception's name and message, its
    # output), the reply is valid UTF-8: a lone surrogate, which no UTF-8 text can
    # hold, becomes "?" here, once, so no caller ever meets one.
    payload = json.dumps(message, ensure_ascii=False).encode("utf-8", "replace")
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
    program, tests, setup, timeout, entry_point, helper = marshal.loads(payload)
    return {
        "program": program,
        "tests": tests,
        "setup": setup,
        "timeout": timeout,
        "entry_point": entry_point,
        "helper": helper,
    }


def _job(
    program: str | types.CodeType,
    notes: str,
    wanted: frozenset[str],
    recursion_limit: int,
    timeout: float,
    outside: tuple[str, ...] = (),
) -> bytes:
    """A run's job, as the run reads it from the job pipe (its CPU limit: the timeout + 1 s).

    ``outside``: the names bound, before the program runs, to functions of another
    run (a helper's), called through the judge.
    """
    data = marshal.dumps(
        (program, notes, tuple(sorted(wanted)), recursion_limit, math.ceil(timeout) + 1, outside)
    )
    return _spawner.JOB_HEADER.pack(len(data)) + data


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
        # First: the worker's own groups (its CPU, from now on), and the run groups'
        # files, opened while nothing confines this process yet.
        spec = config.get("cgroups")
        self.groups = (
            _cgroups.RunGroups(spec, self.memory_bytes, self.max_processes) if spec else None
        )
        self.groups_missing = str(config.get("cgroups_missing", ""))

        _startup.preload_modules()
        if config["pin"]:
            _startup.pin_to_cpu(int(config["index"]))
        mounted = self._enter_namespaces(bool(config["namespaces"]), scratch)
        self._choose_run_user(scratch, index, mounted)
        os.environ.clear()
        os.environ.update(config["environment"])
        os.environ.update(HOME=self.run_dir, TMPDIR=self.run_dir)
        self.nproc_limit = _startup.process_limit(
            self.max_processes,
            root_without_uid=self.root_without_uid,
            own_uid=self.run_uid is not None,
            user_namespace=self.namespaces.user,
        )
        self._prepare_landlock(bool(config["landlock"]), bool(config["site_packages"]))
        self._prepare_signal_filter(bool(config.get("seccomp", True)))
        self._open_run_channels()
        # Compiled test suites: a suite is typically run many times.
        self.prepared: OrderedDict[
            tuple[str, tuple[str, ...], str | None], tuple[PreparedTests, frozenset[str]]
        ] = OrderedDict()
        # The run's deadline interrupts the judge's own work too (decoding a huge
        # value, a test's loop over what the program returned).
        self.alarm_armed = False
        signal.signal(signal.SIGALRM, self._on_alarm)
        # Only where the worker's /proc shows its runs' pids does it adjust them.
        self.procfs_of_runs = mounted or not self.namespaces.pid
        self.protections = self._protections(mounted)
        if self.groups is not None:
            self.groups.size(1)
        self.max_fd = os.sysconf("SC_OPEN_MAX")
        # Objects that exist now are never collected: the runs' garbage collector
        # then leaves their pages alone instead of copying them.
        gc.collect()
        gc.freeze()
        # The spawner, and every run, starts with a copy of this process's page
        # tables: memory freed so far (the start-up's, the compiler's where the
        # sources have no bytecode cache) goes back to the system first.
        _isolation.LIBC.malloc_trim(0)
        self.runs = _runs.Runs(self)
        self.runs.start_spawner()
        # The compiler (with ``ast``) is imported only now: the spawner, and so every
        # run, is forked without it in memory.
        from llm_envs.sandbox import _compile

        self.prepare_tests: Callable[[str, tuple[str, ...]], PreparedTests] = _compile.prepare_tests
        self.compile_program: Callable[[str], CompiledProgram] = _compile.compile_program
        self.helper_names = _compile.helper_names
        self.compile_limit = _compile.COMPILE_IN_WORKER_LIMIT
        #: Set when a run left a directory this worker could not clean: it answers
        #: that run, then exits, and the pool starts a fresh one.
        self.retiring = False
        #: When each phase of the current run began (:data:`~llm_envs.sandbox.phases.PHASES`).
        self.stamps: list[float] = []
        self.memory_limit = self._limit_own_memory()

    def _limit_own_memory(self) -> int:
        """Bound this process's address space: what it has, plus what one run may make it hold.

        The judge holds what a run's calls return, and the tests may expand it (a
        ``list()`` of a long range); a run may use ``memory_mb``, and the judge as
        much again, plus a fixed margin for the compiled tests. Past it, the test
        that asked fails with ``MemoryError``; the worker goes on.
        """
        with open("/proc/self/statm") as statm:
            own = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = own + self.memory_bytes + _JUDGE_MEMORY_MARGIN
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        return limit

    def _on_alarm(self, signum: int, frame: types.FrameType | None) -> None:
        if self.alarm_armed:
            self.alarm_armed = False
            raise _judge.RunTimeout

    # --- start-up --------------------------------------------------------------------------

    def _enter_namespaces(self, namespaces: bool, scratch: str) -> bool:
        """Enter new namespaces where allowed; whether the private mounts were made."""
        self.namespaces = (
            _isolation.enter_namespaces() if namespaces else _isolation.NamespaceState()
        )
        if self.namespaces.pid:
            _startup.become_pid_namespace_init(self.proto_in, self.proto_out)
        self.pid = os.getpid()
        mounted = False
        if self.namespaces.mount:
            mounted = _isolation.mount_private_proc_and_tmp(scratch, 4 * self.file_bytes + 2**22)
        if not self.namespaces.pid:
            _isolation.set_child_subreaper()
        os.umask(0o022)
        return mounted

    def _choose_run_user(self, scratch: str, index: int, mounted: bool) -> None:
        """Make the runs' directory, and pick the uid runs switch to (as root)."""
        self.run_dir = os.path.join(scratch, "run")
        os.mkdir(self.run_dir, 0o700)
        self.import_paths = [path for path in sys.path if os.path.isdir(path)]
        self.root_without_uid = False
        self.run_uid: int | None = None
        if os.geteuid() == 0 and not self.namespaces.user:
            if mounted:
                _isolation.expose_to_others(self.import_paths)
            self.run_uid = _startup.pick_uid(index, self.import_paths)
            # Without a usable uid, runs stay uid 0 but lose every capability.
            self.root_without_uid = self.run_uid is None
        if self.run_uid is not None:
            os.chown(self.run_dir, self.run_uid, self.run_uid)

    def _prepare_landlock(self, landlock: bool, site_packages: bool) -> None:
        """Build the runs' Landlock rulesets, where the kernel has Landlock."""
        self.landlock_abi = _landlock.landlock_abi() if landlock else 0
        self.ruleset_fd: int | None = None
        self.nested_ruleset_fd: int | None = None
        if self.landlock_abi >= 1:
            self.ruleset_fd, self.nested_ruleset_fd = _startup.build_rulesets(
                self.landlock_abi, self.run_dir, site_packages=site_packages
            )

    def _prepare_signal_filter(self, seccomp: bool) -> None:
        """Probe seccomp; compile the runs' signal filter where nothing else confines signals."""
        # Outside a PID namespace and without Landlock's signal scoping, a run could
        # signal the worker and the caller (same uid): a seccomp filter confines its
        # signals to itself and its process group. (The spawner guards itself.)
        # The spawner's seccomp filter (inherited by every run) also refuses sockets and
        # memory outside the address-space limit (_seccomp.DENIED_SYSCALLS).
        self.seccomp = seccomp and _startup.probe_signal_filter()
        self.signal_filter = not self.namespaces.pid and self.landlock_abi < 6 and self.seccomp
        # Compiled here once; each run only writes its pid into it.
        self.run_signal_filter = _seccomp.RunSignalFilter() if self.signal_filter else None

    def _open_run_channels(self) -> None:
        """The runs' stdin, stdout and stderr files (each run's pipes come with its go)."""
        self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        self.stdout_fd = os.memfd_create("sandbox-stdout")
        self.stderr_fd = os.memfd_create("sandbox-stderr")
        # Appending (set again before every run, which can clear it): a run and the
        # processes it forks share these files' offset, and a memfd's writes do not
        # serialize on it; without O_APPEND two concurrent writers land at the same
        # offset and one's output is overwritten.
        self.append_flags = fcntl.fcntl(self.stdout_fd, fcntl.F_GETFL) | os.O_APPEND

    def _protections(self, mounted: bool) -> dict[str, Any]:
        """What this worker enforces (``Sandbox.protections``)."""
        return {
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
            "syscalls_filtered": self.seccomp,
            "runs_contained": self.namespaces.pid,
            **self._tree_protections(),
        }

    def _tree_protections(self) -> dict[str, Any]:
        """What the control groups enforce: nothing where a run could leave its groups.

        A run can move itself to another group only by writing a group file: that
        needs the groups' owner's uid (root's, or the caller's) and a filesystem
        Landlock does not confine.
        """
        process_limit = self.nproc_limit is not None
        scheduling = {"scheduling_fixed": self.seccomp}
        if self.groups is None:
            missing = self.groups_missing or "control groups are turned off (control_groups=False)"
            return {**scheduling, "process_limit": process_limit, "control_groups_missing": missing}
        if self.run_uid is None and self.ruleset_fd is None:
            return {
                **scheduling,
                "process_limit": process_limit,
                "control_groups_missing": "runs keep the groups' owner's uid and no Landlock "
                "confines their writes: they could leave their groups",
            }
        return {
            **scheduling,
            "control_groups": self.groups.version,
            "tree_memory_limit": True,
            "tree_process_limit": True,
            "cpu_limit": True,
            "process_limit": True,
        }

    def _worker_memory(self) -> dict[str, Any]:
        return {"worker_memory_mb": self.memory_limit // 2**20}

    def hello(self) -> dict[str, Any]:
        """The first frame: what this worker enforces, and its own memory footprint."""
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[0])
        return {
            "hello": True,
            "protections": {**self.protections, **self._worker_memory()},
            "address_space_mb": pages * os.sysconf("SC_PAGE_SIZE") / 2**20,
        }

    # --- serving ---------------------------------------------------------------------------

    def serve(self) -> None:
        """Answer requests until the pool closes the pipe."""
        while True:
            request = _receive(self.proto_in)
            if request is None:
                return
            self.stamps = [time.monotonic()]
            try:
                reply = self.run(request)
            except Exception:
                reply = {"internal_error": _format_exception(5)}
            if len(self.stamps) == len(PHASES):
                self.stamps.append(time.monotonic())
                reply["phases"] = [
                    int((end - start) * 1e6)
                    for start, end in zip(self.stamps, self.stamps[1:], strict=False)
                ]
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
            # reaches them (MBPP/126's entry point is `sum`), and the judge's own
            # names never do (a program is not even told about them).
            wanted = frozenset(
                name
                for name in compiled.names
                if (name not in _BUILTIN_NAMES or name == entry_point)
                and name not in _judge.JUDGE_NAMES
            )
            prepared = self.prepared[key] = (compiled, wanted)
            if len(self.prepared) > _PREPARED_CACHE_SIZE:
                self.prepared.popitem(last=False)
        else:
            self.prepared.move_to_end(key)
        return prepared

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one program in a fresh confined process and judge it against its tests here.

        With a ``helper`` program, the helper runs in a second process, and the
        program's calls of the helper's functions go through the judge, which
        counts them (the reply's ``helper_calls``).
        """
        tests = tuple(request["tests"])
        try:
            prepared, wanted = self._prepare(request["setup"], tests, request["entry_point"])
        except ValueError as error:
            return {"invalid": str(error)}
        timeout = float(request["timeout"])
        program = self._compiled(request["program"])
        if isinstance(program, dict):
            return self._not_compiled(len(tests), program)
        helper_source: str | None = request["helper"]
        helper = None if helper_source is None else self._compiled(helper_source, "the helper: ")
        if isinstance(helper, dict):
            return self._not_compiled(len(tests), helper)
        recursion_limit = sys.getrecursionlimit()
        job = _job(program[0], program[1], wanted, recursion_limit, timeout)
        self._reset_output()
        count = 1 if helper is None else 2
        if self.groups is not None:
            try:
                self.groups.size(count)
            except OSError:
                # (A limit the kernel would not lower: this job runs under the last
                # job's, and a fresh worker with fresh groups takes over after it.)
                self.retiring = True
        self.stamps.append(time.monotonic())
        children = self.runs.waiting_runs(count)
        if children is None:
            return self._not_started(len(tests))
        pidfds = [open_pidfd(child) for child in children]
        started = time.monotonic()
        self.stamps.append(started)
        channels = [
            self._channel(child, pidfd, pipes, started + timeout)
            for child, pidfd, pipes in zip(children, pidfds, self.runs.pipes, strict=True)
        ]
        channel = channels[-1]  # the program's run (a helper's comes first)
        helper_run = None
        if helper is not None:
            helper_code, helper_notes = helper
            helper_names = self.helper_names(helper_code, _BUILTIN_NAMES, self.compile_limit)
            helper_run = _judge.HelperRun(
                channels[0],
                _job(helper_code, helper_notes, helper_names, recursion_limit, timeout),
                helper_names,
                lambda outside: _job(
                    program[0], program[1], wanted, recursion_limit, timeout, outside
                ),
            )
        asked = [False] * len(children)
        try:
            result = self._verdict(
                channel, job, prepared, wanted, recursion_limit, len(tests), helper_run
            )
            asked = [not c.exited and c.ended is None and not c.timed_out for c in channels]
        finally:
            judged = time.monotonic()
            duration = judged - started
            self.stamps += [channel.loaded_at or judged, judged]
            for child, pidfd, ask, each in zip(children, pidfds, asked, channels, strict=True):
                if pidfd >= 0:
                    self.runs.end(child, pidfd, ask=ask, job_write=each.job_fd)
            self.stamps.append(time.monotonic())
            if not self.runs.kill_leftovers(children):
                # Something of the run outlived the cleanup: this worker (and with it
                # its namespace, where it has one) goes; the pool starts a fresh one.
                self.retiring = True
            out_of_memory = self.groups is not None and self.groups.out_of_memory()
            self.runs.release()
            self.stamps.append(time.monotonic())
        reply = self._reply(result, children[-1], timeout)
        if out_of_memory:
            self._out_of_memory(reply, result)
        if helper is not None:
            reply["helper_calls"] = channels[0].calls
        return self._finish(reply, duration)

    def _out_of_memory(self, reply: dict[str, Any], result: _judge.JudgeResult) -> None:
        """Make ``reply`` say that the run's tree ran out of memory (the kernel killed one).

        Whatever the judge saw (the run died, a test then failed, or nothing at all
        when it was a child that died), the run exceeded its memory: it is killed.
        A timeout stays a timeout, and says it.
        """
        assert self.groups is not None
        reason = self.groups.reason()
        stage = result.stage or ("after its tests" if result.status == "ok" else "before its tests")
        if reply["status"] == "timeout":
            reply["error"] += f"; {reason}"
            return
        reply["status"] = "killed"
        reply["error"] = f"{reason} ({stage})"
        for outcome in reply["outcomes"]:
            if outcome[1] == "ProcessDied":
                outcome[2] = reason

    def _compiled(
        self, source: str, prefix: str = ""
    ) -> tuple[str | types.CodeType, str] | dict[str, Any]:
        """A program as its run takes it: ``(code or source, notes)``, or why it does not compile.

        Compiled here, not in the run: compiling allocates more than running a
        typical solution, and every page a run writes costs a fault. Nothing runs.
        A program too long to compile here is compiled by its run, under its limits
        and deadline; so is one with a ``finally``, whose body CPython compiles once
        per way out of its ``try`` (a ``finally`` nested in a ``finally`` doubles
        the work at each level: 1 KB of source can take seconds and a gigabyte).
        """
        if len(source) > self.compile_limit or "finally" in source:
            return source, ""
        compiled = self.compile_program(source)
        if compiled.code is None:
            return {"error": prefix + (compiled.error or ""), "warnings": compiled.warnings}
        return compiled.code, compiled.warnings

    def _verdict(
        self,
        channel: _judge.Channel,
        job: bytes,
        prepared: PreparedTests,
        wanted: frozenset[str],
        recursion_limit: int,
        total: int,
        helper: _judge.HelperRun | None = None,
    ) -> _judge.JudgeResult:
        """The judge's verdict on one run, under the run's deadline."""
        # The judge is called from here, never from a helper: the setup and the tests
        # run in its frames, and must meet the recursion limit as deep as ever.
        try:
            self.alarm_armed = True
            signal.setitimer(signal.ITIMER_REAL, max(channel.deadline - time.monotonic(), 0) + 0.05)
            try:
                return _judge.judge(
                    channel, job, prepared.setup, prepared.tests, wanted, recursion_limit, helper
                )
            finally:
                self.alarm_armed = False
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _judge.RunTimeout:  # (the alarm, between the judge's own steps)
            return _judge.JudgeResult(
                "timeout", None, [["not_run", None, None]] * total, "in the judge"
            )

    def _channel(
        self, child: int, pidfd: int, pipes: tuple[int, int], deadline: float
    ) -> _judge.Channel:
        """The judge's channel to the run ``child`` (a pidfd of it, or -1), until ``deadline``."""
        # Without a pidfd (kernels before 5.3), the spawner's report says when it exited.
        watch = None
        if self.groups is not None:
            watch = (self.groups.oom_fd, self.groups.oom_events, self.groups.check)
        return _judge.Channel(
            pipes[0],
            pipes[1],
            pidfd if pidfd >= 0 else self.runs.status_read,
            deadline,
            lambda: kill_run(child),
            watch,
        )

    def _reset_output(self) -> None:
        """Empty the run's output files; undo the flags and locks a previous run may have set.

        The three files are shared with every run (one open file each), so what a run
        sets on them (O_NONBLOCK, O_ASYNC, an flock) would otherwise meet the next run.
        """
        for fd in (self.stdout_fd, self.stderr_fd):
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            fcntl.fcntl(fd, fcntl.F_SETFL, self.append_flags)
        fcntl.fcntl(self.devnull, fcntl.F_SETFL, 0)
        for fd in (self.devnull, self.stdout_fd, self.stderr_fd):
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _finish(self, reply: dict[str, Any], duration: float) -> dict[str, Any]:
        """``reply`` with the run's output and duration; then the run's directory is emptied."""
        stdout, stdout_cut = self._read_output(self.stdout_fd)
        stderr, stderr_cut = self._read_output(self.stderr_fd)
        reply.update(
            stdout=stdout,
            stderr=stderr,
            output_truncated=stdout_cut or stderr_cut,
            duration=duration,
        )
        if self.retiring:
            reply["retire"] = True
        if not clean_directory(self.run_dir):
            # A tree this worker cannot delete would reach the next run: this run gets
            # its report, and a fresh worker (with a fresh directory) takes its place.
            self.retiring = True
            reply["retire"] = True
        return reply

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
                how = describe_exit(self.runs.exit_status(child))
            error = f"{how} ({stage})"
            for outcome in outcomes:
                if outcome[1] == "ProcessDied":
                    outcome[2] = how
        return {"status": status, "error": error, "outcomes": outcomes}

    def _not_compiled(self, total: int, compiled: dict[str, Any]) -> dict[str, Any]:
        """The reply for a program that does not compile: nothing was run."""
        stderr = compiled["warnings"].encode("utf-8", "backslashreplace")
        return {
            "status": "syntax_error",
            "error": compiled["error"],
            "outcomes": [["not_run", None, None]] * total,
            "stdout": "",
            "stderr": stderr[: self.output_limit].decode("utf-8", "replace"),
            "output_truncated": len(stderr) > self.output_limit,
            "duration": 0.0,
        }

    def _not_started(self, total: int) -> dict[str, Any]:
        """The reply when no spawner could fork a run: nothing was run."""
        return {
            "status": "killed",
            "error": "the sandbox could not start a process for this run "
            f"({self.runs.spawner_death})",
            "outcomes": [["not_run", None, None]] * total,
            "stdout": "",
            "stderr": "",
            "output_truncated": False,
            "duration": 0.0,
        }

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
