"""The run's CPU threads: ``--num-threads N``, or chosen for the machine's load."""

from __future__ import annotations

import os

import pytest

from baselines.threads import apply_threads, choose_threads


@pytest.mark.parametrize(
    ("requested", "cores", "load", "count", "reason"),
    [
        (0, 2, 0.0, None, "2 thread(s), one per core: the machine is idle"),
        (0, 2, 0.4, None, "2 thread(s), one per core: the machine is idle"),
        (
            0,
            2,
            0.6,
            1,
            "1 thread of 2 cores: other work keeps 0.6 cores busy (--num-threads N to choose)",
        ),
        (
            0,
            2,
            13.0,
            1,
            "1 thread of 2 cores: other work keeps 13.0 cores busy (--num-threads N to choose)",
        ),
        (
            0,
            16,
            5.2,
            11,
            "11 threads of 16 cores: other work keeps 5.2 cores busy (--num-threads N to choose)",
        ),
        (1, 2, 0.0, 1, "1 thread(s), as --num-threads asks"),
        (4, 2, 9.0, 4, "4 thread(s), as --num-threads asks"),
    ],
)
def test_the_choice(requested, cores, load, count, reason):
    choice = choose_threads(requested, cores, load)
    assert (choice.count, choice.reason) == (count, reason)


def test_the_choice_reaches_torch_and_later_vllm_engines_and_is_printed(monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    # Recorded rather than read back: torch.get_num_threads() can ignore a later
    # set_num_threads once other tests in this process have started OpenMP pools.
    calls: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    assert apply_threads(0).count is None  # idle: the libraries' defaults, untouched
    assert calls == [] and "OMP_NUM_THREADS" not in os.environ
    monkeypatch.setattr(os, "getloadavg", lambda: (1.8, 1.0, 1.0))
    assert apply_threads(0).count == 1
    assert calls == [1]
    assert os.environ["OMP_NUM_THREADS"] == "1"
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-1")  # the user's own choice stays
    apply_threads(2)
    assert calls == [1, 2] and os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    assert capsys.readouterr().err.splitlines() == [
        "threads: 2 thread(s), one per core: the machine is idle",
        "threads: 1 thread of 2 cores: other work keeps 1.8 cores busy (--num-threads N to choose)",
        "threads: 2 thread(s), as --num-threads asks",
    ]
