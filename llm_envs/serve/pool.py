"""Threads that run blocking calls for an event loop, each call with a deadline.

A :class:`DeadlinePool` runs environment steps (or other blocking work) off
the event loop, like ``loop.run_in_executor``, with two differences:

* A call that runs past its deadline fails its awaiter with :class:`Overdue`
  at once. Python cannot stop a thread, so the call's thread is *written off*:
  it finishes the call on its own (its result is dropped) and another thread
  takes its place, so the pool keeps ``workers`` threads that can take calls.
* Written-off threads are bounded: the pool holds at most
  ``workers + max_stuck`` threads whatever its calls do, so once ``max_stuck``
  are written off, a thread that gets stuck is not replaced. Its owner refuses
  new work while ``max_stuck`` are stuck (:attr:`~DeadlinePool.saturated`; the
  hub answers 503). A written-off thread whose call ends rejoins the pool
  where it is short of threads, or leaves.

A call's deadline counts from when a thread starts it, not from when it was
queued: a quick call that waits behind slow ones is not blamed for them. A
call still queued ``deadline`` seconds after it was submitted, while the pool
has no thread left that takes calls, fails with :class:`Overdue` too.

Queued calls are taken round robin between clients, each client's in order
(:class:`~llm_envs.sandbox.fair.RoundRobin`): a call counts as the client
:func:`~llm_envs.sandbox.fair.current_client` names where it is submitted,
and runs as that client's (a sandbox run it makes waits for a worker in that
client's turn). A client with many calls queued delays another's by one call
per turn, not by its whole queue.

Threads start on demand, up to ``workers``, and stay for the pool's life.
Never used from more than one event loop at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from llm_envs.arguments import check_int
from llm_envs.sandbox.fair import RoundRobin, as_client, current_client

__all__ = ["DeadlinePool", "Overdue"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

GIVE_UP_GRACE = 1.0
"""Seconds past its deadline a call still waits for a sandbox worker: by then the loop
has written it off, so its episode ends ``timed_out``, not ``failed``."""


class Overdue(Exception):
    """A call ran past its deadline (or found no thread in time); its thread finishes alone."""


class _Job(Generic[_T]):
    """One call, its client, its awaiter's future, and where it stands (under the pool's lock)."""

    __slots__ = (
        "call",
        "client",
        "deadline",
        "finished",
        "future",
        "loop",
        "started",
        "submitted",
        "timer",
    )

    def __init__(
        self,
        call: Callable[[], _T],
        deadline: float,
        future: asyncio.Future[_T],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.call = call
        self.client = current_client()
        self.deadline = deadline
        self.future = future
        self.loop = loop
        self.submitted = time.monotonic()
        self.started: float | None = None
        self.finished = False
        self.timer: asyncio.TimerHandle | None = None


class DeadlinePool:
    """``workers`` threads for blocking calls; a call past its deadline fails with :class:`Overdue`.

    Args:
        workers: threads that take calls (started on demand).
        max_stuck: written-off threads still running past which no replacement starts.
        name: the threads' name prefix (what a stack dump shows).

    Example:
        >>> import asyncio, time
        >>> pool = DeadlinePool(1, max_stuck=1, name="demo")
        >>> async def demo():
        ...     quick = await pool.run(1.0, sum, [1, 2])
        ...     try:
        ...         await pool.run(0.05, time.sleep, 0.3)
        ...     except Overdue:
        ...         return quick, pool.stuck, await pool.run(1.0, sum, [3, 4])
        >>> asyncio.run(demo())  # the sleeper's thread was replaced: the next call ran at once
        (3, 1, 7)
        >>> time.sleep(0.4); pool.stuck  # the sleeper finished on its own
        0
        >>> pool.shutdown()
    """

    def __init__(self, workers: int, *, max_stuck: int, name: str) -> None:
        self.workers = check_int("workers", workers, minimum=1)
        self.max_stuck = check_int("max_stuck", max_stuck, minimum=0)
        self.name = name
        self._lock = threading.Lock()
        self._queued = threading.Condition(self._lock)
        self._jobs: RoundRobin[_Job[Any]] = RoundRobin()
        self._waiting = 0  # threads waiting for a job
        self._live = 0  # threads that take calls
        self._stuck = 0  # threads still running a written-off call
        self._count = 0
        self._closed = False

    @property
    def stuck(self) -> int:
        """Threads still running a call that passed its deadline."""
        return self._stuck

    @property
    def saturated(self) -> bool:
        """Whether ``max_stuck`` threads are stuck: the owner should refuse new work."""
        return self._stuck >= self.max_stuck

    async def run(self, deadline: float, call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``call(*args, **kwargs)`` in a pool thread; its result, or what it raised.

        Raises:
            Overdue: it ran more than ``deadline`` seconds (its thread is written off).
            RuntimeError: the pool is shut down.
        """
        return await self.submit(deadline, call, *args, **kwargs)

    def submit(
        self, deadline: float, call: Callable[..., _T], *args: Any, **kwargs: Any
    ) -> asyncio.Future[_T]:
        """As :meth:`run`, returning the future (its owner may fail it early: the call goes on)."""
        if self._closed:
            raise RuntimeError(f"the {self.name} pool is shut down")
        loop = asyncio.get_running_loop()
        job = _Job(functools.partial(call, *args, **kwargs), deadline, loop.create_future(), loop)
        with self._lock:
            self._jobs.push(job.client, job)
            if len(self._jobs) > self._waiting and self._room():
                self._start_thread()
            self._queued.notify()
        job.timer = loop.call_later(deadline, self._check, job)
        job.future.add_done_callback(lambda _: job.timer.cancel() if job.timer else None)
        return job.future

    def shutdown(self) -> None:
        """Take no more calls; idle threads leave, busy ones after their call."""
        with self._lock:
            self._closed = True
            self._queued.notify_all()

    # ------------------------------------------------------------------ the loop's side

    def _check(self, job: _Job[Any]) -> None:
        """The job's timer: fail it if it ran past its deadline; else look again later."""
        if job.future.done():
            return
        now = time.monotonic()
        with self._lock:
            if job.finished:
                return  # its result is on its way to the loop
            if job.started is None:
                left = job.submitted + job.deadline - now
                if left <= 0 and self._live == 0:
                    job.finished = True
                    self._jobs.remove(job.client, job)
                    reason = f"no {self.name} thread came free within {job.deadline:g} s"
                else:
                    job.timer = job.loop.call_later(
                        left if left > 0 else job.deadline, self._check, job
                    )
                    return
            else:
                left = job.started + job.deadline - now
                if left > 0:
                    job.timer = job.loop.call_later(left, self._check, job)
                    return
                job.finished = True
                self._write_off(job)
                reason = f"the call ran past its {job.deadline:g} s deadline"
        job.future.set_exception(Overdue(reason))

    def _write_off(self, job: _Job[Any]) -> None:
        """(Under the lock.) The job's thread is stuck in it: replace it while few are stuck."""
        self._stuck += 1
        self._live -= 1
        if self._room():
            self._start_thread()
        log.warning(
            "%s: a call ran past its %g s deadline; its thread is left to finish it "
            "(%d such threads now)",
            self.name,
            job.deadline,
            self._stuck,
        )

    # ------------------------------------------------------------------ the threads' side

    def _room(self) -> bool:
        """(Under the lock.) Whether one more thread may start: the pool's two bounds."""
        return (
            not self._closed
            and self._live < self.workers
            and self._live + self._stuck < self.workers + self.max_stuck
        )

    def _start_thread(self) -> None:
        """(Under the lock.) One more thread that takes calls."""
        self._live += 1
        self._count += 1
        threading.Thread(target=self._work, name=f"{self.name}-{self._count}", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._jobs:
                    if self._closed:
                        self._live -= 1
                        return
                    self._waiting += 1
                    self._queued.wait()
                    self._waiting -= 1
                job = self._jobs.pop()
                if job.finished:  # failed while queued
                    continue
                job.started = started = time.monotonic()
            try:
                # A sandbox run the call makes stops waiting for a worker once the
                # call is written off: nobody reads its result.
                with as_client(job.client, give_up=started + job.deadline + GIVE_UP_GRACE):
                    result: Any = job.call()
                failure: BaseException | None = None
            except BaseException as exc:  # handed to the awaiter, whatever it is
                result, failure = None, exc
            with self._lock:
                late = job.finished
                job.finished = True
                if late:  # written off: this thread left the pool's count when it was
                    self._stuck -= 1
                    if self._live >= self.workers or self._closed:
                        return
                    self._live += 1  # short of threads (too many were stuck): rejoin
            if not late:
                _settle_soon(job, result, failure)


def _settle_soon(job: _Job[Any], result: Any, failure: BaseException | None) -> None:
    def settle() -> None:
        if job.future.done():  # its owner failed it early
            return
        if failure is not None:
            job.future.set_exception(failure)
        else:
            job.future.set_result(result)

    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        job.loop.call_soon_threadsafe(settle)
