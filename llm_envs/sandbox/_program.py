"""The program's side of a run: load the untrusted program, then answer calls from the judge.

Each run is a confined process forked from the spawner (see
:mod:`llm_envs.sandbox._worker`). It executes the program as a module named
``solution``, tells the judge which of the names the tests use the program
defines, then serves calls: the judge sends ``(name, args, kwargs)``, the run
calls the program's function and sends back its result (and every mutable
argument the call changed), or the exception's type name and
message.

Nothing in this process is trusted, this code included: once the program runs,
it can rewrite everything here. That is by design. The verdict is computed by
the judge in another process (:mod:`llm_envs.sandbox._judge`), which reads
only plain data from this one through a strict decoder, so all a program can
change by tampering with this code is what its own functions return, which it
controls anyway. This code only has to be correct and cheap for honest
programs.

Messages to the judge go to :data:`REPLY_FD`, each ``kind (1 byte) + size
(4 bytes, little-endian) + payload`` (payloads in :mod:`._wire`'s format):
``P`` the program does not compile, ``E`` it raised while loading (both with
``(type name, message)``), ``L`` loaded (``{name: ("f",) | ("m", module name)
| ("v", value) | ("u", type name)}``), ``R`` a call returned ``(result,
((slot, new value), ...))`` (the mutable arguments it changed), ``X`` it raised
``(type name, message)``, ``U`` its result cannot cross (the reason), ``C``
the program calls a function of *another* run through the judge (``(name,
args, kwargs, mutable slots)``, see :func:`_outside`).

Every run is forked from a process that imported this module: it imports
only the standard library and :mod:`._wire`.
"""

from __future__ import annotations

import builtins
import io
import marshal
import os
import select
import struct
import sys
import types
from collections.abc import Callable
from typing import Any, NoReturn

from llm_envs.sandbox import _wire

# A private builtins mapping: this module keeps working for honest programs that
# rebind builtins (a program's `builtins.len = ...` reaches only its own code).
globals()["__builtins__"] = dict(vars(builtins))

__all__ = [
    "EXIT_REQUEST",
    "JOB_FD",
    "REPLY_FD",
    "ProgramJob",
    "prepare_process",
    "serve",
    "warm_up",
]

#: The descriptor the run's job, then the judge's calls, arrive on.
JOB_FD = 4
#: The descriptor the run's messages to the judge go to.
REPLY_FD = 3
_MESSAGE_LIMIT = 1000
_FRAME = struct.Struct("<cI")
_REQUEST = struct.Struct("<I?")
#: What the judge sends when the tests are done: the run exits.
EXIT_REQUEST = _REQUEST.pack(0, False)

# Bound once, before any program runs: the serving loop keeps working (for honest
# programs) when a program rebinds os.write or builtins.
_write = os.write
_read = os.read
_select = select.select
_exit = os._exit
_exec = exec
_compile = compile
_loads = marshal.loads
_encode = _wire.encode
_untag = _wire.untag
_refresh = _wire.refresh
_MUTABLE = _wire.MUTABLE
_Unsupported = _wire.Unsupported
_ModuleType = types.ModuleType
_sys_modules = sys.modules
_setrecursionlimit = sys.setrecursionlimit
_pack = _FRAME.pack
_unpack_request = _REQUEST.unpack


def _unbuffered_text(fd: int) -> io.TextIOWrapper:
    # Unbuffered (write_through over a raw file): a run killed at its timeout
    # still shows everything it printed.
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace", write_through=True)


# A run's sys.stdout and sys.stderr (fds 1 and 2 are the run's output files).
_STDIO = (_unbuffered_text(1), _unbuffered_text(2))


def prepare_process(hidden_modules: tuple[str, ...]) -> None:
    """Process-wide preparation, done once in the spawner and inherited by every run.

    Removes the sandbox's own modules from ``sys.modules`` (a program has no
    use for them) and installs the runs' unbuffered stdout and stderr.
    """
    for name in hidden_modules:
        _sys_modules.pop(name, None)
    sys.stdout, sys.stderr = _STDIO
    # The originals wrap the worker's buffered streams: output through them would be lost.
    vars(sys).update(__stdout__=_STDIO[0], __stderr__=_STDIO[1])


def _send(kind: bytes, value: object) -> None:
    """Send one message to the judge (the value's encoding errors propagate)."""
    payload = _encode(value)[0]
    data = _pack(kind, len(payload)) + payload
    while data:
        try:
            data = data[_write(REPLY_FD, data) :]
        except InterruptedError:
            continue
        except OSError:
            _exit(74)  # the program closed or replaced the descriptor


# Bytes read from the job pipe ahead of the message being parsed.
_pending = bytearray()


def _read_exact(size: int) -> bytes:
    """The next ``size`` bytes from the job pipe (read in as few calls as possible)."""
    if len(_pending) >= size:
        data = bytes(_pending[:size])
        del _pending[:size]
        return data
    chunks = [bytes(_pending)]
    size -= len(_pending)
    _pending.clear()
    while size > 0:
        try:
            chunk = _read(JOB_FD, max(size, 4096))
        except (InterruptedError, BlockingIOError):  # (the program made it non-blocking)
            _select((JOB_FD,), (), ())
            continue
        except OSError:
            _exit(75)
        if not chunk:
            _exit(73)  # the worker is gone
        chunks.append(chunk)
        size -= len(chunk)
    data = b"".join(chunks)
    if size < 0:  # read past the message: keep the rest for the next one
        _pending[:] = data[size:]
        data = data[:size]
    return data


def _describe(error: BaseException) -> tuple[str, str]:
    """The error's type name and a short message; never raises."""
    try:
        name = type(error).__name__
        name = name if type(name) is str else "<unnamed>"
    except BaseException:
        name = "<unnamed>"
    try:
        message = str(error)
        message = message if type(message) is str else "<not a str>"
    except BaseException:  # a program-defined __str__ may raise anything
        message = "<unprintable>"
    if isinstance(error, SyntaxError) and type(error.msg) is str:
        message = f"{error.msg} (line {error.lineno})"
    return name[:200], message[:_MESSAGE_LIMIT]


#: A run's job: (program: code object or source, notes, names the tests use,
#: the recursion limit to restore before each call, the names bound to
#: functions of another run, called through the judge).
ProgramJob = tuple[Any, str, tuple[str, ...], int, tuple[str, ...]]


def _reply() -> Any:
    """The judge's next message: a call, or the answer to a call of another run's function."""
    size, tagged = _unpack_request(_read_exact(_REQUEST.size))
    if not size:
        _exit(0)  # the tests are done
    message = _loads(_read_exact(size))
    return _untag(message) if tagged else message


def _raised(type_name: str, message: str) -> Exception:
    """The builtin exception named ``type_name`` with ``message`` (else a ``RuntimeError``)."""
    kind = getattr(builtins, type_name, None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except Exception:  # (UnicodeDecodeError and friends want more arguments)
            pass
    return RuntimeError(f"{type_name}: {message}")


def _outside(name: str) -> Callable[..., Any]:
    """A function that calls ``name`` in another run, through the judge (which counts it).

    Arguments and results cross as plain data, as between a test and the program;
    the mutable arguments come back changed, and the other run's exceptions are
    raised here as the builtin exception of the same name (else ``RuntimeError``).
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        mutable = tuple(i for i, arg in enumerate(args) if type(arg) in _MUTABLE) + tuple(
            key for key, arg in kwargs.items() if type(arg) in _MUTABLE
        )
        try:
            _send(b"C", (name, args, kwargs, mutable))
        except _Unsupported as unsupported:
            raise TypeError(f"{name}() takes only plain data: {unsupported}") from None
        kind, *value = _reply()
        if kind == "R":
            result, changed = value
            for slot, new in changed:
                _refresh(args[slot] if type(slot) is int else kwargs[slot], new)
            return result
        if kind == "X":
            raise _raised(value[0], value[1])
        raise TypeError(f"{name}() returned {value[0]}")

    call.__name__ = call.__qualname__ = name
    return call


def _load(job: ProgramJob) -> dict[str, Any] | None:
    """Execute the program; its namespace, or None after reporting why it did not load."""
    program, notes, _, _, outside = job
    if notes:
        try:  # noqa: SIM105
            _write(2, notes.encode("utf-8", "backslashreplace"))
        except OSError:
            pass
    if type(program) is str:  # too large for the worker to compile: compiled here
        try:
            program = _compile(program, "<program>", "exec", dont_inherit=True, optimize=0)
        except BaseException as error:  # SyntaxError, ValueError (NUL), RecursionError...
            _send(b"P", _describe(error))
            return None
    module = _ModuleType("solution")
    _sys_modules["solution"] = module
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    for name in outside:
        namespace[name] = _outside(name)
    try:
        _exec(program, namespace)
    except BaseException as error:
        _send(b"E", _describe(error))
        return None
    return namespace


def _kind(value: object) -> tuple[Any, ...]:
    if type(value) is _ModuleType:
        name = value.__name__
        return ("m", name) if type(name) is str else ("u", "module")
    if callable(value):
        return ("f",)
    try:
        _encode(value)
    except _Unsupported as error:
        return ("u", str(error))
    except BaseException:
        return ("u", "unencodable")
    return ("v", value)


def serve(job: ProgramJob) -> NoReturn:
    """Load the program, report the names the tests use, then answer calls until killed."""
    try:
        namespace = _load(job)
        if namespace is None:
            _exit(0)
        names = job[2]
        _send(b"L", {name: _kind(namespace[name]) for name in names if name in namespace})
        _serve_calls(namespace, job[3])
    finally:
        _exit(0)


def _serve_calls(namespace: dict[str, Any], recursion_limit: int) -> NoReturn:
    while True:
        name, args, kwargs, mutable = _reply()
        # The mutable arguments as they arrived: only those the call changes go back.
        before = [_encode(args[i] if type(i) is int else kwargs[i])[0] for i in mutable]
        _setrecursionlimit(recursion_limit)
        try:
            function: Callable[..., Any] = namespace[name]
            result = function(*args, **kwargs)
        except BaseException as error:
            _send(b"X", _describe(error))
            continue
        try:
            changed = []
            for slot, old in zip(mutable, before, strict=True):
                value = args[slot] if type(slot) is int else kwargs[slot]
                if _encode(value)[0] != old:
                    changed.append((slot, value))
            _send(b"R", (result, tuple(changed)))
        except _Unsupported as error:
            _send(b"U", str(error))
        except BaseException as error:  # RecursionError, MemoryError while encoding
            _send(b"U", f"{type(error).__name__} while encoding the result")


# A warm-up job: the spawner runs the load and one round of encoding through here
# so that every run inherits specialized code (see _worker).
_WARM_UP_PROGRAM = """\
import math
from typing import List


def f(x: int) -> List[int]:
    values: List[int] = [x, 1]
    return [int(math.fabs(sum(values) + x - 1))]
"""

#: How often :func:`warm_up` runs (Python 3.11 quickens a function after 8 calls
#: and specializes each instruction after a few more executions).
WARM_UP_ROUNDS = 64


def warm_up() -> None:
    """Run a small trusted program's load and result encoding, in the process runs fork from.

    Each run starts from this process's memory, and every page a run writes costs
    a copy-on-write fault. Code the interpreter has not specialized yet writes to
    its own code objects as it executes; doing that here, once, leaves runs fewer
    pages to copy. No state of it is left behind.
    """
    program = _compile(_WARM_UP_PROGRAM, "<program>", "exec", dont_inherit=True, optimize=0)
    job: ProgramJob = (program, "", ("f", "math", "List"), sys.getrecursionlimit(), ())
    for _ in range(WARM_UP_ROUNDS):
        namespace = _load(job)
        assert namespace is not None
        for name in job[2]:
            _kind(namespace[name])
        request = _loads(_encode(("f", (2,), {}, ()))[0])
        name, args, kwargs, _ = request
        _encode((namespace[name](*args, **kwargs), ()))
    _sys_modules.pop("solution", None)
