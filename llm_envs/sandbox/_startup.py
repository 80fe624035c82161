"""A worker's start-up steps: what it loads, which uid its runs get, what confines them.

Each function runs once, in the worker (:mod:`llm_envs.sandbox._worker`), while
it starts, before it forks its spawner. Some fork short-lived probes; none runs
untrusted code.
"""

from __future__ import annotations

import os

from llm_envs.sandbox import _isolation, _landlock, _seccomp
from llm_envs.sandbox._processes import wait_status

__all__ = [
    "PRELOADED_MODULES",
    "become_pid_namespace_init",
    "build_rulesets",
    "pick_uid",
    "pin_to_cpu",
    "preload_modules",
    "probe_signal_filter",
    "process_limit",
]

#: Standard modules imported before forking, so runs don't pay for them: what
#: HumanEval, MBPP and typical model-written solutions import. Every module here
#: is in the memory of every run, and a fork and an exit cost time in proportion
#: to that memory: ``dataclasses`` is left out (it brings ``inspect``, ``ast``,
#: ``dis`` and ``tokenize``, 1.2 MiB that every run would copy page tables for),
#: so a program that imports it pays for the import instead (a few milliseconds).
PRELOADED_MODULES = (
    "abc",
    "array",
    "bisect",
    "calendar",
    "cmath",
    "collections",
    "collections.abc",
    "contextlib",
    "copy",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "json",
    "math",
    "numbers",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "struct",
    "textwrap",
    "time",
    "typing",
    "unicodedata",
)
_SANDBOX_UID_BASE = 2_000_000_000
_FALLBACK_UID = 65534  # nobody


def preload_modules() -> None:
    """Import :data:`PRELOADED_MODULES`."""
    for name in PRELOADED_MODULES:
        __import__(name)


def pin_to_cpu(index: int) -> None:
    """Keep this process (and so its runs) on the ``index``-th CPU it may use, round robin."""
    # The worker and its runs take turns (each waits while the other works):
    # on one CPU, each call's hand-over goes to a process on the CPU that just
    # went idle, with warm caches, instead of waking another CPU (measured:
    # 20 us per call instead of 67 on an idle 2-CPU VM).
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {allowed[index % len(allowed)]})


def become_pid_namespace_init(proto_in: int, proto_out: int) -> None:
    """Fork the process that is PID 1 of the new namespace; this one only waits for it."""
    child = os.fork()
    if child == 0:
        _isolation.set_parent_death_signal()
        return
    os.close(proto_in)
    os.close(proto_out)
    os._exit(os.waitstatus_to_exitcode(wait_status(child)) & 0xFF)


def pick_uid(index: int, import_paths: list[str]) -> int | None:
    """An unused uid this (root) worker's runs can switch to and import as, or None.

    Each uid is tried in a probe process: the account lookup loads the C
    library's name-service modules, which would otherwise stay mapped in the
    worker, and so be copied into every run's page tables.
    """
    import pwd  # only needed as root

    for uid in (_SANDBOX_UID_BASE + index, _FALLBACK_UID):
        probe = os.fork()
        if probe == 0:
            try:
                try:
                    pwd.getpwuid(uid)
                    if uid != _FALLBACK_UID:
                        os._exit(2)  # a real account: never borrow it
                except KeyError:
                    pass
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                for path in import_paths:  # runs must be able to import
                    os.listdir(path)
            except BaseException:
                os._exit(1)
            os._exit(0)
        if os.waitstatus_to_exitcode(wait_status(probe)) == 0:
            return uid
    return None


def process_limit(
    max_processes: int, *, root_without_uid: bool, own_uid: bool, user_namespace: bool
) -> int | None:
    """The RLIMIT_NPROC of the runs (None: none can be enforced).

    RLIMIT_NPROC counts the spawner too, hence the + 1.
    """
    if root_without_uid:
        return None  # the kernel never limits uid 0's processes
    if own_uid or user_namespace:
        # Only the sandbox's own processes count: a uid (or user namespace) of its own.
        return max_processes + 1
    # The limit counts every task of the caller's uid: allow what runs now plus
    # the run's share. Tasks started later only make a run's forks fail sooner.
    return _isolation.count_user_tasks(os.getuid()) + max_processes + 1


def build_rulesets(abi: int, run_dir: str, *, site_packages: bool) -> tuple[int, int]:
    """The Landlock ruleset every run gets (writes only in ``run_dir``), and the nested one."""
    paths = _landlock.default_read_paths(site_packages=site_packages)
    paths = _landlock.LandlockPaths(
        read_dirs=paths.read_dirs,
        listable_dirs=paths.listable_dirs,
        read_files=paths.read_files,
        write_files=paths.write_files,
        write_dirs=(run_dir,),
    )
    return _landlock.build_landlock_ruleset(abi, paths), _landlock.build_nested_ruleset(abi)


def probe_signal_filter() -> bool:
    """Whether a seccomp filter can be installed here (tried in a forked probe)."""
    probe = os.fork()
    if probe == 0:
        try:
            _isolation.set_no_new_privs()
            os._exit(0 if _seccomp.install_signal_filter(allow=[os.getpid()]) else 1)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(wait_status(probe)) == 0
