"""Sending a batch of requests to the pool's workers and reading their replies.

A :class:`Dispatch` runs one batch of :meth:`Sandbox.run_tests_many
<llm_envs.sandbox.Sandbox.run_tests_many>` on the slots it was given: it
sends each job to a free worker, queues one more small job on each busy worker
(so a worker never waits for the caller between runs), reads replies as they
come, and takes a worker that dies or stops answering out of service, sending
the jobs queued behind it to another. Replies are decoded by the pool; nothing
a worker wrote is unmarshalled here.
"""

from __future__ import annotations

import selectors
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_envs.sandbox import phases
from llm_envs.sandbox._requests import Request, failed_report
from llm_envs.sandbox._workers import WorkerProcess
from llm_envs.sandbox.report import ProgramStatus, TestReport

__all__ = ["WORKER_GRACE", "Dispatch", "Flight", "Slot"]

# Slack on top of a run's own timeout before the pool gives up on a silent worker:
# the worker enforces the timeout itself, so this only fires if the worker hangs.
WORKER_GRACE = 10.0
# Jobs queued per worker (the running one included), and the most bytes of them
# in its request pipe at once: below the pipe's 64 KiB, so sending never blocks.
_PIPELINE_DEPTH = 2
_PIPELINE_BYTES = 60 * 1024


class Slot:
    """A place for one worker in the pool; the worker in it is replaced when it dies."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.worker: WorkerProcess | None = None


@dataclass
class Flight:
    """The jobs sent to one worker and not answered yet, oldest (running) first."""

    slot: Slot
    worker: WorkerProcess
    jobs: deque[int]
    queued_bytes: int
    deadline: float = 0.0


class Dispatch:
    """One batch of requests, run on some of the pool's slots.

    Args:
        slots: the slots this batch may use (taken from the pool's idle ones).
        requests: every request of the batch.
        reports: where each request's report (or the error to raise) goes, by index.
        pending: the indices of the requests to run.
        ready_worker: the slot's worker, (re)started first if there is none.
        decode: the report of a worker's reply to a request.
    """

    def __init__(
        self,
        slots: list[Slot],
        requests: list[Request],
        reports: list[TestReport | BaseException | None],
        pending: list[int],
        ready_worker: Callable[[Slot], WorkerProcess],
        decode: Callable[[dict[str, Any], Request], TestReport | BaseException],
    ) -> None:
        self.requests = requests
        self.reports = reports
        self.queue = deque(pending)
        self.free = list(slots)
        self.flights: dict[int, Flight] = {}  # worker stdout fd -> what that worker is doing
        self.ready_worker = ready_worker
        self.decode = decode
        self.selector: selectors.BaseSelector = selectors.DefaultSelector()

    def run(self) -> None:
        """Run every pending request; each gets its report."""
        try:
            with self.selector:
                while self.queue or self.flights:
                    self._start_jobs()
                    self._queue_ahead()
                    deadline = min(flight.deadline for flight in self.flights.values())
                    for key, _ in self.selector.select(max(0.0, deadline - time.monotonic())):
                        self._read_replies(self.flights[int(key.fd)])
                    self._expire()
        except BaseException:
            # A worker still busy would later answer the wrong request: stop it (its
            # slot restarts one on next use).
            for flight in self.flights.values():
                if flight.slot.worker is not None:
                    flight.slot.worker.kill()
                    flight.slot.worker = None
            raise

    def _start_jobs(self) -> None:
        """Send the next jobs to the free workers."""
        while self.queue and self.free:
            slot = self.free.pop()
            job = self.queue.popleft()
            request = self.requests[job]
            worker = self.ready_worker(slot)
            try:
                worker.send(request.payload)
            except OSError:
                worker = self.ready_worker(slot)  # it died while idle: once more
                worker.send(request.payload)
            flight = Flight(slot, worker, deque([job]), len(request.payload))
            flight.deadline = time.monotonic() + request.timeout + WORKER_GRACE
            self.flights[worker.stdout_fd] = flight
            self.selector.register(worker.stdout_fd, selectors.EVENT_READ)

    def _queue_ahead(self) -> None:
        """Queue one more small job on each busy worker.

        It starts the moment the worker answers, without waiting for this
        process to send it.
        """
        for flight in self.flights.values():
            if not self.queue or len(flight.jobs) >= _PIPELINE_DEPTH:
                continue
            size = len(self.requests[self.queue[0]].payload)
            if flight.queued_bytes + size > _PIPELINE_BYTES:
                continue  # a write that could block on a full pipe
            job = self.queue.popleft()
            try:
                flight.worker.send(self.requests[job].payload)
            except OSError:
                self.queue.appendleft(job)  # the worker died: its end shows up below
                continue
            flight.jobs.append(job)
            flight.queued_bytes += size

    def _read_replies(self, flight: Flight) -> None:
        """Read what a worker answered; a worker that died gets its running job KILLED."""
        try:
            messages = flight.worker.read_messages()
        except EOFError:
            reason = flight.worker.exit_description()
            self._fail_running_job(
                flight,
                ProgramStatus.KILLED,
                f"the sandbox worker {reason} during this run; it was restarted",
            )
            return
        for message in messages:
            phases.note(message.get("phases"))
            job = flight.jobs.popleft()
            flight.queued_bytes -= len(self.requests[job].payload)
            self.reports[job] = self.decode(message, self.requests[job])
            if message.get("retire"):
                # The worker could not clean up after this run and exits: what was
                # queued behind it goes to a fresh worker.
                self._ground(flight)
                self.queue.extendleft(reversed(flight.jobs))
                return
            if flight.jobs:
                timeout = self.requests[flight.jobs[0]].timeout
                flight.deadline = time.monotonic() + timeout + WORKER_GRACE
        if not flight.jobs:
            self.selector.unregister(flight.worker.stdout_fd)
            del self.flights[flight.worker.stdout_fd]
            self.free.append(flight.slot)

    def _expire(self) -> None:
        """Take the workers past their deadline out of service; their running jobs time out."""
        now = time.monotonic()
        for flight in list(self.flights.values()):
            if now < flight.deadline:
                continue
            self._fail_running_job(
                flight,
                ProgramStatus.TIMEOUT,
                "the sandbox worker stopped answering; it was restarted",
            )

    def _fail_running_job(self, flight: Flight, status: ProgramStatus, error: str) -> None:
        """Take the flight's worker out of service: its running job fails, the rest go back."""
        self._ground(flight)
        job = flight.jobs.popleft()
        self.reports[job] = failed_report(self.requests[job], status, error)
        self.queue.extendleft(reversed(flight.jobs))  # queued, never started

    def _ground(self, flight: Flight) -> None:
        """Take a dead or stuck worker out of service (its slot restarts one on next use)."""
        self.selector.unregister(flight.worker.stdout_fd)
        del self.flights[flight.worker.stdout_fd]
        flight.worker.kill()
        flight.slot.worker = None
        self.free.append(flight.slot)
