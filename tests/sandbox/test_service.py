"""The sandbox service speaks SandboxFusion's API: its own client package is the judge.

A service runs in a thread of the test process on 127.0.0.1 (never another
interface), and the ``sandbox-fusion`` client (0.3.7) talks to it: each script
of the table comes back in the shape the client parses, with the status,
return code and output ``python main.py`` would give. Bad requests get an
error that names the field and the fix; other languages get SandboxFusion's
error shape. ``test_service_verdicts.py`` checks the verdicts against
``run_tests``; ``test_service_command.py`` the command with several processes.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
import sandbox_fusion
from sandbox_fusion import (
    CommandRunStatus,
    GetPromptByIdRequest,
    GetPromptsRequest,
    RunCodeRequest,
    RunStatus,
    SubmitRequest,
    SummaryMapping,
    TestConfig,
)

from llm_envs.sandbox.service import ServiceSettings
from llm_envs.sandbox.service.server import main, running_service
from llm_envs.tasks import load_humaneval

# The data's code uses old string escapes; those warnings are not the service's.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_service(ServiceSettings(pool_workers=2, max_timeout=60.0)) as base:
        yield base


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def run(url: str, code: str, **fields: Any) -> sandbox_fusion.RunCodeResponse:
    request = RunCodeRequest(code=code, language="python", **fields)
    return sandbox_fusion.run_code(request, endpoint=url, max_attempts=1)


# (name, code, request fields, status, return code, stdout, a piece of stderr)
SCRIPTS = [
    ("hello", "print('hello')", {}, "Success", 0, "hello\n", ""),
    ("input", "a = int(input())\nb = int(input())\nprint(a + b)", {"stdin": "3\n4\n"},
     "Success", 0, "7\n", ""),
    ("stdin buffer", "import sys\nprint(sum(map(int, sys.stdin.buffer.read().split())))",
     {"stdin": "1 2\n3"}, "Success", 0, "6\n", ""),
    ("stdin as fd 0", "print(open(0).read().upper(), end='')", {"stdin": "xyz\n"},
     "Success", 0, "XYZ\n", ""),
    ("no stdin", "import sys\nprint(repr(sys.stdin.read()))", {}, "Success", 0, "''\n", ""),
    ("unicode", "print(input()[::-1])", {"stdin": "héllo ✓\n"}, "Success", 0, "✓ olléh\n", ""),
    ("__main__ runs", "def main():\n    print(__name__)\nif __name__ == '__main__':\n    main()",
     {}, "Success", 0, "__main__\n", ""),
    ("files", "import helper\nprint(helper.X, open('data/in.txt').read())",
     {"files": {"helper.py": b64("X = 42"), "data/in.txt": b64("ok"), "skipped": None}},
     "Success", 0, "42 ok\n", ""),
    ("stderr", "import sys\nprint('out')\nprint('err', file=sys.stderr)", {},
     "Success", 0, "out\n", "err\n"),
    ("exception", "print('before')\n\ndef f():\n    return 1 / 0\nf()", {}, "Failed", 1,
     "before\n", 'line 4, in f\n    return 1 / 0\n'),
    ("syntax error", "def f(:\n    pass", {}, "Failed", 1, "", "SyntaxError: invalid syntax"),
    ("failed assert", "assert 1 + 1 == 3, 'arithmetic'", {}, "Failed", 1, "",
     "AssertionError: arithmetic\n"),
    ("sys.exit(0)", "import sys\nprint('done')\nsys.exit(0)\nprint('never')", {},
     "Success", 0, "done\n", ""),
    ("sys.exit(3)", "import sys\nsys.exit(3)", {}, "Failed", 3, "", ""),
    ("sys.exit(text)", "import sys\nsys.exit('bye')", {}, "Failed", 1, "", "bye\n"),
    ("os._exit(4)", "import os\nprint('x', flush=True)\nos._exit(4)", {}, "Failed", 4, "x\n", ""),
    ("memory", "x = bytearray(8 << 30)", {}, "Failed", 1, "", "MemoryError"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("code", "fields", "status", "return_code", "stdout", "stderr"),
    [case[1:] for case in SCRIPTS],
    ids=[case[0] for case in SCRIPTS],
)
def test_a_script_runs_as_python_main_py_would(
    url, code, fields, status, return_code, stdout, stderr
):
    response = run(url, code, **fields)
    assert response.status == status
    assert response.compile_result is None
    result = response.run_result
    assert result is not None and result.status == CommandRunStatus.Finished
    assert (result.return_code, result.stdout) == (return_code, stdout)
    assert stderr in (result.stderr or "")
    assert 0 < (result.execution_time or 0) < 30


def test_an_exception_prints_the_traceback_python_prints(url):
    result = run(url, "x = 1\ny = [x][2]").run_result
    assert result is not None
    assert result.stderr == (
        "Traceback (most recent call last):\n"
        '  File "main.py", line 2, in <module>\n'
        "    y = [x][2]\n"
        "        ~~~^^^\n"
        "IndexError: list index out of range\n"
    )


@pytest.mark.parametrize("code", ["while True:\n    pass", "import time\ntime.sleep(60)"])
def test_a_script_past_its_run_timeout_is_time_limit_exceeded(url, code):
    response = run(url, "print('started', flush=True)\n" + code, run_timeout=1)
    assert response.status == RunStatus.Failed
    result = response.run_result
    assert result is not None
    assert result.status == CommandRunStatus.TimeLimitExceeded
    assert result.return_code is None and result.stdout == "started\n"
    assert 1 <= (result.execution_time or 0) < 10
    assert "timed out after 1 s" in response.message


def test_the_clients_summary_reads_every_outcome(url):
    mapping = SummaryMapping(Success="ok", Failed="failed", RunFailed="crashed", RunTimeout="slow")
    summaries = [
        sandbox_fusion.summary_run_code_result(run(url, code, run_timeout=1), mapping)
        for code in ("print(1)", "raise ValueError", "while True: pass")
    ]
    assert summaries == ["ok", "crashed", "slow"]


def test_the_async_client_runs_many_scripts_at_once(url):
    async def all_of_them() -> list[sandbox_fusion.RunCodeResponse]:
        requests_ = [RunCodeRequest(code=f"print({i} * {i})", language="python") for i in range(24)]
        return await asyncio.gather(
            *(sandbox_fusion.run_code_async(r, endpoint=url, max_attempts=1) for r in requests_)
        )

    responses = asyncio.run(all_of_them())
    assert [r.run_result.stdout for r in responses if r.run_result] == [
        f"{i * i}\n" for i in range(24)
    ]


@pytest.mark.parametrize("language", ["cpp", "nodejs", "python_gpu", "haskell"])
def test_another_language_gets_sandboxfusions_error_shape(url, language):
    reply = requests.post(f"{url}/run_code", json={"code": "x", "language": language}, timeout=30)
    assert reply.status_code == 200
    body = reply.json()
    assert body["status"] == "SandboxError"
    assert body["run_result"] is None and body["compile_result"] is None and body["files"] == {}
    assert f"language {language!r} is not served" in body["message"]
    assert "Python only" in body["message"]


def test_the_client_raises_on_another_language_as_on_any_sandbox_error(url):
    request = RunCodeRequest(code="int main() {}", language="cpp")
    with pytest.raises(Exception, match="language 'cpp' is not served"):
        sandbox_fusion.run_code(request, endpoint=url, max_attempts=1)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"run_timeout": 0}, "run_timeout must be in (0, 60] seconds, got 0.0"),
        ({"run_timeout": 61}, "start the service with a larger --max-timeout"),
        ({"files": {"../up.py": b64("x")}}, "'../up.py' is not a path inside the working"),
        ({"files": {"/etc/x": b64("x")}}, "give relative paths"),
        ({"files": {"a.txt": "not base64!"}}, "files['a.txt'] is not base64"),
    ],
)
def test_a_bad_request_is_refused_naming_the_field_and_the_fix(url, fields, message):
    body = {"code": "print(1)", "language": "python", **fields}
    reply = requests.post(f"{url}/run_code", json=body, timeout=30)
    assert reply.status_code == 422
    assert message in reply.json()["detail"]


def test_a_request_without_code_is_refused_by_validation(url):
    reply = requests.post(f"{url}/run_code", json={"language": "python"}, timeout=30)
    assert reply.status_code == 422
    assert reply.json()["detail"][0]["loc"] == ["body", "code"]


def test_extra_fields_such_as_verls_memory_limit_are_ignored(url):
    body = {"code": "print(2)", "language": "python", "memory_limit_MB": 512, "stdin": None}
    reply = requests.post(f"{url}/run_code", json=body, timeout=30).json()
    assert (reply["status"], reply["run_result"]["stdout"]) == ("Success", "2\n")


def test_fetch_files_is_not_supported_and_says_so(url):
    response = run(url, "open('out.txt', 'w').write('x')", fetch_files=["out.txt"])
    assert response.status == RunStatus.Success and response.files == {}
    assert "fetch_files is not supported" in response.message
    assert "['out.txt'] not fetched" in response.message


def test_output_past_the_limit_is_cut_and_says_so():
    with running_service(ServiceSettings(pool_workers=1, output_limit=100)) as small:
        reply = requests.post(
            f"{small}/run_code", json={"code": "print('x' * 1000)", "language": "python"}
        ).json()
        assert reply["status"] == "Success" and reply["run_result"]["stdout"] == "x" * 100
        assert "stdout or stderr was cut to the service's output limit" in reply["message"]


LIMIT = 4096  # --max-program-chars of `small`


@pytest.fixture(scope="module")
def small() -> Iterator[str]:
    settings = ServiceSettings(pool_workers=1, max_program_chars=LIMIT, max_body_bytes=1 << 16)
    with running_service(settings) as base:
        yield base


def test_a_program_of_the_documented_size_runs(small):
    code = "print(1)\n" + "#" * (LIMIT - 9)  # the service's launcher does not count
    reply = requests.post(f"{small}/run_code", json={"code": code, "language": "python"})
    assert reply.status_code == 200 and reply.json()["status"] == "Success"


@pytest.mark.parametrize(
    ("route", "body", "size"),
    [
        ("run_code", {"code": "#" * (LIMIT + 1)}, LIMIT + 1),
        ("run_code", {"code": "#" * 2000, "stdin": "1" * 2000, "files": {"ab": "eA=="}}, 4006),
        ("run_code", {"code": "", "files": {"a": "eHh4" * 1024}}, LIMIT + 1),
        ("submit", {"dataset": "humaneval", "id": 0, "completion": "#" * (LIMIT + 1)}, LIMIT + 1),
    ],
)
def test_a_program_past_max_program_chars_is_422_naming_the_flag(small, route, body, size):
    if route == "run_code":
        body = {"language": "python", **body}
    reply = requests.post(f"{small}/{route}", json=body, timeout=30)
    if size <= LIMIT:  # counted per field: code, stdin, a file's path and content
        assert reply.status_code == 200 and reply.json()["status"] == "Success"
        return
    assert reply.status_code == 422
    detail = reply.json()["detail"]
    assert f"to {size:,} characters" in detail and f"at most {LIMIT:,} (--max-program-chars)" in (
        detail
    )


def test_a_body_past_max_body_bytes_is_413_before_it_is_read(small):
    huge = {"code": "#" * 70_000, "language": "python"}
    refused = requests.post(f"{small}/run_code", json=huge, timeout=30)
    assert refused.status_code == 413
    assert "limit of 65536 bytes" in refused.json()["detail"]
    assert "larger --max-body-bytes" in refused.json()["detail"]
    chunks = (b'{"code": "' + b"#" * 50_000 for _ in range(5))
    assert requests.post(f"{small}/run_code", data=chunks, timeout=30).status_code == 413
    # A body that says it is 64 MiB is refused on its word: no byte of it is awaited.
    parts = urlsplit(small)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as connection:
        head = (
            "POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {64 << 20}\r\n\r\n"
        )
        connection.sendall(head.encode() + b'{"code": "')
        assert connection.recv(100).startswith(b"HTTP/1.1 413")


# --- /submit and the data set routes ---------------------------------------------------------

CANONICAL_0 = load_humaneval()[0].canonical_solution or ""


def submit(url: str, dataset: str, problem_id: int | str, completion: str, **config: Any):
    request = SubmitRequest(
        dataset=dataset, id=problem_id, completion=completion, config=TestConfig(**config)
    )
    return sandbox_fusion.submit(request, endpoint=url, max_attempts=1)


@pytest.mark.parametrize("dataset", ["humaneval", "humaneval_python"])
@pytest.mark.parametrize("problem_id", [0, "0", "HumanEval/0"])
def test_submit_accepts_humanevals_canonical_solution(url, dataset, problem_id):
    result = submit(url, dataset, problem_id, CANONICAL_0)
    # (the client's pydantic v1 model turns the id '0' into 0 before sending it)
    assert result.accepted and str(result.id) == str(problem_id)
    assert len(result.tests) == 7 and all(case.passed for case in result.tests)
    assert result.extracted_type is None and result.extracted_code == CANONICAL_0
    assert result.full_code and result.full_code.endswith(CANONICAL_0)
    assert result.extra == {
        "task_id": "HumanEval/0",
        "program_status": "ok",
        "error": None,
        "passed": 7,
        "total": 7,
        "pass_rate": 1.0,
    }
    case = result.tests[0]
    assert case.exec_info.status == RunStatus.Success
    assert case.test_info is not None and case.test_info["status"] == "passed"


def test_submit_reports_each_test_of_a_wrong_completion(url):
    result = submit(url, "humaneval", 0, "    return False\n")
    assert not result.accepted
    assert [case.passed for case in result.tests] == [False, True, False, True, False, False, True]
    failed = result.tests[0]
    assert failed.exec_info.status == RunStatus.Failed
    assert failed.exec_info.message.startswith("AssertionError")
    assert failed.test_info is not None and failed.test_info["status"] == "failed"
    assert failed.exec_info.run_result is not None
    assert failed.exec_info.run_result.return_code == 1


def test_submit_takes_an_mbpp_program_from_a_fenced_answer(url):
    answer = (
        "Here it is:\n```python\ndef remove_Occ(s, ch):\n"
        "    return s.replace(ch, '', 1)[::-1].replace(ch, '', 1)[::-1]\n```\nDone."
    )
    result = submit(url, "mbpp", 11, answer)
    assert result.accepted and result.extracted_type == "fenced"
    assert result.extracted_code.startswith("def remove_Occ(s, ch):")
    assert [case.passed for case in result.tests] == [True, True, True]


def test_submit_serves_coophumaneval(url):
    result = submit(url, "coophumaneval", "CoopHumanEval/0", "    return None\n")
    assert not result.accepted and result.tests
    assert result.extra is not None and result.extra["task_id"] == "CoopHumanEval/0"


def test_a_submit_timeout_is_the_configs_run_timeout(url):
    result = submit(url, "humaneval", 0, "    while True:\n        pass\n", run_timeout=1)
    assert not result.accepted
    assert result.tests[0].test_info is not None
    assert result.tests[0].test_info["status"] == "timeout"
    run_result = result.tests[0].exec_info.run_result
    assert run_result is not None and run_result.status == CommandRunStatus.TimeLimitExceeded
    assert result.extra is not None and result.extra["error"].startswith("timed out after 1 s")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"dataset": "apps", "id": 0}, "dataset 'apps' is not served; choose one of"),
        ({"dataset": "mbpp", "id": 1}, "has no problem with id 1; give a task id such as 'Mbpp/"),
        ({"dataset": "humaneval", "id": "HumanEval/999"}, "(POST /list_ids lists them)"),
        ({"dataset": "humaneval", "id": 0, "config": {"language": "cpp"}}, "only python"),
        (
            {"dataset": "humaneval", "id": 0, "config": {"custom_extract_logic": "x"}},
            "config.custom_extract_logic is not supported; leave it unset",
        ),
    ],
)
def test_a_bad_submission_is_refused_naming_the_fix(url, body, message):
    reply = requests.post(
        f"{url}/submit", json={"completion": "", "config": {}, **body}, timeout=30
    )
    assert reply.status_code == 400
    assert message in reply.json()["detail"]


def test_the_prompts_of_a_data_set_are_served(url):
    prompt = sandbox_fusion.get_prompt_by_id(
        GetPromptByIdRequest(dataset="mbpp", id=11, config=TestConfig()), endpoint=url
    )
    assert prompt.id == "Mbpp/11" and prompt.prompt.startswith("def remove_Occ(s, ch):")
    assert prompt.labels["entry_point"] == "remove_Occ" and len(prompt.labels["tests"]) == 3
    page = sandbox_fusion.get_prompts(
        GetPromptsRequest(dataset="humaneval", config=TestConfig(), offset=160, limit=10),
        endpoint=url,
    )
    assert [p.id for p in page] == [f"HumanEval/{i}" for i in range(160, 164)]
    ids = requests.post(f"{url}/list_ids", json={"dataset": "coophumaneval", "config": {}})
    assert len(ids.json()) == 82
    assert requests.get(f"{url}/list_datasets", timeout=30).json() == [
        "coophumaneval",
        "humaneval",
        "humaneval_python",
        "mbpp",
    ]
    assert requests.get(f"{url}/v1/ping", timeout=30).json() == "pong"


# --- the command line and the import boundary -------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workers", "0"], "--workers must be >= 1, got 0"),
        (["--port", "70000"], "--port must be in [0, 65535], got 70000"),
        (["--pool-workers", "0"], "--pool-workers: pool_workers must be an int in [1, 4096]"),
        (["--timeout", "400"], "--timeout: timeout must be a finite number in (0, 300]"),
        (["--max-timeout", "-1"], "--max-timeout: max_timeout must be a finite number"),
        (["--max-body-bytes", "10"], "--max-body-bytes: max_body_bytes must be an int in [1024"),
        (
            ["--max-queued-per-client", "0"],
            "--max-queued-per-client: max_queued_per_client must be an int in [1, 1048576]",
        ),
    ],
)
def test_a_bad_flag_exits_2_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv, prog="llm-envs sandbox-serve")
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("llm-envs sandbox-serve: error: ") and message in error
    assert "(llm-envs sandbox-serve --help lists every flag)" in error


def test_llm_envs_and_its_sandbox_never_import_the_web_stack():
    code = (
        "import sys, llm_envs, llm_envs.sandbox, llm_envs.tasks\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'fastapi', 'uvicorn', 'starlette', 'pydantic', 'anyio'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


SERVICE = "llm_envs.sandbox.service"


def test_the_old_module_names_warn_naming_the_new_ones_and_are_them():
    moved = {"service_main": "server", "service_scripts": "scripts"}
    moved |= {"service_shapes": "shapes", "service_submissions": "submissions"}
    code = (
        "import importlib, warnings\n"
        f"for old, new in {moved!r}.items():\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        module = importlib.import_module('llm_envs.sandbox.' + old)\n"
        "    same = module is importlib.import_module('llm_envs.sandbox.service.' + new)\n"
        "    notes = [str(w.message) for w in caught if old in str(w.message)]\n"
        "    print(same, notes)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    for line, (old, new) in zip(lines, moved.items(), strict=True):
        notice = f"llm_envs.sandbox.{old} is deprecated: import {SERVICE}.{new} instead"
        assert line == f"True [{notice!r}]"
