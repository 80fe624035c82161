"""Control groups: each worker's runs bounded as one tree (memory, processes), each worker's CPU.

Resource limits (rlimits) bound each process of a run; a run that forks has as
many budgets as processes. The kernel's control groups bound a tree instead:
every process a run starts is born in its parent's group and cannot leave it
(moving needs write access to the group files, which runs lack: another uid,
or Landlock). Per worker, the pool creates:

* a **run group** (memory and pids controllers), which the spawner joins once,
  so that every run is born in it: memory (resident, swap, page cache, the run
  directory's tmpfs) is limited to ``memory_mb`` per run of the job, processes
  and threads to ``max_processes`` per run; an out-of-memory kill in it is
  reported by an event (:meth:`RunGroups.out_of_memory`), and the run's
  verdict names memory;
* a **worker group** (cpu, and cpuset where the pool pins workers), which the
  worker joins at start: the judge and its runs get at most one CPU's time
  together (``cpu.cfs_quota_us``, ``cpu.max``) and the same weight as any
  other worker, whatever number of processes or sessions a run makes
  (a group is one scheduling entity; the kernel's per-session autogroups apply
  only outside groups); a pinned worker's runs cannot leave its CPU.

Two kernel interfaces: v1 (one hierarchy per controller, each mounted where
``/proc/self/mountinfo`` says; needs root in practice), where the groups are
children of the caller's own group in each hierarchy; and v2 (one hierarchy),
where they are children of a group that delegates the controllers to its
children (``cgroup.subtree_control``): the caller's own group, or its parent
when writable (a systemd ``Delegate=`` unit, a user session's slice). The
caller's own process never moves, and no setting outside the sandbox's own
groups changes.

The pool (:mod:`.pool`) finds the interface (:func:`find_support`), creates a
worker's groups (:func:`create_groups`) and removes them when the worker goes
(:func:`remove_groups`): it kills what is left in them first. Groups whose
owning process died without removing them (SIGKILL) are removed by the next
pool that starts (:func:`sweep_stale`). The worker (:mod:`._worker`) holds a
:class:`RunGroups`. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "GROUP_PREFIX",
    "OUT_OF_MEMORY",
    "GroupSpec",
    "RunGroups",
    "Support",
    "create_groups",
    "find_support",
    "group_name",
    "owner_alive",
    "remove_groups",
    "support_from",
    "sweep_stale",
    "trial",
]

#: Every group the sandbox creates is named ``GROUP_PREFIX.<pid ns>.<pid>.<start time>.<id>``:
#: the PID namespace, pid and start time of the process that created it (to tell
#: stale groups; one made from another PID namespace is never taken for stale).
GROUP_PREFIX = "llm-envs-sandbox"
#: The reason a run's verdict gives when its tree ran out of memory (``{mb}``: its limit).
OUT_OF_MEMORY = (
    "the run's processes used more than {mb} MiB of memory in all (memory_mb); "
    "the kernel killed one"
)
_V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuset")
_NEEDED = ("memory", "pids", "cpu")
_OOM_SCORE_ADJ_MAX = b"1000"
_REMOVE_PATIENCE = 10.0


class Support(NamedTuple):
    """Where the sandbox may create control groups, as :func:`find_support` found it.

    Attributes:
        version: 1 or 2; 0 when none can be created.
        bases: v1: ``{controller: the caller's group directory}`` for each usable
            controller; v2: ``{"": the directory the groups go under}``.
        missing: why none (or not every controller) can be used; empty when all can.
    """

    version: int
    bases: dict[str, str]
    missing: str = ""


class GroupSpec(NamedTuple):
    """One worker's groups, as the pool created them (passed to the worker as a plain dict).

    Attributes:
        version: 1 or 2.
        worker: the groups the worker joins (``{controller: directory}``; v2: ``{"": dir}``).
        runs: the groups the spawner joins, and so every run.
        created: every directory created, deepest first (what removal deletes).
    """

    version: int
    worker: dict[str, str]
    runs: dict[str, str]
    created: list[str]

    def as_config(self) -> dict[str, Any]:
        """The groups as the plain dict a worker's JSON configuration carries."""
        return {
            "version": self.version,
            "worker": self.worker,
            "runs": self.runs,
            "created": self.created,
        }


# --- finding where groups can go (the pool's side) ------------------------------------------


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """``(root, mount point, type, super options)`` of every cgroup file system mounted."""
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        after = line.split(" - ", 1)[1].split()
        if len(after) < 3 or after[0] not in ("cgroup", "cgroup2"):
            continue
        point = fields[4].replace("\\040", " ")
        found.append((fields[3], point, after[0], set(after[2].split(","))))
    return found


def _own_groups(cgroup: str) -> dict[str, str]:
    """The caller's group in each hierarchy: ``{controller: path}`` (v2's under ``""``)."""
    groups = {}
    for line in cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            groups[controller] = parts[2]
    return groups


def _under(mount_root: str, point: str, path: str) -> str | None:
    """The directory of group ``path`` in a hierarchy mounted at ``point`` from ``mount_root``."""
    if mount_root != "/" and path != mount_root and not path.startswith(mount_root + "/"):
        return None  # the group lies outside what this mount shows
    relative = path[len(mount_root) :] if mount_root != "/" else path
    return point.rstrip("/") + relative if relative != "/" else point


def support_from(
    mountinfo: str,
    cgroup: str,
    *,
    euid: int,
    writable: Callable[[str], bool],
    read: Callable[[str], str],
) -> Support:
    """Where groups can be created, from ``/proc/self/mountinfo`` and ``/proc/self/cgroup``.

    A pure function of its inputs (the tests give it other machines' files).

    Args:
        mountinfo: ``/proc/self/mountinfo``.
        cgroup: ``/proc/self/cgroup``.
        euid: the caller's effective uid.
        writable: whether the caller may create directories in a directory.
        read: a file's text ("" when it cannot be read).
    """
    mounts = _mounts(mountinfo)
    if not mounts:
        return Support(0, {}, "no control group file system is mounted")
    own = _own_groups(cgroup)
    v1: dict[str, str] = {}
    for controller in _V1_CONTROLLERS:
        for root, point, kind, options in mounts:
            if kind == "cgroup" and controller in options and controller in own:
                directory = _under(root, point, own[controller])
                if directory is not None and writable(directory):
                    v1[controller] = directory
                break
    if all(controller in v1 for controller in _NEEDED):
        if euid != 0:
            return Support(0, {}, "control groups v1 are usable by root only")
        return Support(1, v1)
    v2_base, v2_missing = _v2_base(mounts, own, writable, read)
    if v2_base is not None:
        return Support(2, {"": v2_base})
    if any(kind == "cgroup" for _, _, kind, _ in mounts):
        absent = [c for c in _NEEDED if c not in v1]
        mounted = {c for _, _, kind, options in mounts if kind == "cgroup" for c in options}
        if euid != 0:
            why = "control groups v1 are usable by root only"
        elif any(c not in mounted for c in absent):
            why = "the " + ", ".join(c for c in absent if c not in mounted) + " controller "
            why += "is not mounted (v1)"
        else:
            why = "the caller's " + ", ".join(absent) + " groups are not writable (v1)"
        return Support(0, {}, why if not v2_missing else f"{why}; {v2_missing}")
    return Support(0, {}, v2_missing)


def _v2_base(
    mounts: list[tuple[str, str, str, set[str]]],
    own: dict[str, str],
    writable: Callable[[str], bool],
    read: Callable[[str], str],
) -> tuple[str | None, str]:
    """The v2 directory groups can go under (the caller's group or its parent), or why none."""
    unified = [(root, point) for root, point, kind, _ in mounts if kind == "cgroup2"]
    if not unified or "" not in own:
        return None, "no control group v2 hierarchy"
    root, point = unified[0]
    directory = _under(root, point, own[""])
    if directory is None:
        return None, "the caller's v2 group is outside the mounted hierarchy"
    available = set(read(os.path.join(directory, "cgroup.controllers")).split())
    if not all(controller in available for controller in _NEEDED):
        return None, "v2 does not offer the " + ", ".join(
            c for c in _NEEDED if c not in available
        ) + " controller (bound to v1, or not delegated)"
    # A group with processes cannot hand controllers to children (but the root can):
    # the caller's own group qualifies only if it already does; else its parent, when
    # the caller may create groups there (the controllers reach the caller's group,
    # so the parent hands them down).
    for candidate in (directory, os.path.dirname(directory)):
        if not candidate.startswith(point.rstrip("/")) or len(candidate) < len(point.rstrip("/")):
            continue
        delegated = set(read(os.path.join(candidate, "cgroup.subtree_control")).split())
        if all(c in delegated for c in _NEEDED) and writable(candidate):
            return candidate, ""
        if candidate == point.rstrip("/") or candidate == point:
            break
    return None, "no v2 group the caller may create groups in delegates memory, pids and cpu"


def _read_text(path: str) -> str:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""


def find_support() -> Support:
    """Where this process may create control groups (see :func:`support_from`)."""
    if not os.path.exists("/proc/self/cgroup"):
        return Support(0, {}, "this kernel has no control groups")
    return support_from(
        _read_text("/proc/self/mountinfo"),
        _read_text("/proc/self/cgroup"),
        euid=os.geteuid(),
        writable=lambda path: os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK),
        read=_read_text,
    )


# --- creating and removing a worker's groups (the pool's side) ------------------------------


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (in clock ticks since boot), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def group_name(unique: str) -> str:
    """A group name that says which process made it (``unique``: distinct per worker)."""
    pid = os.getpid()
    return f"{GROUP_PREFIX}.{_pid_namespace()}.{pid}.{_start_time(pid)}.{unique}"


def owner_alive(name: str) -> bool:
    """Whether the process that created group ``name`` still runs.

    True for a name the sandbox did not make, or made from another PID
    namespace (whose pids this process cannot look up).
    """
    parts = name.split(".")
    if len(parts) < 5 or parts[0] != GROUP_PREFIX or not parts[2].isdigit():
        return True
    if parts[1] != _pid_namespace():
        return True
    return _start_time(int(parts[2])) == parts[3]


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def create_groups(support: Support, name: str, *, cpus: list[int] | None) -> GroupSpec:
    """Create one worker's groups under ``support``'s bases (see the module's docstring).

    Args:
        support: from :func:`find_support` (version 1 or 2).
        name: the groups' name (:func:`group_name`).
        cpus: the CPUs the worker's runs may use (its pinned CPU), or None for all
            of the caller's.

    Raises:
        OSError: a group could not be created or set up (whatever was created is removed).
    """
    created: list[str] = []
    try:
        if support.version == 1:
            spec = _create_v1(support.bases, name, cpus, created)
        else:
            spec = _create_v2(support.bases[""], name, cpus, created)
    except OSError:
        _remove_directories(created[::-1])
        raise
    return spec


def _one_cpu(directory: str) -> str:
    """``cpu.max`` / ``cfs_quota_us``: one CPU's time per period."""
    return _read_text(os.path.join(directory, "cpu.cfs_period_us")).strip() or "100000"


def _create_v1(
    bases: dict[str, str], name: str, cpus: list[int] | None, created: list[str]
) -> GroupSpec:
    groups = {}
    for controller in _V1_CONTROLLERS:
        if controller not in bases or (controller == "cpuset" and cpus is None):
            continue
        directory = os.path.join(bases[controller], name)
        os.mkdir(directory, 0o755)
        created.append(directory)
        groups[controller] = directory
    cpu = groups["cpu"]
    _write(os.path.join(cpu, "cpu.cfs_quota_us"), _one_cpu(cpu))
    if "cpuset" in groups:
        cpuset = groups["cpuset"]
        parent = bases["cpuset"]
        _write(os.path.join(cpuset, "cpuset.cpus"), ",".join(map(str, cpus or [])))
        _write(
            os.path.join(cpuset, "cpuset.mems"),
            _read_text(os.path.join(parent, "cpuset.mems")).strip(),
        )
    worker: dict[str, str] = {c: groups[c] for c in ("cpu", "cpuset") if c in groups}
    runs: dict[str, str] = {c: groups[c] for c in ("memory", "pids")}
    return GroupSpec(1, worker, runs, created[::-1])


def _create_v2(base: str, name: str, cpus: list[int] | None, created: list[str]) -> GroupSpec:
    top = os.path.join(base, name)
    os.mkdir(top, 0o755)
    created.append(top)
    offered = set(_read_text(os.path.join(top, "cgroup.controllers")).split())
    wanted = [c for c in (*_NEEDED, "cpuset") if c in offered and (c != "cpuset" or cpus)]
    _write(os.path.join(top, "cgroup.subtree_control"), " ".join("+" + c for c in wanted))
    _write(os.path.join(top, "cpu.max"), "100000 100000")
    if "cpuset" in wanted:
        _write(os.path.join(top, "cpuset.cpus"), ",".join(map(str, cpus or [])))
    judge, runs = os.path.join(top, "judge"), os.path.join(top, "runs")
    for directory in (judge, runs):
        os.mkdir(directory, 0o755)
        created.append(directory)
    swap = os.path.join(runs, "memory.swap.max")
    if os.path.exists(swap):  # (no swap for runs: memory.max is all they get)
        _write(swap, "0")
    return GroupSpec(2, {"": judge}, {"": runs}, created[::-1])


def _tasks(directory: str) -> list[int]:
    return [int(pid) for pid in _read_text(os.path.join(directory, "cgroup.procs")).split()]


def _remove_directories(directories: list[str], patience: float = _REMOVE_PATIENCE) -> bool:
    """Kill what is left in each directory's group, then delete it; whether every one went."""
    deadline = time.monotonic() + patience
    removed = True
    for directory in directories:
        while True:
            for pid in _tasks(directory):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            try:
                os.rmdir(directory)
                break
            except FileNotFoundError:
                break
            except OSError as error:
                # EBUSY: killed processes still leaving (their exit takes a moment).
                if error.errno != errno.EBUSY or time.monotonic() > deadline:
                    removed = False
                    break
                time.sleep(0.002)
    return removed


def remove_groups(spec: GroupSpec | dict[str, Any]) -> bool:
    """Kill every process left in a worker's groups and delete them; whether all went."""
    created = spec.created if isinstance(spec, GroupSpec) else spec["created"]
    return _remove_directories(list(created))


def sweep_stale(support: Support) -> int:
    """Remove the groups of sandbox pools whose process died without removing them; how many."""
    removed = 0
    for base in support.bases.values():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if not name.startswith(GROUP_PREFIX + ".") or owner_alive(name):
                continue
            top = os.path.join(base, name)
            # (v2: the judge and runs groups first)
            children = [os.path.join(top, child) for child in ("judge", "runs")]
            existing = [child for child in children if os.path.isdir(child)]
            if _remove_directories([*existing, top], patience=1.0):
                removed += 1
    return removed


# --- the worker's side -------------------------------------------------------------------------


class RunGroups:
    """A worker's hold on its groups: it joins the worker's, sizes the runs', watches for OOM.

    Created in the worker before anything else (the descriptors are opened while
    the worker may still open the group files). The spawner joins the run groups
    by writing ``0`` to :attr:`join_fds`, opened here (once confined, it could not
    open them), then closes them: no run holds one.

    Args:
        spec: the worker's :class:`GroupSpec`, as a dict.
        memory_bytes: ``memory_mb`` in bytes: the limit per run of a job.
        max_processes: the processes and threads a run may have.
    """

    def __init__(self, spec: dict[str, Any], memory_bytes: int, max_processes: int) -> None:
        self.version = int(spec["version"])
        self.memory_bytes = memory_bytes
        self.max_processes = max_processes
        worker, runs = dict(spec["worker"]), dict(spec["runs"])
        for directory in worker.values():
            _write(os.path.join(directory, "cgroup.procs"), "0")
        flags = os.O_WRONLY | os.O_CLOEXEC
        self.join_fds = [os.open(os.path.join(d, "cgroup.procs"), flags) for d in runs.values()]
        if self.version == 1:
            memory, pids = runs["memory"], runs["pids"]
            self.memory_fds = [os.open(os.path.join(memory, "memory.limit_in_bytes"), flags)]
            swap = os.path.join(memory, "memory.memsw.limit_in_bytes")
            if os.path.exists(swap):  # (swap accounting on)
                self.memory_fds.append(os.open(swap, flags))
            self.pids_fd = os.open(os.path.join(pids, "pids.max"), flags)
            # An eventfd the kernel signals at every OOM in the group.
            self.oom_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            control = os.open(os.path.join(memory, "memory.oom_control"), os.O_RDONLY)
            try:
                _write(os.path.join(memory, "cgroup.event_control"), f"{self.oom_fd} {control}")
            finally:
                os.close(control)
            self.oom_events = select.POLLIN
        else:
            directory = runs[""]
            # (memory.swap.max, set to 0 with the group, limits swap separately.)
            self.memory_fds = [os.open(os.path.join(directory, "memory.max"), flags)]
            self.pids_fd = os.open(os.path.join(directory, "pids.max"), flags)
            # memory.events: poll() reports POLLPRI when it changes.
            self.oom_fd = os.open(os.path.join(directory, "memory.events"), os.O_RDONLY)
            self.oom_events = select.POLLPRI
            self.oom_kills = self._oom_kills()
        self.runs = 0
        self.fired = False

    def size(self, runs: int) -> None:
        """Set the run group's limits for a job of ``runs`` runs (a helper's makes it two).

        Called before the job's runs are forked; writes only on a change. Raising
        the swap limit goes first (v1 keeps it at or above the memory limit).
        """
        if runs == self.runs:
            return
        memory = str(self.memory_bytes * runs).encode()
        # v1 keeps the swap limit at or above the memory limit: raised first, lowered
        # last (a new group's limits are unlimited: that is lowering).
        raising = 0 < self.runs < runs
        for fd in self.memory_fds[::-1] if raising else self.memory_fds:
            os.write(fd, memory)
        # The spawner counts too.
        os.write(self.pids_fd, str(self.max_processes * runs + 1).encode())
        self.runs = runs

    def adopt(self, pid: int) -> None:
        """Make the run ``pid`` (not yet started on its job) the OOM killer's first choice.

        Its processes inherit it, so in the group an OOM kill never picks the spawner,
        even when a run's processes are each smaller than it. (The worker writes it
        as root, which also stops the run from lowering it.)
        """
        with contextlib.suppress(OSError):
            fd = os.open(f"/proc/{pid}/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, _OOM_SCORE_ADJ_MAX)
            finally:
                os.close(fd)

    def _oom_kills(self) -> int:
        for line in os.pread(self.oom_fd, 4096, 0).decode().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def check(self) -> str | None:
        """Called when :attr:`oom_fd` polls ready: the reason to end the run, or None."""
        if self.version == 1:
            try:
                os.read(self.oom_fd, 8)
                self.fired = True
            except BlockingIOError:
                pass
        else:
            kills = self._oom_kills()
            if kills != self.oom_kills:
                self.oom_kills = kills
                self.fired = True
        return self.reason() if self.fired else None

    def reason(self) -> str:
        return OUT_OF_MEMORY.format(mb=self.memory_bytes // 2**20)

    def out_of_memory(self) -> bool:
        """Whether the run group ran out of memory since the last call (the run that just ended)."""
        self.check()
        fired, self.fired = self.fired, False
        return fired


def trial(spec: dict[str, Any]) -> None:
    """Do, in this (throwaway) process, what a worker and its spawner do with their groups.

    The pool runs it in a child process on a probe's groups before it trusts a
    machine's groups: joining the worker groups, opening and sizing the run
    groups' limits, registering the OOM event, joining the run groups. Raises
    what fails.
    """
    groups = RunGroups(spec, 64 << 20, 1)
    groups.size(1)
    groups.size(2)
    groups.size(1)
    for fd in groups.join_fds:
        os.write(fd, b"0")
    groups.adopt(os.getpid())
    groups.out_of_memory()
