"""The holes issue 13 names, closed: sockets, memory outside the limit, trees left behind.

Each case runs on the session's pool (every protection the machine offers) and
checks what the program saw from the inside (its function returns a
description, which the test compares) and that the pool stays healthy.
"""

from __future__ import annotations

import os
import socket
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_envs.sandbox import ProgramStatus, Sandbox
from llm_envs.sandbox._processes import clean_directory as _clean_directory
from tests.sandbox.processes import stray_processes, worker_pids

HONEST = ("def f():\n    return 1\n", ["assert f() == 1"])


def outcome_message(pool: Sandbox, program: str, timeout: float = 30.0) -> str:
    """What ``f()`` returned, as the failing test ``assert f() == 'ok'`` shows it."""
    report = pool.run_tests(textwrap.dedent(program), ["assert f() == 'ok'"], timeout=timeout)
    assert report.status is ProgramStatus.OK, report
    (outcome,) = report.outcomes
    assert not outcome.passed
    assert pool.run_tests(*HONEST).all_passed
    return outcome.message or ""


@pytest.fixture
def unix_server() -> Iterator[str]:
    """A pathname unix socket in /tmp that accepts connections (a service on the host)."""
    path = os.path.join(tempfile.mkdtemp(prefix="llm-envs-test-"), "service.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(os.path.dirname(path), 0o755)
    os.chmod(path, 0o777)
    server.listen(8)
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True)
    thread.start()
    yield path
    server.close()
    for connection in accepted:
        connection.close()


def needs_syscall_filter(pool: Sandbox) -> None:
    if not pool.protections.syscalls_filtered:
        pytest.skip("syscalls_filtered is False on this machine (no seccomp)")


def test_no_socket_of_any_family_can_be_made(sandbox: Sandbox, unix_server: str) -> None:
    needs_syscall_filter(sandbox)
    program = f"""
        import socket
        def f():
            seen = []
            for family, kind in ((socket.AF_UNIX, socket.SOCK_STREAM),
                                 (socket.AF_INET, socket.SOCK_DGRAM),
                                 (socket.AF_INET6, socket.SOCK_STREAM),
                                 (socket.AF_NETLINK, socket.SOCK_RAW)):
                try:
                    s = socket.socket(family, kind)
                except OSError as error:
                    seen.append(type(error).__name__)
                    continue
                try:
                    s.connect({unix_server!r})
                    seen.append("connected")
                except OSError as error:
                    seen.append("made")
            return seen
    """
    message = outcome_message(sandbox, program)
    assert message.count("PermissionError") == 4, message


def test_socketpair_stays_usable_inside_the_run(sandbox: Sandbox) -> None:
    program = """
        import socket
        def f():
            a, b = socket.socketpair()
            a.sendall(b"ok")
            return b.recv(2).decode()
    """
    assert sandbox.run_tests(textwrap.dedent(program), ["assert f() == 'ok'"]).all_passed


ALLOCATIONS = {
    # (the attempt, what the program must see)
    "memfd": ("os.memfd_create('x')", "refused PermissionError"),
    "dev-shm": ("open('/dev/shm/llm-envs-test', 'wb').write(b'x' * 4096)", "refused"),
    "sysv-shm": ("ctypes.CDLL(None).shmget(0, 1 << 20, 0o1600)", "returned -1"),
    "posix-mqueue": (
        "ctypes.CDLL(None).mq_open(b'/llm-envs-test', 0o100, 0o600, None)",
        "returned -1",
    ),
}


@pytest.mark.parametrize(("attempt", "seen"), ALLOCATIONS.values(), ids=ALLOCATIONS.keys())
def test_memory_outside_the_address_space_limit_is_refused(
    sandbox: Sandbox, attempt: str, seen: str
) -> None:
    if "/dev/shm" in attempt and not sandbox.protections.filesystem_confined:
        pytest.skip("filesystem_confined is not available here")
    if "/dev/shm" not in attempt:
        needs_syscall_filter(sandbox)
    program = f"""
        import ctypes, mmap, os
        def f():
            try:
                result = {attempt}
            except BaseException as error:
                return "refused " + type(error).__name__
            return "returned " + repr(result)
    """
    assert seen in outcome_message(sandbox, program)


TREES = {
    "deep": """
        import os
        def f():
            for _ in range(3000):
                os.mkdir("d" * 200)
                os.chdir("d" * 200)
            return "deep"
    """,
    "wide": """
        import os
        def f():
            try:
                for index in range(100_000):
                    open(f"file-{index}", "w").close()
            except OSError:
                pass
            return "wide"
    """,
    "locked": """
        import os
        def f():
            os.makedirs("a/b/c")
            open("a/b/c/x", "w").close()
            os.chmod("a/b/c", 0)
            os.chmod("a/b", 0)
            os.chmod("a", 0)
            os.symlink("/etc", "link")
            return "locked"
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("program", TREES.values(), ids=TREES.keys())
def test_a_tree_left_behind_never_reaches_the_next_run(sandbox: Sandbox, program: str) -> None:
    report = sandbox.run_tests(textwrap.dedent(program), ["assert f() == 'ok'"], timeout=60)
    assert report.status is ProgramStatus.OK, report
    listing = "import os\ndef f():\n    return sorted(os.listdir('.'))\n"
    for _ in range(2):  # (both workers)
        after = sandbox.run_tests(listing, ["assert f() == []"])
        assert after.all_passed, after
    assert stray_processes(sandbox) == []


def test_clean_directory_deletes_any_tree_or_gives_up(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    deep = os.open(root, os.O_RDONLY)
    try:
        # Deeper than PATH_MAX: built one relative step at a time.
        for _ in range(40):
            os.mkdir("x" * 250, dir_fd=deep)
            child = os.open("x" * 250, os.O_RDONLY, dir_fd=deep)
            open(f"/proc/self/fd/{child}/f", "w").close()
            os.close(deep)
            deep = child
        os.chmod(f"/proc/self/fd/{deep}", 0)
    finally:
        os.close(deep)
    (root / "link").symlink_to("/etc")
    (root / "plain").write_text("x")
    assert _clean_directory(str(root))
    assert list(root.iterdir()) == []
    for index in range(50):
        (root / f"f{index}").write_text("x")
    assert not _clean_directory(str(root), budget=10)
    assert _clean_directory(str(root))
    assert not _clean_directory(str(tmp_path / "missing"))


@pytest.mark.slow
def test_a_worker_that_cannot_clean_up_is_replaced_and_its_run_reported() -> None:
    # A run that leaves more entries than the worker cleans: it gets its report, and
    # its worker is replaced (the next run finds an empty directory).
    program = """
        import os
        def f():
            for index in range(60_000):
                try:
                    open(f"f{index}", "w").close()
                except OSError:
                    return "full"
            return "made"
    """
    # (Without namespaces: a mount namespace's run directory caps inodes below the budget.)
    with Sandbox(workers=1, timeout=60.0, namespaces=False) as pool:
        before = worker_pids(pool)
        report = pool.run_tests(textwrap.dedent(program), ["assert f() == 'ok'", "assert 1"])
        assert report.status is ProgramStatus.OK, report
        assert report.outcomes[1].passed
        listing = "import os\ndef f():\n    return os.listdir('.')\n"
        assert pool.run_tests(listing, ["assert f() == []"]).all_passed
        assert worker_pids(pool) != before
