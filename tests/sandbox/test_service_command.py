"""``python -m llm_envs.sandbox.service --workers 2``: two processes, one port, a pool each.

The command runs as a child of the test on a free port of 127.0.0.1. Both
processes answer (their pids come back as ``executor_pod_name``), each keeps to
its own share of the CPUs (so their pools' pinned workers never share one), and
an interrupt stops the whole tree: the processes, their pools' workers and
every run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

import pytest
import requests
from fastapi.testclient import TestClient

from llm_envs.sandbox.service import ServiceSettings
from llm_envs.sandbox.service.server import (
    ENVIRONMENT_VARIABLE,
    _cpu_shares,
    app_from_environment,
    main,
)

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def children() -> dict[int, list[int]]:
    """Every process's children, from /proc."""
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rpartition(")")[2].split()[1])
            found.setdefault(parent, []).append(int(entry.name))
    return found


def descendants(pid: int) -> set[int]:
    tree, found, todo = children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(("cpus", "processes"), [(2, 2), (6, 4), (16, 3), (8, 8)])
def test_each_process_gets_an_even_share_of_the_cpus(monkeypatch, cpus, processes):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(100, 100 + cpus)))
    shares = _cpu_shares(processes)
    assert shares is not None and len(shares) == processes
    assert sorted(cpu for share in shares for cpu in share) == list(range(100, 100 + cpus))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_more_processes_than_cpus_get_one_unpinned_worker_each(monkeypatch):
    processes = len(os.sched_getaffinity(0)) + 1
    assert _cpu_shares(processes) is None
    spec = {"settings": asdict(ServiceSettings()), "processes": processes, "cpu_shares": None}
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, json.dumps(spec))
    app = app_from_environment()
    with TestClient(app):
        pool = app.state.service.pool
        assert (pool.workers, pool.pin_cpus) == (1, False)


def test_help_exits_0(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"], prog="llm-envs sandbox-serve")
    assert exit_info.value.code == 0
    assert "--pool-workers" in capsys.readouterr().out


@pytest.mark.slow
def test_two_processes_share_the_port_and_stop_together():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "llm_envs.sandbox.service", "--port", str(port),
               "--workers", "2", "--pool-workers", "1", "--log-level", "warning"]  # fmt: skip
    service = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert service.poll() is None, service.communicate()[1]
            assert time.monotonic() < deadline, "the service did not answer within 120 s"
            try:
                if requests.get(f"{url}/v1/ping", timeout=5).json() == "pong":
                    break
            except requests.ConnectionError:
                time.sleep(0.2)

        def square(i: int) -> tuple[str, str]:
            body = {"code": f"import time\ntime.sleep(0.05)\nprint({i} ** 2)", "language": "python"}
            answer = requests.post(f"{url}/run_code", json=body, timeout=60).json()
            return answer["executor_pod_name"], answer["run_result"]["stdout"]

        served: set[str] = set()
        rounds = 0
        with ThreadPoolExecutor(8) as executor:
            while len(served) < 2 and rounds < 10:
                rounds += 1
                answers = list(executor.map(square, range(16)))
                assert [out for _, out in answers] == [f"{i * i}\n" for i in range(16)]
                served |= {pod for pod, _ in answers}
        assert len(served) == 2, f"one process answered {rounds} rounds of 16 requests alone"
        pids = {int(pod.rpartition(":")[2]) for pod in served}
        assert pids <= descendants(service.pid)

        cpus = sorted(os.sched_getaffinity(0))
        shares = [sorted(os.sched_getaffinity(pid)) for pid in pids]
        if len(cpus) >= 2:
            assert sorted(cpu for share in shares for cpu in share) == cpus, shares
        submitted = requests.post(
            f"{url}/submit",
            json={"dataset": "humaneval", "id": 2, "completion": "    return number % 1.0\n"},
            timeout=60,
        ).json()
        assert submitted["accepted"] is True

        tree = descendants(service.pid)
        assert len(tree) >= 2 + 2  # the two processes, and at least a pool worker each
    finally:
        service.send_signal(signal.SIGINT)
        try:
            service.wait(60)
        finally:
            service.kill()
    assert service.returncode == 0
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in tree if alive(pid)] == []
