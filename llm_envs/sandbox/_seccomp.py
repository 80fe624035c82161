"""seccomp for sandbox runs: signals kept inside the run, and the system calls no run may make.

The spawner installs a filter that refuses signals to itself and every call in
:data:`DENIED_SYSCALLS` (sockets, memory outside the address-space limit, the
interfaces that would bypass the filter); every run inherits it. Where neither
a PID namespace nor Landlock's signal scoping confines a run, each run adds a
filter that lets it signal only itself (:class:`RunSignalFilter`). The filters
are classic BPF programs assembled here.

Standard library only; like :mod:`._isolation`, never imported by the caller's process.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

from llm_envs.sandbox._isolation import prctl_pointer

__all__ = [
    "CLONE_NAMESPACES",
    "CLONE_PARENT",
    "DENIED_SYSCALLS",
    "SCHEDULING_SYSCALLS",
    "RunSignalFilter",
    "install_signal_filter",
]

# BPF over struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_EPERM = 0x00050000 | errno.EPERM
_SECCOMP_RET_ENOSYS = 0x00050000 | errno.ENOSYS
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
_X32_SYSCALL_BIT = 0x40000000
_F_SETOWN = 8
#: clone(2)'s flag that makes the new process a child of the caller's parent (the
#: spawner, for a run): the one way out of the run's process tree.
CLONE_PARENT = 0x00008000
#: clone(2)'s flags that make new namespaces (NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
#: NEWUSER, NEWPID, NEWNET): the sandbox makes its own before any run starts, and a
#: run that made one (a user namespace, unprivileged) would reach kernel interfaces
#: that are otherwise root's.
CLONE_NAMESPACES = 0x7E020000
_F_SETOWN_EX = 15
# Each call's number on x86-64 and on aarch64.
_NUMBERS = {
    "kill": (62, 129), "tkill": (200, 130), "tgkill": (234, 131), "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240), "fcntl": (72, 25), "ptrace": (101, 117),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_send_signal": (424, 424), "pidfd_getfd": (438, 438), "socket": (41, 198),
    "memfd_create": (319, 279), "memfd_secret": (447, 447), "shmget": (29, 194),
    "msgget": (68, 186), "semget": (64, 190), "mq_open": (240, 180), "io_uring_setup": (425, 425),
    "userfaultfd": (323, 282), "add_key": (248, 217), "request_key": (249, 218),
    "keyctl": (250, 219), "bpf": (321, 280), "perf_event_open": (298, 241), "clone": (56, 220),
    "clone3": (435, 435), "prlimit64": (302, 261), "setpriority": (141, 140),
    "sched_setparam": (142, 118), "sched_setscheduler": (144, 119),
    "sched_setaffinity": (203, 122), "sched_setattr": (314, 274), "ioprio_set": (251, 30),
    "setpgid": (109, 154), "unshare": (272, 97), "setns": (308, 268),
}  # fmt: skip
# Per architecture: (audit arch, {name: number}).
_SYSCALLS = {
    machine: (audit, {name: numbers[i] for name, numbers in _NUMBERS.items()})
    for i, (machine, audit) in enumerate((("x86_64", 0xC000003E), ("aarch64", 0xC00000B7)))
}
#: Syscalls no run may make, whatever else confines it: new sockets of any family
#: (pathname unix sockets reach services outside the run; socketpair() stays allowed),
#: memory outside the address-space limit that outlives or escapes it (memfd, SysV
#: and POSIX IPC objects, keys), interfaces that bypass or widen the filter
#: (io_uring, BPF, perf events, userfaultfd), and namespaces, new or joined
#: (``clone`` with :data:`CLONE_NAMESPACES` is refused too).
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
    "unshare",
    "setns",
)


#: Scheduling calls no run may make, even on itself (see :func:`install_signal_filter`).
SCHEDULING_SYSCALLS = ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr")


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
        # Another architecture's calls (x86-64's int 0x80 into the 32-bit table)
        # have other numbers, which this filter does not read: refused.
        (_BPF_JEQ_K, arch, None, "deny"),
        (_BPF_LD_W_ABS, 0, None, None),  # the syscall number
    ]
    if x32_bit:
        code.append((_BPF_JSET_K, _X32_SYSCALL_BIT, "deny", None))
    for name in ("tkill", "pidfd_send_signal", "pidfd_getfd", "ptrace"):
        code.append((_BPF_JEQ_K, numbers[name], "deny", None))
    for name in ("process_vm_readv", "process_vm_writev", *DENIED_SYSCALLS):
        code.append((_BPF_JEQ_K, numbers[name], "deny", None))
    # Every process a run starts stays in the run's tree and namespaces: clone with
    # CLONE_PARENT or a namespace flag is refused, and clone3 (whose flags live in
    # memory, out of a filter's reach) is answered as missing, so the C library falls
    # back to clone.
    # Calls that change another process's limits: the spawner's would be inherited by
    # every later run (a lowered RLIMIT_AS, FSIZE or DATA there). Only the caller's
    # own (pid 0) may change.
    code.append((_BPF_JEQ_K, numbers["prlimit64"], "own_first", None))
    # Scheduling, of any process, the caller's own included: the CPUs a run may use
    # are its worker's, and its policy the spawner's (SCHED_IDLE there would reach
    # every later run; a run's processes spread over every CPU would take a
    # neighbour's). Raising a run's own niceness stays (setpriority, below).
    for name in SCHEDULING_SYSCALLS:
        code.append((_BPF_JEQ_K, numbers[name], "deny", None))
    # setpriority(which, who): only PRIO_PROCESS (0) of itself (who 0): PRIO_USER with
    # who 0 is every process of the uid, PRIO_PGRP a group a run may share.
    code.append((_BPF_JEQ_K, numbers["setpriority"], "own_priority", None))
    # ioprio_set(which, who): only IOPRIO_WHO_PROCESS (1) of itself.
    code.append((_BPF_JEQ_K, numbers["ioprio_set"], "own_io_priority", None))
    # setpgid(pid, pgid): a new group of its own (pgid 0) only, never joining
    # another (the spawner's: then kill(0) would reach it).
    code.append((_BPF_JEQ_K, numbers["setpgid"], "own_group", None))
    code.append((_BPF_JEQ_K, numbers["clone"], "clone", None))
    code.append((_BPF_JEQ_K, numbers["clone3"], "nosys", None))
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
        "own_first",
        (_BPF_LD_W_ABS, 16, None, None),  # the pid: the low 32 bits of the first argument
        (_BPF_JEQ_K, 0, "allow", "deny"),
        "own_priority",
        (_BPF_LD_W_ABS, 16, None, None),  # which
        (_BPF_JEQ_K, 0, None, "deny"),
        (_BPF_LD_W_ABS, 16 + 8, None, None),  # who
        (_BPF_JEQ_K, 0, "allow", "deny"),
        "own_io_priority",
        (_BPF_LD_W_ABS, 16, None, None),  # which
        (_BPF_JEQ_K, 1, None, "deny"),
        (_BPF_LD_W_ABS, 16 + 8, None, None),  # who
        (_BPF_JEQ_K, 0, "allow", "deny"),
        "own_group",
        (_BPF_LD_W_ABS, 16 + 8, None, None),  # pgid
        (_BPF_JEQ_K, 0, "allow", "deny"),
        "clone",
        (_BPF_LD_W_ABS, 16, None, None),  # the low 32 bits of the flags
        (_BPF_JSET_K, CLONE_PARENT | CLONE_NAMESPACES, "deny", "allow"),
        "nosys",
        (_BPF_RET_K, _SECCOMP_RET_ENOSYS, None, None),
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
    ``fcntl(F_SETOWN)`` (SIGIO to another process), every syscall in
    :data:`DENIED_SYSCALLS` and :data:`SCHEDULING_SYSCALLS`, changes to another
    process's limits and priority, and joining another process group. Requires
    ``no_new_privs``.

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
    return prctl_pointer(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog) == 0


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
        return prctl_pointer(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self._fprog) == 0
