"""Operating-system confinement for sandbox runs: namespaces, rlimits, credentials, processes.

The sandbox worker calls these functions to confine the processes it forks for
untrusted programs. Each mechanism is probed, never assumed: the worker uses
what the kernel and its privileges allow and reports the result as
:class:`~llm_envs.sandbox.report.Protections`.

* Namespaces (``unshare``): a PID namespace (runs cannot see or signal anything
  outside, and die with the worker), an empty network namespace, a mount
  namespace with a private ``/proc`` and a size-limited tmpfs. As root directly;
  otherwise inside a user namespace when the kernel allows unprivileged ones.
* Landlock and seccomp live in :mod:`._landlock` and :mod:`._seccomp`, which
  use this module's pre-bound libc functions.
* Credentials: as root, runs switch to an unprivileged uid; in a user namespace
  they drop every capability; always ``no_new_privs``.
* rlimits: address space, CPU time, file size, processes, open files, no core
  dumps, no raised priority.

This module only uses the standard library (it runs in a bare interpreter
started with ``-I -S``), and not ``dataclasses``: every run is forked from a
process that imported this module, and ``dataclasses`` would bring ``inspect``
and ``ast`` into the memory of every run. It must never be imported by the
caller's process: it loads ``ctypes`` and changes process-wide state.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import stat
import struct
from collections.abc import Iterator
from typing import Any, NamedTuple

__all__ = [
    "LIBC",
    "ChildrenListing",
    "NamespaceState",
    "checked",
    "children_of",
    "children_of_self",
    "count_user_tasks",
    "drop_capabilities",
    "enter_namespaces",
    "expose_to_others",
    "fork_without_handlers",
    "mount_private_proc_and_tmp",
    "prctl_pointer",
    "set_child_subreaper",
    "set_limits",
    "set_no_new_privs",
    "set_not_dumpable",
    "set_parent_death_signal",
    "syscall2",
]

LIBC = ctypes.CDLL(None, use_errno=True)
# fork(2) through PyDLL keeps the GIL held across the call, so the child's
# interpreter state is exactly the parent's (see fork_without_handlers).
_raw_fork = ctypes.PyDLL(None, use_errno=True).fork
_raw_fork.argtypes = []
_raw_fork.restype = ctypes.c_int
# Pre-bound signatures: a run's process calls these, and every Python object a
# call allocates there costs a copy-on-write page fault.
_prctl = LIBC["prctl"]
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int
prctl_pointer = LIBC["prctl"]
prctl_pointer.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]
prctl_pointer.restype = ctypes.c_int
syscall2 = LIBC["syscall"]
syscall2.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_uint32]
syscall2.restype = ctypes.c_long

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000

_MS_NOSUID = 2
_MS_BIND = 4096
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38

_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def checked(result: int, what: str) -> int:
    """``result`` of a libc call, or the ``OSError`` its errno names (``what`` says which call)."""
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def fork_without_handlers() -> int:
    """fork(2) without Python's at-fork work; returns 0 in the child, the child's pid in the parent.

    ``os.fork`` runs ``os.register_at_fork`` handlers (``random`` reseeds from the
    OS, ``threading`` rebuilds its state) and re-initializes interpreter locks in
    the child; on a fork per run that is a third of the child's page faults. None
    of it is needed when the caller is single-threaded and idle, which the worker
    is: no other thread can hold a lock, and ``random`` keeps the worker's state
    (seeded once), which makes runs reproducible.
    """
    pid = int(_raw_fork())
    if pid < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"fork: {os.strerror(code)}")
    return pid


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies."""
    checked(_prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0), "prctl(PDEATHSIG)")


def set_child_subreaper() -> None:
    """Become the reaper of orphaned descendants, so none can escape cleanup by re-parenting."""
    checked(_prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(SUBREAPER)")


def set_not_dumpable() -> None:
    """Make this process non-dumpable; its children inherit it.

    Processes of the same uid can then no longer ptrace it or open its
    ``/proc/<pid>/fd``, ``mem`` or ``environ``.
    """
    checked(_prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(DUMPABLE)")


def set_no_new_privs() -> None:
    """Forbid gaining privileges through exec (setuid binaries, file capabilities)."""
    checked(_prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def drop_capabilities() -> None:
    """Drop every capability (effective, permitted, inheritable) of this process."""
    header = struct.pack("Ii", _LINUX_CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two zeroed {effective, permitted, inheritable} u32 triples
    checked(LIBC.capset(header, data), "capset")


class NamespaceState(NamedTuple):
    """Which namespaces :func:`enter_namespaces` created.

    Attributes:
        pid: a new PID namespace for the caller's *children* (the caller must
            fork; its first child is PID 1 there).
        net: an empty network namespace.
        mount: a mount namespace of the caller's own.
        user: the namespaces live in a new user namespace (no root needed).
    """

    pid: bool = False
    net: bool = False
    mount: bool = False
    user: bool = False


def _unshare(flags: int) -> bool:
    return LIBC.unshare(ctypes.c_int(flags)) == 0


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_namespaces() -> NamespaceState:
    """Move this process into new PID, network and mount namespaces where allowed.

    As root this needs no user namespace. Otherwise it tries an unprivileged
    user namespace that maps the caller's uid and gid to 0 inside. When neither
    works (containers without ``CAP_SYS_ADMIN``, kernels that restrict user
    namespaces), nothing changes and the result is all False.

    Returns:
        What was created. When ``pid`` is True the caller must fork: the PID
        namespace applies to its children only.
    """
    wanted = _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWNS
    if os.geteuid() == 0 and _unshare(wanted):
        return NamespaceState(pid=True, net=True, mount=True)
    uid, gid = os.getuid(), os.getgid()
    if not _unshare(_CLONE_NEWUSER | wanted):
        return NamespaceState()
    try:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"0 {uid} 1")
        _write_file("/proc/self/gid_map", f"0 {gid} 1")
    except OSError:
        # The namespaces exist but credentials stay unmapped: still isolated, though
        # mounts will fail (reported as mount_namespace=False).
        pass
    return NamespaceState(pid=True, net=True, mount=True, user=True)


def mount_private_proc_and_tmp(scratch: str, size_bytes: int) -> bool:
    """In a new mount namespace: a private ``/proc`` and a tmpfs of ``size_bytes`` on ``scratch``.

    Must run in the process that is PID 1 of the new PID namespace, so that the
    new ``/proc`` shows that namespace.

    Returns:
        Whether both mounts succeeded (mount propagation to the host is cut first
        either way).
    """
    libc_mount = _mount_function()
    if libc_mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    proc_ok = libc_mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) == 0
    # The inode cap bounds what a run can leave behind (and what cleaning it costs).
    options = f"size={size_bytes},nr_inodes=16384,mode=0755".encode()
    tmp_ok = libc_mount(b"tmpfs", scratch.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0
    return proc_ok and tmp_ok


def _first_closed_ancestor(path: str) -> str | None:
    """The outermost ancestor of ``path`` that other users cannot traverse (no o+x)."""
    current = "/"
    for part in os.path.normpath(path).split("/")[1:-1]:
        current = os.path.join(current, part)
        if not os.stat(current).st_mode & stat.S_IXOTH:
            return current
    return None


def expose_to_others(paths: list[str]) -> None:
    """Make ``paths`` reachable by unprivileged uids, in this (root, private) mount namespace.

    A Python installed under a private home (pyenv in ``/root``, mode 0700) is
    unreachable for the uid runs switch to, so their imports would fail. For each
    closed ancestor this mounts an empty world-traversable tmpfs over it and binds
    the needed directories back at their own paths. Everything else under that
    ancestor (keys, tokens in the home directory) becomes invisible to runs.
    """
    libc_mount = _mount_function()
    wanted = [path for path in dict.fromkeys(paths) if os.path.isdir(path)]
    closed = {ancestor for path in wanted if (ancestor := _first_closed_ancestor(path))}
    outermost = sorted(a for a in closed if not any(a.startswith(o + "/") for o in closed))
    if not outermost:
        return
    handles = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in wanted}
    try:
        for ancestor in outermost:
            options = b"size=1m,mode=0755"
            if libc_mount(b"tmpfs", ancestor.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options):
                raise OSError(ctypes.get_errno(), f"mount tmpfs on {ancestor}")
        for path, handle in handles.items():
            if not any(path.startswith(ancestor + "/") for ancestor in outermost):
                continue
            os.makedirs(path, mode=0o755, exist_ok=True)
            source = f"/proc/self/fd/{handle}".encode()
            if libc_mount(source, path.encode(), None, _MS_BIND | _MS_REC, None):
                raise OSError(ctypes.get_errno(), f"bind mount {path}")
    finally:
        for handle in handles.values():
            os.close(handle)


def _mount_function() -> Any:
    libc_mount = LIBC.mount
    libc_mount.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    ]
    return libc_mount


def set_limits(
    *, memory_bytes: int, cpu_seconds: int, file_bytes: int, processes: int | None, open_files: int
) -> None:
    """Set this process's resource limits (soft and hard, so they cannot be raised back).

    Args:
        memory_bytes: address-space limit (RLIMIT_AS).
        cpu_seconds: CPU time; the kernel sends SIGKILL when it is used up.
        file_bytes: the largest file the process may write (writes beyond fail
            with EFBIG; Python ignores SIGXFSZ).
        processes: RLIMIT_NPROC, or None to leave it.
        open_files: RLIMIT_NOFILE.
    """
    limits = [
        (resource.RLIMIT_AS, memory_bytes),
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_FSIZE, file_bytes),
        (resource.RLIMIT_NOFILE, open_files),
        (resource.RLIMIT_CORE, 0),
        # No raised priority (a lower niceness, a real-time policy), where an
        # administrator's limits would allow one.
        (resource.RLIMIT_NICE, 0),
        (resource.RLIMIT_RTPRIO, 0),
    ]
    if processes is not None:
        limits.append((resource.RLIMIT_NPROC, processes))
    for which, value in limits:
        resource.setrlimit(which, (value, value))


def _each_process(what: str) -> Iterator[tuple[int, bytes]]:
    """Each process's pid and its ``/proc/<pid>/<what>``, skipping those gone while read."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/{what}", "rb") as file:
                    contents = file.read()
            except OSError:
                continue
            yield int(name), contents


def count_user_tasks(uid: int) -> int:
    """How many tasks (threads included) the real uid ``uid`` runs, as RLIMIT_NPROC counts them."""
    total = 0
    for _, status in _each_process("status"):
        fields = dict(line.split(b":", 1) for line in status.splitlines() if b":" in line)
        try:
            if int(fields[b"Uid"].split()[0]) == uid:
                total += int(fields[b"Threads"])
        except (KeyError, ValueError, IndexError):
            continue
    return total


class ChildrenListing:
    """The children of one single-threaded process, read cheaply many times.

    Keeps ``/proc/<pid>/task/<pid>/children`` open and re-reads it with one
    ``pread`` per call (the kernel regenerates it at offset 0): the worker asks
    after every run, about itself and about its spawner. Where the file is
    missing, :func:`children_of` scans. Create it after any ``/proc`` remount.

    Args:
        pid: the process described (default: the caller, as it is now).
    """

    def __init__(self, pid: int | None = None) -> None:
        self._own = pid is None
        self.pid = os.getpid() if pid is None else pid
        where = "self" if pid is None else str(pid)
        try:
            self.fd = os.open(f"/proc/{where}/task/{self.pid}/children", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.EACCES):
                raise
            self.fd = -1

    def pids(self) -> list[int]:
        """The pids of the process's children, zombies included."""
        if self.fd < 0 or (self._own and os.getpid() != self.pid):
            return children_of(os.getpid() if self._own else self.pid)
        size = 1 << 16
        while True:
            try:
                data = os.pread(self.fd, size, 0)
            except ProcessLookupError:  # (the process is gone: it has no children)
                return []
            if len(data) < size:
                return [int(child) for child in data.split()]
            size *= 4

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def children_of_self() -> list[int]:
    """The pids of this (single-threaded) process's children, zombies included."""
    return children_of(os.getpid())


def children_of(pid: int) -> list[int]:
    """The pids of the (single-threaded) process ``pid``'s children, zombies included."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as listing:
            return [int(child) for child in listing.read().split()]
    except ProcessLookupError:
        return []
    except OSError as error:
        if error.errno not in (errno.ENOENT, errno.EACCES):
            raise
    # Kernels without CONFIG_PROC_CHILDREN: scan every process's parent (after its name).
    return [
        child
        for child, line in _each_process("stat")
        if int(line.rsplit(b")", 1)[1].split()[1]) == pid
    ]
