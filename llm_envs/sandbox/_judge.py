"""The judge: runs the trusted setup and tests in the worker, calling the program through proxies.

The tests and the setup come from the data set; the program does not. So the
tests run here, in the worker's process, which the program cannot reach, and
every name a test uses that the program defines (the entry point,
``candidate`` through the setup's ``candidate = f``, a helper) is bound to a
proxy: calling it sends the arguments to the program's run
(:mod:`llm_envs.sandbox._program`) and returns what the program's function
returned, rebuilt from plain data by the strict decoder of :mod:`._wire`. A
test therefore only ever compares, sorts, hashes or prints the judge's own
objects, and a pass is decided by the judge's own ``assert``.

What the program can do is exactly what it could do honestly: return values,
raise exceptions (which become exceptions of the call, of the same builtin
type where there is one, carrying only the text of the original), change the
mutable arguments of a call (the changed values come back and are written into
the judge's objects), take time, or die. A run that dies, times out, or writes
anything that is not a well-formed message ends the run: the test in progress
fails or times out and the later ones do not run.

Names the setup defines win over the program's: the prompt's helpers that the
tests call (HumanEval/38's ``encode_cyclic``) are part of the setup, so a
program that redefines them changes only its own copy.

This module runs in the worker and must never execute anything the program
sent, never trust a value that did not come out of :func:`._wire.decode`, and
never let an exception of a run's making escape as anything but a test's
outcome.
"""

from __future__ import annotations

import builtins
import operator
import os
import random
import select
import struct
import sys
import time
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from llm_envs.sandbox import _wire

__all__ = [
    "COMPARE_NAME",
    "COMPARISONS",
    "CONTROL_FLOW_ERRORS",
    "DIED",
    "JUDGE_NAMES",
    "Channel",
    "HelperRun",
    "JudgeResult",
    "ProgramError",
    "RunEnded",
    "RunTimeout",
    "UntrustedValue",
    "judge",
]

#: The name under which rewritten asserts call the judge's comparison (for messages).
COMPARE_NAME = "__sandbox_compare__"
#: The comparison operators, by the index a rewritten assert passes.
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=", "is", "is not", "in", "not in")
_OPERATORS: tuple[Callable[[Any, Any], Any], ...] = (
    operator.eq,
    operator.ne,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    operator.is_,
    operator.is_not,
    lambda item, container: item in container,
    lambda item, container: item not in container,
)
#: What :attr:`Channel.ended` says when the run died by itself (not a broken channel).
DIED = "the run ended"
#: The largest message a run may send (a call's result, with its changed arguments).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_MESSAGE_LIMIT = 1000
_REPR_LIMIT = 200
_FRAME = struct.Struct("<cI")
_REQUEST = struct.Struct("<I?")
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
_ORIGIN = "_sandbox_origin"


def _program_error(type_name: object, message: object) -> Exception:
    name = type_name if type(type_name) is str else "<unnamed>"
    text = message if type(message) is str else ""
    kind = _BUILTIN_ERRORS.get(name)
    error: Exception
    try:
        error = kind(text) if kind is not None else ProgramError(name, text)
    except Exception:  # (UnicodeDecodeError and friends want more arguments)
        error = ProgramError(name, text)
    setattr(error, _ORIGIN, (name, text))
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
    """

    def __init__(
        self, job_fd: int, reply_fd: int, exit_fd: int, deadline: float, kill: Callable[[], None]
    ) -> None:
        self.job_fd = job_fd
        self.reply_fd = reply_fd
        self.exit_fd = exit_fd
        self.deadline = deadline
        self.kill = kill
        self.buffer = bytearray()
        self.poller = select.poll()
        self.poller.register(exit_fd, select.POLLIN)
        self.polled: int | None = None  # the descriptor registered beside exit_fd
        #: Why the run can answer no more (None while it can).
        self.ended: str | None = None
        self.timed_out = False
        self.exited = False
        #: How many calls of its program's functions the run answered.
        self.calls = 0
        #: Answers the run's calls of another run's functions (a ``C`` message's
        #: payload -> the frame to send back); None: the run may make none.
        self.outside: Callable[[bytes], bytes] | None = None

    # --- failure states ---

    def _timeout(self) -> RunTimeout:
        if not self.timed_out:
            self.timed_out = True
            self.kill()
        return RunTimeout()

    def _broken(self, why: str) -> RunEnded:
        if self.ended is None:
            self.ended = why
            self.kill()
        return RunEnded(why)

    def check(self) -> None:
        """Raise if the run timed out or ended (a test may have swallowed the exception)."""
        if self.timed_out or time.monotonic() >= self.deadline:
            raise self._timeout()
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
            raise self._timeout()
        ready = self.poller.poll(max(1, int(remaining * 1000) + 1))
        if not ready and time.monotonic() >= self.deadline:
            raise self._timeout()
        found = False
        for ready_fd, _ in ready:
            if ready_fd == fd:
                found = True
            elif ready_fd == self.exit_fd:
                self.exited = True
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
                raise self._broken(DIED) from None
            if self.exited:
                raise self._broken(DIED)
            self._poll(self.job_fd, select.POLLOUT)

    def _pop(self) -> tuple[bytes, bytes] | None:
        if len(self.buffer) < _FRAME.size:
            return None
        kind, size = _FRAME.unpack_from(self.buffer)
        if size > MAX_MESSAGE_BYTES:
            raise self._broken(
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
                raise self._broken(DIED)
            if self._poll(self.reply_fd, select.POLLIN):
                self._read_available()

    def answer(self) -> tuple[bytes, bytes]:
        """The run's next message but its calls of another run's functions, which are answered."""
        kind, payload = self.receive()
        while kind == b"C":
            if self.outside is None:
                raise self._broken("the program called a function of another run; there is none")
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
        self.send(_REQUEST.pack(len(payload), tagged) + payload)
        kind, reply = self.answer()
        if kind in (b"R", b"X", b"U"):
            self.calls += 1
        try:
            value = _wire.decode(reply)
        except _wire.WireError as error:
            if kind == b"R":
                why = f"the program returned a value that is not plain data: {error}"
                raise UntrustedValue(why) from None
            raise self._broken(f"the program sent a malformed message: {error}") from None
        if kind == b"R":
            if not (type(value) is tuple and len(value) == 2 and type(value[1]) is tuple):
                raise self._broken("the program sent a malformed result")
            result, changed = value
            for item in changed:
                if not (type(item) is tuple and len(item) == 2 and item[0] in mutable):
                    raise self._broken("the program sent a malformed result")
                slot = item[0]
                _wire.refresh(args[slot] if type(slot) is int else kwargs[slot], item[1])
            return result
        if kind == b"X":
            if type(value) is tuple and len(value) == 2:
                raise _program_error(value[0], value[1])
            raise self._broken("the program sent a malformed exception")
        if kind == b"U":
            why = value[:_MESSAGE_LIMIT] if type(value) is str else "a value that cannot cross"
            raise UntrustedValue(
                f"the program returned {why}; only plain data (None, bool, int, float, "
                "complex, str, bytes, and lists, tuples, dicts and sets of them) reaches the tests"
            )
        raise self._broken(f"the program sent an unexpected message ({kind!r})")


def _proxy(call: Callable[[str, tuple[Any, ...], dict[str, Any]], Any], name: str) -> Any:
    def proxy(*args: Any, **kwargs: Any) -> Any:
        return call(name, args, kwargs)

    proxy.__name__ = proxy.__qualname__ = name
    proxy.__doc__ = f"The program's {name}, called in its sandboxed run."
    return proxy


# --- judging a run ------------------------------------------------------------------------

# The description of the last failed comparison, for the test's failure message.
_last_failure: list[str | None] = [None]


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # huge ints (ValueError), deep nesting (RecursionError)
        return f"<{type(value).__name__}>"
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def _compare(left: object, right: object, op: int) -> bool:
    """``left <op> right``; remembers a description for the failure message when false."""
    result = bool(_OPERATORS[op](left, right))
    if not result:
        _last_failure[0] = f"assert {_short_repr(left)} {COMPARISONS[op]} {_short_repr(right)}"
    return result


def _describe(error: BaseException) -> tuple[str, str]:
    """The error's type name and a short message (the program's own, for its exceptions)."""
    origin = getattr(error, _ORIGIN, None)
    if origin is not None:
        name, message = origin
    elif isinstance(error, ProgramError):
        name, message = error.type_name, str(error)
    else:
        name = type(error).__name__
        try:
            message = str(error)
        except Exception:
            message = "<unprintable>"
        if not message and isinstance(error, AssertionError) and _last_failure[0] is not None:
            message = _last_failure[0]
    return name, message[:_MESSAGE_LIMIT]


class JudgeResult(NamedTuple):
    """What the judge concluded about one run.

    Attributes:
        status: ``ok``, ``syntax_error``, ``load_error``, ``timeout`` or ``killed``.
        error: what went wrong, for any status but ``ok``.
        outcomes: one ``[status, error type, message]`` per test.
        stage: where the run stopped, for a timeout or a death (``while loading the
            program``, ``in the test setup``, ``in tests[i]``), else None.
        ended: why the run ended early (:data:`DIED` when it died by itself, else how it
            broke its channel), or None.
    """

    status: str
    error: str | None
    outcomes: list[list[Any]]
    stage: str | None = None
    ended: str | None = None


def judge_namespace() -> dict[str, Any]:
    """The names the judge itself puts where the setup and the tests run.

    These are bound *after* the program's names (see :func:`namespace_for_tests`), so
    no name a program defines can replace one of them; and the worker never asks
    a program about them (:data:`JUDGE_NAMES`).
    """
    return {
        "__builtins__": builtins,
        "__name__": "__sandbox_tests__",
        COMPARE_NAME: _compare,
    }


#: Every name the judge binds in the tests' namespace: never taken from a program.
JUDGE_NAMES = frozenset(judge_namespace())


def namespace_for_tests(report: object, wanted: frozenset[str], channel: Channel) -> dict[str, Any]:
    """The namespace the setup and the tests run in: the program's names, then the judge's.

    The program's names (those of ``wanted`` it reported) are bound first and
    the judge's own (:func:`judge_namespace`) last, over them: whatever names a
    program defines, the comparison the rewritten asserts call, the builtins and
    the module name are the judge's.
    """
    namespace: dict[str, Any] = {}
    bind_program_names(namespace, report, wanted - JUDGE_NAMES, channel)
    namespace.update(judge_namespace())
    return namespace


def bind_program_names(
    namespace: dict[str, Any], report: object, wanted: frozenset[str], channel: Channel
) -> None:
    """Bind the names the program reported: proxies for callables, modules, plain values."""
    if type(report) is not dict:
        return
    for name, kind in report.items():
        if name not in wanted or name in JUDGE_NAMES or type(kind) is not tuple or not kind:
            continue
        if kind[0] == "f" and len(kind) == 1:
            namespace[name] = _proxy(channel.call, name)
        elif kind[0] == "m" and len(kind) == 2 and type(kind[1]) is str:
            module = sys.modules.get(kind[1])
            if type(module) is types.ModuleType and not kind[1].startswith("llm_envs"):
                namespace[name] = module  # the judge's own copy of a module it has loaded
        elif kind[0] == "v" and len(kind) == 2:
            namespace[name] = kind[1]  # plain data, decoded


class HelperRun(NamedTuple):
    """A second program, in a run of its own, whose functions the program calls through the judge.

    Attributes:
        channel: the helper's run.
        job: the helper's job, framed.
        names: the names the program uses that the helper may define.
        program_job: the program's job, framed, given the names bound to the
            helper's functions (known once the helper has loaded).
    """

    channel: Channel
    job: bytes
    names: frozenset[str]
    program_job: Callable[[tuple[str, ...]], bytes]


def _forwarder(
    program: Channel, helper: Channel, functions: frozenset[str]
) -> Callable[[bytes], bytes]:
    """What answers the program's calls of the helper's functions: each goes to the helper's run.

    The judge decodes the call (plain data, as a test's), makes it in the
    helper's run (:meth:`Channel.call`, which counts it), and sends back the
    result, the changed mutable arguments, or the exception's name and message.
    A helper that dies or breaks its channel ends the program's run too.
    """

    def forward(payload: bytes) -> bytes:
        try:
            request = _wire.decode(payload)
        except _wire.WireError as error:
            raise program._broken(f"the program sent a malformed message: {error}") from None
        if not (
            type(request) is tuple
            and len(request) == 4
            and type(request[0]) is str
            and type(request[1]) is tuple
            and type(request[2]) is dict
            and type(request[3]) is tuple
        ):
            raise program._broken("the program sent a malformed call")
        name, args, kwargs, mutable = request
        for slot in mutable:
            if not (
                (type(slot) is int and 0 <= slot < len(args))
                or (type(slot) is str and slot in kwargs)
            ):
                raise program._broken("the program sent a malformed call")
        reply: tuple[Any, ...]
        if name not in functions:
            reply = ("X", "NameError", f"the helper defines no function {name!r}")
        else:
            try:
                result = helper.call(name, args, kwargs)
                changed = tuple(
                    (slot, args[slot] if type(slot) is int else kwargs[slot]) for slot in mutable
                )
                reply = ("R", result, changed)
            except RunEnded:
                why = "its process died" if helper.ended == DIED else helper.ended
                raise program._broken(f"the helper's run ended: {why}") from None
            except RunTimeout:
                raise program._timeout() from None
            except UntrustedValue as error:
                reply = ("U", f"the helper's {name}: {error}"[:_MESSAGE_LIMIT])
            except Exception as error:
                reply = ("X", *_describe(error))
        try:
            data, tagged = _wire.encode(reply, exact=True)
        except _wire.Unsupported as error:  # (only plain data was decoded: not expected)
            data, tagged = _wire.encode(("U", str(error)[:_MESSAGE_LIMIT]))
        return _REQUEST.pack(len(data), tagged) + data

    return forward


def _load_helper(helper: HelperRun) -> tuple[str, str] | frozenset[str]:
    """Send the helper its job; the names of its functions, or why it did not load."""
    helper.channel.send(helper.job)
    kind, payload = helper.channel.receive()
    if kind in (b"P", b"E"):
        try:
            name, message = _wire.decode(payload)
        except (_wire.WireError, TypeError, ValueError):
            name, message = "Error", "<malformed>"
        status = "syntax_error" if kind == b"P" else "load_error"
        return status, f"the helper program: {name}: {message}"
    if kind != b"L":
        raise helper.channel._broken("the helper sent an unexpected message while loading")
    try:
        report = _wire.decode(payload)
    except _wire.WireError as error:
        raise helper.channel._broken(f"the helper sent a malformed message: {error}") from None
    if type(report) is not dict:
        return frozenset()
    return frozenset(
        name for name, kind in report.items() if name in helper.names and kind == ("f",)
    )


def judge(
    channel: Channel,
    job: bytes,
    setup: types.CodeType,
    tests: tuple[types.CodeType, ...],
    wanted: frozenset[str],
    recursion_limit: int,
    helper: HelperRun | None = None,
) -> JudgeResult:
    """Send the run its job, then run the setup and every test here; the verdict.

    Args:
        channel: the run's channel (its job not yet sent).
        job: the run's job, framed (unused with a ``helper``: see there).
        setup: the compiled setup.
        tests: the compiled tests.
        wanted: the names the setup and tests may take from the program.
        recursion_limit: restored before the setup and each test.
        helper: a second program the program calls into, loaded first, in a run
            of its own; its calls are counted (``helper.channel.calls``).
    """
    total = len(tests)
    outcomes: list[list[Any]] = [["not_run", None, None] for _ in range(total)]
    stage = "while loading the program"
    index = 0
    try:
        if helper is not None:
            stage = "while loading the helper"
            functions = _load_helper(helper)
            if type(functions) is tuple:
                return JudgeResult(functions[0], functions[1], outcomes)
            assert isinstance(functions, frozenset)
            job = helper.program_job(tuple(sorted(functions)))
            channel.outside = _forwarder(channel, helper.channel, functions)
            stage = "while loading the program"
        channel.send(job)
        kind, payload = channel.answer()
        if kind in (b"P", b"E"):
            try:
                name, message = _wire.decode(payload)
            except (_wire.WireError, TypeError, ValueError):
                name, message = "Error", "<malformed>"
            status = "syntax_error" if kind == b"P" else "load_error"
            return JudgeResult(status, f"{name}: {message}", outcomes)
        if kind != b"L":
            raise channel._broken("the program sent an unexpected message while loading")
        try:
            report = _wire.decode(payload)
        except _wire.WireError as error:
            raise channel._broken(f"the program sent a malformed message: {error}") from None
        if helper is not None:
            # Only calls made while the setup and the tests run count (not a
            # default argument or a decorator calling the helper at load time).
            helper.channel.calls = 0
        namespace = namespace_for_tests(report, wanted, channel)

        stage = "in the test setup"
        random.seed(0)  # tests that draw random inputs see the same ones on every worker
        sys.setrecursionlimit(recursion_limit)
        try:
            exec(setup, namespace)
        except (RunTimeout, RunEnded):
            raise
        except BaseException as error:
            channel.check()
            name, message = _describe(error)
            return JudgeResult("load_error", f"the test setup raised {name}: {message}", outcomes)
        channel.check()

        for index in range(total):
            stage = f"in tests[{index}]"
            _last_failure[0] = None
            sys.setrecursionlimit(recursion_limit)
            try:
                exec(tests[index], namespace)
                outcome: list[Any] = ["passed", None, None]
            except (RunTimeout, RunEnded):
                raise
            except BaseException as error:
                outcome = ["failed", *_describe(error)]
            channel.check()  # a test that swallowed the end of its run does not pass
            outcomes[index] = outcome
        return JudgeResult("ok", None, outcomes)
    except RunTimeout:
        if stage.startswith("in tests"):
            outcomes[index] = ["timeout", None, None]
        return JudgeResult("timeout", None, outcomes, stage)
    except RunEnded:
        if stage.startswith("in tests"):
            outcomes[index] = ["failed", "ProcessDied", None]
        ended = channel.ended
        if helper is not None and helper.channel.ended is not None and ended is None:
            ended = f"the helper's run ended: {helper.channel.ended}"
        return JudgeResult("killed", None, outcomes, stage, ended)
    finally:
        sys.setrecursionlimit(recursion_limit)
