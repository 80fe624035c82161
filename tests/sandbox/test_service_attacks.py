"""An attack round on the sandbox service, through SandboxFusion's client.

Wrong programs that try to pass, a run that tries to outlive itself, and a run
that tries to leave state behind for the next verdict.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest

sandbox_fusion = pytest.importorskip("sandbox_fusion")
from sandbox_fusion import RunCodeRequest, SubmitRequest, TestConfig  # noqa: E402

from llm_envs.sandbox.service import ServiceSettings  # noqa: E402
from llm_envs.sandbox.service.server import running_service  # noqa: E402

MARK = "atk" + uuid.uuid4().hex[:8]
WRONG = {  # HumanEval/53 add(x, y): each is wrong and tries to pass anyway
    "exit0 at import": "    return 0\nimport sys; sys.exit(0)\n",
    "os._exit(0) at import": "    return 0\nimport os; os._exit(0)\n",
    "exit inside call": "    import os; os._exit(0)\n",
    "raise SystemExit in call": "    raise SystemExit(0)\n",
    "patch AssertionError": (
        "    return 0\nimport builtins\nclass _A(BaseException): pass\n"
        "builtins.AssertionError = _A\n"
    ),
    "eq-always object": (
        "    class E:\n        def __eq__(s, o): return True\n"
        "        def __ne__(s, o): return False\n    return E()\n"
    ),
    "print fake pass": "    print('All tests passed'); return 0\n",
    "kill parent": (
        "    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 0\n"
    ),
    "swallow via sys.settrace": "    import sys\n    sys.settrace(None)\n    return None\n",
    "atexit exit0": "    return 0\nimport atexit, os\natexit.register(lambda: os._exit(0))\n",
    "sys.excepthook": "    return 0\nimport sys\nsys.excepthook = lambda *a: None\n",
}
OUTLIVE = (
    "import os, time, subprocess\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    f"        os.execvp('sleep', ['sleep', '300', '{MARK}'])\n"
    "    os._exit(0)\n"
    f"subprocess.Popen(['sh', '-c', 'exec -a {MARK} sleep 300'], start_new_session=True)\n"
    "print('spawned')\n"
)
POISON = (  # tries to leave state behind for the next run
    "import os, builtins, sys\n"
    "try:\n    open('/tmp/poison_"
    + MARK
    + "', 'w').write('x')\nexcept OSError as e:\n    print('tmp refused', e.errno)\n"
    "open('poison.py', 'w').write('X=1')\n"
    "builtins.__dict__['add'] = lambda x, y: x + y\n"
    "os.environ['PYTHONSTARTUP'] = '/tmp/poison_" + MARK + "'\n"
    "print('poisoned')\n"
)


@pytest.fixture(scope="module")
def service():
    with running_service(ServiceSettings(pool_workers=1)) as url:
        sandbox_fusion.set_endpoint(url)
        yield url


def _submit(completion):
    request = SubmitRequest(dataset="humaneval", id=53, completion=completion, config=TestConfig())
    return sandbox_fusion.submit(request)


def test_the_correct_program_passes(service):
    assert _submit("    return x + y\n").accepted


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_program_never_passes(service, name):
    assert not _submit(WRONG[name]).accepted, name


def test_a_run_leaves_no_process_behind(service):
    answer = sandbox_fusion.run_code(RunCodeRequest(code=OUTLIVE, language="python", run_timeout=5))
    assert answer.run_result.stdout == "spawned\n"
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", MARK], capture_output=True, text=True).stdout.split()
    assert left == []


def test_a_run_cannot_change_the_next_verdict(service):
    answer = sandbox_fusion.run_code(RunCodeRequest(code=POISON, language="python"))
    assert answer.run_result.stdout.endswith("poisoned\n")
    assert not os.path.exists(f"/tmp/poison_{MARK}")
    assert _submit("    return x + y\n").accepted and not _submit("    return 0\n").accepted
    probe = "import os, builtins\nprint(os.path.exists('poison.py'), 'add' in builtins.__dict__)"
    answer = sandbox_fusion.run_code(RunCodeRequest(code=probe, language="python"))
    assert answer.run_result.stdout == "False False\n"
