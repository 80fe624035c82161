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
import random
import sys
import time
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from llm_envs.sandbox import _wire
from llm_envs.sandbox._channel import (
    CONTROL_FLOW_ERRORS,
    DIED,
    MESSAGE_LIMIT,
    ORIGIN,
    REQUEST,
    Channel,
    ProgramError,
    RunEnded,
    RunTimeout,
    UntrustedValue,
)

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


def _proxy(call: Callable[[str, tuple[Any, ...], dict[str, Any]], Any], name: str) -> Any:
    def proxy(*args: Any, **kwargs: Any) -> Any:
        return call(name, args, kwargs)

    proxy.__name__ = proxy.__qualname__ = name
    proxy.__doc__ = f"The program's {name}, called in its sandboxed run."
    return proxy


_REPR_LIMIT = 200


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
    origin = getattr(error, ORIGIN, None)
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
    return name, message[:MESSAGE_LIMIT]


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
            raise program.end_broken(f"the program sent a malformed message: {error}") from None
        if not (
            type(request) is tuple
            and len(request) == 4
            and type(request[0]) is str
            and type(request[1]) is tuple
            and type(request[2]) is dict
            and type(request[3]) is tuple
        ):
            raise program.end_broken("the program sent a malformed call")
        name, args, kwargs, mutable = request
        for slot in mutable:
            if not (
                (type(slot) is int and 0 <= slot < len(args))
                or (type(slot) is str and slot in kwargs)
            ):
                raise program.end_broken("the program sent a malformed call")
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
                raise program.end_broken(f"the helper's run ended: {why}") from None
            except RunTimeout:
                raise program.time_out() from None
            except UntrustedValue as error:
                reply = ("U", f"the helper's {name}: {error}"[:MESSAGE_LIMIT])
            except Exception as error:
                reply = ("X", *_describe(error))
        try:
            data, tagged = _wire.encode(reply, exact=True)
        except _wire.Unsupported as error:  # (only plain data was decoded: not expected)
            data, tagged = _wire.encode(("U", str(error)[:MESSAGE_LIMIT]))
        return REQUEST.pack(len(data), tagged) + data

    return forward


def _load_failure(kind: bytes, payload: bytes) -> tuple[str, str]:
    """The status and error of a ``P`` (does not compile) or ``E`` (raised loading) message."""
    try:
        name, message = _wire.decode(payload)
    except (_wire.WireError, TypeError, ValueError):
        name, message = "Error", "<malformed>"
    return ("syntax_error" if kind == b"P" else "load_error"), f"{name}: {message}"


def _load_helper(helper: HelperRun) -> tuple[str, str] | frozenset[str]:
    """Send the helper its job; the names of its functions, or why it did not load."""
    helper.channel.send(helper.job)
    kind, payload = helper.channel.receive()
    if kind in (b"P", b"E"):
        status, error = _load_failure(kind, payload)
        return status, f"the helper program: {error}"
    if kind != b"L":
        raise helper.channel.end_broken("the helper sent an unexpected message while loading")
    try:
        report = _wire.decode(payload)
    except _wire.WireError as error:
        raise helper.channel.end_broken(f"the helper sent a malformed message: {error}") from None
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
            return JudgeResult(*_load_failure(kind, payload), outcomes)
        if kind != b"L":
            raise channel.end_broken("the program sent an unexpected message while loading")
        channel.loaded_at = time.monotonic()
        try:
            report = _wire.decode(payload)
        except _wire.WireError as error:
            raise channel.end_broken(f"the program sent a malformed message: {error}") from None
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
