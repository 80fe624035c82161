"""The judge's channel to one run: framed messages over the run's own pipes, and its failures.

:class:`Channel` sends a run its job and the judge's calls, and reads back the
run's messages, each only through :func:`._wire.decode`; every way a run can
fail to answer (it died, it broke the protocol, its deadline passed) becomes
one of the exceptions here, which :mod:`._judge` turns into outcomes. A
program's own exceptions cross as text and are rebuilt as the builtin
exception of the same name (:func:`program_error`), never as one that steers
Python's control flow. Runs in the worker only.
"""

from __future__ import annotations

import builtins
import os
import select
import struct
import time
from collections.abc import Callable
from typing import Any

from llm_envs.sandbox import _wire

__all__ = [
    "CONTROL_FLOW_ERRORS",
    "DIED",
    "MAX_MESSAGE_BYTES",
    "MESSAGE_LIMIT",
    "ORIGIN",
    "REQUEST",
    "Channel",
    "ProgramError",
    "RunEnded",
    "RunTimeout",
    "UntrustedValue",
    "program_error",
]

#: What :attr:`Channel.ended` says when the run died by itself (not a broken channel).
DIED = "the run ended"
#: The largest message a run may send (a call's result, with its changed arguments).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MESSAGE_LIMIT = 1000
_FRAME = struct.Struct("<cI")
REQUEST = struct.Struct("<I?")
_READ_BYTES = 1 << 16
_MUTABLE = _wire.MUTABLE


class RunTimeout(BaseException):
    """The run's wall-clock deadline passed (a BaseException: tests cannot catch it)."""


class RunEnded(BaseException):
    """The run died, or broke its channel; it can answer no more calls."""


class UntrustedValue(Exception):
    """A value the program produced, or a test tried to pass it, that cannot cross."""


class ProgramError(Exception):
    """An exception the program raised that has no builtin counterpart (or must not be raised).

    Attributes:
        type_name: the name of the program's exception type.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name


#: Exceptions that steer Python's own control flow: raised inside an iteration
#: (``all(map(candidate, xs))``, ``iter(f, sentinel)``) they end it early instead
#: of failing the test. A program's exception of one of these names becomes a
#: :class:`ProgramError`, which fails the test like any other error.
CONTROL_FLOW_ERRORS = frozenset(
    {"StopIteration", "StopAsyncIteration", "GeneratorExit", "SystemExit", "KeyboardInterrupt"}
)
# Builtin exceptions a program's exception becomes, by name, so that a test's
# `except ValueError` still works: Exception subclasses only (never SystemExit),
# and none that steers control flow, built with the program's message alone.
_BUILTIN_ERRORS = {
    name: kind
    for name, kind in vars(builtins).items()
    if isinstance(kind, type)
    and issubclass(kind, Exception)
    and not name.endswith("Group")
    and name not in CONTROL_FLOW_ERRORS
}
ORIGIN = "_sandbox_origin"


def program_error(type_name: object, message: object) -> Exception:
    name = type_name if type(type_name) is str else "<unnamed>"
    text = message if type(message) is str else ""
    kind = _BUILTIN_ERRORS.get(name)
    error: Exception
    try:
        error = kind(text) if kind is not None else ProgramError(name, text)
    except Exception:  # (UnicodeDecodeError and friends want more arguments)
        error = ProgramError(name, text)
    setattr(error, ORIGIN, (name, text))
    return error


# --- the channel to a run -----------------------------------------------------------------


class Channel:
    """The judge's end of one run: its job and calls go out, its messages come in.

    Args:
        job_fd: the write end of the run's job pipe (made non-blocking here).
        reply_fd: the read end of the run's reply pipe (non-blocking).
        exit_fd: a descriptor that becomes readable when the run exits (its pidfd).
        deadline: the run's wall-clock deadline (``time.monotonic()``).
        kill: kills the run (called on a timeout or a broken channel).
        watch: ``(descriptor, poll events, check)``: a descriptor that becomes ready
            when something outside the channel may end the run (its group ran out of
            memory); ``check()`` then says why it must end, or None.
    """

    def __init__(
        self,
        job_fd: int,
        reply_fd: int,
        exit_fd: int,
        deadline: float,
        kill: Callable[[], None],
        watch: tuple[int, int, Callable[[], str | None]] | None = None,
    ) -> None:
        self.job_fd = job_fd
        self.reply_fd = reply_fd
        self.exit_fd = exit_fd
        self.deadline = deadline
        self.kill = kill
        self.buffer = bytearray()
        self.poller = select.poll()
        self.poller.register(exit_fd, select.POLLIN)
        self.watch_fd = -1
        self.watch_check: Callable[[], str | None] | None = None
        if watch is not None:
            self.watch_fd, events, self.watch_check = watch
            self.poller.register(self.watch_fd, events)
        self.polled: int | None = None  # the descriptor registered beside exit_fd
        #: Why the run can answer no more (None while it can).
        self.ended: str | None = None
        self.timed_out = False
        self.exited = False
        #: How many calls of its program's functions the run answered.
        self.calls = 0
        #: When the run reported its program loaded (``time.monotonic()``; 0.0: not yet).
        self.loaded_at = 0.0
        #: Answers the run's calls of another run's functions (a ``C`` message's
        #: payload -> the frame to send back); None: the run may make none.
        self.outside: Callable[[bytes], bytes] | None = None

    # --- failure states ---

    def time_out(self) -> RunTimeout:
        """Mark the run timed out and kill it; the exception to raise."""
        if not self.timed_out:
            self.timed_out = True
            self.kill()
        return RunTimeout()

    def end_broken(self, why: str) -> RunEnded:
        """End the run for ``why`` (the first reason stays) and kill it; the exception to raise."""
        if self.ended is None:
            self.ended = why
            self.kill()
        return RunEnded(why)

    def check(self) -> None:
        """Raise if the run timed out or ended (a test may have swallowed the exception)."""
        if self.timed_out or time.monotonic() >= self.deadline:
            raise self.time_out()
        if self.ended is not None:
            raise RunEnded(self.ended)

    # --- transport ---

    def _poll(self, fd: int, events: int) -> bool:
        """Wait until ``fd`` is ready or the run exits; whether ``fd`` is ready."""
        if self.polled != fd:
            if self.polled is not None:
                self.poller.unregister(self.polled)
            self.poller.register(fd, events)
            self.polled = fd
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self.time_out()
        ready = self.poller.poll(max(1, int(remaining * 1000) + 1))
        if not ready and time.monotonic() >= self.deadline:
            raise self.time_out()
        found = False
        for ready_fd, _ in ready:
            if ready_fd == fd:
                found = True
            elif ready_fd == self.exit_fd:
                self.exited = True
            elif ready_fd == self.watch_fd and self.watch_check is not None:
                why = self.watch_check()
                if why is not None:
                    raise self.end_broken(why)
        return found

    def send(self, data: bytes) -> None:
        """Write ``data`` to the run (RunTimeout at the deadline, RunEnded if it exits)."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.job_fd, view) :]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:  # (only the run reads its pipe: it is gone)
                self.exited = True
                raise self.end_broken(DIED) from None
            if self.exited:
                raise self.end_broken(DIED)
            self._poll(self.job_fd, select.POLLOUT)

    def _pop(self) -> tuple[bytes, bytes] | None:
        if len(self.buffer) < _FRAME.size:
            return None
        kind, size = _FRAME.unpack_from(self.buffer)
        if size > MAX_MESSAGE_BYTES:
            raise self.end_broken(
                f"the program sent a message of {size} bytes; the limit is {MAX_MESSAGE_BYTES}"
            )
        end = _FRAME.size + size
        if len(self.buffer) < end:
            return None
        payload = bytes(self.buffer[_FRAME.size : end])
        del self.buffer[:end]
        return kind, payload

    def _read_available(self) -> None:
        while True:
            try:
                chunk = os.read(self.reply_fd, _READ_BYTES)
            except BlockingIOError:
                return
            if not chunk:
                return
            self.buffer += chunk
            if len(self.buffer) > MAX_MESSAGE_BYTES + _FRAME.size:
                self._pop()  # raises for an oversized message

    def receive(self) -> tuple[bytes, bytes]:
        """The run's next message (RunTimeout at the deadline, RunEnded if it exits first)."""
        if self.ended is not None:
            raise RunEnded(self.ended)
        while True:
            message = self._pop()
            if message is not None:
                return message
            if self.exited:
                self._read_available()
                message = self._pop()
                if message is not None:
                    return message
                raise self.end_broken(DIED)
            if self._poll(self.reply_fd, select.POLLIN):
                self._read_available()

    def answer(self) -> tuple[bytes, bytes]:
        """The run's next message but its calls of another run's functions, which are answered."""
        kind, payload = self.receive()
        while kind == b"C":
            if self.outside is None:
                raise self.end_broken("the program called a function of another run; there is none")
            self.send(self.outside(payload))
            kind, payload = self.receive()
        return kind, payload

    # --- calls ---

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call the program's ``name`` with plain-data arguments; its result, rebuilt here."""
        self.check()
        mutable: tuple[int | str, ...] = ()
        exact = False
        for index, arg in enumerate(args):
            if type(arg) in _MUTABLE:
                mutable += (index,)
                exact = exact or type(arg) is bytearray
        for key, arg in kwargs.items():
            if type(arg) in _MUTABLE:
                mutable += (key,)
                exact = exact or type(arg) is bytearray
        try:
            # (Marshal alone writes a bytearray as bytes: a bytearray argument, which
            # the call may change in place, goes through the exact encoding.)
            payload, tagged = _wire.encode((name, args, kwargs, mutable), exact=exact)
        except _wire.Unsupported as error:
            raise UntrustedValue(
                f"the test passed the program {error}; only plain data can cross"
            ) from None
        self.send(REQUEST.pack(len(payload), tagged) + payload)
        kind, reply = self.answer()
        if kind in (b"R", b"X", b"U"):
            self.calls += 1
        try:
            value = _wire.decode(reply)
        except _wire.WireError as error:
            if kind == b"R":
                why = f"the program returned a value that is not plain data: {error}"
                raise UntrustedValue(why) from None
            raise self.end_broken(f"the program sent a malformed message: {error}") from None
        if kind == b"R":
            if not (type(value) is tuple and len(value) == 2 and type(value[1]) is tuple):
                raise self.end_broken("the program sent a malformed result")
            result, changed = value
            for item in changed:
                if not (type(item) is tuple and len(item) == 2 and item[0] in mutable):
                    raise self.end_broken("the program sent a malformed result")
                slot = item[0]
                _wire.refresh(args[slot] if type(slot) is int else kwargs[slot], item[1])
            return result
        if kind == b"X":
            if type(value) is tuple and len(value) == 2:
                raise program_error(value[0], value[1])
            raise self.end_broken("the program sent a malformed exception")
        if kind == b"U":
            why = value[:MESSAGE_LIMIT] if type(value) is str else "a value that cannot cross"
            raise UntrustedValue(
                f"the program returned {why}; only plain data (None, bool, int, float, "
                "complex, str, bytes, and lists, tuples, dicts and sets of them) reaches the tests"
            )
        raise self.end_broken(f"the program sent an unexpected message ({kind!r})")
