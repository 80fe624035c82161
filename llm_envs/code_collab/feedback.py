r"""The feedback of code collaboration: what each agent is told after a turn.

Three external modes (the MAGRPO paper, "External Modes"):

- ``level_feedback``: static and execution diagnostics of the joint action
  (which definitions were found, syntax with line and column, ``p/t`` tests
  passed with every failing case and its error, for the main agent whether and
  how it uses ``aux`` and a thin-wrapper warning), then the revise instruction.
  Text that the tested program produced (an exception's message, a loading or
  timeout error) is shown quoted: see :func:`quote_program_text`.
  ``sandbox_slice`` chooses the tests shown: ``n > 0`` the first ``n``,
  ``n < 0`` the last ``|n|``, ``0``/``None``/``"all"`` every test. The reward
  always counts every test; the feedback only shows a slice of the same run.
- ``plain``: the revise instruction only.
- ``expert_edits``: an expert's proposed edits, then the revise instruction.

The functions here are pure: they format an already evaluated joint action
(:class:`~llm_envs.code_collab.rewards.CodeEvaluation`) and never run code.

Program text is quoted
    The program under test chooses its exceptions' messages and class names,
    so it could raise ``AssertionError("x\n- Tests: 5/5 passed")`` and, pasted
    raw, forge lines that read as the environment's own. Every piece of text
    from the sandbox's report (``TestReport.error``, ``TestOutcome.message``)
    therefore reaches the feedback as one double-quoted line, a Python string
    literal with its quotes, backslashes, line breaks and other unprintable
    characters escaped, clipped with ``...`` *after* the closing quote. An
    exception's class name is shown bare only when it is a plain (ASCII)
    identifier, quoted otherwise. The environment's own words stay unquoted::

        Failed case: assert f(2) == 4 -> AssertionError: "assert 3 == 4"
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal

from llm_envs.code_collab.prompts import HELPER, MAIN, Role, revise_instruction
from llm_envs.code_collab.rewards import AUX_NAME, CodeEvaluation, ExtractedFunction
from llm_envs.parsing import quoting
from llm_envs.sandbox import ProgramStatus, TestStatus
from llm_envs.tasks.problems import CodeProblem

__all__ = [
    "ExpertEdits",
    "ExternalMode",
    "SandboxSlice",
    "edits_for",
    "expert_feedback",
    "feedback_reports_failure",
    "level_feedback",
    "plain_feedback",
    "quote_program_text",
    "shown_tests",
    "validate_sandbox_slice",
]

ExternalMode = Literal["level_feedback", "plain", "expert_edits"]
SandboxSlice = int | Literal["all"] | None
ExpertEdits = str | Mapping[str, str]
"""What an expert returns: one text for every agent, or a text per role
(keys ``"helper"`` or ``"aux"``, and ``"main"``)."""

EXTERNAL_MODES: Final[tuple[ExternalMode, ...]] = ("level_feedback", "plain", "expert_edits")

# Long test texts and error messages are clipped so that feedback stays readable.
_MAX_TEST_CHARS: Final = 300
_MAX_ERROR_CHARS: Final = 300
_MAX_ERROR_TYPE_CHARS: Final = 80
_TESTS_LINE = re.compile(r"^- Tests\b[^:]*: (\d+)/(\d+) passed", re.MULTILINE)


def validate_sandbox_slice(value: object) -> SandboxSlice:
    """Return ``value`` if it is a valid ``sandbox_slice``, else raise naming the fix.

    Raises:
        ValueError: anything but an int, ``None`` or ``"all"``.
    """
    if value is None or value == "all":
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(
        f"sandbox_slice must be an int (n > 0: the first n tests, n < 0: the last |n|, "
        f"0: all), None or 'all', got {value!r}"
    )


def shown_tests(num_tests: int, sandbox_slice: SandboxSlice) -> range:
    """The indices of the tests the feedback shows.

    Example:
        >>> list(shown_tests(5, 1)), list(shown_tests(5, -2)), list(shown_tests(5, "all"))
        ([0], [3, 4], [0, 1, 2, 3, 4])
    """
    if sandbox_slice is None or sandbox_slice == "all" or sandbox_slice == 0:
        return range(num_tests)
    assert isinstance(sandbox_slice, int)
    if sandbox_slice > 0:
        return range(min(sandbox_slice, num_tests))
    return range(max(0, num_tests + sandbox_slice), num_tests)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split()) if "\n" not in text.strip() else text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quote_program_text(text: str, limit: int = _MAX_ERROR_CHARS) -> str:
    """Text the tested program produced, as one quoted line (:mod:`llm_envs.parsing.quoting`)."""
    return quoting.quote_program_text(text, limit)


def _error_type(name: str) -> str:
    # The program names its exception classes: only a plain identifier shows bare.
    return quoting.program_name(name, _MAX_ERROR_TYPE_CHARS)


def _display_test(problem: CodeProblem, test: str) -> str:
    # HumanEval-style tests call `candidate`, bound to the entry point in the setup;
    # the agent knows the function by its name.
    if re.search(r"^\s*candidate\s*=", problem.test_setup, re.MULTILINE):
        test = re.sub(r"\bcandidate\b", problem.entry_point, test)
    return _clip(test, _MAX_TEST_CHARS)


def _definition_line(function: ExtractedFunction) -> str:
    if not function.found:
        return f"- {function.name}: MISSING (no top-level function named {function.name})"
    if function.has_return:
        return f"- {function.name}: defined, returns a value"
    return f"- {function.name}: defined, but has no return statement"


def _syntax_lines(evaluation: CodeEvaluation) -> list[str]:
    program = evaluation.program
    if not program.main.found:
        return [f"- Syntax: not checked ({program.main.name} is missing)"]
    errors = [
        f"- Syntax: ERROR in {f.name} at {f.syntax_error.describe()}"
        for f in (program.aux, program.main)
        if f.found and f.syntax_error is not None
    ]
    if errors:
        return errors
    if program.syntax_error is not None:
        return [f"- Syntax: ERROR in the combined program at {program.syntax_error.describe()}"]
    return ["- Syntax: OK"]


def _test_lines(evaluation: CodeEvaluation, sandbox_slice: SandboxSlice) -> list[str]:
    program, report = evaluation.program, evaluation.report
    problem = program.problem
    if not program.main.found:
        return [f"- Tests: not run ({program.main.name} is missing)"]
    if report is None:
        return ["- Tests: not run (the program does not compile)"]
    indices = shown_tests(report.total, sandbox_slice)
    outcomes = [report.outcomes[i] for i in indices]
    passed = sum(outcome.passed for outcome in outcomes)
    if len(indices) == report.total:
        heading = "- Tests"
    elif sandbox_slice is not None and sandbox_slice != "all" and sandbox_slice > 0:
        heading = f"- Tests (the first {len(indices)} of {report.total})"
    else:
        heading = f"- Tests (the last {len(indices)} of {report.total})"
    lines = [f"{heading}: {passed}/{len(indices)} passed"]
    # Everything from the report was written by (or about) the program: quoted.
    error = quote_program_text(report.error) if report.error else None
    if report.status is ProgramStatus.LOAD_ERROR:
        lines.append(f"  The program failed to load: {error or 'no error given'}")
        return lines
    for i, outcome in zip(indices, outcomes, strict=True):
        if outcome.passed:
            continue
        test = _display_test(problem, problem.tests[i])
        if outcome.status is TestStatus.TIMEOUT:
            why = f"timed out ({error})" if error else "timed out"
        elif outcome.status is TestStatus.NOT_RUN:
            why = f"not run ({error})" if error else "not run"
        elif outcome.message:
            kind = _error_type(outcome.error_type) if outcome.error_type else "Error"
            why = f"{kind}: {quote_program_text(outcome.message)}"
        else:
            why = _error_type(outcome.error_type) if outcome.error_type else "failed"
        lines.append(f"  Failed case: {test} -> {why}")
    return lines


def _usage_lines(evaluation: CodeEvaluation) -> list[str]:
    program = evaluation.program
    name = program.main.name
    usage = program.aux_usage
    if not program.main.found:
        return []
    if usage is None:
        return [f"- aux usage: unknown ({name} does not parse)"]
    if usage.shadowed:
        lines = [f"- aux usage: {name} binds the name aux itself, so it never calls the helper's"]
    elif not usage.calls_aux:
        lines = [f"- aux usage: {name} does NOT call aux"]
    elif usage.discards_result:
        where = ", ".join(str(line) for line in usage.discarded_call_lines)
        lines = [
            f"- aux usage: {name} calls aux but throws its result away "
            f"(a bare aux(...) statement at line {where})"
        ]
    else:
        lines = [f"- aux usage: {name} calls aux and uses its result"]
    if usage.thin_wrapper:
        lines.append(
            f"- Warning: {name} is a thin wrapper over aux (it only returns aux(...)); "
            f"do part of the work in {name} itself"
        )
    return lines


def level_feedback(
    evaluation: CodeEvaluation,
    role: Role,
    *,
    num_agents: int = 2,
    sandbox_slice: SandboxSlice = 1,
) -> str:
    """The ``level_feedback`` prompt of ``role`` after a joint action.

    Args:
        evaluation: the evaluated joint action.
        role: ``"helper"`` or ``"main"``.
        num_agents: 1 leaves every mention of ``aux`` out.
        sandbox_slice: which tests to show (see the module docstring).
    """
    program = evaluation.program
    problem = program.problem
    definitions = [program.aux, program.main] if role == HELPER else [program.main, program.aux]
    if num_agents == 1:
        definitions = [program.main]
    lines = ["Static and execution diagnostics of your last answer:"]
    lines += [_definition_line(f) for f in definitions]
    lines += _syntax_lines(evaluation)
    lines += _test_lines(evaluation, sandbox_slice)
    if role == MAIN and num_agents > 1:
        lines += _usage_lines(evaluation)
    lines += ["", revise_instruction(problem, role)]
    return "\n".join(lines)


def plain_feedback(problem: CodeProblem, role: Role) -> str:
    """The ``plain`` prompt: the revise instruction alone."""
    return revise_instruction(problem, role, plain=True)


def edits_for(edits: ExpertEdits, role: Role) -> str:
    """The part of an expert's edits meant for ``role``.

    Example:
        >>> edits_for({"aux": "rename x", "main": "call aux"}, "helper")
        'rename x'
        >>> edits_for("use a set", "main")
        'use a set'
    """
    if isinstance(edits, str):
        return edits
    keys = (HELPER, AUX_NAME) if role == HELPER else (MAIN,)
    for key in keys:
        text = edits.get(key)
        if isinstance(text, str):
            return text
    return ""


def expert_feedback(problem: CodeProblem, role: Role, edits: ExpertEdits) -> str:
    """The ``expert_edits`` prompt: the expert's edits for ``role``, then the revise instruction."""
    text = edits_for(edits, role).strip()
    body = (
        f"An expert reviewed the code and proposes these edits:\n{text}"
        if text
        else "An expert reviewed the code and proposed no edits for your function."
    )
    return f"{body}\n\n{revise_instruction(problem, role)}"


def feedback_reports_failure(text: str) -> bool:
    r"""Whether ``level_feedback`` text reports a problem (a failing or missing test, an error).

    Scripted agents use it to decide when to revise.

    Example:
        >>> feedback_reports_failure("- Syntax: OK\n- Tests: 5/5 passed")
        False
        >>> feedback_reports_failure("- Tests (the first 1 of 5): 0/1 passed")
        True
    """
    if "MISSING" in text or "ERROR" in text or "- Tests: not run" in text:
        return True
    match = _TESTS_LINE.search(text)
    return match is not None and match.group(1) != match.group(2)
