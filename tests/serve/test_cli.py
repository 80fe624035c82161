"""``python -m llm_envs.serve``: bad flags fail at start-up with the fix; good ones serve."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from llm_envs.serve.__main__ import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--env", "chess"],
            "unknown env 'chess'; the registered ones are: debate, expert_iteration",
        ),
        (["--env", "debate", "--task", "chess"], "env 'debate' takes task default | arithmetic"),
        (
            ["--env", "debate", "--env-kwargs", '{"num_agents": 1}'],
            "num_agents must be an int >= 2",
        ),
        (["--env-kwargs", "{num_agents: 3}"], "--env-kwargs: not JSON"),
        (["--env-kwargs", "[3]"], "needs a JSON object like '{\"num_agents\": 3}'"),
        (["--seat-timeout", "0"], "--seat-timeout: must be a finite number > 0, got 0"),
        (["--step-deadline", "nan"], "--step-deadline: must be a finite number > 0, got nan"),
        (["--seat-timeout", "soon"], "--seat-timeout: must be a number of seconds, got 'soon'"),
        (["--max-episodes", "0"], "--max-episodes: must be >= 1, got 0"),
        (["--max-sessions", "-2"], "--max-sessions: must be >= 1, got -2"),
        (["--workers", "0"], "--workers: must be >= 1, got 0"),
        (["--port", "70000"], "--port: must be from 0 to 65535, got 70000"),
        (["--log-level", "loud"], "--log-level: invalid choice: 'loud'"),
        (
            ["--max_episodes", "3"],
            "--max_episodes: flags are spelled with dashes here: --max-episodes",
        ),
    ],
)
def test_bad_flags_exit_2_with_the_fix(capsys, argv, message):
    """The project's one error style (CommandParser): one line naming the flag and the fix."""
    with pytest.raises(SystemExit) as exited:
        main(argv, prog="llm-envs serve")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("llm-envs serve: error: ") and message in err
    assert "usage:" not in err and err.rstrip().endswith("(llm-envs serve --help lists every flag)")


def test_the_command_serves_until_stopped(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "llm_envs.serve",
        "--env=debate",
        f"--env-kwargs={json.dumps({'num_agents': 3, 'max_rounds': 1})}",
        f"--port={port}",
        f"--records={tmp_path}",
        "--log-level=warning",
    ]
    server = subprocess.Popen(command, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            try:
                envs = httpx.get(f"http://127.0.0.1:{port}/envs").json()["envs"]
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start within a minute"
                time.sleep(0.1)
        created = httpx.post(f"http://127.0.0.1:{port}/episodes", json={"seed": 3}).json()
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert [e["env"] for e in envs if e["default"]] == ["debate"]
    assert created["env_kwargs"] == {"num_agents": 3, "max_rounds": 1} and created["seed"] == 3
    assert list(created["seats"]) == ["agent_0", "agent_1", "agent_2"]
    assert created["seats"]["agent_0"]["pending"] is True
