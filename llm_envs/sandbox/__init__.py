"""Untrusted-code execution: fast, isolated, hack-resistant.

Run a model-written program against test snippets::

    from llm_envs.sandbox import run_tests

    report = run_tests(problem.prompt + completion, problem.tests, setup=problem.test_setup)
    reward = report.pass_rate

Every run is a fresh process forked from a warm worker, confined by the
strongest means the OS allows. The tests run in the worker, a trusted
process the program cannot reach, and call the program's functions through
proxies that bring back only plain data. See ``docs/sandbox.md`` for the guarantees and limits.

This package must never execute untrusted code in the caller's process.
"""

from llm_envs.sandbox.pool import (
    DEFAULT_TIMEOUT,
    Sandbox,
    SandboxBusyError,
    SandboxClosedError,
    SandboxError,
    SandboxJob,
    default_sandbox,
    run_tests,
)
from llm_envs.sandbox.report import (
    ProgramStatus,
    Protections,
    TestOutcome,
    TestReport,
    TestStatus,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "ProgramStatus",
    "Protections",
    "Sandbox",
    "SandboxBusyError",
    "SandboxClosedError",
    "SandboxError",
    "SandboxJob",
    "TestOutcome",
    "TestReport",
    "TestStatus",
    "default_sandbox",
    "run_tests",
]
