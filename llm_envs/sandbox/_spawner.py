"""The spawner and the start of each run: the processes forked from the worker.

The **spawner**, forked once from the worker, applies every inherited part of
the confinement once (resource limits, the unprivileged uid, ``no_new_privs``,
Landlock, the descriptor layout, the working directory, the seccomp filter),
joins the run group (:mod:`._cgroups`), where every run is then born, and then
only forks: each run is forked ahead of its job and waits for it. Each
**run** reads its job, finishes its own confinement and hands over to
:func:`llm_envs.sandbox._program.serve`.

Everything here runs after a fork from the worker, reading the
:class:`~llm_envs.sandbox._worker.Worker`'s settings; nothing here runs in the
worker itself.
"""

from __future__ import annotations

import fcntl
import gc
import marshal
import os
import random
import resource
import signal
import socket
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from llm_envs.sandbox import _isolation, _landlock, _program, _seccomp
from llm_envs.sandbox._processes import fork_when_possible, read_exact, wait_status

if TYPE_CHECKING:
    from llm_envs.sandbox._worker import Worker

__all__ = ["GO_FD", "JOB_FD", "JOB_HEADER", "OWN_MODULES", "STATUS", "STATUS_FD", "spawner_main"]

# The spawner's (and so every run's) descriptors. 0-2 are stdin (/dev/null) and
# the run's stdout and stderr files; REPLY_FD (3) the reply pipe's write end.
JOB_FD = _program.JOB_FD  # the job pipe's read end: the run's job, then the judge's calls
STATUS_FD = 5  # spawner -> worker: a waiting run's pid, then its wait status, and so on
GO_FD = 6  # worker -> spawner: the go for each run, with the run's ends of its two pipes
_NESTED_RULESET_FD = 7
# The run groups' cgroup.procs (see _cgroups.RunGroups.join): the spawner joins, then closes them.
_JOIN_FDS = (8, 9)
_FIRST_FREE_FD = 10
# The sandbox's own modules: hidden from the programs (they have no use for them).
OWN_MODULES = (
    "__main__",
    "llm_envs",
    "llm_envs.sandbox",
    "llm_envs.sandbox._worker",
    "llm_envs.sandbox._startup",
    "llm_envs.sandbox._runs",
    "llm_envs.sandbox._program",
    "llm_envs.sandbox._judge",
    "llm_envs.sandbox._channel",
    "llm_envs.sandbox._wire",
    "llm_envs.sandbox._match",
    "llm_envs.sandbox._isolation",
    "llm_envs.sandbox._landlock",
    "llm_envs.sandbox._seccomp",
    "llm_envs.sandbox._spawner",
    "llm_envs.sandbox._processes",
    "llm_envs.sandbox._compile",
    "llm_envs.sandbox._cgroups",
    "llm_envs.sandbox.phases",
)
_OPEN_FILES = 256
#: What the spawner reports to the worker: a waiting run's pid, then its wait status.
STATUS = struct.Struct("<i")
#: The header of a run's job: the size of what follows.
JOB_HEADER = struct.Struct("<I")


def spawner_main(worker: Worker, status_write: int, go_read: int) -> NoReturn:
    """The spawner: confine once, then fork runs, one at a time, until the worker goes."""
    _isolation.set_parent_death_signal()
    if os.getppid() != worker.pid:
        os._exit(1)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    spawner = os.getpid()
    nested, joins = _confine(worker, status_write, go_read, spawner)

    _program.prepare_process(OWN_MODULES)
    # Specialize the run's code here, once, rather than in every run; then make
    # what it left permanent for the collector.
    _program.warm_up()
    gc.collect()
    gc.freeze()
    # Every run starts from this state (runs fork without at-fork handlers, which
    # would reseed): runs are reproducible, on whichever worker they land.
    random.seed(0)
    # Only now, with its own setup done (charged to the worker's memory), does the
    # spawner join the run group, where every run will be born.
    for fd in joins:
        os.write(fd, b"0")
        os.close(fd)

    # The loop: as few Python operations as possible, since every page this
    # process writes after a fork costs a copy-on-write fault. Each run is forked
    # ahead of its job and waits for it: the fork is off the critical path, and a
    # job wakes its run directly.
    #
    # Each run is forked only on the worker's go, which comes once the worker is
    # done with the last run and carries the new run's ends of two fresh pipes
    # (its job and the judge's calls; its messages back): nothing written for one
    # run, and nothing that held one run's pipes, can reach the next.
    fork = _isolation.fork_without_handlers
    dup2, close, write, pack = os.dup2, os.close, os.write, STATUS.pack
    receive = socket.recv_fds
    go = socket.socket(fileno=GO_FD)
    # Where the seccomp filter is installed (not nested), no run can make a child
    # of this process (clone(CLONE_PARENT) is refused): nothing to look for.
    strays = _isolation.ChildrenListing() if nested else None
    run_main = _make_run_main(worker, spawner, nested, strays.fd if strays else -1)
    # Without the seccomp filter, a run may change this process's limits and
    # scheduling (same uid): checked after every run.
    unchanged = None if worker.seccomp else _own_settings()
    while True:
        runs: list[int] = []
        more = True
        while more:  # one run, or a pair (b"2": the second run's go follows)
            try:
                message, fds, _, _ = receive(go, 1, 2)
            except OSError:
                os._exit(0)
            if not message or len(fds) != 2:
                os._exit(0)  # the worker is gone
            more = message == b"2" and not runs
            # (The received descriptors are above the fixed ones: 3 and 4 are held open.)
            dup2(fds[0], JOB_FD)
            dup2(fds[1], _program.REPLY_FD)
            close(fds[0])
            close(fds[1])
            try:
                run = fork()
            except BlockingIOError:
                # EAGAIN: the last run's processes still count against RLIMIT_NPROC
                # while the worker reaps them (a fork bomb's): wait, then fork.
                run = fork_when_possible(fork)
            if run == 0:
                run_main()
            dup2(0, JOB_FD)  # (/dev/null: only the run holds its pipes)
            dup2(0, _program.REPLY_FD)
            write(STATUS_FD, pack(run))
            runs.append(run)
        statuses = [wait_status(run) for run in runs]
        if strays is not None:
            _kill_strays(strays)
        for status in statuses:
            write(STATUS_FD, pack(status))
        if unchanged is not None and unchanged != _own_settings():
            # A run lowered this process's limits or priority (no seccomp filter
            # refused it): every later run would inherit them. The worker forks a
            # fresh spawner.
            os._exit(0)


_LIMITS = tuple(getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_"))


def _own_settings() -> tuple[object, ...]:
    """This process's resource limits, niceness and CPUs: what every run inherits."""
    return (
        tuple(resource.getrlimit(limit) for limit in _LIMITS),
        os.getpriority(os.PRIO_PROCESS, 0),
        os.sched_getaffinity(0),
    )


def _kill_strays(children: _isolation.ChildrenListing) -> None:
    """Kill and reap every child of this process: the run is reaped, so any is a stray.

    Only where no seccomp filter refuses ``clone(CLONE_PARENT)`` can a run make
    a process whose parent is the spawner; this is the check for those machines.
    """
    while True:
        pids = children.pids()
        if not pids:
            return
        for pid in pids:
            try:  # noqa: SIM105
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in pids:
            try:  # noqa: SIM105
                wait_status(pid)
            except ChildProcessError:
                pass


def _confine(
    worker: Worker, status_write: int, go_read: int, spawner: int
) -> tuple[bool, list[int]]:
    """Apply every inherited part of the runs' confinement to this process, the spawner.

    Returns:
        Whether each run must enter the nested Landlock domain (no seccomp filter
        could guard the spawner's signals), and the descriptors through which the
        spawner joins the run groups (opened by the worker: the spawner, once
        confined, could not open them).
    """
    layout = [
        (worker.devnull, 0),
        (worker.stdout_fd, 1),
        (worker.stderr_fd, 2),
        (worker.devnull, _program.REPLY_FD),  # (each run's pipes come with its go)
        (worker.devnull, JOB_FD),
        (status_write, STATUS_FD),
        (go_read, GO_FD),
    ]
    if worker.nested_ruleset_fd is not None:
        layout.append((worker.nested_ruleset_fd, _NESTED_RULESET_FD))
    joins = list(_JOIN_FDS[: len(worker.groups.join_fds)]) if worker.groups else []
    if worker.groups:
        layout += list(zip(worker.groups.join_fds, joins, strict=True))
    ruleset_fd = worker.ruleset_fd
    if ruleset_fd is not None:
        layout.append((ruleset_fd, _FIRST_FREE_FD))
    # Copy every source above the target range first, so no dup2 clobbers one.
    moved = [(fcntl.fcntl(source, fcntl.F_DUPFD, 100), target) for source, target in layout]
    for source, target in moved:
        os.dup2(source, target)
    os.closerange(_JOIN_FDS[0] + len(joins), _FIRST_FREE_FD)  # (the join slots unused)
    if ruleset_fd is not None:
        ruleset_fd = _FIRST_FREE_FD
        os.closerange(_FIRST_FREE_FD + 1, worker.max_fd)
    else:
        os.closerange(_FIRST_FREE_FD, worker.max_fd)
    os.chdir(worker.run_dir)
    _isolation.set_limits(
        memory_bytes=worker.memory_bytes,
        cpu_seconds=resource.RLIM_INFINITY,  # each run sets its own
        file_bytes=worker.file_bytes,
        processes=worker.nproc_limit,
        open_files=_OPEN_FILES,
    )
    if worker.run_uid is not None:
        os.setgroups([])
        os.setresgid(worker.run_uid, worker.run_uid, worker.run_uid)
        os.setresuid(worker.run_uid, worker.run_uid, worker.run_uid)
    elif worker.namespaces.user or worker.root_without_uid:
        _isolation.drop_capabilities()
    # Runs (same uid) must not open this process's descriptors through /proc.
    _isolation.set_not_dumpable()
    _isolation.set_no_new_privs()
    if ruleset_fd is not None:
        _landlock.restrict_self(ruleset_fd)
        os.close(ruleset_fd)
    # Runs share this process's uid (and Landlock domain): they must not be able
    # to signal it. Where seccomp is missing, each run enters a nested Landlock
    # domain instead (which also scopes signals from ABI 6 on).
    guard = [spawner, -1]
    if os.getpgid(0) > 0 and not worker.namespaces.pid:
        guard.append(-os.getpgid(0))
    return not (worker.seccomp and _seccomp.install_signal_filter(deny=guard)), joins


def _make_run_main(
    worker: Worker, spawner: int, nested: bool, listing_fd: int
) -> Callable[[], NoReturn]:
    """The function a run's process calls: wait for the job, finish the confinement, run it.

    Everything it needs is looked up here, once, in the spawner: each lookup a
    run made itself would be work, and pages written, in every run.
    """
    setpgid, close, getpid, getppid, exit_ = (
        os.setpgid,
        os.close,
        os.getpid,
        os.getppid,
        os._exit,
    )
    loads, setrlimit, cpu_limit = marshal.loads, resource.setrlimit, resource.RLIMIT_CPU
    serve, unpack_header, header_size = _program.serve, JOB_HEADER.unpack, JOB_HEADER.size
    dies_with_spawner = not worker.namespaces.pid
    set_death_signal = _isolation.set_parent_death_signal
    has_nested_ruleset = worker.nested_ruleset_fd is not None
    enter_nested = nested and has_nested_ruleset
    restrict_self = _landlock.restrict_self
    signal_filter = worker.run_signal_filter

    def run_main() -> NoReturn:
        try:
            setpgid(0, 0)
            if dies_with_spawner:
                # Dies with its spawner. (In a PID namespace the kernel kills every
                # run with the worker, and the worker kills runs a dead spawner left.)
                set_death_signal()
                if getppid() != spawner:
                    exit_(71)  # the spawner died between fork and prctl
            close(STATUS_FD)
            close(GO_FD)  # (a run that took the worker's go would stop the spawner)
            if listing_fd >= 0:
                close(listing_fd)
            header = read_exact(JOB_FD, header_size)
            data = read_exact(JOB_FD, unpack_header(header)[0]) if header else None
            if data is None:
                exit_(73)  # the worker is gone
            program, notes, names, recursion_limit, cpu_seconds, outside = loads(data)
            setrlimit(cpu_limit, (cpu_seconds, cpu_seconds))
            if enter_nested:
                restrict_self(_NESTED_RULESET_FD)
            if signal_filter is not None:
                signal_filter.install(getpid())
            if has_nested_ruleset:
                close(_NESTED_RULESET_FD)
            job = (program, notes, names, recursion_limit, outside)
        except BaseException:
            exit_(72)
        serve(job)

    return run_main
