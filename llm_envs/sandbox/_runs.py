"""The worker's hold on its runs' processes: the spawner, each run's start and end, what runs leave.

The worker (:mod:`llm_envs.sandbox._worker`) keeps one :class:`Runs`. It forks
the spawner (:mod:`llm_envs.sandbox._spawner`) and restarts it when a run kills
it, takes the run the spawner forked ahead for each job, reads how each run
exited, ends each run, and kills and reaps every process a run left behind:
the worker is PID 1 of its namespace or a child subreaper, so whatever escaped
the run's process group (``setsid``, a double fork) is re-parented to it.

Nothing here reads anything a run wrote: only the spawner's reports (pids and
wait statuses) and the kernel's process listings.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from typing import TYPE_CHECKING

from llm_envs.sandbox import _isolation, _program, _spawner
from llm_envs.sandbox._processes import describe_exit, kill_run, read_exact, wait_status

if TYPE_CHECKING:
    from llm_envs.sandbox._worker import Worker

__all__ = ["Runs"]

_KILL_GRACE_MS = 10_000  # how long a killed run may take to exit
_EXIT_GRACE = 0.05  # how long a run asked to exit may take before it is killed
_EXIT_REQUEST = _program.EXIT_REQUEST


class Runs:
    """The spawner of one worker, and the processes of that worker's runs.

    Args:
        worker: the worker whose settings the spawner applies (it is forked
            from, and must be, the worker's own process).
    """

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.children = _isolation.ChildrenListing()
        self.spawner_pid = 0
        self.spawner_death = "the spawner is running"
        self.status_read = -1
        self.go_write = -1
        #: Whether the spawner waits for this process's go before its next fork.
        self.go_owed = False
        # The run whose exit status the spawner reported but this process has not read.
        self.unread_status: int | None = None

    # --- the spawner -----------------------------------------------------------------------

    def start_spawner(self) -> None:
        """Fork the spawner, which forks one run ahead and reports its pid."""
        status_read, status_write = os.pipe()
        go_read, go_write = os.pipe()
        spawner = os.fork()
        if spawner == 0:
            try:
                _spawner.spawner_main(self.worker, status_write, go_read)
            finally:
                os._exit(1)
        os.close(status_write)
        os.close(go_read)
        self.spawner_pid = spawner
        self.status_read = status_read
        self.go_write = go_write
        self.go_owed = False

    def restart_spawner(self, *, reaped: bool = False) -> None:
        """Replace a spawner that died (``reaped``: already waited for) or must go."""
        for fd in (self.status_read, self.go_write):
            with contextlib.suppress(OSError):
                os.close(fd)
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
        self.start_spawner()

    # --- one run ---------------------------------------------------------------------------

    def waiting_run(self) -> int | None:
        """The pid of the run the spawner forked ahead, waiting for its job (None: no spawner)."""
        for _ in range(2):
            if self.unread_status is not None:
                self.exit_status(self.unread_status)
            reply = read_exact(self.status_read, _spawner.STATUS.size)
            if reply is not None:
                self.unread_status = int(_spawner.STATUS.unpack(reply)[0])
                self.go_owed = True
                return self.unread_status
            # The spawner died (a run of a previous job killed it): start a new one.
            self.restart_spawner()
        return None

    def exit_status(self, child: int) -> int:
        """The wait status of the latest run, from the spawner's report (read once)."""
        if self.unread_status != child:
            return 0  # already read, or lost with a spawner that died
        self.unread_status = None
        reply = read_exact(self.status_read, _spawner.STATUS.size)
        if reply is not None:
            return int(_spawner.STATUS.unpack(reply)[0])
        # The run killed its spawner; the run is now this process's child (it is
        # PID 1 of its namespace, or a subreaper): reap it here.
        self.restart_spawner()
        kill_run(child)
        # The kernel re-parents the run while the spawner exits, just after its pipe closes.
        for _ in range(1000):
            try:
                return wait_status(child)
            except ChildProcessError:
                time.sleep(0.001)
        return 0

    def end(self, child: int, pidfd: int, *, ask: bool, job_write: int) -> None:
        """End a run whose pidfd this process holds, and close the pidfd.

        With ``ask``, the run is asked to exit (cheaper than a signal) through
        ``job_write``; one that does not, at once, is killed. Its exit means its
        output is complete.
        """
        if ask:
            with contextlib.suppress(OSError):
                os.write(job_write, _EXIT_REQUEST)
            if not select.select([pidfd], [], [], _EXIT_GRACE)[0]:
                kill_run(child)
        else:
            kill_run(child)
        select.select([pidfd], [], [], _KILL_GRACE_MS / 1000)
        os.close(pidfd)

    def release(self) -> None:
        """Let the spawner fork the next run: nothing more is written for the last one.

        Called once the judge and :meth:`end` are done with the run and every
        process it left is dead: until then the spawner forks no run that could
        read what was meant for the last one from the shared job pipe.
        """
        if self.go_owed:
            self.go_owed = False
            with contextlib.suppress(OSError):  # (a spawner that died: the next job restarts it)
                os.write(self.go_write, b"g")

    def kill_leftovers(self, child: int) -> None:
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
                self.restart_spawner(reaped=True)  # a run killed it; keep serving
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
