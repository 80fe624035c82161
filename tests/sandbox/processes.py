"""Process-tree helpers for the sandbox tests."""

from __future__ import annotations

import os
from collections.abc import Iterable

from llm_envs.sandbox import Sandbox


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == b"Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    return children


def _process_state(pid: int) -> bytes | None:
    """The state letter of process ``pid`` (``b"Z"`` for a zombie), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return None


def _innermost_pid(pid: int) -> int | None:
    """Process ``pid``'s pid in its own PID namespace (the last ``NSpid`` field), or None."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except OSError:
        return None
    return pid  # a kernel without NSpid (before 4.1): no PID namespaces either


def _descendants(roots: list[int]) -> list[int]:
    """Every process below ``roots`` (zombies included)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as stat:
                    parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except OSError:
                continue
            parents.setdefault(parent, []).append(int(name))
    found: list[int] = []
    stack = list(roots)
    while stack:
        below = parents.get(stack.pop(), [])
        found += below
        stack += below
    return found


def surviving_run_processes(pool: Sandbox, pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` (as a run saw them) that still exist, even as zombies.

    In a PID namespace a run's pids are the namespace's: every process of it is
    below the pool's workers on the host (the worker is its init, which inherits
    every orphan), and is matched by its innermost pid. Otherwise they are the
    host's pids.
    """
    wanted = set(pids)
    if pool.protections.pid_namespace:
        below = _descendants(worker_pids(pool))
        return sorted(wanted & {_innermost_pid(pid) for pid in below})
    return sorted(pid for pid in wanted if _process_state(pid) is not None)


def worker_pids(pool: Sandbox) -> list[int]:
    """The pids of the pool's worker processes (as the pool started them)."""
    return [slot.worker.process.pid for slot in pool._slots if slot.worker is not None]


def stray_processes(pool: Sandbox) -> list[int]:
    """Processes below the pool's workers that no idle worker should have.

    An idle worker's tree is one chain: (the namespace's init,) the spawner, and
    at most one run forked ahead and waiting for its job. Anything branching off
    that chain, or below the waiting run, was left behind by a run.
    """
    children = _children()
    stray = []
    for worker in worker_pids(pool):
        chain = [worker]
        while len(children.get(chain[-1], [])) == 1 and len(chain) < 5:
            chain.append(children[chain[-1]][0])
        for pid in chain:
            below = children.get(pid, [])
            if len(below) > 1:
                stray += below
        if len(chain) > 4:
            stray += chain[4:]
    return stray


def cpu_ticks_of_run(pool: Sandbox) -> int:
    """CPU clock ticks used by the newest process of the first worker's chain (its run).

    Zero while the run forked ahead waits for a job; it grows once a busy
    program runs.
    """
    children = _children()
    chain = [worker_pids(pool)[0]]
    while len(children.get(chain[-1], [])) == 1:
        chain.append(children[chain[-1]][0])
    try:
        with open(f"/proc/{chain[-1]}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def worker_groups(pool: Sandbox) -> list[dict[str, list[str]]]:
    """Each worker's control groups: ``{"worker": [...], "runs": [...], "created": [...]}``."""
    return [
        {
            "worker": list(slot.worker.groups.worker.values()),
            "runs": list(slot.worker.groups.runs.values()),
            "created": list(slot.worker.groups.created),
        }
        for slot in pool._slots
        if slot.worker is not None and slot.worker.groups is not None
    ]
