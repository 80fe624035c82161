"""Programs that reach the judge through the kernel or leave state in shared files.

Simpler tampering is in ``test_judge_tampering_and_escapes.py``. Here a wrong
``add`` reaches for the judge's and the spawner's descriptors (``pidfd_getfd``
on its parent and on the namespace's init, ``/proc/PID/fd/N`` of every other
process) or writes a ``faulthandler`` dump into its channel; runs try to outlive
themselves from a user and PID namespace of their own (with a fork bomb inside
it), through ``multiprocessing``'s ``spawn`` and ``fork`` start methods, a fork
storm still raging when the run is torn down, and ``posix_spawn`` into a new
process group with the terminating signals blocked; and runs try to change the
next verdict through the output files every run shares (seals, ``flock``,
leases, ``F_SETOWN``, ``O_ASYNC``, ``fallocate``), the scheduling and I/O
priority of their parent and their uid, and ``.pth``, ``usercustomize``,
``json.py`` and poisoned ``.pyc`` files on every path they can write. Each
escape checks that its process really started, and each cross-run case judges
the next run on the same worker.

Two protections are pinned here: the seccomp filter refuses every new or joined
namespace (``unshare``, ``clone``/``clone3`` with ``CLONE_NEWUSER``, from the
run or a forked child), and the worker clears stdin's flags (``O_NONBLOCK`` by
``fcntl`` or ``ioctl(FIONBIO)``, ``O_ASYNC``) and every shared file's ``flock``
and open-file-description locks before each run.
"""

from __future__ import annotations

import subprocess
import textwrap
import time
from collections.abc import Iterator

import pytest

from llm_envs.sandbox import ProgramStatus, Sandbox, TestStatus
from tests.sandbox.test_judge_tampering_and_escapes import (
    ESCAPES,
    LIBC,
    MARK,
    RIGHT,
    SLEEPER,
    TESTS,
    WRONG,
)

# Whether a process whose command line holds MARK runs in the run (its /proc
# shows the whole PID namespace): an escape that never started proves nothing.
SEEN = textwrap.dedent(f"""
    def seen():
        import os, time
        for _ in range(300):
            for pid in filter(str.isdigit, os.listdir('/proc')):
                try:
                    with open(f'/proc/{{pid}}/cmdline', 'rb') as cmdline:
                        if {MARK.encode()!r} in cmdline.read():
                            return True
                except OSError:
                    pass
            time.sleep(0.01)
        return False
    """)
# The probe every attack below defines: what it achieved (it must be nothing).
ATTACK = "def attack():\n    return ACHIEVED\n"


@pytest.fixture(scope="module")
def solo() -> Iterator[Sandbox]:
    """One worker: the run after an attack is certain to be judged where the attack ran."""
    with Sandbox(workers=1, timeout=30.0) as pool:
        yield pool


def _next_verdicts_stand(pool: Sandbox) -> None:
    right = pool.run_tests("print('hello')\n" + RIGHT, TESTS)
    assert right.all_passed and right.stdout == "hello\n", right
    wrong = pool.run_tests(WRONG, TESTS)
    assert wrong.status is ProgramStatus.OK, wrong
    assert [o.status for o in wrong.outcomes] == [TestStatus.FAILED, TestStatus.PASSED], wrong
    assert wrong.outcomes[0].message == "assert 0 == 5", wrong


def _attack_then_probe(pool: Sandbox, attack: tuple[str, str], probe: tuple[str, str]) -> None:
    """``attack`` (program, test) passes, then ``probe`` on the same worker; verdicts stand."""
    for program, test in (attack, probe):
        report = pool.run_tests(program, [test])
        assert report.status is ProgramStatus.OK and report.all_passed, report
    _next_verdicts_stand(pool)


def _marked_processes() -> list[str]:
    found = subprocess.run(["pgrep", "-af", MARK], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if "pgrep" not in line]


# --- a wrong program that reaches for the judge's descriptors -----------------------------

REACHES = {
    # Take the spawner's status pipe (5) and go socket (6), or the worker's channels, with
    # pidfd_getfd, and write a forged status and verdict into each descriptor taken.
    "pidfd_getfd_of_the_spawner_and_init": LIBC
    + textwrap.dedent("""
      ACHIEVED = []
      for target in (os.getppid(), 1):
          pidfd = libc.syscall(434, target, 0)  # pidfd_open
          for fd in range(64):
              taken = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
              if taken >= 0:
                  ACHIEVED.append((target, fd))
                  try:
                      os.write(taken, (0).to_bytes(4, 'little') + b'{"status": "ok"}')
                  except OSError:
                      pass
      """),
    # Open every other process's descriptors through /proc (the spawner's, the worker's
    # pipes and sockets) and write a forged reply frame into each.
    "proc_fd_of_every_other_process": textwrap.dedent("""
      import os
      ACHIEVED = []
      for pid in os.listdir('/proc'):
          if not pid.isdigit() or int(pid) == os.getpid():
              continue
          try:
              fds = os.listdir(f'/proc/{pid}/fd')
          except OSError:
              fds = [str(fd) for fd in range(64)]
          for fd in fds:
              try:
                  opened = os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK)
                  os.write(opened, b'R' + (8).to_bytes(4, 'little') + bytes(8))
                  ACHIEVED.append((pid, fd))
              except OSError:
                  pass
      """),
}


@pytest.mark.parametrize("reach", list(REACHES), ids=list(REACHES))
def test_a_wrong_program_cannot_take_the_judges_descriptors(solo: Sandbox, reach: str) -> None:
    report = solo.run_tests(WRONG + REACHES[reach] + ATTACK, [*TESTS, "assert attack() == []"])
    assert report.status is ProgramStatus.OK, report
    # The judge's own comparison failed the wrong answer; nothing was taken.
    assert report.outcomes[0].status is TestStatus.FAILED, report
    assert report.outcomes[0].message == "assert 0 == 5", report
    assert [o.status for o in report.outcomes[1:]] == [TestStatus.PASSED] * 2, report
    _next_verdicts_stand(solo)


def test_a_faulthandler_dump_into_the_channel_ends_the_run(solo: Sandbox) -> None:
    # The C-level dumper writes to fd 3 from its own thread, on a timer and on the crash
    # the wrong add provokes: junk, never a verdict.
    program = (
        "import ctypes, faulthandler\n"
        "faulthandler.enable(file=3, all_threads=True)\n"
        "faulthandler.dump_traceback_later(0.001, repeat=True, file=3)\n"
        "def add(x, y):\n    ctypes.string_at(0)\n    return 0\n"
    )
    report = solo.run_tests(program, TESTS, timeout=5)
    assert report.status is ProgramStatus.KILLED, report
    assert report.passed == 0, report
    assert report.outcomes[0].status is TestStatus.FAILED, report
    assert report.outcomes[1].status is TestStatus.NOT_RUN, report
    _next_verdicts_stand(solo)


# --- runs that try to outlive themselves ------------------------------------------------------

ESCAPES17 = {
    # A user and PID namespace of its own: the first child is the new namespace's
    # init, its child leaves the session.
    "own_user_and_pid_namespace": LIBC
    + textwrap.dedent(f"""
      ACHIEVED = libc.unshare(0x10000000 | 0x20000000), ctypes.get_errno()  # NEWUSER | NEWPID
      if os.fork() == 0:
          if os.fork() == 0:
              os.setsid()
              os.execvp('sh', ['sh', '-c', {SLEEPER!r}])
          os.execvp('sh', ['sh', '-c', {SLEEPER!r}])
      """),
    # A fork bomb of sleepers from inside such a namespace.
    "fork_bomb_in_a_nested_namespace": LIBC
    + textwrap.dedent(f"""
      ACHIEVED = libc.unshare(0x10000000 | 0x20000000), ctypes.get_errno()
      if os.fork() == 0:
          os.setsid()
          while True:
              try:
                  if os.fork() == 0:
                      os.execvp('sh', ['sh', '-c', {SLEEPER!r}])
              except OSError:
                  import time
                  time.sleep(0.01)
      """),
    # multiprocessing: a spawned interpreter, a forkserver (needs a socket) and a fork,
    # none of them daemons, each exec'ing the sleeper.
    "multiprocessing_start_methods": textwrap.dedent(f"""
      import multiprocessing, os, sys
      sys.modules.setdefault('__main__', sys.modules[__name__])
      ACHIEVED = []
      for method in ('spawn', 'forkserver', 'fork'):
          try:
              context = multiprocessing.get_context(method)
              process = context.Process(target=os.execvp, args=('sh', ['sh', '-c', {SLEEPER!r}]))
              process.start()
              ACHIEVED.append(method)
          except BaseException:
              pass
      """),
    # A thread that double-forks sleepers, new sessions each, for as long as the run
    # lives: forks are in flight while the run is torn down.
    "fork_storm_until_teardown": textwrap.dedent(f"""
      import os, threading, time
      def storm():
          while True:
              try:
                  if os.fork() == 0:
                      try:
                          if os.fork() == 0:
                              os.setsid()
                              os.execvp('sh', ['sh', '-c', {SLEEPER!r}])
                      finally:
                          os._exit(0)
              except OSError:
                  time.sleep(0.001)
      threading.Thread(target=storm, daemon=True).start()
      ACHIEVED = None
      """),
    # posix_spawn into a new process group, ids reset, the terminating signals blocked
    # and trapped, an empty environment.
    "posix_spawn_group_with_signals_blocked": textwrap.dedent(f"""
      import os, signal
      ACHIEVED = os.posix_spawn(
          '/bin/sh', ['sh', '-c', "trap '' TERM HUP INT QUIT; " + {SLEEPER!r}], {{}},
          setpgroup=0, resetids=True,
          setsigmask={{signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT}},
      ) > 0
      """),
}


NAMESPACES = {
    "unshare_user_and_pid": LIBC + "ACHIEVED = libc.unshare(0x10000000 | 0x20000000)\n",
    "unshare_user_alone": LIBC + "ACHIEVED = libc.unshare(0x10000000)\n",
    "unshare_network": LIBC + "ACHIEVED = libc.unshare(0x40000000)\n",
    # A raw clone into a new user namespace (the child exits at once if it is made).
    "clone_new_user": LIBC
    + textwrap.dedent("""
      import platform
      number = {'x86_64': 56, 'aarch64': 220}[platform.machine()]
      pid = libc.syscall(number, 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
      if pid == 0:
          os._exit(0)
      if pid > 0:
          os.waitpid(pid, 0)
      ACHIEVED = pid
      """),
    "setns_into_pid_1s_user_namespace": LIBC
    + textwrap.dedent("""
      try:
          fd = os.open('/proc/1/ns/user', os.O_RDONLY)
          ACHIEVED = libc.setns(fd, 0)
      except OSError:
          ACHIEVED = -1
      """),
}


NAMESPACES |= {
    # The fixes' edges, tried against the tree that has them: the raw system call
    # (no libc wrapper), clone3 with the namespace flags in memory (answered as
    # missing, so the flags are never read), and unshare from a vfork'ed child.
    "raw_unshare_syscall": LIBC
    + textwrap.dedent("""
      import platform
      number = {'x86_64': 272, 'aarch64': 97}[platform.machine()]
      ACHIEVED = libc.syscall(number, 0x10000000)
      """),
    "clone3_new_user": LIBC
    + textwrap.dedent("""
      args = (ctypes.c_uint64 * 11)(0x10000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)
      pid = libc.syscall(435, args, ctypes.sizeof(args))
      if pid == 0:
          os._exit(0)
      if pid > 0:
          os.waitpid(pid, 0)
      ACHIEVED = pid
      """),
    "unshare_in_a_vforked_child": LIBC
    + textwrap.dedent("""
      import os
      read, write = os.pipe()
      pid = os.fork()
      if pid == 0:
          os.write(write, bytes([libc.unshare(0x10000000) & 0xFF]))
          os._exit(0)
      os.waitpid(pid, 0)
      ACHIEVED = -1 if os.read(read, 1) == bytes([0xFF]) else 0
      """),
}


@pytest.mark.parametrize("attempt", list(NAMESPACES), ids=list(NAMESPACES))
def test_a_run_cannot_make_or_join_a_namespace(solo: Sandbox, attempt: str) -> None:
    if not solo.protections.syscalls_filtered:
        pytest.skip("no seccomp filter on this kernel: namespaces are not refused")
    report = solo.run_tests(NAMESPACES[attempt] + ATTACK, ["assert attack() == -1"], timeout=5)
    assert report.status is ProgramStatus.OK and report.all_passed, report


@pytest.mark.parametrize("escape", list(ESCAPES17), ids=list(ESCAPES17))
def test_a_run_leaves_no_process_behind(solo: Sandbox, escape: str) -> None:
    report = solo.run_tests(ESCAPES17[escape] + SEEN + RIGHT, [*TESTS, "assert seen()"], timeout=5)
    # The program is right, and its sleeper really ran: its verdict stands.
    assert report.status is ProgramStatus.OK and report.all_passed, report
    time.sleep(1)
    assert _marked_processes() == []
    _next_verdicts_stand(solo)


# Those of the earlier rounds' escapes that do start a sleeper (the others are refused).
STARTING = [
    "posix_spawn_setsid",
    "setsid_nohup",
    "fork_ignoring_sigterm_and_sighup",
    "subreaper_double_fork_renamed",
    "vfork_setsid_exec",
]


@pytest.mark.parametrize("escape", STARTING, ids=STARTING)
def test_the_earlier_escapes_really_start_and_leave_nothing(solo: Sandbox, escape: str) -> None:
    report = solo.run_tests(ESCAPES[escape] + SEEN + RIGHT, [*TESTS, "assert seen()"], timeout=5)
    assert report.status is ProgramStatus.OK and report.all_passed, report
    time.sleep(1)
    assert _marked_processes() == []


# --- runs that try to change the next verdict ---------------------------------------------------

SHARED_FILES = textwrap.dedent("""
    import fcntl, os
    ACHIEVED = []
    F_SETLEASE, F_ADD_SEALS, F_SETOWN = 1024, 1033, 8
    SEALS = 0x1 | 0x2 | 0x4 | 0x8 | 0x10  # seal, shrink, grow, write, future write
    for fd in (0, 1, 2):
        for name, change in (
            ('seals', lambda: fcntl.fcntl(fd, F_ADD_SEALS, SEALS)),
            ('lease', lambda: fcntl.fcntl(fd, F_SETLEASE, fcntl.F_WRLCK)),
            ('owner', lambda: fcntl.fcntl(fd, F_SETOWN, 1)),
        ):
            try:
                change()
                ACHIEVED.append((fd, name))
            except OSError:
                pass
        for change in (
            lambda: fcntl.flock(fd, fcntl.LOCK_EX),
            lambda: fcntl.fcntl(fd, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK),
            lambda: os.posix_fallocate(fd, 0, 1 << 20),
        ):
            try:
                change()
            except OSError:
                pass
    """)


def test_the_shared_output_files_cannot_be_sealed_or_leased(solo: Sandbox) -> None:
    # The output files (and /dev/null) are the worker's, shared by every run: sealed
    # against shrinking, the worker could not empty them; leased, it would block.
    report = solo.run_tests(SHARED_FILES + ATTACK + RIGHT, [*TESTS, "assert attack() == []"])
    assert report.status is ProgramStatus.OK and report.all_passed, report
    _next_verdicts_stand(solo)


FLAGS_SET = textwrap.dedent("""
    import fcntl, os
    for fd in (0, 1, 2):
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, (flags | os.O_NONBLOCK | os.O_ASYNC) & ~os.O_APPEND)
    ACHIEVED = [fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK != 0 for fd in (0, 1, 2)]
    """)
FLAGS_PROBE = textwrap.dedent("""
    import fcntl, os
    def flags():
        changed = os.O_NONBLOCK | os.O_ASYNC
        return [fcntl.fcntl(fd, fcntl.F_GETFL) & changed for fd in (0, 1, 2)]
    """)


# Flags set through ioctl rather than fcntl, and open-file-description locks (which
# flock(LOCK_UN) does not release): on stdin, stdout and stderr alike.
IOCTL_AND_OFD_LOCKS = textwrap.dedent("""
    import fcntl, os, struct, termios
    ACHIEVED = []
    for fd in (0, 1, 2):
        fcntl.ioctl(fd, termios.FIONBIO, struct.pack('i', 1))
        try:
            fcntl.ioctl(fd, termios.FIOASYNC, struct.pack('i', 1))
        except OSError:  # (not every file takes it: /dev/null does not)
            pass
        ACHIEVED.append(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK != 0)
        lock = struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0)
        try:
            fcntl.fcntl(fd, 37, lock)  # F_OFD_SETLK
        except OSError:
            pass
    """)


def test_ioctl_flags_and_ofd_locks_never_reach_the_next_run(solo: Sandbox) -> None:
    _attack_then_probe(
        solo,
        (IOCTL_AND_OFD_LOCKS + ATTACK, "assert attack() == [True, True, True]"),
        (FLAGS_PROBE, "assert flags() == [0, 0, 0], flags()"),
    )


def test_file_flags_a_run_sets_on_its_shared_files_never_reach_the_next_run(
    solo: Sandbox,
) -> None:
    # stdin (/dev/null), stdout and stderr are one open file each, shared by every run.
    _attack_then_probe(
        solo,
        (FLAGS_SET + ATTACK, "assert attack() == [True, True, True]"),
        (FLAGS_PROBE, "assert flags() == [0, 0, 0], flags()"),
    )


SCHEDULING = LIBC + textwrap.dedent("""
    IDLE = 3 << 13  # IOPRIO_CLASS_IDLE
    def ioprio(which, who):
        if libc.syscall(251, which, who, IDLE) < 0:  # ioprio_set
            raise OSError(ctypes.get_errno(), 'ioprio_set')
    ACHIEVED = []
    NONE = os.sched_param(0)
    for name, change in (
        ('idle parent', lambda: os.sched_setscheduler(os.getppid(), os.SCHED_IDLE, NONE)),
        ('batch init', lambda: os.sched_setscheduler(1, os.SCHED_BATCH, NONE)),
        ('io idle uid', lambda: ioprio(3, os.getuid())),  # IOPRIO_WHO_USER
        ('io idle parent', lambda: ioprio(1, os.getppid())),  # IOPRIO_WHO_PROCESS
        ('io idle group', lambda: ioprio(2, 0)),  # IOPRIO_WHO_PGRP
    ):
        try:
            change()
            ACHIEVED.append(name)
        except OSError:
            pass
    """)
# Each run's own scheduling policy and I/O priority, and its parent's (the spawner's).
SCHEDULING_PROBE = LIBC + textwrap.dedent("""
    def scheduling():
        pids = (0, os.getppid())
        # (ioprio_get of IOPRIO_WHO_PROCESS)
        return [(os.sched_getscheduler(pid), libc.syscall(252, 1, pid)) for pid in pids]
    """)


def test_a_run_cannot_idle_the_scheduling_later_runs_inherit(solo: Sandbox) -> None:
    _attack_then_probe(
        solo,
        (SCHEDULING + ATTACK, "assert attack() == []"),
        (SCHEDULING_PROBE, "assert scheduling() == [(0, 0), (0, 0)]"),
    )


# Every place a run might write that a later interpreter or import could read.
PLACES = textwrap.dedent("""
    import os, site, sys
    PLACES = ['.', os.path.expanduser('~'), site.getusersitepackages(), '/tmp', '/var/tmp',
              '/dev/shm', os.path.dirname(os.getcwd()), *sys.path]
    """)
POISONED_PATHS = PLACES + textwrap.dedent(f"""
    import importlib.util, marshal
    payload = 'import builtins\\nbuiltins.{MARK} = 1\\n'
    pyc = importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(compile(payload, 'json', 'exec'))
    ACHIEVED = []
    for place in PLACES:
        for name, data in (('usercustomize.py', payload), ('{MARK}.pth', payload),
                           ('json.py', payload), ('__pycache__/json.cpython-311.pyc', pyc)):
            path = os.path.join(place, name)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, 'wb') as out:
                    out.write(data.encode() if isinstance(data, str) else data)
                ACHIEVED.append(path)
            except OSError:
                pass
    """)
# What the next run finds: files of the attack, its own directory's entries, the marker
# in builtins, and whether json is the standard library's.
POISON_PROBE = PLACES + textwrap.dedent(f"""
    import builtins, json
    def names(place):
        try:
            return os.listdir(place)
        except OSError:  # (unreadable to runs: then nothing of a run is there either)
            return []
    def left():
        found = [p for p in PLACES for n in names(p) if {MARK!r} in n]
        for p in PLACES:
            for name in ('usercustomize.py', 'json.py', '__pycache__/json.cpython-311.pyc'):
                if os.path.exists(os.path.join(p, name)) and not p.startswith(sys.prefix):
                    found.append(os.path.join(p, name))
        genuine = json.__file__.startswith(sys.prefix)
        return found, os.listdir('.'), hasattr(builtins, {MARK!r}), genuine
    """)


def test_files_left_on_every_writable_path_never_reach_the_next_run(solo: Sandbox) -> None:
    # It writes into its own directory (and its HOME, which is that directory) at least.
    _attack_then_probe(
        solo,
        (POISONED_PATHS + ATTACK, "assert len(attack()) > 0"),
        (POISON_PROBE, "assert left() == ([], [], False, True)"),
    )
