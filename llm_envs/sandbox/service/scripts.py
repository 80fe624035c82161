"""``/run_code``: a script run as ``__main__``, its result as SandboxFusion's."""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException

from llm_envs.sandbox.report import ProgramStatus, TestReport
from llm_envs.sandbox.service.shapes import CommandRunStatus

__all__ = [
    "ScriptJob",
    "ScriptResult",
    "ScriptRunner",
    "program_chars",
    "script_program",
    "script_result",
]


@dataclass(frozen=True)
class ScriptJob:
    """One ``/run_code`` request, checked.

    Attributes:
        code: the script.
        stdin: its standard input (None: empty).
        files: ``(relative path, base64 content)`` pairs, written before it runs.
        timeout: wall-clock seconds.
    """

    code: str
    stdin: str | None = None
    files: tuple[tuple[str, str], ...] = ()
    timeout: float = 10.0


@dataclass(frozen=True)
class ScriptResult:
    """How a script ran: SandboxFusion's ``run_result``, plus a note for ``message``.

    Attributes:
        status: ``"Finished"`` (it exited), ``"TimeLimitExceeded"``, or ``"Error"``
            (the executor failed: SandboxFusion's ``SandboxError``).
        return_code: the exit status (a signal's negative number when one killed
            it; None on a timeout).
        stdout: what it wrote to its standard output.
        stderr: what it wrote to its standard error (a traceback when it raised).
        execution_time: wall-clock seconds.
        note: why it failed or what was cut, for the response's ``message``.
    """

    status: CommandRunStatus
    return_code: int | None
    stdout: str = ""
    stderr: str = ""
    execution_time: float = 0.0
    note: str = ""


ScriptRunner = Callable[[ScriptJob], ScriptResult]
"""Runs ``/run_code``'s scripts; the default runs them in the process's pool."""

# Runs in the script's own sandboxed process, as the program the sandbox loads:
# the script becomes `__main__` (its `if __name__ == "__main__":` block runs),
# with its stdin on descriptor 0, its files and the working directory on
# sys.path, as `python main.py` would. Uncaught exceptions print their traceback
# and propagate (the report's LOAD_ERROR), a non-zero exit status is re-raised
# as `SystemExit(status)`, exit status 0 returns (the report's OK); the run
# flushes the streams. Only the standard library is used, and nothing is
# imported on the usual path. No `finally`: the worker compiles a program ahead
# of its run unless its text has one (then the run compiles it, which costs it
# a millisecond or two of page faults).
_SCRIPT = r"""def _llm_envs_script(code, stdin, files):
    import os, sys, types
    if files:
        import binascii
        for path, data in files:
            folder = os.path.dirname(path)
            if folder:
                os.makedirs(folder, exist_ok=True)
            with open(path, "wb") as file:
                file.write(binascii.a2b_base64(data))
    if stdin:
        fd = os.open(".", os.O_TMPFILE | os.O_RDWR, 0o600)
        os.write(fd, stdin.encode("utf-8", "surrogatepass"))
        os.lseek(fd, 0, 0)
        os.dup2(fd, 0)
        os.close(fd)
        sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", closefd=False)
    sys.argv = ["main.py"]
    sys.path.insert(0, os.getcwd())
    main = types.ModuleType("__main__")
    main.__file__ = "main.py"
    sys.modules["__main__"] = main
    try:
        exec(compile(code, "main.py", "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exit:
        status = exit.code
        if status is not None and not isinstance(status, int):
            print(status, file=sys.stderr)
            status = 1
        if status and status & 255:
            raise SystemExit(status & 255) from None
    except BaseException as error:
        import linecache, traceback
        lines = [line if line.endswith("\n") else line + "\n" for line in code.splitlines(True)]
        linecache.cache["main.py"] = (len(code), None, lines, "main.py")
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        raise


_llm_envs_script(%s, %s, %s)
"""
_SYSTEM_EXIT = re.compile(r"SystemExit: ([0-9]+)")
_EXITED = re.compile(r"exited with code (-?[0-9]+)")
_SIGNAL = re.compile(r"\b(SIG[A-Z0-9]+)\b")


def script_program(job: ScriptJob) -> str:
    r"""The program the sandbox runs for a ``/run_code`` script: the script as ``__main__``.

    The script, its stdin and its files are literals of a small launcher that
    runs in the script's own process: it writes the files, puts the stdin on
    descriptor 0, then executes the script as module ``__main__`` named
    ``main.py``, with the working directory first on ``sys.path``. An uncaught
    exception prints its traceback to stderr; ``sys.exit(n)`` ends it with
    status ``n`` (:func:`script_result` reads the report).

    Example:
        >>> from llm_envs.sandbox import run_tests
        >>> job = ScriptJob("a, b = map(int, input().split())\nprint(a + b)", stdin="2 3\n")
        >>> run_tests(script_program(job), []).stdout
        '5\n'
    """
    return _SCRIPT % (repr(job.code), repr(job.stdin), repr(job.files))


def program_chars(job: ScriptJob) -> int:
    r"""The characters of a script that ``--max-program-chars`` counts: the request's own.

    ``code``, ``stdin``, and each file's path and base64 content; not the
    launcher :func:`script_program` wraps them in, nor the escapes of its literals.

    Example:
        >>> program_chars(ScriptJob("print(1)", "x\n", (("a.txt", "eA=="),)))
        19
    """
    files = sum(len(path) + len(content) for path, content in job.files)
    return len(job.code) + len(job.stdin or "") + files


def script_result(report: TestReport) -> ScriptResult:
    """What a report of :func:`script_program` means as SandboxFusion's ``run_result``.

    ``OK`` is exit status 0; ``LOAD_ERROR`` the script's ``sys.exit(n)``, or 1 for
    an uncaught exception (as Python's); ``KILLED`` the status the process ended
    with (``os._exit(n)``; a signal's negative number); ``TIMEOUT`` is
    ``TimeLimitExceeded``. The report's error is the note.

    Example:
        >>> report = TestReport(ProgramStatus.LOAD_ERROR, (), error="SystemExit: 3")
        >>> script_result(report).return_code
        3
    """
    note = report.error or ""
    if report.output_truncated:
        note = f"{note}; " if note else ""
        note += "stdout or stderr was cut to the service's output limit (--output-limit)"
    status: CommandRunStatus = "Finished"
    code: int | None
    if report.status is ProgramStatus.OK:
        code = 0
    elif report.status is ProgramStatus.TIMEOUT:
        status, code = "TimeLimitExceeded", None
    elif report.status is ProgramStatus.KILLED:
        code = _killed_status(report.error or "")
    else:  # LOAD_ERROR, SYNTAX_ERROR
        exit_status = _SYSTEM_EXIT.fullmatch(report.error or "")
        code = int(exit_status.group(1)) if exit_status else 1
    return ScriptResult(status, code, report.stdout, report.stderr, report.duration, note)


def _killed_status(error: str) -> int:
    """The exit status the sandbox's wording of a death gives (a signal: its negative)."""
    exited = _EXITED.search(error)
    if exited:
        return int(exited.group(1))
    named = _SIGNAL.search(error)
    if named and named.group(1) in signal.Signals.__members__:
        return -signal.Signals[named.group(1)].value
    return -signal.SIGKILL.value


def check_files(files: Mapping[str, str | None]) -> tuple[tuple[str, str], ...]:
    """``files`` as ``(path, base64)`` pairs; None contents skipped (as SandboxFusion)."""
    checked = []
    for path, content in files.items():
        if content is None:
            continue
        normal = posixpath.normpath(path) if path else ""
        if not normal or normal.startswith(("/", "../")) or normal in (".", ".."):
            raise HTTPException(
                422,
                f"files: {path!r} is not a path inside the working directory; give relative "
                "paths such as 'data/input.txt'",
            )
        try:
            base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise HTTPException(
                422, f"files[{path!r}] is not base64; encode each file's bytes with base64"
            ) from None
        checked.append((normal, content))
    return tuple(checked)


def run_result(result: ScriptResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "execution_time": result.execution_time,
        "cpu_time": None,
        "return_code": result.return_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
    }
