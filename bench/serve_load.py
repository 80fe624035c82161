"""Benchmark the episode server on loopback against the same episodes played in-process.

Debates of arithmetic problems (3 agents, 2 rounds), every seat a scripted
client, at 1, 16 and 128 seats acting at once:

* ``one seat``: OpenEnv's ``GenericEnvClient`` plays ``agent_0`` over
  ``/openenv``; the server plays the reference players in the other seats.
  Each client is one seat; the baseline is :class:`llm_envs.seats.SeatView`
  with the same players.
* ``all seats``: three WebSocket clients per debate (``/episodes/{id}/seats/
  {seat}/ws``); a debate is turn-based, so N debates in flight have N seats
  acting at once (3N clients). The baseline is PettingZoo's AEC loop.

It prints episodes per second and the p99 latency of one step (the client's
``step`` call, or an action's ``accepted`` reply; in-process, the view's or
the env's ``step``), served and in-process side by side, and their ratios.
The server runs in its own process (``python -m llm_envs.serve``); on a
machine with few cores it shares them with the clients.

Each cell is the median of ``--repeats`` runs (by episodes per second): the
machine's other work makes single runs noisy.

    python bench/serve_load.py [--levels 1 16 128] [--episodes 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

import httpx
import numpy as np
from openenv.core import GenericEnvClient
from websockets.asyncio.client import connect

from llm_envs.debate.agents import scripted_debaters
from llm_envs.family import Agent
from llm_envs.registration import make_family
from llm_envs.seats import family_seat

ENV_KWARGS = {"num_agents": 3, "max_rounds": 2}
TASK_KWARGS = {"num_problems": 100, "max_digits": 2}


@dataclass
class Run:
    """Episodes played, the wall time they took, and every step's latency in seconds."""

    episodes: int
    seconds: float
    latencies: list[float]

    @property
    def per_second(self) -> float:
        """Episodes per second."""
        return self.episodes / self.seconds

    @property
    def p99_ms(self) -> float:
        """The 99th percentile of the step latencies, in milliseconds."""
        return 1e3 * float(np.percentile(self.latencies, 99))


def median(runs: list[Run]) -> Run:
    """The run of median episodes per second."""
    return sorted(runs, key=lambda run: run.per_second)[len(runs) // 2]


def episodes(count: int) -> list[tuple[int, int]]:
    """``(problem, seed)`` of each episode."""
    return [(i % 100, i) for i in range(count)]


# ---------------------------------------------------------------------- in-process


def in_process_one_seat(specs: Sequence[tuple[int, int]]) -> Run:
    family = make_family("debate", ENV_KWARGS, task="arithmetic", task_kwargs=TASK_KWARGS)
    players = family.reference_players()  # built once, as the server does
    latencies = []
    start = time.perf_counter()
    for problem, seed in specs:
        view, reset_seed, options = family_seat(
            family, "agent_0", problem=problem, seed=seed, others=players
        )
        agent = scripted_debaters(3, seed=1)["agent_0"]
        observation, info = view.reset(seed=reset_seed, options=options)
        while not view.done:
            text = agent(observation, info)
            began = time.perf_counter()
            observation, _, _, _, info = view.step(text)
            latencies.append(time.perf_counter() - began)
    return Run(len(specs), time.perf_counter() - start, latencies)


def in_process_all_seats(specs: Sequence[tuple[int, int]]) -> Run:
    family = make_family("debate", ENV_KWARGS, task="arithmetic", task_kwargs=TASK_KWARGS)
    latencies = []
    start = time.perf_counter()
    for problem, seed in specs:
        env, reset_seed, options = family.eval_episode(problem, seed)
        agents = scripted_debaters(3, seed=1)
        env.reset(seed=reset_seed, options=options)
        for agent in env.agent_iter():
            observation, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            text = agents[agent](observation, info)
            began = time.perf_counter()
            env.step(text)
            latencies.append(time.perf_counter() - began)
    return Run(len(specs), time.perf_counter() - start, latencies)


# ---------------------------------------------------------------------- served


async def one_seat_client(url: str, queue: list[tuple[int, int]], latencies: list[float]) -> None:
    async with GenericEnvClient(base_url=f"{url}/openenv") as env:
        while queue:
            problem, seed = queue.pop()
            agent = scripted_debaters(3, seed=1)["agent_0"]
            result = await env.reset(seat="agent_0", problem=problem, seed=seed)
            while not result.done:
                observation = result.observation
                text = agent({"messages": observation["messages"]}, observation["info"])
                began = time.perf_counter()
                result = await env.step({"text": text})
                latencies.append(time.perf_counter() - began)


async def seat_client(
    url: str, episode: str, seat: str, agent: Agent, latencies: list[float]
) -> None:
    ws = f"{url.replace('http://', 'ws://')}/episodes/{episode}/seats/{seat}/ws"
    async with connect(ws, max_queue=None) as socket_:
        began = 0.0
        async for raw in socket_:
            message = json.loads(raw)
            if message["type"] == "turn":
                text = agent(message["observation"], message["info"])
                began = time.perf_counter()
                await socket_.send(json.dumps({"type": "act", "text": text}))
            elif message["type"] == "accepted":
                latencies.append(time.perf_counter() - began)
            elif message["type"] in ("end", "abandoned", "error"):
                assert message["type"] == "end", message
                return


async def debate_runner(
    url: str, http: httpx.AsyncClient, queue: list[tuple[int, int]], latencies: list[float]
) -> None:
    while queue:
        problem, seed = queue.pop()
        created = await http.post("/episodes", json={"problem": problem, "seed": seed})
        episode = created.json()["id"]
        agents = scripted_debaters(3, seed=1)
        await asyncio.gather(
            *(seat_client(url, episode, seat, agents[seat], latencies) for seat in agents)
        )


async def served(url: str, view: str, concurrency: int, specs: Sequence[tuple[int, int]]) -> Run:
    queue, latencies = list(reversed(specs)), list[float]()
    start = time.perf_counter()
    if view == "one seat":
        await asyncio.gather(*(one_seat_client(url, queue, latencies) for _ in range(concurrency)))
    else:
        # Connections idle for 1 s are dropped before uvicorn's 5 s keep-alive closes them
        # under a request (a ReadError).
        limits = httpx.Limits(max_connections=concurrency, keepalive_expiry=1.0)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
            await asyncio.gather(
                *(debate_runner(url, http, queue, latencies) for _ in range(concurrency))
            )
    return Run(len(specs), time.perf_counter() - start, latencies)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(port: int, log: IO[bytes]) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "llm_envs.serve",
        "--env=debate",
        f"--env-kwargs={json.dumps(ENV_KWARGS)}",
        "--task=arithmetic",
        f"--task-kwargs={json.dumps(TASK_KWARGS)}",
        f"--port={port}",
        "--max-sessions=512",
        "--log-level=warning",
    ]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.1)
        if server.poll() is not None:
            break
    server.kill()
    raise RuntimeError("the server did not start; its log is above")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--episodes", type=int, default=64, help="at least this many per level")
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell; the median is shown")
    args = parser.parse_args(argv)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        server = start_server(port, log)
        try:
            asyncio.run(served(url, "one seat", 1, episodes(4)))  # warm-up: families, imports
            asyncio.run(served(url, "all seats", 1, episodes(4)))
            rows = []
            for view in ("one seat", "all seats"):
                baseline = in_process_one_seat if view == "one seat" else in_process_all_seats
                for level in args.levels:
                    specs = episodes(max(args.episodes, 2 * level))
                    remote = median(
                        [asyncio.run(served(url, view, level, specs)) for _ in range(args.repeats)]
                    )
                    local = median([baseline(specs) for _ in range(args.repeats)])
                    rows.append((view, level, remote, local))
        finally:
            server.terminate()
            server.wait(timeout=30)
            log.seek(0)
            sys.stderr.write(log.read().decode())

    print(
        "debate (3 agents, 2 rounds), scripted clients on loopback; in-process: the same episodes"
    )
    print(
        f"{'view':<10} {'seats':>5} {'clients':>7} {'episodes':>8} | {'served ep/s':>11} "
        f"{'p99 ms':>7} | {'in-proc ep/s':>12} {'p99 ms':>7} | {'ep/s ratio':>10} {'p99 ratio':>9}"
    )
    for view, level, remote, local in rows:
        clients = level if view == "one seat" else 3 * level
        print(
            f"{view:<10} {level:>5} {clients:>7} {remote.episodes:>8} | "
            f"{remote.per_second:>11.1f} {remote.p99_ms:>7.2f} | "
            f"{local.per_second:>12.1f} {local.p99_ms:>7.3f} | "
            f"{remote.per_second / local.per_second:>10.3f} {remote.p99_ms / local.p99_ms:>9.0f}"
        )


if __name__ == "__main__":
    main()
