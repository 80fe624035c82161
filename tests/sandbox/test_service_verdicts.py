"""The service's verdicts are ``run_tests``'s: a corpus through both, compared field by field.

Each program of the corpus (passing, failing, wrong output, an exception, a
timeout, an infinite loop, a syntax error, programs that try to escape or to
kill the service) goes through the service over HTTP and through
:func:`llm_envs.sandbox.run_tests` in this process, and the answers must agree:

* ``/submit``: the verdict of each test, the program's status and error, and
  ``accepted`` equal ``run_tests(program, problem.tests, ...)``'s report, where
  the program is built by ``llm_envs.expert_iteration``'s own
  ``extract_code``/``assemble_program`` (the rule the service states).
* ``/run_code``: the response is :func:`script_result` of ``run_tests`` on
  :func:`script_program` (the same status, exit status, stdout and stderr),
  and the verdict (passed, failed, timed out) and stdout are those of
  ``run_tests`` on the bare script.

The service runs in a thread of the test process, so a program that kills it
would kill the test: the kill cases need the machine's signal confinement.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from llm_envs.expert_iteration.verifier import assemble_program, extract_code
from llm_envs.sandbox import ProgramStatus, TestReport, default_sandbox, run_tests
from llm_envs.sandbox.service import ScriptJob, ServiceSettings, script_program, script_result
from llm_envs.sandbox.service.server import running_service
from llm_envs.tasks import load_humaneval

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")

SHORT = 1.0  # seconds, for the programs that never end (at least: see calibrated)
SERVICE_PID = os.getpid()  # the service runs in this process


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    if not default_sandbox().protections.signals_confined:
        pytest.skip("signals_confined is unavailable: a program could kill the test process")
    with running_service(ServiceSettings(pool_workers=2)) as base:
        yield base


@pytest.fixture(scope="module")
def port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once (the timeouts' seconds overlap); their results in order."""
    with ThreadPoolExecutor(len(calls)) as executor:
        return [future.result() for future in [executor.submit(call) for call in calls]]


def calibrated(timeout: float | None, *calls: Callable[[], Any]) -> float | None:
    """``timeout``, or for a program that never ends (``SHORT``) four times what ``calls`` take.

    The runs of a program that never ends are compared where the deadline stops
    them (what it printed first, whether loading or a test timed out), so each
    must reach its sleep or loop in time. ``calls`` run the same kind of
    program to its end, at once as the compared runs do, on the machine as
    loaded as it is now: the deadline scales with the load, the verdicts do not.
    """
    if timeout != SHORT:
        return timeout
    started = time.perf_counter()
    together(*calls)
    return max(SHORT, 4 * (time.perf_counter() - started))


def post(url: str, route: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = requests.post(f"{url}/{route}", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


# --- /submit -----------------------------------------------------------------------------------

PROBLEM = load_humaneval()[0]  # has_close_elements(numbers, threshold)
ESCAPE_PORT = "{port}"  # filled in with the service's port

SUBMISSIONS: dict[str, tuple[str, float | None, str]] = {
    # name: (completion, run_timeout, the program status run_tests gives)
    "passing": (PROBLEM.canonical_solution or "", None, "ok"),
    "passing, fenced whole function": (
        "Sure:\n```python\ndef has_close_elements(numbers, threshold):\n"
        "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)"
        " for b in numbers[i + 1:])\n```\n",
        None,
        "ok",
    ),
    "failing": ("    return False\n", None, "ok"),
    "wrong output": ("    return 'yes'\n", None, "ok"),
    "exception": ("    raise ValueError('no idea')\n", None, "ok"),
    "timeout": ("    import time\n    time.sleep(100)\n", SHORT, "timeout"),
    "infinite loop": ("    while True:\n        pass\n", SHORT, "timeout"),
    "syntax error": ("    return (\n", None, "syntax_error"),
    "exit at load": (
        "    return True\nimport sys\nprint('all tests passed')\nsys.exit(0)\n",
        None,
        "load_error",
    ),
    "os._exit at load": ("    return True\nimport os\nos._exit(0)\n", None, "killed"),
    "escape": (
        "    import socket\n"
        "    open('/tmp/llm_envs_service_escape', 'w').write('x')\n"
        "    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        "    return True\n",
        None,
        "ok",
    ),
    "kill the service": (
        "    import os, signal\n"
        f"    os.kill({SERVICE_PID}, signal.SIGKILL)\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n"
        "    return True\n",
        None,
        "ok",
    ),
    "kill everything at load": (
        "    return True\nimport os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\n"
        "except OSError:\n    pass\n",
        None,
        "ok",
    ),
}


def outcomes(report: TestReport) -> list[tuple[str, str | None, str | None]]:
    return [(o.status.value, o.error_type, o.message) for o in report.outcomes]


@pytest.mark.parametrize(("completion", "timeout", "status"), SUBMISSIONS.values(), ids=SUBMISSIONS)
def test_a_submission_gets_run_tests_verdict(url, port, completion, timeout, status):
    completion = completion.replace("{port}", str(port))
    right = PROBLEM.canonical_solution or ""
    body = {"dataset": "humaneval", "id": PROBLEM.task_id, "completion": right}
    timeout = calibrated(
        timeout,
        lambda: post(url, "submit", body),
        lambda: run_tests(
            assemble_program(PROBLEM, right), PROBLEM.tests, setup=PROBLEM.test_setup
        ),
    )
    body = {**body, "completion": completion, "config": {"run_timeout": timeout}}
    program = assemble_program(PROBLEM, extract_code(completion) or completion)
    answer, report = together(
        lambda: post(url, "submit", body),
        lambda: run_tests(
            program,
            PROBLEM.tests,
            setup=PROBLEM.test_setup,
            timeout=timeout,
            entry_point=PROBLEM.entry_point,
        ),
    )
    assert report.status.value == status
    assert answer["full_code"] == program
    assert answer["accepted"] is report.all_passed
    assert [case["passed"] for case in answer["tests"]] == [o.passed for o in report.outcomes]
    info = [case["test_info"] for case in answer["tests"]]
    assert [(i["status"], i["error_type"], i["message"]) for i in info] == outcomes(report)
    assert [i["test"] for i in info] == list(PROBLEM.tests)
    extra = answer["extra"]
    assert (extra["program_status"], extra["error"]) == (report.status.value, report.error)
    assert (extra["passed"], extra["total"]) == (report.passed, report.total)


def test_the_corpus_reaches_every_program_status():
    assert {status for _, _, status in SUBMISSIONS.values()} == {s.value for s in ProgramStatus}


# --- /run_code ---------------------------------------------------------------------------------

SCRIPTS: dict[str, tuple[str, float, str]] = {
    # name: (script, run_timeout, the verdict of run_tests on the bare script)
    "passing": ("def add(a, b):\n    return a + b\nassert add(2, 3) == 5\nprint('ok')", 5, "ok"),
    "failing": ("def add(a, b):\n    return a - b\nassert add(2, 3) == 5", 5, "load_error"),
    "wrong output": ("print(sum(range(10)) + 1)", 5, "ok"),
    "exception": ("print('start')\n{}['missing']", 5, "load_error"),
    "timeout": ("import time\nprint('sleeping', flush=True)\ntime.sleep(100)", SHORT, "timeout"),
    "infinite loop": ("while True:\n    pass", SHORT, "timeout"),
    "syntax error": ("print('never'\n", 5, "syntax_error"),
    "escape": (
        "import os, socket\n"
        "for attempt in (lambda: open('/etc/shadow').read(),\n"
        "                lambda: open('/tmp/llm_envs_service_escape', 'w').write('x'),\n"
        "                lambda: socket.create_connection(('127.0.0.1', {port}), timeout=1),\n"
        "                lambda: os.listdir('/root')):\n"
        "    try:\n"
        "        attempt()\n"
        "        print('escaped')\n"
        "    except OSError as error:\n"
        "        print(type(error).__name__)\n",
        5,
        "ok",
    ),
    "kill": (
        "import os, signal\n"
        f"for pid in ({SERVICE_PID}, os.getppid(), 1, -1):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "        print('sent', pid > 0)\n"
        "    except OSError as error:\n"
        "        print(type(error).__name__)\n",
        5,
        "ok",
    ),
}
VERDICTS = {"ok": "Success", "load_error": "Failed", "syntax_error": "Failed", "timeout": "Failed"}


@pytest.mark.parametrize(("code", "timeout", "verdict"), SCRIPTS.values(), ids=SCRIPTS)
def test_a_script_gets_run_tests_verdict(url, port, code, timeout, verdict):
    code = code.replace("{port}", str(port))
    printing = "print('sleeping', flush=True)"
    timeout = calibrated(
        timeout,
        lambda: post(url, "run_code", {"code": printing, "language": "python"}),
        lambda: run_tests(script_program(ScriptJob(printing)), []),
        lambda: run_tests(printing, []),
    )
    body = {"code": code, "language": "python", "run_timeout": timeout}
    program = script_program(ScriptJob(code, timeout=timeout))
    answer, wrapped, bare = together(
        lambda: post(url, "run_code", body),
        lambda: run_tests(program, [], timeout=timeout),
        lambda: run_tests(code, [], timeout=timeout),
    )
    result = answer["run_result"]
    expected = script_result(wrapped)
    assert (result["status"], result["return_code"]) == (expected.status, expected.return_code)
    assert (result["stdout"], result["stderr"]) == (expected.stdout, expected.stderr)
    assert answer["message"] == expected.note

    assert bare.status.value == verdict
    assert answer["status"] == VERDICTS[verdict]
    assert (result["status"] == "TimeLimitExceeded") == (verdict == "timeout")
    assert result["stdout"] == bare.stdout


def test_no_escape_reached_anything_and_the_service_still_serves(url, port):
    for name in ("escape", "kill"):
        code = SCRIPTS[name][0].replace("{port}", str(port))
        stdout = post(url, "run_code", {"code": code, "language": "python"})["run_result"]
        assert "escaped" not in stdout["stdout"] and "sent" not in stdout["stdout"], stdout
    assert not os.path.exists("/tmp/llm_envs_service_escape")
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    answer = post(url, "run_code", {"code": "print('alive')", "language": "python"})
    assert answer["run_result"]["stdout"] == "alive\n"
