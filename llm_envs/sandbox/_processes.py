"""Process helpers of the worker and the spawner: reading pipes, waiting, killing, cleaning up.

Standard library only; imported by the worker before it forks its spawner, so
every run carries it in memory: it stays small and imports nothing heavy.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable

__all__ = [
    "CLEANUP_BUDGET",
    "clean_directory",
    "describe_exit",
    "fork_when_possible",
    "kill_run",
    "open_pidfd",
    "read_exact",
    "wait_status",
]

#: The most entries a run's directory may hold for the worker to clean it; a run
#: that leaves more (or a tree the worker cannot delete) retires its worker.
CLEANUP_BUDGET = 50_000


def read_exact(fd: int, size: int) -> bytes | None:
    chunks = []
    while size:
        try:
            chunk = os.read(fd, size)
        except BlockingIOError:  # (a run left its shared pipe end non-blocking)
            select.select([fd], [], [])
            continue
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def clean_directory(directory: str, budget: int = CLEANUP_BUDGET) -> bool:
    """Delete everything in ``directory``; whether that worked within ``budget`` entries.

    A run may leave any tree behind: thousands of nested directories, names of
    255 bytes, paths far longer than ``PATH_MAX``, directories without
    permissions. The walk is iterative and relative to one open directory at a
    time (never a path longer than one name), and it gives up, rather than
    hang or raise, on a tree larger than ``budget`` entries.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.chmod(directory, 0o700)
        fd = os.open(directory, flags)
    except OSError:
        return False
    descended: list[str] = []  # the names from `directory` down to where fd is
    try:
        while True:
            subdirectory = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    budget -= 1
                    if budget < 0:
                        return False
                    if entry.is_dir(follow_symlinks=False):
                        subdirectory = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if subdirectory is not None:
                os.chmod(subdirectory, 0o700, dir_fd=fd)  # (a directory: no link to follow)
                child = os.open(subdirectory, flags, dir_fd=fd)
                os.close(fd)
                fd = child
                descended.append(subdirectory)
                continue
            if not descended:
                return True
            parent = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(descended.pop(), dir_fd=fd)
    except OSError:
        return False
    finally:
        os.close(fd)


def describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGKILL:
            return "the process was killed (SIGKILL: CPU time or process limits, or out of memory)"
        if number == signal.SIGXCPU:
            return "the process used up its CPU time (SIGXCPU)"
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"the process was killed by {name}"
    return (
        f"the process exited with code {os.waitstatus_to_exitcode(status)} before its tests "
        "finished (os._exit or a crash)"
    )


def fork_when_possible(fork: Callable[[], int], patience: float = 10.0) -> int:
    """``fork()``, retried while the process limit refuses it (for ``patience`` seconds)."""
    deadline = time.monotonic() + patience
    while True:
        time.sleep(0.005)
        try:
            return fork()
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise


def open_pidfd(pid: int) -> int:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return -1


def kill_run(run: int) -> None:
    """SIGKILL a run and its process group (a run may have moved itself to another group)."""
    # (try/except rather than contextlib.suppress: this runs after every run.)
    try:  # noqa: SIM105
        os.kill(run, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:  # noqa: SIM105
        os.killpg(run, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_status(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue
