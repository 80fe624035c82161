"""``/submit``: a completion for a data set's problem, and its verdict."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException

from llm_envs.sandbox.report import TestReport, TestStatus
from llm_envs.sandbox.service.shapes import RunStatus, response
from llm_envs.tasks import CodeProblem, load_coophumaneval, load_humaneval, load_mbpp

__all__ = ["DATASETS", "submission_program"]


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


class Problems:
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


def test_cases(problem: CodeProblem, report: TestReport, pod: str) -> list[dict[str, Any]]:
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
        exec_info = response(status, message, run_result, pod)
        cases.append({"passed": outcome.passed, "exec_info": exec_info, "test_info": info})
    return cases
