"""The episode server's scale, measured the way OpenEnv measures its own server.

OpenEnv's scaling study (its tutorial ``tutorial/03-scaling.md``, the client
``tests/test_scaling.py`` of ``burtenshaw/openenv-scaling``) fires N sessions
at once at a server whose environment's step sleeps a set time; a session is
one WebSocket: connect, reset, one step, close. It reports, for each N, the
share of sessions that complete (success), the p50 and p99 of a session's
total time, and requests per second (completed sessions over the wall time
of the batch); the largest N with >= 95% success is the server's "max
batch". Its figure: 2,048 sessions at 96.5% on a local uvicorn server with 8
workers on 8 cores (256 per core), p99 1.97 s with a 1 s step, 932 req/s.

This bench does the same, N doubling from ``--start`` until a target's
success falls under 95% (or N passes ``--cap``), against these targets, all
served in their own processes (``--serve``, below) while this process runs the
clients:

* ``seat``: a one-seat episode of the benchmark env over this project's own
  protocol: ``POST /episodes`` (the reset), the seat's socket, its ``turn``,
  ``act`` (the step), its ``end``.
* ``/openenv``: the same env, one OpenEnv session each, on the same server's
  OpenEnv view (``/openenv/ws``).
* ``openenv``: an OpenEnv ``create_app`` server of an equivalent env (its step
  sleeps as long), one session each over its ``/ws``: the yardstick, in the
  same run, so the ratio holds on any machine.
* ``3 seats`` (``--seats 3``): episodes of three seats taking turns, as a
  debate does, each seat its own socket, on the same server (the episode's
  ``env_kwargs`` ask for three seats); N counts seats (N/3 episodes). A
  seat's session lasts its whole episode: three steps, one after the other.

Every step sleeps ``--sleep`` seconds (``time.sleep``, as OpenEnv's benchmark
env does), so a server that runs steps on W threads finishes at most W/sleep
steps a second: this server's step pool has ``--workers`` threads (here, by
default, ``--cap``, so that the pool never queues a step; ``--workers 0``
keeps the server's own default, ``min(32, cores + 4)``). A session fails when
it raises, the server refuses it, or it takes over ``--timeout`` seconds.

    python bench/serve_scale.py [--sleep 1] [--start 32] [--cap 4096] [--seats 1 3]

The machine's CPU, its flags of note, its cores and its load average (the
bench shares the cores with the servers) are printed first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

import httpx
import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from websockets.asyncio.client import connect

import llm_envs
from llm_envs.client_settings import ClientSettings, Whole
from llm_envs.family import EpisodePlan, FamilyBase
from llm_envs.records import EpisodeRecord, episode_record, turn_record

FAMILY = "bench_sleep_step"
MAX_SEATS = 8
"""The most seats per episode a client may ask for (``env_kwargs``)."""
SUCCESS = 0.95
"""OpenEnv's bar: the largest N with at least this share of sessions completed."""


# ---------------------------------------------------------------------- the benchmark env


class SleepStepEnv(AECEnv):
    """``seats`` agents take one turn each, in order; every step sleeps ``sleep`` seconds.

    Observation: a one-message chat. Action: any text. Reward: 1 to the agent
    that acted. The episode terminates after the last agent's turn.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "bench_sleep_step_v0", "is_parallelizable": False}

    def __init__(self, sleep: float = 1.0, seats: int = 1) -> None:
        super().__init__()
        if sleep < 0:
            raise ValueError(f"sleep must be >= 0 seconds, got {sleep}")
        if seats < 1:
            raise ValueError(f"seats must be >= 1, got {seats}")
        self.sleep = sleep
        self.possible_agents = [f"agent_{i}" for i in range(seats)]
        self.observation_spaces = {a: spaces.Text(100) for a in self.possible_agents}
        self.action_spaces = {a: spaces.Text(100) for a in self.possible_agents}

    def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None) -> None:
        """Start the episode: the first agent acts."""
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agent_selection = self.agents[0]
        self.texts: list[tuple[str, str]] = []

    def observe(self, agent: str) -> dict[str, Any]:
        """The same chat for every agent."""
        return {"messages": [{"role": "user", "content": "say anything"}]}

    def step(self, action: Any) -> None:
        """Sleep, pay the agent 1, and hand the turn on (or end the episode)."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        time.sleep(self.sleep)  # the work a step does, holding its thread as real work would
        self._cumulative_rewards[agent] = 0.0
        self.texts.append((agent, str(action)))
        self.rewards = {a: float(a == agent) for a in self.agents}
        if len(self.texts) == len(self.agents):
            self.terminations = dict.fromkeys(self.agents, True)
        else:
            self.agent_selection = self.agents[len(self.texts)]
        self._accumulate_rewards()

    def record(self) -> EpisodeRecord:
        """The texts the agents sent."""
        turns = [turn_record(agent, 1, [], text) for agent, text in self.texts]
        return episode_record("bench_sleep_step_v0", "a sleeping step per seat", {}, turns)


def sleep_step_env(sleep: float = 1.0, seats: int = 1) -> SleepStepEnv:
    """The benchmark env."""
    return SleepStepEnv(sleep, seats)


class SleepStepFamily(FamilyBase):
    """The benchmark env's family: every problem is the same episode; ``sleep`` and ``seats``."""

    name: ClassVar[str] = FAMILY
    client_settings: ClassVar[ClientSettings] = ClientSettings(
        env_kwargs={"seats": Whole(1, MAX_SEATS)}
    )

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        task: str = "default",
        seed: int = 0,
        task_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.env_kwargs = dict(env_kwargs)
        seats = int(self.env_kwargs.get("seats", 1))
        self.agents = tuple(f"agent_{i}" for i in range(seats))
        self.max_agent_turns = 1

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        """The same episode for every problem."""
        return sleep_step_env(**self.env_kwargs), seed, {}

    def training(self, group_indices: Any, seed: int) -> EpisodePlan:
        """Not trained on."""
        raise NotImplementedError("the benchmark env is served, never trained on")

    def evaluation(self, group_indices: Any, seed: int) -> EpisodePlan:
        """Not evaluated."""
        raise NotImplementedError("the benchmark env is served, never evaluated")

    def reference_players(self) -> dict[str, Any]:
        """Players that say "ok"."""
        return {a: (lambda observation, info: "ok") for a in self.agents}


def register_family() -> None:
    """The benchmark env in the registry (in the server's process)."""
    llm_envs.register(FAMILY, SleepStepFamily, aec=sleep_step_env, env_id="bench/SleepStep-v0")


def openenv_equivalent(sleep: float, max_sessions: int) -> Any:
    """OpenEnv's ``create_app`` serving a one-seat env whose step sleeps ``sleep`` seconds.

    Built per OpenEnv's own benchmark env: ``SUPPORTS_CONCURRENT_SESSIONS``, a
    synchronous ``step`` (OpenEnv runs it on the session's own thread), the
    episode done after one step.
    """
    from openenv.core.env_server import (  # type: ignore[import-untyped]
        Action,
        Environment,
        Observation,
        State,
        create_app,
    )
    from pydantic import Field

    class TextAction(Action):
        text: str

    class TextObservation(Observation):
        messages: list[dict[str, Any]] = Field(default_factory=list)

    class SleepStepEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._state = State(step_count=0)

        def reset(self, seed: int | None = None, episode_id: str | None = None) -> Any:
            self._state = State(step_count=0)
            message = {"role": "user", "content": "say anything"}
            return TextObservation(messages=[message], done=False)

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            time.sleep(sleep)
            self._state.step_count += 1
            return TextObservation(done=True, reward=1.0)

        @property
        def state(self) -> Any:
            return self._state

    return create_app(
        SleepStepEnvironment,
        TextAction,
        TextObservation,
        env_name="bench_sleep_step",
        max_concurrent_envs=max_sessions,
    )


# ---------------------------------------------------------------------- servers


def serve(kind: str, port: int, sleep: float, workers: int, sessions: int) -> None:
    """Run a server until terminated (what ``--serve`` runs, in its own process)."""
    if kind == "openenv":
        import uvicorn

        from llm_envs.serve.guard import uvicorn_limits

        app = openenv_equivalent(sleep, sessions)
        # The same uvicorn, protocol and message bound as ours: only the app differs.
        uvicorn.run(
            app, host="127.0.0.1", port=port, log_level="warning", **uvicorn_limits(1 << 20)
        )
        return
    from llm_envs.serve.__main__ import main as serve_main

    register_family()
    flags = [
        f"--env={FAMILY}",
        f"--env-kwargs={json.dumps({'sleep': sleep})}",
        f"--port={port}",
        f"--max-episodes={sessions}",
        f"--max-episodes-per-client={sessions}",  # every session comes from this one client
        f"--max-sessions={sessions}",
        f"--max-sessions-per-client={sessions}",
        "--log-level=warning",
    ]
    sys.exit(serve_main([*flags, *([f"--workers={workers}"] if workers else [])]))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Server:
    """A server running in its own process: its base URL and its process id."""

    url: str
    pid: int

    def cpu_seconds(self) -> float:
        """CPU seconds the server's process has used so far, all its threads (Linux)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def servers(
    kinds: Sequence[str], log: IO[bytes], *, sleep: float, workers: int, cap: int
) -> Iterator[dict[str, Server]]:
    """Servers of ``kinds`` (``ours``, ``openenv``) in their own processes, started together."""
    processes, urls = {}, {}
    try:
        for name in kinds:
            port = free_port()
            command = [
                sys.executable,
                __file__,
                f"--serve={name}",
                f"--port={port}",
                f"--sleep={sleep}",
                f"--workers={workers}",
                f"--cap={cap}",
            ]
            processes[name] = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
            urls[name] = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        for name, url in urls.items():
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/health").status_code == 200:
                        break
                if processes[name].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the {name} server did not start; its log is below")
                time.sleep(0.1)
        yield {name: Server(url, processes[name].pid) for name, url in urls.items()}
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


# ---------------------------------------------------------------------- clients


@dataclass
class Session:
    """One session: whether it completed, why not, and its phases' seconds."""

    ok: bool = False
    error: str | None = None
    connect: float = 0.0
    reset: float = 0.0
    step: float = 0.0
    total: float = 0.0


async def openenv_session(ws_url: str, timeout: float) -> Session:
    """OpenEnv's session: connect, reset, one step, close (its client's messages).

    ``timeout`` bounds the whole session, the handshake included (as OpenEnv's
    client sets ``open_timeout``): websockets' own 10 s for a handshake would
    fail sessions a busy server accepts late.
    """
    session = Session()
    began = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            async with connect(ws_url, max_size=None, ping_interval=None, open_timeout=None) as ws:
                session.connect = time.perf_counter() - began
                mark = time.perf_counter()
                await ws.send(json.dumps({"type": "reset", "data": {}}))
                reply = json.loads(await ws.recv())
                if reply.get("type") != "observation":
                    raise RuntimeError(f"reset: {reply}")
                session.reset = time.perf_counter() - mark
                mark = time.perf_counter()
                await ws.send(json.dumps({"type": "step", "data": {"text": "go"}}))
                reply = json.loads(await ws.recv())
                if reply.get("type") != "observation" or not reply["data"].get("done"):
                    raise RuntimeError(f"step: {reply}")
                session.step = time.perf_counter() - mark
                # The server closes the socket on "close": closing from both ends at once
                # would cost OpenEnv's server a logged traceback per session.
                await ws.send(json.dumps({"type": "close"}))
                await ws.wait_closed()
        session.ok = True
    except Exception as exc:
        session.error = type(exc).__name__
    session.total = time.perf_counter() - began
    return session


async def seat_session(ws_url: str, began: float, created: float) -> Session:
    """One seat on its own socket until its ``end``; ``began``: when its episode was asked for."""
    session = Session(reset=created)
    mark = time.perf_counter()
    async with connect(ws_url, max_size=None, ping_interval=None, open_timeout=None) as ws:
        session.connect = time.perf_counter() - mark
        async for raw in ws:
            message = json.loads(raw)
            kind = message["type"]
            if kind == "turn":
                mark = time.perf_counter()
                await ws.send(json.dumps({"type": "act", "text": "go"}))
            elif kind == "accepted":
                session.step += time.perf_counter() - mark
            elif kind == "end":  # the server closes the socket next, ending the loop
                if message.get("status") != "finished":
                    raise RuntimeError(f"end: {message.get('status')}")
                session.ok = True
            elif kind != "joined":
                raise RuntimeError(f"{kind}: {message.get('detail') or message.get('status')}")
    if not session.ok:
        raise RuntimeError("the socket closed before the seat's end")
    session.total = time.perf_counter() - began
    return session


async def create_episode(url: str, seats: int) -> str:
    """``POST /episodes`` on a connection of its own; the episode's id.

    By hand, not with httpx: httpx's pool spends milliseconds of the client's
    CPU per request with hundreds of connections open, and the client shares
    the cores with the server.
    """
    host, _, port = url.removeprefix("http://").partition(":")
    body = json.dumps({"env_kwargs": {"seats": seats}}).encode()
    head = (
        f"POST /episodes HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.encode() + body)
        reply = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status = int(reply.split(" ", 2)[1])
        length = next(
            int(line.partition(":")[2])
            for line in reply.split("\r\n")
            if line.lower().startswith("content-length:")
        )
        body = await reader.readexactly(length)
    finally:
        writer.close()
    if status != 201:
        raise RuntimeError(f"POST /episodes: {status} {body[:200]!r}")
    return str(json.loads(body)["id"])


async def episode_sessions(url: str, seats: int, timeout: float) -> list[Session]:
    """One episode over this server's protocol: ``POST /episodes``, then each seat's socket."""
    began = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            episode = await create_episode(url, seats)
            created = time.perf_counter() - began
            ws_url = f"{url.replace('http://', 'ws://')}/episodes/{episode}/seats"
            return list(
                await asyncio.gather(
                    *(seat_session(f"{ws_url}/agent_{i}/ws", began, created) for i in range(seats))
                )
            )
    except Exception as exc:
        total = time.perf_counter() - began
        return [Session(error=type(exc).__name__, total=total) for _ in range(seats)]


async def batch(target: str, url: str, n: int, seats: int, timeout: float) -> Level:
    """``n`` sessions of ``target`` started at once; the level they make."""
    began, cpu = time.perf_counter(), time.process_time()
    if target == "openenv" or target == "/openenv":
        ws_url = f"{url.replace('http://', 'ws://')}{'/openenv' if target == '/openenv' else ''}/ws"
        sessions = list(await asyncio.gather(*(openenv_session(ws_url, timeout) for _ in range(n))))
    else:
        episodes = await asyncio.gather(
            *(episode_sessions(url, seats, timeout) for _ in range(n // seats))
        )
        sessions = [s for episode in episodes for s in episode]
    level = Level(target, n, time.perf_counter() - began, sessions)
    level.client_cpu = time.process_time() - cpu
    return level


# ---------------------------------------------------------------------- results


@dataclass
class Level:
    """The sessions of one batch of ``n`` and the wall time the batch took."""

    target: str
    n: int
    wall: float
    sessions: list[Session] = field(repr=False)
    client_cpu: float = 0.0
    server_cpu: float = 0.0
    """CPU seconds the batch cost the client's process and the server's."""

    @property
    def success(self) -> float:
        """The share of sessions that completed."""
        return sum(s.ok for s in self.sessions) / len(self.sessions)

    @property
    def per_second(self) -> float:
        """Completed sessions per second of the batch's wall time (OpenEnv's req/s)."""
        return sum(s.ok for s in self.sessions) / self.wall

    def quantile(self, phase: str, q: float) -> float:
        """The ``q``-th percentile of a phase's seconds over the completed sessions (NaN: none)."""
        values = [getattr(s, phase) for s in self.sessions if s.ok]
        return float(np.percentile(values, q)) if values else float("nan")

    def errors(self) -> str:
        """The failed sessions' errors and counts, most common first."""
        counts = Counter(s.error for s in self.sessions if not s.ok)
        return ", ".join(f"{name} {count}" for name, count in counts.most_common()) or "-"

    def row(self) -> dict[str, Any]:
        """The level as one JSON-ready row."""
        return {
            "target": self.target,
            "n": self.n,
            "success": self.success,
            "p50_s": self.quantile("total", 50),
            "p99_s": self.quantile("total", 99),
            "per_second": self.per_second,
            "connect_p50_s": self.quantile("connect", 50),
            "reset_p50_s": self.quantile("reset", 50),
            "step_p50_s": self.quantile("step", 50),
            "wall_s": self.wall,
            "server_cpu_ms": 1e3 * self.server_cpu / self.n,
            "client_cpu_ms": 1e3 * self.client_cpu / self.n,
            "errors": self.errors(),
        }


def machine() -> str:
    """The CPU's model, its flags of note, the cores this process may use, the load average."""
    model, flags = "unknown CPU", set[str]()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    noted = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{model}; {', '.join(noted) or 'none of avx2/avx512'}; {cores()} cores; load {load}"


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def print_table(levels: Sequence[Level], sleep: float) -> None:
    print(
        f"{'target':<9} {'N':>5} {'ok %':>6} {'p50 s':>6} {'p99 s':>6} {'req/s':>7} "
        f"{'connect':>7} {'reset':>6} {'step':>6} {'wall s':>6} {'srv ms':>6} {'cli ms':>6}  "
        "failures"
    )
    for level in levels:
        row = level.row()
        print(
            f"{row['target']:<9} {row['n']:>5} {100 * row['success']:>6.1f} {row['p50_s']:>6.2f} "
            f"{row['p99_s']:>6.2f} {row['per_second']:>7.1f} {row['connect_p50_s']:>7.3f} "
            f"{row['reset_p50_s']:>6.3f} {row['step_p50_s']:>6.2f} {row['wall_s']:>6.1f} "
            f"{row['server_cpu_ms']:>6.2f} {row['client_cpu_ms']:>6.2f}  {row['errors']}"
        )
    print(
        f"(step: {sleep:g} s; p50/p99: a session's total time; connect, reset, step: their p50 "
        "in seconds; srv ms, cli ms: CPU milliseconds per session of the server's process and "
        "the clients'; a 3-seat session lasts its episode's three steps)"
    )


def largest(levels: Sequence[Level], target: str, p99_bound: float | None = None) -> int | None:
    """The largest N of ``target`` with >= 95% success (and a p99 within ``p99_bound`` seconds).

    OpenEnv's "max batch" without a bound; None when no N qualifies.
    """
    passing = [
        level.n
        for level in levels
        if level.target == target
        and level.success >= SUCCESS
        and (p99_bound is None or level.quantile("total", 99) <= p99_bound)
    ]
    return max(passing, default=None)


def print_summary(levels: Sequence[Level], sleep: float, seats: int) -> None:
    """Per target: its max batch, and the largest N whose p99 stays under twice the ideal."""
    ideal = seats * sleep  # a seat's session lasts its episode's steps, one after the other
    for target in dict.fromkeys(level.target for level in levels):
        best, quick = largest(levels, target), largest(levels, target, 2 * ideal)
        per_core = f" ({best / cores():g} per core)" if best else ""
        print(
            f"{target}: max batch (>= 95% success) {best or 'none'}{per_core}; "
            f"with p99 under {2 * ideal:g} s (twice the {ideal:g} s of steps): {quick or 'none'}"
        )


def raise_file_limit() -> None:
    """As many sockets as the system lets this process (and the servers it starts) open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def levels_of(start: int, cap: int, step: int) -> list[int]:
    """``start`` doubling up to ``cap``, each a multiple of ``step`` (seats per episode)."""
    if start < 1 or cap < start:
        raise ValueError(f"need 1 <= --start <= --cap, got --start {start} --cap {cap}")
    sizes, n = [], start
    while n <= cap:
        sizes.append(max(step, n // step * step))
        n *= 2
    return sizes


def settle(server: Server, limit: float = 120.0) -> None:
    """Wait (up to ``limit`` seconds) until the server is idle: the next batch starts clean.

    Idle: under 5% of a core over half a second. A batch whose clients gave up
    leaves the server working through their sessions for a while; that work
    belongs to the batch, not to the next one.
    """
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        used = server.cpu_seconds()
        time.sleep(0.5)
        if server.cpu_seconds() - used < 0.025:
            return


def sweep(
    where: Mapping[str, Server], targets: Sequence[str], sizes: Sequence[int], args: Any, seats: int
) -> list[Level]:
    """Each size for every target still at >= 95%, targets interleaved within a size."""
    levels: list[Level] = []
    live = list(targets)
    for n in sizes:
        for target in list(live):
            host = where[target]
            repeats = []
            for _ in range(args.repeats):
                cpu = host.cpu_seconds()
                level = asyncio.run(batch(target, host.url, n, seats, args.timeout))
                settle(host)  # its sessions' closing counts too
                level.server_cpu = host.cpu_seconds() - cpu
                repeats.append(level)
            worst = min(repeats, key=lambda level: level.success)
            levels.append(worst)
            row = worst.row()
            print(
                f"  {target} N={n}: {100 * row['success']:.1f}% p99 {row['p99_s']:.2f} s "
                f"{row['per_second']:.1f} req/s",
                file=sys.stderr,
                flush=True,
            )
            if worst.success < SUCCESS:
                live.remove(target)
        if not live:
            break
    return levels


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sleep", type=float, default=1.0, help="seconds each step sleeps")
    parser.add_argument("--start", type=int, default=32, help="the first N (sessions at once)")
    parser.add_argument("--cap", type=int, default=4096, help="the largest N tried")
    parser.add_argument(
        "--seats",
        type=int,
        nargs="+",
        default=[1, 3],
        help="seats per episode: 1 (this server beside OpenEnv's) and the multi-seat case",
    )
    parser.add_argument(
        "--targets",
        nargs="+",
        default=["seat", "/openenv", "openenv"],
        choices=["seat", "/openenv", "openenv"],
        help="the one-seat targets",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="this server's step threads (default --cap; 0: the server's own default)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a session may take")
    parser.add_argument("--repeats", type=int, default=1, help="batches per N; the worst is kept")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--serve", choices=["ours", "openenv"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if (
        args.sleep < 0
        or args.timeout <= 0
        or args.repeats < 1
        or not all(1 <= seats <= MAX_SEATS for seats in args.seats)
    ):
        parser.error(
            f"need --sleep >= 0, --timeout > 0, --repeats >= 1 and --seats in 1..{MAX_SEATS}, got "
            f"{args.sleep}, {args.timeout}, {args.repeats} and {args.seats}"
        )
    workers = args.cap if args.workers is None else args.workers
    if args.serve:
        serve(args.serve, args.port, args.sleep, workers, args.cap)
        return
    if not 1 <= args.start <= args.cap:
        parser.error(f"need 1 <= --start <= --cap, got --start {args.start} --cap {args.cap}")

    raise_file_limit()
    print(f"machine: {machine()}", flush=True)
    kinds = ["ours", *(["openenv"] if 1 in args.seats and "openenv" in args.targets else [])]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryFile() as log:
        try:
            with servers(kinds, log, sleep=args.sleep, workers=workers, cap=args.cap) as running:
                for seats in args.seats:
                    if seats == 1:
                        targets = list(args.targets)
                        where = {"seat": "ours", "/openenv": "ours", "openenv": "openenv"}
                        named = {target: running[where[target]] for target in targets}
                    else:
                        targets = [f"{seats} seats"]
                        named = {targets[0]: running["ours"]}
                    sizes = levels_of(args.start, args.cap, seats)
                    levels = sweep(named, targets, sizes, args, seats)
                    print(
                        f"\n{seats} seat(s) per episode; our step threads: {workers or 'default'}"
                    )
                    print_table(levels, args.sleep)
                    print_summary(levels, args.sleep, seats)
                    rows += [{**level.row(), "seats": seats} for level in levels]
        finally:
            log.seek(0)
            tail = log.read().decode(errors="replace")[-4000:]
            if tail:
                print(f"\nthe servers' log (its end):\n{tail}", file=sys.stderr)
    print(f"machine at the end: {machine()}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": machine(), "sleep": args.sleep, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
