"""The test harness that runs inside each sandboxed process.

A run executes the untrusted program, then the setup, then each test, and
reports every step as a record on a file descriptor that only the harness
writes to (never stdout). The harness is hardened against the program it runs:

* Everything the harness calls at run time was bound before the program
  started: this module gets a private copy of ``builtins`` and binds module
  functions (``os.write``, ``exec``...) to names of its own, so rebinding
  ``builtins.exec``, ``AssertionError`` or ``os.write`` changes nothing here.
* Tests run in a namespace of their own, with a pristine builtins snapshot and
  copies of the pre-imported standard modules, so ``math.isclose = lambda *a: True``
  or ``len = ...`` in the program does not reach them.
* Test asserts are rewritten by the worker
  (:func:`llm_envs.sandbox._compile.prepare_tests`) so that every value the
  program produces is checked here before an operator or a truth test touches
  it: operands of comparisons, arithmetic, ``not``/``and``/``or`` and the
  asserted value itself must be plain built-in values (exact types,
  recursively); values passed between calls must be of types the program
  cannot redefine. An object whose ``__eq__`` always returns True, or an
  ``int`` subclass, fails the test.
* An audit hook blocks the introspection that would reach the harness's state:
  frames (``sys._getframe``, ``tb_frame``...), tracing, the garbage collector's
  object lists, ``ctypes``, signal handlers, and other audit hooks.

Every run is forked from a process that imported this module, so what it
imports is in the memory of every run: only what the run itself needs (the
worker's compiler, with ``ast``, lives in :mod:`llm_envs.sandbox._compile`).

This module must never import anything outside the standard library (it runs
in a bare ``-I -S`` interpreter), never look anything up in a shared module at
run time, and never trust a value the program produced without checking its type.
"""

from __future__ import annotations

import builtins
import collections
import decimal
import io
import operator
import os
import re
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn

# A private builtins mapping for this module: functions defined below resolve
# builtin names here, so a program that rebinds builtins.exec / BaseException /
# isinstance cannot change what the harness calls.
globals()["__builtins__"] = dict(vars(builtins))

__all__ = [
    "COMPARE_NAME",
    "COMPARISONS",
    "LENIENT_NAME",
    "RESULT_FD",
    "STRICT_NAME",
    "ChildJob",
    "UntrustedValue",
    "build_module_snapshot",
    "prepare_process",
    "run_child",
    "warm_up",
]

#: The descriptor a run writes its records to (the worker dup2s its results file here).
RESULT_FD = 3
_MESSAGE_LIMIT = 1000
_REPR_LIMIT = 200
_CHECK_BUDGET = 1_000_000
_PY_TPFLAGS_IMMUTABLETYPE = 1 << 8

#: The names under which rewritten tests call the harness's checks.
STRICT_NAME = "__sandbox_strict__"
LENIENT_NAME = "__sandbox_lenient__"
COMPARE_NAME = "__sandbox_compare__"

# Bound once, before any program runs (see the module docstring).
_write = os.write
_getpid = os.getpid
_exit = os._exit
_exec = exec
_compile = compile
_ModuleType = types.ModuleType
_sys_modules = sys.modules
_setrecursionlimit = sys.setrecursionlimit
_addaudithook = sys.addaudithook
_type_name: Callable[[type], str] = type.__dict__["__name__"].__get__
_type_flags: Callable[[type], int] = type.__dict__["__flags__"].__get__
_dict_items = dict.items
_real_builtins = builtins
_original_import = builtins.__import__
_PRISTINE_BUILTINS: dict[str, Any] = dict(vars(builtins))


class UntrustedValue(Exception):
    """A test met a value of a type the program could have given arbitrary behavior."""


class SandboxRestriction(ValueError):
    """An operation the sandbox blocks (frame access, tracing, ctypes...).

    A ValueError, because the standard library already tolerates one from
    ``sys._getframe`` (``collections.namedtuple``, ``typing``, ``enum`` and
    ``logging`` fall back when frames are unavailable).
    """


# --- trusted values -------------------------------------------------------------------------

# Values whose comparisons, arithmetic and truth are implemented in C and cannot
# be redefined by a program (the exact types, not subclasses).
_SCALARS = frozenset(
    {
        type(None),
        bool,
        int,
        float,
        complex,
        str,
        bytes,
        bytearray,
        range,
        type,
        type(Ellipsis),
        type(NotImplemented),
        decimal.Decimal,
        re.Match,  # compares by identity, always true
        re.Pattern,
    }
)
_SEQUENCES = frozenset({list, tuple, set, frozenset, collections.deque})
_MAPPINGS = frozenset({dict, collections.OrderedDict, collections.defaultdict})
# Pure-Python containers that solutions commonly return: trusted like dicts only
# while their class is exactly as the worker imported it (a program could
# otherwise rebind Counter.__eq__).
_PYTHON_MAPPINGS: dict[type, tuple[tuple[str, object], ...]] = {
    collections.Counter: tuple(vars(collections.Counter).items()),
}
_mappingproxy_get = type(vars(object)).get


def _intact(kind: type) -> bool:
    """Whether a class in _PYTHON_MAPPINGS still has exactly its original attributes."""
    original = _PYTHON_MAPPINGS[kind]
    namespace = vars(kind)
    if len(namespace) != len(original):
        return False
    return all(_mappingproxy_get(namespace, name) is value for name, value in original)


def _untrusted(kind: type, strict: bool) -> UntrustedValue:
    name = _type_name(kind)
    if strict:
        return UntrustedValue(
            f"the test compared or tested a value of type {name}; tests accept only plain "
            "built-in values (None, bool, int, float, complex, str, bytes, and lists, tuples, "
            "sets and dicts of them)"
        )
    return UntrustedValue(
        f"the program returned a value of type {name}, whose behavior the program can redefine"
    )


def _walk(root: object, strict: bool) -> None:
    pending: list[Any] = [root]
    budget = _CHECK_BUDGET
    while pending:
        value = pending.pop()
        kind = type(value)
        if kind in _SCALARS:
            continue
        budget -= 1
        if kind in _SEQUENCES:
            budget -= len(value)
            for item in value:
                if type(item) not in _SCALARS:
                    pending.append(item)
        elif kind in _MAPPINGS or (kind in _PYTHON_MAPPINGS and _intact(kind)):
            budget -= 2 * len(value)
            for key, item in _dict_items(value):
                if type(key) not in _SCALARS:
                    pending.append(key)
                if type(item) not in _SCALARS:
                    pending.append(item)
        elif strict or not _type_flags(kind) & _PY_TPFLAGS_IMMUTABLETYPE:
            raise _untrusted(kind, strict)
        if budget < 0:
            raise UntrustedValue(
                f"the value is too large (or cyclic) to verify: over {_CHECK_BUDGET} items"
            )


def _strict(value: object) -> object:
    """Pass ``value`` through if it is a plain built-in value, recursively; else raise."""
    if type(value) not in _SCALARS:
        _walk(value, True)
    return value


def _lenient(value: object) -> object:
    """Pass ``value`` through if no part of it has a type the program could have defined."""
    if type(value) not in _SCALARS:
        _walk(value, False)
    return value


_OPERATORS: tuple[Callable[[Any, Any], Any], ...] = (
    operator.eq,
    operator.ne,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    operator.is_,
    operator.is_not,
    lambda item, container: operator.contains(container, item),
    lambda item, container: not operator.contains(container, item),
)
_SYMBOLS = ("==", "!=", "<", "<=", ">", ">=", "is", "is not", "in", "not in")
#: The comparison operators a rewritten test passes to ``__sandbox_compare__``, by
#: their index in _OPERATORS and _SYMBOLS.
COMPARISONS = _SYMBOLS
# The description of the last failed comparison, for the test's failure message.
_last_failure: list[str | None] = [None]


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # huge ints (ValueError), deep nesting (RecursionError)
        return f"<{_type_name(type(value))}>"
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def _compare(left: object, right: object, op: int) -> bool:
    """``left <op> right`` on checked values; remembers a description when it is false."""
    if op < 6 or op > 7:  # identity (`is`, `is not`) cannot be redefined: any value goes
        _strict(left)
        _strict(right)
    result = bool(_OPERATORS[op](left, right))
    if not result:
        _last_failure[0] = f"assert {_short_repr(left)} {_SYMBOLS[op]} {_short_repr(right)}"
    return result


# --- the run --------------------------------------------------------------------------------

# Filled by build_module_snapshot() in the worker, before any program runs.
_SNAPSHOT: dict[str, types.ModuleType] = {}
_SNAPSHOT_BY_MODULE: dict[types.ModuleType, types.ModuleType] = {}
_TEST_BUILTINS: dict[str, Any] = {}


def _test_import(
    name: str,
    globals: dict[str, Any] | None = None,
    locals: dict[str, Any] | None = None,
    fromlist: Sequence[str] | None = (),
    level: int = 0,
) -> types.ModuleType:
    """``__import__`` for tests: the worker's snapshot copies for pre-imported modules."""
    if level == 0 and type(name) is str:
        if fromlist:
            copy = _SNAPSHOT.get(name)
            if copy is not None and all(item == "*" or item in copy.__dict__ for item in fromlist):
                return copy
        elif name in _SNAPSHOT:
            return _SNAPSHOT[name.partition(".")[0]]
    module: types.ModuleType = _original_import(name, globals, locals, fromlist, level)
    return module


def _unbuffered_text(fd: int) -> io.TextIOWrapper:
    # Unbuffered (write_through over a raw file): a run killed at its timeout
    # still shows everything it printed.
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(
        raw,
        encoding="utf-8",
        errors="backslashreplace",
        write_through=True,
    )


# A run's sys.stdout and sys.stderr, built once in the worker (fds 1 and 2 are the
# run's output files in its process).
_STDIO = (_unbuffered_text(1), _unbuffered_text(2))


def build_module_snapshot(skip: Sequence[str]) -> None:
    """Copy every module imported so far, for tests to import instead of the real ones.

    A copy is a new module object with the same attributes, so a program that
    rebinds ``math.isclose`` changes the real module, not the copy the tests see.
    Submodule attributes point at the copies too. Call once in the worker,
    before forking.

    Args:
        skip: module names (and their submodules) to leave out, e.g. the sandbox's own.
    """
    excluded = tuple(skip)
    real: dict[str, types.ModuleType] = {}
    for name, module in list(_sys_modules.items()):
        if type(module) is not types.ModuleType or name in ("sys", "builtins", "__main__"):
            continue
        if any(name == prefix or name.startswith(prefix + ".") for prefix in excluded):
            continue
        real[name] = module
    copies = {}
    for name, module in real.items():
        copy = types.ModuleType(name)
        copy.__dict__.update(module.__dict__)
        copies[name] = copy
    by_module = {real[name]: copies[name] for name in real}
    for copy in copies.values():
        for attribute, value in list(copy.__dict__.items()):
            if type(value) is types.ModuleType and value in by_module:
                copy.__dict__[attribute] = by_module[value]
    _SNAPSHOT.clear()
    _SNAPSHOT.update(copies)
    _SNAPSHOT_BY_MODULE.clear()
    _SNAPSHOT_BY_MODULE.update(by_module)
    _TEST_BUILTINS.clear()
    _TEST_BUILTINS.update(_PRISTINE_BUILTINS)
    _TEST_BUILTINS["__import__"] = _test_import


_BLOCKED_EVENTS = frozenset(
    {
        "sys.settrace",
        "sys.setprofile",
        "sys._getframe",
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.addaudithook",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    }
)
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_BLOCKED_IMPORTS = frozenset(
    {
        "ctypes",
        "_ctypes",
        "_signal",
        "_testcapi",
        "_testinternalcapi",
        "_testbuffer",
        "_xxsubinterpreters",
        "_xxinterpchannels",
    }
)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Block the operations that reach harness state (see the module docstring)."""
    if event in _BLOCKED_EVENTS:
        raise SandboxRestriction(f"{event} is not allowed in the sandbox")
    if event == "object.__getattr__":
        if args[1] in _FRAME_ATTRIBUTES:
            raise SandboxRestriction(f"frame access ({args[1]}) is not allowed in the sandbox")
    elif event == "import":
        if args[0] in _BLOCKED_IMPORTS:
            raise SandboxRestriction(f"importing {args[0]} is not allowed in the sandbox")
    elif event == "open":
        path = args[0]
        if type(path) is bytes:
            path = path.decode("utf-8", "replace")
        if type(path) is str and path.startswith("/proc/") and path.endswith("/mem"):
            raise SandboxRestriction("opening process memory is not allowed in the sandbox")
    elif event[:7] == "ctypes.":
        raise SandboxRestriction(f"{event} is not allowed in the sandbox")


def _text(value: object) -> str:
    return value if type(value) is str else "<not a str>"


def _describe(error: BaseException) -> tuple[str, str]:
    """The error type's name and a short message; never raises."""
    name = _type_name(type(error))
    try:
        message = _text(str(error))
    except BaseException:  # a program-defined __str__ may raise anything
        message = "<unprintable>"
    if not message and name == "AssertionError" and _last_failure[0] is not None:
        message = _last_failure[0]
    return name, message[:_MESSAGE_LIMIT]


class ChildJob(NamedTuple):
    """What one sandboxed process runs (a plain tuple, so the worker can marshal it).

    Attributes:
        program: the untrusted program, compiled by the worker (a code object),
            or its source when it is too large for the worker to compile.
        notes: what compiling it in the worker printed (warnings); the run writes
            it to its stderr, where compiling here would have printed it.
        setup: the compiled, rewritten setup.
        tests: one compiled, rewritten code object per test.
        entry_point: a program name the tests may see even if it shadows a builtin.
        token: the secret that authenticates this run's records.
        recursion_limit: restored before every test.
    """

    program: str | types.CodeType
    notes: str
    setup: types.CodeType
    tests: tuple[types.CodeType, ...]
    entry_point: str | None
    token: str
    recursion_limit: int


def prepare_process(hidden_modules: Sequence[str]) -> None:
    """Process-wide preparation, done once in the spawner and inherited by every run.

    Hides the sandbox's own modules (and ``ctypes``) from ``sys.modules``, removes
    ``_signal`` so that no program can install a signal handler (handlers receive
    the interrupted frame, a harness frame), and installs the runs' unbuffered
    stdout and stderr.

    Args:
        hidden_modules: names to remove from ``sys.modules``.
    """
    for name in hidden_modules:
        _sys_modules.pop(name, None)
    signal_module = _sys_modules.get("signal")
    if signal_module is not None:
        signal_module.__dict__.pop("_signal", None)
    _sys_modules.pop("_signal", None)
    sys.stdout, sys.stderr = _STDIO
    # The originals wrap the worker's buffered streams: output through them would be lost.
    vars(sys).update(__stdout__=_STDIO[0], __stderr__=_STDIO[1])


def _recorder(token: str, fd: int) -> Callable[..., None]:
    """The function that writes this run's records (see :func:`run_child`) to ``fd``."""

    def record(kind: str, index: int = 0, error_type: str = "", message: str = "") -> None:
        line = "\n%s %d %s %d %s %s\n" % (  # noqa: UP031 (str.format is a method lookup)
            token,
            _getpid(),
            kind,
            index,
            error_type.encode("utf-8", "replace").hex() or "-",
            message.encode("utf-8", "replace").hex() or "-",
        )
        # (Not contextlib.suppress: its code looks builtins up in the program's reach.)
        try:  # noqa: SIM105
            _write(fd, line.encode("ascii"))
        except OSError:
            pass  # the program closed or replaced the descriptor: its records are lost

    return record


def _run(job: ChildJob, record: Callable[..., None]) -> None:
    """Run the program, the setup and each test, recording every step; return at the end.

    A step that ends the run (the program does not compile, raises while loading,
    or the setup raises) is recorded and the function returns.
    """
    program = job.program
    if isinstance(program, str):  # (the worker's value: trusted)
        try:
            code = _compile(program, "<program>", "exec", dont_inherit=True, optimize=0)
        except BaseException as error:  # SyntaxError, ValueError (NUL), RecursionError...
            name, message = _describe(error)
            if isinstance(error, SyntaxError):  # (compile raises only the builtin kinds)
                message = f"{error.msg} (line {error.lineno})"
            record("P", 0, name, message)
            return
    else:
        code = program

    module = _ModuleType("solution")
    _sys_modules["solution"] = module
    namespace = module.__dict__
    namespace["__builtins__"] = _real_builtins
    try:
        _exec(code, namespace)
    except BaseException as error:
        record("E", 0, *_describe(error))
        return
    record("L")

    tests_namespace: dict[str, Any] = {}
    for name, value in list(_dict_items(namespace)):
        if type(name) is not str or name[:2] == "__":
            continue
        if name in _PRISTINE_BUILTINS and name != job.entry_point:
            continue  # a program's `len = ...` must not reach the tests
        if type(value) is _ModuleType:
            value = _SNAPSHOT_BY_MODULE.get(value, value)
        tests_namespace[name] = value
    tests_namespace["__builtins__"] = _TEST_BUILTINS
    tests_namespace["__name__"] = "__sandbox_tests__"
    tests_namespace[STRICT_NAME] = _strict
    tests_namespace[LENIENT_NAME] = _lenient
    tests_namespace[COMPARE_NAME] = _compare

    _setrecursionlimit(job.recursion_limit)
    try:
        _exec(job.setup, tests_namespace)
    except BaseException as error:
        record("F", 0, *_describe(error))
        return
    record("S")

    tests = job.tests
    for index in range(len(tests)):
        _last_failure[0] = None
        _setrecursionlimit(job.recursion_limit)
        try:
            _exec(tests[index], tests_namespace)
        except BaseException as error:
            record("X", index, *_describe(error))
            continue
        record("T", index)
    record("D")


def run_child(job: ChildJob) -> NoReturn:
    """Run one program and its tests in this (confined, prepared) process, then exit.

    Records go to :data:`RESULT_FD`, one per line:
    ``<token> <pid> <kind> <index> <hex error type> <hex message>`` with kinds
    ``P`` (does not compile), ``E`` (raised while loading), ``L`` (loaded),
    ``F`` (setup raised), ``S`` (setup done), ``T`` (test passed), ``X`` (test
    failed) and ``D`` (done). The pid lets the worker ignore records from
    processes the program forked.

    Args:
        job: what to run.
    """
    try:
        _addaudithook(_audit)
        if job.notes:
            try:  # noqa: SIM105 (see _recorder)
                _write(2, job.notes.encode("utf-8", "backslashreplace"))
            except OSError:
                pass
        _run(job, _recorder(job.token, RESULT_FD))
    finally:
        _exit(0)


# A job in the form the worker sends: the tests are written as the worker's rewriting
# (llm_envs.sandbox._compile) turns `assert f(2) == 4`, `assert f(1)` and a failing
# `assert f(3) == 5` into code that calls the checks.
_WARM_UP_PROGRAM = """\
import math
from typing import List


def f(x: int) -> int:
    values: List[int] = [x, 1]
    return int(math.fabs(sum(values) + x - 1))
"""
_WARM_UP_SETUP = "import math\ncandidate = f"
_WARM_UP_TESTS = (
    f"assert {COMPARE_NAME}({LENIENT_NAME}(candidate({LENIENT_NAME}(2))), 4, 0)",
    f"assert {STRICT_NAME}({LENIENT_NAME}(candidate({LENIENT_NAME}(1))))",
    f"assert {COMPARE_NAME}({LENIENT_NAME}(candidate({LENIENT_NAME}(3))), 5, 0)",
    f"assert {COMPARE_NAME}({LENIENT_NAME}({LENIENT_NAME}(math).isclose("
    f"{LENIENT_NAME}(1.0), {LENIENT_NAME}(1.0))), True, 0)",
)
#: How often :func:`warm_up` runs its job: enough for the interpreter to specialize
#: the harness's code (Python 3.11 quickens a function after 8 calls, and then
#: specializes each instruction after a few more executions).
WARM_UP_ROUNDS = 64


def warm_up(fd: int) -> None:
    """Run a small trusted job through the harness, in the process runs are forked from.

    Each run starts from this process's memory, and every page a run writes costs
    a copy-on-write fault. Code the interpreter has not specialized yet writes to
    its own code objects as it executes (counters, quickened instructions), and
    first lookups fill the type attribute cache; doing both here, once, leaves
    runs fewer pages to copy. The job's records go to ``fd`` (a ``/dev/null``),
    and no state of it is left behind.

    Args:
        fd: a writable descriptor that discards what is written.
    """
    program = _compile(_WARM_UP_PROGRAM, "<program>", "exec", dont_inherit=True, optimize=0)
    setup = _compile(_WARM_UP_SETUP, "<setup>", "exec", dont_inherit=True, optimize=0)
    tests = tuple(
        _compile(test, f"<tests[{index}]>", "exec", dont_inherit=True, optimize=0)
        for index, test in enumerate(_WARM_UP_TESTS)
    )
    limit = sys.getrecursionlimit()
    job = ChildJob(program, "", setup, tests, None, "0" * 24, limit)
    for _ in range(WARM_UP_ROUNDS):
        _run(job, _recorder(job.token, fd))
        for event, arguments in (("exec", (program,)), ("import", ("math",)), ("open", ("a",))):
            _audit(event, arguments)
        _test_import("math")
        _test_import("collections", fromlist=("Counter",))
    _sys_modules.pop("solution", None)
    _last_failure[0] = None
    sys.setrecursionlimit(limit)
