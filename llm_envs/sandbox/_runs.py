"""The worker's hold on its runs' processes: the spawner, each run's start and end, what runs leave.

The worker (:mod:`llm_envs.sandbox._worker`) keeps one :class:`Runs`. It forks
the spawner (:mod:`llm_envs.sandbox._spawner`) and restarts it when a run kills
it, takes the run the spawner forked ahead for each job, reads how each run
exited, ends each run, and kills and reaps every process a run left behind.

Nothing a run starts outlives it, by construction:

* every process a run starts stays in the run's tree: the seccomp filter every
  run inherits refuses ``clone(CLONE_PARENT)`` (the one way to make a sibling)
  and answers ``clone3`` as missing; where no filter could be installed, the
  spawner kills every child it has besides its run once the run has exited;
* a process whose parent dies is re-parented to its nearest subreaper, and the
  worker is one (or PID 1 of its namespace): so once the run has exited, what
  is left of its tree is the worker's children, which are killed until none
  is left;
* then the worker checks that it has no child but the spawner, that the
  spawner has none at all, and (in a PID namespace) that no other process
  exists: a worker that finds one retires, and the pool starts a fresh one;
* each run gets pipes of its own, handed to the spawner with the worker's go
  for that run: nothing a run held can read a later run's job or answer a
  later run's calls.

Nothing here reads anything a run wrote: only the spawner's reports (pids and
wait statuses) and the kernel's process listings.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
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
_PIPE_BYTES = 1 << 20


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
        self.spawner_children: _isolation.ChildrenListing | None = None
        self.spawner_death = "the spawner is running"
        self.status_read = -1
        self.go: socket.socket | None = None
        #: Whether the spawner waits for this process's go before its next fork.
        self.go_owed = False
        # The run whose exit status the spawner reported but this process has not read.
        self.unread_status: int | None = None
        #: The wait status of the latest run (see :meth:`exit_status`).
        self.last_status = 0
        #: The judge's ends of the pipes of the next run: its job and calls go down
        #: ``job_write``, its messages come up ``reply_read``.
        self.job_write = -1
        self.reply_read = -1

    # --- the spawner -----------------------------------------------------------------------

    def start_spawner(self) -> None:
        """Fork the spawner, and send it the go for its first run."""
        status_read, status_write = os.pipe()
        go, spawner_go = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spawner = os.fork()
        if spawner == 0:
            try:
                _spawner.spawner_main(self.worker, status_write, spawner_go.fileno())
            finally:
                os._exit(1)
        os.close(status_write)
        spawner_go.close()
        self.spawner_pid = spawner
        if self.spawner_children is not None:
            self.spawner_children.close()
        self.spawner_children = _isolation.ChildrenListing(spawner)
        self.status_read = status_read
        self.go = go
        self.go_owed = True
        self.release()

    def restart_spawner(self, *, reaped: bool = False) -> None:
        """Replace a spawner that died (``reaped``: already waited for) or must go."""
        with contextlib.suppress(OSError):
            os.close(self.status_read)
        if self.go is not None:
            self.go.close()
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
        """The wait status of the latest run, from the spawner's report (read once).

        The spawner reports it once it has reaped the run (and killed and reaped any
        other child it had); later calls return :attr:`last_status`.
        """
        if self.unread_status != child:
            return self.last_status  # already read, or lost with a spawner that died
        self.unread_status = None
        reply = read_exact(self.status_read, _spawner.STATUS.size)
        if reply is not None:
            self.last_status = int(_spawner.STATUS.unpack(reply)[0])
            return self.last_status
        # The run killed its spawner; the run is now this process's child (it is
        # PID 1 of its namespace, or a subreaper): reap it here.
        self.restart_spawner()
        kill_run(child)
        self.last_status = 0
        # The kernel re-parents the run while the spawner exits, just after its pipe closes.
        for _ in range(1000):
            try:
                self.last_status = wait_status(child)
                break
            except ChildProcessError:
                time.sleep(0.001)
        return self.last_status

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
        """Let the spawner fork the next run, with pipes of its own.

        Called once the judge and :meth:`end` are done with the run and every
        process it left is dead (:meth:`kill_leftovers`). The go carries the run's
        ends of two fresh pipes; this process keeps the other ends. Whatever held
        the last run's pipes can neither read the next run's job nor answer its calls.
        """
        if not self.go_owed:
            return
        self.go_owed = False
        for fd in (self.job_write, self.reply_read):
            if fd >= 0:
                os.close(fd)
        job_read, self.job_write = os.pipe()
        self.reply_read, reply_write = os.pipe()
        for fd in (self.job_write, self.reply_read):
            with contextlib.suppress(OSError):  # (where the system's maximum is lower)
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
            os.set_blocking(fd, False)
        try:
            if self.go is not None:
                socket.send_fds(self.go, [b"g"], [job_read, reply_write])
        except OSError:
            pass  # (a spawner that died: the next job restarts it)
        finally:
            os.close(job_read)
            os.close(reply_write)

    def kill_leftovers(self, child: int) -> bool:
        """Kill and reap every process the run left behind; whether none is left.

        Returns False when a process of the run may remain after all (a kernel
        that broke one of the module's premises): the worker then retires.
        """
        kill_run(child)
        # The spawner reports the run's status once it has reaped the run (and any
        # other child it had): from then on, what the run left is this process's.
        self.exit_status(child)
        for _ in range(2):
            self._kill_orphans()
            if self.contained():
                return True
            # The spawner has children again: kill them; it reaps them before its next fork.
            for pid in self.spawner_children.pids() if self.spawner_children else ():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        return False

    def _kill_orphans(self) -> None:
        """Kill and reap this process's children but the spawner, until there are none."""
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

    def contained(self) -> bool:
        """Whether nothing of the last run is left: checked after every run.

        This process's only child is the spawner, the spawner has no child, and in
        a PID namespace (whose ``/proc`` lists only its own processes) no process
        exists but these two.
        """
        if [pid for pid in self.children.pids() if pid != self.spawner_pid]:
            return False
        if self.spawner_children is not None and self.spawner_children.pids():
            return False
        if self.worker.namespaces.pid and self.worker.private_proc:
            others = _isolation.processes_in_namespace() - {os.getpid(), self.spawner_pid}
            if others:
                return False
        return True
