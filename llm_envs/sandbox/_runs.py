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
* then the worker checks that it has no child but the spawner and that the
  spawner has none at all (by the two points above, every process the run
  left): a worker that finds one retires, and the pool starts a fresh one;
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
        #: How many runs the latest go asked for whose pids were not read yet.
        self.unannounced = 0
        #: The runs whose exit statuses the spawner will report and this process has
        #: not read yet, in fork order.
        self.unread: list[int] = []
        #: The wait statuses of the latest runs (see :meth:`exit_status`).
        self.statuses: dict[int, int] = {}
        #: The judge's ends of the pipes of the latest go's runs, in fork order: each
        #: run's job and calls go down the first, its messages come up the second.
        self.pipes: list[tuple[int, int]] = []

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
        self.unannounced = 0
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

    def waiting_runs(self, count: int = 1) -> list[int] | None:
        """The pids of ``count`` runs forked ahead, waiting for their jobs (None: no spawner).

        The spawner forks one run ahead; a job that needs two (a program and its
        helper) has that one killed and asks for a pair.
        """
        for _ in range(2):
            if self.unread:
                self.read_statuses()
            if self.unannounced != count:
                waiting = self._announced()
                if waiting is None:
                    self.restart_spawner()
                    continue
                for pid in waiting:
                    kill_run(pid)
                self.read_statuses()
                self.go_owed = True
                self.release(count)
            pids = self._announced()
            if pids is not None:
                self.go_owed = True
                return pids
            # The spawner died (a run of a previous job killed it): start a new one.
            self.restart_spawner()
        return None

    def _announced(self) -> list[int] | None:
        """Read the pids of the runs the latest go asked for (None: the spawner died)."""
        pids = []
        for _ in range(self.unannounced):
            reply = read_exact(self.status_read, _spawner.STATUS.size)
            if reply is None:
                return None
            pids.append(int(_spawner.STATUS.unpack(reply)[0]))
        groups = self.worker.groups
        if groups is not None and self.worker.procfs_of_runs:
            for pid in pids:
                groups.adopt(pid)
        self.unannounced = 0
        self.unread = pids
        return pids

    def read_statuses(self) -> None:
        """Read the wait statuses of the latest runs, which the spawner reports once it reaped them.

        It reaps them (and kills and reaps any other child it had) first: once this
        returns, whatever the runs left is this process's (see :meth:`kill_leftovers`).
        """
        unread, self.unread = self.unread, []
        self.statuses = {}
        for index, child in enumerate(unread):
            reply = read_exact(self.status_read, _spawner.STATUS.size)
            if reply is not None:
                self.statuses[child] = int(_spawner.STATUS.unpack(reply)[0])
                continue
            # A run killed its spawner; the runs are now this process's children (it
            # is PID 1 of its namespace, or a subreaper): reap them here.
            self.restart_spawner()
            for lost in unread[index:]:
                kill_run(lost)
                self.statuses[lost] = 0
                # The kernel re-parents a run while the spawner exits, just after its pipe closes.
                for _ in range(1000):
                    try:
                        self.statuses[lost] = wait_status(lost)
                        break
                    except ChildProcessError:
                        time.sleep(0.001)
            return

    def exit_status(self, child: int) -> int:
        """The wait status of one of the latest runs (0 when lost with a spawner that died)."""
        if child in self.unread:
            self.read_statuses()
        return self.statuses.get(child, 0)

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

    def release(self, count: int = 1) -> None:
        """Let the spawner fork the next ``count`` runs (1, or 2: a pair), with pipes of their own.

        Called once the judge and :meth:`end` are done with the last runs and every
        process they left is dead (:meth:`kill_leftovers`). Each run's go carries its
        ends of two fresh pipes; this process keeps the other ends (:attr:`pipes`).
        Whatever held the last runs' pipes can neither read the next run's job nor
        answer its calls; and the spawner forks each run of a pair before it
        receives the other's go, so neither holds the other's pipes.
        """
        if not self.go_owed:
            return
        self.go_owed = False
        for job_write, reply_read in self.pipes:
            os.close(job_write)
            os.close(reply_read)
        self.pipes = []
        for index in range(count):
            job_read, job_write = os.pipe()
            reply_read, reply_write = os.pipe()
            # (Results can be large: a larger reply pipe takes them in fewer turns.)
            with contextlib.suppress(OSError):  # (where the system's maximum is lower)
                fcntl.fcntl(reply_read, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
            os.set_blocking(job_write, False)
            os.set_blocking(reply_read, False)
            self.pipes.append((job_write, reply_read))
            # b"2": a pair, whose second go follows once the first run is forked.
            message = b"2" if count == 2 and index == 0 else b"g"
            try:
                if self.go is not None:
                    socket.send_fds(self.go, [message], [job_read, reply_write])
            except OSError:
                pass  # (a spawner that died: the next job restarts it)
            finally:
                os.close(job_read)
                os.close(reply_write)
        self.unannounced = count

    def kill_leftovers(self, children: list[int]) -> bool:
        """Kill and reap every process the runs ``children`` left behind; whether none is left.

        Returns False when a process of the runs may remain after all (a kernel
        that broke one of the module's premises): the worker then retires.
        """
        for child in children:
            kill_run(child)
        if not self.worker.seccomp:
            # The spawner reports the runs' statuses once it has reaped them and
            # killed any other child it had (without the filter, a run can make
            # siblings): from then on, what the runs left is this process's.
            self.read_statuses()
        for _ in range(2):
            self._kill_orphans()
            if self.contained(children):
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

    def contained(self, runs: list[int]) -> bool:
        """Whether nothing of the last ``runs`` is left: checked after every run.

        This process's only child is the spawner, and the spawner has none but the
        runs themselves (dead: their pidfds said so; the spawner reaps them). Every
        process a run starts is a descendant of the spawner (no process outside
        the run's tree: the seccomp filter, or the spawner's own check) or, once
        orphaned, of this process (a subreaper, or PID 1): so these two listings
        are every process the run left. (In a PID namespace, whose processes all
        descend from this one, they are every process but these two.)
        """
        if [pid for pid in self.children.pids() if pid != self.spawner_pid]:
            return False
        spawned = self.spawner_children.pids() if self.spawner_children is not None else []
        return all(pid in runs for pid in spawned)
