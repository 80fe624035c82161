"""Benchmark: the sandbox service against a subprocess-per-request server, same HTTP front.

Both servers are ``llm_envs.sandbox.service``'s app (FastAPI under uvicorn,
``--workers`` processes sharing one port on 127.0.0.1); they differ only in
what runs a ``/run_code`` script:

* **service**: ``python -m llm_envs.sandbox.service``, a sandbox pool per
  process (a fork of a warm worker per run, the script confined);
* **baseline**: this file with ``--serve-baseline``: each request runs
  ``python -c CODE`` in a fresh subprocess in an empty temporary folder, with
  its stdin and a timeout, and nothing else (no confinement), as a
  SandboxFusion-style server does before its own isolation costs.

A load generator in this process (aiohttp, keep-alive connections) keeps
``C`` requests in flight for ``--seconds`` after a warm-up, for each ``C`` of
``--clients`` (1, 8, 64), and reports requests per second and the 50th and 99th
percentile latencies, side by side with the ratio. Both servers run at once
(the one not measured is idle), the two are measured in turn ``--repeat``
times, and each one's best pass (most requests per second) is reported, which
keeps the ratio meaningful on a machine shared with other work. Every answer
is checked: a wrong one stops the benchmark. The script is verl's case, a
program that reads its stdin and prints::

    a, b = map(int, input().split())
    print(a + b)

Needs the service's packages (fastapi, uvicorn) and the clients' (aiohttp,
requests: ``pip install sandbox-fusion`` brings both). Run from the repository
root::

    python bench/sandbox_service.py [--workers 2] [--seconds 5] [--repeat 3] [--clients 1 8 64]

``--other-tree PATH`` serves a third server, the service from another checkout
(a ``git worktree`` of an earlier commit), measured in the same passes in
turn with the two others, so that a change is measured under the same load;
each pass prints the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import requests

from llm_envs.sandbox.service import ScriptJob, ScriptResult, ServiceSettings, create_app

ROOT = Path(__file__).resolve().parents[1]
CODE = "a, b = map(int, input().split())\nprint(a + b)\n"
STDIN = "1234 4321\n"
EXPECTED = "5555\n"


# --- the baseline server ---------------------------------------------------------------------


def run_in_fresh_subprocess(job: ScriptJob) -> ScriptResult:
    """Run a script with ``python -c`` in a new process and an empty folder (the baseline)."""
    with tempfile.TemporaryDirectory(prefix="baseline-") as folder:
        for path, data in job.files:
            target = Path(folder, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(data))
        start = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-c", job.code],
                input=job.stdin or "",
                capture_output=True,
                text=True,
                timeout=job.timeout,
                cwd=folder,
            )
        except subprocess.TimeoutExpired as expired:
            out, err = (
                text.decode(errors="replace") if isinstance(text, bytes) else text or ""
                for text in (expired.stdout, expired.stderr)
            )
            return ScriptResult("TimeLimitExceeded", None, out, err, time.perf_counter() - start)
        elapsed = time.perf_counter() - start
    return ScriptResult("Finished", done.returncode, done.stdout, done.stderr, elapsed)


def baseline_app() -> object:
    """The baseline's app (uvicorn ``--factory``): the service's front, subprocess runs."""
    return create_app(ServiceSettings(pool_workers=1), script_runner=run_in_fresh_subprocess)


def serve_baseline(port: int, workers: int) -> None:
    import uvicorn

    uvicorn.run(
        "sandbox_service:baseline_app",
        factory=True,
        app_dir=str(Path(__file__).parent),
        host="127.0.0.1",
        port=port,
        workers=workers,
        log_level="warning",
        access_log=False,
    )


# --- the load generator ----------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One server at one concurrency."""

    requests_per_second: float
    p50_ms: float
    p99_ms: float


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def server(command: Sequence[str], port: int, tree: Path = ROOT) -> Iterator[str]:
    """Start a server command in ``tree``; yield its URL once it answers; stop it (SIGINT) after."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    process = subprocess.Popen(command, cwd=tree, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise SystemExit(f"{command} exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise SystemExit(f"{command} did not answer on {url} within 120 s")
            try:
                if requests.get(f"{url}/v1/ping", timeout=5).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
        yield url
    finally:
        process.send_signal(2)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


async def load(url: str, clients: int, seconds: float, warmup: float) -> Cell:
    # A timeout no honest run reaches, even on a loaded machine: a timeout would be a wrong answer.
    body = {"code": CODE, "language": "python", "stdin": STDIN, "run_timeout": 120}
    latencies: list[float] = []
    measuring = False
    # Idle connections close here before uvicorn closes them (5 s): where one client
    # waits for the others' slow answers, reusing one it had closed fails the request.
    connector = aiohttp.TCPConnector(limit=clients, keepalive_timeout=2)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(stop: float) -> None:
            while time.perf_counter() < stop:
                start = time.perf_counter()
                async with session.post(f"{url}/run_code", json=body) as reply:
                    answer = await reply.json()
                if answer["status"] != "Success" or answer["run_result"]["stdout"] != EXPECTED:
                    raise SystemExit(f"wrong answer from {url}: {answer}")
                if measuring:
                    latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(client(time.perf_counter() + warmup) for _ in range(clients)))
        measuring = True
        began = time.perf_counter()
        await asyncio.gather(*(client(began + seconds) for _ in range(clients)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    return Cell(len(latencies) / elapsed, 1000 * statistics.median(latencies), 1000 * p99)


def measure(name: str, url: str, clients: int, seconds: float, warmup: float) -> Cell:
    cell = asyncio.run(load(url, clients, seconds, warmup))
    print(
        f"  {name:8s} {clients:3d} clients: {cell.requests_per_second:8.1f} req/s, "
        f"p50 {cell.p50_ms:7.1f} ms, p99 {cell.p99_ms:7.1f} ms",
        flush=True,
    )
    return cell


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="server processes (both servers)")
    parser.add_argument("--pool-workers", type=int, default=None, help="the service's, per process")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured, per cell")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured, per cell")
    parser.add_argument("--repeat", type=int, default=3, help="passes; each cell's best counts")
    parser.add_argument("--other-tree", type=Path, help="also serve the service from this checkout")
    parser.add_argument("--serve-baseline", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_baseline:
        serve_baseline(args.port, args.workers)
        return

    print(f"{os.cpu_count()} CPUs; {args.workers} server processes each; script: {CODE!r}")
    ports = free_port(), free_port(), free_port()

    def service(port: int) -> list[str]:
        command = [sys.executable, "-m", "llm_envs.sandbox.service", "--port", str(port),
                   "--workers", str(args.workers), "--log-level", "warning"]  # fmt: skip
        if args.pool_workers is not None:
            command += ["--pool-workers", str(args.pool_workers)]
        return command

    baseline = [sys.executable, __file__, "--serve-baseline", "--port", str(ports[1]),
                "--workers", str(args.workers)]  # fmt: skip
    best: dict[tuple[str, int], Cell] = {}
    with contextlib.ExitStack() as stack:
        urls = {"service": stack.enter_context(server(service(ports[0]), ports[0]))}
        if args.other_tree is not None:
            other = server(service(ports[2]), ports[2], args.other_tree.resolve())
            urls["other"] = stack.enter_context(other)
        urls["baseline"] = stack.enter_context(server(baseline, ports[1]))
        for repeat in range(args.repeat):
            load_average = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"pass {repeat + 1} of {args.repeat} (load average {load_average}):", flush=True)
            # Each pass measures the servers in the other order: none always goes first.
            order = list(urls.items())[:: -1 if repeat % 2 else 1]
            for clients in args.clients:
                for name, url in order:
                    cell = measure(name, url, clients, args.seconds, args.warmup)
                    kept = best.get((name, clients))
                    if kept is None or cell.requests_per_second > kept.requests_per_second:
                        best[name, clients] = cell

    load_average = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nbest of {args.repeat} passes of {args.seconds:g} s (load average {load_average}):\n")
    names = [name for name in urls if name != "baseline"]
    print("| clients | " + " | ".join(f"{n} req/s | {n} ratio | {n} p50 / p99 (ms)" for n in names)
          + " | baseline req/s | baseline p50 / p99 (ms) |")  # fmt: skip
    print("| --- " * (2 + 3 * len(names) + 1) + "|")
    for clients in args.clients:
        b = best["baseline", clients]
        cells = [
            f"{a.requests_per_second:,.0f} | {a.requests_per_second / b.requests_per_second:.1f}x "
            f"| {a.p50_ms:.1f} / {a.p99_ms:.1f}"
            for a in (best[name, clients] for name in names)
        ]
        print(
            f"| {clients} | {' | '.join(cells)} | {b.requests_per_second:,.0f} "
            f"| {b.p50_ms:.1f} / {b.p99_ms:.1f} |"
        )


if __name__ == "__main__":
    main()
