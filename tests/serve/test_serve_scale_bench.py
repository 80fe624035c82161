"""``bench/serve_scale.py``: its env, its arithmetic, the failures it counts, and a smoke run.

The smoke run is the bench as a user runs it (servers in their own
processes), at N=4 with a 50 ms step; the rest runs in this process, its
batches against a server in a thread.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import llm_envs
from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "serve_scale.py"


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("serve_scale_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


bench = load_bench()


@pytest.fixture
def registered() -> Iterator[None]:
    bench.register_family()
    try:
        yield
    finally:
        llm_envs.unregister(bench.FAMILY)


def level(oks: list[bool], totals: list[float], wall: float = 2.0, n: int | None = None):
    sessions = [bench.Session(ok=ok, total=t) for ok, t in zip(oks, totals, strict=True)]
    return bench.Level("seat", n or len(sessions), wall, sessions)


# ---------------------------------------------------------------------- the env


def test_three_seats_act_once_each_in_order_and_the_episode_ends():
    env = bench.sleep_step_env(sleep=0.0, seats=3)
    env.reset()
    order = []
    for agent in env.agent_iter():
        _, _, terminated, _, _ = env.last()
        order.append(agent)
        env.step(None if terminated else f"from {agent}")
    assert order[:3] == ["agent_0", "agent_1", "agent_2"]
    assert env.agents == []
    assert [turn["text"] for turn in env.record()["turns"]] == [
        "from agent_0",
        "from agent_1",
        "from agent_2",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"sleep": -1.0}, "sleep must be >= 0 seconds, got -1.0"), ({"seats": 0}, "seats must be")],
)
def test_bad_env_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bench.sleep_step_env(**kwargs)


# ---------------------------------------------------------------------- the arithmetic


def test_success_and_requests_per_second_count_completed_sessions_only():
    # 3 of 4 completed in a 2 s batch: 75%, 1.5 req/s; the failed one's 9 s is not a latency.
    batch = level([True, True, True, False], [1.0, 2.0, 3.0, 9.0], wall=2.0)
    assert batch.success == 0.75
    assert batch.per_second == 1.5
    assert batch.quantile("total", 50) == 2.0
    assert batch.quantile("total", 100) == 3.0


def test_p99_interpolates_between_the_two_slowest_sessions():
    # 101 sessions at 0..100 s: the 99th percentile is the 100th value, 99 s.
    batch = level([True] * 101, [float(i) for i in range(101)])
    assert batch.quantile("total", 99) == pytest.approx(99.0)
    assert math.isnan(level([False], [1.0]).quantile("total", 99))


@pytest.mark.parametrize(
    ("runs", "bound", "expected"),
    [
        ([(32, 1.0, 1.1), (64, 0.96, 1.5), (128, 0.94, 2.5)], None, 64),  # 94% fails the bar
        ([(32, 1.0, 1.1), (64, 0.96, 2.5)], 2.0, 32),  # 64 passes 95% but its p99 is past 2 s
        ([(32, 0.5, 1.0)], None, None),
    ],
)
def test_max_batch_is_the_largest_n_at_95_percent(runs, bound, expected):
    levels = []
    for n, success, p99 in runs:
        done = round(success * 100)
        levels.append(level([True] * done + [False] * (100 - done), [p99] * 100, n=n))
    assert bench.largest(levels, "seat", bound) == expected


@pytest.mark.parametrize(
    ("start", "cap", "seats", "expected"),
    [
        (32, 256, 1, [32, 64, 128, 256]),
        (32, 128, 3, [30, 63, 126]),
        (4, 4, 3, [3]),
        (1, 2, 3, [3, 3]),
    ],
)
def test_sizes_double_and_round_down_to_whole_episodes(start, cap, seats, expected):
    assert bench.levels_of(start, cap, seats) == expected


# ---------------------------------------------------------------------- failures are counted


def test_sessions_the_server_refuses_or_that_run_late_fail(registered):
    settings = ServeSettings(
        defaults=Defaults(bench.FAMILY, {"sleep": 0.3, "seats": 1}),
        max_episodes=2,
        max_episodes_per_client=2,  # the bench's clients are one client
        max_sessions=2,
        max_sessions_per_client=2,
        workers=8,
    )
    with serving(settings) as url:
        # Two episodes at once: the other two are refused (503).
        refused = asyncio.run(bench.batch("seat", url, 4, 1, timeout=10))
        assert refused.success == 0.5
        assert refused.errors() == "RuntimeError 2"
        assert all(s.total >= 0.3 for s in refused.sessions if s.ok)  # a step sleeps
        # OpenEnv's capacity error on /openenv is a failure too.
        full = asyncio.run(bench.batch("/openenv", url, 4, 1, timeout=10))
        assert full.success == 0.5
        # A session past its timeout fails, whoever is slow.
        late = asyncio.run(bench.batch("seat", url, 1, 1, timeout=0.1))
        assert late.success == 0.0 and late.errors() == "TimeoutError 1"


# ---------------------------------------------------------------------- the smoke run


@pytest.mark.slow  # two servers' start-up (OpenEnv's imports) takes 10 to 20 s on 2 cores
def test_the_bench_runs_every_target_at_n_4(tmp_path):
    out = tmp_path / "rows.json"
    command = [sys.executable, str(BENCH), "--start=4", "--cap=4", "--sleep=0.05", "--json", out]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "avx" in done.stdout.splitlines()[0] or "none of avx2" in done.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(row["target"], row["n"]) for row in rows] == [
        ("seat", 4),
        ("/openenv", 4),
        ("openenv", 4),
        ("3 seats", 3),
    ]
    for row in rows:
        assert row["success"] == 1.0, row
        # A session waits for its steps: one 50 ms step, or a 3-seat episode's three.
        assert row["p50_s"] >= (0.15 if row["seats"] == 3 else 0.05)
    assert "max batch (>= 95% success) 4" in done.stdout
