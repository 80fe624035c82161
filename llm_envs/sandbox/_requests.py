"""The caller's jobs, checked and encoded for a worker: one :class:`Request` per job.

The pool (:mod:`llm_envs.sandbox.pool`) checks every job here before any is
sent: a malformed job raises in the caller's thread, naming its index and field.
A request is the frame a worker reads (marshalled: the worker trusts the
caller's process), or no frame at all for a program too large to run.
"""

from __future__ import annotations

import marshal
import math
import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple

from llm_envs.arguments import MAX_TIMEOUT, describe
from llm_envs.sandbox.report import ProgramStatus, TestOutcome, TestReport, TestStatus

__all__ = [
    "Request",
    "check_positive_int",
    "check_timeout",
    "encode_request",
    "failed_report",
]


class Request(NamedTuple):
    """One job for a worker.

    Attributes:
        payload: the frame to send (empty when ``oversized``).
        timeout: the run's wall-clock limit in seconds.
        total: how many tests the job has.
        oversized: why the program is not run (too large), or None.
    """

    payload: bytes
    timeout: float
    total: int
    oversized: str | None = None  # why the program is not run (too large)


def check_timeout(timeout: object, name: str = "timeout") -> float:
    """``timeout`` as seconds, checked: a number in ``(0, MAX_TIMEOUT]``."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {describe(timeout)}")
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT):
        raise ValueError(f"{name} must be in (0, {MAX_TIMEOUT:g}] seconds, got {timeout!r}")
    return float(timeout)


def check_positive_int(value: object, name: str) -> int:
    """``value``, checked: an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {describe(value)}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def encode_request(
    program: object,
    tests: object,
    setup: object,
    entry_point: object,
    timeout: object,
    *,
    helper: object = None,
    where: str,
    default_timeout: float,
    max_program_chars: int,
    check_syntax: Callable[[str, tuple[str, ...], str], None],
) -> Request:
    """Check one job's fields and encode it (``where`` names the job in error messages).

    Raises:
        TypeError: a field has the wrong type.
        ValueError: ``entry_point`` is not an identifier, ``timeout`` is out of
            range, or ``check_syntax`` refuses the setup or a test.
    """
    if not isinstance(program, str):
        raise TypeError(f"program must be a str, got {describe(program)} ({where})")
    if not isinstance(setup, str):
        raise TypeError(f"setup must be a str, got {describe(setup)} ({where})")
    if isinstance(tests, str | bytes) or not isinstance(tests, Sequence):
        raise TypeError(
            f"tests must be a sequence of test snippets (str), got {describe(tests)} "
            f"({where}); wrap a single test in a list"
        )
    tests = tuple(tests)
    for position, test in enumerate(tests):
        if not isinstance(test, str):
            raise TypeError(f"tests[{position}] must be a str, got {describe(test)} ({where})")
    if entry_point is not None and not (
        isinstance(entry_point, str) and entry_point.isidentifier()
    ):
        raise ValueError(
            f"entry_point must be a Python identifier or None, got "
            f"{describe(entry_point)} ({where})"
        )
    if helper is not None and not isinstance(helper, str):
        raise TypeError(f"helper must be a str or None, got {describe(helper)} ({where})")
    run_timeout = default_timeout if timeout is None else check_timeout(timeout)
    check_syntax(setup, tests, where)
    for what, source in (("program", program), ("helper", helper)):
        if source is not None and len(source) > max_program_chars:
            why = (
                f"the {what} is {len(source):,} characters long; the sandbox runs programs "
                f"of at most {max_program_chars:,} (Sandbox(max_program_chars=...))"
            )
            return Request(b"", run_timeout, len(tests), why)
    # Requests are marshalled (the worker trusts this process); replies are JSON.
    payload = marshal.dumps((program, tests, setup, run_timeout, entry_point, helper))
    return Request(struct.pack(">I", len(payload)) + payload, run_timeout, len(tests))


def failed_report(request: Request, status: ProgramStatus, error: str) -> TestReport:
    """The report of a request no worker answered: ``status``, ``error``, every test not run."""
    outcomes = (TestOutcome(TestStatus.NOT_RUN),) * request.total
    return TestReport(status=status, outcomes=outcomes, error=error)
