r"""The sandbox as an HTTP service that speaks SandboxFusion's API.

verl, MARTI, tinker-cookbook and the ``sandbox-fusion`` client send code to a
SandboxFusion server; pointing them at this service instead runs that code in
:class:`~llm_envs.sandbox.Sandbox` workers (a fork of a warm worker per run,
no container start). Start it with::

    python -m llm_envs.sandbox.service --port 8080 --workers 2

Routes (request and response shapes as SandboxFusion's, ``docs/sandbox_service.md``):

* ``POST /run_code``: run a Python script (``code``, ``stdin``, ``files``,
  ``run_timeout``) and answer ``status``, ``message`` and ``run_result``
  (``status``, ``execution_time``, ``return_code``, ``stdout``, ``stderr``).
  The script runs as ``__main__`` with its stdin, its files in its working
  directory, and its exit status as ``return_code``, as ``python main.py``
  would run it (:func:`script_program`). Any other language gets
  SandboxFusion's error shape (``status: "SandboxError"``) saying so.
* ``POST /submit``: a completion for a problem of HumanEval, MBPP (sanitized)
  or CoopHumanEval; the verdict is :func:`~llm_envs.sandbox.run_tests`'s on
  that problem (:func:`submission_program`): ``accepted`` when every test
  passed, one entry of ``tests`` per test.
* ``POST /get_prompts``, ``POST /get_prompt_by_id``, ``POST /list_ids``,
  ``GET /list_datasets``, ``GET /v1/ping``: the problems served, and liveness.

Each process holds one pool; ``--workers N`` runs N processes on one port
(uvicorn's workers share the listening socket), each pinned to its own share
of the CPUs.

This module and :mod:`llm_envs.sandbox.service_main` (which serves it) are
the only ones of ``llm_envs`` that import fastapi and uvicorn, and nothing in
the package imports them. It never executes a request's code itself: every
program goes to the pool, and verdicts come from its reports.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import platform
import posixpath
import re
import signal
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio.to_thread
from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llm_envs.arguments import MAX_TIMEOUT, check_bool, check_int, check_number
from llm_envs.sandbox.pool import DEFAULT_TIMEOUT, Sandbox, SandboxError
from llm_envs.sandbox.report import ProgramStatus, TestReport, TestStatus
from llm_envs.tasks import CodeProblem, load_coophumaneval, load_humaneval, load_mbpp

__all__ = [
    "DATASETS",
    "ScriptJob",
    "ScriptResult",
    "ScriptRunner",
    "ServiceSettings",
    "create_app",
    "main",
    "script_program",
    "script_result",
    "submission_program",
]

PROG = "python -m llm_envs.sandbox.service"

CommandRunStatus = Literal["Finished", "Error", "TimeLimitExceeded"]
RunStatus = Literal["Success", "Failed", "SandboxError"]


# --- settings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceSettings:
    """What one process of the service runs with.

    Attributes:
        pool_workers: sandbox workers of this process, i.e. runs at once
            (None: one per CPU of the process's share).
        timeout: seconds a ``/submit`` run may take when its ``config.run_timeout``
            is None (:data:`~llm_envs.sandbox.DEFAULT_TIMEOUT`, as ``run_tests``).
        max_timeout: the longest ``run_timeout`` a request may ask for, in seconds.
        memory_mb: address-space limit of a run, in MiB.
        output_limit: bytes of stdout and of stderr kept per run.
        max_program_chars: the longest program a run takes: a ``/run_code``
            script with its stdin and files, base64 and all, must fit.
        site_packages: let scripts import installed third-party packages (numpy).
        pin_cpus: keep each pool worker and its runs on one CPU (None: the pool
            decides, see :class:`~llm_envs.sandbox.Sandbox`).
    """

    pool_workers: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_timeout: float = 300.0
    memory_mb: int = 1024
    output_limit: int = 1 << 20
    max_program_chars: int = 16 << 20
    site_packages: bool = False
    pin_cpus: bool | None = None

    def __post_init__(self) -> None:
        if self.pool_workers is not None:
            check_int("pool_workers", self.pool_workers, minimum=1, maximum=4096)
        check_number(
            "max_timeout", self.max_timeout, minimum=0, maximum=MAX_TIMEOUT, open_minimum=True
        )
        check_number(
            "timeout", self.timeout, minimum=0, maximum=self.max_timeout, open_minimum=True
        )
        check_int("memory_mb", self.memory_mb, minimum=1)
        check_int("output_limit", self.output_limit, minimum=1, maximum=16 << 20)
        check_int("max_program_chars", self.max_program_chars, minimum=1 << 10, maximum=1 << 30)
        check_bool("site_packages", self.site_packages)
        if self.pin_cpus is not None:
            check_bool("pin_cpus", self.pin_cpus)

    def sandbox(self) -> Sandbox:
        """A pool with these settings (its workers started)."""
        return Sandbox(
            self.pool_workers,
            timeout=self.timeout,
            memory_mb=self.memory_mb,
            output_limit=self.output_limit,
            site_packages=self.site_packages,
            max_program_chars=self.max_program_chars,
            pin_cpus=self.pin_cpus,
        )


# --- SandboxFusion's request shapes ----------------------------------------------------------


class RunCodeRequest(BaseModel):
    """``POST /run_code``'s body, as SandboxFusion's.

    Other fields, e.g. verl's ``memory_limit_MB``, are ignored: a run's memory
    is the service's ``--memory-mb``.
    """

    model_config = ConfigDict(extra="ignore")

    code: str = Field(description="the script to run")
    language: str = Field(description="the language: only 'python' is served")
    compile_timeout: float = Field(10, description="unused: Python has no compile step")
    run_timeout: float = Field(10, description="wall-clock seconds the script may run")
    stdin: str | None = Field(None, description="what the script reads on its standard input")
    files: dict[str, str | None] = Field(
        default_factory=dict,
        description="relative path -> base64 content, written in the working directory first",
    )
    fetch_files: list[str] = Field(default_factory=list, description="not supported")


class TestConfig(BaseModel):
    """``config`` of a ``/submit`` request, as SandboxFusion's."""

    __test__ = False  # tell pytest this is not a test class
    model_config = ConfigDict(extra="ignore")

    dataset_type: str | None = None
    language: str | None = None
    locale: str | None = None
    is_fewshot: bool | None = None
    compile_timeout: float | None = None
    run_timeout: float | None = None
    custom_extract_logic: str | None = None
    provided_data: list[dict[str, Any]] | dict[str, Any] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class SubmitRequest(BaseModel):
    """``POST /submit``'s body: a completion for problem ``id`` of ``dataset``."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    id: int | str
    completion: str
    config: TestConfig = Field(default_factory=TestConfig)


class PromptsRequest(BaseModel):
    """``POST /get_prompts`` and ``/list_ids``: a page of a data set's problems."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    config: TestConfig = Field(default_factory=TestConfig)
    offset: int = 0
    limit: int = 1_000_000


class PromptByIdRequest(BaseModel):
    """``POST /get_prompt_by_id``: one problem."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    id: int | str
    config: TestConfig = Field(default_factory=TestConfig)


# --- scripts: what /run_code runs ------------------------------------------------------------


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


def _check_files(files: Mapping[str, str | None]) -> tuple[tuple[str, str], ...]:
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


# --- submissions: what /submit runs ------------------------------------------------------------


@dataclass(frozen=True)
class _Dataset:
    prefix: str
    load: Callable[[], tuple[CodeProblem, ...]]


DATASETS: dict[str, str] = {
    "humaneval": "HumanEval's 164 problems (ids 'HumanEval/0' or 0)",
    "humaneval_python": "the same as humaneval, under SandboxFusion's name",
    "mbpp": "MBPP sanitized, its 427 problems (ids 'Mbpp/11' or 11)",
    "coophumaneval": "CoopHumanEval's 82 problems (ids 'CoopHumanEval/0' or 0)",
}
"""The data sets ``/submit`` serves, by the name a request gives."""

_DATASET_SOURCES = {
    "humaneval": _Dataset("HumanEval", load_humaneval),
    "humaneval_python": _Dataset("HumanEval", load_humaneval),
    "mbpp": _Dataset("Mbpp", lambda: load_mbpp("all")),
    "coophumaneval": _Dataset("CoopHumanEval", load_coophumaneval),
}
# A fenced block: an opening ``` with an optional language, its body, a closing ```.
_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
_OPEN_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n")
_PYTHON_FENCES = frozenset({"", "python", "py", "python3"})


def _extract_code(completion: str) -> tuple[str, str | None]:
    """The completion's code and SandboxFusion's ``extracted_type`` for it."""
    blocks = [
        m.group(2) for m in _FENCE.finditer(completion) if m.group(1).lower() in _PYTHON_FENCES
    ]
    if blocks:
        return blocks[-1], "fenced"
    if completion.count("```") % 2:
        opening = _OPEN_FENCE.match(completion, completion.rfind("```"))
        if opening is not None and opening.group(1).lower() in _PYTHON_FENCES:
            return completion[opening.end() :], "incomplete_fenced"
    return completion, "empty" if not completion.strip() else None


def submission_program(problem: CodeProblem, completion: str) -> tuple[str, str, str | None]:
    r"""The program ``/submit`` tests: the problem's prompt followed by the completion's code.

    The code is the completion's last fenced Python (or unlabelled) block, the
    text after an unclosed last fence, or else the whole completion. When it
    defines the entry point (a whole function, or an MBPP program) it follows
    the prompt, whose stub it replaces; otherwise it continues the prompt
    (HumanEval's completions). The rules of ``llm_envs.expert_iteration``'s
    verifier (``extract_code``, ``assemble_program``).

    Returns:
        ``(program, code, extracted_type)``; ``extracted_type`` is ``"fenced"``,
        ``"incomplete_fenced"``, ``"empty"`` or None (the completion as it came).

    Example:
        >>> stub = "def inc(x):\n    '''Add one.'''\n"
        >>> problem = CodeProblem("t/0", stub, "inc", ("assert inc(1) == 2",))
        >>> print(submission_program(problem, "    return x + 1\n")[0], end="")
        def inc(x):
            '''Add one.'''
            return x + 1
    """
    code, extracted = _extract_code(completion)
    defines = re.search(
        rf"^(?:async[ \t]+)?def[ \t]+{re.escape(problem.entry_point)}[ \t]*\(", code, re.M
    )
    program = f"{problem.prompt.rstrip()}\n\n\n{code}" if defines else problem.prompt + code
    return program, code, extracted


class _Problems:
    """The data sets' problems by id, loaded on first use (once per process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, dict[str, CodeProblem]] = {}

    def all(self, dataset: str) -> dict[str, CodeProblem]:
        source = _DATASET_SOURCES.get(dataset)
        if source is None:
            raise HTTPException(
                400, f"dataset {dataset!r} is not served; choose one of {sorted(DATASETS)}"
            )
        with self._lock:
            if dataset not in self._by_id:
                try:
                    problems = source.load()
                except (OSError, ValueError) as error:  # TaskDataNotFoundError is an OSError
                    raise HTTPException(
                        500, f"dataset {dataset!r} cannot be loaded: {error}"
                    ) from error
                self._by_id[dataset] = {problem.task_id: problem for problem in problems}
            return self._by_id[dataset]

    def get(self, dataset: str, problem_id: int | str) -> CodeProblem:
        problems = self.all(dataset)
        prefix = _DATASET_SOURCES[dataset].prefix
        text = str(problem_id)
        task_id = f"{prefix}/{text}" if text.isdigit() else text
        if task_id not in problems:
            example = next(iter(problems))
            raise HTTPException(
                400,
                f"dataset {dataset!r} has no problem with id {problem_id!r}; give a task id such "
                f"as {example!r} or its number {example.rpartition('/')[2]} (POST /list_ids "
                "lists them)",
            )
        return problems[task_id]


# --- the service -------------------------------------------------------------------------------


def _pod_name() -> str:
    """The answers' ``executor_pod_name``: SandboxFusion's ``MY_POD_NAME``, or this process."""
    return os.environ.get("MY_POD_NAME") or f"{platform.node()}:{os.getpid()}"


def _run_result(result: ScriptResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "execution_time": result.execution_time,
        "cpu_time": None,
        "return_code": result.return_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
    }


def _response(
    status: RunStatus, message: str, run_result: dict[str, Any] | None, pod: str
) -> dict[str, Any]:
    return {
        "status": status,
        "message": message,
        "compile_result": None,
        "run_result": run_result,
        "executor_pod_name": pod,
        "files": {},
    }


class _Service:
    """One process's pool, problems and settings; the routes' logic, free of HTTP."""

    def __init__(self, settings: ServiceSettings, script_runner: ScriptRunner | None) -> None:
        self.settings = settings
        self.pool = settings.sandbox()
        self.in_pool = script_runner is None
        self.run_script = script_runner or self._run_in_pool
        self.problems = _Problems()
        self.pod = _pod_name()

    def close(self) -> None:
        self.pool.close()

    def _run_in_pool(self, job: ScriptJob) -> ScriptResult:
        return script_result(self.pool.run_tests(script_program(job), [], timeout=job.timeout))

    def _timeout(self, value: float | None, name: str) -> float:
        if value is None:
            return self.settings.timeout
        if not (0 < value <= self.settings.max_timeout):
            raise HTTPException(
                422,
                f"{name} must be in (0, {self.settings.max_timeout:g}] seconds, got {value!r}; "
                "ask for less, or start the service with a larger --max-timeout",
            )
        return float(value)

    def run_code(self, request: RunCodeRequest) -> dict[str, Any]:
        if request.language != "python":
            return _response(
                "SandboxError",
                f"language {request.language!r} is not served: this service (llm_envs.sandbox) "
                "runs Python only; send language 'python', or use a SandboxFusion server for "
                "other languages",
                None,
                self.pod,
            )
        job = ScriptJob(
            request.code,
            request.stdin,
            _check_files(request.files),
            self._timeout(request.run_timeout, "run_timeout"),
        )
        if self.in_pool:
            size = len(script_program(job))
            if size > self.settings.max_program_chars:
                return _response(
                    "SandboxError",
                    f"code, stdin and files come to {size:,} characters; this service runs at "
                    f"most {self.settings.max_program_chars:,} (--max-program-chars)",
                    None,
                    self.pod,
                )
        try:
            result = self.run_script(job)
        except SandboxError as error:
            return _response("SandboxError", f"the sandbox failed: {error}", None, self.pod)
        notes = [result.note] if result.note else []
        if request.fetch_files:
            notes.append(
                f"fetch_files is not supported (a run leaves no files behind): "
                f"{request.fetch_files!r} not fetched; print what you need instead"
            )
        message = "; ".join(notes)
        if result.status == "Error":
            return _response("SandboxError", message, None, self.pod)
        status: RunStatus = (
            "Success" if result.status == "Finished" and result.return_code == 0 else "Failed"
        )
        return _response(status, message, _run_result(result), self.pod)

    def submit(self, request: SubmitRequest) -> dict[str, Any]:
        config = request.config
        if config.language not in (None, "python"):
            raise HTTPException(400, f"config.language {config.language!r}: only python is served")
        for name in ("custom_extract_logic", "provided_data"):
            if getattr(config, name) is not None:
                raise HTTPException(400, f"config.{name} is not supported; leave it unset (null)")
        problem = self.problems.get(request.dataset, request.id)
        timeout = self._timeout(config.run_timeout, "config.run_timeout")
        program, code, extracted = submission_program(problem, request.completion)
        try:
            report = self.pool.run_tests(
                program,
                problem.tests,
                setup=problem.test_setup,
                timeout=timeout,
                entry_point=problem.entry_point,
            )
        except SandboxError as error:
            raise HTTPException(503, f"the sandbox failed: {error}") from None
        return {
            "id": request.id,
            "accepted": report.all_passed,
            "extracted_code": code,
            "full_code": program,
            "test_code": problem.test_setup + "".join(f"\n{test}" for test in problem.tests),
            "tests": _test_cases(problem, report, self.pod),
            "extracted_type": extracted,
            "extra": {
                "task_id": problem.task_id,
                "program_status": report.status.value,
                "error": report.error,
                "passed": report.passed,
                "total": report.total,
                "pass_rate": report.pass_rate,
            },
        }

    def prompt(self, problem: CodeProblem) -> dict[str, Any]:
        labels = {
            "task_id": problem.task_id,
            "entry_point": problem.entry_point,
            "tests": list(problem.tests),
            "test_setup": problem.test_setup,
        }
        return {"id": problem.task_id, "prompt": problem.prompt, "labels": labels}


def _test_cases(problem: CodeProblem, report: TestReport, pod: str) -> list[dict[str, Any]]:
    """One SandboxFusion ``EvalTestCase`` per test: its outcome, and the run's output."""
    cases = []
    for test, outcome in zip(problem.tests, report.outcomes, strict=True):
        if outcome.passed:
            message = ""
        elif outcome.status is TestStatus.FAILED:
            message = f"{outcome.error_type}: {outcome.message}"
        else:
            message = f"{outcome.status.value}: {report.error or ''}".rstrip(": ")
        timed_out = outcome.status is TestStatus.TIMEOUT
        run_result = {
            "status": "TimeLimitExceeded" if timed_out else "Finished",
            "execution_time": report.duration,
            "cpu_time": None,
            "return_code": None if timed_out else (0 if outcome.passed else 1),
            "stdout": report.stdout,
            "stderr": report.stderr,
        }
        info = {
            "test": test,
            "status": outcome.status.value,
            "error_type": outcome.error_type,
            "message": outcome.message,
        }
        status: RunStatus = "Success" if outcome.passed else "Failed"
        exec_info = _response(status, message, run_result, pod)
        cases.append({"passed": outcome.passed, "exec_info": exec_info, "test_info": info})
    return cases


class _BodyLimit:
    """Refuses request bodies over ``limit`` bytes (413) before they fill the memory."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, self._text())
            return message

        await self.app(scope, limited, send)

    def _text(self) -> str:
        return (
            f"request body over {self.limit:,} bytes; send less, or start the service with a "
            "larger --max-program-chars"
        )

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"detail": self._text()}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def create_app(
    settings: ServiceSettings | None = None, *, script_runner: ScriptRunner | None = None
) -> FastAPI:
    """The service as an ASGI app; its pool starts with the app (lifespan) and closes with it.

    Args:
        settings: the pool's and the routes' settings (default: :class:`ServiceSettings`).
        script_runner: runs ``/run_code``'s scripts instead of the pool (the
            subprocess baseline of ``bench/sandbox_service.py``); ``/submit``
            always uses the pool.
    """
    settings = settings or ServiceSettings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = await anyio.to_thread.run_sync(_Service, settings, script_runner)
        app.state.service = service
        # One thread per pool worker, taken in arrival order: more threads would only
        # wait for a worker inside the pool, all woken at each release.
        app.state.pool_threads = anyio.CapacityLimiter(service.pool.workers)
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(service.close)

    app = FastAPI(
        title="llm_envs.sandbox.service",
        description="SandboxFusion's API, served by llm_envs.sandbox (Python only)",
        lifespan=lifespan,
    )

    def service() -> _Service:
        return app.state.service

    # The answers are plain JSON built by the service: sent as they are, unvalidated.
    @app.post("/run_code", tags=["sandbox"], response_class=JSONResponse)
    async def run_code(request: RunCodeRequest) -> JSONResponse:
        threads = app.state.pool_threads if script_runner is None else None
        answer = await anyio.to_thread.run_sync(service().run_code, request, limiter=threads)
        return JSONResponse(answer)

    @app.post("/submit", tags=["datasets"], response_class=JSONResponse)
    async def submit(request: SubmitRequest) -> JSONResponse:
        threads = app.state.pool_threads
        answer = await anyio.to_thread.run_sync(service().submit, request, limiter=threads)
        return JSONResponse(answer)

    @app.get("/list_datasets", tags=["datasets"])
    def list_datasets() -> list[str]:
        return sorted(DATASETS)

    @app.post("/list_ids", tags=["datasets"])
    def list_ids(request: PromptsRequest) -> list[str]:
        ids = list(service().problems.all(request.dataset))
        return ids[request.offset : request.offset + request.limit]

    @app.post("/get_prompts", tags=["datasets"])
    def get_prompts(request: PromptsRequest) -> list[dict[str, Any]]:
        problems = list(service().problems.all(request.dataset).values())
        page = problems[request.offset : request.offset + request.limit]
        return [service().prompt(problem) for problem in page]

    @app.post("/get_prompt_by_id", tags=["datasets"])
    def get_prompt_by_id(request: PromptByIdRequest) -> dict[str, Any]:
        return service().prompt(service().problems.get(request.dataset, request.id))

    @app.get("/v1/ping", tags=["sandbox"])
    def ping() -> str:
        return "pong"

    # JSON escapes make a body up to 6 bytes per character of the program.
    app.add_middleware(_BodyLimit, limit=6 * settings.max_program_chars + (1 << 16))
    return app


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Run the service until interrupted: :func:`llm_envs.sandbox.service_main.main`."""
    from llm_envs.sandbox import service_main

    return service_main.main(argv, prog=prog)


if __name__ == "__main__":
    raise SystemExit(main())
