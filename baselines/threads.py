"""How many CPU threads a run uses: ``--num-threads``, or a choice for the machine's load.

torch (and vLLM's CPU engine) start one thread per core. On a machine other
jobs share, the threads of one operation wait for each other whenever one of
them is descheduled: a generation measured 152-185 s with the default threads
and 18-44 s with one thread while another process shared the 2 cores. So
``--num-threads 0`` (the default) chooses: every usable core when the machine
is idle (the libraries' own default, left untouched, so an idle run computes
exactly what it did before the choice existed), else the cores the other work
leaves free, at least one. The choice is printed at start; ``--num-threads N``
fixes it (a run that must reproduce to the digit under load passes it).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

__all__ = ["ThreadChoice", "apply_threads", "choose_threads", "machine_threads"]


@dataclass(frozen=True)
class ThreadChoice:
    """A thread count and why.

    Attributes:
        count: threads to use; None leaves the libraries' defaults (one per core).
        reason: one line for the run's start.
    """

    count: int | None
    reason: str


def choose_threads(requested: int, cores: int, load: float) -> ThreadChoice:
    """The thread count for ``requested`` (0: choose) on ``cores`` usable cores at ``load``.

    ``load`` is the work of other processes, in cores (the 1-minute load
    average read before this run does anything).

    Example:
        >>> choose_threads(0, cores=2, load=0.1).count is None  # idle: the defaults
        True
        >>> choose_threads(0, cores=2, load=1.7)
        ThreadChoice(count=1, reason='1 thread of 2 cores: other work keeps 1.7 cores busy (--num-threads N to choose)')
        >>> choose_threads(3, cores=2, load=0.0).count
        3
    """  # noqa: E501  (a doctest's output is one line)
    if requested > 0:
        return ThreadChoice(requested, f"{requested} thread(s), as --num-threads asks")
    busy = min(cores, round(load))
    if busy <= 0:
        return ThreadChoice(None, f"{cores} thread(s), one per core: the machine is idle")
    count = max(1, cores - busy)
    plural = "thread" if count == 1 else "threads"
    return ThreadChoice(
        count,
        f"{count} {plural} of {cores} cores: other work keeps {load:.1f} cores busy "
        "(--num-threads N to choose)",
    )


def machine_threads(requested: int) -> ThreadChoice:
    """:func:`choose_threads` on this machine: the cores this process may use and their load."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return choose_threads(requested, cores or 1, load)


def apply_threads(requested: int, *, announce: bool = True) -> ThreadChoice:
    """Choose the run's threads and set them in torch and in vLLM engines started later.

    vLLM's CPU engine binds one OpenMP thread to every core by default; with a
    count it runs that many threads, unbound (``VLLM_CPU_OMP_THREADS_BIND=nobind``,
    ``OMP_NUM_THREADS``), unless those variables are already set. The choice
    is printed to stderr when ``announce``.
    """
    choice = machine_threads(requested)
    if choice.count is not None:
        import torch

        torch.set_num_threads(choice.count)
        os.environ.setdefault("OMP_NUM_THREADS", str(choice.count))
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    if announce:
        print(f"threads: {choice.reason}", file=sys.stderr, flush=True)
    return choice
